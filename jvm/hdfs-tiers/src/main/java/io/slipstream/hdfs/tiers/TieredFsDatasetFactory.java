package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.util.EnumMap;
import java.util.Map;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.DataStorage;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.SlipstreamTieredFsDataset;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The DataNode side of the Triple-H modes ({@code dfs.datanode.fsdataset.factory}): HDFS's own dataset
 * (SlipstreamTieredFsDataset), in which a new replica goes to RAM exactly when the NameNode chose RAM_DISK
 * for it. Vanilla HDFS
 * decides that on the DataNode instead: every DataNode of a LAZY_PERSIST file's pipeline tries its RAM disk
 * first, and no other file's replica may use it. Here, a replica the NameNode put on RAM_DISK is written as
 * a lazy-persist replica (RAM if the RAM disk has room now, persisted in the background by HDFS's lazy
 * writer, evicted by HDFS's watermarks) and falls back to this DataNode's next tier, never failing the write;
 * any other replica goes to the tier the NameNode chose and never to RAM. Everything else is HDFS's dataset
 * unchanged.
 */
public class TieredFsDatasetFactory extends FsDatasetSpi.Factory<FsDatasetSpi<?>> {
    private static final Logger LOG = LoggerFactory.getLogger(TieredFsDatasetFactory.class);

    @Override
    public FsDatasetSpi<?> newInstance(DataNode datanode, DataStorage storage, Configuration conf) throws IOException {
        FsDatasetSpi<?> dataset = SlipstreamTieredFsDataset.create(datanode, storage, conf);
        warnIfRamCannotBeUsed(dataset, conf);
        return dataset;
    }

    /** HDFS writes a lazy-persist replica to RAM only within the DataNode's locked-memory allowance. */
    private static void warnIfRamCannotBeUsed(FsDatasetSpi<?> dataset, Configuration conf) throws IOException {
        long lockedBytes = conf.getLongBytes(DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_KEY,
                DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_DEFAULT);
        long blockBytes = conf.getLongBytes(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, DFSConfigKeys.DFS_BLOCK_SIZE_DEFAULT);
        if (freeBytesByTier(dataset).containsKey(StorageType.RAM_DISK) && lockedBytes < blockBytes) {
            LOG.warn("Triple-H: this DataNode has a RAM_DISK volume but {}={} is below {}={}: HDFS will put no replica in "
                    + "RAM here (each goes to the next tier); set it to the RAM disk's size",
                    DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_KEY, lockedBytes, DFSConfigKeys.DFS_BLOCK_SIZE_KEY,
                    blockBytes);
        }
    }

    /**
     * Starts the DataNode's RAM evictor ({@code ram.evictCheck.ms} > 0) over HDFS's locked-memory use and
     * eviction; null when turned off. A bad setting fails the DataNode's start, naming it.
     */
    public static AutoCloseable startRamEvictor(Configuration conf, LongSupplier usedBytes, LongSupplier capacityBytes,
            LongConsumer evictUntilFreeBytes, String datanodeName) {
        TiersConf tiers = new TiersConf(conf);
        if (tiers.ramEvictCheckMs == 0) {
            return null;
        }
        long blockBytes = conf.getLongBytes(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, DFSConfigKeys.DFS_BLOCK_SIZE_DEFAULT);
        return new RamEvictor(usedBytes, capacityBytes, evictUntilFreeBytes, tiers.ramHighWater, tiers.ramLowWater,
                blockBytes, tiers.ramEvictCheckMs, datanodeName);
    }

    /** The largest free space of any volume of each storage type this DataNode has. */
    static Map<StorageType, Long> freeBytesByTier(FsDatasetSpi<?> dataset) throws IOException {
        Map<StorageType, Long> free = new EnumMap<>(StorageType.class);
        try (FsDatasetSpi.FsVolumeReferences volumes = dataset.getFsVolumeReferences()) {
            for (FsVolumeSpi volume : volumes) {
                free.merge(volume.getStorageType(), volume.getAvailable(), Math::max);
            }
        }
        return free;
    }

    /** The tiers a replica may spill to, fastest first. */
    private static final StorageType[] PERSISTENT = {StorageType.SSD, StorageType.DISK, StorageType.ARCHIVE};

    /**
     * Where a replica planned on {@code planned} goes when this DataNode has no room for it there: the first
     * tier after {@code planned} in SSD, DISK, ARCHIVE (any of them after RAM_DISK) that has a volume with
     * room for the block; for ARCHIVE (HHH-L's parallel file system), DISK then SSD; {@code planned} itself when
     * none has (HDFS then reports the lack of space as it would).
     */
    static StorageType spillTier(StorageType planned, Map<StorageType, Long> freeBytesByTier, long blockBytes) {
        boolean after = planned == StorageType.RAM_DISK;
        for (StorageType tier : PERSISTENT) {
            if (after && freeBytesByTier.getOrDefault(tier, -1L) >= blockBytes) {
                return tier;
            }
            after |= tier == planned;
        }
        if (planned == StorageType.ARCHIVE) {
            // HHH-L's parallel file system full or gone here: the replica stays on this DataNode's local tiers.
            for (StorageType tier : LOCAL_BACK_FROM_ARCHIVE) {
                if (freeBytesByTier.getOrDefault(tier, -1L) >= blockBytes) {
                    return tier;
                }
            }
        }
        return planned;
    }

    /** Where a replica planned on ARCHIVE goes when this DataNode has no room there: the local tiers, largest first. */
    private static final StorageType[] LOCAL_BACK_FROM_ARCHIVE = {StorageType.DISK, StorageType.SSD};

    /** Where a new replica goes: the tier, the storage id (null: any volume of the tier) and lazy persistence. */
    public record NewReplicaTarget(StorageType type, String storageId, boolean lazyPersist) {
    }

    /**
     * The target of a new replica the NameNode planned on {@code planned} (storage {@code storageId}), decided
     * with this DataNode's space now (the NameNode's view is up to a heartbeat old). RAM_DISK: a lazy-persist
     * replica, which HDFS puts in RAM if the RAM disk has room and locked memory is left, and otherwise on a
     * volume of the type given, here the spill tier. Any other tier: that tier if one of its volumes has room,
     * else the spill tier; never RAM (vanilla would try RAM first for every replica of a LAZY_PERSIST file).
     * A spilled replica may take any volume of its tier: the storage id named a volume of the planned one.
     */
    public static NewReplicaTarget newReplicaTarget(StorageType planned, String storageId, long blockBytes,
            FsDatasetSpi<?> dataset) throws IOException {
        Map<StorageType, Long> free = freeBytesByTier(dataset);
        if (planned == StorageType.RAM_DISK) {
            return new NewReplicaTarget(spillTier(planned, free, blockBytes), null, true);
        }
        if (free.getOrDefault(planned, -1L) >= blockBytes) {
            return new NewReplicaTarget(planned, storageId, false);
        }
        StorageType spill = spillTier(planned, free, blockBytes);
        return new NewReplicaTarget(spill, spill == planned ? storageId : null, false);
    }
}
