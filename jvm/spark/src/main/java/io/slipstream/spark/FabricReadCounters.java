package io.slipstream.spark;

import java.lang.management.ManagementFactory;
import io.slipstream.fabric.FabricNode;
import java.util.concurrent.atomic.LongAdder;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What this executor's reduce tasks received over the fabric (remote blocks and their bytes, as
 * handed to deserialization), so that a benchmark can check that the fabric carried what Spark's
 * remote-bytes metric says was read remotely (a silent fallback to Spark's transfer service would
 * show as a difference), and the off-heap memory of the executor's fabric node at its worst
 * (so that a benchmark can judge the executor's memory as heap plus this, not as a resident set
 * that depends on how much heap the garbage collector chose to touch). Published as the platform
 * MBean {@value #OBJECT_NAME} (attributes {@code RemoteBytes}, {@code RemoteBlocks},
 * {@code PoolBytesMappedPeak}, {@code PoolCapBytes}), read in the executor's JVM (e.g. by a probe
 * task), and logged once when the executor stops.
 */
final class FabricReadCounters implements FabricReadCountersMXBean {
    private static final Logger LOG = LoggerFactory.getLogger(FabricReadCounters.class);
    static final String OBJECT_NAME = "io.slipstream:type=SparkShuffleFabricReads";

    private final LongAdder remoteBytes = new LongAdder();
    private final LongAdder remoteBlocks = new LongAdder();
    private final FabricNode node;
    private ObjectName registeredAs;

    FabricReadCounters(FabricNode node) {
        this.node = node;
    }

    void add(long bytes) {
        remoteBytes.add(bytes);
        remoteBlocks.increment();
    }

    @Override
    public long getRemoteBytes() {
        return remoteBytes.sum();
    }

    @Override
    public long getRemoteBlocks() {
        return remoteBlocks.sum();
    }

    @Override
    public long getPoolBytesMappedPeak() {
        return node.stats().poolBytesMappedPeak();
    }

    @Override
    public long getPoolCapBytes() {
        return node.stats().poolCapBytes();
    }

    /** Publishes the counters (replacing an earlier runtime's in this JVM); a failure only loses the MBean. */
    void register() {
        try {
            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            ObjectName name = new ObjectName(OBJECT_NAME);
            if (server.isRegistered(name)) {
                server.unregisterMBean(name);
            }
            server.registerMBean(this, name);
            registeredAs = name;
        } catch (JMException | RuntimeException e) {
            LOG.warn("slipstream: fabric read counters not published over JMX: {}", e.toString());
        }
    }

    void unregister(String executorId) {
        LOG.info("slipstream: executor {} read {} remote blocks, {} bytes over the fabric; fabric memory peak {} of cap {} bytes",
                executorId, getRemoteBlocks(), getRemoteBytes(), getPoolBytesMappedPeak(), getPoolCapBytes());
        if (registeredAs == null) {
            return;
        }
        try {
            ManagementFactory.getPlatformMBeanServer().unregisterMBean(registeredAs);
        } catch (JMException | RuntimeException e) {
            // Already gone: nothing to undo.
        }
    }
}
