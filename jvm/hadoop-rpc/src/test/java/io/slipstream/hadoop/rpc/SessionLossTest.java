package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.util.Random;
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
        int socketPort = portBelowEphemeralRange(-1);
        conf.setInt(RpcConf.PORT, portBelowEphemeralRange(socketPort));
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

    /**
     * A port free on loopback now and below the kernel's ephemeral range. A port from bind(0) is in that range,
     * so while the server is down between stop and restart any outgoing connection of this JVM (the client's,
     * UCX's) may take it as its local port: CI once saw the restart fail with "Address already in use".
     */
    private static int portBelowEphemeralRange(int other) throws Exception {
        // (Files.readString reads one byte of this procfs file on JDK 17: its size says 0.)
        String range = Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).get(0).trim();
        int ephemeralLow = Integer.parseInt(range.split("\\s+")[0]);
        int low = 10_000;
        assertTrue(ephemeralLow - low > 1000, "ephemeral ports start at " + ephemeralLow);
        Random random = new Random();
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = low + random.nextInt(ephemeralLow - low);
            if (port == other) {
                continue;
            }
            try (ServerSocket socket = new ServerSocket()) {
                socket.setReuseAddress(true);
                socket.bind(new InetSocketAddress("127.0.0.1", port));
                return port;
            } catch (IOException taken) {
                // Another listener holds it: try the next.
            }
        }
        throw new IOException("no free loopback port below " + ephemeralLow + " in 200 attempts");
    }
}
