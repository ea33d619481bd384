package io.slipstream.spark;

/** {@link FabricReadCounters}' JMX interface (public: the platform MBean server introspects it). */
public interface FabricReadCountersMXBean {
    /** Bytes of remote blocks this executor's reduce tasks received over the fabric. */
    long getRemoteBytes();

    /** Remote blocks this executor's reduce tasks received over the fabric. */
    long getRemoteBlocks();

    /** The most registered (off-heap) memory this executor's fabric node has had mapped at once. */
    long getPoolBytesMappedPeak();

    /** The cap on that memory ({@code spark.slipstream.buffer.cap}). */
    long getPoolCapBytes();
}
