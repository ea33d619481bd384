package io.slipstream.shuffle;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Fetches map-output blocks from peers over the fabric, for one reader (one thread).
 *
 * <p>Blocks are batched per peer into requests of at most {@link Limits#requestBytesMax()}
 * (estimated from the expected sizes), sent asynchronously, and handed out in the order their
 * responses complete, so that the reader deserializes while other requests are on the wire. What
 * is reserved for responses in flight (and for delivered blocks not yet released) stays within
 * {@link Limits#maxBytesInFlight()}, requests within {@link Limits#maxRequestsInFlight()}; when
 * nothing is in flight one request always goes, whatever its size.
 *
 * <p>A block larger than what a response may hold comes in pieces, requested as soon as its
 * length is known and reassembled in whatever order they arrive, off the heap (a buffer of the
 * node's pool, else direct memory); or, when asked for streamed, handed out at once and read
 * piece by piece in order as they arrive ({@link PieceStream}). A block that fits one response
 * is handed out as a view of the response buffer, without a copy; the buffer goes back to the
 * pool when its last block is released.
 *
 * <p>Any failure (peer lost, timeout, refused, malformed response) is a {@link BlockFetchException}
 * naming one of the blocks concerned; the fetcher is then unusable and must be closed.
 */
public final class BlockFetcher implements AutoCloseable {
    /**
     * A block to fetch: its expected length (a hint: the real one comes with the response), the
     * most it can really have (a peer that says more is refused: nothing is allocated from a
     * peer's word beyond this) and the caller's tag. A {@code streamed} block that comes in
     * pieces is handed out at its first piece as a stream of the pieces in order
     * ({@link PieceStream}), for a reader that consumes it as a stream anyway: then it costs
     * what is in flight, not its length.
     */
    public record Wanted(MapOutputBlock block, long expectedBytes, long maxBytes, Object tag, boolean streamed) {
        public Wanted {
            if (expectedBytes < 0 || maxBytes < 0) {
                throw new IllegalArgumentException(block + ": negative size " + expectedBytes + " / " + maxBytes);
            }
        }

        /** Put together when it comes in pieces. */
        public Wanted(MapOutputBlock block, long expectedBytes, long maxBytes, Object tag) {
            this(block, expectedBytes, maxBytes, tag, false);
        }

        /** No bound but {@link #BLOCK_BYTES_MAX}; put together when it comes in pieces. */
        public Wanted(MapOutputBlock block, long expectedBytes, Object tag) {
            this(block, expectedBytes, BLOCK_BYTES_MAX, tag, false);
        }
    }

    /**
     * Bounds of one fetcher.
     *
     * @param maxBytesInFlight     bytes reserved for responses in flight and blocks not yet released (Spark: maxSizeInFlight)
     * @param maxRequestsInFlight  requests awaiting their response (Spark: maxReqsInFlight)
     * @param requestBytesMax      the largest response asked for (Spark: maxSizeInFlight / 5); also the piece size
     * @param blocksPerRequestMax  entries in one request
     * @param responseTimeout      the longest wait for any response (a backstop: the fabric times requests out itself)
     */
    public record Limits(long maxBytesInFlight, int maxRequestsInFlight, int requestBytesMax, int blocksPerRequestMax,
            Duration responseTimeout) {
        /** Room for a response's header (12 bytes per entry) inside its buffer's size class. */
        public static final int RESPONSE_HEADROOM_BYTES = 64 << 10;

        /**
         * The largest response a request asks for: a fifth of what may be in flight (as Spark's
         * own fetcher), rounded down to a power of two less the header's room (the fabric's pool
         * hands out power-of-two buffers, so a response fills one), between 64 KiB and 64 MiB.
         */
        public static int requestBytesFor(long maxBytesInFlight) {
            long fifth = Math.max(maxBytesInFlight / 5, 128 << 10);
            long power = Math.min(Long.highestOneBit(fifth), 64L << 20);
            return (int) (power - RESPONSE_HEADROOM_BYTES);
        }

        /** The fabric message a node must accept for such requests: a full response plus its header. */
        public static int maxMessageBytesFor(int requestBytesMax) {
            return requestBytesMax + (1 << 20);
        }

        public Limits {
            if (maxBytesInFlight <= 0 || maxRequestsInFlight <= 0 || requestBytesMax <= 0 || blocksPerRequestMax <= 0
                    || blocksPerRequestMax > ShuffleProtocol.FETCH_ENTRIES_MAX) {
                throw new IllegalArgumentException("bad fetch limits: " + maxBytesInFlight + " bytes, " + maxRequestsInFlight
                        + " requests, " + requestBytesMax + " bytes per request, " + blocksPerRequestMax + " blocks per request");
            }
        }
    }

    /** A block above this cannot be reassembled in one Java array. */
    public static final long BLOCK_BYTES_MAX = Integer.MAX_VALUE - 16;
    /** A request reserves at least this much (when the expected sizes are tiny or wrong). */
    private static final int RESERVATION_MIN_BYTES = 64 << 10;
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    private record Piece(Wanted wanted, long offset, long maxBytes) {}

    private static final class PeerQueue {
        final InetSocketAddress peer;
        final FabricEndpoint endpoint;
        final ArrayDeque<Piece> pieces = new ArrayDeque<>();

        PeerQueue(InetSocketAddress peer, FabricEndpoint endpoint) {
            this.peer = peer;
            this.endpoint = endpoint;
        }
    }

    private record Sent(PeerQueue peer, Piece[] pieces, int reservation, byte[] requestTag) {}

    private record Completion(Sent sent, FabricBuffer response, Throwable error) {}

    /** A response buffer shared by the blocks cut from it. */
    private final class Response {
        final FabricBuffer buffer;
        final int reservation;
        int references = 1;

        Response(FabricBuffer buffer, int reservation) {
            this.buffer = buffer;
            this.reservation = reservation;
        }

        void unreference() {
            if (--references == 0) {
                buffer.release();
                bytesInFlight -= reservation;
            }
        }
    }

    /**
     * A block coming in pieces, put together off the heap: in a buffer of the fabric's pool when it
     * fits one (at most the node's maxMessageBytes) and the pool has room, else in a direct buffer
     * reused across fetchers ({@link AssemblyBuffers}); on the heap only when direct memory is refused. Profiled in session 26
     * (`ohb spark groupby`: blocks of about 16 MiB against 8 MiB responses, async-profiler's
     * allocation profile of the executors): heap arrays for them were 252 MiB of the 1644 MiB the
     * task threads of an executor allocated, each one a G1 humongous object, and the plugin's
     * executors spent 1.0 to 1.3 s more in GC than vanilla's.
     */
    private static final class Assembly {
        final ByteBuffer bytes;
        /** Gives the memory back; null once taken (delivered with the block, or dropped). */
        private Runnable release;
        long received;

        Assembly(FabricNode node, long total) {
            int length = (int) total;
            FabricBuffer pooled = null;
            // The node allocates at most a message (above that it throws, for every block).
            if (length <= node.config().maxMessageBytes()) {
                try {
                    pooled = node.tryAllocate(length);
                } catch (RuntimeException poolAtCap) {
                    // Direct memory then: a block must not fail for want of pool room.
                }
            }
            if (pooled != null) {
                FabricBuffer buffer = pooled;
                bytes = buffer.byteBuffer();
                release = buffer::release;
                return;
            }
            ByteBuffer direct = AssemblyBuffers.take(length);
            if (direct != null) {
                bytes = direct;
                release = () -> AssemblyBuffers.give(direct);
            } else {
                bytes = ByteBuffer.allocate(length); // direct memory refused: the heap, as before session 26
                release = () -> {};
            }
        }

        int length() {
            return bytes.limit();
        }

        /** What gives the memory back once the block is released (run once: FetchedBlock's release is idempotent). */
        Runnable takeRelease() {
            Runnable taken = release == null ? () -> {} : release;
            release = null;
            return taken;
        }

        void drop() {
            takeRelease().run();
        }
    }

    private final FabricNode node;
    private final RequestAuthenticator authenticator;
    private final Limits limits;
    private final List<PeerQueue> peers = new ArrayList<>();
    private int nextPeer;
    private final LinkedBlockingQueue<Completion> completions = new LinkedBlockingQueue<>();
    private final ArrayDeque<FetchedBlock> ready = new ArrayDeque<>();
    private final Set<FetchedBlock> delivered = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Map<MapOutputBlock, Assembly> assemblies = new HashMap<>();
    /** Streamed blocks handed out (kept once discarded, so that their late pieces are given back). */
    private final Map<MapOutputBlock, PieceStream> streams = new HashMap<>();
    private final Set<Sent> sentInFlight = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Object closeLock = new Object();
    private boolean closed;
    private BlockFetchException failure;

    private long bytesInFlight;
    private int requestsInFlight;
    private int blocksLeft;

    private long fetchWaitNanos;
    private long remoteBytes;
    private long remoteBlocks;
    private long requestsSent;
    private long peakBytesInFlight;
    private int peakRequestsInFlight;

    public BlockFetcher(FabricNode node, RequestAuthenticator authenticator, Limits limits,
            Map<InetSocketAddress, List<Wanted>> blocksByPeer) {
        this.node = node;
        this.authenticator = authenticator;
        this.limits = limits;
        for (Map.Entry<InetSocketAddress, List<Wanted>> entry : blocksByPeer.entrySet()) {
            if (entry.getValue().isEmpty()) {
                continue;
            }
            PeerQueue queue = new PeerQueue(entry.getKey(), node.endpoint(entry.getKey()));
            for (Wanted wanted : entry.getValue()) {
                queue.pieces.add(new Piece(wanted, 0, Long.MAX_VALUE));
            }
            blocksLeft += entry.getValue().size();
            peers.add(queue);
        }
    }

    /** Sends the first requests (call early: the caller may read local blocks meanwhile). */
    public void start() {
        sendWithinLimits();
    }

    public boolean hasNext() {
        checkUsable();
        return !ready.isEmpty() || blocksLeft > 0;
    }

    /** The next complete block, waiting for one if needed (the wait counts as fetch wait time). */
    public FetchedBlock next() {
        checkUsable();
        while (ready.isEmpty()) {
            if (blocksLeft == 0) {
                throw new NoSuchElementException();
            }
            progress();
        }
        FetchedBlock block = ready.poll();
        delivered.add(block);
        sendWithinLimits();
        return block;
    }

    /** Sends what the limits allow, then waits for one response (the wait counts as fetch wait time) and takes it in. */
    private void progress() {
        sendWithinLimits();
        Completion completion;
        long waitStart = System.nanoTime();
        try {
            completion = completions.poll(limits.responseTimeout().toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw fail(anyWanted(), null, "interrupted while waiting for blocks", e);
        } finally {
            fetchWaitNanos += System.nanoTime() - waitStart;
        }
        if (completion == null) {
            Wanted late = anyWanted();
            InetSocketAddress peer = sentInFlight.isEmpty() ? null : sentInFlight.iterator().next().peer().peer;
            throw fail(late, peer, "no response within " + limits.responseTimeout().toMillis() + " ms", null);
        }
        process(completion);
    }

    /**
     * A streamed block's reader needs the piece at {@code offset}: it goes first in its peer's
     * queue if not yet asked for (so pieces of blocks not being read do not fill what may be in
     * flight ahead of it), then responses are taken in until it has come.
     */
    private void awaitPiece(PeerQueue queue, PieceStream stream, long offset) {
        checkUsable();
        for (Iterator<Piece> pieces = queue.pieces.iterator(); pieces.hasNext(); ) {
            Piece piece = pieces.next();
            if (piece.wanted() == stream.wanted && piece.offset() == offset) {
                pieces.remove();
                queue.pieces.addFirst(piece);
                break;
            }
        }
        while (!stream.has(offset)) {
            checkUsable();
            progress();
        }
    }


    /** Releases every buffer this fetcher holds; responses still on the wire are released as they come. */
    @Override
    public void close() {
        synchronized (closeLock) {
            if (closed) {
                return;
            }
            closed = true;
        }
        for (FetchedBlock block : new ArrayList<>(delivered)) {
            block.release();
        }
        while (!ready.isEmpty()) {
            ready.poll().release();
        }
        Completion completion;
        while ((completion = completions.poll()) != null) {
            if (completion.response() != null) {
                completion.response().release();
            }
        }
        for (Assembly assembly : assemblies.values()) {
            assembly.drop();
        }
        assemblies.clear();
        streams.values().forEach(PieceStream::discard);
    }

    /**
     * Fetches {@code block} again from the peer that sent it, next in that peer's queue (e.g. its
     * bytes failed to decompress: they may have been damaged on the way). The caller releases the
     * block it had.
     */
    public void fetchAgain(FetchedBlock block) {
        checkUsable();
        PeerQueue queue = queueOf(block.peer());
        queue.pieces.addFirst(new Piece(block.wanted(), 0, Long.MAX_VALUE));
        blocksLeft++;
    }

    /**
     * Asks the peer that sent {@code block} why it may be corrupt, given the checksum of the bytes
     * received ({@code algorithm} names it); waits for the answer. Returns the peer's diagnosis,
     * empty when it cannot tell; a failed request is a {@code FabricException}.
     */
    public String diagnose(FetchedBlock block, long checksumByReader, String algorithm) {
        MapOutputBlock id = block.block();
        ByteBuffer body = ByteBuffer.allocate(4 + 8 + 4 + 8 + ShuffleProtocol.stringBytes(algorithm));
        body.putInt(id.shuffleId()).putLong(id.mapId()).putInt(id.partition()).putLong(checksumByReader);
        ShuffleProtocol.putString(body, algorithm);
        body.flip();
        ByteBuffer payload = authenticator.seal(ShuffleProtocol.OP_DIAGNOSE, body);
        try (FabricBuffer response = queueOf(block.peer()).endpoint.request(ShuffleProtocol.OP_DIAGNOSE, payload)) {
            return ShuffleProtocol.getString(authenticator.openResponse(ShuffleProtocol.OP_DIAGNOSE,
                    authenticator.requestTag(payload), response.byteBuffer()));
        }
    }

    private PeerQueue queueOf(InetSocketAddress peer) {
        for (PeerQueue queue : peers) {
            if (queue.peer.equals(peer)) {
                return queue;
            }
        }
        throw new IllegalArgumentException("no blocks were fetched from " + peer);
    }

    public long fetchWaitNanos() {
        return fetchWaitNanos;
    }

    public long remoteBytes() {
        return remoteBytes;
    }

    public long remoteBlocks() {
        return remoteBlocks;
    }

    public long requestsSent() {
        return requestsSent;
    }

    /** The most bytes ever reserved at once (for tests of the bound). */
    public long peakBytesInFlight() {
        return peakBytesInFlight;
    }

    public int peakRequestsInFlight() {
        return peakRequestsInFlight;
    }

    private void checkUsable() {
        if (failure != null) {
            throw failure;
        }
        if (closed) {
            throw new IllegalStateException("fetcher closed");
        }
    }

    private void sendWithinLimits() {
        for (int tried = 0; tried < peers.size(); ) {
            PeerQueue queue = peers.get(nextPeer);
            if (queue.pieces.isEmpty()) {
                nextPeer = (nextPeer + 1) % peers.size();
                tried++;
                continue;
            }
            if (requestsInFlight > 0 && requestsInFlight >= limits.maxRequestsInFlight()) {
                return;
            }
            if (!sendOne(queue)) {
                return;
            }
            nextPeer = (nextPeer + 1) % peers.size();
            tried = 0;
        }
    }

    /** Sends one request to {@code queue}'s peer if the bytes in flight allow it. */
    private boolean sendOne(PeerQueue queue) {
        List<Piece> batch = new ArrayList<>();
        long estimated = 0;
        for (Piece piece : queue.pieces) {
            if (batch.size() == limits.blocksPerRequestMax()) {
                break;
            }
            long estimate = piece.maxBytes() != Long.MAX_VALUE ? piece.maxBytes() : Math.max(piece.wanted().expectedBytes(), 1);
            if (!batch.isEmpty() && estimated + estimate > limits.requestBytesMax()) {
                break;
            }
            estimated += estimate;
            batch.add(piece);
        }
        long slack = estimated / 8;
        int reservation = (int) Math.min(limits.requestBytesMax(), Math.max(estimated + slack, RESERVATION_MIN_BYTES));
        if (requestsInFlight > 0 && bytesInFlight + reservation > limits.maxBytesInFlight()) {
            return false;
        }
        for (int i = 0; i < batch.size(); i++) {
            queue.pieces.poll();
        }
        ByteBuffer body = ByteBuffer.allocate(ShuffleProtocol.FETCH_HEADER_BYTES + batch.size() * ShuffleProtocol.FETCH_ENTRY_BYTES);
        body.putInt(reservation).putInt(batch.size());
        for (Piece piece : batch) {
            MapOutputBlock block = piece.wanted().block();
            body.putInt(block.shuffleId()).putLong(block.mapId()).putInt(block.partition())
                    .putLong(piece.offset()).putLong(piece.maxBytes());
        }
        body.flip();
        ByteBuffer payload = authenticator.seal(ShuffleProtocol.OP_FETCH, body);
        Sent sent = new Sent(queue, batch.toArray(new Piece[0]), reservation, authenticator.requestTag(payload));
        bytesInFlight += reservation;
        requestsInFlight++;
        requestsSent++;
        sentInFlight.add(sent);
        peakBytesInFlight = Math.max(peakBytesInFlight, bytesInFlight);
        peakRequestsInFlight = Math.max(peakRequestsInFlight, requestsInFlight);
        try {
            queue.endpoint.requestAsync(ShuffleProtocol.OP_FETCH, payload)
                    .whenComplete((response, error) -> completed(new Completion(sent, response, error)));
        } catch (RuntimeException e) {
            completed(new Completion(sent, null, e));
        }
        return true;
    }

    /** On the fabric's completer thread. */
    private void completed(Completion completion) {
        synchronized (closeLock) {
            if (!closed) {
                completions.add(completion);
                return;
            }
        }
        if (completion.response() != null) {
            completion.response().release();
        }
    }

    private void process(Completion completion) {
        Sent sent = completion.sent();
        requestsInFlight--;
        sentInFlight.remove(sent);
        if (completion.error() != null) {
            bytesInFlight -= sent.reservation();
            Throwable cause = completion.error();
            throw fail(sent.pieces()[0].wanted(), sent.peer().peer,
                    "fetching " + sent.pieces().length + " blocks from " + sent.peer().peer + " failed: " + cause.getMessage(), cause);
        }
        Response response = new Response(completion.response(), sent.reservation());
        try {
            // The coverage is read only for a header-only MAC (checked in the authenticator's mode);
            // a tag over every byte is checked before anything of the body is read.
            ByteBuffer view = authenticator.openResponse(ShuffleProtocol.OP_FETCH, sent.requestTag(),
                    completion.response().byteBuffer(), ShuffleProtocol.fetchResponseCoverage(sent.pieces().length)).slice();
            ShuffleProtocol.need(view, ShuffleProtocol.RESPONSE_HEADER_BYTES);
            int count = view.getInt();
            if (count != sent.pieces().length) {
                throw new ShuffleProtocol.ProtocolException(count + " entries for " + sent.pieces().length + " asked");
            }
            ShuffleProtocol.need(view, count * ShuffleProtocol.RESPONSE_ENTRY_BYTES);
            int dataPosition = ShuffleProtocol.RESPONSE_HEADER_BYTES + count * ShuffleProtocol.RESPONSE_ENTRY_BYTES;
            // Never more than was asked for: the reservation is the response's budget.
            if ((long) view.limit() - dataPosition > sent.reservation()) {
                throw new ShuffleProtocol.ProtocolException((view.limit() - dataPosition) + " bytes of data for "
                        + sent.reservation() + " asked");
            }
            for (Piece piece : sent.pieces()) {
                long total = view.getLong();
                int returned = view.getInt();
                if (total < 0 || total > piece.wanted().maxBytes()) {
                    throw new ShuffleProtocol.ProtocolException(piece.wanted().block() + " said to have " + total
                            + " bytes; it can have at most " + piece.wanted().maxBytes());
                }
                long end = piece.maxBytes() >= total - piece.offset() ? total : piece.offset() + piece.maxBytes();
                if (piece.offset() > total || returned < 0 || returned > end - piece.offset()
                        || (long) dataPosition + returned > view.limit()) {
                    throw new ShuffleProtocol.ProtocolException(piece.wanted().block() + ": bad entry (" + total + " bytes, "
                            + returned + " returned from " + piece.offset() + ")");
                }
                accept(sent.peer(), piece, total, returned, view, dataPosition, response);
                dataPosition += returned;
            }
            if (dataPosition != view.limit()) {
                throw new ShuffleProtocol.ProtocolException((view.limit() - dataPosition) + " bytes beyond the entries");
            }
        } catch (RequestAuthenticator.AuthenticationException e) {
            throw fail(sent.pieces()[0].wanted(), sent.peer().peer, "response from " + sent.peer().peer + " refused: " + e.getMessage(), e);
        } catch (ShuffleProtocol.ProtocolException e) {
            throw fail(sent.pieces()[0].wanted(), sent.peer().peer, "malformed response from " + sent.peer().peer + ": " + e.getMessage(), e);
        } finally {
            response.unreference();
        }
    }

    private void accept(PeerQueue queue, Piece piece, long total, int returned, ByteBuffer view, int position, Response response) {
        Wanted wanted = piece.wanted();
        remoteBytes += returned;
        if (piece.offset() == 0 && returned == total) {
            ByteBuffer data = EMPTY;
            Runnable onRelease = () -> {};
            if (returned > 0) {
                data = view.slice(position, returned);
                response.references++;
                onRelease = response::unreference;
            }
            deliver(queue, wanted, data, onRelease);
            return;
        }
        if (total > BLOCK_BYTES_MAX) {
            throw new ShuffleProtocol.ProtocolException(wanted.block() + " has " + total + " bytes: above the " + BLOCK_BYTES_MAX + " a reader can hold");
        }
        if (wanted.streamed()) {
            acceptStreamed(queue, piece, total, returned, view, position, response);
            return;
        }
        Assembly assembly = assemblies.get(wanted.block());
        if (returned > 0) {
            if (assembly == null) {
                assembly = new Assembly(node, total);
                assemblies.put(wanted.block(), assembly);
            } else if (assembly.length() != total) {
                throw new ShuffleProtocol.ProtocolException(wanted.block() + " changed length: " + total + " after " + assembly.length());
            }
            assembly.bytes.put((int) piece.offset(), view, position, returned);
            assembly.received += returned;
        }
        queueRest(queue, piece, total, returned);
        if (assembly != null && assembly.received == total) {
            assemblies.remove(wanted.block());
            deliver(queue, wanted, assembly.bytes, assembly.takeRelease());
        }
    }

    /** What {@code piece} did not get, in pieces of at most a response, next in line for this peer. */
    private void queueRest(PeerQueue queue, Piece piece, long total, int returned) {
        long end = piece.maxBytes() >= total - piece.offset() ? total : piece.offset() + piece.maxBytes();
        long from = piece.offset() + returned;
        List<Piece> rest = new ArrayList<>();
        for (long offset = from; offset < end; offset += limits.requestBytesMax()) {
            rest.add(new Piece(piece.wanted(), offset, Math.min(limits.requestBytesMax(), end - offset)));
        }
        for (int i = rest.size() - 1; i >= 0; i--) {
            queue.pieces.addFirst(rest.get(i));
        }
    }

    /**
     * A piece of a streamed block: the block is handed out at its first piece (asked for from
     * offset 0); each piece stays a view of its response, referenced until read.
     */
    private void acceptStreamed(PeerQueue queue, Piece piece, long total, int returned, ByteBuffer view, int position,
            Response response) {
        Wanted wanted = piece.wanted();
        PieceStream stream = streams.get(wanted.block());
        if (stream == null) {
            if (piece.offset() != 0) {
                throw new ShuffleProtocol.ProtocolException(wanted.block() + ": a piece from " + piece.offset() + " before its start");
            }
            stream = new PieceStream(wanted, total, (reading, offset) -> awaitPiece(queue, reading, offset));
            streams.put(wanted.block(), stream);
            PieceStream handedOut = stream;
            ready.add(new FetchedBlock(wanted, queue.peer, stream, block -> {
                delivered.remove(block);
                handedOut.discard();
                dropQueuedPieces(queue, wanted);
            }));
            blocksLeft--;
            remoteBlocks++;
        } else if (stream.length != total) {
            throw new ShuffleProtocol.ProtocolException(wanted.block() + " changed length: " + total + " after " + stream.length);
        }
        if (stream.discarded()) {
            return; // its reader let go: nothing more is asked, what was in flight is dropped here
        }
        if (returned > 0) {
            response.references++;
            stream.add(piece.offset(), view.slice(position, returned), response::unreference);
        }
        queueRest(queue, piece, total, returned);
    }

    private static void dropQueuedPieces(PeerQueue queue, Wanted wanted) {
        queue.pieces.removeIf(piece -> piece.wanted() == wanted);
    }

    private void deliver(PeerQueue queue, Wanted wanted, ByteBuffer data, Runnable onRelease) {
        ready.add(new FetchedBlock(wanted, queue.peer, data, block -> {
            delivered.remove(block);
            onRelease.run();
        }));
        blocksLeft--;
        remoteBlocks++;
    }

    private Wanted anyWanted() {
        for (Sent sent : sentInFlight) {
            return sent.pieces()[0].wanted();
        }
        for (PeerQueue queue : peers) {
            if (!queue.pieces.isEmpty()) {
                return queue.pieces.peek().wanted();
            }
        }
        for (Map.Entry<MapOutputBlock, Assembly> entry : assemblies.entrySet()) {
            return new Wanted(entry.getKey(), entry.getValue().length(), null);
        }
        return null;
    }

    private BlockFetchException fail(Wanted wanted, InetSocketAddress peer, String message, Throwable cause) {
        failure = new BlockFetchException(wanted, peer, message, cause);
        return failure;
    }
}
