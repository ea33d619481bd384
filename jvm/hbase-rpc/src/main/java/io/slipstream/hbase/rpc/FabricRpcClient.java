package io.slipstream.hbase.rpc;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.net.SocketAddress;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.nio.ByteBuffer;
import java.security.InvalidKeyException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.client.MetricsConnection;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.exceptions.RequestTooBigException;
import org.apache.hadoop.hbase.ipc.CallTimeoutException;
import org.apache.hadoop.hbase.ipc.FabricIpcBridge;
import org.apache.hadoop.hbase.ipc.HBaseRpcController;
import org.apache.hadoop.hbase.ipc.HBaseRpcControllerImpl;
import org.apache.hadoop.hbase.ipc.RemoteWithExtrasException;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.security.SecurityConstants;
import org.apache.hbase.thirdparty.com.google.protobuf.Message;
import org.apache.hbase.thirdparty.com.google.protobuf.RpcChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HBase's Netty RPC client ({@code hbase.rpc.client.impl}) that carries a connection's calls over the
 * fabric when its server offers a session (asked once per server, user and service through
 * {@link Discovery} on the socket path, with a key agreed there), and otherwise on HBase's socket path
 * ({@code slipstream.hbase.rpc.fallback=auto}) or not at all ({@code never}). Each frame is numbered and
 * signed with the session's key; each answer must carry the server's MAC for that frame.
 */
public class FabricRpcClient extends FabricIpcBridge.ClientBase {
    private static final Logger LOG = LoggerFactory.getLogger(FabricRpcClient.class);
    /** Routes (and "no fabric here" answers) one client remembers at most, least recently used dropped first. */
    private static final int ROUTES_MAX = 1024;
    /** Longest part of a refusal's text an exception repeats (the text may come from anyone). */
    private static final int REFUSAL_CHARS_SHOWN = 200;
    /** A server that offered no fabric is asked again only after this. */
    private static final long NONE_RETRY_NANOS = TimeUnit.SECONDS.toNanos(30);

    /** One fabric node per transport per JVM (no listener): every client of the JVM shares it. */
    private static final Map<FabricTransport, FabricNode> NODES = new EnumMap<>(FabricTransport.class);
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();
    private static final AtomicLong FABRIC_CALLS = new AtomicLong();
    private static final AtomicLong SOCKET_CALLS = new AtomicLong();

    private final HBaseRpcConf rpcConf;
    private final int discoveryTimeoutMs;
    private final Map<RouteKey, Entry> routes = new LinkedHashMap<>(16, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<RouteKey, Entry> eldest) {
            return size() > ROUTES_MAX;
        }
    };

    private record RouteKey(String host, int port, String user, String service) {
    }

    /** A discovery, done or under way; {@code expiresNanos} bounds a "no fabric" answer. */
    private record Entry(CompletableFuture<FabricIpcBridge.Route> route, long expiresNanos) {
    }

    /** The constructor {@code RpcClientFactory} calls. */
    public FabricRpcClient(Configuration conf, String clusterId, SocketAddress localAddress, MetricsConnection metrics,
            Map<String, byte[]> connectionAttributes) {
        super(conf, clusterId, localAddress, metrics, connectionAttributes);
        this.rpcConf = new HBaseRpcConf(conf);
        this.discoveryTimeoutMs = conf.getInt(HConstants.HBASE_RPC_TIMEOUT_KEY, HConstants.DEFAULT_HBASE_RPC_TIMEOUT);
        if (rpcConf.securityRefusal == null && rpcConf.saslAuthenticated) {
            // Under SASL HBase's client needs to know which server principal a service's connection
            // authenticates: the discovery is hosted by HMasters and RegionServers alike, as ClientMetaService is.
            Discovery.registerSecurityInfo(rpcConf.serverPrincipalKeys);
        }
    }

    public FabricRpcClient(Configuration conf) {
        this(conf, HConstants.CLUSTER_ID_DEFAULT, null, null, Collections.emptyMap());
    }

    /** Calls this JVM's clients sent over the fabric. */
    public static long fabricCalls() {
        return FABRIC_CALLS.get();
    }

    /** Calls this JVM's clients sent on HBase's socket path (discovery excluded). */
    public static long socketCalls() {
        return SOCKET_CALLS.get();
    }

    @Override
    protected boolean socketOnlyService(String serviceName) {
        return Discovery.SERVICE_NAME.equals(serviceName);
    }

    @Override
    protected void counted(boolean fabric) {
        (fabric ? FABRIC_CALLS : SOCKET_CALLS).incrementAndGet();
    }

    @Override
    protected CompletableFuture<FabricIpcBridge.Route> route(FabricIpcBridge.Target target) {
        if (rpcConf.securityRefusal != null) {
            return socketPath("security", "the fabric does not carry calls with " + rpcConf.securityRefusal);
        }
        if (rpcConf.saslAuthenticated && rpcConf.serverPrincipalKeys.isEmpty()) {
            return socketPath("principal", "under SASL a fabric session needs the servers' principals ("
                    + SecurityConstants.REGIONSERVER_KRB_PRINCIPAL + ", " + SecurityConstants.MASTER_KRB_PRINCIPAL
                    + "), and this client's configuration sets neither");
        }
        RouteKey key = new RouteKey(target.server().getHostString(), target.server().getPort(),
                target.ticket() == null ? null : target.ticket().getName(), target.serviceName());
        CompletableFuture<FabricIpcBridge.Route> discovery;
        synchronized (routes) {
            Entry e = routes.get(key);
            if (e != null && !e.route.isCompletedExceptionally()
                    && (!e.route.isDone() || e.route.getNow(null) != null || System.nanoTime() - e.expiresNanos < 0)) {
                return none(target, e.route);
            }
            discovery = new CompletableFuture<>();
            Entry created = new Entry(discovery, System.nanoTime() + NONE_RETRY_NANOS);
            routes.put(key, created);
            discovery.whenComplete((r, error) -> {
                if (error != null) {
                    forget(key, created);
                }
            });
        }
        discover(target, key, discovery);
        return none(target, discovery);
    }

    /** A "no fabric" answer: the socket path (auto) or a failure (never). */
    private CompletableFuture<FabricIpcBridge.Route> none(FabricIpcBridge.Target target,
            CompletableFuture<FabricIpcBridge.Route> route) {
        return route.thenCompose(r -> r != null ? CompletableFuture.completedFuture(r)
                : socketPath("none " + target.server(), "RPC server " + target.server() + " offers no fabric session"));
    }

    private CompletableFuture<FabricIpcBridge.Route> socketPath(String reason, String why) {
        if (rpcConf.fallback == HBaseRpcConf.Fallback.NEVER) {
            return CompletableFuture.failedFuture(new IOException("slipstream: " + why + ", and "
                    + HBaseRpcConf.FALLBACK + "=never"));
        }
        if (WARNED.add(reason)) {
            LOG.warn("slipstream: {}: calls take HBase's socket path", why);
        }
        return CompletableFuture.completedFuture(null);
    }

    private void forget(RouteKey key, Entry entry) {
        synchronized (routes) {
            routes.remove(key, entry);
        }
    }

    /** Messages 1-3 of docs/hbase-rpc.md: OpenSessionV2 over HBase's socket path, as the target's user. */
    private void discover(FabricIpcBridge.Target target, RouteKey key, CompletableFuture<FabricIpcBridge.Route> result) {
        FabricNode node;
        try {
            node = node();
        } catch (IOException e) {
            result.completeExceptionally(e);
            return;
        }
        if (node == null) {
            result.complete(null);
            return;
        }
        ServerName server = ServerName.valueOf(target.server().getHostString(), target.server().getPort(), 0L);
        RpcChannel channel = createRpcChannel(server, target.ticket(), discoveryTimeoutMs);
        HBaseRpcController controller = new HBaseRpcControllerImpl();
        // OpenSession is the transport's business, not the caller's: it runs under a parent span that is
        // not sampled, so that neither its client nor its server span joins the caller's trace.
        try (Scope untraced = Context.root().with(Span.wrap(UNSAMPLED)).makeCurrent()) {
            openSession(channel, controller, target, node, result);
        }
    }

    private static final SpanContext UNSAMPLED = SpanContext.create(
            String.format("%016x%016x", 0x5eedL, new SecureRandom().nextLong() | 1L),
            String.format("%016x", new SecureRandom().nextLong() | 1L), TraceFlags.getDefault(), TraceState.getDefault());

    private void openSession(RpcChannel channel, HBaseRpcController controller, FabricIpcBridge.Target target,
            FabricNode node, CompletableFuture<FabricIpcBridge.Route> result) {
        // An ephemeral key pair per session: the public half rides in the request, the private half never leaves.
        SessionKeys keys = SessionKeys.generate();
        Message request = Discovery.encode(new Discovery.Request(Discovery.VERSION, target.connectionHeader(),
                keys.publicKey(), rpcConf.frameMac));
        channel.callMethod(Discovery.OPEN_SESSION_V2, controller, request, Discovery.offerPrototype(), (Message answer) -> {
            if (controller.failed()) {
                IOException e = controller.getFailed();
                if (e instanceof RemoteWithExtrasException || e instanceof org.apache.hadoop.ipc.RemoteException
                        || e instanceof ConnectionClosedException) {
                    // A server that refused the session, one without this RPC server (HBase's server closes a
                    // connection whose header names a service it does not host: UnknownServiceException), or
                    // one older than discovery version 2 (no OpenSessionV2: UnsupportedOperationException).
                    LOG.debug("slipstream: no fabric session at {}", target.server(), e);
                    if (rpcConf.fallback == HBaseRpcConf.Fallback.NEVER) {
                        String older = String.valueOf(e.getMessage()).contains(Discovery.OPEN_SESSION_V2.getName())
                                ? "; its Slipstream predates authenticated sessions (discovery version " + Discovery.VERSION
                                        + ")" : "";
                        result.completeExceptionally(new IOException("slipstream: RPC server " + target.server()
                                + " opened no fabric session (" + e + ")" + older + ", and " + HBaseRpcConf.FALLBACK
                                + "=never", e));
                    } else {
                        result.complete(null);
                    }
                } else {
                    // Unreachable, timed out: not remembered; the call meets the same on either path.
                    result.completeExceptionally(e);
                }
                return;
            }
            try {
                Discovery.Offer offer = Discovery.decode(answer);
                if (offer.refusal() != null) {
                    LOG.debug("slipstream: RPC server {} offers no fabric: {}", target.server(), offer.refusal());
                    result.complete(null);
                    return;
                }
                // The key is never sent: someone who watched the socket connection saw two public keys only.
                FrameAuth auth = Discovery.clientAuth(keys, offer, rpcConf.frameMac);
                String host = offer.host().isEmpty() ? target.server().getHostString() : offer.host();
                FabricEndpoint endpoint = node.endpoint(host, offer.port());
                result.complete(new FabricRoute(endpoint, offer, target, auth));
            } catch (InvalidKeyException | RuntimeException e) {
                result.completeExceptionally(new IOException("slipstream: RPC server " + target.server()
                        + " answered OpenSession with " + e.getMessage(), e));
            }
        });
    }

    private FabricNode node() throws IOException {
        synchronized (NODES) {
            FabricNode node = NODES.get(rpcConf.transport);
            if (node == null || node.isClosed()) {
                try {
                    node = rpcConf.nodeBuilder(null).requestTimeout(Duration.ofMillis(rpcConf.requestTimeoutMs)).start();
                } catch (FabricUnavailableException e) {
                    if (rpcConf.fallback == HBaseRpcConf.Fallback.NEVER) {
                        throw new IOException("slipstream: the fabric cannot start in this JVM (" + e.getMessage()
                                + "), and " + HBaseRpcConf.FALLBACK + "=never", e);
                    }
                    if (WARNED.add("unavailable")) {
                        LOG.warn("slipstream: the fabric cannot start in this JVM ({}): calls take HBase's socket path",
                                e.getMessage());
                    }
                    return null;
                }
                NODES.put(rpcConf.transport, node);
            }
            return node;
        }
    }

    /**
     * The answer to one frame. A thread that waits for it with {@code get(timeout)} (a blocking caller, see
     * {@code FabricIpcBridge.ClientBase}) first waits for the fabric's response itself: on this client's
     * node, which has no listener, that thread then drives the fabric and sleeps on its event fd, and the
     * response is delivered (checked, decoded, HBase's callback run) on it, with no hand-off through the
     * fabric's progress and completer threads.
     */
    private static final class Answer extends CompletableFuture<byte[]> {
        private volatile CompletableFuture<FabricBuffer> sent;

        @Override
        public byte[] get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            long deadline = System.nanoTime() + unit.toNanos(timeout);
            CompletableFuture<FabricBuffer> s = sent;
            if (s != null && !isDone()) {
                try {
                    s.get(timeout, unit);
                } catch (ExecutionException | CancellationException | TimeoutException e) {
                    // The answer carries the failure (its dependent on s); a timeout is the answer's too.
                }
            }
            return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            return new CompletableFuture<>();
        }
    }

    /** One session: message 4 out, message 6 back. */
    private final class FabricRoute implements FabricIpcBridge.Route {
        private final FabricEndpoint endpoint;
        private final Discovery.Offer offer;
        private final FabricIpcBridge.Target target;
        private final FrameAuth auth;
        /** The next frame's sequence number: 0, 1, 2, ... per session, one per frame sent (a resend takes a new one). */
        private final AtomicLong sequence = new AtomicLong();

        FabricRoute(FabricEndpoint endpoint, Discovery.Offer offer, FabricIpcBridge.Target target, FrameAuth auth) {
            this.endpoint = endpoint;
            this.offer = offer;
            this.target = target;
            this.auth = auth;
        }

        @Override
        public int prefixBytes() {
            return Frames.PREFIX_BYTES;
        }

        @Override
        public CompletableFuture<byte[]> send(byte[] frame) {
            int length = frame.length - Frames.PREFIX_BYTES;
            if (frame.length > offer.frameBytesMax()) {
                if (length > offer.maxRequestBytes()) {
                    // HBase's error, in its words, without sending what the server's fabric would not take.
                    return CompletableFuture.failedFuture(new RequestTooBigException("RPC data length of " + length
                            + " to " + target.server() + " is greater than max allowed " + offer.maxRequestBytes()
                            + ". Set \"" + RpcServer.MAX_REQUEST_SIZE
                            + "\" on server to override this limit (not recommended)"));
                }
                return CompletableFuture.failedFuture(new DoNotRetryIOException("slipstream: a call of " + length
                        + " bytes is larger than the fabric messages of " + target.server() + " ("
                        + offer.frameBytesMax() + " bytes; raise " + HBaseRpcConf.BUFFER_CAP + " there)"));
            }
            Answer answer = new Answer();
            sendNumbered(frame, answer);
            return answer;
        }

        /**
         * Numbers and signs {@code frame} when it is sent, so frames reach the server about in the order they
         * were numbered (ReplayWindow takes 1024 out of order, and a frame overtaken by more later); sends it
         * once: no refusal proves the server did not take it (docs/hbase-rpc.md, step 7).
         */
        private void sendNumbered(byte[] frame, Answer answer) {
            long number = sequence.getAndIncrement();
            Frames.seal(frame, offer.sessionId(), number, auth);
            CompletableFuture<FabricBuffer> sent;
            try {
                sent = endpoint.requestAsync(Frames.OP_CALL, frame);
            } catch (FabricException e) {
                answer.completeExceptionally(transportError(e));
                return;
            }
            answer.sent = sent;
            sent.whenComplete((buffer, error) -> {
                if (error != null) {
                    Throwable cause = error instanceof java.util.concurrent.CompletionException && error.getCause() != null
                            ? error.getCause() : error;
                    answer.completeExceptionally(!(cause instanceof FabricException fe) ? cause
                            : fe.kind() == FabricException.Kind.REMOTE ? refusal(fe, number) : transportError(fe));
                    return;
                }
                try (buffer) {
                    ByteBuffer view = buffer.byteBuffer();
                    if (!auth.verifyResponse(view, Frames.FRAME_VERSION, offer.sessionId(), number)) {
                        // Not the server's answer to this frame (altered, or another frame's): nothing of it is
                        // believed. The session is dropped as a broken connection would be; HBase's retry opens
                        // a new one.
                        forgetThisRoute();
                        answer.completeExceptionally(new ConnectionClosedException("slipstream: the fabric answer from "
                                + target.server() + " to call frame " + number + " is not authentic; session dropped"));
                        return;
                    }
                    byte[] bytes = new byte[view.remaining() - Frames.RESPONSE_PREFIX_BYTES];
                    view.position(view.position() + Frames.RESPONSE_PREFIX_BYTES);
                    view.get(bytes);
                    answer.complete(bytes);
                } catch (RuntimeException e) {
                    answer.completeExceptionally(e);
                }
            });
        }

        /** Removes this route from the table if it is still the one for its key (a newer one is left alone). */
        private void forgetThisRoute() {
            RouteKey key = new RouteKey(target.server().getHostString(), target.server().getPort(),
                    target.ticket() == null ? null : target.ticket().getName(), target.serviceName());
            synchronized (routes) {
                Entry entry = routes.get(key);
                if (entry != null && !entry.route.isCompletedExceptionally() && entry.route.getNow(null) == this) {
                    routes.remove(key);
                }
            }
        }

        /**
         * Step 7: the server's refusal of frame {@code number}, believed as far as it proves itself; each fails the
         * call as a closed connection (HBase's retry decides, by its own rules: a call may have run, as when a
         * socket closes under it). Signed for this frame with the session's key, "replayed" (a copy of the frame
         * was taken) and "too old" (whether it was cannot be told) leave the session as it is; anything else
         * (unknown session, a malformed frame's closing, a refusal that is not authentic) forgets it.
         */
        private IOException refusal(FabricException e, long number) {
            String failure = String.valueOf(e.getMessage());
            String text = Frames.refusalText(failure);
            if (text == null || text.equals(Frames.UNKNOWN_SESSION)) {
                return transportError(e);
            }
            String reason = Frames.verifyRefusal(text, offer.sessionId(), number, auth);
            String frame = "call frame " + number + " to " + target.server();
            if (reason == null) {
                forgetThisRoute();
                String unsigned = text.equals(Frames.NOT_AUTHENTIC) ? ", a refusal the server never signs" : "";
                String shown = text.length() <= REFUSAL_CHARS_SHOWN ? text : text.substring(0, REFUSAL_CHARS_SHOWN) + "...";
                return new ConnectionClosedException("slipstream: the refusal of " + frame + " is not authentic (\""
                        + shown + "\"" + unsigned + "); the call may have run; session dropped");
            }
            if (!reason.equals(Frames.REPLAYED) && !reason.equals(Frames.TOO_OLD)) {
                forgetThisRoute();
            }
            return new ConnectionClosedException("slipstream: the server refused fabric " + frame + ": " + reason
                    + "; the call may have run");
        }

        /** The fabric's failures as HBase's client sees the socket's; a broken session is forgotten. */
        private IOException transportError(FabricException e) {
            String message = String.valueOf(e.getMessage());
            switch (e.kind()) {
                case TIMEOUT:
                    return new CallTimeoutException("slipstream: fabric call to " + target.server() + ": " + message);
                case OVERLOADED:
                    return new org.apache.hadoop.hbase.CallQueueTooBigException("slipstream: fabric of "
                            + target.server() + " shed the call: " + message);
                case TOO_LARGE:
                    return new RequestTooBigException("slipstream: fabric call to " + target.server() + ": " + message);
                default:
                    // Peer gone, session unknown, frames not authentic with its key, or closed as malformed: what
                    // a socket client sees when its connection closes; HBase's retry opens a new session.
                    forgetThisRoute();
                    return new ConnectionClosedException("slipstream: fabric session to " + target.server()
                            + " closed (" + e.kind() + "): " + message);
            }
        }
    }
}
