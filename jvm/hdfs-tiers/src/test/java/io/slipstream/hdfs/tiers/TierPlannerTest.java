package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.BlockStoragePolicy;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.blockmanagement.BlockStoragePolicySuite;
import org.junit.jupiter.api.Test;

/** The placement rules without a cluster: which tier each replica of a new block is planned on. */
class TierPlannerTest {
    private static final long BLOCK = 1 << 20;
    private static final BlockStoragePolicySuite SUITE = BlockStoragePolicySuite.createDefaultSuite();
    private static final BlockStoragePolicy HOT = SUITE.getPolicy(HdfsConstants.HOT_STORAGE_POLICY_ID);
    private static final BlockStoragePolicy LAZY = SUITE.getPolicy(HdfsConstants.MEMORY_STORAGE_POLICY_ID);
    private static final BlockStoragePolicy ALL_SSD = SUITE.getPolicy(HdfsConstants.ALLSSD_STORAGE_POLICY_ID);

    private static TierPlanner planner(String mode, String... settings) {
        Configuration conf = new Configuration(false);
        conf.set(TiersConf.MODE.key(), mode);
        for (int i = 0; i < settings.length; i += 2) {
            conf.set(settings[i], settings[i + 1]);
        }
        return new TierPlanner(new TiersConf(conf));
    }

    /** Tiers with {@code usedBlocks} of {@code capacityBlocks} taken on each, in blocks: RAM, SSD, DISK. */
    private static Map<StorageType, TierSpace> tiers(long[] ram, long[] ssd, long[] disk) {
        Map<StorageType, TierSpace> tiers = new EnumMap<>(StorageType.class);
        tiers.put(StorageType.RAM_DISK, space(ram));
        tiers.put(StorageType.SSD, space(ssd));
        tiers.put(StorageType.DISK, space(disk));
        return tiers;
    }

    private static TierSpace space(long[] usedAndCapacityBlocks) {
        long used = usedAndCapacityBlocks[0] * BLOCK;
        long capacity = usedAndCapacityBlocks[1] * BLOCK;
        return new TierSpace(capacity, used, capacity - used, 0);
    }

    private static List<StorageType> types(TierPlanner.Plan plan, int replicas) {
        return plan.policy().chooseStorageTypes((short) replicas);
    }

    @Test
    void hhhPutsTheFirstReplicaInRamAndTheOthersOnSsdWhileItHasRoom() throws Exception {
        TierPlanner.Plan plan = planner("hhh").planNewBlock(HOT, 3, BLOCK,
                tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100}));
        assertEquals(TierPlanner.Kind.RAM_FIRST, plan.kind());
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.SSD, StorageType.SSD), types(plan, 3));
        // HDFS's own policies never name RAM_DISK here; a plan must, or the NameNode would not place it.
        assertEquals(List.of(StorageType.RAM_DISK), plan.policy().chooseStorageTypes((short) 3,
                List.of(StorageType.SSD, StorageType.SSD), java.util.EnumSet.noneOf(StorageType.class), true));
    }

    @Test
    void ramAndSsdPastTheirHighWaterMarksSpillToTheNextTier() throws Exception {
        TierPlanner planner = planner("hhh");
        // 9 of 10 RAM blocks used: a 10th would pass 90 %.
        TierPlanner.Plan spilled = planner.planNewBlock(HOT, 3, BLOCK,
                tiers(new long[] {9, 10}, new long[] {0, 10}, new long[] {0, 100}));
        assertEquals(TierPlanner.Kind.RAM_SPILLED, spilled.kind());
        assertEquals(List.of(StorageType.SSD, StorageType.SSD, StorageType.SSD), types(spilled, 3));
        // SSD at 8 of 10: one more replica fits under 90 %, the next goes to DISK.
        TierPlanner.Plan ssdFull = planner.planNewBlock(HOT, 3, BLOCK,
                tiers(new long[] {0, 10}, new long[] {8, 10}, new long[] {0, 100}));
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK), types(ssdFull, 3));
        // No RAM_DISK or SSD at all: vanilla tiers only.
        TierPlanner.Plan diskOnly = planner.planNewBlock(HOT, 2, BLOCK, Map.of(StorageType.DISK, space(new long[] {0, 9})));
        assertEquals(List.of(StorageType.DISK, StorageType.DISK), types(diskOnly, 2));
        // Where HDFS finds no room on a planned tier, it falls back to the next faster one.
        assertEquals(StorageType.SSD, spilled.policy().getCreationFallback(java.util.EnumSet.of(StorageType.RAM_DISK)));
        assertEquals(StorageType.DISK, spilled.policy().getCreationFallback(
                java.util.EnumSet.of(StorageType.RAM_DISK, StorageType.SSD)));
    }

    @Test
    void singleReplicaFilesStayOffRamUnlessMarkedOrAllowed() throws Exception {
        Map<StorageType, TierSpace> tiers = tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100});
        TierPlanner.Plan unmarked = planner("hhh").planNewBlock(HOT, 1, BLOCK, tiers);
        assertEquals(TierPlanner.Kind.NO_RAM_REPLICA, unmarked.kind());
        assertEquals(List.of(StorageType.SSD), types(unmarked, 1));
        assertEquals(TierPlanner.Kind.RAM_FIRST, planner("hhh").planNewBlock(LAZY, 1, BLOCK, tiers).kind());
        assertEquals(TierPlanner.Kind.RAM_FIRST, planner("hhh", TiersConf.RAM_MIN_REPLICATION.key(), "1")
                .planNewBlock(HOT, 1, BLOCK, tiers).kind());
    }

    @Test
    void filesWithAPolicyOfTheirOwnAreLeftToHdfs() throws Exception {
        Map<StorageType, TierSpace> tiers = tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100});
        TierPlanner.Plan plan = planner("hhh-m").planNewBlock(ALL_SSD, 3, BLOCK, tiers);
        assertEquals(TierPlanner.Kind.VANILLA, plan.kind());
        assertSame(ALL_SSD, plan.policy());
    }

    @Test
    void hhhmKeepsMarkedFilesInRamWithinTheBudget() throws Exception {
        TierPlanner planner = planner("hhh-m", TiersConf.HHHM_BUDGET_BYTES.key(), String.valueOf(6 * BLOCK));
        TierPlanner.Plan plan = planner.planNewBlock(LAZY, 3, BLOCK,
                tiers(new long[] {3, 10}, new long[] {0, 10}, new long[] {0, 100}));
        assertEquals(TierPlanner.Kind.ALL_RAM, plan.kind());
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.RAM_DISK, StorageType.RAM_DISK), types(plan, 3));
        // Exactly at the budget is allowed; one byte more held is not.
        Map<StorageType, TierSpace> over = tiers(new long[] {3, 10}, new long[] {0, 10}, new long[] {0, 100});
        over.put(StorageType.RAM_DISK, new TierSpace(10 * BLOCK, 3 * BLOCK + 1, 7 * BLOCK - 1, 0));
        TierBudgetExceededException e = assertThrows(TierBudgetExceededException.class,
                () -> planner.planNewBlock(LAZY, 3, BLOCK, over));
        assertTrue(e.getMessage().contains("HHH-M memory budget exceeded")
                && e.getMessage().contains(TiersConf.HHHM_BUDGET_BYTES.key()), e.getMessage());
        // Blocks on their way to RAM count against the budget too.
        Map<StorageType, TierSpace> inFlight = tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100});
        inFlight.put(StorageType.RAM_DISK, inFlight.get(StorageType.RAM_DISK).withScheduled(4 * BLOCK));
        assertThrows(TierBudgetExceededException.class, () -> planner.planNewBlock(LAZY, 3, BLOCK, inFlight));
        // Unmarked files are placed as in HHH, whatever the budget.
        assertEquals(TierPlanner.Kind.RAM_FIRST, planner.planNewBlock(HOT, 3, BLOCK, over).kind());
    }

    @Test
    void hhhmDefaultBudgetIsSeventyPercentOfRamAndNoRamIsAClearError() throws Exception {
        TierPlanner planner = planner("hhh-m");
        // 10 blocks of RAM: 7 allowed; 5 held + 3 more is 8.
        assertThrows(TierBudgetExceededException.class, () -> planner.planNewBlock(LAZY, 3, BLOCK,
                tiers(new long[] {5, 10}, new long[] {0, 10}, new long[] {0, 100})));
        assertEquals(TierPlanner.Kind.ALL_RAM, planner.planNewBlock(LAZY, 3, BLOCK,
                tiers(new long[] {4, 10}, new long[] {0, 10}, new long[] {0, 100})).kind());
        TierBudgetExceededException e = assertThrows(TierBudgetExceededException.class,
                () -> planner.planNewBlock(LAZY, 3, BLOCK, Map.of(StorageType.DISK, space(new long[] {0, 9}))));
        assertTrue(e.getMessage().contains("no DataNode reports a RAM_DISK storage"), e.getMessage());
    }

    /** RAM, SSD, DISK as {@link #tiers} and an ARCHIVE (parallel file system) tier with {@code pfs} blocks. */
    private static Map<StorageType, TierSpace> withPfs(long[] pfs) {
        Map<StorageType, TierSpace> tiers = tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100});
        tiers.put(StorageType.ARCHIVE, space(pfs));
        return tiers;
    }

    @Test
    void hhhlPutsOneReplicaOnTheParallelFileSystemAndTheOthersLocallyAsHhh() throws Exception {
        TierPlanner planner = planner("hhh-l");
        TierPlanner.Plan plan = planner.planNewBlock(HOT, 3, BLOCK, withPfs(new long[] {0, 1000}));
        assertEquals(TierPlanner.Kind.PFS_PLUS_LOCAL, plan.kind());
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.SSD, StorageType.ARCHIVE), types(plan, 3));
        // The parallel file system's replica is persistent: two replicas may have one in RAM; one replica is on it.
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.ARCHIVE),
                types(planner.planNewBlock(HOT, 2, BLOCK, withPfs(new long[] {0, 1000})), 2));
        assertEquals(List.of(StorageType.ARCHIVE), types(planner.planNewBlock(HOT, 1, BLOCK, withPfs(new long[] {0, 1000})), 1));
        // Where a DataNode's ARCHIVE has no room HDFS falls back to the next faster tier, as for the others.
        assertEquals(StorageType.SSD, plan.policy().getCreationFallback(java.util.EnumSet.of(StorageType.ARCHIVE)));
        // Files with a policy of their own are HDFS's, LAZY_PERSIST files placed as in HHH.
        assertSame(ALL_SSD, planner.planNewBlock(ALL_SSD, 3, BLOCK, withPfs(new long[] {0, 1000})).policy());
        assertEquals(TierPlanner.Kind.RAM_FIRST, planner.planNewBlock(LAZY, 3, BLOCK, withPfs(new long[] {0, 1000})).kind());
    }

    @Test
    void hhhlWithoutRoomOnTheParallelFileSystemKeepsEveryReplicaLocal() throws Exception {
        TierPlanner planner = planner("hhh-l");
        TierPlanner.Plan absent = planner.planNewBlock(HOT, 3, BLOCK,
                tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100}));
        assertEquals(TierPlanner.Kind.PFS_UNAVAILABLE, absent.kind());
        assertEquals(List.of(StorageType.RAM_DISK, StorageType.SSD, StorageType.SSD), types(absent, 3));
        // 95 of 100 blocks used: one more passes the 95 % high-water mark.
        TierPlanner.Plan full = planner.planNewBlock(HOT, 3, BLOCK, withPfs(new long[] {95, 100}));
        assertEquals(TierPlanner.Kind.PFS_UNAVAILABLE, full.kind());
        assertTrue(!types(full, 3).contains(StorageType.ARCHIVE), full.policy().toString());
        // Without the parallel file system a single replica is kept off RAM, as HHH does.
        assertEquals(List.of(StorageType.SSD), types(planner.planNewBlock(HOT, 1, BLOCK,
                tiers(new long[] {0, 10}, new long[] {0, 10}, new long[] {0, 100})), 1));
    }
}
