package io.slipstream.hbase.rpc;

import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.FabricUnavailableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Server;
import org.apache.hadoop.hbase.ipc.FabricIpcBridge;
import org.apache.hadoop.hbase.ipc.NettyRpcServer;
import org.apache.hadoop.hbase.ipc.RpcCall;
import org.apache.hadoop.hbase.ipc.RpcScheduler;
import org.apache.hadoop.hbase.security.AccessDeniedException;
import org.apache.hadoop.hbase.security.User;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;

/**
 * HBase's Netty RPC server ({@code hbase.rpc.server.impl}), dual-stack: its socket path serves socket
 * clients unchanged, and one fabric node on the listener's address takes the calls of fabric sessions
 * (opened through {@link Discovery} on the socket path) into the same {@code RpcScheduler}, decoded,
 * checked and answered by HBase's own connection and call code (the bridge's {@code ServerSession}).
 */
public class FabricRpcServer extends NettyRpcServer {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcServer.class);

    private final HBaseRpcConf rpcConf;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Session> sessions = new ConcurrentHashMap<>();
    private final Object sessionLock = new Object();
    private final AtomicLong callsReceived = new AtomicLong();
    private final AtomicLong framesRefused = new AtomicLong();
    private volatile FabricNode node;

    private static final class Session {
        final FabricIpcBridge.ServerSession connection;
        volatile long lastUsedNanos = System.nanoTime();

        Session(FabricIpcBridge.ServerSession connection) {
            this.connection = connection;
        }
    }

    /** The discovery service is built before this server exists; it reaches the server through this. */
    private static final class OpenerRef implements Discovery.Opener {
        volatile FabricRpcServer server;

        @Override
        public Discovery.Offer open(ConnectionHeader header) throws IOException {
            return server.openSession(header);
        }
    }

    /** The constructor {@code RpcServerFactory} calls. */
    public FabricRpcServer(Server server, String name, List<BlockingServiceAndInterface> services,
            InetSocketAddress bindAddress, Configuration conf, RpcScheduler scheduler, boolean reservoirEnabled)
            throws IOException {
        this(server, name, services, bindAddress, conf, scheduler, reservoirEnabled, new OpenerRef());
    }

    private FabricRpcServer(Server server, String name, List<BlockingServiceAndInterface> services,
            InetSocketAddress bindAddress, Configuration conf, RpcScheduler scheduler, boolean reservoirEnabled,
            OpenerRef opener) throws IOException {
        super(server, name, withDiscovery(services, opener), bindAddress, conf, scheduler, reservoirEnabled);
        this.rpcConf = new HBaseRpcConf(conf);
        opener.server = this;
    }

    private static List<BlockingServiceAndInterface> withDiscovery(List<BlockingServiceAndInterface> services,
            OpenerRef opener) {
        List<BlockingServiceAndInterface> all = new ArrayList<>(services);
        all.add(new BlockingServiceAndInterface(Discovery.service(opener), Discovery.class));
        return all;
    }

    @Override
    public synchronized void start() {
        if (isStarted()) {
            return;
        }
        if (rpcConf.securityRefusal != null) {
            String why = "slipstream: the fabric does not carry calls with " + rpcConf.securityRefusal;
            if (rpcConf.fallback == HBaseRpcConf.Fallback.NEVER) {
                throw new IllegalStateException(why + ", and " + HBaseRpcConf.FALLBACK + "=never");
            }
            LOG.warn("{}: RPC server {} serves its socket path only", why, getListenerAddress());
        } else {
            String host = getListenerAddress().getAddress().getHostAddress();
            try {
                FabricNode n = rpcConf.nodeBuilder(host).start();
                n.serve(this::receive, rpcConf.receiverThreads);
                node = n;
                LOG.info("slipstream: RPC server {} also takes calls over the fabric at {} ({} transport)",
                        getListenerAddress(), n.localAddress(), rpcConf.transport);
            } catch (FabricUnavailableException | RuntimeException e) {
                if (rpcConf.fallback == HBaseRpcConf.Fallback.NEVER) {
                    throw new IllegalStateException("slipstream: the fabric cannot start for RPC server "
                            + getListenerAddress() + " and " + HBaseRpcConf.FALLBACK + "=never: " + e.getMessage(), e);
                }
                LOG.warn("slipstream: the fabric cannot start ({}); RPC server {} serves its socket path only",
                        e.getMessage(), getListenerAddress());
            }
        }
        super.start();
    }

    @Override
    public synchronized void stop() {
        FabricNode n = node;
        node = null;
        if (n != null) {
            n.close();
            LOG.info("slipstream: RPC server {} took {} calls over the fabric, refused {} frames",
                    getListenerAddress(), callsReceived.get(), framesRefused.get());
        }
        for (Session s : sessions.values()) {
            s.connection.close();
        }
        sessions.clear();
        super.stop();
    }

    /** The fabric address clients reach, or null when the fabric is not offered. */
    public InetSocketAddress fabricAddress() {
        FabricNode n = node;
        return n == null ? null : n.localAddress();
    }

    /** Calls taken over the fabric into the scheduler (or answered with HBase's error) since start. */
    public long fabricCallsReceived() {
        return callsReceived.get();
    }

    /** Frames refused since start: unknown session, malformed, over the size limit. */
    public long fabricFramesRefused() {
        return framesRefused.get();
    }

    /** Sessions held now. */
    public int fabricSessions() {
        return sessions.size();
    }

    private void receive(FabricRequest request) {
        ByteBuffer payload = request.payloadBuffer();
        int length = payload.remaining();
        if (request.op() != Frames.OP_CALL || length < Frames.PREFIX_BYTES
                || payload.get(payload.position()) != Frames.FRAME_VERSION) {
            // Not this protocol at all (no session to name): that fabric connection goes, as a socket
            // server drops a connection whose preamble is wrong.
            framesRefused.incrementAndGet();
            request.failAndClose(Frames.MALFORMED + ": op " + request.op() + ", " + length + " bytes");
            return;
        }
        long sessionId = payload.getLong(payload.position() + 1);
        Session session = sessions.get(sessionId);
        if (session == null) {
            framesRefused.incrementAndGet();
            request.fail(Frames.UNKNOWN_SESSION);
            return;
        }
        session.lastUsedNanos = System.nanoTime();
        // A heap copy: HBase aliases a call's parameter and cells into its request bytes until the call is
        // done, and the fabric's receive buffer is reused when this returns.
        int bodyLength = length - Frames.PREFIX_BYTES;
        byte[] body = new byte[bodyLength];
        payload.position(payload.position() + Frames.PREFIX_BYTES);
        payload.get(body);
        FabricIpcBridge.Responder responder = response -> respond(request, response);
        try {
            if (bodyLength > maxRequestSize) {
                // HBase's own check and words (NettyRpcFrameDecoder); the answer is HBase's RequestTooBigException.
                String message = "RPC data length of " + bodyLength + " received from "
                        + session.connection.getHostAddress() + " is greater than max allowed " + maxRequestSize
                        + ". Set \"" + MAX_REQUEST_SIZE + "\" on server to override this limit (not recommended)";
                LOG.warn(message);
                framesRefused.incrementAndGet();
                // The session closes with this answer, as NettyRpcFrameDecoder closes the channel after
                // it (the client's next call on the session learns so and opens a new one). It leaves
                // the table first, so no frame of it is taken after the answer.
                sessions.remove(sessionId, session);
                try {
                    session.connection.respondTooBig(body, 0, bodyLength, message, responder);
                } finally {
                    session.connection.close();
                }
                return;
            }
            // Counted before it is handed on: a handler may answer it before process() returns.
            callsReceived.incrementAndGet();
            try {
                session.connection.process(body, 0, bodyLength, responder);
            } catch (IOException | RuntimeException e) {
                callsReceived.decrementAndGet();
                throw e;
            }
        } catch (IOException | RuntimeException e) {
            closeMalformed(sessionId, session, request, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            request.fail("slipstream-hbase-rpc: the server is stopping");
        }
    }

    private void closeMalformed(long sessionId, Session session, FabricRequest request, Exception e) {
        sessions.remove(sessionId, session);
        session.connection.close();
        framesRefused.incrementAndGet();
        LOG.warn("slipstream: closed the fabric session of {} at {} ({}): {}", session.connection.userName(),
                session.connection.getHostAddress(), session.connection.serviceName(), e.toString());
        if (!request.isAnswered()) {
            request.fail(Frames.MALFORMED + ": " + e.getMessage());
        }
    }

    private static void respond(FabricRequest request, byte[] response) {
        try {
            request.respond(response);
        } catch (RuntimeException e) {
            // The fabric is closing or the client went away: nobody waits for this answer any more.
            LOG.debug("slipstream: a fabric answer was not sent: {}", e.toString());
        }
    }

    /** Messages 1-2 of docs/hbase-rpc.md; runs on an RPC handler inside the socket call. */
    private Discovery.Offer openSession(ConnectionHeader header) throws IOException {
        FabricNode n = node;
        if (n == null) {
            return new Discovery.Offer(Frames.FRAME_VERSION, null, 0, 0, 0, 0, rpcConf.securityRefusal != null
                    ? "the fabric does not carry calls with " + rpcConf.securityRefusal : "the fabric is not running here");
        }
        RpcCall call = getCurrentCall().orElseThrow(() -> new IOException("slipstream: OpenSession outside an RPC call"));
        InetAddress address = call.getRemoteAddress();
        String socketUser = call.getRequestUser().map(User::getShortName).orElse(null);
        if (Discovery.SERVICE_NAME.equals(header.getServiceName())) {
            throw new IOException("slipstream: the discovery service is not served over the fabric");
        }
        FabricIpcBridge.ServerSession connection = new FabricIpcBridge.ServerSession(this, address);
        // HBase's own reading of the header: service, codecs, user, and hadoop.security.authorization.
        connection.open(header.toByteArray());
        if (!Objects.equals(connection.userName(), socketUser)) {
            connection.close();
            throw new AccessDeniedException("slipstream: the connection header names user " + connection.userName()
                    + ", the socket connection is " + socketUser);
        }
        long id;
        synchronized (sessionLock) {
            if (sessions.size() >= rpcConf.sessionsMax && !evictIdle()) {
                connection.close();
                return new Discovery.Offer(Frames.FRAME_VERSION, null, 0, 0, 0, 0, "this server holds its maximum of "
                        + rpcConf.sessionsMax + " fabric sessions (" + HBaseRpcConf.SESSIONS_MAX + "), none idle");
            }
            do {
                id = random.nextLong();
            } while (sessions.putIfAbsent(id, new Session(connection)) != null);
        }
        InetSocketAddress at = n.localAddress();
        // A wildcard listener: the client reaches the fabric at the host it reached the socket at.
        String host = at.getAddress().isAnyLocalAddress() ? "" : at.getAddress().getHostAddress();
        return new Discovery.Offer(Frames.FRAME_VERSION, host, at.getPort(), id, rpcConf.serverFrameBytesMax(), maxRequestSize,
                null);
    }

    /** Removes the session idle longest if it is idle past the timeout. */
    private boolean evictIdle() {
        long now = System.nanoTime();
        Long oldest = null;
        long oldestUsed = now;
        for (Iterator<Map.Entry<Long, Session>> it = sessions.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Long, Session> e = it.next();
            if (e.getValue().lastUsedNanos - oldestUsed <= 0) {
                oldestUsed = e.getValue().lastUsedNanos;
                oldest = e.getKey();
            }
        }
        if (oldest != null && now - oldestUsed >= rpcConf.sessionIdleMs * 1_000_000L) {
            Session evicted = sessions.remove(oldest);
            if (evicted != null) {
                evicted.connection.close();
            }
            return true;
        }
        return false;
    }
}
