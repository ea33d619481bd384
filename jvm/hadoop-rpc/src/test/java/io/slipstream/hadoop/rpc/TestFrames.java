package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.session.FrameAuth;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.ClientId;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.ProtobufRpcEngine2Protos.RequestHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcRequestHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.CodedInputStream;
import org.apache.hadoop.thirdparty.protobuf.Message;
import org.apache.hadoop.util.ProtoUtil;

/** Fabric frames made by hand, for tests that send what a client of the engine never would. */
final class TestFrames {
    private TestFrames() {
    }

    /**
     * Opens a session as {@code user}, over a socket connection for {@code protocol}, as the engine's client does,
     * with MACs over every byte (so that a test's altered body is refused as not authentic).
     */
    static SessionOffer open(UserGroupInformation user, Configuration conf, InetSocketAddress server, Class<?> protocol)
            throws Exception {
        return open(user, conf, server, protocol, FrameAuth.Coverage.FULL);
    }

    static SessionOffer open(UserGroupInformation user, Configuration conf, InetSocketAddress server, Class<?> protocol,
            FrameAuth.Coverage frameMac) throws Exception {
        return user.doAs((PrivilegedExceptionAction<SessionOffer>) () -> SessionOffer.open(conf, server, protocol,
                RPC.getProtocolName(protocol), user, 0, 0, frameMac));
    }

    /** An echo call as Hadoop's socket path frames it after its length: the two headers and the request. */
    static byte[] echoBody(String protocolName, String message, int callId) {
        return callBody(protocolName, "echo", EchoProtocols.echo(message), callId);
    }

    /** A call of {@code method} as Hadoop's socket path frames it after its length. */
    static byte[] callBody(String protocolName, String method, Message request, int callId) {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ProtoUtil.makeRpcRequestHeader(RPC.RpcKind.RPC_PROTOCOL_BUFFER, RpcRequestHeaderProto.OperationProto.RPC_FINAL_PACKET,
                    callId, 0, ClientId.getClientId()).writeDelimitedTo(out);
            RequestHeaderProto.newBuilder().setMethodName(method).setDeclaringClassProtocolName(protocolName)
                    .setClientProtocolVersion(1).build().writeDelimitedTo(out);
            request.writeDelimitedTo(out);
            return out.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A frame of this version of {@code body} for {@code session}, numbered {@code sequence} and signed with its key. */
    static byte[] frame(SessionOffer session, long sequence, byte[] body) {
        byte[] frame = new byte[Frames.PREFIX_BYTES + body.length];
        System.arraycopy(body, 0, frame, Frames.PREFIX_BYTES, body.length);
        Frames.seal(frame, session.sessionId(), sequence, session.auth());
        return frame;
    }

    /**
     * Sends an echo frame of {@code session}; returns the echoed message of the server's successful answer,
     * after checking that the answer carries the server's MAC for that frame (and not for any other).
     */
    static String echoed(FabricEndpoint endpoint, SessionOffer session, byte[] frame) throws IOException {
        try (FabricBuffer response = endpoint.request(Frames.OP_CALL, frame)) {
            return echoed(response.byteBuffer(), session, sequence(frame));
        }
    }

    /** The sequence number {@code frame} was sealed with. */
    static long sequence(byte[] frame) {
        return ByteBuffer.wrap(frame).getLong(Frames.SEQUENCE_OFFSET);
    }

    /** {@code answer} (a successful echo's), verified as the server's for frame {@code sequence} of {@code session}, read. */
    static String echoed(ByteBuffer answer, SessionOffer session, long sequence) throws IOException {
        CodedInputStream in = verified(answer, session, sequence);
        RpcResponseHeaderProto header = header(in);
        assertEquals(RpcResponseHeaderProto.RpcStatusProto.SUCCESS, header.getStatus(), header.getErrorMsg());
        int limit = in.pushLimit(in.readRawVarint32());
        EchoResponseProto echo = EchoResponseProto.parseFrom(in);
        in.popLimit(limit);
        return echo.getMessage();
    }

    /** The response header of {@code answer}, once verified as the server's for frame {@code sequence} of {@code session}. */
    static RpcResponseHeaderProto header(ByteBuffer answer, SessionOffer session, long sequence) throws IOException {
        return header(verified(answer, session, sequence));
    }

    /** Hadoop's framing of {@code answer}, after checking the server's MAC before it. */
    private static CodedInputStream verified(ByteBuffer answer, SessionOffer session, long sequence) {
        assertServersAnswer(answer, session, sequence);
        return CodedInputStream.newInstance(answer.duplicate().position(answer.position() + Frames.RESPONSE_PREFIX_BYTES));
    }

    private static RpcResponseHeaderProto header(CodedInputStream in) throws IOException {
        int limit = in.pushLimit(in.readRawVarint32());
        RpcResponseHeaderProto header = RpcResponseHeaderProto.parseFrom(in);
        in.popLimit(limit);
        return header;
    }

    /** {@code answer} carries the server's MAC bound to frame {@code sequence} of {@code session}, and to nothing else. */
    static void assertServersAnswer(ByteBuffer answer, SessionOffer session, long sequence) {
        assertTrue(Frames.verifyResponse(answer, session.sessionId(), sequence, session.auth()),
                "the answer carries the server's MAC for frame " + sequence);
        assertFalse(Frames.verifyResponse(answer, session.sessionId(), sequence + 1, session.auth()),
                "the MAC is bound to the frame it answers");
        assertFalse(Frames.verifyResponse(answer, session.sessionId() + 1, sequence, session.auth()),
                "the MAC is bound to the session");
    }

    /** The server fails the request with a message containing {@code why}; returns the refusal's text. */
    static String assertRefused(FabricEndpoint endpoint, int op, byte[] frame, String why) {
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(op, frame).close());
        assertEquals(FabricException.Kind.REMOTE, e.kind());
        assertTrue(e.getMessage().contains(why), e.getMessage());
        return Frames.refusalText(e.getMessage());
    }

    /**
     * The server refuses {@code frame} (of {@code session}) with a reason starting with {@code why}, signed for that
     * frame: the refusal verifies with the session's key for the frame's sequence number, and not for the next.
     */
    static void assertRefusedSigned(FabricEndpoint endpoint, byte[] frame, SessionOffer session, String why) {
        String text = assertRefused(endpoint, Frames.OP_CALL, frame, why);
        long sequence = sequence(frame);
        String reason = Frames.verifyRefusal(text, session.sessionId(), sequence, session.auth());
        assertTrue(reason != null && reason.startsWith(why), "signed for frame " + sequence + ": " + text);
        assertEquals(null, Frames.verifyRefusal(text, session.sessionId(), sequence + 1, session.auth()),
                "bound to the frame it refuses");
    }

    /** The server refuses {@code frame} with exactly {@code why}, unsigned (unknown session, not authentic). */
    static void assertRefusedUnsigned(FabricEndpoint endpoint, byte[] frame, String why) {
        assertEquals(why, assertRefused(endpoint, Frames.OP_CALL, frame, why));
    }

    /** {@code frame} with its 8 bytes at {@code offset} replaced (the MAC left as it was). */
    static byte[] withLong(byte[] frame, int offset, long value) {
        byte[] copy = frame.clone();
        ByteBuffer.wrap(copy).putLong(offset, value);
        return copy;
    }

    /** {@code frame} with one bit of byte {@code index} flipped. */
    static byte[] flipped(byte[] frame, int index) {
        byte[] copy = frame.clone();
        copy[index] ^= 0x01;
        return copy;
    }
}
