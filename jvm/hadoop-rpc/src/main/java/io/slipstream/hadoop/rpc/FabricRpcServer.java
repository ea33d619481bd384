package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.FabricUnavailableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.AlignmentContext;
import org.apache.hadoop.ipc.FabricCallBridge;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.ProtocolSignature;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.Server;
import org.apache.hadoop.ipc.WritableRpcEngine;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.SecretManager;
import org.apache.hadoop.security.token.TokenIdentifier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hadoop's protobuf RPC server, dual-stack: its socket listener serves socket clients unchanged, and one
 * fabric node on the same bind address takes calls of fabric sessions (opened through
 * {@link FabricDiscovery} on the socket path) into the same call queue, run by the same handlers.
 */
public final class FabricRpcServer extends ProtobufRpcEngine2.Server {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcServer.class);

    private final RpcConf rpcConf;
    private final Configuration conf;
    private final AlignmentContext alignmentContext;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Session> sessions = new ConcurrentHashMap<>();
    private final Object sessionLock = new Object();
    private final AtomicLong callsReceived = new AtomicLong();
    private final AtomicLong framesRefused = new AtomicLong();
    private volatile FabricNode node;

    /** The user a session was opened for on the socket path, and from where. */
    private static final class Session {
        final UserGroupInformation user;
        final InetAddress address;
        volatile long lastUsedNanos = System.nanoTime();

        Session(UserGroupInformation user, InetAddress address) {
            this.user = user;
            this.address = address;
        }
    }

    FabricRpcServer(Class<?> protocolClass, Object protocolImpl, Configuration conf, String bindAddress, int port,
            int numHandlers, int numReaders, int queueSizePerHandler, boolean verbose,
            SecretManager<? extends TokenIdentifier> secretManager, String portRangeConfig,
            AlignmentContext alignmentContext) throws IOException {
        super(protocolClass, protocolImpl, conf, bindAddress, port, numHandlers, numReaders, queueSizePerHandler, verbose,
                secretManager, portRangeConfig, alignmentContext);
        this.rpcConf = new RpcConf(conf);
        this.conf = conf;
        this.alignmentContext = alignmentContext;
        WritableRpcEngine.ensureInitialized();
        addProtocol(RPC.RpcKind.RPC_WRITABLE, FabricDiscovery.class, new Discovery());
    }

    @Override
    public synchronized void start() {
        if (rpcConf.securityRefusal != null) {
            String why = "slipstream: the fabric does not carry calls with " + rpcConf.securityRefusal;
            if (rpcConf.fallback == RpcConf.Fallback.NEVER) {
                throw new IllegalStateException(why + ", and " + RpcConf.FALLBACK + "=never");
            }
            LOG.warn("{}: RPC server {} serves its socket listener only", why, getListenerAddress());
        } else {
            String host = getListenerAddress().getAddress().getHostAddress();
            try {
                node = rpcConf.nodeBuilder(host).start();
                node.serve(this::receive, rpcConf.receiverThreads);
                LOG.info("slipstream: RPC server {} also takes calls over the fabric at {} ({} transport)",
                        getListenerAddress(), node.localAddress(), rpcConf.transport);
            } catch (FabricUnavailableException | RuntimeException e) {
                if (rpcConf.fallback == RpcConf.Fallback.NEVER) {
                    throw new IllegalStateException("slipstream: the fabric cannot start for RPC server " + getListenerAddress()
                            + " and " + RpcConf.FALLBACK + "=never: " + e.getMessage(), e);
                }
                LOG.warn("slipstream: the fabric cannot start ({}); RPC server {} serves its socket listener only",
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
            LOG.info("slipstream: RPC server {} took {} calls over the fabric, refused {} frames", getListenerAddress(),
                    callsReceived.get(), framesRefused.get());
        }
        sessions.clear();
        super.stop();
    }

    /** The fabric address clients reach, or null when the fabric is not offered. */
    public InetSocketAddress fabricAddress() {
        FabricNode n = node;
        return n == null ? null : n.localAddress();
    }

    /** Calls taken over the fabric into the call queue since start. */
    public long fabricCallsReceived() {
        return callsReceived.get();
    }

    /** Frames refused since start: unknown session, malformed, over the length limit. */
    public long fabricFramesRefused() {
        return framesRefused.get();
    }

    /** Sessions held now. */
    public int fabricSessions() {
        return sessions.size();
    }

    private void receive(FabricRequest request) throws InterruptedException {
        ByteBuffer payload = request.payloadBuffer();
        int length = payload.remaining();
        if (request.op() != Frames.OP_CALL || length < Frames.PREFIX_BYTES
                || payload.get(payload.position()) != Frames.FRAME_VERSION) {
            // Not this protocol at all (no session to name): that fabric connection goes, as Hadoop's
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
        int bodyLength = length - Frames.PREFIX_BYTES;
        if (bodyLength > rpcConf.maxDataLength) {
            // Hadoop's own check and words (Server.Connection.checkDataLength); the session stays.
            String error = "Requested data length " + bodyLength + " is longer than maximum configured RPC length "
                    + rpcConf.maxDataLength + ".  RPC came from " + session.address.getHostAddress();
            LOG.warn(error);
            framesRefused.incrementAndGet();
            request.fail(Frames.TOO_LONG + error);
            return;
        }
        session.lastUsedNanos = System.nanoTime();
        byte[] body = new byte[bodyLength];
        payload.position(payload.position() + Frames.PREFIX_BYTES);
        payload.get(body);
        // Counted before it is queued: a handler may answer it, and the caller read this count, before
        // queue() returns (HdfsOverFabricTest saw 13 of 14 so, under load in CI).
        callsReceived.incrementAndGet();
        try {
            FabricCallBridge.queue(this, alignmentContext, conf, session.user, session.address, body, 0, bodyLength,
                    request::respond);
        } catch (FabricCallBridge.MalformedCallException e) {
            callsReceived.decrementAndGet();
            sessions.remove(sessionId);
            framesRefused.incrementAndGet();
            LOG.warn("slipstream: closed fabric session of {} at {}: {}", session.user, session.address.getHostAddress(),
                    e.getMessage());
            request.fail(Frames.MALFORMED + ": " + e.getMessage());
        }
    }

    /** Runs on a handler, under the socket connection's authenticated user. */
    private final class Discovery implements FabricDiscovery {
        @Override
        public String openSession() throws IOException {
            FabricNode n = node;
            if (n == null) {
                return "";
            }
            UserGroupInformation user = Server.getRemoteUser();
            InetAddress address = Server.getRemoteIp();
            if (user == null || address == null) {
                throw new IOException("slipstream: openSession outside an RPC call");
            }
            long id;
            synchronized (sessionLock) {
                if (sessions.size() >= rpcConf.sessionsMax && !evictIdle()) {
                    throw new IOException("slipstream: this server holds its maximum of " + rpcConf.sessionsMax
                            + " fabric sessions (" + RpcConf.SESSIONS_MAX + "), none idle");
                }
                do {
                    id = random.nextLong();
                } while (sessions.putIfAbsent(id, new Session(user, address)) != null);
            }
            InetSocketAddress at = n.localAddress();
            return Frames.FRAME_VERSION + " " + at.getAddress().getHostAddress() + " " + at.getPort() + " " + id;
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
            if (oldest != null && now - oldestUsed >= rpcConf.sessionIdle.toNanos()) {
                sessions.remove(oldest);
                return true;
            }
            return false;
        }

        @Override
        public long getProtocolVersion(String protocol, long clientVersion) {
            return versionID;
        }

        @Override
        public ProtocolSignature getProtocolSignature(String protocol, long clientVersion, int clientMethodsHash)
                throws IOException {
            return ProtocolSignature.getProtocolSignature(this, protocol, clientVersion, clientMethodsHash);
        }
    }

}
