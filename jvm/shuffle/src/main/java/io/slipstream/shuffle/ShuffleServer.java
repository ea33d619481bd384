package io.slipstream.shuffle;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricRequest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Answers fabric requests on a node: FETCH of map-output blocks (from the prefetch cache, else
 * from the engine's files), and, on the coordinator, the peer directory's REGISTER and LOOKUP.
 *
 * <p>A request that breaks the format (truncated, out of range, an unknown operation) is answered
 * with a message the requester sees, then its fabric connection is closed: a peer that sends
 * garbage is broken, and nothing more is served to it until it connects again. A request that fails
 * authentication, names an unknown block or is refused otherwise fails alone, on a connection that
 * stays (several requests of a misconfigured peer each see the reason, not a closed connection).
 * The server goes on either way. Each response is built in one registered buffer, sent without a
 * further copy.
 */
public final class ShuffleServer {
    private static final Logger LOG = LoggerFactory.getLogger(ShuffleServer.class);

    /**
     * For a server shared by several applications (Hadoop: every job of every NodeManager in this
     * process): what a scoped request's scope names.
     */
    public interface Scopes {
        /** The scope's authenticator (itself scoped), map outputs and cache (null for none); throws
         *  {@link RequestAuthenticator.AuthenticationException} if the scope is unknown here. */
        Scope resolve(String scope);
    }

    /** What one scope serves, and under which secret. */
    public record Scope(RequestAuthenticator authenticator, MapOutputSource source, MapOutputCache cache) {}

    private final FabricNode node;
    private final Scopes scopes;
    private final MapOutputSource source;
    private final MapOutputCache cache;
    private final PeerDirectory directory;
    private final RequestAuthenticator authenticator;
    private final int responseBytesMax;
    private final AtomicLong fetchRequests = new AtomicLong();
    private final AtomicLong bytesServed = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();

    /**
     * @param source     the map outputs this node serves; null on a node that only keeps the directory
     * @param cache      the prefetch cache; null for none
     * @param directory  the peer directory this node keeps; null on other nodes
     */
    public ShuffleServer(FabricNode node, MapOutputSource source, MapOutputCache cache, PeerDirectory directory,
            RequestAuthenticator authenticator) {
        this.node = node;
        this.scopes = null;
        this.source = source;
        this.cache = cache;
        this.directory = directory;
        this.authenticator = authenticator;
        this.responseBytesMax = node.config().maxMessageBytes();
        int[] corruption = corruptionSetting();
        this.corruptPartition = corruption[0];
        this.corruptionsLeft.set(corruption[1]);
    }

    /** A server of scoped FETCH requests only, each answered from what its scope resolves to. */
    public ShuffleServer(FabricNode node, Scopes scopes) {
        this.node = node;
        this.scopes = java.util.Objects.requireNonNull(scopes);
        this.source = null;
        this.cache = null;
        this.directory = null;
        this.authenticator = null;
        this.responseBytesMax = node.config().maxMessageBytes();
        int[] corruption = corruptionSetting();
        this.corruptPartition = corruption[0];
        this.corruptionsLeft.set(corruption[1]);
    }

    /** Starts {@code threads} handler threads on the node. */
    public void start(int threads) {
        node.serve(this::handle, threads);
    }

    void handle(FabricRequest request) throws IOException {
        ByteBuffer body;
        MapOutputSource source = this.source;
        MapOutputCache cache = this.cache;
        RequestAuthenticator auth = this.authenticator;
        try {
            if (scopes != null) {
                String named = RequestAuthenticator.scopeOf(request.payloadBuffer());
                if (named == null) {
                    throw new RequestAuthenticator.AuthenticationException("request without a scope refused");
                }
                Scope scope = scopes.resolve(named);
                auth = scope.authenticator();
                body = auth.open(request.op(), request.payloadBuffer());
                source = scope.source();
                cache = scope.cache();
            } else {
                body = authenticator.open(request.op(), request.payloadBuffer());
            }
        } catch (RequestAuthenticator.AuthenticationException e) {
            refused.incrementAndGet();
            LOG.warn("slipstream: refused a request: {}", e.getMessage());
            request.fail(e.getMessage());
            return;
        }
        byte[] requestTag = auth.requestTag(request.payloadBuffer());
        // FETCH answers in the response MAC mode the request asked for (open() refused one this
        // server does not allow); the other responses are small and always MACed whole.
        RequestAuthenticator.ResponseMac responseMac = auth.responseMacOf(request.payloadBuffer());
        try {
            switch (request.op()) {
                case ShuffleProtocol.OP_FETCH -> fetch(request, body, requestTag, responseMac, auth, source, cache);
                case ShuffleProtocol.OP_REGISTER -> request.respond(
                        auth.sealResponse(request.op(), requestTag, requireDirectory().register(body)));
                case ShuffleProtocol.OP_DIAGNOSE -> request.respond(
                        auth.sealResponse(request.op(), requestTag, diagnose(body, source)));
                case ShuffleProtocol.OP_LOOKUP -> request.respond(
                        auth.sealResponse(request.op(), requestTag, requireDirectory().lookup(body)));
                default -> throw new ShuffleProtocol.ProtocolException("unknown operation " + request.op());
            }
        } catch (ShuffleProtocol.ProtocolException e) {
            refused.incrementAndGet();
            LOG.warn("slipstream: refused a request and closed its connection: {}", e.getMessage());
            if (!request.isAnswered()) {
                request.failAndClose(e.getMessage());
            }
        } catch (PeerDirectory.RegistrationRefused e) {
            refused.incrementAndGet();
            LOG.warn("slipstream: refused a request: {}", e.getMessage());
            if (!request.isAnswered()) {
                request.fail(e.getMessage());
            }
        } catch (IllegalStateException | IllegalArgumentException | IOException e) {
            if (!request.isAnswered()) {
                request.fail(e.getMessage());
            }
        }
    }

    private PeerDirectory requireDirectory() {
        if (directory == null) {
            throw new IllegalStateException("this node keeps no peer directory");
        }
        return directory;
    }

    private void fetch(FabricRequest request, ByteBuffer body, byte[] requestTag, RequestAuthenticator.ResponseMac responseMac,
            RequestAuthenticator authenticator, MapOutputSource source, MapOutputCache cache) throws IOException {
        if (source == null) {
            throw new IllegalStateException("this node serves no map outputs");
        }
        ShuffleProtocol.need(body, ShuffleProtocol.FETCH_HEADER_BYTES);
        int budget = body.getInt();
        int count = body.getInt();
        if (count <= 0 || count > ShuffleProtocol.FETCH_ENTRIES_MAX) {
            throw new ShuffleProtocol.ProtocolException("bad entry count " + count);
        }
        ShuffleProtocol.need(body, count * ShuffleProtocol.FETCH_ENTRY_BYTES);
        int tagBytes = authenticator.responseHeaderBytes();
        int headerBytes = tagBytes + ShuffleProtocol.RESPONSE_HEADER_BYTES + count * ShuffleProtocol.RESPONSE_ENTRY_BYTES;
        if (budget < 0 || budget > responseBytesMax - headerBytes) {
            throw new ShuffleProtocol.ProtocolException("bad response budget " + budget);
        }
        // First pass: each entry's length and what it gets of the budget.
        MapOutputBlock[] blocks = new MapOutputBlock[count];
        long[] offsets = new long[count];
        long[] blockBytes = new long[count];
        int[] given = new int[count];
        MapOutputSource.Segment[] segments = new MapOutputSource.Segment[count];
        long left = budget;
        for (int i = 0; i < count; i++) {
            int shuffleId = body.getInt();
            long mapId = body.getLong();
            int partition = body.getInt();
            long offset = body.getLong();
            long maxBytes = body.getLong();
            if (shuffleId < 0 || partition < 0 || offset < 0 || maxBytes < 0) {
                throw new ShuffleProtocol.ProtocolException("bad entry " + i);
            }
            blocks[i] = new MapOutputBlock(shuffleId, mapId, partition);
            offsets[i] = offset;
            long length = cache == null ? -1 : cache.blockBytes(blocks[i]);
            if (length < 0) {
                segments[i] = source.locate(blocks[i]);
                length = segments[i].length();
            }
            if (offset > length) {
                throw new ShuffleProtocol.ProtocolException(blocks[i] + ": offset " + offset + " beyond its " + length + " bytes");
            }
            blockBytes[i] = length;
            given[i] = (int) Math.min(Math.min(maxBytes, length - offset), left);
            left -= given[i];
        }
        int dataBytes = (int) (budget - left);
        FabricBuffer response = node.allocate(headerBytes + dataBytes);
        try {
            ByteBuffer out = response.byteBuffer();
            out.position(tagBytes);
            out.putInt(count);
            for (int i = 0; i < count; i++) {
                out.putLong(blockBytes[i]).putInt(given[i]);
            }
            for (int i = 0; i < count; i++) {
                if (given[i] == 0) {
                    continue;
                }
                if (segments[i] == null && cache.copy(blocks[i], offsets[i], given[i], out) >= 0) {
                    continue;
                }
                MapOutputSource.Segment segment = segments[i] != null ? segments[i] : source.locate(blocks[i]);
                readInto(segment, offsets[i], given[i], out, blocks[i]);
            }
            if (out.position() != headerBytes + dataBytes) {
                throw new IllegalStateException("response filled " + out.position() + " of " + (headerBytes + dataBytes) + " bytes");
            }
            corruptForTest(out, blocks, given, headerBytes);
            authenticator.signResponse(request.op(), requestTag, responseMac, out.duplicate().clear().limit(headerBytes + dataBytes),
                    ShuffleProtocol.fetchResponseCoverage(count));
            fetchRequests.incrementAndGet();
            bytesServed.addAndGet(dataBytes);
            request.respond(response);
            response = null;
        } finally {
            if (response != null) {
                response.release();
            }
        }
    }

    private ByteBuffer diagnose(ByteBuffer body, MapOutputSource source) throws IOException {
        if (source == null) {
            throw new IllegalStateException("this node serves no map outputs");
        }
        ShuffleProtocol.need(body, 4 + 8 + 4 + 8);
        MapOutputBlock block = new MapOutputBlock(body.getInt(), body.getLong(), body.getInt());
        long checksum = body.getLong();
        String algorithm = ShuffleProtocol.getString(body);
        String cause = source.diagnoseCorruption(block, checksum, algorithm);
        LOG.info("slipstream: a reader found {} corrupt; diagnosis: {}", block, cause == null ? "unknown" : cause);
        String answer = cause == null ? "" : cause;
        ByteBuffer out = ByteBuffer.allocate(ShuffleProtocol.stringBytes(answer));
        ShuffleProtocol.putString(out, answer);
        return out.flip();
    }

    /**
     * Test seam: with the system property {@value #CORRUPT_PROPERTY}{@code =PARTITION:COUNT}, the
     * first COUNT responses carrying bytes of a block of that partition get one of those bytes
     * flipped, as a damaged network would (before the response's tag, so that a tag over every byte
     * does not catch it first). For tests of the readers' corruption handling only.
     */
    static final String CORRUPT_PROPERTY = "slipstream.test.corruptResponses";
    private final int corruptPartition;
    private final java.util.concurrent.atomic.AtomicInteger corruptionsLeft = new java.util.concurrent.atomic.AtomicInteger();

    private static int[] corruptionSetting() {
        String value = System.getProperty(CORRUPT_PROPERTY, "");
        if (value.isEmpty()) {
            return new int[] {-1, 0};
        }
        String[] parts = value.split(":");
        if (parts.length != 2) {
            throw new IllegalArgumentException(CORRUPT_PROPERTY + "=" + value + ": expected PARTITION:COUNT");
        }
        LOG.warn("slipstream: TEST SETTING {}={}: responses will be corrupted on purpose", CORRUPT_PROPERTY, value);
        return new int[] {Integer.parseInt(parts[0]), Integer.parseInt(parts[1])};
    }

    private void corruptForTest(ByteBuffer out, MapOutputBlock[] blocks, int[] given, int dataStart) {
        if (corruptPartition < 0 || corruptionsLeft.get() <= 0) {
            return;
        }
        int position = dataStart;
        for (int i = 0; i < blocks.length; i++) {
            if (blocks[i].partition() == corruptPartition && given[i] > 0) {
                if (corruptionsLeft.getAndDecrement() > 0) {
                    int at = position + given[i] / 2;
                    out.put(at, (byte) ~out.get(at));
                    LOG.warn("slipstream: TEST: flipped byte {} of {} in a response", given[i] / 2, blocks[i]);
                }
                return;
            }
            position += given[i];
        }
    }

    private static void readInto(MapOutputSource.Segment segment, long offset, int bytes, ByteBuffer out, MapOutputBlock block)
            throws IOException {
        ByteBuffer target = out.slice(out.position(), bytes);
        try (FileChannel channel = FileChannel.open(segment.file(), StandardOpenOption.READ)) {
            long position = segment.offset() + offset;
            while (target.hasRemaining()) {
                int read = channel.read(target, position);
                if (read < 0) {
                    throw new IOException(block + ": " + segment.file() + " ends before the block does");
                }
                position += read;
            }
        }
        out.position(out.position() + bytes);
    }

    public long fetchRequests() {
        return fetchRequests.get();
    }

    public long bytesServed() {
        return bytesServed.get();
    }

    public long refusedRequests() {
        return refused.get();
    }
}
