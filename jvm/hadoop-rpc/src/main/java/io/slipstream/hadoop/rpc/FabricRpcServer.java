package io.slipstream.hadoop.rpc;

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
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Iterator;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
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
 * {@link FabricDiscovery} on the socket path, each bound to the user that connection authenticated and
 * to a key agreed over it) into the same call queue, run by the same handlers as that user. A frame is
 * believed only once its MAC verifies with its session's key and its sequence number is new; answers, and
 * refusals of frames whose MAC verified, carry the server's MAC for that frame.
 */
public final class FabricRpcServer extends ProtobufRpcEngine2.Server {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcServer.class);
    /** Longest protocol name a session is opened for (Hadoop's are class names, far shorter). */
    private static final int PROTOCOL_NAME_MAX = 1024;

    private final RpcConf rpcConf;
    private final Configuration conf;
    private final AlignmentContext alignmentContext;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Session> sessions = new ConcurrentHashMap<>();
    private final Object sessionLock = new Object();
    private final AtomicLong callsReceived = new AtomicLong();
    private final AtomicLong framesRefused = new AtomicLong();
    /** {@code hadoop.security.authorization}: each session's protocol is authorised for its user at opening. */
    private final boolean authorizeSessions;
    private volatile FabricNode node;
    /**
     * Hadoop's call queue when it is a {@link FabricCallQueue}: idle handlers pull the fabric's calls; null
     * when another kind is configured: the receiver threads pull them (started once, kept to the end).
     */
    private FabricCallQueue<?> handlerQueue;
    private boolean receiversStarted;

    /**
     * What a session was opened with on the socket path: the user that connection authenticated (its UGI
     * as Hadoop made it: authentication method, real user of a proxy user, token identifier), from where,
     * for which protocol, and the key its frames must carry a MAC of, with the sequence numbers seen.
     */
    private static final class Session {
        /** {@link #lastUsedNanos}'s value once the session is closed: it takes no call after that. */
        private static final long CLOSED = Long.MIN_VALUE;

        final UserGroupInformation user;
        final InetAddress address;
        final String protocol;
        final FrameAuth auth;
        final ReplayWindow window = new ReplayWindow();
        /**
         * When a call of it was last taken, or CLOSED. Taking a call and closing the session (eviction, a
         * malformed frame) exclude each other through it, so that a session the server no longer holds took no
         * call after it left: what the server says of it to a client (message 7) stays true.
         */
        private final AtomicLong lastUsedNanos = new AtomicLong(System.nanoTime());

        Session(UserGroupInformation user, InetAddress address, String protocol, FrameAuth auth) {
            this.user = user;
            this.address = address;
            this.protocol = protocol;
            this.auth = auth;
        }

        /** Marks a call taken now; false when the session was closed (the call must not be taken). */
        boolean touch() {
            long now = System.nanoTime();
            for (long seen = lastUsedNanos.get(); ; seen = lastUsedNanos.get()) {
                if (seen == CLOSED) {
                    return false;
                }
                if (lastUsedNanos.compareAndSet(seen, now == CLOSED ? now + 1 : now)) {
                    return true;
                }
            }
        }

        /** When a call was last taken (CLOSED once closed). */
        long lastUsedNanos() {
            return lastUsedNanos.get();
        }

        /** Closes the session if no call was taken since {@code lastUsed}; whether it did. */
        boolean closeIfUnusedSince(long lastUsed) {
            return lastUsed != CLOSED && lastUsedNanos.compareAndSet(lastUsed, CLOSED);
        }

        void close() {
            lastUsedNanos.set(CLOSED);
        }
    }

    FabricRpcServer(Class<?> protocolClass, Object protocolImpl, Configuration conf, String bindAddress, int port,
            int numHandlers, int numReaders, int queueSizePerHandler, boolean verbose,
            SecretManager<? extends TokenIdentifier> secretManager, String portRangeConfig,
            AlignmentContext alignmentContext) throws IOException {
        super(beforeCallQueue(protocolClass), protocolImpl, conf, bindAddress, port, numHandlers, numReaders,
                queueSizePerHandler, verbose, secretManager, portRangeConfig, alignmentContext);
        this.handlerQueue = FabricCallQueue.endConstruction();
        this.rpcConf = new RpcConf(conf);
        this.conf = conf;
        this.alignmentContext = alignmentContext;
        this.authorizeSessions = conf.getBoolean(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHORIZATION, false);
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
                node = rpcConf.nodeBuilder(host, RpcConf.serverPort(conf, getListenerAddress().getPort())).start();
                pullWith(handlerQueue);
                LOG.info("slipstream: RPC server {} also takes calls over the fabric at {} ({} transport; {})",
                        getListenerAddress(), node.localAddress(), rpcConf.transport, handlerQueue != null
                                ? "idle handlers pull them" : "receiver threads pull them into the call queue");
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
        if (handlerQueue != null) {
            handlerQueue.detach();
        }
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

    /**
     * Hadoop's {@code refreshCallQueue} (e.g. {@code dfsadmin -refreshCallQueue}): the new queue is made,
     * and the fabric's calls pulled by its handlers if it is a {@link FabricCallQueue}, else by receiver
     * threads.
     */
    @Override
    public synchronized void refreshCallQueue(Configuration newConf) {
        FabricCallQueue.beginConstruction();
        super.refreshCallQueue(newConf);
        FabricCallQueue<?> made = FabricCallQueue.endConstruction();
        FabricCallQueue<?> old = handlerQueue;
        handlerQueue = made;
        if (node != null) {
            pullWith(made);
        }
        if (old != null) {
            old.detach();
        }
    }

    /** Who pulls the fabric's calls: the handlers of {@code queue}, or the receiver threads when it is null. */
    private void pullWith(FabricCallQueue<?> queue) {
        FabricNode n = node;
        if (queue != null) {
            queue.attach(new HandlerPulls(n), rpcConf.handlerPullers, rpcConf.handlerPullMs);
        } else if (!receiversStarted) {
            n.serve(this::receive, rpcConf.receiverThreads);
            receiversStarted = true;
        }
    }

    /** Forgets any call queue made earlier on this thread, before Hadoop's constructor makes this server's. */
    private static Class<?> beforeCallQueue(Class<?> protocolClass) {
        FabricCallQueue.beginConstruction();
        return protocolClass;
    }

    /** An idle handler's pull: one fabric request, received as a receiver thread would. */
    private final class HandlerPulls implements FabricCallQueue.Source {
        private final FabricNode node;

        HandlerPulls(FabricNode node) {
            this.node = node;
        }

        @Override
        public void pull(long timeoutMs) {
            FabricRequest request;
            try {
                request = node.nextRequest(java.time.Duration.ofMillis(timeoutMs));
            } catch (FabricException e) {
                if (e.kind() != FabricException.Kind.CLOSED) {
                    LOG.error("slipstream: pulling fabric calls failed", e);
                }
                return; // closed: the server stops
            }
            if (request == null) {
                return;
            }
            try {
                receive(request);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // the server stops its handlers
            } catch (RuntimeException e) {
                if (!request.isAnswered()) {
                    request.fail(String.valueOf(e));
                }
                LOG.warn("slipstream: a fabric call failed before it was queued", e);
            }
        }

        @Override
        public void interrupt() {
            node.interruptPull();
        }
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

    /** Frames refused since start: unknown session, malformed, not authentic, replayed, too old, other protocol, over the length limit. */
    public long fabricFramesRefused() {
        return framesRefused.get();
    }

    /** Handlers pulling fabric calls now, or -1 when the call queue is not a {@link FabricCallQueue}. */
    synchronized int handlersPulling() {
        return handlerQueue == null ? -1 : handlerQueue.pullingHandlers();
    }

    /** Whether receiver threads pull fabric calls (the call queue was, at some time, not a {@link FabricCallQueue}). */
    synchronized boolean receiverThreadsStarted() {
        return receiversStarted;
    }

    /** Sessions held now. */
    public int fabricSessions() {
        return sessions.size();
    }

    /**
     * The protocols of the sessions held now (one server serves every protocol added to it: the NameNode's
     * client server also takes the DataNodes' {@code DatanodeProtocolPB}); for operators and tests.
     */
    public SortedSet<String> fabricSessionProtocols() {
        SortedSet<String> protocols = new TreeSet<>();
        for (Session session : sessions.values()) {
            protocols.add(session.protocol);
        }
        return protocols;
    }

    private void receive(FabricRequest request) throws InterruptedException {
        ByteBuffer payload = request.payloadBuffer();
        int start = payload.position();
        int length = payload.remaining();
        if (request.op() != Frames.OP_CALL || length < Frames.PREFIX_BYTES || payload.get(start) != Frames.FRAME_VERSION) {
            // Not this protocol (or not this version of it) at all: that fabric connection goes, as Hadoop's
            // server drops a connection whose preamble is wrong.
            framesRefused.incrementAndGet();
            request.failAndClose(Frames.MALFORMED + ": op " + request.op() + ", " + length + " bytes, version "
                    + (length > 0 ? payload.get(start) : -1) + " (this server takes version " + Frames.FRAME_VERSION + ")");
            return;
        }
        long sessionId = payload.getLong(start + Frames.SESSION_OFFSET);
        Session session = sessions.get(sessionId);
        if (session == null) {
            // Not signed: there is no key to sign with. The client believes it only when the server says, over
            // the socket path, that it does not hold the session (message 7).
            framesRefused.incrementAndGet();
            request.fail(Frames.UNKNOWN_SESSION);
            return;
        }
        // Authenticity before anything else of the frame is believed. The MAC costs one pass over at most
        // the fabric's maxMessageBytes (ipc.maximum.data.length plus a little), which the fabric checked.
        if (!session.auth.verify(payload)) {
            // Not signed, on purpose: a refusal signed for a session and sequence number the frame only claims
            // would be a signed refusal for whoever asks, to be passed off against the real call of that number.
            framesRefused.incrementAndGet();
            LOG.debug("slipstream: a frame for the fabric session of {} does not verify", session.user);
            request.fail(Frames.NOT_AUTHENTIC);
            return;
        }
        // From here the frame is the session's client's: each refusal is signed, bound to its sequence number.
        long sequence = payload.getLong(start + Frames.SEQUENCE_OFFSET);
        ReplayWindow.Verdict verdict = session.window.check(sequence);
        if (verdict != ReplayWindow.Verdict.ACCEPTED) {
            refuseSigned(request, session, sessionId, sequence,
                    verdict == ReplayWindow.Verdict.REPLAYED ? Frames.REPLAYED : Frames.TOO_OLD);
            return;
        }
        int bodyLength = length - Frames.PREFIX_BYTES;
        if (bodyLength > rpcConf.maxDataLength) {
            // Hadoop's own check and words (Server.Connection.checkDataLength); the session stays.
            String error = "Requested data length " + bodyLength + " is longer than maximum configured RPC length "
                    + rpcConf.maxDataLength + ".  RPC came from " + session.address.getHostAddress();
            LOG.warn(error);
            refuseSigned(request, session, sessionId, sequence, Frames.TOO_LONG + error);
            return;
        }
        if (!session.touch()) {
            // Closed (evicted) since it was looked up: as if it had not been found, and nothing is queued.
            framesRefused.incrementAndGet();
            request.fail(Frames.UNKNOWN_SESSION);
            return;
        }
        byte[] body = new byte[bodyLength];
        payload.position(start + Frames.PREFIX_BYTES);
        payload.get(body);
        // Counted before it is queued: a handler may answer it, and the caller read this count, before
        // queue() returns (HdfsOverFabricTest saw 13 of 14 so, under load in CI).
        callsReceived.incrementAndGet();
        try {
            FabricCallBridge.queue(this, alignmentContext, conf, session.user, session.address, session.protocol, body, 0,
                    bodyLength, new SignedResponder(request, session.auth, sessionId, sequence));
        } catch (FabricCallBridge.MalformedCallException e) {
            callsReceived.decrementAndGet();
            session.close();
            sessions.remove(sessionId, session);
            LOG.warn("slipstream: closed fabric session of {} at {}: {}", session.user, session.address.getHostAddress(),
                    e.getMessage());
            refuseSigned(request, session, sessionId, sequence, Frames.MALFORMED + ": " + e.getMessage());
        } catch (FabricCallBridge.WrongProtocolException e) {
            // An authentic frame of the session's own client: refused as Hadoop refuses an unauthorised
            // protocol, the session stays for the protocol it was opened for.
            callsReceived.decrementAndGet();
            refuseSigned(request, session, sessionId, sequence,
                    Frames.WRONG_PROTOCOL + e.getMessage() + " (opened for " + session.protocol + ")");
        }
    }

    /**
     * Refuses a frame whose MAC verified, with {@code reason} signed for it (message 7): the client believes the
     * refusal only for that frame, and only from this server.
     */
    private void refuseSigned(FabricRequest request, Session session, long sessionId, long sequence, String reason) {
        framesRefused.incrementAndGet();
        request.fail(Frames.signRefusal(reason, sessionId, sequence, session.auth));
    }

    /**
     * Answers one frame on the fabric request it came in, with the MAC that binds the answer to that frame's
     * session and sequence number: every answer a handler gives (result, Hadoop's error, the full queue's or
     * back-off's error) goes through it. The refusals in {@link #receive} are not answers (refuseSigned).
     */
    private static final class SignedResponder implements FabricCallBridge.Responder {
        private final FabricRequest request;
        private final FrameAuth auth;
        private final long sessionId;
        private final long sequence;

        SignedResponder(FabricRequest request, FrameAuth auth, long sessionId, long sequence) {
            this.request = request;
            this.auth = auth;
            this.sessionId = sessionId;
            this.sequence = sequence;
        }

        @Override
        public int prefixBytes() {
            return Frames.RESPONSE_PREFIX_BYTES;
        }

        @Override
        public void respond(byte[] response) {
            Frames.signResponse(response, sessionId, sequence, auth);
            request.respond(response);
        }
    }

    /** Runs on a handler, under the socket connection's authenticated user. */
    private final class Discovery implements FabricDiscovery {
        @Override
        public String openSession(String protocol, byte[] clientPublicKey, long previousSession, String frameMac)
                throws IOException {
            FabricNode n = node;
            if (n == null) {
                return "";
            }
            UserGroupInformation user = Server.getRemoteUser();
            InetAddress address = Server.getRemoteIp();
            if (user == null || address == null) {
                throw new IOException("slipstream: openSession outside an RPC call");
            }
            if (protocol == null || protocol.isEmpty() || protocol.length() > PROTOCOL_NAME_MAX) {
                throw new IOException("slipstream: a session for a protocol name of "
                        + (protocol == null ? "null" : protocol.length() + " characters"));
            }
            FrameAuth.Coverage asked = FrameAuth.Coverage.ofWord(frameMac);
            if (asked == null) {
                throw new IOException("slipstream: a session whose MACs cover \"" + frameMac + "\" (full or header)");
            }
            // The more either side asks for.
            FrameAuth.Coverage coverage = asked == FrameAuth.Coverage.FULL ? asked : rpcConf.frameMac;
            if (authorizeSessions) {
                // What Hadoop checked for the connection this call came on, checked again for the protocol
                // the session will carry (a client may name another one than its connection's).
                FabricCallBridge.authorize(FabricRpcServer.this, conf, user, protocol, address);
            }
            SessionKeys keys = SessionKeys.generate();
            byte[] secret;
            try {
                secret = keys.agree(clientPublicKey);
            } catch (java.security.InvalidKeyException e) {
                throw new IOException("slipstream: no fabric session for that key: " + e.getMessage(), e);
            }
            byte[] serverPublicKey = keys.publicKey();
            long id;
            SessionOffer.Previous previous;
            synchronized (sessionLock) {
                // What the client is told of the session it held (message 7): a session once gone never comes
                // back (ids are not given out twice while held; 2^-64 after), and one held took every frame that
                // reached it, so "open" makes any "unknown session" the client was given for it a forgery, and
                // "gone" means a frame refused as unknown was not taken (Session.touch).
                previous = previousSession == 0 ? SessionOffer.Previous.NONE
                        : sessions.containsKey(previousSession) ? SessionOffer.Previous.OPEN : SessionOffer.Previous.GONE;
                if (sessions.size() >= rpcConf.sessionsMax && !evictIdle()) {
                    Arrays.fill(secret, (byte) 0);
                    throw new IOException("slipstream: this server holds its maximum of " + rpcConf.sessionsMax
                            + " fabric sessions (" + RpcConf.SESSIONS_MAX + "), none idle");
                }
                do {
                    id = random.nextLong();
                } while (id == 0 || sessions.containsKey(id));
                // The id salts the key: derived here, under the lock that makes the id this session's.
                FrameAuth auth = new FrameAuth(SessionKeys.macKey(secret, id, clientPublicKey, serverPublicKey,
                        Frames.keyPurpose(coverage)), coverage);
                sessions.put(id, new Session(user, address, protocol, auth));
            }
            return SessionOffer.answer(n.localAddress(), id, serverPublicKey, previous, coverage);
        }

        /**
         * Removes the session idle longest if it is idle past the timeout and takes no call meanwhile (a frame that
         * is being taken wins, and then none is evicted).
         */
        private boolean evictIdle() {
            long now = System.nanoTime();
            Map.Entry<Long, Session> oldest = null;
            long oldestUsed = now;
            for (Iterator<Map.Entry<Long, Session>> it = sessions.entrySet().iterator(); it.hasNext(); ) {
                Map.Entry<Long, Session> e = it.next();
                long used = e.getValue().lastUsedNanos();
                if (used != Session.CLOSED && used - oldestUsed <= 0) {
                    oldestUsed = used;
                    oldest = e;
                }
            }
            if (oldest != null && now - oldestUsed >= rpcConf.sessionIdle.toNanos()
                    && oldest.getValue().closeIfUnusedSince(oldestUsed)) {
                sessions.remove(oldest.getKey(), oldest.getValue());
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
