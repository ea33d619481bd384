package io.slipstream.hdfs;

import java.util.concurrent.atomic.AtomicLong;

/**
 * What this process's HDFS clients did over the fabric, so tests and benchmarks can prove which
 * path carried a read or a write (HDFS's own statistics count an accessor's bytes as remote reads).
 */
public final class SlipstreamHdfsCounters {
    static final AtomicLong BYTES_READ = new AtomicLong();
    static final AtomicLong REQUESTS = new AtomicLong();
    static final AtomicLong ACCESSORS = new AtomicLong();
    static final AtomicLong NAMENODE_LOOKUPS = new AtomicLong();
    static final AtomicLong DECLINED = new AtomicLong();
    static final AtomicLong CORRUPT_REPLICAS = new AtomicLong();
    static final AtomicLong FAILOVERS = new AtomicLong();
    static final AtomicLong READ_AHEADS_DECLINED = new AtomicLong();
    static final AtomicLong BYTES_WRITTEN = new AtomicLong();
    static final AtomicLong BLOCKS_WRITTEN = new AtomicLong();
    static final AtomicLong WRITES_DECLINED = new AtomicLong();
    static final AtomicLong PIPELINE_RECOVERIES = new AtomicLong();
    static final AtomicLong PIPELINE_REPLACEMENTS = new AtomicLong();
    static final AtomicLong PIPELINE_REPLACEMENTS_MISSED = new AtomicLong();
    static final AtomicLong COMPLETE_RETRIES = new AtomicLong();
    static final AtomicLong ADD_BLOCK_RETRIES = new AtomicLong();

    private SlipstreamHdfsCounters() {
    }

    /** Block bytes handed to readers from fabric responses (verified when checksums are on). */
    public static long bytesRead() {
        return BYTES_READ.get();
    }

    /** Block read requests sent over the fabric. */
    public static long requests() {
        return REQUESTS.get();
    }

    /**
     * {@code getBlockLocations} calls the replica locator made to find a block's DataNodes; none for
     * files opened through {@link SlipstreamDistributedFileSystem}, whose opens hand over what HDFS located.
     */
    public static long nameNodeLookups() {
        return NAMENODE_LOOKUPS.get();
    }

    /** Replica accessors built (blocks opened over the fabric). */
    public static long accessors() {
        return ACCESSORS.get();
    }

    /** Blocks left to HDFS's own readers (no DataNode with a fabric, the block under construction, fallback=auto). */
    public static long declined() {
        return DECLINED.get();
    }

    /** Replicas whose data did not match their checksums (each reported to the NameNode). */
    public static long corruptReplicas() {
        return CORRUPT_REPLICAS.get();
    }

    /** Reads continued from another replica after one failed (DataNode gone, refused, corrupt). */
    public static long failovers() {
        return FAILOVERS.get();
    }

    /** Block bytes sent to pipelines over the fabric (a partial chunk sent again after an hflush counts once). */
    /** Read-ahead requests not made because the process's read-ahead budget (half of {@code buffer.cap}) was taken. */
    public static long readAheadsDeclined() {
        return READ_AHEADS_DECLINED.get();
    }

    public static long bytesWritten() {
        return BYTES_WRITTEN.get();
    }

    /** Blocks written over the fabric and finalized by every DataNode of their pipeline. */
    public static long blocksWritten() {
        return BLOCKS_WRITTEN.get();
    }

    /** Files {@code SlipstreamDistributedFileSystem} left to HDFS's own stream (fallback=auto: no fabric in the client or on the DataNodes). */
    public static long writesDeclined() {
        return WRITES_DECLINED.get();
    }

    /** Pipelines recovered after a DataNode failed mid-block (the block went on with the others). */
    public static long pipelineRecoveries() {
        return PIPELINE_RECOVERIES.get();
    }

    /** DataNodes added to a recovered pipeline in place of a failed one (replace-datanode-on-failure). */
    public static long pipelineReplacements() {
        return PIPELINE_REPLACEMENTS.get();
    }

    /** Recoveries whose policy asked for a replacement that could not be had (best-effort or min-replication went on). */
    public static long pipelineReplacementsMissed() {
        return PIPELINE_REPLACEMENTS_MISSED.get();
    }

    /** {@code complete} calls the NameNode answered "not yet" (it waits for the last block's replicas to be reported). */
    public static long completeRetries() {
        return COMPLETE_RETRIES.get();
    }

    /** {@code addBlock} calls the NameNode answered "not replicated yet" (the previous block's replicas not reported yet). */
    public static long addBlockRetries() {
        return ADD_BLOCK_RETRIES.get();
    }

    /**
     * Read-response bytes (block data and checksums) this process's DataNodes served over the fabric;
     * 0 when none of them serves over it (read before the DataNodes stop: the count goes with them).
     */
    public static long dataNodeBytesServed() {
        DataNodeFabric fabric = DataNodeFabric.current();
        return fabric == null ? 0 : fabric.bytesServed.get();
    }

    /**
     * Block bytes this process's DataNodes received over the fabric, every replica of a pipeline
     * counted (replication 3: three times the client's bytes); 0 when none of them serves over it.
     */
    public static long dataNodeBytesReceived() {
        DataNodeFabric fabric = DataNodeFabric.current();
        return fabric == null ? 0 : fabric.bytesReceived();
    }

    /** One line for logs and benchmark output. */
    public static String summary() {
        return "fabricBytesRead=" + bytesRead() + " fabricRequests=" + requests() +  " accessors=" + accessors() + " nameNodeLookups=" + nameNodeLookups() + " declined=" + declined()
                + " corruptReplicas=" + corruptReplicas() + " failovers=" + failovers() + " readAheadsDeclined=" + readAheadsDeclined() + " fabricBytesWritten=" + bytesWritten()
                + " blocksWritten=" + blocksWritten() + " writesDeclined=" + writesDeclined() + " pipelineRecoveries=" + pipelineRecoveries()
                + " completeRetries=" + completeRetries() + " addBlockRetries=" + addBlockRetries();
    }
}
