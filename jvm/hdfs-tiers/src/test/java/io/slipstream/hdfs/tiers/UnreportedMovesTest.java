package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TieringPlanner.ALL_SSD;
import static io.slipstream.hdfs.tiers.TieringPlanner.HOT;
import static io.slipstream.hdfs.tiers.TieringPlanner.UNSPECIFIED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The moves the storage reports do not show yet, with the planner (no cluster): the decisions between a move
 * and the heartbeats that report it, as in TieringServiceClusterTest's cluster, where they evicted six files
 * where four reached the low-water mark.
 */
class UnreportedMovesTest {
    private static final long MB = 1 << 20;
    /** Hot at 3 reads; SSD high-water 80 %, low-water 50 % of 100 MB; at most 10 files and 100 MB per batch. */
    private static final TieringPlanner PLANNER = new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB, ALL_SSD);
    private static final long CAPACITY = 100 * MB;

    /** A file as the service sees it under ALL_SSD: a promotion moves every replica off SSD onto it. */
    private static TieringPlanner.FileTiers file(String path, long ssdMb, long offMb, byte policy, long reads,
            long modified) {
        return new TieringPlanner.FileTiers(path, ssdMb * MB, offMb * MB, offMb * MB, policy, reads, modified);
    }

    private static Map<String, TieringPlanner.FileTiers> byPath(TieringPlanner.FileTiers... files) {
        Map<String, TieringPlanner.FileTiers> map = new LinkedHashMap<>();
        for (TieringPlanner.FileTiers f : files) {
            map.put(f.path(), f);
        }
        return map;
    }

    private static List<String> paths(List<TieringPlanner.Move> moves) {
        return moves.stream().map(TieringPlanner.Move::path).toList();
    }

    private static void askAll(UnreportedMoves moves, TieringPlanner.Batch batch,
            Map<String, TieringPlanner.FileTiers> listing) {
        for (TieringPlanner.Move m : batch.evictions()) {
            moves.asked(m.path(), HOT, listing.get(m.path()).ssdBytes());
        }
        for (TieringPlanner.Move m : batch.promotions()) {
            moves.asked(m.path(), ALL_SSD, listing.get(m.path()).ssdBytes());
        }
    }

    @Test
    void aReportThatLagsTheMovesDoesNotEvictMore() {
        UnreportedMoves moves = new UnreportedMoves(10);
        // Decision 1 (reports from t=0, listing done at t=10): 90 of 100 MB in use, 40 MB must go.
        Map<String, TieringPlanner.FileTiers> first = byPath(file("/a", 10, 0, UNSPECIFIED, 0, 1),
                file("/b", 10, 0, UNSPECIFIED, 0, 2), file("/c", 10, 0, UNSPECIFIED, 0, 3),
                file("/d", 10, 0, UNSPECIFIED, 0, 4), file("/e", 10, 0, UNSPECIFIED, 0, 5),
                file("/f", 10, 0, UNSPECIFIED, 0, 6), file("/g", 10, 0, UNSPECIFIED, 0, 7),
                file("/h", 10, 0, UNSPECIFIED, 0, 8), file("/i", 10, 0, UNSPECIFIED, 0, 9));
        assertEquals(0, moves.update(first, 0, 10).offSsdBytes());
        TieringPlanner.Batch one = PLANNER.plan(CAPACITY, 90 * MB, UnreportedMoves.Bytes.NONE, List.copyOf(first.values()), false);
        assertEquals(List.of("/a", "/b", "/c", "/d"), paths(one.evictions()));
        askAll(moves, one, first);

        // Decision 2: /a and /b have moved in the listing (done at t=20), /c and /d not yet; the heartbeats are
        // still those of t=5, before the listing of decision 1: the reported use is still 90 MB.
        Map<String, TieringPlanner.FileTiers> second = new LinkedHashMap<>(first);
        second.put("/a", file("/a", 0, 10, HOT, 0, 1));
        second.put("/b", file("/b", 0, 10, HOT, 0, 2));
        second.put("/c", file("/c", 10, 0, HOT, 0, 3));
        second.put("/d", file("/d", 10, 0, HOT, 0, 4));
        UnreportedMoves.Bytes unreported = moves.update(second, 5, 20);
        assertEquals(new UnreportedMoves.Bytes(20 * MB, 0), unreported);
        TieringPlanner.Batch two = PLANNER.plan(CAPACITY, 90 * MB, unreported, List.copyOf(second.values()),
                one.evicting());
        assertTrue(two.evictions().isEmpty(), "evicted again: " + two);
        assertTrue(two.evicting(), "the moves are not all reported: the next decision looks again");
        assertEquals(50 * MB, two.ssdProjectedBytes());
        // What the planner did without the remembered moves: two more files, ten megabytes under the mark.
        TieringPlanner.Batch blind = PLANNER.plan(CAPACITY, 90 * MB, List.copyOf(second.values()));
        assertEquals(List.of("/e", "/f"), paths(blind.evictions()));
    }

    @Test
    void aReportThatCaughtUpIsNotSubtractedTwice() {
        UnreportedMoves moves = new UnreportedMoves(10);
        Map<String, TieringPlanner.FileTiers> asked = byPath(file("/a", 10, 0, UNSPECIFIED, 0, 1),
                file("/b", 20, 0, UNSPECIFIED, 0, 2), file("/c", 10, 0, UNSPECIFIED, 0, 3));
        moves.update(asked, 0, 10);
        moves.asked("/a", HOT, 10 * MB);
        moves.asked("/b", HOT, 20 * MB);
        // Listing at t=20: /a moved, /b half moved (one of its two replicas).
        Map<String, TieringPlanner.FileTiers> moved = byPath(file("/a", 0, 10, HOT, 0, 1),
                file("/b", 10, 10, HOT, 0, 2), file("/c", 10, 0, UNSPECIFIED, 0, 3));
        assertEquals(20 * MB, moves.update(moved, 15, 20).offSsdBytes(), "10 MB of /a and 10 of /b moved, not reported");
        // A heartbeat of every DataNode after t=20 (the reports now show 20 MB less): nothing is left to subtract,
        // /a is forgotten; /b, whose second replica is still to move, stays remembered.
        assertEquals(0, moves.update(moved, 21, 30).offSsdBytes());
        assertEquals(1, moves.size());
        TieringPlanner.Batch batch = PLANNER.plan(CAPACITY, 70 * MB, UnreportedMoves.Bytes.NONE, List.copyOf(moved.values()), false);
        assertEquals(60 * MB, batch.ssdProjectedBytes(), "70 reported, /b's pending 10 still leaving");
        // /b's second replica moves (listing at t=40), reported after t=40, then /b is forgotten too.
        Map<String, TieringPlanner.FileTiers> done = byPath(file("/a", 0, 10, HOT, 0, 1),
                file("/b", 0, 20, HOT, 0, 2), file("/c", 10, 0, UNSPECIFIED, 0, 3));
        assertEquals(10 * MB, moves.update(done, 35, 40).offSsdBytes());
        assertEquals(10 * MB, moves.update(done, 40, 50).offSsdBytes(), "a heartbeat at the listing's time is not after it");
        assertEquals(0, moves.update(done, 41, 60).offSsdBytes());
        assertEquals(0, moves.size());
    }

    @Test
    void aMoveCountedTwiceStopsEvictionOneDecisionEarlyNotForGood() {
        TieringPlanner twoPerBatch = new TieringPlanner(3, 0.8, 0.5, 2, 100 * MB, ALL_SSD);
        UnreportedMoves moves = new UnreportedMoves(10);
        Map<String, TieringPlanner.FileTiers> first = byPath(file("/a", 10, 0, UNSPECIFIED, 0, 1),
                file("/b", 10, 0, UNSPECIFIED, 0, 2), file("/c", 10, 0, UNSPECIFIED, 0, 3),
                file("/d", 10, 0, UNSPECIFIED, 0, 4), file("/e", 10, 0, UNSPECIFIED, 0, 5));
        TieringPlanner.Batch one = twoPerBatch.plan(CAPACITY, 90 * MB, UnreportedMoves.Bytes.NONE, List.copyOf(first.values()), false);
        assertEquals(List.of("/a", "/b"), paths(one.evictions()), "the batch's file limit");
        askAll(moves, one, first);
        // /a and /b moved, and a heartbeat at t=15 already reported it (70 MB), before the listing done at t=20
        // showed it: the remembered 20 MB are taken off a second time (50 MB: at the low-water mark).
        Map<String, TieringPlanner.FileTiers> second = new LinkedHashMap<>(first);
        second.put("/a", file("/a", 0, 10, HOT, 0, 1));
        second.put("/b", file("/b", 0, 10, HOT, 0, 2));
        UnreportedMoves.Bytes unreported = moves.update(second, 15, 20);
        TieringPlanner.Batch two = twoPerBatch.plan(CAPACITY, 70 * MB, unreported, List.copyOf(second.values()),
                one.evicting());
        assertTrue(two.evictions().isEmpty());
        // Nor is that room promoted into: promotion takes the moves off SSD as reported (70 MB), and 15 MB more
        // would pass the high-water mark.
        List<TieringPlanner.FileTiers> withHot = new java.util.ArrayList<>(second.values());
        withHot.add(file("/warm", 0, 15, UNSPECIFIED, 5, 1));
        assertTrue(twoPerBatch.plan(CAPACITY, 70 * MB, unreported, withHot, false).promotions().isEmpty());
        // The next decision (a heartbeat after t=20): 70 MB, under the high-water mark, and still evicting.
        unreported = moves.update(second, 25, 30);
        assertEquals(UnreportedMoves.Bytes.NONE, unreported);
        TieringPlanner.Batch three = twoPerBatch.plan(CAPACITY, 70 * MB, unreported, List.copyOf(second.values()),
                two.evicting());
        assertEquals(List.of("/c", "/d"), paths(three.evictions()));
        assertTrue(three.evicting(), "its moves are not reported yet");
        assertTrue(twoPerBatch.plan(CAPACITY, 70 * MB, UnreportedMoves.Bytes.NONE, List.copyOf(second.values()), false).isEmpty(),
                "between the marks, a decision that was not evicting starts nothing");
        // Moved and reported: 50 MB, at the low-water mark, eviction ends.
        Map<String, TieringPlanner.FileTiers> third = new LinkedHashMap<>(second);
        third.put("/c", file("/c", 0, 10, HOT, 0, 3));
        third.put("/d", file("/d", 0, 10, HOT, 0, 4));
        askAll(moves, three, second);
        assertEquals(20 * MB, moves.update(third, 35, 40).offSsdBytes());
        unreported = moves.update(third, 45, 50);
        TieringPlanner.Batch four = twoPerBatch.plan(CAPACITY, 50 * MB, unreported, List.copyOf(third.values()),
                three.evicting());
        assertTrue(four.isEmpty());
        assertTrue(!four.evicting(), "at the low-water mark with every move reported");
    }

    @Test
    void aPromotionsLagCountsTheNewReplicasUntilReported() {
        UnreportedMoves moves = new UnreportedMoves(10);
        moves.update(byPath(file("/p", 0, 20, UNSPECIFIED, 9, 1)), 0, 10);
        moves.asked("/p", ALL_SSD, 0);
        // The listing shows /p on SSD (20 MB more on SSD), the reports still say 65 MB.
        Map<String, TieringPlanner.FileTiers> promoted = byPath(file("/p", 20, 0, ALL_SSD, 9, 1),
                file("/warm", 0, 10, UNSPECIFIED, 5, 1), file("/cold", 10, 0, UNSPECIFIED, 0, 1));
        UnreportedMoves.Bytes unreported = moves.update(promoted, 5, 20);
        assertEquals(new UnreportedMoves.Bytes(0, 20 * MB), unreported);
        TieringPlanner.Batch lagging = PLANNER.plan(CAPACITY, 65 * MB, unreported, List.copyOf(promoted.values()),
                false);
        assertTrue(lagging.evictions().isEmpty(), "eviction takes the new replicas as reported (65 MB at the least)");
        assertTrue(lagging.promotions().isEmpty(), "/warm would take SSD to 95 MB if they are not: " + lagging);
        assertEquals(List.of("/warm"), paths(PLANNER.plan(CAPACITY, 65 * MB, List.copyOf(promoted.values()))
                .promotions()), "without the remembered promotion, /warm goes past the high-water mark");
        // Reported (a heartbeat after t=20 shows 85 MB): counted once, forgotten, and now past the high-water mark.
        assertEquals(UnreportedMoves.Bytes.NONE, moves.update(promoted, 25, 30));
        TieringPlanner.Batch reported = PLANNER.plan(CAPACITY, 85 * MB, UnreportedMoves.Bytes.NONE,
                List.copyOf(promoted.values()), false);
        assertEquals(List.of("/cold"), paths(reported.evictions()));
        assertTrue(reported.promotions().isEmpty(), reported.toString());
        assertEquals(0, moves.size());
    }

    @Test
    void aChangeSeenBeforeTheLastWaitsForTheLast() {
        UnreportedMoves moves = new UnreportedMoves(10);
        moves.asked("/b", HOT, 20 * MB);
        assertEquals(10 * MB, moves.update(byPath(file("/b", 10, 10, HOT, 0, 1)), 0, 10).offSsdBytes());
        // The second replica moves before a heartbeat after t=10: both wait for one after t=20.
        assertEquals(20 * MB, moves.update(byPath(file("/b", 0, 20, HOT, 0, 1)), 5, 20).offSsdBytes());
        assertEquals(20 * MB, moves.update(byPath(file("/b", 0, 20, HOT, 0, 1)), 15, 30).offSsdBytes());
        assertEquals(0, moves.update(byPath(file("/b", 0, 20, HOT, 0, 1)), 25, 40).offSsdBytes());
    }

    @Test
    void aFileDeletedOrGivenAnotherPolicyIsForgotten() {
        UnreportedMoves moves = new UnreportedMoves(10);
        moves.asked("/gone", HOT, 10 * MB);
        moves.asked("/user-cold", HOT, 10 * MB);
        moves.asked("/again", HOT, 10 * MB);
        Map<String, TieringPlanner.FileTiers> listing = byPath(
                file("/user-cold", 0, 10, org.apache.hadoop.hdfs.protocol.HdfsConstants.COLD_STORAGE_POLICY_ID, 0, 1),
                file("/again", 10, 0, HOT, 0, 1));
        assertEquals(0, moves.update(listing, 0, 10).offSsdBytes());
        assertEquals(1, moves.size(), "only /again, still pending");
        // Asked again the other way (promoted after the eviction): what is known of its reports stays.
        moves.update(byPath(file("/again", 0, 10, HOT, 0, 1)), 5, 20);
        moves.asked("/again", ALL_SSD, 0);
        assertEquals(10 * MB, moves.update(byPath(file("/again", 0, 10, ALL_SSD, 9, 1)), 15, 30).offSsdBytes(),
                "its eviction is still not in the reports");
        assertEquals(0, moves.update(byPath(file("/again", 0, 10, ALL_SSD, 9, 1)), 25, 40).offSsdBytes());
        assertEquals(1, moves.size(), "its promotion is still to move");
    }

    @Test
    void atTheLimitTheOldestAskedAreForgotten() {
        UnreportedMoves moves = new UnreportedMoves(3);
        Map<String, TieringPlanner.FileTiers> moved = new LinkedHashMap<>();
        for (int i = 0; i < 5; i++) {
            moves.asked("/f" + i, HOT, 10 * MB);
            moved.put("/f" + i, file("/f" + i, 0, 10, HOT, 0, i));
        }
        assertEquals(3, moves.size());
        assertEquals(2, moves.forgottenEarly());
        assertEquals(30 * MB, moves.update(moved, 0, 10).offSsdBytes(), "the three newest, /f2 to /f4");
        moves.asked("/f2", HOT, 0); // asked again: the newest now, /f3 the oldest
        moves.asked("/f5", HOT, 10 * MB);
        moved.put("/f5", file("/f5", 10, 0, HOT, 0, 5));
        assertEquals(3, moves.size());
        assertEquals(20 * MB, moves.update(moved, 5, 20).offSsdBytes(), "/f3 forgotten; /f4 and /f2 moved, /f5 pending");
        assertThrows(IllegalArgumentException.class, () -> new UnreportedMoves(0));
    }

    @Test
    void aOneSsdPromotionIsCompleteWithOneSsdReplicaPerBlock() {
        UnreportedMoves moves = new UnreportedMoves(10);
        moves.asked("/p", TieringPlanner.ONE_SSD, 0);
        // One 10 MB replica moved onto SSD, two stay on DISK: nothing left to promote, 10 MB not reported yet.
        Map<String, TieringPlanner.FileTiers> moved = byPath(new TieringPlanner.FileTiers("/p", 10 * MB, 20 * MB, 0,
                TieringPlanner.ONE_SSD, 9, 1));
        assertEquals(new UnreportedMoves.Bytes(0, 10 * MB), moves.update(moved, 5, 20));
        assertEquals(1, moves.size(), "complete but not reported yet");
        assertEquals(UnreportedMoves.Bytes.NONE, moves.update(moved, 25, 30));
        assertEquals(0, moves.size(), "complete (its DISK replicas are the policy's) and reported: forgotten");
    }
}
