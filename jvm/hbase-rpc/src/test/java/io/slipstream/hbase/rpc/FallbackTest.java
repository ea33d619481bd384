package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.ipc.FabricIpcBridge;
import org.apache.hadoop.hbase.ipc.NettyRpcServer;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hadoop.hbase.security.User;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/** When the fabric cannot carry calls: HBase's socket path (auto) or a clear refusal (never). */
class FallbackTest {
    private static final EchoRequestProto HELLO = EchoRequestProto.newBuilder().setMessage("hello").build();

    @Test
    void autoTakesTheSocketPathToAServerWithoutTheFabricAndNeverRefuses() throws Exception {
        Configuration serverConf = EchoServers.conf("auto");
        serverConf.set("hbase.rpc.server.impl", NettyRpcServer.class.getName());
        RpcServer server = EchoServers.start(serverConf);
        try {
            InetSocketAddress at = server.getListenerAddress();
            try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("auto"))) {
                long socket = FabricRpcClient.socketCalls();
                long fabric = FabricRpcClient.fabricCalls();
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, at);
                for (int i = 0; i < 3; i++) {
                    assertEquals("hello", stub.echo(null, HELLO).getMessage());
                }
                assertEquals(socket + 3, FabricRpcClient.socketCalls());
                assertEquals(fabric, FabricRpcClient.fabricCalls());
            }
            try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, at);
                ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, HELLO));
                assertTrue(String.valueOf(e.getCause()).contains(HBaseRpcConf.FALLBACK + "=never"), String.valueOf(e.getCause()));
            }
        } finally {
            server.stop();
        }
    }

    @Test
    void anUnreachableServerFailsEachCallWithHBasesConnectionErrorAndIsNotRemembered() throws Exception {
        int port;
        try (java.net.ServerSocket closed = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = closed.getLocalPort();
        }
        try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, new InetSocketAddress("127.0.0.1", port));
            for (int i = 0; i < 2; i++) {
                ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, HELLO));
                assertInstanceOf(java.io.IOException.class, e.getCause());
                // HBase's own errors for it: the refused connection, or, within
                // hbase.ipc.client.failed.servers.expiry of it (2 s), FailedServerException without a
                // new try (CI met the second on the second call). Or a reset: the port, free once the
                // ServerSocket closed, may be taken at once by another listener on the host (UCX's TCP
                // interface of a fabric node binds port 0), which accepts and resets HBase's connection
                // (seen once in session 44).
                assertTrue(String.valueOf(e.getCause()).contains("Connection refused")
                        || String.valueOf(e.getCause()).contains("Connection reset")
                        || e.getCause() instanceof java.net.ConnectException
                        || e.getCause() instanceof org.apache.hadoop.hbase.ipc.FailedServerException, String.valueOf(e.getCause()));
            }
        }
    }

    /** SASL's integrity or privacy is more than the fabric gives calls (KerberosOverFabricTest: QOP authentication). */
    @Test
    void kerberosWithIntegrityOrPrivacyKeepsTheSocketPathWithAutoAndRefusesWithNever() throws Exception {
        for (String fallback : new String[] {"auto", "never"}) {
            Configuration conf = EchoServers.conf(fallback);
            conf.set("hbase.security.authentication", "kerberos");
            conf.set(HBaseRpcConf.RPC_PROTECTION, "privacy");
            try (FabricRpcClient client = new FabricRpcClient(conf)) {
                CompletableFuture<FabricIpcBridge.Route> route = client.route(new FabricIpcBridge.Target(
                        InetSocketAddress.createUnresolved("127.0.0.1", 16020), User.getCurrent(), "ClientService", new byte[0]));
                if (fallback.equals("auto")) {
                    assertNull(route.get(), "the socket path");
                } else {
                    ExecutionException e = assertThrows(ExecutionException.class, route::get);
                    assertTrue(e.getCause().getMessage().contains("hbase.security.authentication=kerberos and "
                            + HBaseRpcConf.RPC_PROTECTION + "=privacy"), e.getCause().getMessage());
                }
            }
        }
    }

    @Test
    void aKerberosServerWithIntegrityServesItsSocketsOnlyWithAutoAndDoesNotStartWithNever() throws Exception {
        Configuration auto = EchoServers.conf("auto");
        auto.set("hbase.security.authentication", "kerberos");
        auto.set(HBaseRpcConf.RPC_PROTECTION, "integrity");
        RpcServer server = EchoServers.start(auto);
        try {
            assertNull(((FabricRpcServer) server).fabricAddress(), "no fabric under Kerberos with integrity");
            assertTrue(server.isStarted(), "the socket path serves");
        } finally {
            server.stop();
        }
        Configuration never = EchoServers.conf("never");
        never.set("hbase.security.authentication", "kerberos");
        never.set(HBaseRpcConf.RPC_PROTECTION, "integrity");
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> EchoServers.start(never));
        assertTrue(e.getMessage().contains("hbase.security.authentication=kerberos and " + HBaseRpcConf.RPC_PROTECTION
                + "=integrity"), e.getMessage());
        // A list that lets the handshake pick integrity or privacy is refused too; authentication alone (the
        // default, also spelled "auth") is carried, and without Kerberos the QOP is not read at all.
        for (String protection : new String[] {"privacy,authentication", "authentication,integrity", "bogus"}) {
            Configuration listed = EchoServers.conf("never");
            listed.set("hbase.security.authentication", "kerberos");
            listed.set(HBaseRpcConf.RPC_PROTECTION, protection);
            assertTrue(String.valueOf(new HBaseRpcConf(listed).securityRefusal).contains(protection), protection);
        }
        for (String protection : new String[] {null, "authentication", "auth"}) {
            Configuration carried = EchoServers.conf("never");
            carried.set("hbase.security.authentication", "kerberos");
            if (protection != null) {
                carried.set(HBaseRpcConf.RPC_PROTECTION, protection);
            }
            assertNull(new HBaseRpcConf(carried).securityRefusal, String.valueOf(protection));
        }
        Configuration simple = EchoServers.conf("never");
        simple.set(HBaseRpcConf.RPC_PROTECTION, "privacy");
        assertNull(new HBaseRpcConf(simple).securityRefusal);
        Configuration tls = EchoServers.conf("never");
        tls.setBoolean("hbase.server.netty.tls.enabled", true);
        assertTrue(new HBaseRpcConf(tls).securityRefusal.contains("hbase.server.netty.tls.enabled=true"));
    }

    @Test
    void badSettingsAreClearErrors() {
        Configuration conf = EchoServers.conf("sometimes");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new HBaseRpcConf(conf));
        assertEquals("slipstream: slipstream.hbase.rpc.fallback=sometimes: expected auto|never", e.getMessage());
        Configuration threads = EchoServers.conf("auto");
        threads.setInt(HBaseRpcConf.RECEIVER_THREADS, 0);
        assertInstanceOf(IllegalArgumentException.class, assertThrows(RuntimeException.class, () -> new HBaseRpcConf(threads)));
    }
}
