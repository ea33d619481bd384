package io.slipstream.ohb.mapreduce;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.examples.terasort.TeraGen;
import org.apache.hadoop.examples.terasort.TeraSort;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Cluster;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.MRJobConfig;
import org.apache.hadoop.util.Tool;
import org.apache.hadoop.util.ToolRunner;

/**
 * {@code ohb mapreduce terasort}: Hadoop's own TeraGen and TeraSort, as Hadoop's and OHB's TeraSort
 * benchmark runs them. TeraGen writes the input once ({@code maps} files of {@code records} records
 * of 100 bytes: a 10-byte key and a 90-byte value); each configuration sorts it with TeraSort
 * (its sampled partition file travels to the maps through the distributed cache) and {@code reduces}
 * reducers, and its output is read back as TeraValidate checks it: every record in key order, within
 * each part and from one part to the next (TeraSort's total order), and the sum of the CRC-32 of every
 * record (TeraValidate's checksum) equal to the input's, with as many records: none lost or doubled.
 *
 * <p>The files are in a mini HDFS beside the YARN cluster (see MapReduceBench's {@code dfs} for why).
 * Its DataNode logs "Sending packets timed out" and, at shutdown, "DataXceiver error processing
 * READ_BLOCK ... ClosedChannelException": TeraSort's partition sampler (TeraInputFormat's sampler
 * threads, in this JVM) reads the first records of each split and never closes its record readers, so
 * the DataNode keeps sending until its write timeout (480 s) or the shutdown. Hadoop's, and harmless.
 */
final class TeraSortJob {
    /** TeraGen's record: {@code TeraInputFormat.KEY_LENGTH} + {@code VALUE_LENGTH} (package-private there). */
    static final int KEY_BYTES = 10;
    static final int VALUE_BYTES = 90;
    static final int RECORD_BYTES = KEY_BYTES + VALUE_BYTES;
    /** The name TeraSort gives its job (its run() sets it). */
    private static final String JOB_NAME = "TeraSort";

    private TeraSortJob() {}

    /**
     * Writes the input with TeraGen: {@code maps} files of {@code records} records each. Returns
     * TeraGen's own checksum counter (the sum of its records' CRC-32, the low 64 bits), for the bench
     * to hold {@link #summarize}'s reading of the files to.
     */
    static long generate(Configuration base, Path input, int maps, long records) throws Exception {
        Configuration conf = new Configuration(base);
        // TeraGen divides its rows among mapreduce.job.maps maps (one file each).
        conf.setInt(MRJobConfig.NUM_MAPS, maps);
        FileSystem.get(conf).delete(input, true);
        Job job = runAndFind(conf, "TeraGen", new TeraGen(), new String[] {Long.toString(records * maps), input.toString()});
        if (job == null) {
            throw new IllegalStateException("TeraGen failed");
        }
        try {
            return job.getCounters().findCounter(TeraGen.Counters.CHECKSUM).getValue();
        } finally {
            job.close();
        }
    }

    /** Runs TeraSort from {@code input} to {@code output} with {@code reduces} reducers; the finished job, or null when it failed. */
    static Job sort(Configuration base, Path input, Path output, int reduces) throws Exception {
        Configuration conf = new Configuration(base);
        conf.setInt(MRJobConfig.NUM_REDUCES, reduces);
        FileSystem.get(conf).delete(output, true);
        return runAndFind(conf, JOB_NAME, new TeraSort(), new String[] {input.toString(), output.toString()});
    }

    /**
     * Runs one of Hadoop's tools that submits one job named {@code name} and keeps its Job to itself
     * (TeraGen's and TeraSort's run()); the job is found afterwards on the cluster: the one job of that
     * name that was not there before (the bench runs one at a time). Null when the tool failed. The
     * job keeps the Cluster it was found through open: its counters are read through it (closed, they
     * threw a NullPointerException from YARNRunner.getJobCounters), as the Job of Sort and of the
     * generator keeps its own.
     */
    private static Job runAndFind(Configuration conf, String name, Tool tool, String[] args) throws Exception {
        Set<JobID> before = new HashSet<>();
        Cluster cluster = new Cluster(conf);
        boolean handedOver = false;
        try {
            for (JobStatus status : cluster.getAllJobStatuses()) {
                before.add(status.getJobID());
            }
            if (ToolRunner.run(conf, tool, args) != 0) {
                return null;
            }
            Job found = null;
            for (JobStatus job : cluster.getAllJobStatuses()) {
                if (name.equals(job.getJobName()) && !before.contains(job.getJobID())) {
                    if (found != null) {
                        throw new IllegalStateException("two new " + name + " jobs: " + found.getJobID() + " and " + job.getJobID());
                    }
                    found = cluster.getJob(job.getJobID());
                }
            }
            if (found == null) {
                throw new IllegalStateException(name + " succeeded but its job is not on the cluster");
            }
            handedOver = true;
            return found;
        } finally {
            if (!handedOver) {
                cluster.close();
            }
        }
    }

    /** What a directory of TeraGen's or TeraSort's files holds: records, and TeraValidate's checksum. */
    record Summary(long records, long checksum) {}

    /**
     * Reads every part file of {@code dir} in name (partition) order: each must be whole 100-byte
     * records; the checksum is the sum of every record's CRC-32, as TeraGen's counter and TeraValidate
     * compute it (a long holds it for up to 2^31 records). With {@code ordered}, every key (the
     * record's first 10 bytes, compared as unsigned bytes as Text compares) must be at least the one
     * before it, across parts too.
     *
     * @throws IllegalStateException a part of partial records, or a key out of order
     */
    static Summary summarize(Configuration conf, Path dir, boolean ordered) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        FileStatus[] parts = fs.listStatus(dir, p -> p.getName().startsWith("part-"));
        Arrays.sort(parts);
        CRC32 crc = new CRC32();
        byte[] record = new byte[RECORD_BYTES];
        byte[] previous = new byte[KEY_BYTES];
        boolean first = true;
        long records = 0;
        long sum = 0;
        for (FileStatus part : parts) {
            if (part.getLen() % RECORD_BYTES != 0) {
                throw new IllegalStateException(part.getPath() + " is not whole records: " + part.getLen() + " bytes");
            }
            try (DataInputStream in = new DataInputStream(new BufferedInputStream(fs.open(part.getPath()), 1 << 20))) {
                for (long left = part.getLen() / RECORD_BYTES; left > 0; left--) {
                    try {
                        in.readFully(record);
                    } catch (EOFException e) {
                        throw new IllegalStateException(part.getPath() + " ended before its length", e);
                    }
                    if (ordered) {
                        if (!first && Arrays.compareUnsigned(previous, 0, KEY_BYTES, record, 0, KEY_BYTES) > 0) {
                            throw new IllegalStateException(part.getPath() + " is out of order at record " + records
                                    + " (TeraSort's output counted across parts)");
                        }
                        System.arraycopy(record, 0, previous, 0, KEY_BYTES);
                        first = false;
                    }
                    crc.reset();
                    crc.update(record);
                    sum += crc.getValue();
                    records++;
                }
            }
        }
        return new Summary(records, sum);
    }
}
