package io.slipstream.hdfs.tiers;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads per file over a sliding window, with a limit on the files tracked. The window is cut into
 * {@link #BUCKETS} equal buckets; a file's count is the sum of its buckets that are still inside the window,
 * so the count is exact to one bucket's width. Past {@code maxPaths}, the file read least recently is dropped
 * (it is the coldest by recency, and a dropped file counts as never read, which only delays its promotion).
 * Thread-safe: the NameNode calls audit loggers from its RPC handler threads.
 */
final class AccessTracker {
    static final int BUCKETS = 10;

    private final long bucketMs;
    private final int maxPaths;
    /** Access order: the eldest entry is the file read least recently. */
    private final LinkedHashMap<String, long[]> counts;
    private long dropped;

    AccessTracker(long windowMs, int maxPaths) {
        if (windowMs < BUCKETS || maxPaths < 1) {
            throw new IllegalArgumentException("window " + windowMs + " ms, max paths " + maxPaths
                    + ": need at least " + BUCKETS + " ms and 1 path");
        }
        this.bucketMs = windowMs / BUCKETS;
        this.maxPaths = maxPaths;
        this.counts = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, long[]> eldest) {
                if (size() > AccessTracker.this.maxPaths) {
                    dropped++;
                    return true;
                }
                return false;
            }
        };
    }

    /** One read (an {@code open}) of {@code path} at {@code nowMs}. */
    synchronized void recordRead(String path, long nowMs) {
        // [0 .. BUCKETS): reads per bucket; [BUCKETS .. 2*BUCKETS): the bucket number each count belongs to.
        long[] entry = counts.computeIfAbsent(path, p -> new long[2 * BUCKETS]);
        long bucket = nowMs / bucketMs;
        int slot = (int) (bucket % BUCKETS);
        if (entry[BUCKETS + slot] != bucket) {
            entry[BUCKETS + slot] = bucket;
            entry[slot] = 0;
        }
        entry[slot]++;
    }

    /** Reads of {@code path} within the window ending at {@code nowMs}; 0 for a file not tracked. */
    synchronized long reads(String path, long nowMs) {
        long[] entry = counts.get(path);
        return entry == null ? 0 : sum(entry, nowMs);
    }

    /** The file was deleted: forget it. */
    synchronized void remove(String path) {
        counts.remove(path);
    }

    /** The file was renamed: its reads follow it. */
    synchronized void rename(String from, String to) {
        long[] entry = counts.remove(from);
        if (entry != null) {
            counts.put(to, entry);
        }
    }

    /** Files with at least {@code minReads} reads in the window, most read first, at most {@code limit}. */
    synchronized List<Map.Entry<String, Long>> hottest(long minReads, int limit, long nowMs) {
        List<Map.Entry<String, Long>> hot = new ArrayList<>();
        // A plain iteration does not change the access order (only get/put do).
        for (Map.Entry<String, long[]> e : counts.entrySet()) {
            long reads = sum(e.getValue(), nowMs);
            if (reads >= minReads) {
                hot.add(Map.entry(e.getKey(), reads));
            }
        }
        hot.sort(Map.Entry.<String, Long>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()));
        return hot.size() > limit ? new ArrayList<>(hot.subList(0, limit)) : hot;
    }

    synchronized int size() {
        return counts.size();
    }

    /** Files dropped because the limit was reached, since the start. */
    synchronized long dropped() {
        return dropped;
    }

    private long sum(long[] entry, long nowMs) {
        long current = nowMs / bucketMs;
        long total = 0;
        for (int slot = 0; slot < BUCKETS; slot++) {
            if (current - entry[BUCKETS + slot] < BUCKETS) {
                total += entry[slot];
            }
        }
        return total;
    }
}
