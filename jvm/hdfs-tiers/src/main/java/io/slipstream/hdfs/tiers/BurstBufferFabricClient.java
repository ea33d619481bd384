package io.slipstream.hdfs.tiers;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.fabric.NetDevices;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The burst buffer's client over the fabric: memcached's binary protocol (set, get, delete, SASL PLAIN), one
 * packet per fabric request of slipstream-cache's {@code FABRIC_OP_BINARY} (docs/cache.md, "Fabric framing"),
 * to each server's fabric address. One client node per burst buffer (the DataNode's), one endpoint per server;
 * requests of many threads go out at once on it, without a connection pool. A chunk's bytes are copied once,
 * into registered memory, and leave without another copy (the same-host path pulls them, verbs on clusters).
 *
 * <p>Every answer is checked before anything of it is believed: one whole response packet, the request's
 * opcode, lengths that add up, a value no longer than {@code maxValueBytes} (the node's message limit bounds
 * what reaches it at all). With a user set, each server's session is authenticated with SASL PLAIN before its
 * first request, and again after an authentication error (a new fabric connection is a new session).
 */
final class BurstBufferFabricClient implements BurstBufferClient {
    /** slipstream-cache's fabric operation carrying binary-protocol packets ({@code cache_proto::FABRIC_OP_BINARY}, "mc"). */
    static final int OP_BINARY = 0x6d63;
    static final int HEADER_BYTES = 24;
    private static final byte MAGIC_REQUEST = (byte) 0x80;
    private static final byte MAGIC_RESPONSE = (byte) 0x81;
    static final byte GET = 0x00;
    static final byte SET = 0x01;
    static final byte DELETE = 0x04;
    static final byte SASL_AUTH = 0x21;
    static final short STATUS_OK = 0x0000;
    static final short STATUS_NOT_FOUND = 0x0001;
    static final short STATUS_AUTH_ERROR = 0x0020;
    /** Room in a message beyond a chunk: header, extras, key. */
    private static final int PACKET_OVERHEAD_MAX = 1024;

    private final FabricNode node;
    private final Server[] servers;
    private final int maxValueBytes;
    /** SASL PLAIN's value, {@code \0user\0password}; null without a user. */
    private final byte[] plain;

    /**
     * The burst buffer's client over the fabric for {@code conf}: registered memory for every chunk that may be on
     * its way at once (stores of all replicas, each one message of a chunk) and the flusher's and readers' answers.
     * A fabric that cannot start is an {@link IllegalStateException} naming {@code bb.transport}.
     */
    static BurstBufferClient open(TiersConf conf, String password) {
        long poolCapBytes = Math.min(1L << 30, 2 * conf.bbMaxInFlightBytes + (16L << 20));
        try {
            return new BurstBufferFabricClient(conf.bbServers, conf.bbTimeoutMs, conf.bbChunkBytes, poolCapBytes,
                    conf.bbUser, password);
        } catch (FabricUnavailableException | FabricException e) {
            throw new IllegalStateException(TiersConf.BB_TRANSPORT.key() + "=fabric: the fabric cannot start on this "
                    + "DataNode: " + e.getMessage(), e);
        }
    }

    /**
     * @param addresses the servers' fabric addresses (slipstream-cache's {@code -l} address and {@code --fabric-port})
     * @param poolCapBytes registered memory for the requests and answers in flight
     */
    BurstBufferFabricClient(List<InetSocketAddress> addresses, int timeoutMs, int maxValueBytes, long poolCapBytes,
            String user, String password) throws FabricUnavailableException {
        if (addresses.isEmpty()) {
            throw new IllegalArgumentException("no burst buffer server");
        }
        this.maxValueBytes = maxValueBytes;
        this.plain = user.isEmpty() ? null : ("\0" + user + "\0" + password).getBytes(StandardCharsets.UTF_8);
        this.node = FabricNode.builder()
                .netDevices(devicesToward(addresses))
                .requestTimeout(Duration.ofMillis(timeoutMs))
                .poolCapBytes(poolCapBytes)
                .maxMessageBytes(maxValueBytes + PACKET_OVERHEAD_MAX)
                .start();
        servers = new Server[addresses.size()];
        for (int i = 0; i < servers.length; i++) {
            servers[i] = new Server(addresses.get(i), node.endpoint(addresses.get(i)));
        }
    }

    /**
     * The devices of the local addresses that route to the servers (a connected UDP socket sends nothing), so
     * the node reaches no further than the burst buffer.
     */
    private static String devicesToward(List<InetSocketAddress> servers) {
        Set<String> devices = new LinkedHashSet<>();
        for (InetSocketAddress server : servers) {
            try (DatagramSocket probe = new DatagramSocket()) {
                probe.connect(server);
                devices.add(NetDevices.forAddress(probe.getLocalAddress().getHostAddress(), TiersConf.BB_SERVERS.key()));
            } catch (SocketException e) {
                throw new IllegalArgumentException(TiersConf.BB_SERVERS.key() + ": no route to " + server + ": "
                        + e.getMessage(), e);
            }
        }
        return String.join(",", devices);
    }

    @Override
    public void set(String key, byte[] value, int offset, int length) throws IOException {
        java.util.Objects.checkFromIndexSize(offset, length, value.length);
        if (length > maxValueBytes) {
            throw new IllegalArgumentException("a value of " + length + " bytes, more than the " + maxValueBytes
                    + " of a chunk");
        }
        call(key, server -> {
            byte[] keyBytes = keyBytes(key);
            FabricBuffer request = node.allocate(HEADER_BYTES + 8 + keyBytes.length + length);
            ByteBuffer out = request.byteBuffer().clear();
            header(out, SET, keyBytes.length, 8, 8 + keyBytes.length + length);
            out.putInt(0).putInt(0); // flags, no expiry: the flusher deletes what it flushed
            out.put(keyBytes).put(value, offset, length);
            request.setLength(out.position());
            try (FabricBuffer response = server.endpoint.request(OP_BINARY, request)) {
                Reply reply = Reply.parse(response.byteBuffer(), SET, maxValueBytes);
                if (reply.status != STATUS_OK) {
                    throw reply.failure("set " + key);
                }
            }
            return null;
        });
    }

    @Override
    public byte[] get(String key) throws IOException {
        return call(key, server -> keyOnly(server, GET, key, reply -> {
            if (reply.status == STATUS_NOT_FOUND) {
                return null;
            }
            if (reply.status != STATUS_OK) {
                throw reply.failure("get " + key);
            }
            byte[] value = new byte[reply.value.remaining()];
            reply.value.get(value);
            return value;
        }));
    }

    @Override
    public boolean delete(String key) throws IOException {
        return call(key, server -> keyOnly(server, DELETE, key, reply -> {
            if (reply.status == STATUS_NOT_FOUND) {
                return false;
            }
            if (reply.status != STATUS_OK) {
                throw reply.failure("delete " + key);
            }
            return true;
        }));
    }

    private interface ReplyHandler<T> {
        /** Runs while the answer's buffer is held: what it returns must not be a view of it. */
        T handle(Reply reply) throws IOException;
    }

    /** Sends a request of {@code opcode} that carries only {@code key}; the handler's reading of the checked answer. */
    private <T> T keyOnly(Server server, byte opcode, String key, ReplyHandler<T> handler) throws IOException {
        byte[] keyBytes = keyBytes(key);
        ByteBuffer request = ByteBuffer.allocate(HEADER_BYTES + keyBytes.length);
        header(request, opcode, keyBytes.length, 0, keyBytes.length);
        request.put(keyBytes).flip();
        try (FabricBuffer response = server.endpoint.request(OP_BINARY, request)) {
            return handler.handle(Reply.parse(response.byteBuffer(), opcode, maxValueBytes));
        }
    }

    @Override
    public void close() {
        node.close();
    }

    private interface Exchange<T> {
        T run(Server server) throws IOException;
    }

    /** Thrown by an exchange whose server said the session is not authenticated (a new fabric connection). */
    private static final class NotAuthenticated extends IOException {
        NotAuthenticated(String message) {
            super(message);
        }
    }

    /**
     * Runs one request on the key's server. Every request is idempotent (set, get, delete of one key): one whose
     * fabric request failed (the server restarted, its connection was lost) or whose session was not
     * authenticated any more is sent once more, after logging in again.
     */
    private <T> T call(String key, Exchange<T> exchange) throws IOException {
        Server server = servers[Math.floorMod(key.hashCode(), servers.length)];
        for (int attempt = 0; ; attempt++) {
            try {
                server.authenticate();
                return exchange.run(server);
            } catch (NotAuthenticated e) {
                server.authenticated = false;
                if (attempt > 0) {
                    throw new IOException("burst buffer " + server.address + ": " + e.getMessage(), e);
                }
            } catch (FabricException e) {
                server.authenticated = false; // a new connection is a new session
                if (attempt > 0) {
                    throw new IOException("burst buffer " + server.address + ": " + e.getMessage(), e);
                }
            } catch (IOException e) {
                throw new IOException("burst buffer " + server.address + ": " + e.getMessage(), e);
            }
        }
    }

    private static byte[] keyBytes(String key) {
        byte[] bytes = key.getBytes(StandardCharsets.US_ASCII);
        if (bytes.length == 0 || bytes.length > 250) {
            throw new IllegalArgumentException("a burst buffer key of " + bytes.length + " bytes: " + key);
        }
        return bytes;
    }

    /** A request header: magic, opcode, key length, extras length, data type 0, vbucket 0, body length, opaque 0, cas 0. */
    private static void header(ByteBuffer out, byte opcode, int keyBytes, int extrasBytes, int bodyBytes) {
        out.put(MAGIC_REQUEST).put(opcode).putShort((short) keyBytes).put((byte) extrasBytes).put((byte) 0)
                .putShort((short) 0).putInt(bodyBytes).putInt(0).putLong(0);
    }

    /** One response packet, checked: its status and its value (a view of the response's bytes). */
    static final class Reply {
        final short status;
        final ByteBuffer value;

        private Reply(short status, ByteBuffer value) {
            this.status = status;
            this.value = value;
        }

        /** Parses exactly one response packet answering {@code opcode}; anything else is an IOException. */
        static Reply parse(ByteBuffer in, byte opcode, int maxValueBytes) throws IOException {
            int length = in.remaining();
            if (length < HEADER_BYTES) {
                throw new IOException("an answer of " + length + " bytes, shorter than a header");
            }
            int at = in.position();
            if (in.get(at) != MAGIC_RESPONSE || in.get(at + 1) != opcode) {
                throw new IOException(String.format("not an answer to opcode 0x%02x: magic 0x%02x, opcode 0x%02x", opcode,
                        in.get(at), in.get(at + 1)));
            }
            int keyBytes = Short.toUnsignedInt(in.getShort(at + 2));
            int extrasBytes = Byte.toUnsignedInt(in.get(at + 4));
            short status = in.getShort(at + 6);
            long bodyBytes = Integer.toUnsignedLong(in.getInt(at + 8));
            if (bodyBytes != length - HEADER_BYTES || keyBytes + extrasBytes > bodyBytes) {
                throw new IOException("an answer whose lengths do not add up: body " + bodyBytes + " in " + length
                        + " bytes, key " + keyBytes + ", extras " + extrasBytes);
            }
            long valueBytes = bodyBytes - keyBytes - extrasBytes;
            if (valueBytes > maxValueBytes) {
                throw new IOException("a value of " + valueBytes + " bytes, more than the " + maxValueBytes
                        + " a chunk may hold");
            }
            ByteBuffer value = in.duplicate();
            value.position(at + HEADER_BYTES + extrasBytes + keyBytes).limit(at + length);
            return new Reply(status, value);
        }

        /** The server's refusal as an exception, with its message (the value of an error answer). */
        IOException failure(String what) {
            byte[] message = new byte[Math.min(value.remaining(), 200)];
            value.duplicate().get(message);
            String text = what + ": status 0x" + Integer.toHexString(Short.toUnsignedInt(status)) + " "
                    + new String(message, StandardCharsets.UTF_8);
            return status == STATUS_AUTH_ERROR ? new NotAuthenticated(text) : new IOException(text);
        }
    }

    private final class Server {
        final InetSocketAddress address;
        final FabricEndpoint endpoint;
        volatile boolean authenticated;

        Server(InetSocketAddress address, FabricEndpoint endpoint) {
            this.address = address;
            this.endpoint = endpoint;
        }

        /** Logs the session in with SASL PLAIN, once (again after an authentication error); nothing without a user. */
        synchronized void authenticate() throws IOException {
            if (plain == null || authenticated) {
                return;
            }
            byte[] mechanism = "PLAIN".getBytes(StandardCharsets.US_ASCII);
            ByteBuffer request = ByteBuffer.allocate(HEADER_BYTES + mechanism.length + plain.length);
            header(request, SASL_AUTH, mechanism.length, 0, mechanism.length + plain.length);
            request.put(mechanism).put(plain).flip();
            try (FabricBuffer response = endpoint.request(OP_BINARY, request)) {
                Reply reply = Reply.parse(response.byteBuffer(), SASL_AUTH, maxValueBytes);
                if (reply.status != STATUS_OK) {
                    // Not NotAuthenticated: a refused login is not retried.
                    throw new IOException("the server refused the login: " + reply.failure("sasl auth").getMessage());
                }
            }
            authenticated = true;
        }
    }
}
