package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;
import java.util.Arrays;

/**
 * One replica's data while it lives in the burst buffer: chunks 0..{@code chunksStored-1} in the cache under
 * {@link #key}, the next ones in memory: up to {@code maxInFlight} full chunks on their way to the cache (stored by
 * {@link BurstBufferStores}' threads, possibly out of order), then the chunk being written. A reader of a replica
 * being written (after hflush) so sees every byte written, each chunk from memory until it and every chunk
 * before it are stored. One writer (HDFS's BlockReceiver) appends; readers and the flush read.
 *
 * <p>The writer waits only when {@code maxInFlight} chunks of its replica (or {@code bb.maxInFlight.bytes} of the
 * DataNode's) are still being stored, and at close and hsync until all are. A store failure is acted on at the
 * writer's next write, sync or close, once the replica's other stores have ended.
 *
 * <p>States: WRITING -> SEALED (the writer closed; every byte is in the cache) -> FLUSHED (the block file holds
 * the data; the cache's copy is deleted), or STOPPED (a recovery took the replica from its writer; what was
 * written goes to the block file at once), or DROPPED (the replica was deleted, or its copy in the cache lost).
 */
final class BurstBufferPending {
    enum State { WRITING, SEALED, STOPPED, FLUSHED, DROPPED }

    final String bpid;
    final long blockId;
    /** The generation stamp when it was created: part of the keys (recoveries flush first, then bump it). */
    final long generationStamp;
    private final String keyBase;
    private final int chunkBytes;
    private final int maxInFlight;
    private final BurstBufferClient client;
    private final BurstBufferStores stores;
    /** Told when a chunk could not be stored (the replica is then DROPPED and its writer fails). */
    private final WriteFailed writeFailed;

    /** Told when a chunk could not be stored; {@code toFile}: the replica goes on in its block file. */
    interface WriteFailed {
        void failed(BurstBufferPending replica, IOException cause, boolean toFile);
    }
    /** Bytes taken from {@code bb.maxPending.bytes}: the block size while written, its length once sealed. */
    long reservedBytes;

    // Guarded by this.
    private State state = State.WRITING;
    /** The chunk being written, number {@code chunksStored + inFlight.size()}; null once the replica ended. */
    private Chunk filling;
    /** Full chunks handed to the stores, in order from number {@code chunksStored}; kept until stored in order. */
    private final ArrayDeque<Chunk> inFlight = new ArrayDeque<>();
    /** Stored chunks' buffers, for the next chunks: a replica allocates {@code maxInFlight + 1} at most. */
    private final ArrayDeque<Chunk> spare = new ArrayDeque<>();
    private int buffersAllocated;
    private int chunksStored;
    /** Chunks ever handed to the stores: the keys the replica may have in the cache (stores end out of order). */
    private int chunksHandedOver;
    /** Stores of this replica handed over and not yet ended (in {@link #inFlight}, or orphaned by a drop). */
    private int storesUnfinished;
    private long length;
    /** The replica's first failed store, acted on by the writer once its other stores have ended. */
    private IOException storeFailure;
    private int failedChunk = -1;

    /** Serialises flushes of this replica (the flusher's and a recovery's). */
    final Object flushLock = new Object();

    BurstBufferPending(String keyBase, String bpid, long blockId, long generationStamp, int chunkBytes,
            int maxInFlight, BurstBufferClient client, BurstBufferStores stores, long reservedBytes,
            WriteFailed writeFailed) {
        this.writeFailed = writeFailed;
        this.keyBase = keyBase;
        this.bpid = bpid;
        this.blockId = blockId;
        this.generationStamp = generationStamp;
        this.chunkBytes = chunkBytes;
        this.maxInFlight = maxInFlight;
        this.client = client;
        this.stores = stores;
        this.reservedBytes = reservedBytes;
        this.filling = new Chunk();
        buffersAllocated = 1;
    }

    /**
     * A chunk's bytes in memory, and its store. Its {@link #number} and {@link #length} are set by the writer
     * before the chunk is handed over and do not change until it is stored (the executor's hand-off publishes
     * them to the store thread).
     */
    private final class Chunk implements BurstBufferStores.Store {
        final byte[] bytes = new byte[chunkBytes];
        int length;
        int number;
        boolean stored; // guarded by the replica

        @Override
        public void run() {
            IOException failure = null;
            try {
                client.set(key(number), bytes, 0, length);
            } catch (IOException e) {
                failure = e;
            } catch (RuntimeException e) {
                // Ended all the same: a chunk that never ends would hold its writer (and stop()) forever.
                failure = new IOException("storing chunk " + number + ": " + e, e);
            }
            try {
                ended(this, failure);
            } finally {
                // Last: when the DataNode's count of chunks in flight drops, this chunk's work is all done.
                stores.release(length);
            }
        }

        @Override
        public void abandon(IOException why) {
            try {
                ended(this, why);
            } finally {
                stores.release(length);
            }
        }
    }

    String key(int chunk) {
        return keyBase + chunk;
    }

    synchronized State state() {
        return state;
    }

    synchronized long length() {
        return length;
    }

    synchronized int chunksStored() {
        return chunksStored;
    }

    /** How many of the replica's chunk keys may be in the cache (0 up to this less one): what a drop deletes. */
    synchronized int chunksHandedOver() {
        return chunksHandedOver;
    }

    /** Chunks of this replica handed to the stores and not yet stored in order (tests, toString). */
    synchronized int chunksInFlight() {
        return inFlight.size();
    }

    /** Chunk buffers this replica allocated (at most {@code maxInFlight + 1}: they are reused). */
    synchronized int buffersAllocated() {
        return buffersAllocated;
    }

    /**
     * The writer's bytes: into the chunk in memory; each full chunk is handed to the stores and the writer goes on
     * with the next (waiting only while {@code maxInFlight} of its chunks are in flight). If a store failed before
     * the replica's first chunk was stored, the replica leaves the burst buffer (DROPPED) and every byte written so
     * far, these included, is returned for the block file; null otherwise. An IOException if a store failed later
     * (chunks are then lost with the cache, and the replica's write fails).
     */
    byte[] write(byte[] b, int off, int len) throws IOException {
        while (len > 0) {
            int taken = 0;
            boolean full = false;
            boolean failed;
            synchronized (this) {
                if (state != State.WRITING) {
                    throw new IOException("blk_" + blockId + ": no longer written through the burst buffer (" + state
                            + ")");
                }
                failed = storeFailure != null;
                if (!failed) {
                    taken = Math.min(len, chunkBytes - filling.length);
                    System.arraycopy(b, off, filling.bytes, filling.length, taken);
                    filling.length += taken;
                    length += taken;
                    full = filling.length == chunkBytes;
                }
            }
            byte[] held = null;
            if (failed) {
                held = afterStoreFailure();
            } else {
                off += taken;
                len -= taken;
                if (full) {
                    held = handOver();
                }
            }
            if (held != null) {
                byte[] all = Arrays.copyOf(held, held.length + len);
                System.arraycopy(b, off, all, held.length, len);
                return all;
            }
            // Otherwise the next round goes on, or throws if a recovery stopped the replica meanwhile.
        }
        return null;
    }

    /**
     * Hands the chunk being written to the stores and starts the next, once fewer than {@code maxInFlight} of the
     * replica's chunks and the DataNode's {@code bb.maxInFlight.bytes} allow it. The bytes held when an earlier
     * store failed before any chunk was stored (see {@link #write}); null when handed over, or when the replica no
     * longer takes bytes (a recovery stopped it and has the chunk).
     */
    private byte[] handOver() throws IOException {
        int bytes;
        boolean failed;
        synchronized (this) {
            awaitInFlightAtMost(maxInFlight - 1);
            if (state != State.WRITING) {
                return null;
            }
            failed = storeFailure != null;
            bytes = filling.length;
        }
        if (failed) {
            return afterStoreFailure();
        }
        stores.reserve(bytes);
        boolean handed = false;
        try {
            synchronized (this) {
                if (state != State.WRITING) {
                    return null;
                }
                failed = storeFailure != null;
                if (!failed) {
                    Chunk chunk = filling;
                    chunk.number = chunksStored + inFlight.size();
                    chunk.stored = false;
                    inFlight.addLast(chunk);
                    storesUnfinished++;
                    chunksHandedOver = chunk.number + 1;
                    filling = spareChunk();
                    handed = true;
                    try {
                        stores.execute(chunk);
                    } catch (IOException e) {
                        chunk.abandon(e); // gives the reservation back and records the failure
                    }
                }
            }
        } finally {
            if (!handed) {
                stores.release(bytes);
            }
        }
        return failed ? afterStoreFailure() : null;
    }

    /** A buffer for the next chunk: a stored chunk's, else a new one (never more than maxInFlight + 1 in all). */
    private Chunk spareChunk() {
        Chunk chunk = spare.poll();
        if (chunk == null) {
            chunk = new Chunk();
            buffersAllocated++;
        }
        chunk.length = 0;
        return chunk;
    }

    /** Waits (holding this) while the writer may go on and more than {@code limit} of its chunks are in flight. */
    private void awaitInFlightAtMost(int limit) {
        if (!(state == State.WRITING && storeFailure == null && inFlight.size() > limit)) {
            return;
        }
        long startNs = System.nanoTime();
        boolean interrupted = false;
        while (state == State.WRITING && storeFailure == null && inFlight.size() > limit) {
            interrupted |= waitKeepingInterrupt();
        }
        stores.countWait(System.nanoTime() - startNs);
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * One wait (holding this) that an interrupt ends without failing: true if interrupted, for the caller to set
     * the flag again once done. The writer's waits end when its stores do (each within the client's timeouts), as
     * its blocking {@code set} did before stores left its thread; HDFS interrupts a BlockReceiver whose pipeline
     * failed and then closes it, and that close must still seal the replica.
     */
    private boolean waitKeepingInterrupt() {
        try {
            wait();
            return false;
        } catch (InterruptedException e) {
            return true;
        }
    }

    /** A store ended (stored, or failed); the stored prefix grows when the chunk was the next in order. */
    private void ended(Chunk chunk, IOException failure) {
        boolean orphan;
        synchronized (this) {
            storesUnfinished--;
            // Stored after the replica left the burst buffer: the drop's deletion of its keys may have run already.
            orphan = failure == null && (state == State.DROPPED || state == State.FLUSHED);
            if (failure != null) {
                if (storeFailure == null) {
                    storeFailure = failure;
                    failedChunk = chunk.number;
                }
            } else {
                chunk.stored = true;
                while (!inFlight.isEmpty() && inFlight.peekFirst().stored) {
                    Chunk done = inFlight.pollFirst();
                    chunksStored++;
                    if (state == State.WRITING) {
                        spare.push(done); // readers now read it from the cache; its buffer takes a next chunk
                    }
                }
            }
            notifyAll();
        }
        if (orphan) {
            try {
                client.delete(key(chunk.number));
            } catch (IOException e) {
                // Best effort, as the drop's own deletion: a key left behind is only space the cache's eviction
                // takes back.
            }
        }
    }

    /**
     * A store of the replica failed. Once its other stores have ended (so that none can put a chunk in the cache
     * after the replica is dropped and its keys deleted), the replica is DROPPED: when no chunk of it was stored in
     * order, every byte is still in memory and is returned for the block file (the write goes on there);
     * otherwise an IOException (the chunks stored are the cache's only copy, and the write fails). Null when a
     * recovery took the replica meanwhile (stop() returned its bytes, the failed chunk's included).
     */
    private byte[] afterStoreFailure() throws IOException {
        byte[] held;
        IOException failure;
        int chunk;
        int stored;
        synchronized (this) {
            boolean interrupted = false;
            while (state == State.WRITING && storesUnfinished > 0) {
                interrupted |= waitKeepingInterrupt();
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (state != State.WRITING) {
                return null;
            }
            failure = storeFailure;
            chunk = failedChunk;
            stored = chunksStored;
            held = chunksStored == 0 ? unstoredBytes() : null;
            state = State.DROPPED;
            releaseBuffers();
            notifyAll();
        }
        writeFailed.failed(this, failure, held != null);
        if (held == null) {
            throw new IOException("blk_" + blockId + ": chunk " + chunk + " could not be stored in the burst buffer, "
                    + stored + " were: " + failure.getMessage(), failure);
        }
        return held;
    }

    /** Every byte from chunk {@code chunksStored} on, in order (holding this; the buffers are still there). */
    private byte[] unstoredBytes() {
        byte[] rest = new byte[(int) (length - (long) chunksStored * chunkBytes)];
        int at = 0;
        for (Chunk chunk : inFlight) {
            System.arraycopy(chunk.bytes, 0, rest, at, chunk.length);
            at += chunk.length;
        }
        System.arraycopy(filling.bytes, 0, rest, at, filling.length);
        return rest;
    }

    private void releaseBuffers() {
        filling = null;
        inFlight.clear();
        spare.clear();
    }

    /**
     * hsync (HDFS's syncDataOut): waits until every full chunk handed over is in the cache. The chunk being
     * written stays in memory, as before this wait existed: a replica still being written when its DataNode dies
     * is recovered from its block file, not from the cache. The bytes held, or an IOException, when a store failed
     * (see {@link #write}); else null.
     */
    byte[] awaitStored() throws IOException {
        boolean failed;
        synchronized (this) {
            awaitInFlightAtMost(0);
            if (state != State.WRITING) {
                return null;
            }
            failed = storeFailure != null;
        }
        return failed ? afterStoreFailure() : null;
    }

    /**
     * The writer closed the replica: its last chunk goes to the cache and every store of it is waited for.
     * Idempotent. Returns the bytes held when the cache failed before any chunk was stored (see {@link #write}),
     * else null.
     */
    byte[] seal() throws IOException {
        boolean last;
        synchronized (this) {
            if (state != State.WRITING) {
                return null;
            }
            last = filling.length > 0 && storeFailure == null;
        }
        if (last) {
            byte[] held = handOver();
            if (held != null) {
                return held;
            }
        }
        byte[] held = awaitStored();
        if (held != null) {
            return held;
        }
        synchronized (this) {
            if (state == State.WRITING) {
                state = State.SEALED;
                releaseBuffers();
            }
        }
        return null;
    }

    /**
     * Takes the replica from its writer for a recovery: no byte more is accepted; once the replica's stores have
     * ended, every byte not stored in order (chunks whose store failed or came after one that did, and the chunk
     * being written) is returned for the flush; null if sealed already. The buffers stay readable until the
     * replica ends.
     */
    synchronized byte[] stop() throws IOException {
        if (state != State.WRITING) {
            return null;
        }
        state = State.STOPPED;
        notifyAll(); // a writer waiting for room gives up
        while (storesUnfinished > 0) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("waiting for blk_" + blockId + "'s chunks to be stored");
            }
        }
        return unstoredBytes();
    }

    /** Ends the replica's time in the burst buffer; false if it had ended already. */
    synchronized boolean end(State end) {
        if (state == State.FLUSHED || state == State.DROPPED) {
            return false;
        }
        state = end;
        releaseBuffers();
        notifyAll();
        return true;
    }

    /**
     * Chunk {@code chunk} for a reader: its bytes, an empty array past the end, or null when the replica has
     * left the burst buffer (the block file then holds the data). An IOException when the cache lost it.
     */
    byte[] chunkForRead(int chunk) throws IOException {
        synchronized (this) {
            if (state == State.FLUSHED || state == State.DROPPED) {
                return null;
            }
            if (chunk >= chunksStored) {
                // In memory until stored in order (a sealed replica has every chunk stored: past its end).
                int position = chunk - chunksStored;
                for (Chunk inMemory : inFlight) {
                    if (position-- == 0) {
                        return Arrays.copyOf(inMemory.bytes, inMemory.length);
                    }
                }
                return position == 0 && filling != null ? Arrays.copyOf(filling.bytes, filling.length) : new byte[0];
            }
        }
        byte[] bytes = client.get(key(chunk));
        if (bytes != null) {
            return bytes;
        }
        synchronized (this) {
            if (state == State.FLUSHED || state == State.DROPPED) {
                return null; // flushed (and deleted from the cache) while we asked
            }
        }
        throw new IOException("blk_" + blockId + ": chunk " + chunk + " is missing from the burst buffer ("
                + key(chunk) + ")");
    }

    @Override
    public synchronized String toString() {
        return "blk_" + blockId + "_" + generationStamp + " " + state + " " + length + " bytes, " + chunksStored
                + " chunks stored" + (inFlight.isEmpty() ? "" : ", " + inFlight.size() + " in flight")
                + (storeFailure == null ? "" : ", chunk " + failedChunk + "'s store failed");
    }
}
