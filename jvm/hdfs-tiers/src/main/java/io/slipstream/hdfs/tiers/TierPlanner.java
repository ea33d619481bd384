package io.slipstream.hdfs.tiers;

import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.BlockStoragePolicy;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;

/**
 * Decides the storage types of a new block's replicas from the mode, the file's storage policy and each
 * tier's free space (docs/hdfs-tiers.md, "Placement"). Pure: no HDFS state, so the rules are tested
 * without a cluster; {@link TieredBlockPlacementPolicy} feeds it the NameNode's view and hands the result
 * to HDFS's own placement as a one-block storage policy.
 */
final class TierPlanner {
    /** What the planner decided for one block, for counters and log lines. */
    enum Kind {
        /** Not a file this module places (it has a storage policy of its own, other than LAZY_PERSIST). */
        VANILLA,
        /** HHH: first replica in RAM, the others on persistent tiers. */
        RAM_FIRST,
        /** HHH: RAM past its high-water mark or absent: every replica on persistent tiers. */
        RAM_SPILLED,
        /** HHH: replication below {@code hhh.ramMinReplication}: every replica on persistent tiers. */
        NO_RAM_REPLICA,
        /** HHH-M: every replica in RAM. */
        ALL_RAM,
        /** HHH-L: one replica on the parallel file system (ARCHIVE), the others local as HHH places them. */
        PFS_PLUS_LOCAL,
        /** HHH-L: no ARCHIVE storage, or it is past its high-water mark: every replica local, as HHH. */
        PFS_UNAVAILABLE
    }

    record Plan(Kind kind, BlockStoragePolicy policy) {
    }

    /** Where a replica goes when HDFS finds no room on the tier planned for it: the next faster tier first. */
    private static final StorageType[] FALLBACKS = {StorageType.SSD, StorageType.DISK};

    private final TiersConf conf;

    TierPlanner(TiersConf conf) {
        this.conf = conf;
    }

    /**
     * The storage types for a new block of a file with storage policy {@code filePolicy} and
     * {@code replicas} replicas, given each tier's space; VANILLA with the file's own policy when the file is
     * not one this module places.
     *
     * @throws TierBudgetExceededException HHH-M only: keeping every replica in RAM would pass the budget
     */
    Plan planNewBlock(BlockStoragePolicy filePolicy, int replicas, long blockBytes, Map<StorageType, TierSpace> tiers)
            throws TierBudgetExceededException {
        boolean markedShortLived = filePolicy.getId() == HdfsConstants.MEMORY_STORAGE_POLICY_ID;
        boolean unmarked = filePolicy.getId() == HdfsConstants.HOT_STORAGE_POLICY_ID;
        if (replicas <= 0 || !(markedShortLived || unmarked)) {
            return new Plan(Kind.VANILLA, filePolicy);
        }
        TierSpace ram = tiers.getOrDefault(StorageType.RAM_DISK, TierSpace.ABSENT);
        if (conf.mode == TierMode.HHH_M && markedShortLived) {
            checkBudget(ram, replicas, blockBytes);
            StorageType[] types = new StorageType[replicas];
            Arrays.fill(types, StorageType.RAM_DISK);
            return new Plan(Kind.ALL_RAM, policy(filePolicy, "HHH-M", types));
        }
        Map<StorageType, TierSpace> left = new EnumMap<>(StorageType.class);
        left.putAll(tiers);
        StorageType[] types = new StorageType[replicas];
        if (conf.mode.usesParallelFileSystem() && unmarked) {
            TierSpace pfs = tiers.getOrDefault(StorageType.ARCHIVE, TierSpace.ABSENT);
            if (pfs.present() && pfs.fillAfter(blockBytes) <= conf.pfsHighWater) {
                // The parallel file system's replica is persistent, so a local RAM replica keeps HHH's promise
                // (a closed file has a replica on a persistent tier) whatever the replication.
                planLocal(types, replicas - 1, ram, left, blockBytes, true);
                types[replicas - 1] = StorageType.ARCHIVE;
                return new Plan(Kind.PFS_PLUS_LOCAL, policy(filePolicy, "HHH-L", types));
            }
            planLocal(types, replicas, ram, left, blockBytes, replicas >= conf.ramMinReplication);
            return new Plan(Kind.PFS_UNAVAILABLE, policy(filePolicy, "HHH-L", types));
        }
        Kind kind = planLocal(types, replicas, ram, left, blockBytes, !unmarked || replicas >= conf.ramMinReplication);
        return new Plan(kind, policy(filePolicy, "HHH", types));
    }

    /**
     * HHH's local placement of the first {@code count} replicas into {@code types}: the first in RAM when
     * {@code ramAllowed} and RAM stays at or below its high-water mark with it, the others (or all) on SSD
     * while it has room, then DISK.
     */
    private Kind planLocal(StorageType[] types, int count, TierSpace ram, Map<StorageType, TierSpace> left,
            long blockBytes, boolean ramAllowed) {
        Kind kind;
        int next = 0;
        if (!ramAllowed) {
            kind = Kind.NO_RAM_REPLICA;
        } else if (count > 0 && ram.present() && ram.fillAfter(blockBytes) <= conf.ramHighWater) {
            kind = Kind.RAM_FIRST;
            types[next++] = StorageType.RAM_DISK;
        } else {
            kind = Kind.RAM_SPILLED;
        }
        while (next < count) {
            StorageType tier = persistentTier(left, blockBytes);
            types[next++] = tier;
            left.put(tier, left.getOrDefault(tier, TierSpace.ABSENT).withScheduled(blockBytes));
        }
        return kind;
    }

    /**
     * SSD or DISK for one persistent replica: the faster tier, SSD, while it stays at or below its high-water
     * mark with this block (and the replicas of this block planned before it) on it; DISK otherwise, and when
     * the cluster has no SSD. HDFS's placement then picks a DataNode with room on that tier, or falls back.
     */
    private StorageType persistentTier(Map<StorageType, TierSpace> tiers, long blockBytes) {
        TierSpace ssd = tiers.getOrDefault(StorageType.SSD, TierSpace.ABSENT);
        if (ssd.present() && ssd.fillAfter(blockBytes) <= conf.ssdHighWater) {
            return StorageType.SSD;
        }
        return StorageType.DISK;
    }

    private void checkBudget(TierSpace ram, int replicas, long blockBytes) throws TierBudgetExceededException {
        if (!ram.present()) {
            throw new TierBudgetExceededException("HHH-M keeps LAZY_PERSIST files in RAM, but no DataNode reports a "
                    + "RAM_DISK storage (give the DataNodes a [RAM_DISK] directory on tmpfs in dfs.datanode.data.dir)");
        }
        long budget = conf.budgetBytes(ram.capacityBytes());
        long needed = (long) replicas * blockBytes;
        if (ram.heldBytes() + needed > budget) {
            throw new TierBudgetExceededException("HHH-M memory budget exceeded: a new block needs " + replicas + " x "
                    + blockBytes + " bytes in RAM, RAM_DISK holds " + ram.heldBytes() + " bytes, budget "
                    + budget + " bytes (" + TiersConf.HHHM_BUDGET_BYTES.key() + "; RAM_DISK capacity "
                    + ram.capacityBytes() + " bytes). Delete short-lived files, raise the budget, or write the file "
                    + "without storage policy LAZY_PERSIST");
        }
    }

    private static BlockStoragePolicy policy(BlockStoragePolicy filePolicy, String name, StorageType[] types) {
        return new OneBlockPolicy(filePolicy, name, types);
    }

    /**
     * The storage types planned for one block, which HDFS's placement takes as given. Vanilla's
     * {@link BlockStoragePolicy#chooseStorageTypes(short)} leaves RAM_DISK out (in vanilla HDFS the DataNode, not
     * the NameNode, puts LAZY_PERSIST replicas in RAM, each DataNode of the pipeline on its own); this one keeps
     * it, so that the NameNode chooses which replica and which DataNode's RAM, by the room each reports.
     */
    static final class OneBlockPolicy extends BlockStoragePolicy {
        OneBlockPolicy(BlockStoragePolicy filePolicy, String name, StorageType[] types) {
            super(filePolicy.getId(), name, types, FALLBACKS, FALLBACKS, filePolicy.isCopyOnCreateFile());
        }

        @Override
        public List<StorageType> chooseStorageTypes(short replication) {
            StorageType[] types = getStorageTypes();
            List<StorageType> chosen = new LinkedList<>();
            for (int i = 0; i < replication; i++) {
                chosen.add(types[Math.min(i, types.length - 1)]);
            }
            return chosen;
        }
    }
}
