package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
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

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoResponseProto;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.RequestHeader;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ResponseHeader;

/**
 * A stand-in for the engine's server, for tests of what the engine's client believes: a plain Netty server hosting
 * a discovery of its own (a real key agreement; its offers of {@link #offerVersion}) and, when asked, HBase's test
 * service on its socket path, and a raw fabric node whose echo frames a test answers or refuses as it likes
 * ({@link #handler}).
 */
final class StandInServer implements AutoCloseable {
    /** One echo frame, verified as the current session's client's. */
    record Frame(FabricRequest request, long sessionId, long sequence, FrameAuth auth, int callId, String message) {
    }

    interface Handler {
        void handle(Frame frame) throws IOException;
    }

    final AtomicInteger sessionsOpened = new AtomicInteger();
    /** Frames of the current session whose MAC verified: each call sent once is one frame. */
    final AtomicInteger framesReceived = new AtomicInteger();
    volatile Handler handler = StandInServer::echo;
    /** The version the discovery's offers carry (an older server's: the client opens no session). */
    volatile int offerVersion = Discovery.VERSION;
    /** The MAC coverage the discovery's offers give; null: what the client asks for. */
    volatile FrameAuth.Coverage offerFrameMac;
    private volatile FrameAuth key;
    private final FabricNode fabric;
    private final RpcServer socket;

    private StandInServer(boolean hostsTestService) throws Exception {
        fabric = FabricConfig.builder().listen("127.0.0.1", 0).maxMessageBytes(1 << 20).start();
        fabric.serve(this::receive, 1);
        Configuration serverConf = EchoServers.conf("never");
        serverConf.set("hbase.rpc.server.impl", NettyRpcServer.class.getName());
        List<RpcServer.BlockingServiceAndInterface> services = new ArrayList<>();
        services.add(new RpcServer.BlockingServiceAndInterface(discovery(), null));
        if (hostsTestService) {
            services.add(new RpcServer.BlockingServiceAndInterface(TestProtobufRpcServiceImpl.SERVICE, null));
        }
        socket = RpcServerFactory.createRpcServer(null, "stand-in", services, new InetSocketAddress("127.0.0.1", 0),
                serverConf, new FifoRpcScheduler(serverConf, 1));
        socket.start();
    }

    /** The stand-in; {@code hostsTestService}: its socket path serves HBase's test service too. */
    static StandInServer start(boolean hostsTestService) throws Exception {
        return new StandInServer(hostsTestService);
    }

    /** Where clients reach the stand-in (its socket listener). */
    InetSocketAddress address() {
        return socket.getListenerAddress();
    }

    @Override
    public void close() {
        try {
            socket.stop();
        } finally {
            fabric.close();
        }
    }

    private void receive(FabricRequest request) throws IOException {
        ByteBuffer frame = request.payloadBuffer();
        int start = frame.position();
        long sessionId = frame.getLong(start + FrameAuth.SESSION_OFFSET);
        long sequence = frame.getLong(start + FrameAuth.SEQUENCE_OFFSET);
        FrameAuth auth = key;
        assertTrue(auth != null && auth.verify(frame), "the client's frame is signed");
        framesReceived.incrementAndGet();
        frame.position(start + Frames.PREFIX_BYTES);
        CodedInputStream in = CodedInputStream.newInstance(frame);
        int limit = in.pushLimit(in.readRawVarint32());
        RequestHeader header = RequestHeader.parseFrom(in);
        in.popLimit(limit);
        limit = in.pushLimit(in.readRawVarint32());
        String message = EchoRequestProto.parseFrom(in).getMessage();
        in.popLimit(limit);
        handler.handle(new Frame(request, sessionId, sequence, auth, header.getCallId(), message));
    }

    /** The engine's server's answer: the echo, signed for the frame. */
    static void echo(Frame frame) throws IOException {
        byte[] bytes = answer(frame, frame.message());
        frame.auth().signResponse(bytes, Frames.FRAME_VERSION, frame.sessionId(), frame.sequence());
        frame.request().respond(bytes);
    }

    /** HBase's response framing of an echo of {@code result} for {@code frame}'s call, behind 16 free bytes. */
    static byte[] answer(Frame frame, String result) throws IOException {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        ResponseHeader.newBuilder().setCallId(frame.callId()).build().writeDelimitedTo(body);
        EchoResponseProto.newBuilder().setMessage(result).build().writeDelimitedTo(body);
        ByteArrayOutputStream response = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(response);
        out.write(new byte[Frames.RESPONSE_PREFIX_BYTES]);
        out.writeInt(body.size());
        body.writeTo(out);
        return response.toByteArray();
    }

    /** The discovery of the stand-in: a real key agreement, a session whose frames the raw node takes. */
    private BlockingService discovery() {
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
                FrameAuth.Coverage coverage = offerFrameMac != null ? offerFrameMac : asked.frameMac();
                try {
                    key = new FrameAuth(SessionKeys.macKey(keys.agree(asked.clientPublicKey()), sessionId,
                            asked.clientPublicKey(), keys.publicKey(), Frames.keyPurpose(coverage)), coverage);
                } catch (java.security.InvalidKeyException e) {
                    throw new ServiceException(e);
                }
                return Discovery.encode(new Discovery.Offer(offerVersion, "127.0.0.1", fabric.localAddress().getPort(),
                        sessionId, 1 << 20, 1 << 20, keys.publicKey(), coverage, null));
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
