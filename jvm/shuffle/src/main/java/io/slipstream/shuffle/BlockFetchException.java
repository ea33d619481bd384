package io.slipstream.shuffle;

import java.net.InetSocketAddress;

/**
 * Fetching a block failed (the peer died, timed out, refused, or lost the block). The engine
 * adapter turns it into the engine's own fetch failure, so the lost map output is recomputed.
 */
public final class BlockFetchException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final transient BlockFetcher.Wanted wanted;
    private final transient InetSocketAddress peer;

    BlockFetchException(BlockFetcher.Wanted wanted, InetSocketAddress peer, String message, Throwable cause) {
        super(message, cause);
        this.wanted = wanted;
        this.peer = peer;
    }

    /** One of the blocks that could not be fetched (with the caller's tag). */
    public BlockFetcher.Wanted wanted() {
        return wanted;
    }

    public InetSocketAddress peer() {
        return peer;
    }
}
