package io.slipstream.shuffle;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * The bytes of a block that comes in pieces, read in order as the pieces arrive instead of put
 * together first ({@link BlockFetcher.Wanted#streamed()}). Each piece is a view of its response
 * buffer, held until read past; so a block of any size costs what is in flight (the fetcher's
 * bound), not its length. Measured: MapReduce's skewed 1 GB job, whose reducer was handed map
 * outputs of 134 MiB each, put together off the heap before Hadoop's on-disk merge read them:
 * +533 MiB of reducer RSS over vanilla (session 30, docs/mapreduce-shuffle.md).
 *
 * <p>A read that finds its next piece missing makes the fetcher progress until it arrives (on
 * the reader's thread: the fetcher is single-threaded), so other blocks' responses may complete
 * meanwhile and wait in the fetcher. Not thread-safe, as the fetcher.
 */
final class PieceStream extends InputStream {
    /** The fetcher's side: make progress until the piece at {@code offset} has arrived, or throw. */
    interface Source {
        void awaitPiece(PieceStream stream, long offset);
    }

    private record Held(ByteBuffer bytes, Runnable release) {}

    final BlockFetcher.Wanted wanted;
    final long length;
    private final Source source;
    /** Pieces arrived and not yet read, by the offset they start at. */
    private final Map<Long, Held> arrived = new HashMap<>();
    private Held current;
    /** Offset of the next byte to read. */
    private long position;
    private boolean discarded;

    PieceStream(BlockFetcher.Wanted wanted, long length, Source source) {
        this.wanted = wanted;
        this.length = length;
        this.source = source;
    }

    /** A piece has come: bytes at {@code offset} (a view), {@code release} gives its buffer back once read. */
    void add(long offset, ByteBuffer bytes, Runnable release) {
        if (discarded || offset < position || arrived.containsKey(offset)) {
            release.run(); // no reader any more, or a piece already read: the fetcher never asks twice
            return;
        }
        arrived.put(offset, new Held(bytes, release));
    }

    boolean has(long offset) {
        return arrived.containsKey(offset);
    }

    boolean discarded() {
        return discarded;
    }

    /** Bytes held for the reader now (for tests of the bound). */
    long heldBytes() {
        long held = current == null ? 0 : current.bytes.remaining();
        for (Held piece : arrived.values()) {
            held += piece.bytes.remaining();
        }
        return held;
    }

    @Override
    public int read() {
        if (!advance()) {
            return -1;
        }
        position++;
        return current.bytes.get() & 0xff;
    }

    @Override
    public int read(byte[] into, int offset, int count) {
        if (count == 0) {
            return 0;
        }
        if (!advance()) {
            return -1;
        }
        int n = Math.min(count, current.bytes.remaining());
        current.bytes.get(into, offset, n);
        position += n;
        return n;
    }

    @Override
    public long skip(long bytes) {
        long skipped = 0;
        while (skipped < bytes && advance()) {
            int n = (int) Math.min(bytes - skipped, current.bytes.remaining());
            current.bytes.position(current.bytes.position() + n);
            position += n;
            skipped += n;
        }
        return skipped;
    }

    @Override
    public int available() {
        return current == null ? 0 : current.bytes.remaining();
    }

    /** A piece with bytes left to read is current; false at the end (or once discarded). */
    private boolean advance() {
        if (discarded) {
            throw new IllegalStateException(wanted.block() + " already released");
        }
        if (current != null && current.bytes.hasRemaining()) {
            return true;
        }
        if (current != null) {
            current.release.run();
            current = null;
        }
        if (position >= length) {
            return false;
        }
        if (!arrived.containsKey(position)) {
            source.awaitPiece(this, position);
        }
        current = arrived.remove(position);
        if (current == null || !current.bytes.hasRemaining()) {
            // The fetcher returns only once the piece is here, and never stores an empty one.
            throw new IllegalStateException(wanted.block() + ": no piece at " + position + " after waiting for it");
        }
        return true;
    }

    /** Gives back every piece held; later pieces are given back as they come. Idempotent. */
    void discard() {
        if (discarded) {
            return;
        }
        discarded = true;
        if (current != null) {
            current.release.run();
            current = null;
        }
        arrived.values().forEach(piece -> piece.release.run());
        arrived.clear();
    }
}
