package io.slipstream.hbase.rpc;

import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;
import org.apache.hbase.thirdparty.com.google.protobuf.DescriptorProtos.DescriptorProto;
import org.apache.hbase.thirdparty.com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import org.apache.hbase.thirdparty.com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import org.apache.hbase.thirdparty.com.google.protobuf.DescriptorProtos.MethodDescriptorProto;
import org.apache.hbase.thirdparty.com.google.protobuf.DescriptorProtos.ServiceDescriptorProto;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.Descriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.FieldDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.MethodDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.Descriptors.ServiceDescriptor;
import org.apache.hbase.thirdparty.com.google.protobuf.DynamicMessage;
import org.apache.hbase.thirdparty.com.google.protobuf.Message;
import org.apache.hbase.thirdparty.com.google.protobuf.RpcController;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;

/**
 * The discovery service every {@link FabricRpcServer} adds to the services it hosts, called over HBase's
 * socket path (docs/hbase-rpc.md, messages 1-2): {@code OpenSession(ConnectionHeader) returns (FabricOffer)}.
 * Described at run time (no generated code): the request is HBase's own {@code ConnectionHeader}, the
 * answer a small message of its own.
 */
final class Discovery {
    private Discovery() {
    }

    static final String SERVICE_NAME = "SlipstreamFabricDiscovery";

    /** What a server answers: where its fabric listens and the session opened, or why none. */
    record Offer(int version, String host, int port, long sessionId, int frameBytesMax, int maxRequestBytes, String refusal) {
    }

    static final ServiceDescriptor SERVICE;
    static final MethodDescriptor OPEN_SESSION;
    private static final Descriptor OFFER;
    private static final FieldDescriptor VERSION;
    private static final FieldDescriptor HOST;
    private static final FieldDescriptor PORT;
    private static final FieldDescriptor SESSION;
    private static final FieldDescriptor FRAME_BYTES_MAX;
    private static final FieldDescriptor REFUSAL;
    private static final FieldDescriptor MAX_REQUEST_BYTES;

    static {
        FileDescriptorProto file = FileDescriptorProto.newBuilder()
                .setName("slipstream/hbase_fabric_discovery.proto")
                .setPackage("slipstream.hbase")
                .addDependency(RPCProtos.getDescriptor().getName())
                .addMessageType(DescriptorProto.newBuilder().setName("FabricOffer")
                        .addField(field("version", 1, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("host", 2, FieldDescriptorProto.Type.TYPE_STRING))
                        .addField(field("port", 3, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("session", 4, FieldDescriptorProto.Type.TYPE_FIXED64))
                        .addField(field("frame_bytes_max", 5, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("refusal", 6, FieldDescriptorProto.Type.TYPE_STRING))
                        .addField(field("max_request_bytes", 7, FieldDescriptorProto.Type.TYPE_UINT32)))
                .addService(ServiceDescriptorProto.newBuilder().setName(SERVICE_NAME)
                        .addMethod(MethodDescriptorProto.newBuilder().setName("OpenSession")
                                .setInputType("." + ConnectionHeader.getDescriptor().getFullName())
                                .setOutputType(".slipstream.hbase.FabricOffer")))
                .build();
        try {
            Descriptors.FileDescriptor fd = Descriptors.FileDescriptor.buildFrom(file,
                    new Descriptors.FileDescriptor[] {RPCProtos.getDescriptor()});
            SERVICE = fd.findServiceByName(SERVICE_NAME);
            OPEN_SESSION = SERVICE.findMethodByName("OpenSession");
            OFFER = fd.findMessageTypeByName("FabricOffer");
        } catch (Descriptors.DescriptorValidationException e) {
            throw new ExceptionInInitializerError(e);
        }
        VERSION = OFFER.findFieldByName("version");
        HOST = OFFER.findFieldByName("host");
        PORT = OFFER.findFieldByName("port");
        SESSION = OFFER.findFieldByName("session");
        FRAME_BYTES_MAX = OFFER.findFieldByName("frame_bytes_max");
        REFUSAL = OFFER.findFieldByName("refusal");
        MAX_REQUEST_BYTES = OFFER.findFieldByName("max_request_bytes");
    }

    private static FieldDescriptorProto.Builder field(String name, int number, FieldDescriptorProto.Type type) {
        return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setType(type)
                .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL);
    }

    static Message offerPrototype() {
        return DynamicMessage.getDefaultInstance(OFFER);
    }

    static Message encode(Offer offer) {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(OFFER).setField(VERSION, offer.version());
        if (offer.refusal() != null) {
            return b.setField(REFUSAL, offer.refusal()).build();
        }
        return b.setField(HOST, offer.host()).setField(PORT, offer.port()).setField(SESSION, offer.sessionId())
                .setField(FRAME_BYTES_MAX, offer.frameBytesMax()).setField(MAX_REQUEST_BYTES, offer.maxRequestBytes())
                .build();
    }

    /** The offer in an answer; a malformed one is an error, an unknown version a refusal. */
    static Offer decode(Message m) {
        if (m == null || m.getDescriptorForType() != OFFER) {
            throw new IllegalArgumentException("slipstream: not a FabricOffer: " + m);
        }
        int version = (Integer) m.getField(VERSION);
        if (m.hasField(REFUSAL)) {
            return new Offer(version, null, 0, 0, 0, 0, (String) m.getField(REFUSAL));
        }
        if (version != Frames.FRAME_VERSION) {
            return new Offer(version, null, 0, 0, 0, 0, "frame version " + version + " (this client speaks "
                    + Frames.FRAME_VERSION + ")");
        }
        int port = (Integer) m.getField(PORT);
        int frameBytesMax = (Integer) m.getField(FRAME_BYTES_MAX);
        int maxRequestBytes = (Integer) m.getField(MAX_REQUEST_BYTES);
        if (!m.hasField(HOST) || port < 1 || port > 65535 || frameBytesMax <= Frames.PREFIX_BYTES || maxRequestBytes < 1) {
            throw new IllegalArgumentException("slipstream: a malformed FabricOffer: " + m);
        }
        return new Offer(version, (String) m.getField(HOST), port, (Long) m.getField(SESSION), frameBytesMax,
                maxRequestBytes, null);
    }

    /** The server side: {@code open} runs on an RPC handler, inside the socket call. */
    interface Opener {
        Offer open(ConnectionHeader header) throws java.io.IOException;
    }

    static BlockingService service(Opener opener) {
        return new BlockingService() {
            @Override
            public ServiceDescriptor getDescriptorForType() {
                return SERVICE;
            }

            @Override
            public Message callBlockingMethod(MethodDescriptor md, RpcController controller, Message request)
                    throws ServiceException {
                if (md != OPEN_SESSION) {
                    throw new ServiceException("slipstream: unknown method " + md.getFullName());
                }
                try {
                    return encode(opener.open((ConnectionHeader) request));
                } catch (java.io.IOException e) {
                    throw new ServiceException(e);
                }
            }

            @Override
            public Message getRequestPrototype(MethodDescriptor md) {
                return ConnectionHeader.getDefaultInstance();
            }

            @Override
            public Message getResponsePrototype(MethodDescriptor md) {
                return offerPrototype();
            }
        };
    }
}
