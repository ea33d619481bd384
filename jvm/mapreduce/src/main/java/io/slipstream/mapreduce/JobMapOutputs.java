package io.slipstream.mapreduce;

import io.slipstream.shuffle.MapOutputBlock;
import io.slipstream.shuffle.MapOutputSource;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.mapred.IndexRecord;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.SpillRecord;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.server.api.AuxiliaryLocalPathHandler;

/**
 * One job's map outputs on one NodeManager, where Hadoop's ShuffleHandler finds them:
 * {@code usercache/<user>/appcache/<application>/output/<map attempt>/file.out} and its index,
 * through the NodeManager's local directories. Index records are read with their CRC checked and
 * kept in a small bounded cache.
 */
final class JobMapOutputs implements MapOutputSource {
    /** Index records kept per job (24 bytes per reduce each). */
    static final int INDEX_CACHE_ENTRIES_MAX = 1024;

    private final AuxiliaryLocalPathHandler paths;
    private final JobConf conf;
    private final JobID job;
    private final String outputDir;
    private final Map<Long, SpillRecord> indexes = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, SpillRecord> eldest) {
            return size() > INDEX_CACHE_ENTRIES_MAX;
        }
    };

    JobMapOutputs(AuxiliaryLocalPathHandler paths, JobConf conf, JobID job, String user) {
        this.paths = paths;
        this.conf = conf;
        this.job = job;
        ApplicationId application = ApplicationId.newInstance(Long.parseLong(job.getJtIdentifier()), job.getId());
        this.outputDir = "usercache/" + user + "/appcache/" + application + "/output/";
    }

    @Override
    public Segment locate(MapOutputBlock block) throws IOException {
        TaskAttemptID map = MapBlocks.mapAttempt(job, block.mapId());
        try {
            return locate(block, map);
        } catch (IOException e) {
            // The reducer blames the map its failure names (Hadoop then re-runs that map).
            throw new IOException(map + ": map output lost or unreadable (" + e.getMessage() + ")", e);
        }
    }

    private Segment locate(MapOutputBlock block, TaskAttemptID map) throws IOException {
        SpillRecord index = index(block.mapId(), map);
        if (block.partition() >= index.size()) {
            throw new IOException(map + " has " + index.size() + " partitions, not " + (block.partition() + 1));
        }
        String base = outputDir + map + "/file.out";
        switch (block.shuffleId()) {
            case MapBlocks.INDEX:
                return new Segment(local(base + ".index"), (long) block.partition() * MapBlocks.INDEX_RECORD_BYTES,
                        MapBlocks.INDEX_RECORD_BYTES);
            case MapBlocks.DATA:
                IndexRecord record = index.getIndex(block.partition());
                return new Segment(local(base), record.startOffset, record.partLength);
            default:
                throw new IOException("unknown block kind " + block.shuffleId());
        }
    }

    /** Not cached on this side (HTTP and fabric read the same files; the OS caches them). */
    @Override
    public MapOutputFile mapOutput(int shuffleId, long mapId) {
        return null;
    }

    private SpillRecord index(long mapId, TaskAttemptID map) throws IOException {
        synchronized (indexes) {
            SpillRecord known = indexes.get(mapId);
            if (known != null) {
                return known;
            }
        }
        SpillRecord read = new SpillRecord(new org.apache.hadoop.fs.Path(local(outputDir + map + "/file.out.index").toString()), conf);
        synchronized (indexes) {
            indexes.put(mapId, read);
        }
        return read;
    }

    private Path local(String relative) throws IOException {
        return Path.of(paths.getLocalPathForRead(relative).toUri().getPath());
    }
}
