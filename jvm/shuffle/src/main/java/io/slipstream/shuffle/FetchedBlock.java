package io.slipstream.shuffle;

import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * A block ready to be read: its bytes (a view into a response buffer, or an assembled buffer for
 * a block that came in pieces), until {@link #release()}. Reading it after release is a bug.
 */
public final class FetchedBlock {
    private final BlockFetcher.Wanted wanted;
    private final java.net.InetSocketAddress peer;
    private final ByteBuffer data;
    private final java.util.function.Consumer<FetchedBlock> onRelease;
    private boolean released;

    FetchedBlock(BlockFetcher.Wanted wanted, java.net.InetSocketAddress peer, ByteBuffer data,
            java.util.function.Consumer<FetchedBlock> onRelease) {
        this.wanted = wanted;
        this.peer = peer;
        this.data = data;
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
        return data.remaining();
    }

    /** The bytes (a view; position 0 to limit). */
    public ByteBuffer data() {
        if (released) {
            throw new IllegalStateException(wanted.block() + " already released");
        }
        return data.duplicate();
    }

    /** A stream over the bytes; closing it releases the block. */
    public InputStream stream() {
        return new ByteBufferInputStream(data(), this::release);
    }

    /** Gives the memory back (idempotent). */
    public void release() {
        if (!released) {
            released = true;
            onRelease.accept(this);
        }
    }
}
