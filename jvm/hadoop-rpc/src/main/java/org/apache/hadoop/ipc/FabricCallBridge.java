package org.apache.hadoop.ipc;

import java.io.IOException;
import java.lang.reflect.UndeclaredThrowableException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.ipc.ProcessingDetails.Timing;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcRequestHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto.RpcErrorCodeProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto.RpcStatusProto;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.ByteString;
import org.apache.hadoop.util.StringUtils;
import org.apache.hadoop.util.Time;

/**
 * The one file of Slipstream in Hadoop's {@code org.apache.hadoop.ipc} package: a call that arrived over
 * the fabric, put on the server's own call queue ({@link Server#queueCall}) and run by its own handler
 * threads, as the socket path's package-private {@code RpcCall} is. It needs the package for
 * {@code Server.Call}'s constructor with call id, retry count and client id (the NameNode's retry cache
 * keys on them), for {@code ProtobufRpcEngine2.RpcProtobufRequest} (what the server's invoker expects),
 * for {@code Call.doResponse}, {@code getMaxIdleTime} and {@code logException}, for
 * {@code WritableRpcEngine.Invocation} (the discovery call, on a connection of another protocol) and
 * {@code Server.getProtocolClass} (service-level authorization of a session). Everything else lives in
 * {@code io.slipstream.hadoop.rpc}.
 */
public final class FabricCallBridge {
    private FabricCallBridge() {
    }

    /**
     * Where a call's answer goes: the fabric request it came in. The responder puts its own bytes (the
     * server's MAC, which binds the answer to its frame) before Hadoop's framing, in room the bridge leaves at
     * the start of the array it builds the answer in.
     */
    public interface Responder {
        /** Bytes the responder writes before Hadoop's response in what it is handed. */
        int prefixBytes();

        /** {@code response}: {@link #prefixBytes()} free bytes, then Hadoop's response framing without its 4-byte length. */
        void respond(byte[] response);
    }

    /** The socket path's frame length at the start of a {@link ResponseBuffer}'s bytes; not sent on the fabric. */
    private static final int FRAMING_BYTES = 4;

    /**
     * A {@link ResponseBuffer} whose bytes start with {@code prefixBytes} free ones: its own 4 (the socket path's
     * frame length, unused here) and zeros after them. The answer is built behind the responder's room, so
     * {@link #bytes} hands it over with no copy beyond {@code toByteArray}'s own.
     */
    private static ResponseBuffer responseBuffer(int prefixBytes) throws IOException {
        ResponseBuffer out = new ResponseBuffer();
        if (prefixBytes > FRAMING_BYTES) {
            out.write(new byte[prefixBytes - FRAMING_BYTES]);
        }
        return out;
    }

    /** What {@code out} (from {@link #responseBuffer}) holds: exactly {@code prefixBytes} free bytes, then the answer. */
    private static byte[] bytes(ResponseBuffer out, int prefixBytes) {
        byte[] framed = out.toByteArray();
        // Less room than the framing bytes (no responder of the engine asks for so little) costs one more copy.
        return prefixBytes >= FRAMING_BYTES ? framed
                : java.util.Arrays.copyOfRange(framed, FRAMING_BYTES - prefixBytes, framed.length);
    }

    /** The server address of a client connection id (package-private in Hadoop). */
    public static java.net.InetSocketAddress address(Client.ConnectionId id) {
        return id.getAddress();
    }

    /** The protocol class a client connection id is for (its {@code @KerberosInfo} and {@code @TokenInfo} drive SASL). */
    public static Class<?> protocol(Client.ConnectionId id) {
        return id.getProtocol();
    }

    /** The user a client connection id calls as. */
    public static UserGroupInformation ticket(Client.ConnectionId id) {
        return id.getTicket();
    }

    /** The RPC timeout of a client connection id, in ms (0: none). */
    public static int rpcTimeoutMs(Client.ConnectionId id) {
        return id.getRpcTimeout();
    }

    /** Clients of {@link #callWritable}: Writable responses ({@code ObjectWritable}), apart from the engines' own. */
    private static final ClientCache WRITABLE_CLIENTS = new ClientCache();

    /**
     * {@code WritableRpcEngine.Invocation(Method, Object[])}: Hadoop's own encoding of a Writable call, which
     * its server decodes. The class is private to {@code WritableRpcEngine}, so it is reached by reflection,
     * once, in a holder of its own (a Hadoop without it fails discovery, not the bridge's server side).
     */
    private static final class Invocation {
        static final java.lang.reflect.Constructor<?> CONSTRUCTOR;

        static {
            try {
                CONSTRUCTOR = Class.forName(WritableRpcEngine.class.getName() + "$Invocation")
                        .getDeclaredConstructor(java.lang.reflect.Method.class, Object[].class);
                CONSTRUCTOR.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new ExceptionInInitializerError(e);
            }
        }
    }

    /**
     * Calls {@code method} of a {@code WritableRpcEngine} protocol (the fabric's discovery) on a socket
     * connection made for {@code protocol}, as {@code ticket}: Hadoop authenticates that connection as it
     * would one for the protocol's own calls (the protocol's {@code @KerberosInfo} names the server's
     * principal, its {@code @TokenInfo} selects the delegation token), which a connection for the discovery
     * protocol could not (it has neither, and cannot know which protocol's to borrow). The server dispatches
     * a Writable call by the method's declaring protocol, not the connection's, so this reaches the discovery
     * registered there. Returns the method's value; throws {@link RemoteException} for the server's errors.
     */
    public static Object callWritable(Configuration conf, java.net.InetSocketAddress server, Class<?> protocol,
            UserGroupInformation ticket, int rpcTimeoutMs, java.lang.reflect.Method method, Object... args) throws IOException {
        Client client = WRITABLE_CLIENTS.getClient(conf, org.apache.hadoop.net.NetUtils.getDefaultSocketFactory(conf),
                org.apache.hadoop.io.ObjectWritable.class);
        try {
            Client.ConnectionId id = Client.ConnectionId.getConnectionId(server, protocol, ticket, rpcTimeoutMs, null, conf);
            Writable invocation;
            try {
                invocation = (Writable) Invocation.CONSTRUCTOR.newInstance(method, args);
            } catch (ReflectiveOperationException | LinkageError e) {
                throw new IOException("slipstream: cannot encode a Writable call of " + method, e);
            }
            Writable value = client.call(RPC.RpcKind.RPC_WRITABLE, invocation, id, null);
            return ((org.apache.hadoop.io.ObjectWritable) value).get();
        } finally {
            WRITABLE_CLIENTS.stopClient(client);
        }
    }

    /**
     * Hadoop's service-level authorization of {@code user} for {@code protocolName} on {@code server}, as
     * {@code Server.authorize} does it for a socket connection (that method is private): the protocol class
     * by name, then the server's {@code ServiceAuthorizationManager} (its ACLs, as last refreshed). The
     * caller checks {@code hadoop.security.authorization} first.
     */
    public static void authorize(Server server, Configuration conf, UserGroupInformation user, String protocolName,
            InetAddress address) throws org.apache.hadoop.security.authorize.AuthorizationException {
        Class<?> protocol;
        try {
            protocol = Server.getProtocolClass(protocolName, conf);
        } catch (ClassNotFoundException e) {
            throw new org.apache.hadoop.security.authorize.AuthorizationException("Unknown protocol: " + protocolName);
        }
        server.getServiceAuthorizationManager().authorize(user, protocol, conf, address);
    }

    /** Hadoop's {@link RpcException} (its constructor is package-private), for the errors its client raises. */
    public static RpcException rpcException(String message) {
        return new RpcException(message);
    }

    /** The frame cannot be read: nothing was queued, and the caller closes the session. */
    public static final class MalformedCallException extends IOException {
        private static final long serialVersionUID = 1L;

        MalformedCallException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The call names a protocol its session was not opened for: nothing was queued, the session stays. */
    public static final class WrongProtocolException extends IOException {
        private static final long serialVersionUID = 1L;

        WrongProtocolException(String protocol) {
            super(protocol);
        }
    }

    /**
     * Reads the call in {@code body} (an {@code RpcRequestHeaderProto}, then the request as Hadoop's
     * socket path frames it, both length-delimited) and queues it on {@code server} as {@code user}.
     * Returns once queued; the answer goes to {@code responder} from a handler thread. A full call queue
     * (or the scheduler's back-off) is answered at once with Hadoop's error. Throws
     * {@link MalformedCallException} when the frame cannot be read, {@link WrongProtocolException} when
     * the call's protocol is not {@code sessionProtocol}.
     */
    public static void queue(Server server, AlignmentContext alignmentContext, Configuration conf, UserGroupInformation user,
            InetAddress remoteAddress, String sessionProtocol, byte[] body, int offset, int length, Responder responder)
            throws MalformedCallException, WrongProtocolException, InterruptedException {
        RpcRequestHeaderProto header;
        ProtobufRpcEngine2.RpcProtobufRequest request;
        String method;
        String protocol;
        try {
            RpcWritable.Buffer buffer = RpcWritable.Buffer.wrap(ByteBuffer.wrap(body, offset, length));
            header = buffer.getValue(RpcRequestHeaderProto.getDefaultInstance());
            if (header.getRpcKind() != org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcKindProto.RPC_PROTOCOL_BUFFER) {
                throw new IOException("call of kind " + header.getRpcKind() + ": only RPC_PROTOCOL_BUFFER is carried");
            }
            if (header.getClientId().size() != ClientId.BYTE_LENGTH) {
                throw new IOException("client id of " + header.getClientId().size() + " bytes");
            }
            request = buffer.newInstance(ProtobufRpcEngine2.RpcProtobufRequest.class, conf);
            // Decoded here, not on the handler, so a malformed request header fails the session at once.
            method = request.getRequestHeader().getMethodName();
            protocol = request.getRequestHeader().getDeclaringClassProtocolName();
        } catch (IOException | RuntimeException e) {
            throw new MalformedCallException("malformed fabric call frame: " + e, e);
        }
        if (!sessionProtocol.equals(protocol)) {
            throw new WrongProtocolException(protocol);
        }
        FabricCall call = new FabricCall(server, alignmentContext, header, request, user, remoteAddress, protocol, responder);
        server.getRpcMetrics().incrReceivedBytes(length);
        try {
            call.setPriorityLevel(server.getPriorityLevel(call));
            call.markCallCoordinated(false);
            if (alignmentContext != null && alignmentContext.isCoordinatedCall(protocol, method)) {
                call.markCallCoordinated(true);
                call.setClientStateId(alignmentContext.receiveRequestState(header, server.getMaxIdleTime()));
                if (header.hasRouterFederatedState()) {
                    call.setFederatedNamespaceState(header.getRouterFederatedState());
                }
            }
            server.queueCall(call);
        } catch (IOException e) {
            // A full queue or the scheduler's back-off (RetriableException): the caller sees it, as on sockets.
            call.answerError(RpcStatusProto.ERROR, e);
        }
    }

    /**
     * An error answer for a call that was not run (full queue, the scheduler's back-off, an aborted response),
     * in Hadoop's response framing after {@code prefixBytes} free bytes.
     */
    private static byte[] errorResponse(Server server, AlignmentContext alignmentContext, int callId, int retryCount,
            byte[] clientId, RpcStatusProto status, Throwable error, int prefixBytes) throws IOException {
        RpcResponseHeaderProto.Builder b = RpcResponseHeaderProto.newBuilder()
                .setCallId(callId).setRetryCount(retryCount).setStatus(status)
                .setServerIpcVersionNum(RpcConstants.CURRENT_VERSION)
                .setClientId(ByteString.copyFrom(clientId))
                .setErrorDetail(error instanceof RpcServerException ? ((RpcServerException) error).getRpcErrorCodeProto()
                        : RpcErrorCodeProto.ERROR_RPC_SERVER)
                .setExceptionClassName(error.getClass().getName())
                .setErrorMsg(StringUtils.stringifyException(error));
        if (alignmentContext != null) {
            alignmentContext.updateResponseState(b);
        }
        ResponseBuffer out = responseBuffer(prefixBytes);
        b.build().writeDelimitedTo(out);
        return bytes(out, prefixBytes);
    }

    /** A call that came over the fabric: run by a handler like the socket path's {@code RpcCall}. */
    static final class FabricCall extends Server.Call {
        private final Server server;
        private final AlignmentContext alignmentContext;
        private final Writable request;
        private final UserGroupInformation user;
        private final InetAddress remoteAddress;
        private final String protocol;
        private final Responder responder;

        FabricCall(Server server, AlignmentContext alignmentContext, RpcRequestHeaderProto header, Writable request,
                UserGroupInformation user, InetAddress remoteAddress, String protocol, Responder responder) {
            super(header.getCallId(), header.getRetryCount(), RPC.RpcKind.RPC_PROTOCOL_BUFFER, header.getClientId().toByteArray(),
                    null, header.hasCallerContext() ? new CallerContext.Builder(header.getCallerContext().getContext())
                            .setSignature(header.getCallerContext().hasSignature()
                                    ? header.getCallerContext().getSignature().toByteArray() : null).build() : null);
            this.server = server;
            this.alignmentContext = alignmentContext;
            this.request = request;
            this.user = user;
            this.remoteAddress = remoteAddress;
            this.protocol = protocol;
            this.responder = responder;
        }

        @Override
        public String getProtocol() {
            return "fabric";
        }

        @Override
        public UserGroupInformation getRemoteUser() {
            return user;
        }

        @Override
        public InetAddress getHostInetAddress() {
            return remoteAddress;
        }

        @Override
        public Void run() throws Exception {
            long startNanos = Time.monotonicNowNanos();
            Writable value = null;
            Throwable error = null;
            try {
                value = server.call(RPC.RpcKind.RPC_PROTOCOL_BUFFER, protocol, request, getTimestampNanos());
            } catch (Throwable t) {
                error = t instanceof UndeclaredThrowableException ? t.getCause() : t;
                server.logException(Server.LOG, error, this);
            }
            if (isResponseDeferred()) {
                return null;
            }
            ProcessingDetails details = getProcessingDetails();
            long deltaNanos = Time.monotonicNowNanos() - startNanos;
            details.set(Timing.PROCESSING, deltaNanos, TimeUnit.NANOSECONDS);
            deltaNanos -= details.get(Timing.LOCKWAIT, TimeUnit.NANOSECONDS);
            deltaNanos -= details.get(Timing.LOCKSHARED, TimeUnit.NANOSECONDS);
            deltaNanos -= details.get(Timing.LOCKEXCLUSIVE, TimeUnit.NANOSECONDS);
            details.set(Timing.LOCKFREE, deltaNanos, TimeUnit.NANOSECONDS);
            long responseStartNanos = Time.monotonicNowNanos();
            respond(value, error);
            details.set(Timing.RESPONSE, Time.monotonicNowNanos() - responseStartNanos, TimeUnit.NANOSECONDS);
            return null;
        }

        @Override
        void doResponse(Throwable t, RpcStatusProto status) throws IOException {
            // Reached through abortResponse (e.g. a requeue that overflowed): answer with the error.
            answerError(status == null ? RpcStatusProto.FATAL : status, t);
        }

        void answerError(RpcStatusProto status, Throwable t) {
            try {
                send(errorResponse(server, alignmentContext, callId, retryCount, clientId, status, t,
                        responder.prefixBytes()));
            } catch (IOException | RuntimeException e) {
                Server.LOG.warn("Cannot answer " + this, e);
            }
        }

        @Override
        public void setDeferredResponse(Writable response) {
            respond(response, null);
        }

        @Override
        public void setDeferredError(Throwable t) {
            respond(null, t == null ? new IOException("User code indicated an error without an exception") : t);
        }

        /** Hadoop's framing: the response header, then (on success) the value, both length-delimited. */
        private void respond(Writable value, Throwable error) {
            RpcResponseHeaderProto.Builder b = RpcResponseHeaderProto.newBuilder()
                    .setCallId(callId).setRetryCount(retryCount)
                    .setServerIpcVersionNum(RpcConstants.CURRENT_VERSION)
                    .setClientId(ByteString.copyFrom(clientId));
            if (error == null) {
                b.setStatus(RpcStatusProto.SUCCESS);
            } else if (error instanceof RpcServerException) {
                RpcServerException rse = (RpcServerException) error;
                b.setStatus(rse.getRpcStatusProto()).setErrorDetail(rse.getRpcErrorCodeProto());
            } else {
                b.setStatus(RpcStatusProto.ERROR).setErrorDetail(RpcErrorCodeProto.ERROR_APPLICATION);
            }
            if (error != null) {
                String className = error.getClass().getName();
                String text = StringUtils.stringifyException(error);
                // As the socket path: no redundant class name at the start of the trace.
                if (text.startsWith(className + ": ")) {
                    text = text.substring(className.length() + 2);
                }
                b.setExceptionClassName(className).setErrorMsg(text);
            }
            if (alignmentContext != null) {
                alignmentContext.updateResponseState(b);
            }
            try {
                int prefixBytes = responder.prefixBytes();
                ResponseBuffer out = responseBuffer(prefixBytes);
                b.build().writeDelimitedTo(out);
                if (error == null && value != null) {
                    RpcWritable.wrap(value).writeTo(out);
                }
                send(bytes(out, prefixBytes));
            } catch (IOException | RuntimeException e) {
                Server.LOG.warn("Error serializing the fabric response of " + this, e);
                try {
                    send(errorResponse(server, alignmentContext, callId, retryCount, clientId, RpcStatusProto.ERROR, e,
                            responder.prefixBytes()));
                } catch (IOException | RuntimeException again) {
                    // The request is gone (its node closed with the server): nobody waits for this answer.
                    Server.LOG.warn("Cannot answer " + this + ": " + again);
                }
            }
        }

        /** {@code response}: the responder's room, then Hadoop's framing (what the metrics count, as on sockets). */
        private void send(byte[] response) {
            server.getRpcMetrics().incrSentBytes(response.length - responder.prefixBytes());
            responder.respond(response);
        }

        @Override
        public String toString() {
            return "FabricCall#" + callId + " Retry#" + retryCount + " " + request + " from "
                    + (remoteAddress == null ? "?" : remoteAddress.getHostAddress()) + " over the fabric";
        }
    }
}
