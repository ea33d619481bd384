package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.ReplayWindow;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.UserInformation;

/**
 * Frames not made by a session's own client are refused while the server serves on (docs/hbase-rpc.md,
 * "Security"): forged, replayed, for a session that does not exist; answers not made by the server for that
 * frame are refused by the client; a session is the socket connection's user's, and an older peer is told so.
 */
class SessionAuthenticationTest {
    private static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }

    @Test
    void aForgedFrameIsRefusedAndEverySessionServesOn() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(live.client, live.at);
            assertEquals("good", stub.echo(null, echo("good")).getMessage());
            TestSessions.Opened mine = TestSessions.open(live.client, live.at);
            TestSessions.assertOffered(mine);
            FabricEndpoint endpoint = raw.endpoint(mine.offer().host(), mine.offer().port());
            assertEquals("signed", TestSessions.echoed(endpoint, mine, 0, "signed"));
            long refused = live.server.fabricFramesRefused();
            long received = live.server.fabricCallsReceived();

            byte[] next = TestSessions.frame(mine, 1, TestSessions.echoBody("forged", 1));
            // One bit flipped in the sequence number, the MAC, the body (a changed version or session id is
            // another refusal: no such version or session).
            // Each refused unsigned: the server signs nothing about a frame it could not authenticate.
            for (int index : new int[] {FrameAuth.SEQUENCE_OFFSET + 7, FrameAuth.MAC_OFFSET, FrameAuth.PREFIX_BYTES + 3,
                    next.length - 1}) {
                TestSessions.assertRefusedUnsigned(endpoint, TestSessions.flipped(next, index), Frames.NOT_AUTHENTIC);
            }
            // Someone who saw the session id (it travels in clear) but not the key: any key of theirs is refused.
            byte[] theirKey = new byte[SessionKeys.MAC_KEY_BYTES];
            new Random(7).nextBytes(theirKey);
            TestSessions.assertRefusedUnsigned(endpoint, TestSessions.frame(mine.offer().sessionId(), 1,
                    new FrameAuth(theirKey), TestSessions.echoBody("forged", 1)), Frames.NOT_AUTHENTIC);
            // Unsigned: the MAC field all zeros.
            byte[] unsigned = next.clone();
            java.util.Arrays.fill(unsigned, FrameAuth.MAC_OFFSET, FrameAuth.PREFIX_BYTES, (byte) 0);
            TestSessions.assertRefusedUnsigned(endpoint, unsigned, Frames.NOT_AUTHENTIC);
            assertEquals(refused + 6, live.server.fabricFramesRefused());
            assertEquals(received, live.server.fabricCallsReceived(), "nothing forged reached HBase");

            // The session forged against and the other client's session serve on; the refused frames did not
            // move the replay window (number 1 was never accepted).
            assertEquals("mine", TestSessions.echoed(endpoint, mine, 1, "mine"));
            assertEquals("theirs", stub.echo(null, echo("theirs")).getMessage());
            assertEquals(2, live.server.fabricSessions());
        }
    }

    @Test
    void aReplayedOrTooOldFrameIsRefusedAndTheSessionServesOn() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            TestSessions.Opened mine = TestSessions.open(live.client, live.at);
            FabricEndpoint endpoint = raw.endpoint(mine.offer().host(), mine.offer().port());
            byte[] once = TestSessions.frame(mine, 5000, TestSessions.echoBody("once", 5000));
            long received = live.server.fabricCallsReceived();
            endpoint.request(Frames.OP_CALL, once).close();
            assertEquals(received + 1, live.server.fabricCallsReceived());
            long refused = live.server.fabricFramesRefused();
            // The same bytes again, as someone who copied them off the wire would send them: refused, the refusal
            // signed for that frame.
            TestSessions.assertRefusedSigned(endpoint, once, mine, Frames.REPLAYED);
            // Within the window: each number once, in any order. Behind it, the numbers that left the window unseen
            // are remembered (the highest MISSED_MAX) and taken once when they come; below those, too old to tell.
            assertEquals("in the window", TestSessions.echoed(endpoint, mine, 5000 - ReplayWindow.SIZE + 1, "in the window"));
            TestSessions.assertRefusedSigned(endpoint, TestSessions.frame(mine, 5000 - ReplayWindow.SIZE + 1,
                    TestSessions.echoBody("again", 1)), mine, Frames.REPLAYED);
            assertEquals("late", TestSessions.echoed(endpoint, mine, 5000 - ReplayWindow.SIZE, "late"));
            TestSessions.assertRefusedSigned(endpoint, TestSessions.frame(mine, 5000 - ReplayWindow.SIZE,
                    TestSessions.echoBody("late again", 2)), mine, Frames.REPLAYED);
            TestSessions.assertRefusedSigned(endpoint, TestSessions.frame(mine, 1, TestSessions.echoBody("too old", 3)),
                    mine, Frames.TOO_OLD);
            assertEquals(refused + 4, live.server.fabricFramesRefused());
            assertEquals(received + 3, live.server.fabricCallsReceived(), "no replay reached HBase");
            assertEquals("next", TestSessions.echoed(endpoint, mine, 5001, "next"));
            assertEquals(1, live.server.fabricSessions());
        }
    }

    @Test
    void aFrameForAnUnknownSessionIsRefusedAndOthersServeOn() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start();
                FabricNode raw = FabricConfig.builder().start()) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(live.client, live.at);
            TestSessions.Opened mine = TestSessions.open(live.client, live.at);
            FabricEndpoint endpoint = raw.endpoint(mine.offer().host(), mine.offer().port());
            long refused = live.server.fabricFramesRefused();
            // A well-made frame under a session id the server never gave out (signed with a real session's key).
            TestSessions.assertRefusedUnsigned(endpoint, TestSessions.frame(mine.offer().sessionId() ^ 1, 0, mine.auth(),
                    TestSessions.echoBody("nobody's", 0)), Frames.UNKNOWN_SESSION);
            assertEquals(refused + 1, live.server.fabricFramesRefused());
            assertEquals("mine", TestSessions.echoed(endpoint, mine, 0, "mine"));
            assertEquals("theirs", stub.echo(null, echo("theirs")).getMessage());
        }
    }

    /** The session's user is the socket connection's: a header naming another user opens nothing. */
    @Test
    void aSessionIsTheSocketConnectionsUsers() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start()) {
            ConnectionHeader mallory = TestSessions.testServiceHeader().toBuilder()
                    .setUserInfo(UserInformation.newBuilder().setEffectiveUser("mallory")).build();
            ServiceException e = assertThrows(ServiceException.class, () -> TestSessions.call(live.client, live.at,
                    Discovery.OPEN_SESSION_V2, Discovery.encode(new Discovery.Request(Discovery.VERSION,
                            mallory.toByteArray(), SessionKeys.generate().publicKey(), FrameAuth.Coverage.HEADER))));
            assertTrue(String.valueOf(e.getCause()).contains("names user mallory"), String.valueOf(e.getCause()));
            assertEquals(0, live.server.fabricSessions());
        }
    }

    /**
     * Version 1 clients are refused with the reason; a request of another version (2: refusals unsigned; 3: no MAC
     * coverage agreed; 5), one naming no coverage or a bad key opens nothing.
     */
    @Test
    void anOlderClientIsRefusedClearlyAndABadKeyOpensNothing() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start()) {
            Discovery.Offer v1 = TestSessions.call(live.client, live.at, Discovery.OPEN_SESSION_V1, TestSessions.testServiceHeader());
            assertTrue(String.valueOf(v1.refusal()).contains("discovery version 4"), v1.refusal());
            byte[] header = TestSessions.testServiceHeader().toByteArray();
            for (int other : new int[] {2, 3, 5}) {
                Discovery.Offer offer = TestSessions.call(live.client, live.at, Discovery.OPEN_SESSION_V2,
                        Discovery.encode(new Discovery.Request(other, header, SessionKeys.generate().publicKey(),
                                FrameAuth.Coverage.FULL)));
                assertTrue(String.valueOf(offer.refusal()).contains("discovery version " + other + " (this server speaks 4)"),
                        offer.refusal());
            }
            ServiceException none = assertThrows(ServiceException.class, () -> TestSessions.call(live.client, live.at,
                    Discovery.OPEN_SESSION_V2, Discovery.encode(new Discovery.Request(Discovery.VERSION, header,
                            SessionKeys.generate().publicKey(), null))));
            assertTrue(String.valueOf(none.getCause()).contains("naming no MAC coverage"), String.valueOf(none.getCause()));
            for (byte[] badKey : List.of(new byte[31], new byte[32])) {
                ServiceException e = assertThrows(ServiceException.class, () -> TestSessions.call(live.client, live.at,
                        Discovery.OPEN_SESSION_V2, Discovery.encode(new Discovery.Request(Discovery.VERSION, header, badKey,
                                FrameAuth.Coverage.FULL))));
                assertTrue(String.valueOf(e.getCause()).contains("no fabric session for that key"), String.valueOf(e.getCause()));
            }
            assertEquals(0, live.server.fabricSessions());
        }
    }

    /**
     * A server that answers with a MAC that is not its own for that frame (another frame's, or over altered
     * bytes) has its answer refused by a client whose sessions' MACs cover every byte
     * ({@code slipstream.hbase.rpc.frameMac=full}): a stand-in server ({@link StandInServer}) signs the way
     * {@link AnswerMode} says. FrameMacTest has what a {@code header} session's client believes.
     */
    @Test
    void theClientBelievesOnlyAnswersCarryingTheServersMacForThatFrame() throws Exception {
        AtomicReference<AnswerMode> mode = new AtomicReference<>(AnswerMode.SIGNED);
        org.apache.hadoop.conf.Configuration full = EchoServers.conf("never");
        full.set(HBaseRpcConf.FRAME_MAC, "full");
        try (StandInServer standIn = StandInServer.start(false);
                FabricRpcClient client = new FabricRpcClient(full)) {
            standIn.handler = frame -> answer(frame, mode.get());
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, standIn.address());
            assertEquals("believed", stub.echo(null, echo("believed")).getMessage());
            assertEquals(1, standIn.sessionsOpened.get());
            for (AnswerMode forged : new AnswerMode[] {AnswerMode.ANOTHER_FRAMES_MAC, AnswerMode.ALTERED_AFTER_SIGNING}) {
                mode.set(forged);
                ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("not believed")),
                        forged.name());
                ConnectionClosedException closed = assertInstanceOf(ConnectionClosedException.class, e.getCause());
                assertTrue(closed.getMessage().contains("not authentic"), closed.getMessage());
            }
            // Each refused answer dropped its session, as a broken connection: the next call opens a new one.
            mode.set(AnswerMode.SIGNED);
            assertEquals("believed again", stub.echo(null, echo("believed again")).getMessage());
            assertEquals(3, standIn.sessionsOpened.get());
        }
    }

    private enum AnswerMode {
        SIGNED,
        ANOTHER_FRAMES_MAC,
        ALTERED_AFTER_SIGNING
    }

    /** The stand-in's echo, signed as {@code mode} says. */
    private static void answer(StandInServer.Frame frame, AnswerMode mode) throws IOException {
        byte[] bytes = StandInServer.answer(frame, frame.message());
        frame.auth().signResponse(bytes, Frames.FRAME_VERSION, frame.sessionId(),
                mode == AnswerMode.ANOTHER_FRAMES_MAC ? frame.sequence() + 1 : frame.sequence());
        if (mode == AnswerMode.ALTERED_AFTER_SIGNING) {
            bytes[bytes.length - 1] ^= 0x01;
        }
        frame.request().respond(bytes);
    }
}
