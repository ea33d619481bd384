package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.util.Arrays;

/**
 * One replica's data while it lives in the burst buffer: chunks 0..{@code chunksStored-1} in the cache under
 * {@link #key}, the chunk being written in memory (so that a reader of a replica being written, after
 * hflush, sees every byte written). One writer (HDFS's BlockReceiver) appends; readers and the flush read.
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
    private final BurstBufferClient client;
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
    private byte[] partial;
    private int partialLength;
    private int chunksStored;
    private long length;
    /** A chunk is on its way to the cache: its bytes are still {@link #partial}'s and must not change. */
    private boolean storing;

    /** Serialises flushes of this replica (the flusher's and a recovery's). */
    final Object flushLock = new Object();

    BurstBufferPending(String keyBase, String bpid, long blockId, long generationStamp, int chunkBytes,
            BurstBufferClient client, long reservedBytes,
            WriteFailed writeFailed) {
        this.writeFailed = writeFailed;
        this.keyBase = keyBase;
        this.bpid = bpid;
        this.blockId = blockId;
        this.generationStamp = generationStamp;
        this.chunkBytes = chunkBytes;
        this.client = client;
        this.reservedBytes = reservedBytes;
        this.partial = new byte[chunkBytes];
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

    /**
     * The writer's bytes: into the chunk in memory, each full chunk stored in the cache before going on. If the
     * cache fails before the replica's first chunk is stored, the replica leaves the burst buffer (DROPPED) and
     * every byte written so far is returned, for the block file; null otherwise. An IOException if the cache
     * fails later (chunks are then lost with it, and the replica's write fails).
     */
    byte[] write(byte[] b, int off, int len) throws IOException {
        while (len > 0) {
            int taken;
            boolean full;
            synchronized (this) {
                if (state != State.WRITING) {
                    throw new IOException("blk_" + blockId + ": no longer written through the burst buffer (" + state
                            + ")");
                }
                taken = Math.min(len, chunkBytes - partialLength);
                System.arraycopy(b, off, partial, partialLength, taken);
                partialLength += taken;
                length += taken;
                full = partialLength == chunkBytes;
                storing = full;
            }
            off += taken;
            len -= taken;
            if (full) {
                byte[] held = storeChunk();
                if (held != null) {
                    byte[] all = Arrays.copyOf(held, held.length + len);
                    System.arraycopy(b, off, all, held.length, len);
                    return all;
                }
            }
        }
        return null;
    }

    /**
     * Stores the chunk in memory (outside the lock: readers may copy it meanwhile) and starts the next. On a
     * failure before any chunk was stored, the bytes held (see {@link #write}); null when stored.
     */
    private byte[] storeChunk() throws IOException {
        int chunk;
        int bytes;
        synchronized (this) {
            chunk = chunksStored;
            bytes = partialLength;
        }
        boolean stored = false;
        try {
            client.set(key(chunk), partial, 0, bytes);
            stored = true;
            return null;
        } catch (IOException e) {
            // The bytes held, for the block file, when no chunk of the replica reached the cache.
            byte[] held = chunk == 0 ? Arrays.copyOf(partial, bytes) : null;
            writeFailed.failed(this, e, held != null);
            if (held != null) {
                return held;
            }
            throw e;
        } finally {
            synchronized (this) {
                storing = false;
                if (stored) {
                    chunksStored++;
                    partialLength = 0;
                } else if (state == State.WRITING) {
                    state = State.DROPPED;
                    partial = null;
                }
                notifyAll();
            }
        }
    }

    /**
     * The writer closed the replica: its last chunk goes to the cache. Idempotent. Returns the bytes held
     * when the cache failed before any chunk was stored (see {@link #write}), else null.
     */
    byte[] seal() throws IOException {
        boolean last;
        synchronized (this) {
            if (state != State.WRITING) {
                return null;
            }
            last = partialLength > 0;
            storing = last;
        }
        if (last) {
            byte[] held = storeChunk();
            if (held != null) {
                return held;
            }
        }
        synchronized (this) {
            if (state == State.WRITING) {
                state = State.SEALED;
                partial = null;
            }
        }
        return null;
    }

    /**
     * Takes the replica from its writer for a recovery: no byte more is accepted, and the chunk in memory (bytes
     * the writer handed over but that did not fill a chunk) is returned for the flush; null if sealed already.
     */
    synchronized byte[] stop() throws IOException {
        if (state != State.WRITING) {
            return null;
        }
        state = State.STOPPED;
        while (storing) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("waiting for blk_" + blockId + "'s chunk to be stored");
            }
        }
        byte[] rest = Arrays.copyOf(partial, partialLength);
        partial = null;
        return rest;
    }

    /** Ends the replica's time in the burst buffer; false if it had ended already. */
    synchronized boolean end(State end) {
        if (state == State.FLUSHED || state == State.DROPPED) {
            return false;
        }
        state = end;
        partial = null;
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
            if (chunk > chunksStored || (chunk == chunksStored && partial == null)) {
                return new byte[0];
            }
            if (chunk == chunksStored) {
                return Arrays.copyOf(partial, partialLength);
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
                + " chunks stored";
    }
}
