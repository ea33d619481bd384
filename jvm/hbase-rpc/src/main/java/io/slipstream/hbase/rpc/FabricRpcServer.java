package io.slipstream.hbase.rpc;

import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.ReplayWindow;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.InvalidKeyException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Server;
import org.apache.hadoop.hbase.ipc.CallRunner;
import org.apache.hadoop.hbase.ipc.FabricIpcBridge;
import org.apache.hadoop.hbase.ipc.NettyRpcServer;
import org.apache.hadoop.hbase.ipc.RpcCall;
import org.apache.hadoop.hbase.ipc.RpcScheduler;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.authorize.AuthorizationException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;

/**
 * HBase's Netty RPC server ({@code hbase.rpc.server.impl}), dual-stack: its socket path serves socket
 * clients unchanged, and one fabric node on the listener's address takes the calls of fabric sessions
 * (opened through {@link Discovery} on the socket path, each bound to the user that connection
 * authenticated and to a key agreed over it) into the same {@code RpcScheduler}, decoded, checked and
 * answered by HBase's own connection and call code (the bridge's {@code ServerSession}). A frame is believed
 * only once its MAC verifies with its session's key and its sequence number is new; answers, and refusals of
 * frames whose MAC verified, carry the server's MAC for that frame.
 */
public class FabricRpcServer extends NettyRpcServer {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcServer.class);

    private final HBaseRpcConf rpcConf;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Session> sessions = new ConcurrentHashMap<>();
    private final Object sessionLock = new Object();
    private final AtomicLong callsReceived = new AtomicLong();
    private final AtomicLong framesRefused = new AtomicLong();
    /** Refusal reasons already logged at WARN: each is logged once per server, then at DEBUG (a flood costs no log). */
    private final Set<String> refusalsLogged = ConcurrentHashMap.newKeySet();
    private volatile FabricNode node;
    /**
     * The general executor's queues when they are {@link FabricCallQueue}s its handlers wait on: idle handlers
     * pull the fabric's calls (and the standby while every handler is busy); null when the receiver threads do.
     */
    private HandlerQueue.Pulls<CallRunner> pulls;
    private volatile boolean receiversStarted;
    /** Fabric calls taken by the standby (every general handler busy) rather than by a handler. */
    private final AtomicLong callsTakenByStandby = new AtomicLong();

    /**
     * A session: HBase's connection state (service, codecs, the socket connection's user), the key its frames
     * and answers carry a MAC of, and the sequence numbers seen.
     */
    private static final class Session {
        final long id;
        final FabricIpcBridge.ServerSession connection;
        final FrameAuth auth;
        final ReplayWindow window = new ReplayWindow();
        volatile long lastUsedNanos = System.nanoTime();

        Session(long id, FabricIpcBridge.ServerSession connection, FrameAuth auth) {
            this.id = id;
            this.connection = connection;
            this.auth = auth;
        }
    }

    /** Answers one frame on the fabric request it came in, with the MAC that binds the answer to that frame. */
    private static final class SignedResponder implements FabricIpcBridge.Responder {
        private final FabricRequest request;
        private final Session session;
        private final long sequence;

        SignedResponder(FabricRequest request, Session session, long sequence) {
            this.request = request;
            this.session = session;
            this.sequence = sequence;
        }

        @Override
        public int prefixBytes() {
            return Frames.RESPONSE_PREFIX_BYTES;
        }

        @Override
        public void respond(byte[] response) {
            session.auth.signResponse(response, Frames.FRAME_VERSION, session.id, sequence);
            try {
                request.respond(response);
            } catch (RuntimeException e) {
                // The fabric is closing or the client went away: nobody waits for this answer any more.
                LOG.debug("slipstream: a fabric answer was not sent: {}", e.toString());
            }
        }
    }

    /** The discovery service is built before this server exists; it reaches the server through this. */
    private static final class OpenerRef implements Discovery.Opener {
        volatile FabricRpcServer server;

        @Override
        public Discovery.Offer open(Discovery.Request request) throws IOException {
            return server.openSession(request);
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
                node = n;
                pullWith(n, handlerQueues());
                LOG.info("slipstream: RPC server {} also takes calls over the fabric at {} ({} transport; {})",
                        getListenerAddress(), n.localAddress(), rpcConf.transport, pulls != null
                                ? "idle handlers pull them" : "receiver threads pull them into the scheduler");
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

    /**
     * The general executor's queues if they are {@link FabricCallQueue}s whose handlers wait on them, else null
     * (with a warning when a FabricCallQueue is configured but its handlers cannot pull).
     */
    private List<HandlerQueue<CallRunner>> handlerQueues() {
        FabricIpcBridge.GeneralQueues general = FabricIpcBridge.generalQueues(getScheduler());
        List<HandlerQueue<CallRunner>> queues = new ArrayList<>();
        for (Object q : general.queues()) {
            if (q instanceof FabricCallQueue fabric) {
                queues.add(fabric.handlerQueue());
            }
        }
        if (queues.isEmpty()) {
            return null;
        }
        if (general.whyNotPulled() != null || queues.size() != general.queues().size()) {
            LOG.warn("slipstream: {} is configured, but RPC server {}'s handlers cannot pull fabric calls ({}): receiver"
                    + " threads pull them", FabricCallQueue.class.getName(), getListenerAddress(),
                    general.whyNotPulled() != null ? general.whyNotPulled() : "not all its general queues are one");
            return null;
        }
        return queues;
    }

    /** Who pulls the fabric's calls: the handlers of {@code queues} (and the standby), or receiver threads (null). */
    private void pullWith(FabricNode n, List<HandlerQueue<CallRunner>> queues) {
        if (queues == null) {
            n.serve(this::receive, rpcConf.receiverThreads);
            receiversStarted = true;
            return;
        }
        HandlerPulls source = new HandlerPulls(n);
        HandlerQueue.Pulls<CallRunner> p = HandlerQueue.attach(queues, source, rpcConf.handlerPullers,
                rpcConf.handlerPullMs);
        Thread t = new Thread(p::runStandby, "slipstream-hbase-rpc-standby-" + getListenerAddress().getPort());
        t.setDaemon(true);
        source.standby = t;
        pulls = p;
        t.start();
    }

    /** An idle handler's pull (or the standby's): one fabric request, received as a receiver thread would. */
    private final class HandlerPulls implements HandlerQueue.Source {
        private final FabricNode node;
        volatile Thread standby;

        HandlerPulls(FabricNode node) {
            this.node = node;
        }

        @Override
        public void pull(long timeoutMs, boolean spin) {
            FabricRequest request;
            try {
                request = node.nextRequest(Duration.ofMillis(timeoutMs), spin);
            } catch (FabricException e) {
                if (e.kind() != FabricException.Kind.CLOSED) {
                    LOG.error("slipstream: pulling fabric calls failed", e);
                }
                return; // closed: the server stops
            }
            if (request == null) {
                return;
            }
            if (Thread.currentThread() == standby) {
                callsTakenByStandby.incrementAndGet();
            }
            try {
                receive(request);
            } catch (RuntimeException e) {
                if (!request.isAnswered()) {
                    request.fail(String.valueOf(e));
                }
                LOG.warn("slipstream: a fabric call failed before it was dispatched", e);
            }
        }

        @Override
        public void interrupt() {
            node.interruptPull();
        }
    }

    @Override
    public synchronized void stop() {
        HandlerQueue.Pulls<CallRunner> p = pulls;
        pulls = null;
        if (p != null) {
            p.detach();
        }
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

    /**
     * HBase's service-level authorization ({@code hadoop.security.authorization}) of a socket connection, except
     * for the discovery's own: it carries no call of any service, and the session it opens is authorised for its
     * own service (the header in OpenSessionV2) when it opens, by this same method. Without this, a policy (such
     * as HBasePolicyProvider) that does not list the discovery would refuse every session.
     */
    @Override
    public synchronized void authorize(UserGroupInformation user, ConnectionHeader connection, InetAddress address)
            throws AuthorizationException {
        if (!Discovery.SERVICE_NAME.equals(connection.getServiceName())) {
            super.authorize(user, connection, address);
        }
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

    /** Frames refused since start: unknown session, not authentic, replayed, too old, malformed, over the size limit. */
    public long fabricFramesRefused() {
        return framesRefused.get();
    }

    /** Sessions held now. */
    public int fabricSessions() {
        return sessions.size();
    }

    /** Handlers pulling fabric calls now, or -1 when the receiver threads pull them. */
    synchronized int handlersPulling() {
        return pulls == null ? -1 : pulls.pullingHandlers();
    }

    /** Whether receiver threads pull the fabric's calls (the general call queues are not {@link FabricCallQueue}s). */
    boolean receiverThreadsStarted() {
        return receiversStarted;
    }

    /** Fabric calls the standby took since start (every general handler was busy), the rest of them handlers' or receivers'. */
    long fabricCallsTakenByStandby() {
        return callsTakenByStandby.get();
    }

    private void receive(FabricRequest request) {
        ByteBuffer payload = request.payloadBuffer();
        int start = payload.position();
        int length = payload.remaining();
        if (request.op() != Frames.OP_CALL || length < Frames.PREFIX_BYTES || payload.get(start) != Frames.FRAME_VERSION) {
            // Not this protocol (or not this version of it) at all, no session to name: that fabric connection
            // goes, as a socket server drops a connection whose preamble is wrong.
            framesRefused.incrementAndGet();
            request.failAndClose(Frames.MALFORMED + ": op " + request.op() + ", " + length + " bytes, version "
                    + (length > 0 ? payload.get(start) : -1) + " (this server takes version " + Frames.FRAME_VERSION + ")");
            return;
        }
        long sessionId = payload.getLong(start + FrameAuth.SESSION_OFFSET);
        Session session = sessions.get(sessionId);
        if (session == null) {
            // Not signed: there is no key to sign with.
            refuse(request, Frames.UNKNOWN_SESSION, null, 0);
            return;
        }
        // Authenticity before anything else of the frame is believed. The MAC costs one pass over at most the
        // node's maxMessageBytes (hbase.ipc.max.request.size plus a little), which the fabric checked. A
        // refused frame leaves its session open: whoever can send frames must not be able to close another's.
        if (!session.auth.verify(payload)) {
            // Not signed, on purpose: a refusal signed for a session and sequence number the frame only claims would
            // be a signed refusal for whoever asks, to be passed off against the real frame of that number.
            refuse(request, Frames.NOT_AUTHENTIC, session, 0);
            return;
        }
        // From here the frame is the session's client's: each refusal is signed, bound to its sequence number.
        long sequence = payload.getLong(start + FrameAuth.SEQUENCE_OFFSET);
        ReplayWindow.Verdict verdict = session.window.check(sequence);
        if (verdict != ReplayWindow.Verdict.ACCEPTED) {
            refuse(request, verdict == ReplayWindow.Verdict.REPLAYED ? Frames.REPLAYED : Frames.TOO_OLD, session, sequence);
            return;
        }
        session.lastUsedNanos = System.nanoTime();
        // A heap copy: HBase aliases a call's parameter and cells into its request bytes until the call is
        // done, and the fabric's receive buffer is reused when this returns.
        int bodyLength = length - Frames.PREFIX_BYTES;
        byte[] body = new byte[bodyLength];
        payload.position(start + Frames.PREFIX_BYTES);
        payload.get(body);
        FabricIpcBridge.Responder responder = new SignedResponder(request, session, sequence);
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
            closeMalformed(sessionId, session, sequence, request, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            request.fail(Frames.signRefusal(Frames.STOPPING, sessionId, sequence, session.auth));
        }
    }

    /**
     * A frame refused before anything of it was handed to HBase: counted, failed with {@code why}, logged at
     * WARN the first time per reason (then at DEBUG). The session, if any, stays. {@code why} is signed for frame
     * {@code sequence} of the session unless it is one of the two refusals of a frame whose MAC did not verify
     * (unknown session, not authentic).
     */
    private void refuse(FabricRequest request, String why, Session session, long sequence) {
        framesRefused.incrementAndGet();
        String whose = session == null ? "" : " (session of " + session.connection.userName() + " at "
                + session.connection.getHostAddress() + ", " + session.connection.serviceName() + ")";
        if (refusalsLogged.add(why)) {
            LOG.warn("slipstream: RPC server {} refused a fabric frame: {}{}; further refusals of this kind are logged at"
                    + " DEBUG and counted", getListenerAddress(), why, whose);
        } else {
            LOG.debug("slipstream: refused a fabric frame: {}{}", why, whose);
        }
        boolean authentic = session != null && !why.equals(Frames.NOT_AUTHENTIC);
        request.fail(authentic ? Frames.signRefusal(why, session.id, sequence, session.auth) : why);
    }

    private void closeMalformed(long sessionId, Session session, long sequence, FabricRequest request, Exception e) {
        sessions.remove(sessionId, session);
        session.connection.close();
        framesRefused.incrementAndGet();
        LOG.warn("slipstream: closed the fabric session of {} at {} ({}): {}", session.connection.userName(),
                session.connection.getHostAddress(), session.connection.serviceName(), e.toString());
        if (!request.isAnswered()) {
            request.fail(Frames.signRefusal(Frames.MALFORMED + ": " + e.getMessage(), sessionId, sequence, session.auth));
        }
    }

    /** Messages 1-2 of docs/hbase-rpc.md; runs on an RPC handler inside the socket call. */
    private Discovery.Offer openSession(Discovery.Request request) throws IOException {
        FabricNode n = node;
        if (n == null) {
            return Discovery.Offer.refused(rpcConf.securityRefusal != null
                    ? "the fabric does not carry calls with " + rpcConf.securityRefusal : "the fabric is not running here");
        }
        if (request.version() != Discovery.VERSION) {
            return Discovery.Offer.refused("discovery version " + request.version() + " (this server speaks "
                    + Discovery.VERSION + ")");
        }
        if (request.frameMac() == null) {
            throw new IOException("slipstream: a session request naming no MAC coverage (full or header)");
        }
        // The more either side asks for.
        FrameAuth.Coverage coverage = Discovery.agreedCoverage(request.frameMac(), rpcConf.frameMac);
        RpcCall call = getCurrentCall().orElseThrow(() -> new IOException("slipstream: OpenSession outside an RPC call"));
        ConnectionHeader header = ConnectionHeader.parseFrom(request.connectionHeader());
        if (Discovery.SERVICE_NAME.equals(header.getServiceName())) {
            throw new IOException("slipstream: the discovery service is not served over the fabric");
        }
        FabricIpcBridge.ServerSession connection = new FabricIpcBridge.ServerSession(this, call.getRemoteAddress());
        byte[] secret = null;
        try {
            // HBase's own reading of the header, as the socket connection's authenticated user: service,
            // codecs, proxy users, hadoop.security.authorization; the user must be the socket connection's.
            connection.open(request.connectionHeader(), call);
            SessionKeys keys = SessionKeys.generate();
            try {
                secret = keys.agree(request.clientPublicKey());
            } catch (InvalidKeyException e) {
                throw new IOException("slipstream: no fabric session for that key: " + e.getMessage(), e);
            }
            byte[] serverPublicKey = keys.publicKey();
            long id;
            synchronized (sessionLock) {
                if (sessions.size() >= rpcConf.sessionsMax && !evictIdle()) {
                    connection.close();
                    return Discovery.Offer.refused("this server holds its maximum of " + rpcConf.sessionsMax
                            + " fabric sessions (" + HBaseRpcConf.SESSIONS_MAX + "), none idle");
                }
                do {
                    id = random.nextLong();
                } while (sessions.containsKey(id));
                // The id salts the key: derived here, under the lock that makes the id this session's.
                FrameAuth auth = new FrameAuth(SessionKeys.macKey(secret, id, request.clientPublicKey(), serverPublicKey,
                        Frames.keyPurpose(coverage)), coverage);
                sessions.put(id, new Session(id, connection, auth));
            }
            InetSocketAddress at = n.localAddress();
            // A wildcard listener: the client reaches the fabric at the host it reached the socket at.
            String host = at.getAddress().isAnyLocalAddress() ? "" : at.getAddress().getHostAddress();
            return new Discovery.Offer(Discovery.VERSION, host, at.getPort(), id, rpcConf.serverFrameBytesMax(),
                    maxRequestSize, serverPublicKey, coverage, null);
        } catch (IOException | RuntimeException e) {
            connection.close();
            throw e;
        } finally {
            if (secret != null) {
                // macKey wiped it when it ran; a refusal before it did leaves it to here.
                Arrays.fill(secret, (byte) 0);
            }
        }
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
