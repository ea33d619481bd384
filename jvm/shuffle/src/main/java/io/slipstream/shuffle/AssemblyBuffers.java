package io.slipstream.shuffle;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Direct buffers for blocks that come in pieces and do not fit a buffer of the fabric's pool, kept
 * for reuse across fetchers of this process: a new direct buffer costs a page fault per 4 KiB at
 * its first write, and those faults (the kernel zeroing pages) were the plugin's largest extra
 * cost in its reducers' profile once the heap arrays were gone (session 26, docs/spark-shuffle.md).
 *
 * <p>At most {@link #CACHED_BYTES_MAX} are kept; a buffer given back beyond that is left to the GC,
 * whose cleaner frees it. A buffer is never freed explicitly: a caller that kept a view of a
 * released block reads stale bytes, never freed memory.
 */
final class AssemblyBuffers {
    static final long CACHED_BYTES_MAX = 64L << 20;
    /** Buffers are allocated in multiples of this, so blocks of similar sizes share them. */
    private static final int GRANULE_BYTES = 1 << 20;

    private static final List<ByteBuffer> FREE = new ArrayList<>();
    private static long cachedBytes;

    private AssemblyBuffers() {}

    /**
     * A direct buffer with {@code length} bytes between position 0 and its limit: a cached one of at
     * least that capacity and at most twice it, else a new one; null when direct memory is refused.
     */
    static ByteBuffer take(int length) {
        synchronized (FREE) {
            int best = -1;
            for (int i = 0; i < FREE.size(); i++) {
                int capacity = FREE.get(i).capacity();
                if (capacity >= length && capacity / 2 <= length
                        && (best < 0 || capacity < FREE.get(best).capacity())) {
                    best = i;
                }
            }
            if (best >= 0) {
                ByteBuffer buffer = FREE.remove(best);
                cachedBytes -= buffer.capacity();
                return buffer.clear().limit(length);
            }
        }
        long rounded = ((long) length + GRANULE_BYTES - 1) / GRANULE_BYTES * GRANULE_BYTES;
        try {
            return ByteBuffer.allocateDirect((int) Math.min(rounded, Integer.MAX_VALUE - 8)).limit(length);
        } catch (OutOfMemoryError directMemoryLimit) {
            return null; // -XX:MaxDirectMemorySize reached
        }
    }

    /** Gives back a buffer of {@link #take}; kept while the cache has room. */
    static void give(ByteBuffer buffer) {
        synchronized (FREE) {
            if (cachedBytes + buffer.capacity() <= CACHED_BYTES_MAX) {
                FREE.add(buffer);
                cachedBytes += buffer.capacity();
            }
        }
    }

    /** Bytes cached now (for tests). */
    static long cachedBytes() {
        synchronized (FREE) {
            return cachedBytes;
        }
    }
}
