package io.slipstream.shuffle;

import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * A block ready to be read: its bytes (a view into a response buffer, or an assembled buffer for
 * a block that came in pieces), until {@link #release()}; or, for a block asked for streamed, a
 * stream of its pieces as they arrive ({@link #stream()} only). Reading it after release is a bug.
 */
public final class FetchedBlock {
    private final BlockFetcher.Wanted wanted;
    private final java.net.InetSocketAddress peer;
    /** Null for a streamed block. */
    private final ByteBuffer data;
    /** Null unless streamed. */
    private final PieceStream pieces;
    private final java.util.function.Consumer<FetchedBlock> onRelease;
    private boolean released;
    private boolean streamTaken;

    FetchedBlock(BlockFetcher.Wanted wanted, java.net.InetSocketAddress peer, ByteBuffer data,
            java.util.function.Consumer<FetchedBlock> onRelease) {
        this(wanted, peer, data, null, onRelease);
    }

    FetchedBlock(BlockFetcher.Wanted wanted, java.net.InetSocketAddress peer, PieceStream pieces,
            java.util.function.Consumer<FetchedBlock> onRelease) {
        this(wanted, peer, null, pieces, onRelease);
    }

    private FetchedBlock(BlockFetcher.Wanted wanted, java.net.InetSocketAddress peer, ByteBuffer data, PieceStream pieces,
            java.util.function.Consumer<FetchedBlock> onRelease) {
        this.wanted = wanted;
        this.peer = peer;
        this.data = data;
        this.pieces = pieces;
        this.onRelease = onRelease;
    }

    public MapOutputBlock block() {
        return wanted.block();
    }

    BlockFetcher.Wanted wanted() {
        return wanted;
    }

    /** The peer that sent it. */
    public java.net.InetSocketAddress peer() {
        return peer;
    }

    /** The caller's tag given with the block (e.g. the engine's own block and address). */
    public Object tag() {
        return wanted.tag();
    }

    public int bytes() {
        return pieces != null ? (int) pieces.length : data.remaining();
    }

    /** Whether the bytes come as a stream of pieces ({@link #stream()} only, once). */
    public boolean streamed() {
        return pieces != null;
    }

    /** The bytes (a view; position 0 to limit). Not for a streamed block. */
    public ByteBuffer data() {
        if (released) {
            throw new IllegalStateException(wanted.block() + " already released");
        }
        if (pieces != null) {
            throw new IllegalStateException(wanted.block() + " is streamed: read it with stream()");
        }
        return data.duplicate();
    }

    /**
     * A stream over the bytes; closing it releases the block. A streamed block has one stream,
     * whose reads may wait for pieces (a {@link BlockFetchException} when they cannot come).
     */
    public InputStream stream() {
        if (pieces == null) {
            return new ByteBufferInputStream(data(), this::release);
        }
        if (released || streamTaken) {
            throw new IllegalStateException(wanted.block() + (released ? " already released" : ": its stream was taken"));
        }
        streamTaken = true;
        return new java.io.FilterInputStream(pieces) {
            @Override
            public void close() {
                release();
            }
        };
    }

    /** Gives the memory back (idempotent). */
    public void release() {
        if (!released) {
            released = true;
            onRelease.accept(this);
        }
    }
}
