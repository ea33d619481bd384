package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.FabricUnavailableException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The DataNode side's one fabric node per process, shared by every DataNode of the process (one on
 * a real DataNode; three in a mini cluster) and counted: the first plugin to start opens it, the
 * last to stop closes it. A request names its DataNode by data-transfer port and goes to its reads
 * ({@link DataNodeReads}) or writes ({@link DataNodeWrites}). Read response bytes being prepared
 * are bounded by {@code server.maxBytesInFlight}, writes by {@code server.maxWrites} per DataNode,
 * requests by the fabric's queue limits. Handler threads never wait for another request: a write's
 * acknowledgements are sent from the fabric's completions and from {@link #finisher}.
 */
final class DataNodeFabric {
    private static final Logger LOG = LoggerFactory.getLogger(DataNodeFabric.class);
    private static final Object LOCK = new Object();
    private static DataNodeFabric shared;
    /** How long a request waits for room in the in-flight budget before it is refused as busy. */
    private static final long BUDGET_WAIT_MS = 5000;

    final FabricNode node;
    private final HdfsConf conf;
    private final Map<Integer, Served> dataNodes = new ConcurrentHashMap<>();
    /** Finalizes replicas after their last packet (disk work kept off the fabric's completer) and fails idle writes. */
    final ScheduledThreadPoolExecutor finisher;
    /** Response bytes being prepared, in KiB (a long budget in int permits). */
    private final Semaphore budgetKib;
    final AtomicLong bytesServed = new AtomicLong();
    final AtomicLong readsServed = new AtomicLong();
    final AtomicLong requestsRefused = new AtomicLong();
    /** Requests whose frame could not be read: answered, then their connection closed. */
    final AtomicLong framesMalformed = new AtomicLong();

    private DataNodeFabric(HdfsConf conf) throws FabricUnavailableException {
        this.conf = conf;
        this.budgetKib = new Semaphore((int) Math.min(Integer.MAX_VALUE, conf.serverMaxBytesInFlight >> 10));
        node = conf.nodeBuilder().listen(conf.bindAddress, conf.port).start();
        finisher = new ScheduledThreadPoolExecutor(2, r -> {
            Thread t = new Thread(r, "slipstream-hdfs-finisher");
            t.setDaemon(true);
            return t;
        });
        long idleNanos = conf.writeIdleTimeout.toNanos();
        finisher.scheduleWithFixedDelay(() -> dataNodes.values().forEach(d -> d.writes().failIdle(idleNanos)), 1, 1, TimeUnit.SECONDS);
        node.serve(this::handle, conf.serverThreads);
        LOG.info("slipstream: DataNode block reads and writes served over the fabric at {} ({} transport)", node.localAddress(), conf.transport);
    }

    /** One DataNode of this process: its reads and its writes. */
    record Served(DataNodeReads reads, DataNodeWrites writes) {
    }

    /** Registers the DataNode serving data transfer on {@code xferPort}, opening the node if it is the first. */
    static DataNodeFabric acquire(HdfsConf conf, int xferPort, DataNodeReads reads, DataNodeWrites writes) throws FabricUnavailableException {
        synchronized (LOCK) {
            if (shared == null) {
                shared = new DataNodeFabric(conf);
            } else if (shared.node.localAddress().getPort() != conf.port) {
                LOG.warn("slipstream: this process's fabric node listens on {}; {}={} of a later DataNode ignored",
                        shared.node.localAddress(), HdfsConf.PORT.key(), conf.port);
            }
            writes.attach(shared);
            if (shared.dataNodes.putIfAbsent(xferPort, new Served(reads, writes)) != null) {
                throw new IllegalStateException("two DataNodes of this process on data-transfer port " + xferPort);
            }
            return shared;
        }
    }

    /** Unregisters a DataNode; closes the node after the last one. */
    void release(int xferPort) {
        synchronized (LOCK) {
            Served gone = dataNodes.remove(xferPort);
            if (gone != null) {
                gone.writes().failAll("the DataNode stops");
            }
            if (dataNodes.isEmpty() && shared == this) {
                LOG.info("slipstream: served {} block reads, {} bytes, refused {}", readsServed.get(), bytesServed.get(), requestsRefused.get());
                shared = null;
                finisher.shutdownNow();
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

    /**
     * A request whose frame cannot be read (truncated, over a limit, an unknown operation) is
     * answered with the reason and then its fabric connection is closed, as a DataXceiver drops a
     * socket that breaks the protocol; every other refusal (a token, a busy DataNode, a write the
     * DataNode does not take) fails that request alone, since one connection carries all the
     * streams of a client process.
     */
    private void handle(FabricRequest request) {
        boolean decoded = false;
        try {
            switch (request.op()) {
                case BlockReadProtocol.OP_PROBE -> {
                    int xferPort = BlockReadProtocol.decodeProbe(request.payloadBuffer());
                    decoded = true;
                    dataNode(xferPort);
                    request.respond(new byte[] {BlockReadProtocol.VERSION});
                }
                case BlockReadProtocol.OP_READ -> {
                    BlockReadProtocol.ReadRequest read = BlockReadProtocol.ReadRequest.decode(request.payloadBuffer(), conf.requestBytes);
                    decoded = true;
                    read(request, read);
                }
                case BlockWriteProtocol.OP_OPEN -> {
                    BlockWriteProtocol.Open open = BlockWriteProtocol.Open.decode(request.payloadBuffer());
                    decoded = true;
                    dataNode(open.xferPort()).writes().open(request, open);
                }
                case BlockWriteProtocol.OP_PACKET -> {
                    ByteBuffer payload = request.payloadBuffer();
                    BlockWriteProtocol.PacketHeader header;
                    try {
                        header = BlockWriteProtocol.PacketHeader.decode(payload, request.payload().length(), conf.requestBytes);
                    } catch (BlockReadProtocol.MalformedException e) {
                        // A malformed packet of an open write fails that write (its replica stays for HDFS's recovery).
                        if (payload.remaining() >= BlockWriteProtocol.PACKET_XFER_PORT_OFFSET + 12) {
                            Served served = dataNodes.get(payload.getInt(BlockWriteProtocol.PACKET_XFER_PORT_OFFSET));
                            if (served != null) {
                                served.writes().fail(payload.getLong(BlockWriteProtocol.PACKET_XFER_PORT_OFFSET + 4), e.getMessage());
                            }
                        }
                        throw e;
                    }
                    decoded = true;
                    dataNode(header.xferPort()).writes().packet(request, header);
                }
                default -> throw new BlockReadProtocol.MalformedException("unknown operation " + request.op());
            }
        } catch (Exception e) {
            requestsRefused.incrementAndGet();
            if (!request.isAnswered()) {
                String reason = e.getMessage() == null ? e.toString() : e.getMessage();
                if (!decoded && e instanceof BlockReadProtocol.MalformedException) {
                    framesMalformed.incrementAndGet();
                    request.failAndClose(reason);
                } else {
                    request.fail(reason);
                }
            }
        }
    }

    private void read(FabricRequest request, BlockReadProtocol.ReadRequest read) throws Exception {
        DataNodeReads reads = dataNode(read.xferPort()).reads();
        int budget = (BlockReadProtocol.responseBytesMax(read.length()) >> 10) + 1;
        if (!budgetKib.tryAcquire(budget, BUDGET_WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("busy: " + HdfsConf.SERVER_MAX_BYTES_IN_FLIGHT.key() + " in use for " + BUDGET_WAIT_MS + " ms");
        }
        try {
            FabricBuffer response = reads.read(read, node);
            int length = response.length();
            // Counted before the answer goes: the reader may have it, and read these counts, before respond() returns.
            readsServed.incrementAndGet();
            bytesServed.addAndGet(length);
            reads.bytesServed.addAndGet(length);
            request.respond(response);
        } finally {
            budgetKib.release(budget);
        }
    }

    /** Response bytes the DataNode of {@code xferPort} served so far (0 for one this node does not know). */
    long bytesServedBy(int xferPort) {
        Served served = dataNodes.get(xferPort);
        return served == null ? 0 : served.reads().bytesServed.get();
    }

    /** Block bytes all this process's DataNodes received over the fabric (each replica of a pipeline counts; for ohb). */
    long bytesReceived() {
        return dataNodes.values().stream().mapToLong(d -> d.writes().bytesWritten.get()).sum();
    }

    /** The writes of the DataNode of {@code xferPort}, or null for one this node does not know (for tests and ohb). */
    DataNodeWrites writesOf(int xferPort) {
        Served served = dataNodes.get(xferPort);
        return served == null ? null : served.writes();
    }

    private Served dataNode(int xferPort) {
        Served served = dataNodes.get(xferPort);
        if (served == null || !served.reads().isUp()) {
            throw new IllegalStateException("no running DataNode of data-transfer port " + xferPort + " in this process");
        }
        return served;
    }
}
