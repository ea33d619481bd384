package io.slipstream.ohb.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.apache.hadoop.fs.StorageType;
import org.junit.jupiter.api.Test;

/** The tiers benchmarks' placement rules and RAM sizing, without a cluster (the cluster runs are `ohb hdfs tiers`). */
class TiersClusterTest {
    private static final StorageType R = StorageType.RAM_DISK;
    private static final StorageType S = StorageType.SSD;
    private static final StorageType D = StorageType.DISK;
    private static final StorageType A = StorageType.ARCHIVE;

    @Test
    void eachConfigurationAcceptsItsPlacementOnly() {
        assertNull(TiersCluster.expectedTiers("hot", new StorageType[] {D, D, D}));
        assertNotNull(TiersCluster.expectedTiers("hot", new StorageType[] {S, D, D}));
        assertNull(TiersCluster.expectedTiers("all-ssd", new StorageType[] {S, S, S}));
        assertNotNull(TiersCluster.expectedTiers("all-ssd", new StorageType[] {S, S, D}));
        for (String ram : new String[] {"lazy-persist", "hhh-m"}) {
            assertNull(TiersCluster.expectedTiers(ram, new StorageType[] {R, R, R}));
            assertNotNull(TiersCluster.expectedTiers(ram, new StorageType[] {R, R, D}), ram);
        }
        assertNull(TiersCluster.expectedTiers("hhh", new StorageType[] {R, S, S}));
        assertNull(TiersCluster.expectedTiers("hhh", new StorageType[] {S, R, D}));
        assertNotNull(TiersCluster.expectedTiers("hhh", new StorageType[] {S, S, D}));
        assertNotNull(TiersCluster.expectedTiers("hhh", new StorageType[] {R, R, S}));
        assertNotNull(TiersCluster.expectedTiers("hhh", new StorageType[] {R, S}), "two replicas of three");
        for (String pfs : new String[] {"hhh-l", "hhh-l-bb"}) {
            assertNull(TiersCluster.expectedTiers(pfs, new StorageType[] {R, S, A}), pfs);
            assertNull(TiersCluster.expectedTiers(pfs, new StorageType[] {A, D, R}), pfs);
            assertNotNull(TiersCluster.expectedTiers(pfs, new StorageType[] {R, S, S}), pfs + ": no PFS replica");
            assertNotNull(TiersCluster.expectedTiers(pfs, new StorageType[] {A, A, R}), pfs + ": two PFS replicas");
            assertNotNull(TiersCluster.expectedTiers(pfs, new StorageType[] {A, S, D}), pfs + ": no RAM replica");
        }
        assertNotNull(TiersCluster.expectedTiers("bogus", new StorageType[] {D, D, D}));
    }

    /** The same figure as `ohb`'s `TiersWorkload::ram_bytes_per_datanode`, which checks it against the tmpfs. */
    @Test
    void ramTierHoldsEveryBlockOfTheRunsAndTheWarmUpWithinSixtyPercent() {
        long block = 4 << 20;
        assertEquals(32 * (block + (64 << 10)) * 10 / 6, TiersBench.ramBytesPerDataNode(3, 2, 16 << 20, block));
        assertEquals(4 * (block + (64 << 10)) * 10 / 6, TiersBench.ramBytesPerDataNode(1, 1, block + 1, block));
        assertEquals(TiersBench.ramBytesPerDataNode(3, 2, 16 << 20, block), TiersCluster.ramBytesPerDataNode(32, block));
    }
}
