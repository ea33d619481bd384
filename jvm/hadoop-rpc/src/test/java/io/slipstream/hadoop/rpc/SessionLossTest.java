package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.jupiter.api.Test;

/**
 * A session the engine's server no longer holds (evicted at its session limit, or lost with a restart): the
 * client's next call is refused as of an unknown session, the server confirms over the socket path that it does
 * not hold the session, and the call goes once more, on a new session, and runs once (docs/hadoop-rpc.md,
 * message 7). Fallback never: nothing takes the socket path.
 */
class SessionLossTest {
    @Test
    void aCallOnAnEvictedSessionRunsOnceOnANewOne() throws Exception {
        Configuration conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        conf.setInt(RpcConf.SESSIONS_MAX, 1);
        conf.setLong(RpcConf.SESSION_IDLE_MS, 0);
        RPC.Server server = EchoProtocols.server(conf, 2);
        FabricRpcServer fabricServer = (FabricRpcServer) server;
        UserGroupInformation alice = UserGroupInformation.createRemoteUser("alice");
        try {
            FabricEcho proxy = alice.doAs((PrivilegedExceptionAction<FabricEcho>) () -> EchoProtocols.client(FabricEcho.class,
                    server.getListenerAddress(), conf));
            try {
                assertEquals("first", echo(alice, proxy, "first"));
                // Bob's session takes the only place: alice's, idle, is evicted.
                TestFrames.open(UserGroupInformation.createRemoteUser("bob"), conf, server.getListenerAddress(),
                        FabricEcho.class);
                assertEquals(1, fabricServer.fabricSessions());
                long received = fabricServer.fabricCallsReceived();
                long refused = fabricServer.fabricFramesRefused();
                long sent = FabricRpcEngine.fabricCalls();
                assertEquals("second", echo(alice, proxy, "second"));
                assertEquals(1, fabricServer.fabricFramesRefused() - refused, "the frame of the evicted session");
                assertEquals(1, fabricServer.fabricCallsReceived() - received, "the call ran once");
                assertEquals(1, FabricRpcEngine.fabricCalls() - sent);
            } finally {
                RPC.stopProxy(proxy);
            }
        } finally {
            server.stop();
        }
    }

    @Test
    void aCallToARestartedServerRunsOnceOnANewSession() throws Exception {
        Configuration conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        // The same socket and fabric ports after the restart, as a NameNode's configured ports are.
        int socketPort = freePort();
        conf.setInt(RpcConf.PORT, freePort());
        RPC.Server first = server(conf, socketPort);
        InetSocketAddress at = first.getListenerAddress();
        FabricEcho proxy = EchoProtocols.client(FabricEcho.class, at, conf);
        try {
            assertEquals("before", proxy.echo(null, EchoProtocols.echo("before")).getMessage());
            first.stop();
            RPC.Server second = server(conf, socketPort);
            try {
                FabricRpcServer restarted = (FabricRpcServer) second;
                long sent = FabricRpcEngine.fabricCalls();
                assertEquals("after", proxy.echo(null, EchoProtocols.echo("after")).getMessage());
                assertEquals(1, restarted.fabricFramesRefused(), "the frame of the session the restart lost");
                assertEquals(1, restarted.fabricCallsReceived(), "the call ran once");
                assertEquals(1, restarted.fabricSessions());
                assertEquals(1, FabricRpcEngine.fabricCalls() - sent);
            } finally {
                second.stop();
            }
        } finally {
            RPC.stopProxy(proxy);
            first.stop();
        }
    }

    private static String echo(UserGroupInformation user, FabricEcho proxy, String message) throws Exception {
        return user.doAs((PrivilegedExceptionAction<String>) () -> proxy.echo(null, EchoProtocols.echo(message))
                .getMessage());
    }

    private static RPC.Server server(Configuration conf, int port) throws Exception {
        RPC.Server server = new RPC.Builder(conf).setProtocol(FabricEcho.class)
                .setInstance(TestProtobufRpcProto.newReflectiveBlockingService(new EchoProtocols.Impl()))
                .setBindAddress("127.0.0.1").setPort(port).setNumHandlers(2).build();
        server.start();
        return server;
    }

    private static int freePort() throws Exception {
        try (ServerSocket socket = new ServerSocket(0)) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }
}
