package io.slipstream.shuffle;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The map-output prefetch cache: whole map outputs, read into registered memory right after the
 * map task commits them, so that fetches are answered with one memory copy instead of an index
 * and a data file read. Bounded in bytes (least recently used out first); entries live in the
 * fabric's registered pool, so the cache counts against the node's buffer cap.
 *
 * <p>An entry being copied from while it is evicted stays alive until the copy ends (a count of
 * readers): eviction never frees memory under a reader.
 */
public final class MapOutputCache implements AutoCloseable {
    private final FabricNode node;
    private final long capacityBytes;
    private final long entryBytesMax;
    private final LinkedHashMap<Key, Entry> entries = new LinkedHashMap<>(64, 0.75f, true);
    private long cachedBytes;
    private boolean closed;
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();
    private final AtomicLong inserted = new AtomicLong();

    private record Key(int shuffleId, long mapId) {}

    private static final class Entry {
        final FabricBuffer data;
        final long[] partitionOffsets;
        int readers;
        boolean evicted;

        Entry(FabricBuffer data, long[] partitionOffsets) {
            this.data = data;
            this.partitionOffsets = partitionOffsets;
        }
    }

    /** {@code capacityBytes} 0 disables the cache. A single map output above a quarter of it is not cached. */
    public MapOutputCache(FabricNode node, long capacityBytes) {
        if (capacityBytes < 0) {
            throw new IllegalArgumentException("negative cache capacity");
        }
        this.node = node;
        this.capacityBytes = capacityBytes;
        this.entryBytesMax = Math.min(capacityBytes / 4, Integer.MAX_VALUE - 64);
    }

    /**
     * Reads a committed map output into the cache (called off the map task's thread). Returns
     * whether it was cached: not if too large, if the pool has no room, or if the file is gone.
     */
    public boolean prefetch(int shuffleId, long mapId, MapOutputSource source) throws IOException {
        if (capacityBytes == 0) {
            return false;
        }
        MapOutputSource.MapOutputFile output = source.mapOutput(shuffleId, mapId);
        if (output == null) {
            return false;
        }
        long[] offsets = output.partitionOffsets();
        long bytes = offsets[offsets.length - 1];
        if (bytes <= 0 || bytes > entryBytesMax) {
            return false;
        }
        synchronized (this) {
            if (closed || entries.containsKey(new Key(shuffleId, mapId))) {
                return false;
            }
            makeRoom(bytes);
        }
        FabricBuffer buffer;
        try {
            buffer = node.tryAllocate((int) bytes);
        } catch (FabricException e) {
            return false; // the pool is busy with transfers: they come first
        }
        try (FileChannel channel = FileChannel.open(output.dataFile(), StandardOpenOption.READ)) {
            ByteBuffer view = buffer.byteBuffer();
            long position = 0;
            while (view.hasRemaining()) {
                int read = channel.read(view, position);
                if (read < 0) {
                    throw new IOException("map output " + output.dataFile() + " shorter than its index says");
                }
                position += read;
            }
        } catch (IOException | RuntimeException e) {
            buffer.release();
            throw e;
        }
        synchronized (this) {
            Key key = new Key(shuffleId, mapId);
            if (closed || entries.containsKey(key)) {
                buffer.release();
                return false;
            }
            makeRoom(bytes);
            entries.put(key, new Entry(buffer, offsets.clone()));
            cachedBytes += bytes;
        }
        inserted.incrementAndGet();
        return true;
    }

    /**
     * Copies up to {@code maxBytes} of {@code block} from {@code offset} into {@code out}; returns
     * the block's length, or -1 if the block is not cached (nothing copied).
     */
    public long copy(MapOutputBlock block, long offset, int maxBytes, ByteBuffer out) {
        Entry entry;
        synchronized (this) {
            entry = entries.get(new Key(block.shuffleId(), block.mapId()));
            if (entry == null || block.partition() + 1 >= entry.partitionOffsets.length) {
                misses.incrementAndGet();
                return -1;
            }
            entry.readers++;
        }
        try {
            long start = entry.partitionOffsets[block.partition()];
            long blockBytes = entry.partitionOffsets[block.partition() + 1] - start;
            int copied = (int) Math.max(0, Math.min(maxBytes, blockBytes - offset));
            ByteBuffer source = entry.data.byteBuffer();
            source.position((int) (start + offset)).limit((int) (start + offset) + copied);
            out.put(source);
            hits.incrementAndGet();
            return blockBytes;
        } finally {
            synchronized (this) {
                entry.readers--;
                if (entry.evicted && entry.readers == 0) {
                    entry.data.release();
                }
            }
        }
    }

    /** The length of a cached block, or -1. */
    public synchronized long blockBytes(MapOutputBlock block) {
        Entry entry = entries.get(new Key(block.shuffleId(), block.mapId()));
        if (entry == null || block.partition() + 1 >= entry.partitionOffsets.length) {
            return -1;
        }
        return entry.partitionOffsets[block.partition() + 1] - entry.partitionOffsets[block.partition()];
    }

    /** Drops every map output of a shuffle (the engine unregistered it). */
    public void removeShuffle(int shuffleId) {
        List<Entry> dropped = new ArrayList<>();
        synchronized (this) {
            for (Iterator<Map.Entry<Key, Entry>> it = entries.entrySet().iterator(); it.hasNext(); ) {
                Map.Entry<Key, Entry> next = it.next();
                if (next.getKey().shuffleId() == shuffleId) {
                    it.remove();
                    dropped.add(next.getValue());
                }
            }
            dropped.forEach(this::evict);
        }
    }

    public synchronized long cachedBytes() {
        return cachedBytes;
    }

    public synchronized int entries() {
        return entries.size();
    }

    public long hits() {
        return hits.get();
    }

    public long misses() {
        return misses.get();
    }

    public long inserted() {
        return inserted.get();
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    @Override
    public synchronized void close() {
        closed = true;
        for (Entry entry : entries.values()) {
            evict(entry);
        }
        entries.clear();
    }

    /** Caller holds the lock. */
    private void makeRoom(long bytes) {
        Iterator<Map.Entry<Key, Entry>> eldest = entries.entrySet().iterator();
        while (cachedBytes + bytes > capacityBytes && eldest.hasNext()) {
            Entry entry = eldest.next().getValue();
            eldest.remove();
            evict(entry);
        }
    }

    /** Caller holds the lock; the entry is already out of the map. */
    private void evict(Entry entry) {
        cachedBytes -= entry.partitionOffsets[entry.partitionOffsets.length - 1];
        entry.evicted = true;
        if (entry.readers == 0) {
            entry.data.release();
        }
    }
}
