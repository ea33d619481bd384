package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
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
import org.apache.hadoop.util.ProtoUtil;

/** Fabric frames made by hand, for tests that send what a client of the engine never would. */
final class TestFrames {
    private TestFrames() {
    }

    /** Opens a session as {@code user}, over a socket connection for {@code protocol}, as the engine's client does. */
    static SessionOffer open(UserGroupInformation user, Configuration conf, InetSocketAddress server, Class<?> protocol)
            throws Exception {
        return user.doAs((PrivilegedExceptionAction<SessionOffer>) () -> SessionOffer.open(conf, server, protocol,
                RPC.getProtocolName(protocol), user, 0));
    }

    /** An echo call as Hadoop's socket path frames it after its length: the two headers and the request. */
    static byte[] echoBody(String protocolName, String message, int callId) {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ProtoUtil.makeRpcRequestHeader(RPC.RpcKind.RPC_PROTOCOL_BUFFER, RpcRequestHeaderProto.OperationProto.RPC_FINAL_PACKET,
                    callId, 0, ClientId.getClientId()).writeDelimitedTo(out);
            RequestHeaderProto.newBuilder().setMethodName("echo").setDeclaringClassProtocolName(protocolName)
                    .setClientProtocolVersion(1).build().writeDelimitedTo(out);
            EchoProtocols.echo(message).writeDelimitedTo(out);
            return out.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A version-2 frame of {@code body} for {@code session}, numbered {@code sequence} and signed with its key. */
    static byte[] frame(SessionOffer session, long sequence, byte[] body) {
        byte[] frame = new byte[Frames.PREFIX_BYTES + body.length];
        System.arraycopy(body, 0, frame, Frames.PREFIX_BYTES, body.length);
        Frames.seal(frame, session.sessionId(), sequence, session.auth());
        return frame;
    }

    /** Sends an echo frame; returns the echoed message of the server's successful answer. */
    static String echoed(FabricEndpoint endpoint, byte[] frame) throws IOException {
        try (FabricBuffer response = endpoint.request(Frames.OP_CALL, frame)) {
            CodedInputStream in = CodedInputStream.newInstance(response.byteBuffer());
            int limit = in.pushLimit(in.readRawVarint32());
            RpcResponseHeaderProto header = RpcResponseHeaderProto.parseFrom(in);
            in.popLimit(limit);
            assertEquals(RpcResponseHeaderProto.RpcStatusProto.SUCCESS, header.getStatus(), header.getErrorMsg());
            limit = in.pushLimit(in.readRawVarint32());
            EchoResponseProto echo = EchoResponseProto.parseFrom(in);
            in.popLimit(limit);
            return echo.getMessage();
        }
    }

    /** The server fails the request with a message containing {@code why}. */
    static void assertRefused(FabricEndpoint endpoint, int op, byte[] frame, String why) {
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(op, frame).close());
        assertEquals(FabricException.Kind.REMOTE, e.kind());
        assertTrue(e.getMessage().contains(why), e.getMessage());
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
