package io.slipstream.ohb.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.apache.hadoop.fs.StorageType;
import org.junit.jupiter.api.Test;

/** TiersBench's placement rules and RAM sizing, without a cluster (the cluster runs are `ohb hdfs tiers`). */
class TiersBenchTest {
    private static final StorageType R = StorageType.RAM_DISK;
    private static final StorageType S = StorageType.SSD;
    private static final StorageType D = StorageType.DISK;
    private static final StorageType A = StorageType.ARCHIVE;

    @Test
    void eachConfigurationAcceptsItsPlacementOnly() {
        assertNull(TiersBench.expectedTiers("hot", new StorageType[] {D, D, D}));
        assertNotNull(TiersBench.expectedTiers("hot", new StorageType[] {S, D, D}));
        assertNull(TiersBench.expectedTiers("all-ssd", new StorageType[] {S, S, S}));
        assertNotNull(TiersBench.expectedTiers("all-ssd", new StorageType[] {S, S, D}));
        for (String ram : new String[] {"lazy-persist", "hhh-m"}) {
            assertNull(TiersBench.expectedTiers(ram, new StorageType[] {R, R, R}));
            assertNotNull(TiersBench.expectedTiers(ram, new StorageType[] {R, R, D}), ram);
        }
        assertNull(TiersBench.expectedTiers("hhh", new StorageType[] {R, S, S}));
        assertNull(TiersBench.expectedTiers("hhh", new StorageType[] {S, R, D}));
        assertNotNull(TiersBench.expectedTiers("hhh", new StorageType[] {S, S, D}));
        assertNotNull(TiersBench.expectedTiers("hhh", new StorageType[] {R, R, S}));
        assertNotNull(TiersBench.expectedTiers("hhh", new StorageType[] {R, S}), "two replicas of three");
        for (String pfs : new String[] {"hhh-l", "hhh-l-bb"}) {
            assertNull(TiersBench.expectedTiers(pfs, new StorageType[] {R, S, A}), pfs);
            assertNull(TiersBench.expectedTiers(pfs, new StorageType[] {A, D, R}), pfs);
            assertNotNull(TiersBench.expectedTiers(pfs, new StorageType[] {R, S, S}), pfs + ": no PFS replica");
            assertNotNull(TiersBench.expectedTiers(pfs, new StorageType[] {A, A, R}), pfs + ": two PFS replicas");
            assertNotNull(TiersBench.expectedTiers(pfs, new StorageType[] {A, S, D}), pfs + ": no RAM replica");
        }
        assertNotNull(TiersBench.expectedTiers("bogus", new StorageType[] {D, D, D}));
    }

    /** The same figure as `ohb`'s `TiersWorkload::ram_bytes_per_datanode`, which checks it against the tmpfs. */
    @Test
    void ramTierHoldsEveryBlockOfTheRunsAndTheWarmUpWithinSixtyPercent() {
        long block = 4 << 20;
        assertEquals(32 * (block + (64 << 10)) * 10 / 6, TiersBench.ramBytesPerDataNode(3, 2, 16 << 20, block));
        assertEquals(4 * (block + (64 << 10)) * 10 / 6, TiersBench.ramBytesPerDataNode(1, 1, block + 1, block));
    }
}
