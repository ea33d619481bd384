package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.codec.KeyValueCodec;
import org.apache.hadoop.hbase.ipc.HBaseRpcControllerImpl;
import org.apache.hadoop.hbase.ipc.RpcClient;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hadoop.hbase.security.User;
import org.apache.hbase.thirdparty.com.google.protobuf.CodedInputStream;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.MethodDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Message;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoResponseProto;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.RequestHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ResponseHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.UserInformation;

/** Fabric sessions opened and frames made by hand, for tests that send what the engine's client never would. */
final class TestSessions {
    private TestSessions() {
    }

    static final int RPC_TIMEOUT_MS = 20_000;

    /** A session as its client holds it: the server's offer and the key agreed (null when refused). */
    record Opened(Discovery.Offer offer, FrameAuth auth) {
    }

    /** The header a connection of the current user for HBase's test service sends. */
    static ConnectionHeader testServiceHeader() throws IOException {
        return ConnectionHeader.newBuilder()
                .setServiceName(TestProtobufRpcServiceImpl.SERVICE.getDescriptorForType().getName())
                .setUserInfo(UserInformation.newBuilder().setEffectiveUser(User.getCurrent().getName()))
                .setCellBlockCodecClass(KeyValueCodec.class.getCanonicalName()).build();
    }

    /**
     * Messages 1-3 by hand, as the client does them: OpenSessionV2 for the test service on the socket path, asking
     * for MACs over every byte (so that a test may alter any byte of a frame and see it refused).
     */
    static Opened open(RpcClient client, InetSocketAddress at) throws Exception {
        return open(client, at, FrameAuth.Coverage.FULL);
    }

    /** {@link #open(RpcClient, InetSocketAddress)} asking for MACs covering {@code frameMac} at least. */
    static Opened open(RpcClient client, InetSocketAddress at, FrameAuth.Coverage frameMac) throws Exception {
        SessionKeys keys = SessionKeys.generate();
        Discovery.Offer offer = call(client, at, Discovery.OPEN_SESSION_V2, Discovery.encode(new Discovery.Request(
                Discovery.VERSION, testServiceHeader().toByteArray(), keys.publicKey(), frameMac)));
        if (offer.refusal() != null) {
            return new Opened(offer, null);
        }
        return new Opened(offer, Discovery.clientAuth(keys, offer, frameMac));
    }

    /** One discovery call on the socket path, as the current user. */
    static Discovery.Offer call(RpcClient client, InetSocketAddress at, MethodDescriptor method, Message request)
            throws Exception {
        return Discovery.decode(client.createBlockingRpcChannel(ServerName.valueOf("127.0.0.1", at.getPort(), 0L),
                User.getCurrent(), RPC_TIMEOUT_MS).callBlockingMethod(method, new HBaseRpcControllerImpl(), request,
                Discovery.offerPrototype()));
    }

    /** An echo call as HBase's socket path frames it after its length: RequestHeader and parameter. */
    static byte[] echoBody(String message, int callId) {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            RequestHeader.newBuilder().setCallId(callId).setMethodName("echo").setRequestParam(true).build()
                    .writeDelimitedTo(out);
            EchoRequestProto.newBuilder().setMessage(message).build().writeDelimitedTo(out);
            return out.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A frame of {@code body} for {@code session}, numbered {@code sequence} and signed with {@code auth}. */
    static byte[] frame(long sessionId, long sequence, FrameAuth auth, byte[] body) {
        byte[] frame = new byte[Frames.PREFIX_BYTES + body.length];
        System.arraycopy(body, 0, frame, Frames.PREFIX_BYTES, body.length);
        Frames.seal(frame, sessionId, sequence, auth);
        return frame;
    }

    static byte[] frame(Opened session, long sequence, byte[] body) {
        return frame(session.offer().sessionId(), sequence, session.auth(), body);
    }

    /**
     * Sends an echo frame numbered {@code sequence}; checks the answer's MAC is the server's for that frame
     * (and for no other number) and returns the echoed message.
     */
    static String echoed(FabricEndpoint endpoint, Opened session, long sequence, String message) throws IOException {
        return echoed(endpoint, session, sequence, frame(session, sequence, echoBody(message, (int) sequence)));
    }

    /** {@link #echoed(FabricEndpoint, Opened, long, String)} of a frame made by the caller (call id {@code sequence}). */
    static String echoed(FabricEndpoint endpoint, Opened session, long sequence, byte[] frame) throws IOException {
        try (FabricBuffer response = endpoint.request(Frames.OP_CALL, frame)) {
            ByteBuffer view = response.byteBuffer();
            long id = session.offer().sessionId();
            assertTrue(session.auth().verifyResponse(view, Frames.FRAME_VERSION, id, sequence), "the server's MAC");
            assertFalse(session.auth().verifyResponse(view, Frames.FRAME_VERSION, id, sequence + 1), "bound to the frame");
            view.position(view.position() + Frames.RESPONSE_PREFIX_BYTES);
            assertEquals(view.remaining() - 4, view.getInt(), "HBase's 4-byte length");
            CodedInputStream in = CodedInputStream.newInstance(view);
            int limit = in.pushLimit(in.readRawVarint32());
            ResponseHeader header = ResponseHeader.parseFrom(in);
            in.popLimit(limit);
            assertEquals((int) sequence, header.getCallId());
            assertFalse(header.hasException(), String.valueOf(header.getException()));
            limit = in.pushLimit(in.readRawVarint32());
            String echoed = EchoResponseProto.parseFrom(in).getMessage();
            in.popLimit(limit);
            return echoed;
        }
    }

    /** The server fails the request with a message containing {@code why}; returns the refusal's text. */
    static String assertRefused(FabricEndpoint endpoint, byte[] frame, String why) {
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(Frames.OP_CALL, frame).close());
        assertEquals(FabricException.Kind.REMOTE, e.kind());
        assertTrue(e.getMessage().contains(why), e.getMessage());
        return Frames.refusalText(e.getMessage());
    }

    /**
     * The server refuses {@code frame} of {@code session} with a reason starting with {@code why}, signed for that
     * frame: the refusal verifies with the session's key for the frame's sequence number, and not for the next.
     */
    static void assertRefusedSigned(FabricEndpoint endpoint, byte[] frame, Opened session, String why) {
        String text = assertRefused(endpoint, frame, why);
        long sequence = ByteBuffer.wrap(frame).getLong(FrameAuth.SEQUENCE_OFFSET);
        long id = session.offer().sessionId();
        String reason = Frames.verifyRefusal(text, id, sequence, session.auth());
        assertTrue(reason != null && reason.startsWith(why), "signed for frame " + sequence + ": " + text);
        assertNull(Frames.verifyRefusal(text, id, sequence + 1, session.auth()), "bound to the frame it refuses");
    }

    /** The server refuses {@code frame} with exactly {@code why}, unsigned (unknown session, not authentic). */
    static void assertRefusedUnsigned(FabricEndpoint endpoint, byte[] frame, String why) {
        assertEquals(why, assertRefused(endpoint, frame, why));
    }

    /** {@code frame} with one bit of byte {@code index} flipped. */
    static byte[] flipped(byte[] frame, int index) {
        byte[] copy = frame.clone();
        copy[index] ^= 0x01;
        return copy;
    }

    static void assertOffered(Opened session) {
        assertNull(session.offer().refusal());
    }
}
