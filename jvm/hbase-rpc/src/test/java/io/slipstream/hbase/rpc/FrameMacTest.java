package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTesting;
import io.slipstream.fabric.session.FrameAuth;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/**
 * What a session's MACs cover ({@code slipstream.hbase.rpc.frameMac}, docs/hbase-rpc.md, "Security"): by default
 * the frame's session, sequence number and length, not its bytes (what an authenticated socket connection proves
 * when SASL wraps nothing); {@code full} when the client or the server asks for it. Agreed when the session
 * opens (discovery version 4), bound into its key, never lowered.
 */
class FrameMacTest {
    private static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }

    /**
     * A header session: a frame whose body was altered after sealing, keeping its length, is taken (as a socket
     * connection's bytes would be); a changed length or sequence number is not, and the session serves on.
     */
    @Test
    void aDefaultSessionsMacsBindTheLengthNotTheBytes() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            TestSessions.Opened session = TestSessions.open(live.client, live.at, FrameAuth.Coverage.HEADER);
            TestSessions.assertOffered(session);
            assertEquals(FrameAuth.Coverage.HEADER, session.offer().frameMac());
            assertEquals(FrameAuth.Coverage.HEADER, session.auth().coverage());
            FabricEndpoint endpoint = raw.endpoint(session.offer().host(), session.offer().port());
            assertEquals("abc", TestSessions.echoed(endpoint, session, 0, "abc"));

            byte[] frame = TestSessions.frame(session, 1, TestSessions.echoBody("abc", 1));
            byte[] altered = frame.clone();
            altered[FabricTesting.lastIndexOf(frame, "abc".getBytes(StandardCharsets.US_ASCII))] = 'x';
            assertEquals("xbc", TestSessions.echoed(endpoint, session, 1, altered));

            long refused = live.server.fabricFramesRefused();
            byte[] longer = Arrays.copyOf(TestSessions.frame(session, 2, TestSessions.echoBody("abc", 2)), frame.length + 1);
            TestSessions.assertRefusedUnsigned(endpoint, longer, Frames.NOT_AUTHENTIC);
            byte[] resequenced = TestSessions.flipped(TestSessions.frame(session, 2, TestSessions.echoBody("abc", 2)),
                    FrameAuth.SEQUENCE_OFFSET + 7);
            TestSessions.assertRefusedUnsigned(endpoint, resequenced, Frames.NOT_AUTHENTIC);
            assertEquals(refused + 2, live.server.fabricFramesRefused());
            assertEquals("still serving", TestSessions.echoed(endpoint, session, 2, "still serving"));
        }
    }

    /** A client asking for full MACs gets them from a server set to header: an altered byte is refused. */
    @Test
    void aClientAskingForFullMacsGetsThem() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            TestSessions.Opened session = TestSessions.open(live.client, live.at, FrameAuth.Coverage.FULL);
            assertEquals(FrameAuth.Coverage.FULL, session.auth().coverage());
            FabricEndpoint endpoint = raw.endpoint(session.offer().host(), session.offer().port());
            byte[] frame = TestSessions.frame(session, 0, TestSessions.echoBody("abc", 0));
            byte[] altered = frame.clone();
            altered[FabricTesting.lastIndexOf(frame, "abc".getBytes(StandardCharsets.US_ASCII))] = 'x';
            TestSessions.assertRefusedUnsigned(endpoint, altered, Frames.NOT_AUTHENTIC);
            assertEquals("abc", TestSessions.echoed(endpoint, session, 0, "abc"));
        }
    }

    /**
     * A server set to full gives full MACs to a client asking for header; the engine's own calls (70 KB each way)
     * go over the fabric to a header server and a full one alike.
     */
    @Test
    void aServerSetToFullGivesFullMacsAndTheEnginesCallsWorkWithBoth() throws Exception {
        Configuration fullConf = EchoServers.conf("never");
        fullConf.set(HBaseRpcConf.FRAME_MAC, "full");
        RpcServer full = EchoServers.start(fullConf);
        try (EchoServers.Running live = EchoServers.Running.start()) {
            TestSessions.Opened session = TestSessions.open(live.client, full.getListenerAddress(), FrameAuth.Coverage.HEADER);
            assertEquals(FrameAuth.Coverage.FULL, session.auth().coverage());
            String big = "y".repeat(70_000);
            for (RpcServer server : new RpcServer[] {live.server, full}) {
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(live.client, server.getListenerAddress());
                long before = FabricRpcClient.fabricCalls();
                long received = ((FabricRpcServer) server).fabricCallsReceived();
                assertEquals(big, stub.echo(null, echo(big)).getMessage());
                assertEquals(before + 1, FabricRpcClient.fabricCalls(), "the call went over the fabric");
                assertEquals(received + 1, ((FabricRpcServer) server).fabricCallsReceived());
            }
        } finally {
            full.stop();
        }
    }

    /**
     * The engine's client set to full opens no session whose offer covers less (a server that answers so is not
     * following the protocol): the call fails saying so, nothing was sent over the fabric.
     */
    @Test
    void theClientRefusesASessionCoveringLessThanItAskedFor() throws Exception {
        Configuration fullClient = EchoServers.conf("never");
        fullClient.set(HBaseRpcConf.FRAME_MAC, "full");
        try (StandInServer lowering = StandInServer.start(false);
                FabricRpcClient client = new FabricRpcClient(fullClient)) {
            lowering.offerFrameMac = FrameAuth.Coverage.HEADER;
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, lowering.address());
            ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("lowered")));
            IOException why = assertInstanceOf(IOException.class, e.getCause());
            assertTrue(String.valueOf(why.getMessage()).contains("covering header, this client asked for full"),
                    why.getMessage());
            assertEquals(1, lowering.sessionsOpened.get());
            assertEquals(0, lowering.framesReceived.get());
        }
    }

    /**
     * What a header session's client believes of an answer: the server's MAC for that frame over the answer's
     * length; an answer of another length, or with another frame's MAC, is refused as not authentic.
     */
    @Test
    void aHeaderSessionsClientChecksTheAnswersFrameAndLength() throws Exception {
        try (StandInServer standIn = StandInServer.start(false);
                FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, standIn.address());
            standIn.handler = frame -> {
                byte[] bytes = StandInServer.answer(frame, frame.message());
                frame.auth().signResponse(bytes, Frames.FRAME_VERSION, frame.sessionId(), frame.sequence());
                if (frame.message().equals("longer")) {
                    bytes = Arrays.copyOf(bytes, bytes.length + 1);
                } else if (frame.message().equals("another frame's")) {
                    frame.auth().signResponse(bytes, Frames.FRAME_VERSION, frame.sessionId(), frame.sequence() + 1);
                }
                frame.request().respond(bytes);
            };
            assertEquals("believed", stub.echo(null, echo("believed")).getMessage());
            for (String forged : new String[] {"longer", "another frame's"}) {
                ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo(forged)), forged);
                ConnectionClosedException closed = assertInstanceOf(ConnectionClosedException.class, e.getCause());
                assertTrue(closed.getMessage().contains("not authentic"), closed.getMessage());
            }
            assertEquals("believed again", stub.echo(null, echo("believed again")).getMessage());
        }
    }

    /** A coverage setting other than header or full stops the engine at its configuration. */
    @Test
    void anUnknownCoverageSettingIsRefused() {
        Configuration some = new Configuration(false);
        some.set(HBaseRpcConf.FRAME_MAC, "some");
        assertThrows(IllegalArgumentException.class, () -> new HBaseRpcConf(some));
        assertEquals(FrameAuth.Coverage.HEADER, new HBaseRpcConf(new Configuration(false)).frameMac);
        Configuration upper = new Configuration(false);
        upper.set(HBaseRpcConf.FRAME_MAC, "FULL");
        assertEquals(FrameAuth.Coverage.FULL, new HBaseRpcConf(upper).frameMac);
    }
}
