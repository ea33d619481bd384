package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricUnavailableException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side's one fabric node per process (started by the first block opened over the
 * fabric, with that client's settings, and kept for the process's life like HDFS's socket cache),
 * and which DataNodes offer a fabric: each is probed once; a DataNode that answers is remembered
 * until a read from it fails, one that does not is left to HDFS's readers for {@link #NO_FABRIC_NANOS}.
 */
final class ClientFabric {
    private static final Logger LOG = LoggerFactory.getLogger(ClientFabric.class);
    static final long NO_FABRIC_NANOS = 10_000_000_000L;
    static final int DATANODES_MAX = 4096;

    private static final Object LOCK = new Object();
    private static ClientFabric shared;
    private static FabricUnavailableException unavailable;

    final FabricNode node;
    /**
     * Response bytes the process's readers may have requested ahead at once (half of {@code buffer.cap}): a read-ahead
     * beyond is not asked, so that read-ahead never takes the registered memory that demand reads need.
     */
    private final AtomicLong aheadBytesFree;
        /** DataNode ({@code ip:xferPort@fabricPort}) -> nanoTime until which it counts as offering no fabric; 0: it offers one. */
    private final Map<String, Long> dataNodes = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
            return size() > DATANODES_MAX;
        }
    };

    private ClientFabric(HdfsConf conf) throws FabricUnavailableException {
        this.node = conf.nodeBuilder().start();
        this.aheadBytesFree = new AtomicLong(conf.bufferCapBytes / 2);
    }

    /** Takes {@code bytes} of the read-ahead budget; false (nothing taken) when it has not that much left. */
    boolean reserveAhead(long bytes) {
        for (long free = aheadBytesFree.get(); free >= bytes; free = aheadBytesFree.get()) {
            if (aheadBytesFree.compareAndSet(free, free - bytes)) {
                return true;
            }
        }
        SlipstreamHdfsCounters.READ_AHEADS_DECLINED.incrementAndGet();
        return false;
    }

    /** Gives back what {@link #reserveAhead} took. */
    void releaseAhead(long bytes) {
        aheadBytesFree.addAndGet(bytes);
    }

    /** The process's client node; the same failure again (without retrying) once it could not start. */
    static ClientFabric get(HdfsConf conf) throws FabricUnavailableException {
        synchronized (LOCK) {
            if (shared != null && !shared.node.isClosed()) {
                return shared;
            }
            if (unavailable != null) {
                throw unavailable;
            }
            try {
                shared = new ClientFabric(conf);
                LOG.info("slipstream: HDFS block reads over the fabric ({} transport)", conf.transport);
                return shared;
            } catch (FabricUnavailableException e) {
                unavailable = e;
                LOG.warn("slipstream: the fabric cannot start in this client: {}", e.getMessage());
                throw e;
            }
        }
    }

    /** {@code dataNode}'s fabric node, at its IP address and the fabric port {@code port} of the reading client's settings. */
    FabricEndpoint endpoint(DatanodeInfo dataNode, int port) {
        return node.endpoint(dataNode.getIpAddr(), port);
    }

    /** True when {@code dataNode} serves block reads over the fabric at {@code port} (asks it once, remembers). */
    boolean offersFabric(DatanodeInfo dataNode, int port) {
        String key = key(dataNode, port);
        synchronized (dataNodes) {
            Long until = dataNodes.get(key);
            if (until != null && (until == 0L || until - System.nanoTime() > 0)) {
                return until == 0L;
            }
        }
        boolean offers;
        try (FabricBuffer answer = endpoint(dataNode, port).request(BlockReadProtocol.OP_PROBE, BlockReadProtocol.encodeProbe(dataNode.getXferPort()))) {
            offers = answer.length() == 1 && answer.byteBuffer().get(0) == BlockReadProtocol.VERSION;
        } catch (FabricException e) {
            LOG.debug("slipstream: DataNode {} offers no fabric: {}", key, e.getMessage());
            offers = false;
        }
        synchronized (dataNodes) {
            dataNodes.put(key, offers ? 0L : System.nanoTime() + NO_FABRIC_NANOS);
        }
        return offers;
    }

    /** After a failed read: ask {@code dataNode} again before the next block. */
    void forget(DatanodeInfo dataNode, int port) {
        synchronized (dataNodes) {
            dataNodes.remove(key(dataNode, port));
        }
    }

    private static String key(DatanodeInfo dataNode, int port) {
        return dataNode.getIpAddr() + ":" + dataNode.getXferPort() + "@" + port;
    }
}
