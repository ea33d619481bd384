package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

/**
 * When the fabric must not or cannot carry calls: security settings stronger than simple, a server
 * that does not offer it (vanilla Hadoop, or at its session limit). Fallback auto takes the socket
 * path; never refuses clearly.
 */
class FallbackTest {

    private static String echoAs(String user, Configuration conf, RPC.Server server, String message) throws Exception {
        return EchoProtocols.echoAs(user, FabricEcho.class, server.getListenerAddress(), conf, message);
    }

    @Test
    void rpcProtectionKeepsCallsOnSocketsOrRefusesThem() throws Exception {
        RPC.Server server = EchoProtocols.server(EchoProtocols.conf(), 2);
        try {
            Configuration privacy = EchoProtocols.conf();
            privacy.set(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION, "privacy");
            long fabricBefore = FabricRpcEngine.fabricCalls();
            long socketBefore = FabricRpcEngine.socketCalls();
            assertEquals("private", echoAs("carol", privacy, server, "private"));
            assertEquals("private", echoAs("carol", privacy, server, "private"));
            assertEquals(0, FabricRpcEngine.fabricCalls() - fabricBefore);
            assertEquals(2, FabricRpcEngine.socketCalls() - socketBefore);

            privacy.set(RpcConf.FALLBACK, "never");
            ServiceException e = assertThrows(ServiceException.class, () -> echoAs("carol", privacy, server, "refused"));
            IOException why = assertInstanceOf(IOException.class, e.getCause());
            assertTrue(why.getMessage().contains("hadoop.rpc.protection=privacy") && why.getMessage().contains("never"),
                    why.getMessage());
        } finally {
            server.stop();
        }
    }

    @Test
    void aServerWithIntegrityOrPrivacyOffersNoFabricAndRefusesToStartWithFallbackNever() throws Exception {
        Configuration privacyNever = EchoProtocols.conf();
        privacyNever.set(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION, "privacy");
        privacyNever.set(RpcConf.FALLBACK, "never");
        BlockingServiceHolder.check(privacyNever);

        Configuration privacy = EchoProtocols.conf();
        privacy.set(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION, "integrity");
        RPC.Server server = EchoProtocols.server(privacy, 1);
        try {
            assertNull(((FabricRpcServer) server).fabricAddress(), "no fabric with hadoop.rpc.protection=integrity");
            // A client that would use the fabric finds none offered and takes sockets (auto).
            long socketBefore = FabricRpcEngine.socketCalls();
            assertEquals("plain", echoAs("dave", EchoProtocols.conf(), server, "plain"));
            assertEquals(1, FabricRpcEngine.socketCalls() - socketBefore);
            // The call that falls back keeps the call id and retry count a retry handler gave it.
            FabricEcho proxy = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), EchoProtocols.conf());
            try {
                org.apache.hadoop.ipc.Client.setCallIdAndRetryCount(777, 2, null);
                String[] seen = proxy.getCurrentUser(null, EchoProtocols.EMPTY).getUser().split(" ");
                assertEquals("777", seen[0]);
                assertEquals("2", seen[1]);
                assertEquals("rpc", seen[3], "over the socket path");
            } finally {
                RPC.stopProxy(proxy);
            }
        } finally {
            server.stop();
        }
    }

    /** Building and starting a server under {@code conf} fails with a clear message. */
    private static final class BlockingServiceHolder {
        static void check(Configuration conf) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> EchoProtocols.server(conf, 1).stop());
            assertTrue(e.getMessage().contains("hadoop.rpc.protection=privacy") && e.getMessage().contains("never"),
                    e.getMessage());
        }
    }

    @Test
    void aVanillaServerIsReachedOverSocketsOrRefusedWithFallbackNever() throws Exception {
        Configuration vanilla = EchoProtocols.conf();
        RPC.setProtocolEngine(vanilla, EchoProtocols.SocketEcho.class, ProtobufRpcEngine2.class);
        RPC.Server server = new RPC.Builder(vanilla).setProtocol(EchoProtocols.SocketEcho.class)
                .setInstance(org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto
                        .newReflectiveBlockingService(new EchoProtocols.Impl()))
                .setBindAddress("127.0.0.1").setPort(0).setNumHandlers(1).build();
        server.start();
        try {
            long socketBefore = FabricRpcEngine.socketCalls();
            assertEquals("vanilla", echoAs("erin", EchoProtocols.conf(), server, "vanilla"));
            assertEquals(1, FabricRpcEngine.socketCalls() - socketBefore);

            Configuration never = EchoProtocols.conf();
            never.set(RpcConf.FALLBACK, "never");
            ServiceException e = assertThrows(ServiceException.class, () -> echoAs("frank", never, server, "refused"));
            assertTrue(e.getCause().getMessage().contains("opened no fabric session"), e.getCause().getMessage());
        } finally {
            server.stop();
        }
    }

    @Test
    void aServerAtItsSessionLimitSendsNewUsersToSockets() throws Exception {
        Configuration conf = EchoProtocols.conf();
        conf.setInt(RpcConf.SESSIONS_MAX, 1);
        RPC.Server server = EchoProtocols.server(conf, 2);
        try {
            long fabricBefore = FabricRpcEngine.fabricCalls();
            assertEquals("first", echoAs("grace", conf, server, "first"));
            assertEquals(1, FabricRpcEngine.fabricCalls() - fabricBefore);
            assertEquals(1, ((FabricRpcServer) server).fabricSessions());
            long socketBefore = FabricRpcEngine.socketCalls();
            assertEquals("second", echoAs("heidi", conf, server, "second"));
            assertEquals(1, FabricRpcEngine.socketCalls() - socketBefore, "the second user over sockets");
            assertEquals(1, ((FabricRpcServer) server).fabricSessions());
        } finally {
            server.stop();
        }
    }
}
