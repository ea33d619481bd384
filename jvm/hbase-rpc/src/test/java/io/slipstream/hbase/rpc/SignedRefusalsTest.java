package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.util.List;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/**
 * What the engine's client makes of the server's refusals of its frames (docs/hbase-rpc.md, step 7), against a
 * stand-in server ({@link StandInServer}): each fails the call as a closed connection (HBase's retry decides) and
 * none sends the frame again; a refusal is believed only when signed for that very frame with the session's key,
 * and an unbelievable one drops the session as a broken connection would. An older server (discovery version 2)
 * opens no session.
 */
class SignedRefusalsTest {
    /** The refusals the server signs, each with the rest of its text as the server writes it. */
    private static final List<String> SIGNED_REASONS = List.of(Frames.REPLAYED, Frames.TOO_OLD,
            Frames.MALFORMED + ": a header that does not parse", Frames.STOPPING);

    private static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }

    /** How a forger makes a refusal it cannot sign with the session's key. */
    private enum Forgery {
        /** No MAC at all: what every refusal was before frame version 3. */
        UNSIGNED,
        /** The server's genuine refusal of another frame of the session, passed off for this frame. */
        ANOTHER_FRAMES,
        /** Signed with a key of the forger's own. */
        OTHER_KEY,
        /** The server's genuine refusal of this frame, its reason changed on the way. */
        ALTERED
    }

    private static String forge(String reason, StandInServer.Frame frame, Forgery how) {
        return switch (how) {
            case UNSIGNED -> reason;
            case ANOTHER_FRAMES -> Frames.signRefusal(reason, frame.sessionId(), frame.sequence() ^ 1, frame.auth());
            case OTHER_KEY -> Frames.signRefusal(reason, frame.sessionId(), frame.sequence(),
                    new FrameAuth(new byte[SessionKeys.MAC_KEY_BYTES]));
            case ALTERED -> Frames.signRefusal(reason, frame.sessionId(), frame.sequence(), frame.auth())
                    .replaceFirst(Frames.REFUSAL_PREFIX, Frames.REFUSAL_PREFIX + " ");
        };
    }

    private static ConnectionClosedException refused(BlockingInterface stub) {
        ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("refused")));
        return assertInstanceOf(ConnectionClosedException.class, e.getCause());
    }

    /**
     * Every signed kind, and "frame not authentic" (never signed), forged four ways: the call fails as a closed
     * connection saying the refusal is not authentic, the frame was sent once (before, "replayed or too old" was
     * sent up to four times), and the session is dropped (the next call opens one).
     */
    @Test
    void aForgedRefusalIsNotBelievedAndTheFrameIsNotSentAgain() throws Exception {
        try (StandInServer standIn = StandInServer.start(false);
                FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, standIn.address());
            assertEquals("a session", stub.echo(null, echo("a session")).getMessage());
            List<String> reasons = new java.util.ArrayList<>(SIGNED_REASONS);
            reasons.add(Frames.NOT_AUTHENTIC);
            for (String reason : reasons) {
                for (Forgery how : Forgery.values()) {
                    String what = how + " " + reason;
                    int frames = standIn.framesReceived.get();
                    int opened = standIn.sessionsOpened.get();
                    standIn.handler = frame -> frame.request().fail(forge(reason, frame, how));
                    ConnectionClosedException closed = refused(stub);
                    assertEquals(frames + 1, standIn.framesReceived.get(), "sent once: " + what);
                    assertTrue(closed.getMessage().contains("is not authentic"), what + ": " + closed.getMessage());
                    standIn.handler = StandInServer::echo;
                    assertEquals("after", stub.echo(null, echo("after")).getMessage());
                    assertEquals(opened + 1, standIn.sessionsOpened.get(), "the refused session was dropped: " + what);
                }
            }
        }
    }

    /**
     * The server's own refusals, signed for the frame: each fails the call as a closed connection with the server's
     * reason, the frame sent once; "replayed" and "too old" keep the session (it is sound: only this frame's fate is
     * unknown), the others drop it.
     */
    @Test
    void aSignedRefusalFailsTheCallOnceAndKeepsASoundSession() throws Exception {
        try (StandInServer standIn = StandInServer.start(false);
                FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
            BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, standIn.address());
            assertEquals("a session", stub.echo(null, echo("a session")).getMessage());
            for (String reason : SIGNED_REASONS) {
                int frames = standIn.framesReceived.get();
                int opened = standIn.sessionsOpened.get();
                standIn.handler = frame -> frame.request().fail(Frames.signRefusal(reason, frame.sessionId(),
                        frame.sequence(), frame.auth()));
                ConnectionClosedException closed = refused(stub);
                assertEquals(frames + 1, standIn.framesReceived.get(), "sent once: " + reason);
                assertTrue(closed.getMessage().contains(reason + "; the call may have run"), closed.getMessage());
                standIn.handler = StandInServer::echo;
                assertEquals("after", stub.echo(null, echo("after")).getMessage());
                boolean kept = reason.equals(Frames.REPLAYED) || reason.equals(Frames.TOO_OLD);
                assertEquals(opened + (kept ? 0 : 1), standIn.sessionsOpened.get(), reason);
            }
        }
    }

    /**
     * A server whose discovery offers version 2 (refusals unsigned): no session; the calls take HBase's socket path
     * (fallback auto) or fail (never).
     */
    @Test
    void anOlderServerIsReachedOverSocketsOrRefusedWithFallbackNever() throws Exception {
        try (StandInServer older = StandInServer.start(true)) {
            older.offerVersion = 2;
            try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("auto"))) {
                long sockets = FabricRpcClient.socketCalls();
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, older.address());
                assertEquals("older", stub.echo(null, echo("older")).getMessage());
                assertEquals(sockets + 1, FabricRpcClient.socketCalls());
            }
            try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, older.address());
                ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("refused")));
                IOException why = assertInstanceOf(IOException.class, e.getCause());
                assertTrue(why.getMessage().contains("offers no fabric session") && why.getMessage().contains("never"),
                        why.getMessage());
            }
            assertEquals(0, older.framesReceived.get());
        }
    }
}
