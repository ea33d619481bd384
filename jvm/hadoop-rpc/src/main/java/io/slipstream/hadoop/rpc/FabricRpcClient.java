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
    /** Times a call is sent at most when the server refuses its frame before queueing it. */
    private static final int SEND_ATTEMPTS_MAX = 4;
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
     * the server offers no fabric (until {@code expiresNanos}).
     */
    private record Session(FabricEndpoint endpoint, long id, FrameAuth auth, AtomicLong sequence, long expiresNanos) {
        static Session none(long expiresNanos) {
            return new Session(null, 0, null, null, expiresNanos);
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
        // A refused frame was never queued, so sending it again is safe: once on a new session (the server
        // forgot it, or it cannot verify our frames), and under a new sequence number when ours was too old.
        int newSessions = 0;
        for (int attempt = 0; ; attempt++) {
            Session session;
            try {
                session = session(rpcConf, conf, key, protocol, rpcTimeoutMs);
            } catch (IOException | RuntimeException e) {
                Client.setCallIdAndRetryCountUnprotected(callId, retryCount, externalHandler);
                throw e;
            }
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
            } catch (RefusedFrameException e) {
                if (e.newSession) {
                    forget(key, session);
                    if (++newSessions > 1) {
                        throw new IOException("slipstream: RPC server " + server + " refused two fresh fabric sessions", e);
                    }
                } else if (attempt >= SEND_ATTEMPTS_MAX - 1) {
                    throw new IOException("slipstream: RPC server " + server + " refused the fabric call " + SEND_ATTEMPTS_MAX
                            + " times", e);
                }
            } catch (IOException | RuntimeException e) {
                // The server's own error leaves the session as it was; anything else (the transport's failures,
                // an answer that is not the server's) drops it, as a broken connection: the next call opens a
                // new one.
                if (!(e instanceof RemoteException)) {
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

    /** Messages 1-2 of docs/hadoop-rpc.md: {@link FabricDiscovery#openSession} over the socket path, as {@code ticket}. */
    private Session open(RpcConf rpcConf, Configuration conf, SessionKey key, Class<?> protocol, int rpcTimeoutMs)
            throws IOException {
        SessionOffer offer;
        try {
            offer = SessionOffer.open(conf, key.server, protocol, key.protocol, key.user, rpcTimeoutMs);
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
        return new Session(endpoint, offer.sessionId(), offer.auth(), new AtomicLong(), 0);
    }

    private FabricNode node(RpcConf rpcConf) throws IOException {
        synchronized (nodes) {
            FabricNode node = nodes.get(rpcConf.transport);
            if (node == null || node.isClosed()) {
                try {
                    node = rpcConf.nodeBuilder(null).requestTimeout(Duration.ofMillis(rpcConf.requestTimeoutMs)).start();
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
                throw transportError(server, fe);
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

    /**
     * The server refused the frame before queueing the call: send it again, on a new session
     * ({@code newSession}: the session is unknown there or our frames do not verify with its key) or under a
     * new sequence number (ours fell behind the server's replay window).
     */
    private static final class RefusedFrameException extends IOException {
        private static final long serialVersionUID = 1L;
        final boolean newSession;

        RefusedFrameException(String message, boolean newSession) {
            super(message);
            this.newSession = newSession;
        }
    }

    private static IOException transportError(InetSocketAddress server, FabricException e) {
        String message = Objects.toString(e.getMessage(), "");
        switch (e.kind()) {
            case REMOTE:
                if (message.contains(Frames.UNKNOWN_SESSION) || message.contains(Frames.NOT_AUTHENTIC)) {
                    return new RefusedFrameException(message, true);
                }
                if (message.contains(Frames.REPLAYED)) {
                    return new RefusedFrameException(message, false);
                }
                int at = message.indexOf(Frames.TOO_LONG);
                if (at >= 0) {
                    // The server's length check, in Hadoop's words.
                    return new RemoteException(IOException.class.getName(), message.substring(at + Frames.TOO_LONG.length()));
                }
                return FabricCallBridge.rpcException("slipstream: RPC server " + server + " refused the fabric call: " + message);
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
