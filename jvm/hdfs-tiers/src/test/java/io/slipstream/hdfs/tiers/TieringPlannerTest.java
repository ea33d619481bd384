package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TieringPlanner.ALL_SSD;
import static io.slipstream.hdfs.tiers.TieringPlanner.HOT;
import static io.slipstream.hdfs.tiers.TieringPlanner.UNSPECIFIED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.junit.jupiter.api.Test;

/** The tiering service's decisions (no cluster): which files, in what order, within which limits. */
class TieringPlannerTest {
    private static final long MB = 1 << 20;
    /** Hot at 3 reads; SSD high-water 80 %, low-water 50 %; at most 10 files and 100 MB per batch. */
    private static final TieringPlanner PLANNER = new TieringPlanner(3, 0.8, 0.5, 10, 100 * MB);

    private static TieringPlanner.FileTiers file(String path, long ssdMb, long offMb, byte policy, long reads,
            long modified) {
        return new TieringPlanner.FileTiers(path, ssdMb * MB, offMb * MB, policy, reads, modified);
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
        TieringPlanner twoFiles = new TieringPlanner(3, 0.8, 0.5, 2, 100 * MB);
        List<TieringPlanner.FileTiers> cold = List.of(file("/c1", 10, 0, UNSPECIFIED, 0, 1),
                file("/c2", 10, 0, UNSPECIFIED, 0, 2), file("/c3", 10, 0, UNSPECIFIED, 0, 3),
                file("/hot", 0, 5, UNSPECIFIED, 5, 1));
        TieringPlanner.Batch batch = twoFiles.plan(100 * MB, 90 * MB, cold);
        assertEquals(List.of("/c1", "/c2"), paths(batch.evictions()));
        assertTrue(batch.promotions().isEmpty(), "the file limit covers promotions too");

        TieringPlanner fifteenMb = new TieringPlanner(3, 0.8, 0.5, 10, 15 * MB);
        assertEquals(List.of("/c1"), paths(fifteenMb.plan(100 * MB, 90 * MB, cold).evictions()));
        TieringPlanner fiveMb = new TieringPlanner(3, 0.8, 0.5, 10, 5 * MB);
        assertEquals(List.of("/c1"), paths(fiveMb.plan(100 * MB, 90 * MB, cold).evictions()),
                "a file larger than the byte limit moves alone");
    }

    @Test
    void noSsdTierMeansNoMoves() {
        TieringPlanner.Batch batch = PLANNER.plan(0, 0, List.of(file("/hot", 0, 10, UNSPECIFIED, 10, 1)));
        assertTrue(batch.isEmpty());
    }
}
