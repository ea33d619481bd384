package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.ReplayWindow;
import io.slipstream.fabric.session.SessionKeys;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.exceptions.ConnectionClosedException;
import org.apache.hadoop.hbase.ipc.FifoRpcScheduler;
import org.apache.hadoop.hbase.ipc.NettyRpcServer;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.RpcServerFactory;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;
import org.apache.hbase.thirdparty.com.google.protobuf.CodedInputStream;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.MethodDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.ServiceDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Message;
import org.apache.hbase.thirdparty.com.google.protobuf.RpcController;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoResponseProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.RequestHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ResponseHeader;
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
            for (int index : new int[] {FrameAuth.SEQUENCE_OFFSET + 7, FrameAuth.MAC_OFFSET, FrameAuth.PREFIX_BYTES + 3,
                    next.length - 1}) {
                TestSessions.assertRefused(endpoint, TestSessions.flipped(next, index), Frames.NOT_AUTHENTIC);
            }
            // Someone who saw the session id (it travels in clear) but not the key: any key of theirs is refused.
            byte[] theirKey = new byte[SessionKeys.MAC_KEY_BYTES];
            new Random(7).nextBytes(theirKey);
            TestSessions.assertRefused(endpoint, TestSessions.frame(mine.offer().sessionId(), 1, new FrameAuth(theirKey),
                    TestSessions.echoBody("forged", 1)), Frames.NOT_AUTHENTIC);
            // Unsigned: the MAC field all zeros.
            byte[] unsigned = next.clone();
            java.util.Arrays.fill(unsigned, FrameAuth.MAC_OFFSET, FrameAuth.PREFIX_BYTES, (byte) 0);
            TestSessions.assertRefused(endpoint, unsigned, Frames.NOT_AUTHENTIC);
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
            // The same bytes again, as someone who copied them off the wire would send them.
            TestSessions.assertRefused(endpoint, once, Frames.REPLAYED);
            // Within the window: each number once, in any order; behind it: too old.
            assertEquals("in the window", TestSessions.echoed(endpoint, mine, 5000 - ReplayWindow.SIZE + 1, "in the window"));
            TestSessions.assertRefused(endpoint, TestSessions.frame(mine, 5000 - ReplayWindow.SIZE + 1,
                    TestSessions.echoBody("again", 1)), Frames.REPLAYED);
            TestSessions.assertRefused(endpoint, TestSessions.frame(mine, 5000 - ReplayWindow.SIZE,
                    TestSessions.echoBody("too old", 2)), Frames.REPLAYED);
            assertEquals(refused + 3, live.server.fabricFramesRefused());
            assertEquals(received + 2, live.server.fabricCallsReceived(), "no replay reached HBase");
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
            TestSessions.assertRefused(endpoint, TestSessions.frame(mine.offer().sessionId() ^ 1, 0, mine.auth(),
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
                            mallory.toByteArray(), SessionKeys.generate().publicKey()))));
            assertTrue(String.valueOf(e.getCause()).contains("names user mallory"), String.valueOf(e.getCause()));
            assertEquals(0, live.server.fabricSessions());
        }
    }

    /** Version 1 clients are refused with the reason; a request of another version or a bad key opens nothing. */
    @Test
    void anOlderClientIsRefusedClearlyAndABadKeyOpensNothing() throws Exception {
        try (EchoServers.Running live = EchoServers.Running.start()) {
            Discovery.Offer v1 = TestSessions.call(live.client, live.at, Discovery.OPEN_SESSION_V1, TestSessions.testServiceHeader());
            assertTrue(String.valueOf(v1.refusal()).contains("discovery version 2"), v1.refusal());
            byte[] header = TestSessions.testServiceHeader().toByteArray();
            Discovery.Offer v3 = TestSessions.call(live.client, live.at, Discovery.OPEN_SESSION_V2,
                    Discovery.encode(new Discovery.Request(3, header, SessionKeys.generate().publicKey())));
            assertTrue(String.valueOf(v3.refusal()).contains("discovery version 3"), v3.refusal());
            for (byte[] badKey : List.of(new byte[31], new byte[32])) {
                ServiceException e = assertThrows(ServiceException.class, () -> TestSessions.call(live.client, live.at,
                        Discovery.OPEN_SESSION_V2, Discovery.encode(new Discovery.Request(Discovery.VERSION, header, badKey))));
                assertTrue(String.valueOf(e.getCause()).contains("no fabric session for that key"), String.valueOf(e.getCause()));
            }
            assertEquals(0, live.server.fabricSessions());
        }
    }

    /**
     * A server that answers with a MAC that is not its own for that frame (another frame's, or over altered
     * bytes) has its answer refused by the client: a stand-in server (a plain Netty server hosting the discovery,
     * a raw fabric node answering echoes) signs the way {@link #ANSWER_MODE} says.
     */
    @Test
    void theClientBelievesOnlyAnswersCarryingTheServersMacForThatFrame() throws Exception {
        AtomicReference<FrameAuth> key = new AtomicReference<>();
        AtomicInteger sessionsOpened = new AtomicInteger();
        try (FabricNode standIn = FabricConfig.builder().listen("127.0.0.1", 0).maxMessageBytes(1 << 20).start()) {
            standIn.serve(request -> answer(request, key.get()), 1);
            Configuration serverConf = EchoServers.conf("never");
            serverConf.set("hbase.rpc.server.impl", NettyRpcServer.class.getName());
            RpcServer discovery = RpcServerFactory.createRpcServer(null, "stand-in",
                    List.of(new RpcServer.BlockingServiceAndInterface(standInDiscovery(standIn.localAddress(), key,
                            sessionsOpened), null)), new InetSocketAddress("127.0.0.1", 0), serverConf,
                    new FifoRpcScheduler(serverConf, 1));
            discovery.start();
            try (FabricRpcClient client = new FabricRpcClient(EchoServers.conf("never"))) {
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(client, discovery.getListenerAddress());
                ANSWER_MODE.set(AnswerMode.SIGNED);
                assertEquals("believed", stub.echo(null, echo("believed")).getMessage());
                assertEquals(1, sessionsOpened.get());
                for (AnswerMode forged : new AnswerMode[] {AnswerMode.ANOTHER_FRAMES_MAC, AnswerMode.ALTERED_AFTER_SIGNING}) {
                    ANSWER_MODE.set(forged);
                    ServiceException e = assertThrows(ServiceException.class, () -> stub.echo(null, echo("not believed")),
                            forged.name());
                    ConnectionClosedException closed = assertInstanceOf(ConnectionClosedException.class, e.getCause());
                    assertTrue(closed.getMessage().contains("not authentic"), closed.getMessage());
                }
                // Each refused answer dropped its session, as a broken connection: the next call opens a new one.
                ANSWER_MODE.set(AnswerMode.SIGNED);
                assertEquals("believed again", stub.echo(null, echo("believed again")).getMessage());
                assertEquals(3, sessionsOpened.get());
            } finally {
                discovery.stop();
            }
        }
    }

    private enum AnswerMode {
        SIGNED,
        ANOTHER_FRAMES_MAC,
        ALTERED_AFTER_SIGNING
    }

    private static final AtomicReference<AnswerMode> ANSWER_MODE = new AtomicReference<>(AnswerMode.SIGNED);

    /** The stand-in's echo: HBase's response framing, signed as {@link #ANSWER_MODE} says. */
    private static void answer(FabricRequest request, FrameAuth auth) throws IOException {
        ByteBuffer frame = request.payloadBuffer();
        int start = frame.position();
        long sessionId = frame.getLong(start + FrameAuth.SESSION_OFFSET);
        long sequence = frame.getLong(start + FrameAuth.SEQUENCE_OFFSET);
        assertTrue(auth.verify(frame), "the client's frame is signed");
        frame.position(start + Frames.PREFIX_BYTES);
        CodedInputStream in = CodedInputStream.newInstance(frame);
        int limit = in.pushLimit(in.readRawVarint32());
        RequestHeader header = RequestHeader.parseFrom(in);
        in.popLimit(limit);
        limit = in.pushLimit(in.readRawVarint32());
        String message = EchoRequestProto.parseFrom(in).getMessage();
        in.popLimit(limit);

        ByteArrayOutputStream body = new ByteArrayOutputStream();
        ResponseHeader.newBuilder().setCallId(header.getCallId()).build().writeDelimitedTo(body);
        EchoResponseProto.newBuilder().setMessage(message).build().writeDelimitedTo(body);
        ByteArrayOutputStream response = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(response);
        out.write(new byte[Frames.RESPONSE_PREFIX_BYTES]);
        out.writeInt(body.size());
        body.writeTo(out);
        byte[] bytes = response.toByteArray();
        AnswerMode mode = ANSWER_MODE.get();
        auth.signResponse(bytes, Frames.FRAME_VERSION, sessionId, mode == AnswerMode.ANOTHER_FRAMES_MAC ? sequence + 1 : sequence);
        if (mode == AnswerMode.ALTERED_AFTER_SIGNING) {
            bytes[bytes.length - 1] ^= 0x01;
        }
        request.respond(bytes);
    }

    /** The discovery of the stand-in: a real key agreement, a session whose frames the raw node answers. */
    private static BlockingService standInDiscovery(InetSocketAddress fabric, AtomicReference<FrameAuth> key,
            AtomicInteger sessionsOpened) {
        return new BlockingService() {
            @Override
            public ServiceDescriptor getDescriptorForType() {
                return Discovery.SERVICE;
            }

            @Override
            public Message callBlockingMethod(MethodDescriptor md, RpcController controller, Message request)
                    throws ServiceException {
                Discovery.Request asked = Discovery.decodeRequest(request);
                SessionKeys keys = SessionKeys.generate();
                long sessionId = 1000 + sessionsOpened.incrementAndGet();
                try {
                    key.set(new FrameAuth(SessionKeys.macKey(keys.agree(asked.clientPublicKey()), sessionId,
                            asked.clientPublicKey(), keys.publicKey(), Frames.KEY_PURPOSE)));
                } catch (java.security.InvalidKeyException e) {
                    throw new ServiceException(e);
                }
                return Discovery.encode(new Discovery.Offer(Discovery.VERSION, "127.0.0.1", fabric.getPort(), sessionId,
                        1 << 20, 1 << 20, keys.publicKey(), null));
            }

            @Override
            public Message getRequestPrototype(MethodDescriptor md) {
                return Discovery.service(request -> null).getRequestPrototype(md);
            }

            @Override
            public Message getResponsePrototype(MethodDescriptor md) {
                return Discovery.offerPrototype();
            }
        };
    }
}
