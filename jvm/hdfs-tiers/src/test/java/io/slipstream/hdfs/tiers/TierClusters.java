package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.tools.DFSck;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Real HDFS mini clusters with Triple-H loaded on both sides: a NameNode with TieredBlockPlacementPolicy and
 * three DataNodes with TieredFsDatasetFactory, each with a RAM_DISK directory (standing for tmpfs), an SSD
 * and a DISK directory of small, fixed capacities; all on loopback.
 */
final class TierClusters {
    static final int BLOCK_BYTES = 1 << 20;
    /** Four blocks and room for their meta files (a RAM disk of exactly four blocks takes three). */
    static final long RAM_BYTES = 4L * BLOCK_BYTES + (128 << 10);
    static final long SSD_BYTES = 8L * BLOCK_BYTES;
    static final long DISK_BYTES = 64L * BLOCK_BYTES;
    static final StorageType[] TYPES = {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK};

    private TierClusters() {
    }

    static Configuration conf(String mode) {
        Configuration conf = new HdfsConfiguration();
        conf.set(TiersConf.MODE.key(), mode);
        conf.set(DFSConfigKeys.DFS_BLOCK_REPLICATOR_CLASSNAME_KEY, TieredBlockPlacementPolicy.class.getName());
        conf.set(DFSConfigKeys.DFS_DATANODE_FSDATASET_FACTORY_KEY, TieredFsDatasetFactory.class.getName());
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, BLOCK_BYTES);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
        // HDFS admits a lazy-persist replica to RAM within the DataNode's locked-memory allowance.
        conf.setLong(DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_KEY, RAM_BYTES);
        conf.setInt(DFSConfigKeys.DFS_DATANODE_LAZY_WRITER_INTERVAL_SEC, 1);
        conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        return conf;
    }

    /** HHH-L's DataNodes: the three tiers plus an ARCHIVE directory standing for the parallel file system. */
    static final StorageType[] TYPES_WITH_PFS = {StorageType.RAM_DISK, StorageType.SSD, StorageType.DISK, StorageType.ARCHIVE};
    static final long PFS_BYTES = 256L * BLOCK_BYTES;

    static MiniDFSCluster startWithPfs(Configuration conf, String name) throws IOException {
        NativeIO.POSIX.setCacheManipulator(new NativeIO.POSIX.NoMlockCacheManipulator());
        Path base = Files.createTempDirectory("slipstream-hdfs-tiers-" + name);
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3)
                .storagesPerDatanode(TYPES_WITH_PFS.length).storageTypes(TYPES_WITH_PFS)
                .storageCapacities(new long[] {RAM_BYTES, SSD_BYTES, DISK_BYTES, PFS_BYTES}).build();
        cluster.waitActive();
        return cluster;
    }

    static MiniDFSCluster start(Configuration conf, String name) throws IOException {
        // The test JVM may not lock memory (no native Hadoop library here); HDFS's own lazy-persist tests do this.
        NativeIO.POSIX.setCacheManipulator(new NativeIO.POSIX.NoMlockCacheManipulator());
        Path base = Files.createTempDirectory("slipstream-hdfs-tiers-" + name);
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3).storagesPerDatanode(TYPES.length)
                .storageTypes(TYPES).storageCapacities(new long[] {RAM_BYTES, SSD_BYTES, DISK_BYTES}).build();
        cluster.waitActive();
        return cluster;
    }

    /** Writes {@code length} seeded random bytes to {@code path} with replication 3; returns them. */
    static byte[] write(DistributedFileSystem fs, org.apache.hadoop.fs.Path path, int length, long seed)
            throws IOException {
        return write(fs, path, length, seed, (short) 3);
    }

    static byte[] write(DistributedFileSystem fs, org.apache.hadoop.fs.Path path, int length, long seed,
            short replication) throws IOException {
        byte[] data = new byte[length];
        new Random(seed).nextBytes(data);
        try (FSDataOutputStream out = fs.create(path, replication)) {
            out.write(data);
        }
        return data;
    }

    static void assertReadsBack(DistributedFileSystem fs, org.apache.hadoop.fs.Path path, byte[] expected)
            throws IOException {
        byte[] read = new byte[expected.length];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, read);
        }
        assertTrue(java.util.Arrays.equals(expected, read), path + " reads back as written");
    }

    /** One replica of a block: the DataNode and the storage type the NameNode records for it. */
    record Replica(LocatedBlock block, DatanodeInfo datanode, StorageType type) {
    }

    /** Every replica of every block of {@code path}, with the storage types the NameNode records. */
    static List<List<Replica>> replicas(DistributedFileSystem fs, org.apache.hadoop.fs.Path path) throws IOException {
        List<List<Replica>> blocks = new ArrayList<>();
        for (LocatedBlock block : fs.getClient().getLocatedBlocks(path.toString(), 0).getLocatedBlocks()) {
            List<Replica> replicas = new ArrayList<>();
            for (int i = 0; i < block.getLocations().length; i++) {
                replicas.add(new Replica(block, block.getLocations()[i], block.getStorageTypes()[i]));
            }
            blocks.add(replicas);
        }
        return blocks;
    }

    /**
     * The replicas of every block of {@code path} once the NameNode has heard of {@code count} per block (a
     * file closes when each block has its minimum replication reported; the other DataNodes' reports may come
     * a moment later). Fails after 30 s naming the file.
     */
    static List<List<Replica>> awaitReplicas(DistributedFileSystem fs, org.apache.hadoop.fs.Path path, int count)
            throws Exception {
        List<List<List<Replica>>> last = new ArrayList<>();
        await(count + " replicas of each block of " + path + " reported (last seen: " + last + ")", 30, () -> {
            try {
                List<List<Replica>> blocks = replicas(fs, path);
                last.clear();
                last.add(blocks);
                return blocks.stream().allMatch(b -> b.size() == count);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        return last.get(0);
    }

    static DataNode datanode(MiniDFSCluster cluster, DatanodeInfo info) {
        for (DataNode dn : cluster.getDataNodes()) {
            if (dn.getDatanodeUuid().equals(info.getDatanodeUuid())) {
                return dn;
            }
        }
        throw new AssertionError("no DataNode " + info);
    }

    /** The tier of the volume the DataNode itself holds the replica on (its dataset, not the NameNode's record). */
    static StorageType tierOnDataNode(MiniDFSCluster cluster, Replica replica) {
        FsVolumeSpi volume = datanode(cluster, replica.datanode()).getFSDataset().getVolume(replica.block().getBlock());
        assertTrue(volume != null, "DataNode " + replica.datanode() + " holds " + replica.block().getBlock());
        return volume.getStorageType();
    }

    /** True once HDFS's lazy writer saved a copy of a RAM replica on a persistent volume of the same DataNode. */
    static boolean lazyPersisted(MiniDFSCluster cluster, Replica replica) throws IOException {
        DataNode dn = datanode(cluster, replica.datanode());
        String name = "blk_" + replica.block().getBlock().getBlockId();
        try (org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi.FsVolumeReferences volumes =
                dn.getFSDataset().getFsVolumeReferences()) {
            for (FsVolumeSpi volume : volumes) {
                if (volume.isTransientStorage()) {
                    continue;
                }
                try (Stream<Path> files = Files.walk(Path.of(volume.getBaseURI()))) {
                    if (files.anyMatch(f -> f.getFileName().toString().equals(name)
                            && f.toString().contains("lazypersist"))) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    /** Waits (at most {@code seconds}) for a condition HDFS reaches in the background; fails naming it. */
    static void await(String what, int seconds, BooleanSupplier condition) throws InterruptedException {
        await(what, seconds, condition, () -> "");
    }

    /** {@link #await}, with {@code state} (what the condition last saw) in the failure's message. */
    static void await(String what, int seconds, BooleanSupplier condition, java.util.function.Supplier<String> state)
            throws InterruptedException {
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within " + seconds + " s: " + what + "\n" + state.get());
            }
            Thread.sleep(200);
        }
    }

    /** HDFS's fsck on the whole namespace; asserts it reports HEALTHY and returns its output. */
    static String assertFsckHealthy(MiniDFSCluster cluster) throws Exception {
        String report = fsck(cluster, "/");
        assertTrue(report.contains("is HEALTHY"), report);
        return report;
    }

    /** HDFS's fsck of {@code path} with files and blocks listed: its report. */
    static String fsck(MiniDFSCluster cluster, String path) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        new DFSck(cluster.getConfiguration(0), out).run(new String[] {path, "-files", "-blocks"});
        return bytes.toString(StandardCharsets.UTF_8);
    }
}
