package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.tiers.BurstBuffer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.SlipstreamTieredFsDataset;

/**
 * {@code ohb hdfs tiers}' parallel file system configurations: {@code hhh-l} (one replica of each block on
 * the DataNodes' ARCHIVE directory, which stands for a parallel file system; here a directory on the disk)
 * and {@code hhh-l-bb} (the same behind a burst buffer: a real {@code slipstream-cache} in hybrid mode,
 * started here on a free loopback port and stopped with the run). The burst buffer's counters prove the
 * path: every parallel file system replica went through the cache, none failed, none was lost.
 */
final class TiersPfs implements AutoCloseable {
    private final Process cache;
    final String servers;

    private TiersPfs(Process cache, String servers) {
        this.cache = cache;
        this.servers = servers;
    }

    static boolean usesPfs(String config) {
        return config.equals("hhh-l") || config.equals("hhh-l-bb");
    }

    /**
     * Starts the burst buffer for {@code hhh-l-bb}: {@code memoryMb} of memory and an SSD log of as much
     * under {@code dir}; fails when the binary is missing or the server does not come up.
     */
    static TiersPfs startCache(String binary, java.nio.file.Path dir, long memoryMb) throws IOException {
        if (binary.isEmpty() || !Files.isExecutable(java.nio.file.Path.of(binary))) {
            throw new IOException("hhh-l-bb needs slipstream-cache (--cache-binary), not found at '" + binary
                    + "': run make native");
        }
        java.nio.file.Path ssd = Files.createDirectories(dir);
        Process process = new ProcessBuilder(List.of(binary, "-l", "127.0.0.1", "-p", "0", "-m", String.valueOf(memoryMb),
                "--no-fabric", "--ssd-path", ssd.toString(), "--ssd-size", memoryMb + "m"))
                .redirectError(ProcessBuilder.Redirect.appendTo(ssd.resolve("stderr.log").toFile())).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        // "slipstream-cache listening tcp=127.0.0.1:PORT fabric=...": the port it took.
        java.util.regex.Matcher tcp = java.util.regex.Pattern.compile("tcp=(\\S+)").matcher(line == null ? "" : line);
        if (!tcp.find()) {
            process.destroyForcibly();
            throw new IOException("slipstream-cache did not start: " + line + "; its log: "
                    + Files.readString(ssd.resolve("stderr.log")));
        }
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // Only kept from filling the pipe.
                }
            } catch (IOException ignored) {
                // The process ended.
            }
        }, "slipstream-cache output");
        drain.setDaemon(true);
        drain.start();
        TiersPfs pfs = new TiersPfs(process, tcp.group(1));
        // A JVM stopped by a signal still takes the cache with it (a SIGKILL does not: ohb's run directory
        // clean-up and the kernel reap it then).
        Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly));
        return pfs;
    }

    /** The burst buffer's settings for the NameNode and DataNodes. */
    void configure(Configuration conf, long blockBytes) {
        conf.set("slipstream.hdfs.tiers.bb.servers", servers);
        // Every replica being written reserves a block: room for the writers' pipelines and the flushes behind.
        conf.setLong("slipstream.hdfs.tiers.bb.maxPending.bytes", Math.max(2L << 30, 16 * blockBytes));
    }

    /** What hhh-l's NameNode needs: readers sent to local replicas before the parallel file system's. */
    static void configure(Configuration conf) {
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
    }

    /** Replicas held in the burst buffer not yet flushed, over the DataNodes. */
    static long pending(MiniDFSCluster cluster) {
        long pending = 0;
        for (DataNode dn : cluster.getDataNodes()) {
            pending += burstBuffer(dn).pendingReplicas();
        }
        return pending;
    }

    private static BurstBuffer burstBuffer(DataNode dn) {
        BurstBuffer bb = ((SlipstreamTieredFsDataset) dn.getFSDataset()).burstBuffer();
        if (bb == null) {
            throw new IllegalStateException("DataNode " + dn.getDisplayName() + " runs no burst buffer");
        }
        return bb;
    }

    /**
     * The burst buffer's counters into the result; null, or why the run fails: a parallel file system replica
     * that did not go through the burst buffer, a failed store, a lost copy.
     */
    static String checkBurstBuffer(MiniDFSCluster cluster, long archiveReplicas, Map<String, Object> result) {
        long buffered = 0;
        long through = 0;
        long flushed = 0;
        long flushedBytes = 0;
        long lost = 0;
        long failures = 0;
        long reads = 0;
        for (DataNode dn : cluster.getDataNodes()) {
            BurstBuffer bb = burstBuffer(dn);
            buffered += bb.replicasBuffered();
            through += bb.replicasWrittenThrough();
            flushed += bb.replicasFlushed();
            flushedBytes += bb.bytesFlushed();
            lost += bb.replicasLost();
            failures += bb.writeFailures();
            reads += bb.readsFromBuffer();
        }
        result.put("bb_replicas_buffered", buffered);
        result.put("bb_replicas_written_through", through);
        result.put("bb_replicas_flushed", flushed);
        result.put("bb_bytes_flushed", flushedBytes);
        result.put("bb_replicas_lost", lost);
        result.put("bb_write_failures", failures);
        result.put("bb_reads_from_buffer", reads);
        if (buffered < archiveReplicas || through > 0 || failures > 0 || lost > 0) {
            return "the burst buffer did not carry every parallel file system replica: " + archiveReplicas
                    + " ARCHIVE replicas, " + buffered + " buffered, " + through + " written straight through, "
                    + failures + " failed stores, " + lost + " lost";
        }
        if (flushed != buffered) {
            return buffered + " replicas buffered but " + flushed + " flushed";
        }
        return null;
    }

    @Override
    public void close() throws InterruptedException {
        cache.destroyForcibly();
        cache.waitFor(10, TimeUnit.SECONDS);
    }
}
