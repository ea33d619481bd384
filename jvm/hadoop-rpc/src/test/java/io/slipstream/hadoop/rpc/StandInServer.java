package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.InvalidKeyException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.ProtocolSignature;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.WritableRpcEngine;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcRequestHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto;
import org.apache.hadoop.ipc.protobuf.RpcHeaderProtos.RpcResponseHeaderProto.RpcStatusProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoRequestProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto;
import org.apache.hadoop.thirdparty.protobuf.CodedInputStream;

/**
 * A stand-in for the engine's server, for tests of what the engine's client believes: a Hadoop socket server
 * hosting a discovery of its own (a real key agreement, this version's, and the truth about the previous
 * session a client names) and a raw fabric node whose echo frames a test answers or refuses as it likes
 * ({@link #handler}). The client's frames are checked as the real server checks them; a frame of a session the
 * stand-in does not hold is refused as of an unknown session.
 */
final class StandInServer implements FabricDiscovery, AutoCloseable {
    /** One echo frame, verified as its session's client's. */
    record Frame(FabricRequest request, long sessionId, long sequence, FrameAuth auth, RpcRequestHeaderProto header,
            String message) {
    }

    interface Handler {
        void handle(Frame frame) throws IOException;
    }

    final AtomicInteger sessionsOpened = new AtomicInteger();
    /** Frames of held sessions whose MAC verified: each call sent once is one frame. */
    final AtomicInteger framesReceived = new AtomicInteger();
    /** The previous sessions clients named when opening one (0 when none). */
    final List<Long> previousNamed = new CopyOnWriteArrayList<>();
    final Map<Long, FrameAuth> sessions = new ConcurrentHashMap<>();
    volatile Handler handler = StandInServer::echo;
    private final FabricNode fabric;
    private final RPC.Server discovery;

    private StandInServer(Configuration conf) throws Exception {
        fabric = new RpcConf(conf).nodeBuilder("127.0.0.1", conf.getInt(RpcConf.PORT, 0)).start();
        fabric.serve(this::receive, 1);
        Configuration standInConf = new Configuration(false);
        RPC.setProtocolEngine(standInConf, FabricDiscovery.class, WritableRpcEngine.class);
        discovery = new RPC.Builder(standInConf).setProtocol(FabricDiscovery.class).setInstance(this)
                .setBindAddress("127.0.0.1").setPort(0).setNumHandlers(1).build();
        discovery.start();
    }

    static StandInServer start(Configuration conf) throws Exception {
        return new StandInServer(conf);
    }

    /** The address clients reach the stand-in at (its discovery's socket listener). */
    InetSocketAddress address() {
        return discovery.getListenerAddress();
    }

    @Override
    public void close() {
        discovery.stop();
        fabric.close();
    }

    /** A session as the engine's server opens one: X25519 with the client's key, the engine's key derivation. */
    @Override
    public String openSession(String protocol, byte[] clientPublicKey, long previousSession, String frameMac)
            throws IOException {
        FrameAuth.Coverage coverage = FrameAuth.Coverage.ofWord(frameMac);
        previousNamed.add(previousSession);
        SessionKeys keys = SessionKeys.generate();
        long id = 1000 + sessionsOpened.incrementAndGet();
        SessionOffer.Previous previous = previousSession == 0 ? SessionOffer.Previous.NONE
                : sessions.containsKey(previousSession) ? SessionOffer.Previous.OPEN : SessionOffer.Previous.GONE;
        try {
            sessions.put(id, new FrameAuth(SessionKeys.macKey(keys.agree(clientPublicKey), id, clientPublicKey,
                    keys.publicKey(), Frames.keyPurpose(coverage)), coverage));
        } catch (InvalidKeyException e) {
            throw new IOException(e);
        }
        return SessionOffer.answer(fabric.localAddress(), id, keys.publicKey(), previous, coverage);
    }

    private void receive(FabricRequest request) throws IOException {
        ByteBuffer frame = request.payloadBuffer();
        int start = frame.position();
        long sessionId = frame.getLong(start + Frames.SESSION_OFFSET);
        FrameAuth auth = sessions.get(sessionId);
        if (auth == null) {
            request.fail(Frames.UNKNOWN_SESSION);
            return;
        }
        if (!auth.verify(frame)) {
            // The client's frames are the real thing; only the stand-in's answers and refusals are made up.
            request.fail("stand-in: a frame that does not verify");
            return;
        }
        framesReceived.incrementAndGet();
        long sequence = frame.getLong(start + Frames.SEQUENCE_OFFSET);
        CodedInputStream in = CodedInputStream.newInstance(frame.duplicate().position(start + Frames.PREFIX_BYTES));
        int limit = in.pushLimit(in.readRawVarint32());
        RpcRequestHeaderProto header = RpcRequestHeaderProto.parseFrom(in);
        in.popLimit(limit);
        in.skipRawBytes(in.readRawVarint32()); // the method's header: only echo is called here
        limit = in.pushLimit(in.readRawVarint32());
        String message = EchoRequestProto.parseFrom(in).getMessage();
        in.popLimit(limit);
        handler.handle(new Frame(request, sessionId, sequence, auth, header, message));
    }

    /** The engine's server's answer: the echo, signed for the frame. */
    static void echo(Frame frame) throws IOException {
        byte[] answer = answer(frame, frame.message());
        Frames.signResponse(answer, frame.sessionId(), frame.sequence(), frame.auth());
        frame.request().respond(answer);
    }

    /** An echo of {@code result} in Hadoop's response framing for {@code frame}'s call, behind 16 free bytes. */
    static byte[] answer(Frame frame, String result) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(new byte[Frames.RESPONSE_PREFIX_BYTES]);
        RpcResponseHeaderProto.newBuilder().setCallId(frame.header().getCallId()).setStatus(RpcStatusProto.SUCCESS)
                .setClientId(frame.header().getClientId()).setServerIpcVersionNum(9).build().writeDelimitedTo(out);
        EchoResponseProto.newBuilder().setMessage(result).build().writeDelimitedTo(out);
        return out.toByteArray();
    }

    @Override
    public long getProtocolVersion(String protocol, long clientVersion) {
        return versionID;
    }

    @Override
    public ProtocolSignature getProtocolSignature(String protocol, long clientVersion, int clientMethodsHash)
            throws IOException {
        return ProtocolSignature.getProtocolSignature(this, protocol, clientVersion, clientMethodsHash);
    }
}
