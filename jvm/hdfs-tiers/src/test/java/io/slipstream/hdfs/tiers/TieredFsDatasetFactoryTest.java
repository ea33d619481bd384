package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.apache.hadoop.fs.StorageType;
import org.junit.jupiter.api.Test;

/** Where a DataNode puts a replica it has no room for on the planned tier (with its space now). */
class TieredFsDatasetFactoryTest {
    private static final long BLOCK = 1 << 20;

    @Test
    void spillGoesToTheNextTierWithRoom() {
        Map<StorageType, Long> all = Map.of(StorageType.RAM_DISK, 0L, StorageType.SSD, BLOCK, StorageType.DISK, 9 * BLOCK);
        assertEquals(StorageType.SSD, TieredFsDatasetFactory.spillTier(StorageType.RAM_DISK, all, BLOCK));
        assertEquals(StorageType.DISK, TieredFsDatasetFactory.spillTier(StorageType.SSD, all, BLOCK));
        Map<StorageType, Long> ssdFull = Map.of(StorageType.SSD, BLOCK - 1, StorageType.DISK, 9 * BLOCK);
        assertEquals(StorageType.DISK, TieredFsDatasetFactory.spillTier(StorageType.RAM_DISK, ssdFull, BLOCK));
        // Nothing after DISK with room, or nothing but RAM: the planned tier, for HDFS to report as usual.
        assertEquals(StorageType.DISK, TieredFsDatasetFactory.spillTier(StorageType.DISK, ssdFull, 10 * BLOCK));
        assertEquals(StorageType.RAM_DISK,
                TieredFsDatasetFactory.spillTier(StorageType.RAM_DISK, Map.of(StorageType.RAM_DISK, 0L), BLOCK));
        assertEquals(StorageType.ARCHIVE, TieredFsDatasetFactory.spillTier(StorageType.DISK,
                Map.of(StorageType.DISK, 0L, StorageType.ARCHIVE, BLOCK), BLOCK));
        // HHH-L: a replica planned on the parallel file system (ARCHIVE) without room there stays local.
        assertEquals(StorageType.DISK, TieredFsDatasetFactory.spillTier(StorageType.ARCHIVE,
                Map.of(StorageType.ARCHIVE, 0L, StorageType.SSD, BLOCK, StorageType.DISK, BLOCK), BLOCK));
        assertEquals(StorageType.SSD, TieredFsDatasetFactory.spillTier(StorageType.ARCHIVE,
                Map.of(StorageType.SSD, BLOCK, StorageType.DISK, 0L), BLOCK));
    }
}
