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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
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
 * The JVM side of {@code ohb hdfs tiers}: one storage configuration per JVM, on a mini HDFS cluster of a
 * NameNode and three DataNodes, each with a RAM_DISK directory (under {@code --ram-dir}, on tmpfs), an SSD
 * and a DISK directory (under {@code --disk-dir}, on the disk). Configurations: {@code hot} (vanilla HDFS,
 * default policy: every replica on DISK), {@code lazy-persist} and {@code all-ssd} (vanilla HDFS with that
 * storage policy on the written directory), {@code hhh} and {@code hhh-m} (Triple-H, {@code jvm/hdfs-tiers};
 * HHH-M's files marked short-lived with LAZY_PERSIST), {@code hhh-l} and {@code hhh-l-bb} (each DataNode also
 * has an ARCHIVE directory standing for a parallel file system; hhh-l-bb writes its replica through the burst
 * buffer at {@code --bb-servers}, a slipstream-cache that {@code ohb} runs; {@link TiersPfs}). OHB's SWT: {@code writers} threads each write their
 * own file per run (aggregate MB/s when every {@code close()} returned, and for configurations with RAM
 * replicas also when HDFS's lazy writer had persisted every one of them), after one untimed warm-up file
 * per writer; then SRT: as many readers read
 * one run's files at once, contents checked (CRC32). After the runs, every replica must be on the tier the
 * configuration promises, in the NameNode's locations and the DataNode's own volume, else the run fails.
 * Prints one {@code OHB_TIERS_RESULT {json}} line; exits 1 on a failure.
 */
public final class TiersBench {
    static final List<String> CONFIGS = List.of("hot", "lazy-persist", "all-ssd", "hhh", "hhh-m", "hhh-l", "hhh-l-bb");
    private static final StorageType[] TYPES = {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK};
    private static final StorageType[] TYPES_WITH_PFS =
            {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK, StorageType.ARCHIVE};
    private static final Path DIR = new Path("/ohb-tiers");
    /** Every file's replication (OHB's SWT); HHH-L's local-storage target is (r-1)/r of HOT's. */
    private static final short REPLICATION = 3;
    /** How long HDFS gets to report every replica and to persist every RAM replica. */
    private static final long SETTLE_MS_MAX = 120_000;
    private static final long POLL_MS = 20;
    private static final int CHUNK_BYTES = 1 << 20;
    private static final int SHIFT_BYTES_MAX = 64 << 10;

    private TiersBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        o.put("config", "hot");
        o.put("writers", "2");
        o.put("file-bytes", String.valueOf(128 << 20));
        o.put("block-bytes", String.valueOf(64 << 20));
        o.put("runs", "3");
        o.put("buffer-bytes", String.valueOf(128 << 10));
        o.put("ram-dir", "/dev/shm/ohb-hdfs-tiers");
        o.put("disk-dir", "build/ohb-hdfs-tiers");
        o.put("sync-on-close", "false");
        o.put("bb-servers", "");
        o.put("bb-max-pending-bytes", "0");
        for (int i = 0; i < args.length; i++) {
            String key = args[i].replaceFirst("^--", "");
            if (!o.containsKey(key) || i + 1 >= args.length) {
                System.err.println("usage: TiersBench --config " + String.join("|", CONFIGS) + " [--writers N] [--file-bytes N]"
                        + " [--block-bytes N] [--runs N] [--buffer-bytes N] [--ram-dir DIR] [--disk-dir DIR] [--sync-on-close true|false]"
                        + " [--bb-servers HOST:PORT --bb-max-pending-bytes N (hhh-l-bb)]");
                System.exit(2);
            }
            o.put(key, args[++i]);
        }
        String config = o.get("config");
        if (!CONFIGS.contains(config)) {
            System.err.println("unknown configuration " + config + "; one of " + CONFIGS);
            System.exit(2);
        }
        int writers = Integer.parseInt(o.get("writers"));
        long fileBytes = Long.parseLong(o.get("file-bytes"));
        long blockBytes = Long.parseLong(o.get("block-bytes"));
        int runs = Integer.parseInt(o.get("runs"));
        int bufferBytes = Integer.parseInt(o.get("buffer-bytes"));
        long ramBytesPerDataNode = ramBytesPerDataNode(runs, writers, fileBytes, blockBytes);
        boolean syncOnClose = Boolean.parseBoolean(o.get("sync-on-close"));

        Map<String, Object> result = new LinkedHashMap<>();
        result.put("config", config);
        result.put("writers", writers);
        result.put("file_bytes", fileBytes);
        result.put("block_bytes", blockBytes);
        result.put("runs", runs);
        result.put("ram_bytes_per_datanode", ramBytesPerDataNode);
        result.put("sync_on_close", syncOnClose);
        result.put("replication", REPLICATION);
        boolean ok = true;
        String failure = "";
        MiniDFSCluster cluster = null;
        try {
            Configuration conf = new HdfsConfiguration();
            if (config.equals("hhh-l-bb")) {
                TiersPfs.configureBurstBuffer(conf, o.get("bb-servers"), Long.parseLong(o.get("bb-max-pending-bytes")));
                result.put("bb_servers", o.get("bb-servers"));
            }
            cluster = start(conf, config, blockBytes, ramBytesPerDataNode, syncOnClose, java.nio.file.Path.of(o.get("ram-dir")),
                    java.nio.file.Path.of(o.get("disk-dir")), result);
            DistributedFileSystem fs = cluster.getFileSystem();
            fs.mkdirs(DIR);
            switch (config) {
                case "lazy-persist", "hhh-m" -> fs.setStoragePolicy(DIR, HdfsConstants.MEMORY_STORAGE_POLICY_NAME);
                case "all-ssd" -> fs.setStoragePolicy(DIR, HdfsConstants.ALLSSD_STORAGE_POLICY_NAME);
                default -> { }
            }
            String why = measure(cluster, fs, config, writers, fileBytes, runs, bufferBytes, result);
            if (why != null) {
                ok = false;
                failure = config + ": " + why;
            }
        } catch (Exception e) {
            ok = false;
            failure = config + ": " + e;
            e.printStackTrace();
        } finally {
            // hhh-l-bb: ohb stops the cache after this JVM, so the DataNodes still reach it while they stop.
            if (cluster != null) {
                cluster.shutdown(true);
            }
        }
        result.put("ok", ok);
        result.put("failure", failure);
        System.out.println("OHB_TIERS_RESULT " + HdfsBench.json(result));
        if (!ok) {
            System.err.println("ohb hdfs tiers: " + failure);
        }
        System.exit(ok ? 0 : 1);
    }

    /**
     * Each DataNode's RAM tier: every block of every run once (HHH-M puts a replica of each block on each of
     * the three DataNodes), within 60 % of it, so that neither HHH-M's budget (70 % of the RAM tier) nor the
     * RAM evictor's high-water mark (90 %) is reached and the configurations are measured, not their limits.
     * Block-rounded, plus a 64 KiB meta file per block.
     */
    static long ramBytesPerDataNode(int runs, int writers, long fileBytes, long blockBytes) {
        long blocksPerFile = (fileBytes + blockBytes - 1) / blockBytes;
        long blocks = (long) (runs + 1) * writers * blocksPerFile; // + the warm-up files
        return blocks * (blockBytes + (64 << 10)) * 10 / 6;
    }

    private static MiniDFSCluster start(Configuration conf, String config, long blockBytes, long ramBytesPerDataNode, boolean syncOnClose,
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
            conf.set("slipstream.hdfs.tiers.mode", config);
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

    /** The runs, then the placement check; returns null or why the run failed. */
    private static String measure(MiniDFSCluster cluster, DistributedFileSystem fs, String config, int writers, long fileBytes,
            int runs, int bufferBytes, Map<String, Object> result) throws Exception {
        double[] ackedMbS = new double[runs];
        double[] persistedMbS = new double[runs];
        double[] readMbS = new double[runs];
        Map<Integer, Long> crcs = new LinkedHashMap<>();
        long persistWaitMsMax = 0;
        ExecutorService pool = Executors.newFixedThreadPool(writers);
        try {
            // One untimed file per writer first (class loading, JIT, the pipelines' first connections).
            List<Future<Long>> warmUp = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                Path path = new Path(DIR, "warm-up-" + w);
                byte[] source = source(-1 - w);
                warmUp.add(pool.submit(() -> write(fs, path, fileBytes, source)));
            }
            for (Future<Long> f : warmUp) {
                f.get();
            }
            for (int run = 0; run < runs; run++) {
                byte[][] sources = new byte[writers][];
                for (int w = 0; w < writers; w++) {
                    sources[w] = source(run * writers + w);
                }
                long start = System.nanoTime();
                Map<Integer, Future<Long>> written = new LinkedHashMap<>();
                for (int w = 0; w < writers; w++) {
                    int f = run * writers + w;
                    byte[] source = sources[w];
                    written.put(f, pool.submit(() -> write(fs, file(f), fileBytes, source)));
                }
                for (Map.Entry<Integer, Future<Long>> e : written.entrySet()) {
                    crcs.put(e.getKey(), e.getValue().get());
                }
                long acked = System.nanoTime();
                // Durable as vanilla HOT once no replica is left only in RAM: HDFS's lazy writer counts each
                // RAM replica it finished copying to a persistent volume (RamDiskBlocksLazyPersisted).
                // HHH-L-BB: and once the burst buffer has flushed every replica to the parallel file system.
                boolean bb = config.equals("hhh-l-bb");
                long[] ram = ramCounters(cluster);
                long pending = bb ? TiersPfs.pending(cluster) : 0;
                long deadline = acked + SETTLE_MS_MAX * 1_000_000;
                while (ram[1] < ram[0] || pending > 0) {
                    if (System.nanoTime() > deadline) {
                        return "run " + run + ": " + ram[1] + " of " + ram[0] + " RAM replicas persisted, " + pending
                                + " replicas in the burst buffer after " + SETTLE_MS_MAX + " ms";
                    }
                    Thread.sleep(POLL_MS);
                    ram = ramCounters(cluster);
                    pending = bb ? TiersPfs.pending(cluster) : 0;
                }
                long persisted = System.nanoTime();
                double bytes = (double) writers * fileBytes;
                ackedMbS[run] = bytes / 1e6 / ((acked - start) / 1e9);
                persistedMbS[run] = bytes / 1e6 / ((persisted - start) / 1e9);
                persistWaitMsMax = Math.max(persistWaitMsMax, (persisted - acked) / 1_000_000);
            }
            for (int run = 0; run < runs; run++) {
                long start = System.nanoTime();
                List<Future<HdfsBench.Read>> reads = new ArrayList<>();
                for (int w = 0; w < writers; w++) {
                    int f = run * writers + w;
                    reads.add(pool.submit(() -> HdfsBench.readAll(fs, file(f), bufferBytes)));
                }
                long bytes = 0;
                for (int w = 0; w < writers; w++) {
                    HdfsBench.Read read = reads.get(w).get();
                    int f = run * writers + w;
                    if (read.crc() != crcs.get(f) || read.bytes() != fileBytes) {
                        return "file " + f + ": " + read.bytes() + " bytes of CRC " + read.crc() + " read, " + fileBytes + " of CRC "
                                + crcs.get(f) + " written";
                    }
                    bytes += read.bytes();
                }
                readMbS[run] = bytes / 1e6 / ((System.nanoTime() - start) / 1e9);
            }
        } finally {
            pool.shutdownNow();
        }
        put(result, "write_mb_s", ackedMbS);
        put(result, "write_persisted_mb_s", persistedMbS);
        put(result, "read_mb_s", readMbS);
        result.put("persist_wait_ms_max", persistWaitMsMax);
        long[] ram = ramCounters(cluster);
        result.put("ram_blocks_written", ram[0]);
        result.put("ram_blocks_persisted", ram[1]);
        return checkPlacement(cluster, fs, config, runs * writers, result);
    }

    /** A file's source bytes, generated before the timed write: seeded random, a chunk and a shift window long. */
    private static byte[] source(long seed) {
        byte[] bytes = new byte[CHUNK_BYTES + SHIFT_BYTES_MAX];
        new java.util.Random(seed).nextBytes(bytes);
        return bytes;
    }

    /**
     * Writes {@code bytes} from {@code source} with replication 3, chunk {@code i} from a shifting offset so that
     * no two neighbouring chunks are equal; returns their CRC32. Generating random bytes in the timed loop
     * (HdfsBench's {@code write}) took a fifth of the JVM's CPU samples in JFR, on a machine where the
     * pipeline's three DataNodes share two cores with the writers.
     */
    private static long write(DistributedFileSystem fs, Path path, long bytes, byte[] source) throws IOException {
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(path, REPLICATION)) {
            long chunk = 0;
            for (long left = bytes; left > 0; chunk++) {
                int n = (int) Math.min(CHUNK_BYTES, left);
                int offset = (int) (chunk * 4099 % SHIFT_BYTES_MAX);
                out.write(source, offset, n);
                crc.update(source, offset, n);
                left -= n;
            }
        }
        return crc.getValue();
    }

    /** Median and maximum of one figure over the runs. */
    private static void put(Map<String, Object> result, String key, double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        result.put(key, sorted[sorted.length / 2]);
        result.put(key + "_max", sorted[sorted.length - 1]);
    }

    /**
     * Every block of every file has three replicas, each on the tier the configuration promises, in the
     * NameNode's locations and on the DataNode's own volume; counts replicas per tier into the result.
     */
    private static String checkPlacement(MiniDFSCluster cluster, DistributedFileSystem fs, String config, int files,
            Map<String, Object> result) throws Exception {
        Map<StorageType, Integer> replicasByTier = new EnumMap<>(StorageType.class);
        int blocks = 0;
        long localBytes = 0;
        for (int f = 0; f < files; f++) {
            for (LocatedBlock block : awaitReplicas(fs, file(f), REPLICATION)) {
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
                    return "file " + f + ", " + block.getBlock() + " on " + Arrays.toString(types) + ": " + why;
                }
            }
        }
        result.put("blocks", blocks);
        for (StorageType type : TYPES_WITH_PFS) {
            result.put("replicas_" + type.name().toLowerCase(java.util.Locale.ROOT), replicasByTier.getOrDefault(type, 0));
        }
        // Bytes on the DataNodes' own tiers (not the parallel file system) per block written: HHH-L's target.
        result.put("local_bytes_per_block", blocks == 0 ? 0.0 : (double) localBytes / blocks);
        if (config.equals("hhh-l-bb")) {
            long deadline = System.nanoTime() + SETTLE_MS_MAX * 1_000_000;
            while (TiersPfs.pending(cluster) > 0) {
                if (System.nanoTime() > deadline) {
                    return TiersPfs.pending(cluster) + " replicas still in the burst buffer after " + SETTLE_MS_MAX + " ms";
                }
                Thread.sleep(POLL_MS);
            }
            return TiersPfs.checkBurstBuffer(cluster, TiersPfs.blocksWritten(fs, DIR), result);
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
            case "hhh-l", "hhh-l-bb" -> archive == 1 && ram == 1 ? null
                    : "HHH-L puts one replica on the parallel file system (ARCHIVE), one in RAM, the other on SSD/DISK";
            default -> "unknown configuration";
        };
    }

    /** Blocks written to RAM and RAM replicas persisted, summed over the DataNodes (HDFS's own counters). */
    private static long[] ramCounters(MiniDFSCluster cluster) {
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

    private static Path file(int index) {
        return new Path(DIR, "file-" + index);
    }
}
