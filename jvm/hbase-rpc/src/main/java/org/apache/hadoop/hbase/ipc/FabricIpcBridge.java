package org.apache.hadoop.hbase.ipc;

import io.opentelemetry.context.Scope;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.CellScanner;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.client.MetricsConnection;
import org.apache.hadoop.hbase.client.VersionInfoUtil;
import org.apache.hadoop.hbase.exceptions.RequestTooBigException;
import org.apache.hadoop.hbase.io.ByteBuffAllocator;
import org.apache.hadoop.hbase.net.Address;
import org.apache.hadoop.hbase.nio.SingleByteBuff;
import org.apache.hadoop.hbase.security.AccessDeniedException;
import org.apache.hadoop.hbase.security.User;
import org.apache.hadoop.hbase.util.EnvironmentEdgeManager;
import org.apache.hadoop.security.UserGroupInformation;

import org.apache.hbase.thirdparty.com.google.protobuf.BlockingRpcChannel;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;
import org.apache.hbase.thirdparty.com.google.protobuf.CodedInputStream;
import org.apache.hbase.thirdparty.com.google.protobuf.CodedOutputStream;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.MethodDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Message;
import org.apache.hbase.thirdparty.com.google.protobuf.RpcChannel;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;

import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.CellBlockMeta;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.RequestHeader;

/**
 * The one file of Slipstream in HBase's IPC package: it reaches the package-private parts of HBase's
 * RPC (the client's {@code NettyRpcConnection} and {@code Call}, the server's {@code ServerRpcConnection}
 * and {@code ServerCall}) and gives {@code io.slipstream.hbase.rpc} public hooks in their place. It knows
 * nothing of the fabric: frames are byte arrays, carried by a {@link Route} (client) or answered through
 * a {@link Responder} (server). docs/hbase-rpc.md describes the protocol.
 */
public final class FabricIpcBridge {
    private FabricIpcBridge() {
    }

    // ---------------------------------------------------------------- client

    /** Who a client connection talks to: HBase's {@code ConnectionId}, in public types. */
    public record Target(InetSocketAddress server, User ticket, String serviceName, byte[] connectionHeader) {
    }

    /** A fabric session carrying one client connection's calls. */
    public interface Route {
        /** Bytes the route writes before HBase's request bytes in each frame. */
        int prefixBytes();

        /**
         * Sends one frame ({@link #prefixBytes()} free bytes, then HBase's request as its socket path
         * frames it after the 4-byte length) and completes with HBase's response bytes (with the 4-byte
         * length), or fails with the IOException the caller should see.
         */
        CompletableFuture<byte[]> send(byte[] frame);
    }

    /**
     * HBase's Netty RPC client whose connections first ask {@link #route} for a fabric session: a route
     * carries the call over the fabric, a null one sends it on HBase's own socket path, a failed one
     * fails the call.
     */
    public abstract static class ClientBase extends NettyRpcClient {
        protected ClientBase(Configuration conf, String clusterId, SocketAddress localAddress,
                MetricsConnection metrics, Map<String, byte[]> connectionAttributes) {
            super(conf, clusterId, localAddress, metrics, connectionAttributes);
        }

        /** The fabric session for this target, null for the socket path; never called for {@link #socketOnlyService}. */
        protected abstract CompletableFuture<Route> route(Target target);

        /** A service always called over the socket (the discovery service itself). */
        protected abstract boolean socketOnlyService(String serviceName);

        /** A call went over the fabric (true) or the socket (false). */
        protected abstract void counted(boolean fabric);

        public Configuration configuration() {
            return conf;
        }

        @Override
        protected NettyRpcConnection createConnection(ConnectionId remoteId) throws IOException {
            return new ClientConnection(this, remoteId);
        }

        /**
         * HBase's blocking calls (HTable and the blocking stubs), as HBase's own channel makes them, except the
         * wait: a call that went over the fabric is waited for on its route's answer ({@link Route#send}'s
         * future, with a timeout), so that a route whose answer helps its waiter delivers the response on the
         * calling thread itself. HBase's channel waits on a monitor that only the fabric's completer thread
         * can notify: three threads woken per call instead of one.
         */
        @Override
        public BlockingRpcChannel createBlockingRpcChannel(ServerName sn, User ticket, int rpcTimeout) {
            RpcChannel channel = createRpcChannel(sn, ticket, rpcTimeout);
            return (md, controller, param, returnType) -> callBlocking(channel, md,
                    configureHBaseRpcController(controller, rpcTimeout), param, returnType);
        }

        private static Message callBlocking(RpcChannel channel, MethodDescriptor md, HBaseRpcController hrc,
                Message param, Message returnType) throws ServiceException {
            BlockingRpcCallback<Message> done = new BlockingRpcCallback<>();
            CompletableFuture<?>[] sent = new CompletableFuture<?>[1];
            SENT_ON_THIS_THREAD.set(sent);
            try {
                channel.callMethod(md, hrc, param, returnType, done);
            } finally {
                SENT_ON_THIS_THREAD.remove();
            }
            if (sent[0] != null) {
                awaitAnswer(sent[0], hrc);
            }
            Message value;
            try {
                value = done.get();
            } catch (IOException e) {
                throw new ServiceException(e);
            }
            if (hrc.failed()) {
                throw new ServiceException(hrc.getFailed());
            }
            return value;
        }

        /** Waits for the route's answer, in slices so that a call HBase ends otherwise (its timeout) is not held. */
        private static void awaitAnswer(CompletableFuture<?> answer, HBaseRpcController hrc) throws ServiceException {
            while (!answer.isDone() && !hrc.isCanceled()) {
                try {
                    answer.get(ANSWER_WAIT_SLICE_MS, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new ServiceException(new java.io.InterruptedIOException("interrupted waiting for " + hrc));
                } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
                    return; // HBase's callback has the failure
                } catch (java.util.concurrent.TimeoutException e) {
                    if (hrc.failed()) {
                        return; // HBase ended the call itself (its call timeout)
                    }
                }
            }
        }
    }

    /** How long a blocking caller waits on its answer before it checks whether HBase ended the call. */
    static final long ANSWER_WAIT_SLICE_MS = 20;

    /** Where {@link ClientConnection} leaves the answer of a call sent over a route by a blocking caller's thread. */
    private static final ThreadLocal<CompletableFuture<?>[]> SENT_ON_THIS_THREAD = new ThreadLocal<>();

    private static final class ClientConnection extends NettyRpcConnection {
        private final ClientBase owner;
        private final Target target;

        ClientConnection(ClientBase owner, ConnectionId remoteId) throws IOException {
            super(owner, remoteId);
            this.owner = owner;
            Address a = remoteId.getAddress();
            this.target = new Target(InetSocketAddress.createUnresolved(a.getHostName(), a.getPort()),
                    remoteId.getTicket(), remoteId.getServiceName(), getConnectionHeader().toByteArray());
        }

        @Override
        public void sendRequest(Call call, HBaseRpcController hrc) {
            if (call.isConnectionRegistryCall() || owner.socketOnlyService(target.serviceName())) {
                // Not counted: the registry preamble and discovery always take the socket path.
                super.sendRequest(call, hrc);
                return;
            }
            CompletableFuture<Route> route;
            try {
                route = owner.route(target);
            } catch (RuntimeException e) {
                call.setException(IPCUtil.toIOE(e));
                return;
            }
            route.whenComplete((r, error) -> {
                if (error != null) {
                    call.setException(IPCUtil.toIOE(unwrap(error)));
                } else if (r == null) {
                    socket(call, hrc);
                } else {
                    fabric(r, call, hrc);
                }
            });
        }

        private void socket(Call call, HBaseRpcController hrc) {
            owner.counted(false);
            super.sendRequest(call, hrc);
        }

        private void fabric(Route route, Call call, HBaseRpcController hrc) {
            try {
                fabricUnlessCancelled(route, call, hrc);
            } catch (IOException e) {
                call.setException(e);
            }
        }

        private void fabricUnlessCancelled(Route route, Call call, HBaseRpcController hrc) throws IOException {
            hrc.notifyOnCancel(ignored -> cancel(call), cancelled -> {
                if (cancelled) {
                    cancel(call);
                    return;
                }
                byte[] frame;
                // The request header carries the trace context current while it is built: the call's span,
                // as NettyRpcDuplexHandler.write makes it (this may run on the thread that finished discovery).
                try (Scope ignored = call.span.makeCurrent()) {
                    frame = frame(route.prefixBytes(), call);
                } catch (IOException | RuntimeException e) {
                    call.setException(IPCUtil.toIOE(e));
                    return;
                }
                owner.counted(true);
                scheduleTimeoutTask(call);
                CompletableFuture<byte[]> answer = route.send(frame);
                CompletableFuture<?>[] waiter = SENT_ON_THIS_THREAD.get();
                if (waiter != null && waiter[0] == null) {
                    waiter[0] = answer;
                }
                answer.whenComplete((response, error) -> {
                    if (error != null) {
                        call.setException(IPCUtil.toIOE(unwrap(error)));
                    } else {
                        complete(call, response);
                    }
                });
            });
        }

        private static void cancel(Call call) {
            call.setException(new CallCancelledException(call.toShortString() + ", waitTime="
                    + (EnvironmentEdgeManager.currentTime() - call.getStartTime()) + ", rpcTimeout=" + call.timeout));
        }

        /** HBase's request framing (NettyRpcDuplexHandler.writeRequest) after the route's prefix. */
        private byte[] frame(int prefixBytes, Call call) throws IOException {
            ByteBuffer cellBlock = cellBlockBuilder.buildCellBlock(codec, compressor, call.cells);
            CellBlockMeta meta = cellBlock == null ? null
                    : CellBlockMeta.newBuilder().setLength(cellBlock.remaining()).build();
            RequestHeader header = IPCUtil.buildRequestHeader(call, meta);
            int withoutCells = IPCUtil.getTotalSizeWhenWrittenDelimited(header, call.param);
            long total = (long) withoutCells + (cellBlock == null ? 0 : cellBlock.remaining());
            if (prefixBytes + total > Integer.MAX_VALUE - 16) {
                throw new DoNotRetryIOException("a call of " + total + " bytes");
            }
            byte[] frame = new byte[prefixBytes + (int) total];
            CodedOutputStream out = CodedOutputStream.newInstance(frame, prefixBytes, (int) total);
            out.writeUInt32NoTag(header.getSerializedSize());
            header.writeTo(out);
            if (call.param != null) {
                out.writeUInt32NoTag(call.param.getSerializedSize());
                call.param.writeTo(out);
            }
            if (cellBlock != null) {
                // Not writeRawBytes(ByteBuffer): for a heap buffer it writes the whole capacity, not position to limit.
                if (cellBlock.hasArray()) {
                    out.writeRawBytes(cellBlock.array(), cellBlock.arrayOffset() + cellBlock.position(), cellBlock.remaining());
                } else {
                    byte[] cells = new byte[cellBlock.remaining()];
                    cellBlock.duplicate().get(cells);
                    out.writeRawBytes(cells);
                }
            }
            out.checkNoSpaceLeft();
            call.callStats.setRequestSizeBytes(total);
            return frame;
        }

        /** HBase's own response reading (RpcConnection.readResponse), for this one call. */
        private void complete(Call call, byte[] response) {
            Map<Integer, Call> one = new HashMap<>(2);
            one.put(call.id, call);
            try {
                readResponse(new DataInputStream(new ByteArrayInputStream(response)), one, null, call::setException);
            } catch (IOException e) {
                call.setException(e);
                return;
            }
            if (!one.isEmpty()) {
                call.setException(new IOException("slipstream: the fabric response of call " + call.id
                        + " names another call"));
            }
        }

        private static Throwable unwrap(Throwable t) {
            while (t instanceof java.util.concurrent.CompletionException && t.getCause() != null) {
                t = t.getCause();
            }
            return t;
        }
    }

    // ---------------------------------------------------------------- server

    /**
     * The queues of a scheduler's general executor (where calls of no higher priority go), and why its handlers
     * cannot pull calls themselves, or null when they can: HBase's {@code SimpleRpcScheduler} whose general
     * executor is a {@code BalancedQueueRpcExecutor} ({@code hbase.ipc.server.callqueue.type=pluggable} without
     * the fast path or a read/write split), whose handlers wait in their queue's {@code take()}.
     */
    public record GeneralQueues(List<BlockingQueue<CallRunner>> queues, String whyNotPulled) {
    }

    /** {@code scheduler}'s general queues (HBase 2.6's {@code SimpleRpcScheduler.callExecutor}), empty if it has none. */
    public static GeneralQueues generalQueues(RpcScheduler scheduler) {
        if (!(scheduler instanceof SimpleRpcScheduler)) {
            return new GeneralQueues(List.of(), "the scheduler is a " + scheduler.getClass().getName());
        }
        RpcExecutor executor;
        try {
            Field field = SimpleRpcScheduler.class.getDeclaredField("callExecutor");
            field.setAccessible(true);
            executor = (RpcExecutor) field.get(scheduler);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return new GeneralQueues(List.of(), "SimpleRpcScheduler's general executor is out of reach: " + e);
        }
        // Exactly this class: the fast-path subclass hands calls to idle handlers without their queue's take(),
        // and the read/write executors serve several queues per handler group.
        String why = executor.getClass() == BalancedQueueRpcExecutor.class ? null
                : "its general executor " + executor.getName() + " is a " + executor.getClass().getSimpleName()
                        + ", whose handlers do not wait in their queue's take()";
        return new GeneralQueues(List.copyOf(executor.getQueues()), why);
    }

    /** Where a session's answers go: the fabric request the call came in. */
    public interface Responder {
        /** Bytes the responder writes before HBase's response (its authenticator) in what it is handed. */
        int prefixBytes();

        /** {@code response}: {@link #prefixBytes()} free bytes, then HBase's response with its 4-byte length. */
        void respond(byte[] response);
    }

    /** HBase's response bytes after {@code prefixBytes} free ones: one copy out of the chain, as getBytes() makes. */
    private static byte[] withPrefix(BufferChain chain, int prefixBytes) {
        byte[] bytes = new byte[prefixBytes + chain.size()];
        int offset = prefixBytes;
        for (ByteBuffer buffer : chain.getBuffers()) {
            int length = buffer.remaining();
            buffer.duplicate().get(bytes, offset, length);
            offset += length;
        }
        return bytes;
    }

    /**
     * A fabric session on the server: HBase's own connection state (service, codecs, user) fed by
     * frames instead of a socket, so that its calls are decoded, checked, queued and answered by HBase's
     * code ({@code ServerRpcConnection.processRequest}, the server's {@code RpcScheduler}).
     */
    public static final class ServerSession extends ServerRpcConnection {
        private Responder current;
        private volatile boolean open = true;

        public ServerSession(RpcServer server, InetAddress remote) {
            super(server);
            this.addr = remote;
            this.hostAddress = remote.getHostAddress();
            this.remotePort = 0;
        }

        /**
         * Reads the client's {@code ConnectionHeader} as HBase's socket path reads it, authenticated as the
         * socket connection {@code openedOver} (the OpenSession call) came on: under SIMPLE the header names
         * the user; under SASL (Kerberos, a delegation token) the user is the one SASL authenticated there,
         * and a header naming another is HBase's proxy-user case, checked by HBase's code. Then HBase's
         * connection authorisation ({@code hadoop.security.authorization}). Throws what HBase throws for a
         * bad header (unknown service or codec, unauthorised, impersonation refused), and
         * {@link AccessDeniedException} unless the session's user is exactly the socket connection's.
         */
        public synchronized void open(byte[] connectionHeader, RpcCall openedOver) throws IOException {
            if (!(openedOver instanceof ServerCall<?> call)) {
                throw new FatalConnectionException("slipstream: a fabric session opened outside a socket call");
            }
            ServerRpcConnection socket = call.connection;
            // What HBase's preamble and SASL exchange left on the socket connection, taken over instead of
            // run again: the session is an extension of that authenticated connection.
            this.provider = socket.provider;
            this.useSasl = socket.useSasl;
            this.authenticatedWithFallback = socket.authenticatedWithFallback;
            if (useSasl) {
                UserGroupInformation authenticated = socket.ugi;
                if (authenticated != null && authenticated.getRealUser() != null
                        && authenticated.getAuthenticationMethod() == UserGroupInformation.AuthenticationMethod.PROXY) {
                    // The socket header's proxy user: start from its real (authenticated) user, as HBase did.
                    authenticated = authenticated.getRealUser();
                }
                if (authenticated == null) {
                    throw new AccessDeniedException("slipstream: the socket connection has no authenticated user");
                }
                this.ugi = authenticated;
            }
            try {
                processOneRpc(new SingleByteBuff(ByteBuffer.wrap(connectionHeader)));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted opening a fabric session");
            }
            if (!sameUser(ugi, socket.ugi)) {
                throw new AccessDeniedException("slipstream: the connection header names user " + ugi
                        + ", the socket connection is " + socket.ugi);
            }
        }

        /** The same user name and the same real user (a proxy user acts for the same authenticated one). */
        private static boolean sameUser(UserGroupInformation a, UserGroupInformation b) {
            if (a == null || b == null) {
                return a == b;
            }
            UserGroupInformation realA = a.getRealUser();
            UserGroupInformation realB = b.getRealUser();
            return a.getUserName().equals(b.getUserName())
                    && (realA == null ? realB == null : realB != null && realA.getUserName().equals(realB.getUserName()));
        }

        /** The session's user, as HBase's calls of it see it (short name), or null. */
        public String userName() {
            return ugi == null ? null : ugi.getShortUserName();
        }

        /** How HBase authenticated the session's user (SIMPLE, KERBEROS, TOKEN, PROXY), or null. */
        public UserGroupInformation.AuthenticationMethod authenticationMethod() {
            return ugi == null ? null : ugi.getAuthenticationMethod();
        }

        public String serviceName() {
            return connectionHeader == null ? null : connectionHeader.getServiceName();
        }

        /**
         * One call: HBase's request bytes (a heap array the call may keep: HBase aliases its parameters and
         * cells into it). Queued on the server's scheduler, or answered at once with HBase's error.
         */
        public synchronized void process(byte[] frame, int offset, int length, Responder responder)
                throws IOException, InterruptedException {
            rpcServer.metrics.receivedBytes(length + 4);
            current = responder;
            try {
                processOneRpc(new SingleByteBuff(ByteBuffer.wrap(frame, offset, length).slice()));
            } finally {
                current = null;
            }
        }

        /** HBase's answer to a request over {@code hbase.ipc.max.request.size} (NettyRpcFrameDecoder's). */
        public synchronized void respondTooBig(byte[] frame, int offset, int length, String message, Responder responder)
                throws IOException {
            CodedInputStream in = CodedInputStream.newInstance(frame, offset, length);
            int headerSize = in.readRawVarint32();
            int limit = in.pushLimit(headerSize);
            RequestHeader header = RequestHeader.parseFrom(in);
            in.popLimit(limit);
            current = responder;
            try {
                SessionCall call = createCall(header.getCallId(), service, null, null, null, null, 0, addr, 0, null);
                RequestTooBigException tooBig = new RequestTooBigException(message);
                rpcServer.metrics.exception(tooBig);
                if (VersionInfoUtil.hasMinimumVersion(getVersionInfo(), RequestTooBigException.MAJOR_VERSION,
                        RequestTooBigException.MINOR_VERSION)) {
                    call.setResponse(null, null, tooBig, message);
                } else {
                    call.setResponse(null, null, new DoNotRetryIOException(message), message);
                }
                call.sendResponseIfReady();
            } finally {
                current = null;
            }
        }

        @Override
        public boolean isConnectionOpen() {
            return open;
        }

        @Override
        public synchronized void close() {
            open = false;
            disposeSasl();
            callCleanupIfNeeded();
        }

        @Override
        public SessionCall createCall(int id, BlockingService service, MethodDescriptor md, RequestHeader header,
                Message param, CellScanner cellScanner, long size, InetAddress remoteAddress, int timeout,
                RpcServer.CallCleanup reqCleanup) {
            if (current == null) {
                throw new IllegalStateException("slipstream: a call outside a fabric frame");
            }
            return new SessionCall(id, service, md, header, param, cellScanner, this, size, remoteAddress,
                    EnvironmentEdgeManager.currentTime(), timeout, rpcServer.bbAllocator, rpcServer.cellBlockBuilder,
                    reqCleanup, current);
        }

        @Override
        protected void doRespond(RpcResponse resp) {
            // Connection-level answers (a refused connection header): the caller of open() gets the exception.
            Responder r = current;
            if (r != null) {
                byte[] bytes = withPrefix(resp.getResponse(), r.prefixBytes());
                r.respond(bytes);
                rpcServer.metrics.sentBytes(bytes.length - r.prefixBytes());
            }
            resp.done();
        }
    }

    /** A call of a fabric session: answered on the fabric request it came in. */
    static final class SessionCall extends ServerCall<ServerSession> {
        private final Responder responder;

        SessionCall(int id, BlockingService service, MethodDescriptor md, RequestHeader header, Message param,
                CellScanner cellScanner, ServerSession connection, long size, InetAddress remoteAddress,
                long receiveTime, int timeout, ByteBuffAllocator bbAllocator, CellBlockBuilder cellBlockBuilder,
                RpcServer.CallCleanup reqCleanup, Responder responder) {
            super(id, service, md, header, param, cellScanner, connection, size, remoteAddress, receiveTime, timeout,
                    bbAllocator, cellBlockBuilder, reqCleanup);
            this.responder = responder;
        }

        @Override
        public synchronized void sendResponseIfReady() throws IOException {
            this.param = null;
            try {
                byte[] bytes = withPrefix(getResponse(), responder.prefixBytes());
                responder.respond(bytes);
                connection.rpcServer.metrics.sentBytes(bytes.length - responder.prefixBytes());
            } finally {
                done();
            }
        }
    }
}
