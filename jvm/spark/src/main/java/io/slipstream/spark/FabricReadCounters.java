package io.slipstream.spark;

import java.lang.management.ManagementFactory;
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
 * show as a difference). Published as the platform MBean {@value #OBJECT_NAME} (attributes
 * {@code RemoteBytes}, {@code RemoteBlocks}), read in the executor's JVM (e.g. by a probe task),
 * and logged once when the executor stops.
 */
final class FabricReadCounters implements FabricReadCountersMXBean {
    private static final Logger LOG = LoggerFactory.getLogger(FabricReadCounters.class);
    static final String OBJECT_NAME = "io.slipstream:type=SparkShuffleFabricReads";

    private final LongAdder remoteBytes = new LongAdder();
    private final LongAdder remoteBlocks = new LongAdder();
    private ObjectName registeredAs;

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
        LOG.info("slipstream: executor {} read {} remote blocks, {} bytes over the fabric", executorId, getRemoteBlocks(),
                getRemoteBytes());
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
