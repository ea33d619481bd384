package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeys;
import org.apache.hadoop.ipc.FabricCallBridge;
import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.ProtocolSignature;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.ipc.RetriableException;
import org.apache.hadoop.ipc.VersionedProtocol;
import org.apache.hadoop.ipc.WritableRpcEngine;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto.RpcStatusProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.SleepRequestProto;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * An answer over the fabric is believed only when it carries the server's MAC for the very frame it
 * answers: the engine's server signs every answer it gives (a result, Hadoop's error, the full queue's
 * back-off), and the engine's client refuses any answer that does not verify (from a stand-in server that
 * signs wrongly) without returning anything of it.
 */
class SignedAnswersTest {
    private static Configuration conf;
    private static RPC.Server server;

    /** One handler and a call queue of one call, with Hadoop's back-off: a third call at once is shed. */
    @BeforeAll
    static void start() throws Exception {
        conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        // MACs over every byte, so that an answer altered after signing is refused (with the default, header,
        // the MAC binds the answer's length, not its bytes: FrameMacTest).
        conf.set(RpcConf.FRAME_MAC, "full");
        conf.setInt(CommonConfigurationKeys.IPC_SERVER_HANDLER_QUEUE_SIZE_KEY, 1);
        // The queue's settings are keyed by the port the server is built with (0 here).
        conf.setBoolean("ipc.0." + CommonConfigurationKeys.IPC_BACKOFF_ENABLE, true);
        server = EchoProtocols.server(conf, 1);
    }

    @AfterAll
    static void stop() {
        server.stop();
    }

    @Test
    void theServerSignsEveryAnswerForTheFrameItAnswers() throws Exception {
        SessionOffer session = TestFrames.open(UserGroupInformation.getCurrentUser(), conf, server.getListenerAddress(),
                FabricEcho.class);
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(session.host(), session.port());
            // A result (TestFrames checks the MAC: the frame's, not another's, not another session's).
            assertEquals("result", TestFrames.echoed(endpoint, session,
                    TestFrames.frame(session, 0, TestFrames.echoBody(EchoProtocols.NAME, "result", 1))));
            // Hadoop's error, raised by the call.
            byte[] error = TestFrames.callBody(EchoProtocols.NAME, "error2", EchoProtocols.EMPTY, 2);
            try (FabricBuffer answer = endpoint.request(Frames.OP_CALL, TestFrames.frame(session, 1, error))) {
                RpcResponseHeaderProto header = TestFrames.header(answer.byteBuffer(), session, 1);
                assertEquals(RpcStatusProto.ERROR, header.getStatus());
                assertEquals(IOException.class.getName(), header.getExceptionClassName());
            }
            // The one handler busy and the queue full: the next call is shed at once, with Hadoop's back-off error
            // (the bridge's answer, not a handler's). The first call sleeps long enough for the two calls after it
            // to arrive under any load this test meets.
            int sleeping = EchoProtocols.Impl.SLEEPING.get();
            CompletableFuture<FabricBuffer> running = endpoint.requestAsync(Frames.OP_CALL,
                    TestFrames.frame(session, 2, TestFrames.callBody(EchoProtocols.NAME, "sleep", sleep(5000), 3)));
            await(() -> EchoProtocols.Impl.SLEEPING.get() == sleeping + 1, "the handler runs the first call");
            CompletableFuture<FabricBuffer> queued = endpoint.requestAsync(Frames.OP_CALL,
                    TestFrames.frame(session, 3, TestFrames.callBody(EchoProtocols.NAME, "sleep", sleep(1), 4)));
            await(() -> server.getCallQueueLen() == 1, "the second call waits in the queue");
            try (FabricBuffer answer = endpoint.request(Frames.OP_CALL,
                    TestFrames.frame(session, 4, TestFrames.echoBody(EchoProtocols.NAME, "shed", 5)))) {
                RpcResponseHeaderProto header = TestFrames.header(answer.byteBuffer(), session, 4);
                assertEquals(RetriableException.class.getName(), header.getExceptionClassName(), header.getErrorMsg());
                assertEquals(sleeping + 1, EchoProtocols.Impl.SLEEPING.get(), "shed while the handler was busy");
            }
            for (int i = 0; i < 2; i++) {
                try (FabricBuffer answer = (i == 0 ? running : queued).get(30, TimeUnit.SECONDS)) {
                    assertEquals(RpcStatusProto.SUCCESS, TestFrames.header(answer.byteBuffer(), session, 2 + i).getStatus());
                }
            }
        }
    }

    private static SleepRequestProto sleep(int ms) {
        return SleepRequestProto.newBuilder().setMilliSeconds(ms).build();
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() - deadline < 0, "timed out waiting: " + what);
            Thread.sleep(5);
        }
    }

    /** How the stand-in server signs its answers. */
    private enum AnswerMode {
        /** As the engine's server does. */
        SIGNED,
        /** With the MAC of the answer to another frame of the session (a recorded answer, replayed). */
        ANOTHER_FRAMES_MAC,
        /** Signed, then one byte of the result changed on the way. */
        ALTERED_AFTER_SIGNING,
        /** With a key of its own: someone who injects answers without the session's key. */
        OTHER_KEY
    }

    /**
     * A server that answers with a MAC that is not its own for that frame has its answers refused by the client:
     * the call fails with an IOException, nothing of the answer is returned, the session is dropped (the next
     * call opens a new one), and the call is not sent again by the engine (it may have run). The stand-in
     * ({@link StandInServer}) answers echoes with Hadoop's response framing, every forged answer one the client
     * would take without the check (the call's id, SUCCESS, a well-formed result).
     */
    @Test
    void theClientBelievesOnlyAnswersCarryingTheServersMacForThatFrame() throws Exception {
        AtomicReference<AnswerMode> mode = new AtomicReference<>(AnswerMode.SIGNED);
        try (StandInServer standIn = StandInServer.start(conf)) {
            standIn.handler = frame -> answer(frame, mode.get());
            FabricEcho proxy = EchoProtocols.client(FabricEcho.class, standIn.address(), conf);
            try {
                long believed = FabricRpcEngine.fabricCalls();
                assertEquals("believed", proxy.echo(null, EchoProtocols.echo("believed")).getMessage());
                assertEquals(1, standIn.sessionsOpened.get());
                AnswerMode[] forgeries = {AnswerMode.ANOTHER_FRAMES_MAC, AnswerMode.ALTERED_AFTER_SIGNING,
                    AnswerMode.OTHER_KEY};
                for (AnswerMode forged : forgeries) {
                    mode.set(forged);
                    ServiceException e = assertThrows(ServiceException.class,
                            () -> proxy.echo(null, EchoProtocols.echo("not believed")), forged.name());
                    IOException refused = assertInstanceOf(IOException.class, e.getCause(), forged.name());
                    assertFalse(refused instanceof RemoteException, "not the server's error: " + refused);
                    assertTrue(refused.getMessage().contains("is not authentic; session dropped"), refused.getMessage());
                }
                // Each refused answer dropped its session: every forged call after the first opened one, and the
                // next call opens one more.
                mode.set(AnswerMode.SIGNED);
                assertEquals("believed again", proxy.echo(null, EchoProtocols.echo("believed again")).getMessage());
                assertEquals(1 + forgeries.length, standIn.sessionsOpened.get());
                // One frame per call: a refused answer is not followed by the call sent again.
                assertEquals(2 + forgeries.length, standIn.framesReceived.get());
                assertEquals(2, FabricRpcEngine.fabricCalls() - believed, "only the signed answers were results");
            } finally {
                RPC.stopProxy(proxy);
            }
        }
    }

    /** An echo behind a MAC made as {@code how} says. */
    private static void answer(StandInServer.Frame frame, AnswerMode how) throws IOException {
        String result = how == AnswerMode.ANOTHER_FRAMES_MAC ? "another call's result" : frame.message();
        byte[] bytes = StandInServer.answer(frame, result);
        switch (how) {
            case ANOTHER_FRAMES_MAC -> Frames.signResponse(bytes, frame.sessionId(), frame.sequence() + 1, frame.auth());
            case OTHER_KEY -> Frames.signResponse(bytes, frame.sessionId(), frame.sequence(),
                    new FrameAuth(new byte[SessionKeys.MAC_KEY_BYTES]));
            default -> Frames.signResponse(bytes, frame.sessionId(), frame.sequence(), frame.auth());
        }
        if (how == AnswerMode.ALTERED_AFTER_SIGNING) {
            bytes[bytes.length - 1] ^= 0x01; // the result's last character
        }
        frame.request().respond(bytes);
    }

    /** The discovery as a version-2 client calls it (its sessions' answers unsigned). */
    @ProtocolInfo(protocolName = "io.slipstream.hadoop.rpc.FabricDiscovery", protocolVersion = 2)
    interface FabricDiscoveryV2 extends VersionedProtocol {
        String openSession(String protocol, byte[] clientPublicKey) throws IOException;
    }

    /** The discovery as a version-3 client calls it (its sessions' refusals unsigned). */
    @ProtocolInfo(protocolName = "io.slipstream.hadoop.rpc.FabricDiscovery", protocolVersion = 3)
    interface FabricDiscoveryV3 extends VersionedProtocol {
        String openSession(String protocol, byte[] clientPublicKey) throws IOException;
    }

    /**
     * Version-2 and version-3 clients get Hadoop's VersionMismatch (so they take sockets, or fail with fallback
     * never): no session.
     */
    @Test
    void olderClientsOpenNoSession() throws Exception {
        FabricRpcServer fabricServer = (FabricRpcServer) server;
        int sessions = fabricServer.fabricSessions();
        for (Class<?> older : new Class<?>[] {FabricDiscoveryV2.class, FabricDiscoveryV3.class}) {
            RemoteException e = assertThrows(RemoteException.class, () -> FabricCallBridge.callWritable(conf,
                    server.getListenerAddress(), FabricEcho.class, UserGroupInformation.getCurrentUser(), 0,
                    older.getMethod("openSession", String.class, byte[].class), EchoProtocols.NAME,
                    SessionKeys.generate().publicKey()));
            assertEquals(RPC.VersionMismatch.class.getName(), e.getClassName(), older + ": " + e.getMessage());
        }
        assertEquals(sessions, fabricServer.fabricSessions());
    }

    /**
     * This client against a server of discovery version 3 (refusals unsigned): Hadoop's VersionMismatch, so the
     * calls take sockets (fallback auto) or fail (never). The older server: Hadoop's echo server hosting a
     * version-3 discovery that would open sessions.
     */
    @Test
    void anOlderServerIsReachedOverSocketsOrRefusedWithFallbackNever() throws Exception {
        Configuration vanilla = EchoProtocols.conf();
        RPC.setProtocolEngine(vanilla, EchoProtocols.SocketEcho.class, ProtobufRpcEngine2.class);
        RPC.Server older = new RPC.Builder(vanilla).setProtocol(EchoProtocols.SocketEcho.class)
                .setInstance(TestProtobufRpcProto.newReflectiveBlockingService(new EchoProtocols.Impl()))
                .setBindAddress("127.0.0.1").setPort(0).setNumHandlers(1).build();
        WritableRpcEngine.ensureInitialized();
        older.addProtocol(RPC.RpcKind.RPC_WRITABLE, FabricDiscoveryV3.class, new OlderDiscovery());
        older.start();
        try {
            long socketBefore = FabricRpcEngine.socketCalls();
            assertEquals("older", EchoProtocols.echoAs("ivan", FabricEcho.class, older.getListenerAddress(),
                    EchoProtocols.conf(), "older"));
            assertEquals(1, FabricRpcEngine.socketCalls() - socketBefore);
            assertEquals(0, OlderDiscovery.OPENED.get(), "asked, but refused by Hadoop before the call ran");

            Configuration never = EchoProtocols.conf();
            never.set(RpcConf.FALLBACK, "never");
            ServiceException e = assertThrows(ServiceException.class, () -> EchoProtocols.echoAs("judy", FabricEcho.class,
                    older.getListenerAddress(), never, "refused"));
            assertTrue(e.getCause().getMessage().contains("opened no fabric session (" + RPC.VersionMismatch.class.getName()),
                    e.getCause().getMessage());
        } finally {
            older.stop();
        }
    }

    /** A version-3 server's discovery (its answers would be of frame version 3). */
    private static final class OlderDiscovery implements FabricDiscoveryV3 {
        static final AtomicInteger OPENED = new AtomicInteger();

        @Override
        public String openSession(String protocol, byte[] clientPublicKey) {
            OPENED.incrementAndGet();
            return "3 127.0.0.1 1 1 " + java.util.Base64.getEncoder().encodeToString(new byte[32]);
        }

        @Override
        public long getProtocolVersion(String protocol, long clientVersion) {
            return 3;
        }

        @Override
        public ProtocolSignature getProtocolSignature(String protocol, long clientVersion, int clientMethodsHash)
                throws IOException {
            return ProtocolSignature.getProtocolSignature(this, protocol, clientVersion, clientMethodsHash);
        }
    }
}
