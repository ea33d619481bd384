package io.slipstream.hdfs.tiers;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The SSD bytes the tiering service's moves have changed on SSD that the DataNodes' storage reports may not show
 * yet. The NameNode's listing shows a replica moved as soon as a DataNode reports the block (incremental block
 * report), but the SSD tier's use comes from heartbeats: until the next heartbeat of each DataNode, the reported
 * use still counts an evicted file's old SSD replicas (and not yet a promoted file's new ones). Without this, a
 * decision in that gap sees the old, high use, no longer sees the moved file as pending, and evicts more files
 * than the low-water mark needs.
 *
 * <p>For each file the service asked to move it remembers the file's SSD bytes the reports are known to include
 * ({@code reported}) and the SSD bytes the last listing showed ({@code seen}), with the time of the scan that
 * first showed them. A change counts as reported once every live, non-stale DataNode with SSD storage has sent a
 * heartbeat after that scan (the NameNode's last-heartbeat times, on its monotonic clock): a DataNode sends its
 * heartbeats and block reports from one thread, and deletes a moved replica's files before it reports the move, so
 * a heartbeat the NameNode receives after the listing showed the move was computed after the deletion. Until then
 * {@code reported - seen} bytes are "moved, maybe not in the reports yet" (off SSD for evictions, onto it for
 * promotions). A file is forgotten once its move is complete and reported, when it leaves the listing, or when
 * its policy is no longer the one the service set.
 *
 * <p>A change may also be in the reports already (a heartbeat between the block report and the listing), so the
 * figures are bounds, and each decision takes the one that moves less (TieringPlanner): eviction counts the moves
 * off SSD as unreported, promotion counts them as reported. Memory is bounded: at most {@code maxFiles} files (the
 * files of the last batches), the oldest asked forgotten first.
 */
final class UnreportedMoves {
    /** Files of how many full batches are remembered (times {@code tiering.batch.maxFiles}). */
    static final int BATCHES_REMEMBERED = 8;
    /** No change waiting for a heartbeat. */
    private static final long NONE = Long.MIN_VALUE;

    /** Bytes moved off SSD and onto it per the listing that the storage reports may not show yet. */
    record Bytes(long offSsdBytes, long onSsdBytes) {
        static final Bytes NONE = new Bytes(0, 0);

        boolean isZero() {
            return offSsdBytes == 0 && onSsdBytes == 0;
        }
    }

    private static final class Entry {
        byte policy;
        long reportedSsdBytes;
        long seenSsdBytes;
        long changeSeenMs = NONE;
    }

    private final int maxFiles;
    /** Insertion order is the order asked (a file asked again moves to the end): the first is the oldest. */
    private final LinkedHashMap<String, Entry> entries = new LinkedHashMap<>();
    private long forgottenEarly;

    UnreportedMoves(int maxFiles) {
        if (maxFiles < 1) {
            throw new IllegalArgumentException("UnreportedMoves: maxFiles must be at least 1, got " + maxFiles);
        }
        this.maxFiles = maxFiles;
    }

    /**
     * The service set {@code policy} (HOT to evict, ONE_SSD or ALL_SSD to promote) on the file, which had
     * {@code ssdBytes} on SSD in the listing the decision used. A file asked again keeps what is known of its
     * reports.
     */
    void asked(String path, byte policy, long ssdBytes) {
        Entry entry = entries.remove(path);
        if (entry == null) {
            entry = new Entry();
            entry.reportedSsdBytes = ssdBytes;
            entry.seenSsdBytes = ssdBytes;
        }
        entry.policy = policy;
        entries.put(path, entry);
        while (entries.size() > maxFiles) {
            Iterator<Map.Entry<String, Entry>> oldest = entries.entrySet().iterator();
            oldest.next();
            oldest.remove();
            forgottenEarly++;
        }
    }

    /**
     * Brings each remembered file up to date and returns the SSD bytes moved off and onto SSD that the reports
     * may not show yet.
     *
     * @param files the listing of this decision, by path
     * @param reportsSinceMs the oldest last-heartbeat time, among the live, non-stale DataNodes with SSD storage,
     *     of the storage reports this decision uses (read before the listing), on the NameNode's monotonic clock
     * @param scanDoneMs when the listing was complete, on the same clock
     */
    Bytes update(Map<String, TieringPlanner.FileTiers> files, long reportsSinceMs, long scanDoneMs) {
        long off = 0;
        long on = 0;
        Iterator<Map.Entry<String, Entry>> it = entries.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<String, Entry> e = it.next();
            Entry entry = e.getValue();
            if (entry.changeSeenMs != NONE && reportsSinceMs > entry.changeSeenMs) {
                entry.reportedSsdBytes = entry.seenSsdBytes; // a heartbeat after the scan that saw it
                entry.changeSeenMs = NONE;
            }
            TieringPlanner.FileTiers file = files.get(e.getKey());
            if (file == null || file.policy() != entry.policy) {
                it.remove(); // deleted, renamed, past the scan's limit, or given another policy
                continue;
            }
            if (file.ssdBytes() != entry.seenSsdBytes) {
                entry.seenSsdBytes = file.ssdBytes();
                entry.changeSeenMs = scanDoneMs; // an earlier change not yet reported now waits for this one too
            }
            boolean complete = entry.policy == TieringPlanner.HOT ? file.ssdBytes() == 0 : file.promoteBytes() == 0;
            if (complete && entry.changeSeenMs == NONE) {
                it.remove();
                continue;
            }
            long change = entry.reportedSsdBytes - entry.seenSsdBytes;
            if (change > 0) {
                off += change;
            } else {
                on -= change;
            }
        }
        return new Bytes(off, on);
    }

    int size() {
        return entries.size();
    }

    /** Files forgotten at the limit before their moves were complete and reported. */
    long forgottenEarly() {
        return forgottenEarly;
    }
}
