package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTesting;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hadoop.hbase.security.User;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.PauseRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/** Bad frames and a dying server, on HBase's test service. */
class FabricFailuresTest {
    private static final int RPC_TIMEOUT_MS = 20_000;

    @Test
    void aMalformedFrameClosesThatSessionAndTheServerServesOn() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(live.client, live.at);
            assertEquals("before", stub.echo(null, echo("before")).getMessage());
            assertEquals(1, live.server.fabricSessions());

            TestSessions.Opened session = TestSessions.open(live.client, live.at);
            TestSessions.assertOffered(session);
            Discovery.Offer offer = session.offer();
            assertEquals(2, live.server.fabricSessions());
            FabricEndpoint endpoint = raw.endpoint(offer.host(), offer.port());
            long refused = live.server.fabricFramesRefused();

            // An authentic frame whose HBase request header is garbage: that session is closed, the failure says so.
            byte[] garbage = TestSessions.frame(session, 0, new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff,
                    (byte) 0xff, 0x0f, 1, 2, 3});
            TestSessions.assertRefused(endpoint, garbage, Frames.MALFORMED);
            assertEquals(1, live.server.fabricSessions());
            // The session is gone; another version (version 1's unsigned frames among them) is malformed whatever
            // the session, and closes that fabric connection (the next request goes on a new one).
            TestSessions.assertRefused(endpoint, TestSessions.frame(session, 1, new byte[4]), Frames.UNKNOWN_SESSION);
            for (byte version : new byte[] {1, 9}) {
                byte[] other = TestSessions.frame(session, 2, new byte[4]);
                other[0] = version;
                TestSessions.assertRefused(endpoint, other, Frames.MALFORMED);
                FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            }
            // A frame shorter than the session prefix names no session either.
            FabricException shortFrame = assertThrows(FabricException.class,
                    () -> endpoint.request(Frames.OP_CALL, new byte[3]).close());
            assertTrue(shortFrame.getMessage().contains(Frames.MALFORMED), shortFrame.getMessage());
            FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            assertEquals(refused + 5, live.server.fabricFramesRefused());

            // The server serves on, the first client's session too.
            long received = live.server.fabricCallsReceived();
            assertEquals("after", stub.echo(null, echo("after")).getMessage());
            assertEquals(received + 1, live.server.fabricCallsReceived());
        }
    }

    /** As NettyRpcFrameDecoder answers a request over the limit and then closes the channel. */
    @Test
    void aRequestOverTheLimitGetsHBasesErrorAndItsSessionCloses() throws Exception {
        Configuration conf = EchoServers.conf("never");
        conf.setInt(RpcServer.MAX_REQUEST_SIZE, 4096);
        RpcServer server = EchoServers.start(conf);
        FabricRpcServer fabricServer = (FabricRpcServer) server;
        try (FabricRpcClient client = new FabricRpcClient(conf)) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, server.getListenerAddress());
            assertEquals("before", stub.echo(null, echo("before")).getMessage());
            assertEquals(1, fabricServer.fabricSessions());
            long refused = fabricServer.fabricFramesRefused();
            ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("x".repeat(8192))));
            assertTrue(String.valueOf(e.getCause()).contains("RequestTooBigException"), "HBase's exception: " + e.getCause());
            assertEquals(refused + 1, fabricServer.fabricFramesRefused());
            assertEquals(0, fabricServer.fabricSessions(), "the session closed after the answer");
            // The client finds its session gone (a closed connection, to HBase) and opens a new one.
            ServiceException closed = assertThrows(ServiceException.class, () -> stub.echo(null, echo("stale")));
            assertInstanceOf(ConnectionClosedException.class, closed.getCause(), "HBase's exception: " + closed.getCause());
            assertEquals("after", stub.echo(null, echo("after")).getMessage());
            assertEquals(1, fabricServer.fabricSessions());
        } finally {
            server.stop();
        }
    }

    @Test
    void sessionsStopAtTheLimitUnlessOneIsIdleLongEnough() throws Exception {
        for (long idleMs : new long[] {600_000, 0}) {
            Configuration conf = EchoServers.conf("never");
            conf.setInt(HBaseRpcConf.SESSIONS_MAX, 2);
            conf.setLong(HBaseRpcConf.SESSION_IDLE_MS, idleMs);
            RpcServer server = EchoServers.start(conf);
            FabricRpcServer fabricServer = (FabricRpcServer) server;
            try (FabricRpcClient client = new FabricRpcClient(conf)) {
                InetSocketAddress at = server.getListenerAddress();
                TestSessions.assertOffered(TestSessions.open(client, at));
                TestSessions.assertOffered(TestSessions.open(client, at));
                Discovery.Offer third = TestSessions.open(client, at).offer();
                if (idleMs > 0) {
                    assertTrue(String.valueOf(third.refusal()).contains("maximum of 2 fabric sessions"), third.refusal());
                } else {
                    assertNull(third.refusal(), "the session idle longest was evicted");
                }
                assertEquals(2, fabricServer.fabricSessions());
            } finally {
                server.stop();
            }
        }
    }

    @Test
    void aCallPendingOnAKilledServerFailsWithHBasesExceptionWithinTheRpcTimeout() throws Exception {
        Process child = EchoServers.startInOwnProcess();
        ExecutorService caller = Executors.newSingleThreadExecutor();
        Configuration conf = EchoServers.conf("never");
        conf.setInt(HConstants.HBASE_RPC_TIMEOUT_KEY, RPC_TIMEOUT_MS);
        try (FabricRpcClient client = new FabricRpcClient(conf)) {
            InetSocketAddress at = new InetSocketAddress("127.0.0.1", EchoServers.port(child));
            BlockingInterface stub = TestProtobufRpcProto.newBlockingStub(client.createBlockingRpcChannel(
                    ServerName.valueOf("127.0.0.1", at.getPort(), 0L), User.getCurrent(), RPC_TIMEOUT_MS));
            assertEquals("alive", stub.echo(null, echo("alive")).getMessage());
            long sent = FabricRpcClient.fabricCalls();
            Future<?> pending = caller.submit(() -> stub.pause(null, PauseRequestProto.newBuilder().setMs(120_000).build()));
            Thread.sleep(1000);
            assertEquals(sent + 1, FabricRpcClient.fabricCalls(), "the pause call went over the fabric");
            child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            long killedNanos = System.nanoTime();
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> pending.get(RPC_TIMEOUT_MS + 10_000, TimeUnit.MILLISECONDS));
            long failedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedNanos);
            ServiceException se = assertInstanceOf(ServiceException.class, e.getCause());
            // What HBase's Netty client raises when the connection closes under a call.
            assertInstanceOf(ConnectionClosedException.class, se.getCause(), "HBase's exception: " + se.getCause());
            assertTrue(failedAfterMs < RPC_TIMEOUT_MS, "failed " + failedAfterMs + " ms after the kill");
        } finally {
            caller.shutdownNow();
            child.destroyForcibly();
        }
    }

    private static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }

}
