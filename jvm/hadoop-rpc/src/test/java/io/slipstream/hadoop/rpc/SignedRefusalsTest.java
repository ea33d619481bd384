package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.ipc.RpcException;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the engine's client makes of the server's refusals of its frames (docs/hadoop-rpc.md, message 7),
 * against a stand-in server ({@link StandInServer}) that refuses as a test says: a refusal is acted on only
 * when it is signed for that very frame with the session's key, and no refusal makes the client send a call
 * again that the server may have taken, except an "unknown session" the server confirms over the socket path.
 */
class SignedRefusalsTest {
    /** The refusals the server signs, each with the rest of its text as the server writes it. */
    private static final String[] SIGNED_REASONS = {
        Frames.REPLAYED,
        Frames.TOO_OLD,
        Frames.WRONG_PROTOCOL + "elsewhere (opened for " + EchoProtocols.NAME + ")",
        Frames.TOO_LONG + "Requested data length 9 is longer than maximum configured RPC length 8.  RPC came from 1.2.3.4",
        Frames.MALFORMED + ": a header that does not parse",
    };

    private static Configuration conf;
    private static StandInServer standIn;
    private static FabricEcho proxy;

    @BeforeAll
    static void start() throws Exception {
        conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        standIn = StandInServer.start(conf);
        proxy = EchoProtocols.client(FabricEcho.class, standIn.address(), conf);
    }

    @AfterAll
    static void stop() {
        RPC.stopProxy(proxy);
        standIn.close();
    }

    /** How a forger makes a refusal it cannot sign with the session's key. */
    private enum Forgery {
        /** No MAC at all: what every refusal was before frame version 4. */
        UNSIGNED,
        /** The server's genuine refusal of another frame of the session (a recorded one, passed off for this frame). */
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
            case ALTERED -> {
                String signed = Frames.signRefusal(reason, frame.sessionId(), frame.sequence(), frame.auth());
                yield signed.replaceFirst("slipstream-rpc: ", "slipstream-rpc:  ");
            }
        };
    }

    /** The stand-in answers as the engine's server does, and the client holds a session with it. */
    private static void withASession() throws ServiceException {
        standIn.handler = StandInServer::echo;
        assertEquals("a session", proxy.echo(null, EchoProtocols.echo("a session")).getMessage());
    }

    private static ServiceException callRefused(String message) {
        return assertThrows(ServiceException.class, () -> proxy.echo(null, EchoProtocols.echo(message)));
    }

    /**
     * Every signed kind of refusal, and "frame not authentic" (which the server never signs), forged four ways: the
     * call fails with an IOException that is not the server's (no RemoteException, no RpcException), the frame is
     * not sent again (before, "replayed or too old" was sent up to four times and "frame not authentic" once more on
     * a new session), and the session is dropped as after a broken connection (the next call opens a new one).
     */
    @Test
    void aForgedRefusalIsNotBelievedAndTheCallIsNotSentAgain() throws Exception {
        withASession();
        List<String> reasons = new ArrayList<>(List.of(SIGNED_REASONS));
        reasons.add(Frames.NOT_AUTHENTIC);
        for (String reason : reasons) {
            for (Forgery how : Forgery.values()) {
                String what = how + " " + reason;
                int frames = standIn.framesReceived.get();
                int opened = standIn.sessionsOpened.get();
                standIn.handler = frame -> frame.request().fail(forge(reason, frame, how));
                ServiceException e = callRefused("refused");
                assertEquals(frames + 1, standIn.framesReceived.get(), "sent once: " + what);
                IOException why = assertInstanceOf(IOException.class, e.getCause(), what);
                assertFalse(why instanceof RemoteException || why instanceof RpcException, what + ": " + why);
                assertTrue(why.getMessage().contains("is not authentic") && why.getMessage().contains("not sent again"),
                        what + ": " + why.getMessage());
                standIn.handler = StandInServer::echo;
                assertEquals("after", proxy.echo(null, EchoProtocols.echo("after")).getMessage());
                assertEquals(opened + 1, standIn.sessionsOpened.get(), "the refused session was dropped: " + what);
            }
        }
    }

    /**
     * The server's own refusals, signed for the frame, are acted on as before, except that none sends the call
     * again: the length limit is Hadoop's RemoteException (the session stays), another protocol's call and a
     * malformed frame an RpcException (the session dropped), and "replayed" (a copy of this frame was taken) or
     * "too old" (whether it was cannot be told) an IOException saying the call may have run (the session, sound,
     * stays).
     */
    @Test
    void aSignedRefusalIsActedOnButNeverSendsTheCallAgain() throws Exception {
        withASession();
        for (String reason : SIGNED_REASONS) {
            int frames = standIn.framesReceived.get();
            int opened = standIn.sessionsOpened.get();
            standIn.handler = frame -> frame.request().fail(Frames.signRefusal(reason, frame.sessionId(), frame.sequence(),
                    frame.auth()));
            Throwable why = callRefused("refused").getCause();
            assertEquals(frames + 1, standIn.framesReceived.get(), "sent once: " + reason);
            boolean sessionStays = false;
            if (reason.startsWith(Frames.TOO_LONG)) {
                RemoteException remote = assertInstanceOf(RemoteException.class, why);
                assertEquals(IOException.class.getName(), remote.getClassName());
                assertEquals(reason.substring(Frames.TOO_LONG.length()), remote.getMessage());
                sessionStays = true;
            } else if (reason.startsWith(Frames.WRONG_PROTOCOL) || reason.startsWith(Frames.MALFORMED)) {
                assertInstanceOf(RpcException.class, why);
                assertTrue(why.getMessage().endsWith(reason), why.getMessage());
            } else {
                assertInstanceOf(IOException.class, why);
                assertFalse(why instanceof RemoteException || why instanceof RpcException, String.valueOf(why));
                assertTrue(why.getMessage().contains(reason + "; the call may have run, so it is not sent again"),
                        why.getMessage());
                sessionStays = true;
            }
            standIn.handler = StandInServer::echo;
            assertEquals("after", proxy.echo(null, EchoProtocols.echo("after")).getMessage());
            assertEquals(opened + (sessionStays ? 0 : 1), standIn.sessionsOpened.get(), reason);
        }
    }

    /**
     * "Unknown session" cannot be signed (the server has no key for a session it does not hold). The client asks
     * the server, with the discovery of a new session naming the refused one: a server that still holds it did
     * not send the refusal, so the call fails (it may have run) and is not sent again; the new session serves on.
     */
    @Test
    void aForgedUnknownSessionIsFoundOutByAskingTheServer() throws Exception {
        withASession();
        long[] refused = new long[1];
        int frames = standIn.framesReceived.get();
        int opened = standIn.sessionsOpened.get();
        standIn.handler = frame -> {
            refused[0] = frame.sessionId();
            frame.request().fail(Frames.UNKNOWN_SESSION);
        };
        IOException why = assertInstanceOf(IOException.class, callRefused("refused").getCause());
        assertEquals(frames + 1, standIn.framesReceived.get(), "sent once");
        assertTrue(why.getMessage().contains("still holds that session") && why.getMessage().contains("not sent again"),
                why.getMessage());
        assertEquals(opened + 1, standIn.sessionsOpened.get(), "one discovery, to ask");
        assertEquals(refused[0], standIn.previousNamed.get(standIn.previousNamed.size() - 1), "naming the refused session");
        standIn.handler = StandInServer::echo;
        assertEquals("after", proxy.echo(null, EchoProtocols.echo("after")).getMessage());
        assertEquals(opened + 1, standIn.sessionsOpened.get(), "the session opened to ask serves on");
    }

    /**
     * A session the server no longer holds (restarted, evicted): the server confirms it is gone, so the frame was
     * not taken, and the call is sent once more, on the new session, and answered.
     */
    @Test
    void aConfirmedUnknownSessionSendsTheCallOnceMoreOnANewSession() throws Exception {
        withASession();
        long forgotten = standIn.previousNamed.size();
        standIn.sessions.clear();
        int frames = standIn.framesReceived.get();
        int opened = standIn.sessionsOpened.get();
        assertEquals("again", proxy.echo(null, EchoProtocols.echo("again")).getMessage());
        assertEquals(frames + 1, standIn.framesReceived.get(), "taken once");
        assertEquals(opened + 1, standIn.sessionsOpened.get());
        assertTrue(standIn.previousNamed.get((int) forgotten) != 0, "the refused session was named");
    }

    /**
     * Calls refused together on one session ask the server once and all take its answer: forged, each fails;
     * confirmed, each goes once more on the one new session.
     */
    @Test
    void callsRefusedTogetherAskTheServerOnce() throws Exception {
        ExecutorService callers = Executors.newFixedThreadPool(2);
        try {
            withASession();
            // Forged: both frames held until both arrived, then refused as of an unknown session the server holds.
            List<StandInServer.Frame> held = new ArrayList<>();
            standIn.handler = frame -> {
                synchronized (held) {
                    held.add(frame);
                    if (held.size() == 2) {
                        held.forEach(f -> f.request().fail(Frames.UNKNOWN_SESSION));
                    }
                }
            };
            int opened = standIn.sessionsOpened.get();
            List<Future<String>> calls = twoCalls(callers);
            for (Future<String> call : calls) {
                Exception e = assertThrows(Exception.class, () -> call.get(30, TimeUnit.SECONDS));
                assertTrue(String.valueOf(e.getCause()).contains("still holds that session"), String.valueOf(e));
            }
            assertEquals(opened + 1, standIn.sessionsOpened.get(), "asked once");
            // Confirmed: the stand-in forgets its sessions; both calls are refused, asked about once, sent again.
            standIn.handler = StandInServer::echo;
            standIn.sessions.clear();
            int frames = standIn.framesReceived.get();
            for (Future<String> call : twoCalls(callers)) {
                assertEquals("together", call.get(30, TimeUnit.SECONDS));
            }
            assertEquals(opened + 2, standIn.sessionsOpened.get(), "asked once");
            assertEquals(frames + 2, standIn.framesReceived.get(), "each call taken once");
        } finally {
            callers.shutdownNow();
        }
    }

    private static List<Future<String>> twoCalls(ExecutorService callers) {
        List<Future<String>> calls = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            calls.add(callers.submit(() -> proxy.echo(null, EchoProtocols.echo("together")).getMessage()));
        }
        return calls;
    }
}
