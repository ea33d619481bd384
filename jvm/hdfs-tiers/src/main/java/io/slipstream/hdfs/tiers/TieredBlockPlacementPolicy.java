package io.slipstream.hdfs.tiers;

import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.AddBlockFlag;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.protocol.BlockStoragePolicy;
import org.apache.hadoop.hdfs.server.blockmanagement.BlockPlacementPolicyDefault;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeDescriptor;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeStorageInfo;
import org.apache.hadoop.hdfs.server.blockmanagement.SlipstreamTierBridge;
import org.apache.hadoop.net.Node;
import org.apache.hadoop.net.NodeBase;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The NameNode side of the Triple-H modes ({@code dfs.block.replicator.classname}): for a new block of a file
 * this module places, it plans the storage type of each replica ({@link TierPlanner}) from the tiers' space
 * and lets HDFS's default placement choose the DataNodes and storages for those types, with its racks, load,
 * per-storage room checks and fallbacks. Everything else (re-replication, pipeline recovery, deletion,
 * files with a storage policy of their own) is HDFS's default placement unchanged.
 */
public class TieredBlockPlacementPolicy extends BlockPlacementPolicyDefault implements Configurable {
    private static final Logger LOG = LoggerFactory.getLogger(TieredBlockPlacementPolicy.class);

    private Configuration conf;
    private TierPlanner planner;
    private final Map<TierPlanner.Kind, AtomicLong> blocksByKind = new EnumMap<>(TierPlanner.Kind.class);
    private final AtomicLong blocksRefused = new AtomicLong();
    /** The last kind of placement logged for HHH files: a line is logged when it changes, not per block. */
    private final AtomicReference<TierPlanner.Kind> lastLoggedKind = new AtomicReference<>();

    public TieredBlockPlacementPolicy() {
        // Replaced in setConf, which HDFS always calls; the defaults only guard against a caller that does not.
        planner = new TierPlanner(new TiersConf(new Configuration(false)));
        for (TierPlanner.Kind kind : TierPlanner.Kind.values()) {
            blocksByKind.put(kind, new AtomicLong());
        }
    }

    /**
     * HDFS builds the policy with {@code ReflectionUtils.newInstance(class, conf)}, which hands a Configurable
     * its configuration before {@code initialize} (package-private in 3.4, so not overridable from here). A bad
     * setting fails the NameNode's start with the setting's name.
     */
    @Override
    public void setConf(Configuration conf) {
        this.conf = conf;
        TiersConf tiers = new TiersConf(conf);
        planner = new TierPlanner(tiers);
        LOG.info("Triple-H placement: {}", tiers);
        if (tiers.mode.usesParallelFileSystem() && !conf.getBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY,
                DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_DEFAULT)) {
            LOG.warn("Triple-H {}: {} is false, so readers are not sent to local replicas before the parallel file "
                    + "system's (ARCHIVE) one at the same distance; set it to true (docs/hdfs-tiers.md)",
                    tiers.mode.setting, DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY);
        }
    }

    @Override
    public Configuration getConf() {
        return conf;
    }

    @Override
    public DatanodeStorageInfo[] chooseTarget(String srcPath, int numOfReplicas, Node writer,
            List<DatanodeStorageInfo> chosen, boolean returnChosenNodes, Set<Node> excludedNodes, long blocksize,
            BlockStoragePolicy storagePolicy, EnumSet<AddBlockFlag> flags) {
        BlockStoragePolicy policy = planFor(srcPath, numOfReplicas, chosen, blocksize, storagePolicy, flags);
        return super.chooseTarget(srcPath, numOfReplicas, writer, chosen, returnChosenNodes, excludedNodes, blocksize,
                policy, flags);
    }

    /**
     * The storage policy to place with. Only a new block (HDFS passes the client's add-block flags, never null,
     * for those and null for re-replication and pipeline recovery) with no replica chosen yet is planned.
     */
    private BlockStoragePolicy planFor(String srcPath, int numOfReplicas, List<DatanodeStorageInfo> chosen,
            long blockBytes, BlockStoragePolicy filePolicy, EnumSet<AddBlockFlag> flags) {
        if (flags == null || (chosen != null && !chosen.isEmpty()) || filePolicy == null) {
            return filePolicy;
        }
        TierPlanner.Plan plan;
        Map<StorageType, TierSpace> tiers = tierSpace(blockBytes);
        try {
            plan = planner.planNewBlock(filePolicy, numOfReplicas, blockBytes, tiers);
        } catch (TierBudgetExceededException e) {
            blocksRefused.incrementAndGet();
            LOG.warn("Triple-H refused a new block of {}: {}", srcPath, e.getMessage());
            // chooseTarget declares no exception; the client must still get this one, by name, as HDFS's own
            // placement errors reach it (FSNamesystem.getAdditionalBlock calls this outside its locks).
            throw TieredBlockPlacementPolicy.<RuntimeException>sneaky(e);
        }
        blocksByKind.get(plan.kind()).incrementAndGet();
        if (plan.kind() == TierPlanner.Kind.PFS_UNAVAILABLE && lastLoggedKind.getAndSet(plan.kind()) != plan.kind()) {
            LOG.warn("Triple-H hhh-l: no ARCHIVE (parallel file system) storage with room below {} (from {}): new "
                    + "blocks keep every replica local until it is back; tiers {}; blocks so far {}",
                    TiersConf.PFS_HIGH_WATER.key(), srcPath, tiers, counters());
        } else if (plan.kind() != TierPlanner.Kind.VANILLA && lastLoggedKind.getAndSet(plan.kind()) != plan.kind()) {
            LOG.info("Triple-H placement now {} (from {}): {} replicas of {} bytes as {}; tiers {}; blocks so far {}",
                    plan.kind(), srcPath, numOfReplicas, blockBytes, plan.policy(), tiers, counters());
        }
        return plan.policy();
    }

    /**
     * Each tier's totals over the live, in-service DataNodes' writable storages. Blocks scheduled (sent to a
     * DataNode, not yet reported back) are counted per DataNode and type, without their sizes: each stands for
     * {@code blockBytes}, as in BlockPlacementPolicyDefault's own room check.
     */
    private Map<StorageType, TierSpace> tierSpace(long blockBytes) {
        Map<StorageType, TierSpace> tiers = new EnumMap<>(StorageType.class);
        for (Node node : clusterMap.getLeaves(NodeBase.ROOT)) {
            if (!(node instanceof DatanodeDescriptor datanode) || !datanode.isAlive() || !datanode.isInService()) {
                continue;
            }
            Set<StorageType> scheduledCounted = new HashSet<>();
            for (DatanodeStorageInfo storage : datanode.getStorageInfos()) {
                if (!SlipstreamTierBridge.isWritable(storage)) {
                    continue;
                }
                StorageType type = storage.getStorageType();
                long scheduled = scheduledCounted.add(type) ? datanode.getBlocksScheduled(type) * blockBytes : 0;
                tiers.put(type, tiers.getOrDefault(type, TierSpace.ABSENT).plus(
                        SlipstreamTierBridge.capacityBytes(storage), SlipstreamTierBridge.dfsUsedBytes(storage),
                        SlipstreamTierBridge.remainingBytes(storage), scheduled));
            }
        }
        return tiers;
    }

    /** Blocks placed per kind and refused, for log lines and tests: {@code RAM_FIRST=3 ... REFUSED=1}. */
    public String counters() {
        StringBuilder out = new StringBuilder();
        blocksByKind.forEach((kind, count) -> out.append(kind).append('=').append(count.get()).append(' '));
        return out.append("REFUSED=").append(blocksRefused.get()).toString();
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> T sneaky(Throwable t) throws T {
        throw (T) t;
    }
}
