package io.slipstream.hadoop.rpc;

import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.net.SocketFactory;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.retry.RetryPolicy;
import org.apache.hadoop.ipc.AlignmentContext;
import org.apache.hadoop.ipc.Client.ConnectionId;
import org.apache.hadoop.ipc.FabricCallBridge;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.ProtocolProxy;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.ProtobufRpcEngine2Protos.RequestHeaderProto;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.SecretManager;
import org.apache.hadoop.security.token.TokenIdentifier;
import org.apache.hadoop.thirdparty.protobuf.CodedOutputStream;
import org.apache.hadoop.thirdparty.protobuf.Message;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;

/**
 * Hadoop's {@link ProtobufRpcEngine2} with the fabric beside its sockets, chosen per protocol:
 * {@code rpc.engine.<protocol PB class>=io.slipstream.hadoop.rpc.FabricRpcEngine} (e.g. HDFS's
 * {@code org.apache.hadoop.hdfs.protocolPB.ClientNamenodeProtocolPB}). Servers are
 * {@link FabricRpcServer}s (dual-stack); clients send a call over the fabric when the server offers it
 * and over the socket path otherwise ({@code slipstream.rpc.fallback}). docs/hadoop-rpc.md has the
 * message sequence.
 */
public class FabricRpcEngine extends ProtobufRpcEngine2 {

    /** Calls this JVM's clients sent over the fabric. */
    public static long fabricCalls() {
        return FabricRpcClient.INSTANCE.fabricCalls.get();
    }

    /** Calls this JVM's clients of this engine sent over sockets because the fabric was not offered or allowed. */
    public static long socketCalls() {
        return FabricRpcClient.INSTANCE.socketCalls.get();
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> ProtocolProxy<T> getProxy(Class<T> protocol, long clientVersion, InetSocketAddress addr,
            UserGroupInformation ticket, Configuration conf, SocketFactory factory, int rpcTimeout,
            RetryPolicy connectionRetryPolicy, AtomicBoolean fallbackToSimpleAuth, AlignmentContext alignmentContext)
            throws IOException {
        FabricInvoker invoker = new FabricInvoker(protocol, addr, ticket, conf, factory, rpcTimeout, connectionRetryPolicy,
                fallbackToSimpleAuth, alignmentContext);
        return new ProtocolProxy<>(protocol, (T) Proxy.newProxyInstance(protocol.getClassLoader(), new Class<?>[] {protocol},
                invoker), false);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> ProtocolProxy<T> getProxy(Class<T> protocol, long clientVersion, ConnectionId connId, Configuration conf,
            SocketFactory factory, AlignmentContext alignmentContext) throws IOException {
        FabricInvoker invoker = new FabricInvoker(protocol, connId, conf, factory, alignmentContext);
        return new ProtocolProxy<>(protocol, (T) Proxy.newProxyInstance(protocol.getClassLoader(), new Class<?>[] {protocol},
                invoker), false);
    }

    @Override
    public RPC.Server getServer(Class<?> protocol, Object protocolImpl, String bindAddress, int port, int numHandlers,
            int numReaders, int queueSizePerHandler, boolean verbose, Configuration conf,
            SecretManager<? extends TokenIdentifier> secretManager, String portRangeConfig,
            AlignmentContext alignmentContext) throws IOException {
        return new FabricRpcServer(protocol, protocolImpl, conf, bindAddress, port, numHandlers, numReaders,
                queueSizePerHandler, verbose, secretManager, portRangeConfig, alignmentContext);
    }

    /** Hadoop's invoker, which keeps the socket path; a call goes over the fabric first when it can. */
    static final class FabricInvoker extends ProtobufRpcEngine2.Invoker {
        private final RpcConf rpcConf;
        private final Configuration conf;
        private final AlignmentContext alignmentContext;
        private final Map<String, byte[]> methodHeaders = new ConcurrentHashMap<>();
        private final Map<String, Message> responsePrototypes = new ConcurrentHashMap<>();

        FabricInvoker(Class<?> protocol, InetSocketAddress addr, UserGroupInformation ticket, Configuration conf,
                SocketFactory factory, int rpcTimeout, RetryPolicy connectionRetryPolicy, AtomicBoolean fallbackToSimpleAuth,
                AlignmentContext alignmentContext) throws IOException {
            super(protocol, addr, ticket, conf, factory, rpcTimeout, connectionRetryPolicy, fallbackToSimpleAuth,
                    alignmentContext);
            this.rpcConf = new RpcConf(conf);
            this.conf = conf;
            this.alignmentContext = alignmentContext;
        }

        FabricInvoker(Class<?> protocol, ConnectionId connId, Configuration conf, SocketFactory factory,
                AlignmentContext alignmentContext) {
            super(protocol, connId, conf, factory, alignmentContext);
            this.rpcConf = new RpcConf(conf);
            this.conf = conf;
            this.alignmentContext = alignmentContext;
        }

        @Override
        public Message invoke(Object proxy, Method method, Object[] args) throws ServiceException {
            if (args == null || args.length != 2 || !(args[1] instanceof Message)) {
                return super.invoke(proxy, method, args); // Hadoop's own checks and errors
            }
            ConnectionId id = getConnectionId();
            Message response;
            try {
                response = FabricRpcClient.INSTANCE.call(rpcConf, conf, FabricCallBridge.address(id),
                        FabricCallBridge.protocol(id), getProtocolName(), FabricCallBridge.ticket(id),
                        FabricCallBridge.rpcTimeoutMs(id), methodHeader(method),
                        (Message) args[1], responsePrototype(method), alignmentContext);
            } catch (Throwable e) {
                throw new ServiceException(e);
            }
            return response != null ? response : super.invoke(proxy, method, args);
        }

        /** The {@code RequestHeaderProto} of {@code method}, length-delimited, as the socket path sends it. */
        private byte[] methodHeader(Method method) {
            return methodHeaders.computeIfAbsent(method.getName(), name -> {
                RequestHeaderProto header = RequestHeaderProto.newBuilder().setMethodName(name)
                        .setDeclaringClassProtocolName(getProtocolName())
                        .setClientProtocolVersion(getClientProtocolVersion()).build();
                int size = header.getSerializedSize();
                byte[] bytes = new byte[CodedOutputStream.computeUInt32SizeNoTag(size) + size];
                CodedOutputStream out = CodedOutputStream.newInstance(bytes);
                try {
                    out.writeUInt32NoTag(size);
                    header.writeTo(out);
                } catch (IOException e) {
                    throw new IllegalStateException("a byte array refused a write", e);
                }
                return bytes;
            });
        }

        private Message responsePrototype(Method method) throws ServiceException {
            Message prototype = responsePrototypes.get(method.getName());
            if (prototype == null) {
                try {
                    prototype = (Message) method.getReturnType().getMethod("getDefaultInstance").invoke(null);
                } catch (ReflectiveOperationException | ClassCastException e) {
                    throw new ServiceException(e);
                }
                responsePrototypes.put(method.getName(), prototype);
            }
            return prototype;
        }
    }
}
