package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.fabric.session.FrameAuth;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.AlignmentContext;
import org.apache.hadoop.ipc.Client;
import org.apache.hadoop.ipc.FabricCallBridge;
import org.apache.hadoop.ipc.ClientId;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcRequestHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto.RpcStatusProto;
import org.apache.hadoop.net.NetUtils;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.CodedInputStream;
import org.apache.hadoop.thirdparty.protobuf.CodedOutputStream;
import org.apache.hadoop.thirdparty.protobuf.Message;
import org.apache.hadoop.util.ProtoUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side, one per JVM: a fabric node per transport (no listener), the sessions opened on
 * servers (per server address, user and protocol; bounded) with their frame keys and sequence numbers,
 * and the engine's counters. A call goes over the fabric when its server offered a session;
 * {@link #call} returns null when it must take the socket path instead (fallback auto).
 */
final class FabricRpcClient {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcClient.class);
    static final FabricRpcClient INSTANCE = new FabricRpcClient();
    /** Sessions (and "no fabric here" answers) remembered at most, least recently used dropped first. */
    private static final int SESSIONS_MAX = 1024;
    /** Longest part of a refusal's text an exception repeats (the text may come from anyone). */
    private static final int REFUSAL_CHARS_SHOWN = 200;
    /** How long a server that offered no fabric is asked again only after. */
    private static final long NONE_RETRY_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final Map<FabricTransport, FabricNode> nodes = new EnumMap<>(FabricTransport.class);
    private final Map<SessionKey, Session> sessions = new LinkedHashMap<>(16, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<SessionKey, Session> eldest) {
            return size() > SESSIONS_MAX;
        }
    };
    private final Set<String> warned = ConcurrentHashMap.newKeySet();
    /** The client id of this JVM's fabric calls (the server's retry cache keys on it with the call id). */
    private final byte[] clientId = ClientId.getClientId();
    final AtomicLong fabricCalls = new AtomicLong();
    final AtomicLong socketCalls = new AtomicLong();

    /** A session is for one user's calls of one protocol on one server (the server authorised that much). */
    private record SessionKey(InetSocketAddress server, UserGroupInformation user, String protocol) {
    }

    /**
     * A session on one server: its id, its frames' key and the next sequence number; {@code endpoint == null}:
     * the server offers no fabric (until {@code expiresNanos}). {@code previous}: what the server said, when it
     * opened this one, of the session the client held before. {@code successor}: once a frame of this session is
     * refused as of an unknown session, the asking of the server for a new one naming this one (message 7), made
     * once and shared by every call refused so.
     */
    private record Session(FabricEndpoint endpoint, long id, FrameAuth auth, AtomicLong sequence, long expiresNanos,
            SessionOffer.Previous previous, AtomicReference<CompletableFuture<Session>> successor) {
        Session(FabricEndpoint endpoint, SessionOffer offer) {
            this(endpoint, offer.sessionId(), offer.auth(), new AtomicLong(), 0, offer.previous(), new AtomicReference<>());
        }

        static Session none(long expiresNanos) {
            return new Session(null, 0, null, null, expiresNanos, SessionOffer.Previous.NONE, new AtomicReference<>());
        }
    }

    private FabricRpcClient() {
    }

    /**
     * Sends one call over the fabric and returns its response, or null when it must go over the socket
     * path (the fabric is not offered or not allowed, and fallback is auto). Errors are Hadoop's: a
     * {@link RemoteException} for the server's, an {@link IOException} for the transport's.
     */
    Message call(RpcConf rpcConf, Configuration conf, InetSocketAddress server, Class<?> protocol, String protocolName,
            UserGroupInformation ticket, int rpcTimeoutMs, byte[] methodHeader, Message request, Message responsePrototype,
            AlignmentContext alignmentContext) throws IOException {
        if (rpcConf.securityRefusal != null) {
            return socketPath(rpcConf, "security", "the fabric does not carry calls with " + rpcConf.securityRefusal);
        }
        if (Client.isAsynchronousMode()) {
            return socketPath(rpcConf, "async", "asynchronous calls (Client.setAsynchronousMode) are not carried yet");
        }
        SessionKey key = new SessionKey(server, ticket, protocolName);
        // The call id and retry count RetryInvocationHandler set for this call, read (and cleared) once,
        // as Client.Call does: a retry after a new session keeps them.
        int callId = Client.getCallId();
        int retryCount = Client.getRetryCount();
        Object externalHandler = Client.getExternalHandler();
        Client.setCallIdAndRetryCountUnprotected(null, 0, null);
        Session session;
        try {
            session = session(rpcConf, conf, key, protocol, rpcTimeoutMs);
        } catch (IOException | RuntimeException e) {
            Client.setCallIdAndRetryCountUnprotected(callId, retryCount, externalHandler);
            throw e;
        }
        // Sent once, and once more only after an "unknown session" the server confirmed over the socket path
        // (message 7): nothing else proves that the server did not take the frame, so nothing else sends it
        // again. A call that may have run fails with an IOException, and Hadoop's retry policy decides.
        for (boolean resent = false; ; resent = true) {
            if (session.endpoint == null) {
                Message none = socketPath(rpcConf, "none " + server, "RPC server " + server + " offers no fabric session");
                // The socket path sends this very call: it keeps the ids the retry cache knows it by.
                Client.setCallIdAndRetryCountUnprotected(callId, retryCount, externalHandler);
                return none;
            }
            // Numbered when the frame is made: a thread that makes its frame sends it next, so frames arrive out
            // of order by at most about the number of threads calling at once (ReplayWindow takes 1024).
            long sequence = session.sequence.getAndIncrement();
            byte[] frame = frame(session, sequence, callId, retryCount, methodHeader, request, alignmentContext);
            try {
                Message response = exchange(rpcConf, session, sequence, server, rpcTimeoutMs, frame, callId,
                        responsePrototype, alignmentContext);
                fabricCalls.incrementAndGet();
                return response;
            } catch (UnknownSessionException e) {
                if (resent) {
                    forget(key, session);
                    throw new IOException("slipstream: RPC server " + server + " refused fabric call " + callId
                            + " as of an unknown session again, on the session opened after the first such refusal;"
                            + " the call may have run, so it is not sent again; session dropped", e);
                }
                session = successor(rpcConf, conf, key, protocol, rpcTimeoutMs, session, server, callId, e);
            } catch (IOException | RuntimeException e) {
                // The server's own error, and its signed word that only this frame's fate is unknown, leave the
                // session as it was; anything else (the transport's failures, an answer or a refusal that is not
                // the server's) drops it, as a broken connection: the next call opens a new one.
                if (!(e instanceof RemoteException || e instanceof FateUnknownException)) {
                    forget(key, session);
                }
                throw e;
            }
        }
    }

    private Message socketPath(RpcConf rpcConf, String reason, String why) throws IOException {
        if (rpcConf.fallback == RpcConf.Fallback.NEVER) {
            throw new IOException("slipstream: " + why + ", and " + RpcConf.FALLBACK + "=never");
        }
        if (warned.add(reason)) {
            LOG.warn("slipstream: {}: calls take Hadoop's socket path", why);
        }
        socketCalls.incrementAndGet();
        return null;
    }

    private Session session(RpcConf rpcConf, Configuration conf, SessionKey key, Class<?> protocol, int rpcTimeoutMs)
            throws IOException {
        synchronized (sessions) {
            Session s = sessions.get(key);
            if (s != null && (s.endpoint != null || System.nanoTime() - s.expiresNanos < 0)) {
                return s;
            }
        }
        Session opened = open(rpcConf, conf, key, protocol, rpcTimeoutMs);
        synchronized (sessions) {
            sessions.put(key, opened);
        }
        return opened;
    }

    private void forget(SessionKey key, Session session) {
        synchronized (sessions) {
            sessions.remove(key, session);
        }
    }

    /**
     * Message 7: a frame of {@code refused} was refused as of an unknown session, a refusal nobody can sign (the
     * server has no key for a session it does not hold), so anyone may have sent it. The server is asked, over
     * the socket path with a new session's discovery naming {@code refused}, whether it holds that session: only
     * "gone" proves the frame was not taken (a server takes no frame of a session it no longer holds, and a
     * session does not come back), and the new session is returned to send the call on. "Open" (the refusal was
     * not the server's), no fabric offered, or a failed discovery fail the call: it may have run. The asking is
     * done once per refused session, by the first call refused so; the others take its answer.
     */
    private Session successor(RpcConf rpcConf, Configuration conf, SessionKey key, Class<?> protocol, int rpcTimeoutMs,
            Session refused, InetSocketAddress server, int callId, UnknownSessionException refusal) throws IOException {
        CompletableFuture<Session> mine = new CompletableFuture<>();
        CompletableFuture<Session> asking = refused.successor.compareAndExchange(null, mine);
        if (asking == null) {
            asking = mine;
            try {
                Session next = open(rpcConf, conf, key, protocol, rpcTimeoutMs, refused.id);
                synchronized (sessions) {
                    Session current = sessions.get(key);
                    if (current == null || current == refused) {
                        sessions.put(key, next);
                    }
                }
                mine.complete(next);
            } catch (IOException | RuntimeException e) {
                forget(key, refused);
                mine.completeExceptionally(e);
            }
        }
        Session next;
        try {
            next = asking.get();
        } catch (ExecutionException e) {
            throw new IOException("slipstream: RPC server " + server + " refused fabric call " + callId
                    + " as of an unknown session, and asking it whether it holds that session failed; the call may"
                    + " have run, so it is not sent again", e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw (IOException) new java.io.InterruptedIOException("interrupted asking " + server
                    + " about the session of fabric call " + callId).initCause(refusal);
        }
        if (next.endpoint != null && next.previous == SessionOffer.Previous.GONE) {
            return next;
        }
        String said = next.endpoint == null ? "offers no fabric session now"
                : "still holds that session, so the refusal was not the server's";
        throw new IOException("slipstream: fabric call " + callId + " to RPC server " + server
                + " was refused as of an unknown session, and the server " + said + "; the call may have run, so it is"
                + " not sent again; session dropped", refusal);
    }

    /**
     * Messages 1-2 of docs/hadoop-rpc.md: {@link FabricDiscovery#openSession} over the socket path, as
     * {@code ticket}; {@code previousSession} names the session a refusal said the server does not hold (0: none).
     */
    private Session open(RpcConf rpcConf, Configuration conf, SessionKey key, Class<?> protocol, int rpcTimeoutMs)
            throws IOException {
        return open(rpcConf, conf, key, protocol, rpcTimeoutMs, 0);
    }

    private Session open(RpcConf rpcConf, Configuration conf, SessionKey key, Class<?> protocol, int rpcTimeoutMs,
            long previousSession) throws IOException {
        SessionOffer offer;
        try {
            offer = SessionOffer.open(conf, key.server, protocol, key.protocol, key.user, rpcTimeoutMs, previousSession,
                    rpcConf.frameMac);
        } catch (RemoteException e) {
            // A server without this engine or of another discovery version ("Unknown protocol",
            // VersionMismatch), one at its session limit, or one that does not authorise the protocol.
            LOG.debug("slipstream: no fabric session at {}", key.server, e);
            if (rpcConf.fallback == RpcConf.Fallback.NEVER) {
                throw new IOException("slipstream: RPC server " + key.server + " opened no fabric session ("
                        + e.getClassName() + ": " + firstLine(e.getMessage()) + "), and " + RpcConf.FALLBACK + "=never", e);
            }
            offer = null;
        }
        if (offer == null) {
            return Session.none(System.nanoTime() + NONE_RETRY_NANOS);
        }
        FabricNode node = node(rpcConf);
        if (node == null) {
            return Session.none(Long.MAX_VALUE);
        }
        FabricEndpoint endpoint = node.endpoint(offer.host(), offer.port());
        return new Session(endpoint, offer);
    }

    private FabricNode node(RpcConf rpcConf) throws IOException {
        synchronized (nodes) {
            FabricNode node = nodes.get(rpcConf.transport);
            if (node == null || node.isClosed()) {
                try {
                    node = rpcConf.nodeBuilder().requestTimeout(Duration.ofMillis(rpcConf.requestTimeoutMs)).start();
                } catch (FabricUnavailableException e) {
                    if (rpcConf.fallback == RpcConf.Fallback.NEVER) {
                        throw new IOException("slipstream: the fabric cannot start in this JVM (" + e.getMessage() + "), and "
                                + RpcConf.FALLBACK + "=never", e);
                    }
                    if (warned.add("unavailable")) {
                        LOG.warn("slipstream: the fabric cannot start in this JVM ({}): calls take Hadoop's socket path",
                                e.getMessage());
                    }
                    return null;
                }
                nodes.put(rpcConf.transport, node);
            }
            return node;
        }
    }

    /** Message 4: the session prefix (signed last), then Hadoop's own call framing. */
    private byte[] frame(Session session, long sequence, int callId, int retryCount, byte[] methodHeader, Message request,
            AlignmentContext alignmentContext) throws IOException {
        RpcRequestHeaderProto header = ProtoUtil.makeRpcRequestHeader(RPC.RpcKind.RPC_PROTOCOL_BUFFER,
                RpcRequestHeaderProto.OperationProto.RPC_FINAL_PACKET, callId, retryCount, clientId, alignmentContext);
        int headerSize = header.getSerializedSize();
        int requestSize = request.getSerializedSize();
        long total = (long) Frames.PREFIX_BYTES + CodedOutputStream.computeUInt32SizeNoTag(headerSize) + headerSize
                + methodHeader.length + CodedOutputStream.computeUInt32SizeNoTag(requestSize) + requestSize;
        if (total > Integer.MAX_VALUE - 8) {
            throw FabricCallBridge.rpcException("slipstream: a call of " + total + " bytes");
        }
        byte[] frame = new byte[(int) total];
        CodedOutputStream out = CodedOutputStream.newInstance(frame, Frames.PREFIX_BYTES, frame.length - Frames.PREFIX_BYTES);
        out.writeUInt32NoTag(headerSize);
        header.writeTo(out);
        out.writeRawBytes(methodHeader);
        out.writeUInt32NoTag(requestSize);
        request.writeTo(out);
        out.checkNoSpaceLeft();
        Frames.seal(frame, session.id, sequence, session.auth);
        return frame;
    }

    private Message exchange(RpcConf rpcConf, Session session, long sequence, InetSocketAddress server, int rpcTimeoutMs,
            byte[] frame, int callId, Message responsePrototype, AlignmentContext alignmentContext) throws IOException {
        CompletableFuture<FabricBuffer> future;
        try {
            future = session.endpoint.requestAsync(Frames.OP_CALL, frame);
        } catch (FabricException e) {
            throw transportError(server, e);
        }
        FabricBuffer response;
        try {
            response = rpcTimeoutMs > 0 ? future.get(rpcTimeoutMs, TimeUnit.MILLISECONDS) : future.get();
        } catch (TimeoutException e) {
            future.thenAccept(FabricBuffer::close);
            throw NetUtils.wrapException(server.getHostString(), server.getPort(), null, 0,
                    new SocketTimeoutException(rpcTimeoutMs + " millis timeout while waiting for the fabric call " + callId));
        } catch (InterruptedException e) {
            future.thenAccept(FabricBuffer::close);
            Thread.currentThread().interrupt();
            throw (IOException) new java.io.InterruptedIOException("interrupted waiting for the fabric call " + callId)
                    .initCause(e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof FabricException fe) {
                throw fe.kind() == FabricException.Kind.REMOTE ? refusal(fe, session, sequence, server, callId)
                        : transportError(server, fe);
            }
            throw new IOException("slipstream: fabric call " + callId + " failed", cause);
        }
        try (response) {
            return read(rpcConf, response, session, sequence, server, callId, responsePrototype, alignmentContext);
        }
    }

    /**
     * Message 6: the server's MAC, checked before anything else of the answer is read, then Hadoop's response
     * framing: the header, then on success the response, both length-delimited.
     */
    private static Message read(RpcConf rpcConf, FabricBuffer response, Session session, long sequence,
            InetSocketAddress server, int callId, Message responsePrototype, AlignmentContext alignmentContext)
            throws IOException {
        java.nio.ByteBuffer view = response.byteBuffer();
        if (!Frames.verifyResponse(view, session.id, sequence, session.auth)) {
            // Not the server's answer to this frame (altered, another frame's, or from a peer without the
            // session's key): none of it is believed, not even an error it would carry. The call may have run on
            // the server, so it is not sent again here: it fails as on a broken connection (an IOException,
            // not a RemoteException, so the caller drops the session), and Hadoop's retry policy, which knows
            // whether the method is idempotent, decides whether to call again.
            throw new IOException("slipstream: the fabric answer from RPC server " + server + " to call " + callId
                    + " (frame " + sequence + " of its session) is not authentic; session dropped");
        }
        view.position(view.position() + Frames.RESPONSE_PREFIX_BYTES);
        int length = view.remaining();
        if (rpcConf.maxResponseLength > 0 && length > rpcConf.maxResponseLength) {
            throw FabricCallBridge.rpcException(String.format("RPC response has a length of %d exceeds maximum data length", length));
        }
        CodedInputStream in = CodedInputStream.newInstance(view);
        int limit = in.pushLimit(in.readRawVarint32());
        RpcResponseHeaderProto header = RpcResponseHeaderProto.parseFrom(in);
        in.popLimit(limit);
        if (header.getCallId() != callId) {
            throw FabricCallBridge.rpcException("slipstream: the response of fabric call " + callId + " names call " + header.getCallId());
        }
        if (header.getStatus() != RpcStatusProto.SUCCESS) {
            throw new RemoteException(header.getExceptionClassName(), header.getErrorMsg(),
                    header.hasErrorDetail() ? header.getErrorDetail() : null);
        }
        if (alignmentContext != null) {
            alignmentContext.receiveResponseState(header);
        }
        limit = in.pushLimit(in.readRawVarint32());
        Message message = responsePrototype.getParserForType().parseFrom(in);
        in.popLimit(limit);
        return message;
    }

    /** The unsigned "unknown session" (message 7): believed only once the server confirms it (successor). */
    private static final class UnknownSessionException extends IOException {
        private static final long serialVersionUID = 1L;

        UnknownSessionException(String message) {
            super(message);
        }
    }

    /**
     * The server's signed "replayed" or "too old": this frame may have been taken (a copy of it) or not; the
     * session is sound.
     */
    private static final class FateUnknownException extends IOException {
        private static final long serialVersionUID = 1L;

        FateUnknownException(String message) {
            super(message);
        }
    }

    /**
     * Message 7: the server's refusal of frame {@code sequence}, believed as far as it proves itself. A refusal
     * signed for this very frame is acted on as before (the length limit as Hadoop's RemoteException, the others
     * as an RpcException) except that no refusal makes the call go again: "replayed" means a copy of the frame was
     * taken, "too old" that nobody can tell. An "unknown session" goes to {@link #successor}; every other text of
     * this engine (unsigned, signed for another frame or with another key, altered, or "frame not authentic",
     * which the server never signs) is not the server's word: the call fails as after a broken connection.
     */
    private static IOException refusal(FabricException e, Session session, long sequence, InetSocketAddress server,
            int callId) {
        String failure = Objects.toString(e.getMessage(), "");
        String text = Frames.refusalText(failure);
        if (text == null) {
            // Not a refusal of this engine (the fabric's own failure, a request its handler dropped): no result in
            // it and nothing to believe; the session is dropped as before.
            return FabricCallBridge.rpcException("slipstream: RPC server " + server + " refused the fabric call: " + failure);
        }
        if (text.equals(Frames.UNKNOWN_SESSION)) {
            return new UnknownSessionException("slipstream: RPC server " + server + " (or someone) refused fabric call "
                    + callId + ": " + text);
        }
        String frame = "fabric call " + callId + " (frame " + sequence + " of its session) to RPC server " + server;
        String reason = Frames.verifyRefusal(text, session.id, sequence, session.auth);
        if (reason == null) {
            String unsigned = text.equals(Frames.NOT_AUTHENTIC) ? ", a refusal the server never signs" : "";
            return new IOException("slipstream: the refusal of " + frame + " is not authentic (\"" + shown(text) + "\"" + unsigned
                    + "); the call may have run, so it is not sent again; session dropped");
        }
        if (reason.startsWith(Frames.TOO_LONG)) {
            // The server's length check, in Hadoop's words.
            return new RemoteException(IOException.class.getName(), reason.substring(Frames.TOO_LONG.length()));
        }
        if (reason.equals(Frames.REPLAYED) || reason.equals(Frames.TOO_OLD)) {
            return new FateUnknownException("slipstream: RPC server " + server + " refused " + frame + ": " + reason
                    + "; the call may have run, so it is not sent again");
        }
        return FabricCallBridge.rpcException("slipstream: RPC server " + server + " refused " + frame + ": " + reason);
    }

    private static String shown(String text) {
        return text.length() <= REFUSAL_CHARS_SHOWN ? text : text.substring(0, REFUSAL_CHARS_SHOWN) + "...";
    }

    private static IOException transportError(InetSocketAddress server, FabricException e) {
        String message = Objects.toString(e.getMessage(), "");
        switch (e.kind()) {
            case TIMEOUT:
                return NetUtils.wrapException(server.getHostString(), server.getPort(), null, 0,
                        new SocketTimeoutException("fabric: " + message));
            case TOO_LARGE:
                return FabricCallBridge.rpcException("slipstream: fabric call refused: " + message);
            default:
                // The server went away (killed, closed, unreachable): what a socket client sees as EOF.
                return NetUtils.wrapException(server.getHostString(), server.getPort(), null, 0,
                        new EOFException("fabric " + e.kind() + ": " + message));
        }
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }
}
