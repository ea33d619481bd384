package io.slipstream.hbase.rpc;

import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.security.InvalidKeyException;
import java.util.List;
import org.apache.hadoop.hbase.protobuf.generated.AuthenticationProtos.TokenIdentifier;
import org.apache.hadoop.hbase.security.SecurityInfo;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos;
import org.apache.hadoop.hbase.shaded.protobuf.generated.RPCProtos.ConnectionHeader;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;
import org.apache.hbase.thirdparty.com.google.protobuf.ByteString;
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
 * socket path (docs/hbase-rpc.md, messages 1-2): {@code OpenSessionV2(OpenSessionRequest) returns
 * (FabricOffer)}, the request carrying the client's {@code ConnectionHeader}, X25519 public key and the MAC
 * coverage it asks for, the offer the server's key and the coverage the session takes. Described at run time (no
 * generated code).
 *
 * <p>Version 2 is the first with a key agreement; version 3 (the same messages) is for sessions whose refusals
 * are signed (frame version 3); version 4 adds the coverage fields (frame version 4): an older peer is refused,
 * or its offer taken as a refusal. Version 1's
 * {@code OpenSession(ConnectionHeader)} is still hosted, so that an older client is answered clearly: always a
 * refusal naming the version (it then takes the socket path, or fails with fallback never). A server older than
 * version 2 hosts no {@code OpenSessionV2}: HBase answers {@code UnsupportedOperationException}, which the client
 * takes as "no fabric here".
 */
final class Discovery {
    private Discovery() {
    }

    static final String SERVICE_NAME = "SlipstreamFabricDiscovery";
    /** The discovery and frame version this side speaks: both change together. */
    static final int VERSION = Frames.FRAME_VERSION;

    /**
     * What a client asks: the header its connection for the target service would send, its public key, and what
     * the session's MACs must cover at least ({@code frameMac}: null when the request named no coverage the
     * server knows; the server refuses to open such a session).
     */
    record Request(int version, byte[] connectionHeader, byte[] clientPublicKey, FrameAuth.Coverage frameMac) {
    }

    /**
     * What a server answers: where its fabric listens, the session opened, its public key and what the session's
     * MACs cover; or why none.
     */
    record Offer(int version, String host, int port, long sessionId, int frameBytesMax, int maxRequestBytes,
            byte[] serverPublicKey, FrameAuth.Coverage frameMac, String refusal) {
        static Offer refused(String why) {
            return new Offer(VERSION, null, 0, 0, 0, 0, null, null, why);
        }
    }

    /**
     * The coverage a server gives a session: the more of what the client asks and what the server's
     * {@code slipstream.hbase.rpc.frameMac} says.
     */
    static FrameAuth.Coverage agreedCoverage(FrameAuth.Coverage asked, FrameAuth.Coverage server) {
        return asked == FrameAuth.Coverage.FULL ? asked : server;
    }

    /**
     * The client's side of an offer (message 3): the session's authenticator, its key derived from the agreed
     * secret and the offer's coverage. An offer covering less than {@code asked} is refused (a server that
     * answers so is not following the protocol).
     */
    static FrameAuth clientAuth(SessionKeys keys, Offer offer, FrameAuth.Coverage asked) throws InvalidKeyException {
        if (agreedCoverage(asked, offer.frameMac()) != offer.frameMac()) {
            throw new IllegalArgumentException("an offer of MACs covering " + offer.frameMac().word()
                    + ", this client asked for " + asked.word());
        }
        return new FrameAuth(SessionKeys.macKey(keys.agree(offer.serverPublicKey()), offer.sessionId(), keys.publicKey(),
                offer.serverPublicKey(), Frames.keyPurpose(offer.frameMac())), offer.frameMac());
    }

    static final ServiceDescriptor SERVICE;
    static final MethodDescriptor OPEN_SESSION_V1;
    static final MethodDescriptor OPEN_SESSION_V2;
    private static final Descriptor REQUEST;
    private static final FieldDescriptor REQUEST_VERSION;
    private static final FieldDescriptor CONNECTION_HEADER;
    private static final FieldDescriptor CLIENT_PUBLIC_KEY;
    private static final FieldDescriptor REQUEST_FRAME_MAC;
    private static final Descriptor OFFER;
    private static final FieldDescriptor VERSION_FIELD;
    private static final FieldDescriptor HOST;
    private static final FieldDescriptor PORT;
    private static final FieldDescriptor SESSION;
    private static final FieldDescriptor FRAME_BYTES_MAX;
    private static final FieldDescriptor REFUSAL;
    private static final FieldDescriptor MAX_REQUEST_BYTES;
    private static final FieldDescriptor SERVER_PUBLIC_KEY;
    private static final FieldDescriptor OFFER_FRAME_MAC;

    static {
        FileDescriptorProto file = FileDescriptorProto.newBuilder()
                .setName("slipstream/hbase_fabric_discovery.proto")
                .setPackage("slipstream.hbase")
                .addDependency(RPCProtos.getDescriptor().getName())
                .addMessageType(DescriptorProto.newBuilder().setName("OpenSessionRequest")
                        .addField(field("version", 1, FieldDescriptorProto.Type.TYPE_UINT32))
                        // HBase's ConnectionHeader, serialized: the server reads it with HBase's own code.
                        .addField(field("connection_header", 2, FieldDescriptorProto.Type.TYPE_BYTES))
                        .addField(field("client_public_key", 3, FieldDescriptorProto.Type.TYPE_BYTES))
                        // "full" or "header" (FrameAuth.Coverage's words): what the client's MACs must cover at least.
                        .addField(field("frame_mac", 4, FieldDescriptorProto.Type.TYPE_STRING)))
                .addMessageType(DescriptorProto.newBuilder().setName("FabricOffer")
                        .addField(field("version", 1, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("host", 2, FieldDescriptorProto.Type.TYPE_STRING))
                        .addField(field("port", 3, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("session", 4, FieldDescriptorProto.Type.TYPE_FIXED64))
                        .addField(field("frame_bytes_max", 5, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("refusal", 6, FieldDescriptorProto.Type.TYPE_STRING))
                        .addField(field("max_request_bytes", 7, FieldDescriptorProto.Type.TYPE_UINT32))
                        .addField(field("server_public_key", 8, FieldDescriptorProto.Type.TYPE_BYTES))
                        // What the session's MACs cover: part of its key's derivation (Frames.keyPurpose).
                        .addField(field("frame_mac", 9, FieldDescriptorProto.Type.TYPE_STRING)))
                .addService(ServiceDescriptorProto.newBuilder().setName(SERVICE_NAME)
                        .addMethod(MethodDescriptorProto.newBuilder().setName("OpenSession")
                                .setInputType("." + ConnectionHeader.getDescriptor().getFullName())
                                .setOutputType(".slipstream.hbase.FabricOffer"))
                        .addMethod(MethodDescriptorProto.newBuilder().setName("OpenSessionV2")
                                .setInputType(".slipstream.hbase.OpenSessionRequest")
                                .setOutputType(".slipstream.hbase.FabricOffer")))
                .build();
        try {
            Descriptors.FileDescriptor fd = Descriptors.FileDescriptor.buildFrom(file,
                    new Descriptors.FileDescriptor[] {RPCProtos.getDescriptor()});
            SERVICE = fd.findServiceByName(SERVICE_NAME);
            OPEN_SESSION_V1 = SERVICE.findMethodByName("OpenSession");
            OPEN_SESSION_V2 = SERVICE.findMethodByName("OpenSessionV2");
            REQUEST = fd.findMessageTypeByName("OpenSessionRequest");
            OFFER = fd.findMessageTypeByName("FabricOffer");
        } catch (Descriptors.DescriptorValidationException e) {
            throw new ExceptionInInitializerError(e);
        }
        REQUEST_VERSION = REQUEST.findFieldByName("version");
        CONNECTION_HEADER = REQUEST.findFieldByName("connection_header");
        CLIENT_PUBLIC_KEY = REQUEST.findFieldByName("client_public_key");
        REQUEST_FRAME_MAC = REQUEST.findFieldByName("frame_mac");
        VERSION_FIELD = OFFER.findFieldByName("version");
        HOST = OFFER.findFieldByName("host");
        PORT = OFFER.findFieldByName("port");
        SESSION = OFFER.findFieldByName("session");
        FRAME_BYTES_MAX = OFFER.findFieldByName("frame_bytes_max");
        REFUSAL = OFFER.findFieldByName("refusal");
        MAX_REQUEST_BYTES = OFFER.findFieldByName("max_request_bytes");
        SERVER_PUBLIC_KEY = OFFER.findFieldByName("server_public_key");
        OFFER_FRAME_MAC = OFFER.findFieldByName("frame_mac");
    }

    private static FieldDescriptorProto.Builder field(String name, int number, FieldDescriptorProto.Type type) {
        return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setType(type)
                .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL);
    }

    static Message offerPrototype() {
        return DynamicMessage.getDefaultInstance(OFFER);
    }

    static Message encode(Request request) {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(REQUEST).setField(REQUEST_VERSION, request.version())
                .setField(CONNECTION_HEADER, ByteString.copyFrom(request.connectionHeader()))
                .setField(CLIENT_PUBLIC_KEY, ByteString.copyFrom(request.clientPublicKey()));
        if (request.frameMac() != null) {
            b.setField(REQUEST_FRAME_MAC, request.frameMac().word());
        }
        return b.build();
    }

    /**
     * The request in a call; the server checks its version, coverage and key itself (a refusal or an error for
     * that call, never for the connection).
     */
    static Request decodeRequest(Message m) {
        if (m == null || m.getDescriptorForType() != REQUEST) {
            throw new IllegalArgumentException("slipstream: not an OpenSessionRequest: " + m);
        }
        return new Request((Integer) m.getField(REQUEST_VERSION), ((ByteString) m.getField(CONNECTION_HEADER)).toByteArray(),
                ((ByteString) m.getField(CLIENT_PUBLIC_KEY)).toByteArray(),
                FrameAuth.Coverage.ofWord((String) m.getField(REQUEST_FRAME_MAC)));
    }

    static Message encode(Offer offer) {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(OFFER).setField(VERSION_FIELD, offer.version());
        if (offer.refusal() != null) {
            return b.setField(REFUSAL, offer.refusal()).build();
        }
        return b.setField(HOST, offer.host()).setField(PORT, offer.port()).setField(SESSION, offer.sessionId())
                .setField(FRAME_BYTES_MAX, offer.frameBytesMax()).setField(MAX_REQUEST_BYTES, offer.maxRequestBytes())
                .setField(SERVER_PUBLIC_KEY, ByteString.copyFrom(offer.serverPublicKey()))
                .setField(OFFER_FRAME_MAC, offer.frameMac().word()).build();
    }

    /** The offer in an answer; a malformed one is an error, an unknown version a refusal. */
    static Offer decode(Message m) {
        if (m == null || m.getDescriptorForType() != OFFER) {
            throw new IllegalArgumentException("slipstream: not a FabricOffer: " + m);
        }
        int version = (Integer) m.getField(VERSION_FIELD);
        if (m.hasField(REFUSAL)) {
            return new Offer(version, null, 0, 0, 0, 0, null, null, (String) m.getField(REFUSAL));
        }
        if (version != VERSION) {
            return new Offer(version, null, 0, 0, 0, 0, null, null, "frame version " + version + " (this client speaks "
                    + VERSION + ")");
        }
        int port = (Integer) m.getField(PORT);
        int frameBytesMax = (Integer) m.getField(FRAME_BYTES_MAX);
        int maxRequestBytes = (Integer) m.getField(MAX_REQUEST_BYTES);
        byte[] serverPublicKey = ((ByteString) m.getField(SERVER_PUBLIC_KEY)).toByteArray();
        FrameAuth.Coverage frameMac = FrameAuth.Coverage.ofWord((String) m.getField(OFFER_FRAME_MAC));
        if (!m.hasField(HOST) || port < 1 || port > 65535 || frameBytesMax <= Frames.PREFIX_BYTES || maxRequestBytes < 1
                || serverPublicKey.length != SessionKeys.PUBLIC_KEY_BYTES || frameMac == null) {
            throw new IllegalArgumentException("slipstream: a malformed FabricOffer: " + m);
        }
        return new Offer(version, (String) m.getField(HOST), port, (Long) m.getField(SESSION), frameBytesMax,
                maxRequestBytes, serverPublicKey, frameMac, null);
    }

    /**
     * Under SASL, tells HBase's client which server principals (by configuration key) a discovery connection
     * may authenticate its server as: HBase's client refuses to open a connection for a service it has no
     * {@link SecurityInfo} of. The discovery is hosted by HMasters and RegionServers alike, so both keys are
     * candidates, as for HBase's ClientMetaService; HBase's security preamble picks the server's. Only keys the
     * configuration sets are passed: HBase resolves each, and an unset one has no principal.
     */
    static void registerSecurityInfo(List<String> serverPrincipalKeys) {
        if (!serverPrincipalKeys.isEmpty()) {
            SecurityInfo.addInfo(SERVICE_NAME, new SecurityInfo(TokenIdentifier.Kind.HBASE_AUTH_TOKEN,
                    serverPrincipalKeys.toArray(new String[0])));
        }
    }

    /** The server side: {@code open} runs on an RPC handler, inside the socket call. */
    interface Opener {
        Offer open(Request request) throws java.io.IOException;
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
                if (md == OPEN_SESSION_V1) {
                    // An older client: its sessions would carry unauthenticated frames, which this server no
                    // longer takes. A refusal (not an error): the client takes the socket path (fallback auto).
                    return encode(Offer.refused("this server's fabric sessions are authenticated (discovery version "
                            + VERSION + ", OpenSessionV2); the client speaks version 1"));
                }
                if (md != OPEN_SESSION_V2) {
                    throw new ServiceException("slipstream: unknown method " + md.getFullName());
                }
                try {
                    return encode(opener.open(decodeRequest(request)));
                } catch (java.io.IOException e) {
                    throw new ServiceException(e);
                }
            }

            @Override
            public Message getRequestPrototype(MethodDescriptor md) {
                return md == OPEN_SESSION_V1 ? ConnectionHeader.getDefaultInstance() : DynamicMessage.getDefaultInstance(REQUEST);
            }

            @Override
            public Message getResponsePrototype(MethodDescriptor md) {
                return offerPrototype();
            }
        };
    }
}
