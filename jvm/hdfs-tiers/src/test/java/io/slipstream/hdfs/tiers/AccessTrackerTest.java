package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

class AccessTrackerTest {
    @Test
    void readsAreCountedOverTheSlidingWindowOnly() {
        AccessTracker tracker = new AccessTracker(10_000, 10); // ten buckets of 1 s
        tracker.recordRead("/a", 0);
        tracker.recordRead("/a", 500);
        tracker.recordRead("/a", 5_000);
        assertEquals(3, tracker.reads("/a", 9_999));
        // At 10 s the first bucket (0 .. 1 s) leaves the window; the read at 5 s stays until 15 s.
        assertEquals(1, tracker.reads("/a", 10_000));
        assertEquals(1, tracker.reads("/a", 14_999));
        assertEquals(0, tracker.reads("/a", 15_000));
        // A bucket reused after a full turn starts from zero, not from the old count.
        tracker.recordRead("/a", 20_000);
        assertEquals(1, tracker.reads("/a", 20_000));
        assertEquals(0, tracker.reads("/never", 20_000));
    }

    @Test
    void pastTheLimitTheFileReadLeastRecentlyIsDropped() {
        AccessTracker tracker = new AccessTracker(10_000, 3);
        tracker.recordRead("/a", 0);
        tracker.recordRead("/b", 1);
        tracker.recordRead("/c", 2);
        tracker.recordRead("/a", 3); // /b is now the least recently read
        tracker.recordRead("/d", 4);
        assertEquals(3, tracker.size());
        assertEquals(1, tracker.dropped());
        assertEquals(0, tracker.reads("/b", 5));
        assertEquals(2, tracker.reads("/a", 5));
        assertEquals(1, tracker.reads("/d", 5));
    }

    @Test
    void hottestListsFilesAtTheThresholdMostReadFirstWithinTheLimit() {
        AccessTracker tracker = new AccessTracker(10_000, 10);
        for (int i = 0; i < 5; i++) {
            tracker.recordRead("/five", i);
        }
        for (int i = 0; i < 3; i++) {
            tracker.recordRead("/three", i);
            tracker.recordRead("/three-too", i);
        }
        tracker.recordRead("/one", 0);
        List<Map.Entry<String, Long>> hot = tracker.hottest(3, 10, 100);
        assertEquals(List.of(Map.entry("/five", 5L), Map.entry("/three", 3L), Map.entry("/three-too", 3L)), hot);
        assertEquals(List.of(Map.entry("/five", 5L)), tracker.hottest(3, 1, 100));
    }

    @Test
    void theAuditLoggerCountsSuccessfulOpensAndFollowsRenamesAndDeletes() {
        AccessAuditLogger logger = new AccessAuditLogger();
        logger.initialize(new Configuration(false));
        InetAddress loopback = InetAddress.getLoopbackAddress();
        logger.logAuditEvent(true, "u", loopback, "open", "/f", null, null);
        logger.logAuditEvent(true, "u", loopback, "open", "/f", null, null);
        logger.logAuditEvent(false, "u", loopback, "open", "/f", null, null); // refused: not a read
        logger.logAuditEvent(true, "u", loopback, "listStatus", "/f", null, null);
        long now = System.currentTimeMillis();
        assertEquals(2, logger.tracker().reads("/f", now));
        logger.logAuditEvent(true, "u", loopback, "rename", "/f", "/g", null);
        assertEquals(0, logger.tracker().reads("/f", now));
        assertEquals(2, logger.tracker().reads("/g", now));
        logger.logAuditEvent(true, "u", loopback, "delete", "/g", null, null);
        assertEquals(0, logger.tracker().size());
    }

    @Test
    void aWindowShorterThanItsBucketsIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new AccessTracker(AccessTracker.BUCKETS - 1, 10));
        assertThrows(IllegalArgumentException.class, () -> new AccessTracker(10_000, 0));
    }
}
