package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.FabricUnavailableException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The DataNode side's one fabric node per process, shared by every DataNode of the process (one on
 * a real DataNode; three in a mini cluster) and counted: the first plugin to start opens it, the
 * last to stop closes it. A request names its DataNode by data-transfer port. Response bytes being
 * prepared are bounded by {@code server.maxBytesInFlight}, requests by the fabric's queue limits.
 */
final class DataNodeFabric {
    private static final Logger LOG = LoggerFactory.getLogger(DataNodeFabric.class);
    private static final Object LOCK = new Object();
    private static DataNodeFabric shared;
    /** How long a request waits for room in the in-flight budget before it is refused as busy. */
    private static final long BUDGET_WAIT_MS = 5000;

    final FabricNode node;
    private final HdfsConf conf;
    private final Map<Integer, DataNodeReads> dataNodes = new ConcurrentHashMap<>();
    /** Response bytes being prepared, in KiB (a long budget in int permits). */
    private final Semaphore budgetKib;
    final AtomicLong bytesServed = new AtomicLong();
    final AtomicLong readsServed = new AtomicLong();
    final AtomicLong requestsRefused = new AtomicLong();

    private DataNodeFabric(HdfsConf conf) throws FabricUnavailableException {
        this.conf = conf;
        this.budgetKib = new Semaphore((int) Math.min(Integer.MAX_VALUE, conf.serverMaxBytesInFlight >> 10));
        node = conf.nodeBuilder().listen(conf.bindAddress, conf.port).start();
        node.serve(this::handle, conf.serverThreads);
        LOG.info("slipstream: DataNode block reads served over the fabric at {} ({} transport)", node.localAddress(), conf.transport);
    }

    /** Registers the DataNode serving data transfer on {@code xferPort}, opening the node if it is the first. */
    static DataNodeFabric acquire(HdfsConf conf, int xferPort, DataNodeReads reads) throws FabricUnavailableException {
        synchronized (LOCK) {
            if (shared == null) {
                shared = new DataNodeFabric(conf);
            } else if (shared.node.localAddress().getPort() != conf.port) {
                LOG.warn("slipstream: this process's fabric node listens on {}; {}={} of a later DataNode ignored",
                        shared.node.localAddress(), HdfsConf.PORT.key(), conf.port);
            }
            if (shared.dataNodes.putIfAbsent(xferPort, reads) != null) {
                throw new IllegalStateException("two DataNodes of this process on data-transfer port " + xferPort);
            }
            return shared;
        }
    }

    /** Unregisters a DataNode; closes the node after the last one. */
    void release(int xferPort) {
        synchronized (LOCK) {
            dataNodes.remove(xferPort);
            if (dataNodes.isEmpty() && shared == this) {
                LOG.info("slipstream: served {} block reads, {} bytes, refused {}", readsServed.get(), bytesServed.get(), requestsRefused.get());
                shared = null;
                node.close();
            }
        }
    }

    /** The process's node, or null when no DataNode of this process serves over the fabric (for tests and ohb). */
    static DataNodeFabric current() {
        synchronized (LOCK) {
            return shared;
        }
    }

    private void handle(FabricRequest request) {
        try {
            switch (request.op()) {
                case BlockReadProtocol.OP_PROBE -> {
                    dataNode(BlockReadProtocol.decodeProbe(request.payloadBuffer()));
                    request.respond(new byte[] {BlockReadProtocol.VERSION});
                }
                case BlockReadProtocol.OP_READ -> read(request);
                default -> throw new BlockReadProtocol.MalformedException("unknown operation " + request.op());
            }
        } catch (Exception e) {
            requestsRefused.incrementAndGet();
            if (!request.isAnswered()) {
                request.fail(e.getMessage() == null ? e.toString() : e.getMessage());
            }
        }
    }

    private void read(FabricRequest request) throws Exception {
        BlockReadProtocol.ReadRequest read = BlockReadProtocol.ReadRequest.decode(request.payloadBuffer(), conf.requestBytes);
        DataNodeReads reads = dataNode(read.xferPort());
        int budget = (BlockReadProtocol.responseBytesMax(read.length()) >> 10) + 1;
        if (!budgetKib.tryAcquire(budget, BUDGET_WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("busy: " + HdfsConf.SERVER_MAX_BYTES_IN_FLIGHT.key() + " in use for " + BUDGET_WAIT_MS + " ms");
        }
        try {
            FabricBuffer response = reads.read(read, node);
            int length = response.length();
            request.respond(response);
            readsServed.incrementAndGet();
            bytesServed.addAndGet(length);
            reads.bytesServed.addAndGet(length);
        } finally {
            budgetKib.release(budget);
        }
    }

    /** Response bytes the DataNode of {@code xferPort} served so far (0 for one this node does not know). */
    long bytesServedBy(int xferPort) {
        DataNodeReads reads = dataNodes.get(xferPort);
        return reads == null ? 0 : reads.bytesServed.get();
    }

    private DataNodeReads dataNode(int xferPort) {
        DataNodeReads reads = dataNodes.get(xferPort);
        if (reads == null || !reads.isUp()) {
            throw new IllegalStateException("no running DataNode of data-transfer port " + xferPort + " in this process");
        }
        return reads;
    }
}
