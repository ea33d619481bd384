package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TieringPlanner.ALL_SSD;
import static io.slipstream.hdfs.tiers.TieringPlanner.HOT;
import static io.slipstream.hdfs.tiers.TieringPlanner.ONE_SSD;
import static io.slipstream.hdfs.tiers.TieringPlanner.UNSPECIFIED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.junit.jupiter.api.Test;

/** The tiering service's decisions (no cluster): which files, in what order, within which limits. */
class TieringPlannerTest {
    private static final long MB = 1 << 20;
    /** Hot at 3 reads; SSD high-water 80 %, low-water 50 %; at most 10 files and 100 MB per batch. */
    private static final TieringPlanner PLANNER = new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB, ALL_SSD);

    /** A file as the service sees it under ALL_SSD: a promotion moves every replica off SSD onto it. */
    private static TieringPlanner.FileTiers file(String path, long ssdMb, long offMb, byte policy, long reads,
            long modified) {
        return new TieringPlanner.FileTiers(path, ssdMb * MB, offMb * MB, offMb * MB, policy, reads, modified);
    }

    private static List<String> paths(List<TieringPlanner.Move> moves) {
        return moves.stream().map(TieringPlanner.Move::path).toList();
    }

    @Test
    void belowTheHighWaterMarkNothingIsEvicted() {
        TieringPlanner.Batch batch = PLANNER.plan(100 * MB, 80 * MB, List.of(file("/cold", 20, 0, UNSPECIFIED, 0, 1)));
        assertTrue(batch.isEmpty(), batch.toString());
    }

    @Test
    void pastTheHighWaterMarkTheColdestGoFirstUntilTheLowWaterMark() {
        List<TieringPlanner.FileTiers> files = List.of(
                file("/read-twice", 10, 0, UNSPECIFIED, 2, 1),
                file("/new-unread", 10, 0, UNSPECIFIED, 0, 50),
                file("/old-unread", 10, 0, UNSPECIFIED, 0, 10),
                file("/hot", 30, 0, UNSPECIFIED, 3, 1),
                file("/promoted-gone-cold", 10, 0, ALL_SSD, 1, 5),
                file("/user-cold", 10, 20, HdfsConstants.COLD_STORAGE_POLICY_ID, 0, 1));
        // 90 MB of 100 in use: down to 50 needs 40 MB out; hot files and other users' policies stay.
        TieringPlanner.Batch batch = PLANNER.plan(100 * MB, 90 * MB, files);
        assertEquals(List.of("/old-unread", "/new-unread", "/promoted-gone-cold", "/read-twice"), paths(batch.evictions()));
        assertEquals(50 * MB, batch.ssdProjectedBytes());
        assertTrue(batch.promotions().isEmpty());
    }

    @Test
    void pendingEvictionsCountAsDoneSoTheyAreNotAskedTwice() {
        List<TieringPlanner.FileTiers> files = List.of(
                file("/evicting", 30, 0, HOT, 0, 1), // policy set by an earlier batch, replicas not moved yet
                file("/cold", 10, 0, UNSPECIFIED, 0, 2),
                file("/colder", 10, 0, UNSPECIFIED, 0, 1));
        TieringPlanner.Batch batch = PLANNER.plan(100 * MB, 90 * MB, files);
        assertEquals(List.of("/colder"), paths(batch.evictions()));
        assertEquals(50 * MB, batch.ssdProjectedBytes());
    }

    @Test
    void hotFilesArePromotedMostReadFirstWhileTheyFitUnderTheHighWaterMark() {
        List<TieringPlanner.FileTiers> files = List.of(
                file("/warm", 0, 20, UNSPECIFIED, 3, 1),
                file("/hottest", 0, 20, UNSPECIFIED, 9, 1),
                file("/too-big", 0, 40, UNSPECIFIED, 5, 1),
                file("/evicted-hot-again", 10, 10, HOT, 4, 1),
                file("/already-promoted", 20, 0, ALL_SSD, 9, 1),
                file("/lukewarm", 0, 20, UNSPECIFIED, 2, 1));
        // 40 MB in use (the HOT file's 10 MB on SSD are leaving: 30 projected); room to 80 MB.
        TieringPlanner.Batch batch = PLANNER.plan(100 * MB, 40 * MB, files);
        assertEquals(List.of("/hottest", "/evicted-hot-again", "/warm"), paths(batch.promotions()));
        assertEquals(80 * MB, batch.ssdProjectedBytes());
        assertTrue(batch.evictions().isEmpty());
    }

    @Test
    void aBatchStopsAtItsFileAndByteLimitsButOneLargeFileStillMovesAlone() {
        TieringPlanner twoFiles = new TieringPlanner(3, 0.8, 0.5, 2, 100 * MB, ALL_SSD);
        List<TieringPlanner.FileTiers> cold = List.of(file("/c1", 10, 0, UNSPECIFIED, 0, 1),
                file("/c2", 10, 0, UNSPECIFIED, 0, 2), file("/c3", 10, 0, UNSPECIFIED, 0, 3),
                file("/hot", 0, 5, UNSPECIFIED, 5, 1));
        TieringPlanner.Batch batch = twoFiles.plan(100 * MB, 90 * MB, cold);
        assertEquals(List.of("/c1", "/c2"), paths(batch.evictions()));
        assertTrue(batch.promotions().isEmpty(), "the file limit covers promotions too");

        TieringPlanner fifteenMb = new TieringPlanner(3, 0.8, 0.5, 10, 15 * MB, ALL_SSD);
        assertEquals(List.of("/c1"), paths(fifteenMb.plan(100 * MB, 90 * MB, cold).evictions()));
        TieringPlanner fiveMb = new TieringPlanner(3, 0.8, 0.5, 10, 5 * MB, ALL_SSD);
        assertEquals(List.of("/c1"), paths(fiveMb.plan(100 * MB, 90 * MB, cold).evictions()),
                "a file larger than the byte limit moves alone");
    }

    @Test
    void noSsdTierMeansNoMoves() {
        TieringPlanner.Batch batch = PLANNER.plan(0, 0, List.of(file("/hot", 0, 10, UNSPECIFIED, 10, 1)));
        assertTrue(batch.isEmpty());
    }

    /**
     * A file as the service sees it under ONE_SSD: {@code promoteMb} of its blocks have no replica on SSD or RAM
     * (a promotion moves one replica of each of those onto SSD).
     */
    private static TieringPlanner.FileTiers oneSsd(String path, long ssdMb, long offMb, long promoteMb, byte policy,
            long reads) {
        return new TieringPlanner.FileTiers(path, ssdMb * MB, offMb * MB, promoteMb * MB, policy, reads, 1);
    }

    @Test
    void underOneSsdAPromotionTakesOneReplicaPerBlockSoSsdHoldsThreeTimesTheHotFiles() {
        TieringPlanner oneSsd = new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB, ONE_SSD);
        // Five hot 10 MB files, three replicas on DISK each; 40 of 100 MB in use, room to 80.
        List<TieringPlanner.FileTiers> underOne = List.of(oneSsd("/h9", 0, 30, 10, UNSPECIFIED, 9),
                oneSsd("/h8", 0, 30, 10, UNSPECIFIED, 8), oneSsd("/h7", 0, 30, 10, HOT, 7),
                oneSsd("/h6", 0, 30, 10, UNSPECIFIED, 6), oneSsd("/h5", 0, 30, 10, UNSPECIFIED, 5));
        TieringPlanner.Batch batch = oneSsd.plan(100 * MB, 40 * MB, underOne);
        assertEquals(List.of("/h9", "/h8", "/h7", "/h6"), paths(batch.promotions()));
        assertEquals(List.of(10 * MB, 10 * MB, 10 * MB, 10 * MB),
                batch.promotions().stream().map(TieringPlanner.Move::bytes).toList());
        assertEquals(80 * MB, batch.ssdProjectedBytes());
        // The same files under ALL_SSD: 30 MB each, one fits.
        List<TieringPlanner.FileTiers> underAll = underOne.stream().map(f -> new TieringPlanner.FileTiers(f.path(),
                f.ssdBytes(), f.offSsdBytes(), f.offSsdBytes(), f.policy(), f.reads(), f.modifiedMs())).toList();
        assertEquals(List.of("/h9"), paths(PLANNER.plan(100 * MB, 40 * MB, underAll).promotions()));
    }

    @Test
    void underOneSsdAFileWithAFastReplicaPerBlockIsNotPromotedAndItsOwnPromotionsArePendingOrEvictable() {
        TieringPlanner oneSsd = new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB, ONE_SSD);
        List<TieringPlanner.FileTiers> files = List.of(
                oneSsd("/ram-and-disk", 0, 20, 0, UNSPECIFIED, 9), // a RAM replica per block: nothing to move
                oneSsd("/promoting", 0, 30, 10, ONE_SSD, 9), // asked by an earlier batch, not moved yet
                oneSsd("/users-all-ssd", 0, 30, 30, ALL_SSD, 9), // not the service's policy: left alone
                oneSsd("/hot", 0, 30, 10, UNSPECIFIED, 4));
        TieringPlanner.Batch batch = oneSsd.plan(100 * MB, 40 * MB, files);
        assertEquals(List.of("/hot"), paths(batch.promotions()));
        assertEquals(60 * MB, batch.ssdProjectedBytes(), "40 in use, 10 pending, 10 asked now");
        // Past the high-water mark, a promoted file gone cold is evicted; a user's ALL_SSD file is not.
        List<TieringPlanner.FileTiers> cold = List.of(oneSsd("/promoted-gone-cold", 10, 20, 0, ONE_SSD, 0),
                oneSsd("/users-all-ssd", 30, 0, 0, ALL_SSD, 0));
        assertEquals(List.of("/promoted-gone-cold"), paths(oneSsd.plan(100 * MB, 90 * MB, cold).evictions()));
    }

    @Test
    void onlyOneSsdAndAllSsdPromote() {
        assertThrows(IllegalArgumentException.class,
                () -> new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB, HdfsConstants.COLD_STORAGE_POLICY_ID));
    }
}
