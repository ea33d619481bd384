package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.tiers.TieredBlockPlacementPolicy;
import io.slipstream.hdfs.tiers.TieredFsDatasetFactory;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.FsVolumeImpl;
import org.apache.hadoop.io.nativeio.NativeIO;
import org.apache.hadoop.metrics2.AbstractMetric;
import org.apache.hadoop.metrics2.MetricsRecord;
import org.apache.hadoop.metrics2.impl.MetricsCollectorImpl;
import org.apache.hadoop.metrics2.lib.DefaultMetricsSystem;

/**
 * The mini cluster of {@code ohb hdfs tiers}' storage configurations, shared by its benchmarks (OHB's SWT/SRT in
 * {@link TiersBench}, Hadoop's TestDFSIO in {@link TiersDfsioBench}) so that both measure the same layout: a
 * NameNode and three DataNodes, each with a RAM_DISK directory (under {@code ramDir}, on tmpfs), an SSD and a
 * DISK directory (under {@code diskDir}, on the disk), and for {@code hhh-l}/{@code hhh-l-bb} an ARCHIVE
 * directory standing for a parallel file system ({@link TiersPfs}); the Triple-H settings of the {@code hhh*}
 * modes; the storage policy a configuration puts on the directory it writes; and the checks that every replica
 * is where the configuration promises and that every RAM (and burst buffer) replica was persisted.
 */
final class TiersCluster {
    static final List<String> CONFIGS = List.of("hot", "lazy-persist", "all-ssd", "hhh", "hhh-m", "hhh-l", "hhh-l-bb",
            "hhh-l-bb-fabric");
    private static final StorageType[] TYPES = {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK};
    private static final StorageType[] TYPES_WITH_PFS =
            {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK, StorageType.ARCHIVE};
    /** Every file's replication (OHB's SWT); HHH-L's local-storage target is (r-1)/r of HOT's. */
    static final short REPLICATION = 3;
    /** How long HDFS gets to report every replica and to persist every RAM replica. */
    static final long SETTLE_MS_MAX = 120_000;
    private static final long POLL_MS = 20;

    private TiersCluster() {}

    /** What a benchmark does on the started cluster: null, or why the run failed. */
    interface Measure {
        String run(MiniDFSCluster cluster, DistributedFileSystem fs) throws Exception;
    }

    /**
     * The options {@link #runAndExit} reads, with their defaults; a benchmark adds its own. {@code ohb} passes the
     * directories (per run, removed afterwards) and, for hhh-l-bb, the burst buffer it started.
     */
    static Map<String, String> clusterOptions(String ramDir, String diskDir) {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("config", "hot");
        options.put("ram-dir", ramDir);
        options.put("disk-dir", diskDir);
        options.put("bb-servers", "");
        options.put("bb-max-pending-bytes", "0");
        return options;
    }

    /**
     * One configuration's JVM: starts its cluster ({@code --ram-dir}, {@code --disk-dir}; for HHH-L-BB the burst
     * buffer at {@code --bb-servers} with {@code --bb-max-pending-bytes}, which {@code ohb} runs), measures, shuts the
     * cluster down, prints {@code resultPrefix} and the result as JSON on stdout and exits: 0, or 1 with the failure
     * on stderr after {@code failurePrefix} (the lines {@code ohb} quotes).
     */
    static void runAndExit(Map<String, String> options, long blockBytes, long ramBytesPerDataNode, boolean syncOnClose,
            Map<String, Object> result, String resultPrefix, String failurePrefix, Measure measure) {
        String config = options.get("config");
        result.put("config", config);
        result.put("ram_bytes_per_datanode", ramBytesPerDataNode);
        result.put("replication", REPLICATION);
        String failure = null;
        MiniDFSCluster cluster = null;
        try {
            Configuration conf = new HdfsConfiguration();
            if (TiersPfs.burstBuffered(config)) {
                TiersPfs.configureBurstBuffer(conf, config, options.get("bb-servers"),
                        Long.parseLong(options.get("bb-max-pending-bytes")));
                result.put("bb_servers", options.get("bb-servers"));
            }
            cluster = start(conf, config, blockBytes, ramBytesPerDataNode, syncOnClose, java.nio.file.Path.of(options.get("ram-dir")),
                    java.nio.file.Path.of(options.get("disk-dir")), result);
            failure = measure.run(cluster, cluster.getFileSystem());
        } catch (Exception e) {
            failure = e.toString();
            e.printStackTrace();
        } finally {
            // hhh-l-bb: ohb stops the cache after this JVM, so the DataNodes still reach it while they stop.
            if (cluster != null) {
                cluster.shutdown(true);
            }
        }
        boolean ok = failure == null;
        result.put("ok", ok);
        result.put("failure", ok ? "" : config + ": " + failure);
        System.out.println(resultPrefix + " " + HdfsBench.json(result));
        if (!ok) {
            System.err.println(failurePrefix + ": " + config + ": " + failure);
        }
        System.exit(ok ? 0 : 1);
    }

    /** Exits 2 with the list unless {@code config} is one of {@link #CONFIGS}. */
    static void requireConfig(String config) {
        if (!CONFIGS.contains(config)) {
            System.err.println("unknown configuration " + config + "; one of " + CONFIGS);
            System.exit(2);
        }
    }

    /**
     * Each DataNode's RAM tier for {@code blocks} blocks: every one of them once (HHH-M puts a replica of each
     * block on each of the three DataNodes), within 60 % of it, so that neither HHH-M's budget (70 % of the RAM
     * tier) nor the RAM evictor's high-water mark (90 %) is reached and the configurations are measured, not their
     * limits. Plus a 64 KiB meta file per block.
     */
    static long ramBytesPerDataNode(long blocks, long blockBytes) {
        return blocks * (blockBytes + (64 << 10)) * 10 / 6;
    }

    /** Starts the configuration's cluster on {@code conf} (which the caller may have given more settings). */
    static MiniDFSCluster start(Configuration conf, String config, long blockBytes, long ramBytesPerDataNode, boolean syncOnClose,
            java.nio.file.Path ramDir, java.nio.file.Path diskDir, Map<String, Object> result) throws IOException {
        java.nio.file.Path base = diskDir.resolve("namenode");
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, blockBytes);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, REPLICATION);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
        // The same settings for every configuration: the lazy writer's idle interval at its minimum (HDFS's
        // default, 60 s, would make "until persisted" a measure of the interval), readers served by the
        // fastest storage type among equally near replicas (HDFS's own option, off by default), and
        // lazy-persist replicas in RAM on every DataNode of the pipeline, not only the writer's (all of them
        // are on this host, so HDFS would otherwise take the writer as remote for some).
        conf.setInt(DFSConfigKeys.DFS_DATANODE_LAZY_WRITER_INTERVAL_SEC, 1);
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
        conf.setBoolean(DFSConfigKeys.DFS_DATANODE_NON_LOCAL_LAZY_PERSIST, true);
        conf.setLong(DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_KEY, ramBytesPerDataNode);
        // Off by default in HDFS (block files reach the page cache, not the device, at close); on, each
        // DataNode fsyncs a finished block file, which on tmpfs costs nothing.
        conf.setBoolean(DFSConfigKeys.DFS_DATANODE_SYNCONCLOSE_KEY, syncOnClose);
        if (config.startsWith("hhh")) {
            conf.set("slipstream.hdfs.tiers.mode", TiersPfs.mode(config));
            conf.set(DFSConfigKeys.DFS_BLOCK_REPLICATOR_CLASSNAME_KEY, TieredBlockPlacementPolicy.class.getName());
            conf.set(DFSConfigKeys.DFS_DATANODE_FSDATASET_FACTORY_KEY, TieredFsDatasetFactory.class.getName());
        }
        boolean pfs = TiersPfs.usesPfs(config);
        if (pfs) {
            TiersPfs.configure(conf);
        }
        StorageType[] types = pfs ? TYPES_WITH_PFS : TYPES;
        // Without the native Hadoop library nothing is locked; HDFS's own lazy-persist tests do the same.
        NativeIO.POSIX.setCacheManipulator(new NativeIO.POSIX.NoMlockCacheManipulator());
        Configuration[] overlays = new Configuration[3];
        List<String> dirs = new ArrayList<>();
        for (int dn = 0; dn < 3; dn++) {
            java.nio.file.Path ram = Files.createDirectories(ramDir.resolve("dn" + dn));
            java.nio.file.Path ssd = Files.createDirectories(diskDir.resolve("ssd").resolve("dn" + dn));
            java.nio.file.Path disk = Files.createDirectories(diskDir.resolve("disk").resolve("dn" + dn));
            overlays[dn] = new Configuration(false);
            String dataDirs = "[RAM_DISK]" + ram.toUri() + ",[SSD]" + ssd.toUri() + ",[DISK]" + disk.toUri();
            if (pfs) {
                // The parallel file system: one directory per DataNode, as on a cluster's shared mount.
                dataDirs += ",[ARCHIVE]" + Files.createDirectories(diskDir.resolve("pfs").resolve("dn" + dn)).toUri();
            }
            overlays[dn].set(DFSConfigKeys.DFS_DATANODE_DATA_DIR_KEY, dataDirs);
            dirs.add(dataDirs);
        }
        result.put("datanode_dirs", String.join(" ; ", dirs));
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3).storagesPerDatanode(types.length)
                .manageDataDfsDirs(false).dataNodeConfOverlays(overlays).build();
        cluster.waitActive();
        // The RAM tier's size, as a tmpfs mounted with size= would give it (the shared /dev/shm is far larger).
        for (DataNode dn : cluster.getDataNodes()) {
            try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
                for (FsVolumeSpi volume : volumes) {
                    if (volume.isTransientStorage()) {
                        ((FsVolumeImpl) volume).setCapacityForTesting(ramBytesPerDataNode);
                    }
                }
            }
        }
        cluster.triggerHeartbeats();
        return cluster;
    }

    /**
     * Creates {@code dir} with the storage policy of the configuration: vanilla's LAZY_PERSIST, HHH-M's short-lived
     * mark (the same policy) and ALL_SSD; the others keep HDFS's default (HOT), under which Triple-H's modes place.
     */
    static void makeDir(DistributedFileSystem fs, Path dir, String config) throws IOException {
        fs.mkdirs(dir);
        switch (config) {
            case "lazy-persist", "hhh-m" -> fs.setStoragePolicy(dir, HdfsConstants.MEMORY_STORAGE_POLICY_NAME);
            case "all-ssd" -> fs.setStoragePolicy(dir, HdfsConstants.ALLSSD_STORAGE_POLICY_NAME);
            default -> { }
        }
    }

    /**
     * Waits until no replica is left only in RAM (HDFS's lazy writer counts each RAM replica it finished copying to a
     * persistent volume: RamDiskBlocksLazyPersisted against RamDiskBlocksWrite) and, for HHH-L-BB, none only in the
     * burst buffer: the durability of vanilla HOT. Null once there, else (after {@link #SETTLE_MS_MAX}) how far it got.
     */
    static String awaitPersisted(MiniDFSCluster cluster, String config) throws InterruptedException {
        boolean bb = TiersPfs.burstBuffered(config);
        long deadline = System.nanoTime() + SETTLE_MS_MAX * 1_000_000;
        long[] ram = ramCounters(cluster);
        long pending = bb ? TiersPfs.pending(cluster) : 0;
        while (ram[1] < ram[0] || pending > 0) {
            if (System.nanoTime() > deadline) {
                return ram[1] + " of " + ram[0] + " RAM replicas persisted, " + pending + " replicas in the burst buffer after "
                        + SETTLE_MS_MAX + " ms";
            }
            Thread.sleep(POLL_MS);
            ram = ramCounters(cluster);
            pending = bb ? TiersPfs.pending(cluster) : 0;
        }
        return null;
    }

    /**
     * Every block of every one of {@code files} has three replicas, each on the tier the configuration promises, in
     * the NameNode's locations and on the DataNode's own volume; counts replicas per tier into the result. For
     * HHH-L-BB then also: every block of the files under {@code dir} went through the burst buffer and was flushed.
     */
    static String checkPlacement(MiniDFSCluster cluster, DistributedFileSystem fs, String config, List<Path> files, Path dir,
            Map<String, Object> result) throws Exception {
        Map<StorageType, Integer> replicasByTier = new EnumMap<>(StorageType.class);
        int blocks = 0;
        long localBytes = 0;
        for (Path file : files) {
            for (LocatedBlock block : awaitReplicas(fs, file, REPLICATION)) {
                blocks++;
                StorageType[] types = block.getStorageTypes();
                for (int i = 0; i < types.length; i++) {
                    DataNode dn = datanode(cluster, block.getLocations()[i].getDatanodeUuid());
                    FsVolumeSpi volume = dn.getFSDataset().getVolume(block.getBlock());
                    StorageType onDataNode = volume == null ? null : volume.getStorageType();
                    if (onDataNode != types[i]) {
                        return block.getBlock() + ": the NameNode records " + types[i] + " on " + block.getLocations()[i]
                                + ", the DataNode holds it on " + onDataNode;
                    }
                    replicasByTier.merge(types[i], 1, Integer::sum);
                    if (types[i] != StorageType.ARCHIVE) {
                        localBytes += block.getBlockSize();
                    }
                }
                String why = expectedTiers(config, types);
                if (why != null) {
                    return file + ", " + block.getBlock() + " on " + Arrays.toString(types) + ": " + why;
                }
            }
        }
        result.put("blocks", blocks);
        for (StorageType type : TYPES_WITH_PFS) {
            result.put("replicas_" + type.name().toLowerCase(java.util.Locale.ROOT), replicasByTier.getOrDefault(type, 0));
        }
        // Bytes on the DataNodes' own tiers (not the parallel file system) per block written: HHH-L's target.
        result.put("local_bytes_per_block", blocks == 0 ? 0.0 : (double) localBytes / blocks);
        if (TiersPfs.burstBuffered(config)) {
            long deadline = System.nanoTime() + SETTLE_MS_MAX * 1_000_000;
            while (TiersPfs.pending(cluster) > 0) {
                if (System.nanoTime() > deadline) {
                    return TiersPfs.pending(cluster) + " replicas still in the burst buffer after " + SETTLE_MS_MAX + " ms";
                }
                Thread.sleep(POLL_MS);
            }
            return TiersPfs.checkBurstBuffer(cluster, TiersPfs.blocksWritten(fs, dir), result);
        }
        return null;
    }

    /** Null if a block's replicas are where the configuration says, else what is wrong. */
    static String expectedTiers(String config, StorageType[] types) {
        long ram = Arrays.stream(types).filter(t -> t == StorageType.RAM_DISK).count();
        long ssd = Arrays.stream(types).filter(t -> t == StorageType.SSD).count();
        long disk = Arrays.stream(types).filter(t -> t == StorageType.DISK).count();
        long archive = Arrays.stream(types).filter(t -> t == StorageType.ARCHIVE).count();
        if (types.length != REPLICATION) {
            return types.length + " replicas, expected " + REPLICATION;
        }
        return switch (config) {
            case "hot" -> disk == 3 ? null : "HOT puts every replica on DISK";
            case "all-ssd" -> ssd == 3 ? null : "ALL_SSD puts every replica on SSD";
            case "lazy-persist", "hhh-m" -> ram == 3 ? null : "every replica in RAM (the RAM tier has room for all)";
            case "hhh" -> ram == 1 ? null : "HHH puts exactly one replica in RAM, the others on SSD/DISK";
            case "hhh-l", "hhh-l-bb", "hhh-l-bb-fabric" -> archive == 1 && ram == 1 ? null
                    : "HHH-L puts one replica on the parallel file system (ARCHIVE), one in RAM, the other on SSD/DISK";
            default -> "unknown configuration";
        };
    }

    /**
     * Bytes used on each DataNode's volumes of each tier (HDFS's own dfsUsed, which the tiers' free space is computed
     * from), keyed "DataNode uuid/tier".
     */
    static Map<String, Long> usedBytesByTier(MiniDFSCluster cluster) throws IOException {
        Map<String, Long> used = new java.util.TreeMap<>();
        for (DataNode dn : cluster.getDataNodes()) {
            try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
                for (FsVolumeSpi volume : volumes) {
                    used.merge(dn.getDatanodeUuid() + "/" + volume.getStorageType(), ((FsVolumeImpl) volume).getDfsUsed(), Long::sum);
                }
            }
        }
        return used;
    }

    /**
     * Deletes {@code dir} and waits until no DataNode holds a replica of any block of its files and the RAM and SSD
     * tiers' used bytes are no higher than {@code usedBefore}'s: the space the files took on the small, fast tiers
     * (whose free space placement weighs) is free again. DISK is not waited for: after the delete its dfsUsed kept
     * the bytes of the lazy persister's copies of RAM replicas (seen: 33.8 MB per DataNode for two minutes, with no
     * replica held), which HDFS's periodic du corrects later; a few tens of MB on the large tier do not change a
     * placement. Null, or what was still held after {@link #SETTLE_MS_MAX}.
     */
    static String deleteAndAwaitFreed(MiniDFSCluster cluster, DistributedFileSystem fs, Path dir, Map<String, Long> usedBefore)
            throws Exception {
        List<Long> blockIds = new ArrayList<>();
        org.apache.hadoop.fs.RemoteIterator<org.apache.hadoop.fs.LocatedFileStatus> files = fs.listFiles(dir, true);
        while (files.hasNext()) {
            String file = files.next().getPath().toUri().getPath();
            for (LocatedBlock block : fs.getClient().getLocatedBlocks(file, 0).getLocatedBlocks()) {
                blockIds.add(block.getBlock().getBlockId());
            }
        }
        if (!fs.delete(dir, true)) {
            return "could not delete " + dir;
        }
        String bpid = cluster.getNamesystem().getBlockPoolId();
        long deadline = System.nanoTime() + SETTLE_MS_MAX * 1_000_000;
        while (true) {
            long held = 0;
            for (DataNode dn : cluster.getDataNodes()) {
                for (long id : blockIds) {
                    if (dn.getFSDataset().getStoredBlock(bpid, id) != null) {
                        held++;
                    }
                }
            }
            Map<String, Long> used = usedBytesByTier(cluster);
            List<String> above = new ArrayList<>();
            used.forEach((tier, bytes) -> {
                boolean fastTier = tier.endsWith("/" + StorageType.RAM_DISK) || tier.endsWith("/" + StorageType.SSD);
                if (fastTier && bytes > usedBefore.getOrDefault(tier, 0L)) {
                    above.add(tier + " " + bytes + " B (before " + usedBefore.getOrDefault(tier, 0L) + ")");
                }
            });
            if (held == 0 && above.isEmpty()) {
                return null;
            }
            if (System.nanoTime() > deadline) {
                return dir + " deleted, but after " + SETTLE_MS_MAX + " ms " + held + " replicas of its " + blockIds.size()
                        + " blocks are still held, tiers above their earlier use: " + above;
            }
            Thread.sleep(POLL_MS);
        }
    }

    /** Blocks written to RAM and RAM replicas persisted, summed over the DataNodes (HDFS's own counters). */
    static long[] ramCounters(MiniDFSCluster cluster) {
        long[] counts = new long[2];
        for (DataNode dn : cluster.getDataNodes()) {
            MetricsCollectorImpl collector = new MetricsCollectorImpl();
            DefaultMetricsSystem.instance().getSource(dn.getMetrics().name()).getMetrics(collector, true);
            for (MetricsRecord record : collector.getRecords()) {
                for (AbstractMetric metric : record.metrics()) {
                    switch (metric.name()) {
                        case "RamDiskBlocksWrite" -> counts[0] += metric.value().longValue();
                        case "RamDiskBlocksLazyPersisted" -> counts[1] += metric.value().longValue();
                        default -> { }
                    }
                }
            }
        }
        return counts;
    }

    /** The file's blocks once the NameNode has heard of {@code count} replicas of each (reports may trail the close). */
    private static List<LocatedBlock> awaitReplicas(DistributedFileSystem fs, Path path, int count) throws Exception {
        long deadline = System.nanoTime() + SETTLE_MS_MAX * 1_000_000;
        while (true) {
            List<LocatedBlock> blocks = fs.getClient().getLocatedBlocks(path.toString(), 0).getLocatedBlocks();
            if (blocks.stream().allMatch(b -> b.getLocations().length == count)) {
                return blocks;
            }
            if (System.nanoTime() > deadline) {
                throw new IOException(path + ": not " + count + " replicas of each block within " + SETTLE_MS_MAX + " ms: " + blocks);
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static DataNode datanode(MiniDFSCluster cluster, String uuid) {
        return cluster.getDataNodes().stream().filter(dn -> dn.getDatanodeUuid().equals(uuid)).findFirst()
                .orElseThrow(() -> new IllegalStateException("no DataNode " + uuid));
    }
}
