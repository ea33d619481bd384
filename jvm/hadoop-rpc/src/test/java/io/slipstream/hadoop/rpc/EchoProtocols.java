package io.slipstream.hadoop.rpc;

import java.io.IOException;
import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RpcServerException;
import org.apache.hadoop.ipc.Server;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoRequestProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EmptyRequestProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EmptyResponseProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.SleepRequestProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.UserResponseProto;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.security.SaslRpcServer;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.BlockingService;
import org.apache.hadoop.thirdparty.protobuf.RpcController;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.apache.hadoop.util.StringUtils;

/**
 * Hadoop's own echo protocol ({@code TestRpcServiceProtos}, hadoop-common's test jar) under two client
 * interfaces of one protocol name: Hadoop picks the engine per interface class (JVM-wide), so
 * {@link FabricEcho} clients take {@link FabricRpcEngine} and {@link SocketEcho} clients vanilla
 * {@link ProtobufRpcEngine2}, against the same server.
 */
final class EchoProtocols {
    static final String NAME = "io.slipstream.hadoop.rpc.test.Echo";

    private EchoProtocols() {
    }

    @ProtocolInfo(protocolName = NAME, protocolVersion = 1)
    interface FabricEcho extends TestProtobufRpcProto.BlockingInterface {
    }

    @ProtocolInfo(protocolName = NAME, protocolVersion = 1)
    interface SocketEcho extends TestProtobufRpcProto.BlockingInterface {
    }

    /** The server side: echo, errors, sleep, and what the server saw of the call. */
    static final class Impl implements FabricEcho {
        /** Calls of {@link #sleep} running now, in this JVM's servers: a test waits for a handler to be busy. */
        static final java.util.concurrent.atomic.AtomicInteger SLEEPING = new java.util.concurrent.atomic.AtomicInteger();

        @Override
        public EmptyResponseProto ping(RpcController c, EmptyRequestProto r) {
            return EmptyResponseProto.getDefaultInstance();
        }

        /** The thread that ran the last echo. */
        static final java.util.concurrent.atomic.AtomicReference<String> ECHO_THREAD =
                new java.util.concurrent.atomic.AtomicReference<>();

        @Override
        public EchoResponseProto echo(RpcController c, EchoRequestProto r) {
            ECHO_THREAD.set(Thread.currentThread().getName());
            return EchoResponseProto.newBuilder().setMessage(r.getMessage()).build();
        }

        @Override
        public EmptyResponseProto error(RpcController c, EmptyRequestProto r) throws ServiceException {
            throw new ServiceException("error", new RpcServerException("error from the echo server"));
        }

        @Override
        public EmptyResponseProto error2(RpcController c, EmptyRequestProto r) throws ServiceException {
            throw new ServiceException("error", new IOException("application error from the echo server"));
        }

        @Override
        public EmptyResponseProto slowPing(RpcController c, org.apache.hadoop.ipc.protobuf.TestProtos.SlowPingRequestProto r) {
            return EmptyResponseProto.getDefaultInstance();
        }

        @Override
        public org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto2 echo2(RpcController c,
                org.apache.hadoop.ipc.protobuf.TestProtos.EchoRequestProto2 r) {
            return org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto2.newBuilder()
                    .addAllMessage(r.getMessageList()).build();
        }

        @Override
        public org.apache.hadoop.ipc.protobuf.TestProtos.AddResponseProto add(RpcController c,
                org.apache.hadoop.ipc.protobuf.TestProtos.AddRequestProto r) {
            return org.apache.hadoop.ipc.protobuf.TestProtos.AddResponseProto.newBuilder().setResult(r.getParam1() + r.getParam2())
                    .build();
        }

        @Override
        public org.apache.hadoop.ipc.protobuf.TestProtos.AddResponseProto add2(RpcController c,
                org.apache.hadoop.ipc.protobuf.TestProtos.AddRequestProto2 r) {
            int sum = 0;
            for (int v : r.getParamsList()) {
                sum += v;
            }
            return org.apache.hadoop.ipc.protobuf.TestProtos.AddResponseProto.newBuilder().setResult(sum).build();
        }

        @Override
        public EmptyResponseProto testServerGet(RpcController c, EmptyRequestProto r) {
            return EmptyResponseProto.getDefaultInstance();
        }

        @Override
        public org.apache.hadoop.ipc.protobuf.TestProtos.ExchangeResponseProto exchange(RpcController c,
                org.apache.hadoop.ipc.protobuf.TestProtos.ExchangeRequestProto r) {
            return org.apache.hadoop.ipc.protobuf.TestProtos.ExchangeResponseProto.newBuilder().addAllValues(r.getValuesList())
                    .build();
        }

        @Override
        public EmptyResponseProto sleep(RpcController c, SleepRequestProto r) throws ServiceException {
            SLEEPING.incrementAndGet();
            try {
                Thread.sleep(r.getMilliSeconds());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ServiceException(e);
            } finally {
                SLEEPING.decrementAndGet();
            }
            return EmptyResponseProto.getDefaultInstance();
        }

        @Override
        public EmptyResponseProto lockAndSleep(RpcController c, SleepRequestProto r) throws ServiceException {
            return sleep(c, r);
        }

        /** As Hadoop's TestRpcBase: how the user the handler runs as ({@code doAs}) was authenticated. */
        @Override
        public org.apache.hadoop.ipc.protobuf.TestProtos.AuthMethodResponseProto getAuthMethod(RpcController c,
                EmptyRequestProto r) throws ServiceException {
            try {
                SaslRpcServer.AuthMethod method = UserGroupInformation.getCurrentUser().getAuthenticationMethod().getAuthMethod();
                return org.apache.hadoop.ipc.protobuf.TestProtos.AuthMethodResponseProto.newBuilder().setCode(method.code)
                        .setMechanismName(method.name()).build();
            } catch (IOException e) {
                throw new ServiceException(e);
            }
        }

        /**
         * The caller as the server sees it: "name shortName authMethod realUser|- runAs", from
         * {@code Server.getRemoteUser()} and the user the handler runs as.
         */
        @Override
        public UserResponseProto getAuthUser(RpcController c, EmptyRequestProto r) throws ServiceException {
            UserGroupInformation remote = Server.getRemoteUser();
            try {
                return UserResponseProto.newBuilder().setUser(remote.getUserName() + " " + remote.getShortUserName() + " "
                        + remote.getAuthenticationMethod() + " "
                        + (remote.getRealUser() == null ? "-" : remote.getRealUser().getUserName()) + " "
                        + UserGroupInformation.getCurrentUser().getUserName()).build();
            } catch (IOException e) {
                throw new ServiceException(e);
            }
        }

        @Override
        public EchoResponseProto echoPostponed(RpcController c, EchoRequestProto r) {
            return echo(c, r);
        }

        @Override
        public EmptyResponseProto sendPostponed(RpcController c, EmptyRequestProto r) {
            return EmptyResponseProto.getDefaultInstance();
        }

        /** What the server saw: "callId retryCount clientIdHex protocol". */
        @Override
        public UserResponseProto getCurrentUser(RpcController c, EmptyRequestProto r) {
            return UserResponseProto.newBuilder().setUser(Server.getCallId() + " " + Server.getCallRetryCount() + " "
                    + StringUtils.byteToHexString(Server.getClientId()) + " " + Server.getProtocol()).build();
        }

        @Override
        public UserResponseProto getServerRemoteUser(RpcController c, EmptyRequestProto r) {
            return user(Server.getRemoteUser());
        }

        private static UserResponseProto user(UserGroupInformation ugi) {
            return UserResponseProto.newBuilder().setUser(ugi == null ? "(none)" : ugi.getUserName()).build();
        }
    }

    /** A configuration whose {@link FabricEcho} takes the fabric engine. */
    static Configuration conf() {
        Configuration conf = new Configuration(false);
        RPC.setProtocolEngine(conf, FabricEcho.class, FabricRpcEngine.class);
        RPC.setProtocolEngine(conf, SocketEcho.class, ProtobufRpcEngine2.class);
        RPC.setProtocolEngine(conf, SecureEcho.class, FabricRpcEngine.class);
        return conf;
    }

    /** An echo server on loopback, built by the engine {@code conf} names for {@link FabricEcho}. */
    static RPC.Server server(Configuration conf, int handlers) throws IOException {
        return server(conf, handlers, FabricEcho.class, null);
    }

    /** The same for {@code protocol} (an interface of the echo protocol), with a secret manager for tokens or none. */
    static RPC.Server server(Configuration conf, int handlers, Class<?> protocol,
            org.apache.hadoop.security.token.SecretManager<?> secretManager) throws IOException {
        BlockingService service = TestProtobufRpcProto.newReflectiveBlockingService(new Impl());
        RPC.Server server = new RPC.Builder(conf).setProtocol(protocol).setInstance(service)
                .setBindAddress("127.0.0.1").setPort(0).setNumHandlers(handlers).setSecretManager(secretManager).build();
        server.start();
        return server;
    }

    static <T> T client(Class<T> type, InetSocketAddress server, Configuration conf) throws IOException {
        return RPC.getProxy(type, 1, server, conf);
    }

    /**
     * One echo as {@code user} through a proxy of {@code type} (an interface of the echo protocol); the
     * proxy's checked exceptions (ServiceException) come out unwrapped.
     */
    static String echoAs(String user, Class<? extends TestProtobufRpcProto.BlockingInterface> type,
            InetSocketAddress server, Configuration conf, String message) throws Exception {
        try {
            return UserGroupInformation.createRemoteUser(user).doAs(
                    (java.security.PrivilegedExceptionAction<String>) () -> {
                        TestProtobufRpcProto.BlockingInterface proxy = client(type, server, conf);
                        try {
                            return proxy.echo(null, echo(message)).getMessage();
                        } finally {
                            RPC.stopProxy(proxy);
                        }
                    });
        } catch (java.lang.reflect.UndeclaredThrowableException e) {
            // doAs wraps checked exceptions other than IOException: the proxy's ServiceException.
            throw (Exception) e.getCause();
        }
    }

    static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }

    static final EmptyRequestProto EMPTY = EmptyRequestProto.getDefaultInstance();
}
