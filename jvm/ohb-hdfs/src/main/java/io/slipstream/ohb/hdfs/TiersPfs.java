package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.tiers.BurstBuffer;
import java.io.IOException;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.SlipstreamTieredFsDataset;

/**
 * {@code ohb hdfs tiers}' parallel file system configurations: {@code hhh-l} (one replica of each block on
 * the DataNodes' ARCHIVE directory, which stands for a parallel file system; here a directory on the disk)
 * and {@code hhh-l-bb} (the same behind a burst buffer: a real {@code slipstream-cache} in hybrid mode, which
 * {@code ohb} starts before this JVM and stops after it, so that it outlives neither a failed nor a killed
 * run). The burst buffer's counters prove the path: every parallel file system replica went through the
 * cache, none failed, none was lost.
 */
final class TiersPfs {
    private TiersPfs() {}

    static boolean usesPfs(String config) {
        return config.equals("hhh-l") || burstBuffered(config);
    }

    /** hhh-l-bb, whose burst buffer is reached over TCP, and hhh-l-bb-fabric, the same over the fabric. */
    static boolean burstBuffered(String config) {
        return config.equals("hhh-l-bb") || config.equals("hhh-l-bb-fabric");
    }

    /** The Triple-H mode of a configuration: its name, but hhh-l-bb for the fabric's variant. */
    static String mode(String config) {
        return config.equals("hhh-l-bb-fabric") ? "hhh-l-bb" : config;
    }

    /** What hhh-l's NameNode needs: readers sent to local replicas before the parallel file system's. */
    static void configure(Configuration conf) {
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
    }

    /**
     * The burst buffer's settings for the DataNodes: {@code ohb}'s cache, and a pending limit that {@code ohb}
     * sized for the whole workload (a replica past it would be written straight through, and the run would
     * measure the overflow, not the burst buffer). {@code bb.chunk.bytes} stays at its default (512k), which
     * fits the cache's default item size (1m) and is what {@code ohb} sizes the cache's memory for.
     */
    static void configureBurstBuffer(Configuration conf, String config, String servers, long maxPendingBytes) {
        if (servers.isEmpty() || maxPendingBytes <= 0) {
            throw new IllegalArgumentException("hhh-l-bb needs --bb-servers and --bb-max-pending-bytes (ohb hdfs tiers "
                    + "starts slipstream-cache and passes them)");
        }
        conf.set("slipstream.hdfs.tiers.bb.servers", servers);
        conf.setLong("slipstream.hdfs.tiers.bb.maxPending.bytes", maxPendingBytes);
        // hhh-l-bb-fabric: --bb-servers are the cache's fabric address, which ohb started it with.
        conf.set("slipstream.hdfs.tiers.bb.transport", config.equals("hhh-l-bb-fabric") ? "fabric" : "tcp");
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

    /** Blocks of every file under {@code dir} (the warm-up files too: their replicas went through the burst buffer). */
    static long blocksWritten(DistributedFileSystem fs, Path dir) throws IOException {
        long blocks = 0;
        for (FileStatus file : fs.listStatus(dir)) {
            blocks += fs.getClient().getLocatedBlocks(file.getPath().toUri().getPath(), 0).locatedBlockCount();
        }
        return blocks;
    }

    /**
     * After every replica was flushed: the burst buffer's counters into the result; null, or why the run
     * fails: fewer replicas buffered than blocks written (each block has exactly one parallel file system
     * replica, checked by the placement check), one written straight through, a failed store, a lost copy,
     * one not flushed.
     */
    static String checkBurstBuffer(MiniDFSCluster cluster, long blocksWritten, Map<String, Object> result) {
        long buffered = 0;
        long through = 0;
        long flushed = 0;
        long flushedBytes = 0;
        long lost = 0;
        long failures = 0;
        long reads = 0;
        long pending = 0;
        for (DataNode dn : cluster.getDataNodes()) {
            BurstBuffer bb = burstBuffer(dn);
            buffered += bb.replicasBuffered();
            through += bb.replicasWrittenThrough();
            flushed += bb.replicasFlushed();
            flushedBytes += bb.bytesFlushed();
            lost += bb.replicasLost();
            failures += bb.writeFailures();
            reads += bb.readsFromBuffer();
            pending += bb.pendingReplicas();
        }
        result.put("bb_blocks_written", blocksWritten);
        result.put("bb_replicas_buffered", buffered);
        result.put("bb_replicas_written_through", through);
        result.put("bb_replicas_flushed", flushed);
        result.put("bb_bytes_flushed", flushedBytes);
        result.put("bb_replicas_lost", lost);
        result.put("bb_write_failures", failures);
        result.put("bb_reads_from_buffer", reads);
        if (buffered < blocksWritten || through > 0 || failures > 0 || lost > 0) {
            return "the burst buffer did not carry every parallel file system replica: " + blocksWritten
                    + " blocks written, " + buffered + " replicas buffered, " + through + " written straight through, "
                    + failures + " failed stores, " + lost + " lost";
        }
        if (flushed != buffered || pending > 0) {
            return buffered + " replicas buffered but " + flushed + " flushed, " + pending + " pending";
        }
        return null;
    }
}
