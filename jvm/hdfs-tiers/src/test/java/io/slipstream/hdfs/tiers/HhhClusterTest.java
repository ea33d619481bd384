package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/** HHH on a real mini cluster: where replicas land, their background persistence, RAM filling up, fsck. */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HhhClusterTest {
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TierClusters.conf("hhh");
        // HDFS's own on-demand eviction only, so that RAM fills up here (TierEvictionTest covers the evictor).
        conf.setLong(TiersConf.RAM_EVICT_CHECK_MS.key(), 0);
        cluster = TierClusters.start(conf, "hhh");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    /** Each block: exactly one replica in RAM, the others on SSD or DISK, on the DataNodes as the NameNode says. */
    @Test
    @Order(1)
    void firstReplicaInRamOthersOnPersistentTiers() throws Exception {
        Path path = new Path("/hhh/placement");
        byte[] data = TierClusters.write(fs, path, 2 * BLOCK_BYTES, 1);
        Map<StorageType, Integer> persistent = new EnumMap<>(StorageType.class);
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
            assertEquals(3, block.size(), "replicas of " + block);
            int ram = 0;
            for (TierClusters.Replica replica : block) {
                assertEquals(replica.type(), TierClusters.tierOnDataNode(cluster, replica),
                        "the DataNode holds the replica on the tier the NameNode records");
                if (replica.type() == StorageType.RAM_DISK) {
                    ram++;
                } else {
                    assertTrue(replica.type() == StorageType.SSD || replica.type() == StorageType.DISK, block.toString());
                    persistent.merge(replica.type(), 1, Integer::sum);
                }
            }
            assertEquals(1, ram, "one RAM replica per block: " + block);
        }
        // SSD is far below its high-water mark: the persistent replicas take the faster tier.
        assertEquals(Map.of(StorageType.SSD, 4), persistent, "persistent replicas on SSD while it has room");
        TierClusters.assertReadsBack(fs, path, data);
    }

    /** HDFS's lazy writer saves each RAM replica to a persistent volume of its DataNode in the background. */
    @Test
    @Order(2)
    void ramReplicasArePersistedInTheBackground() throws Exception {
        Path path = new Path("/hhh/persist");
        TierClusters.write(fs, path, BLOCK_BYTES, 2);
        List<TierClusters.Replica> ram = new ArrayList<>();
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
            block.stream().filter(r -> r.type() == StorageType.RAM_DISK).forEach(ram::add);
        }
        assertEquals(1, ram.size(), "one RAM replica");
        TierClusters.await("the RAM replica's lazy-persisted copy", 30, () -> {
            try {
                return TierClusters.lazyPersisted(cluster, ram.get(0));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    /**
     * Writing well past the RAM and SSD tiers' capacity fails nothing: once RAM is full (or past its high-water
     * mark) new blocks go to SSD/DISK, once SSD is, DISK; no DataNode holds more RAM replicas than its RAM disk
     * takes; fsck finds the namespace healthy.
     */
    @Test
    @Order(3)
    void ramFullSpillsToTheNextTierWithoutFailingWrites() throws Exception {
        int files = 10;
        Map<Path, byte[]> written = new HashMap<>();
        for (int i = 0; i < files; i++) {
            Path path = new Path("/hhh/fill/" + i);
            written.put(path, TierClusters.write(fs, path, 2 * BLOCK_BYTES, 100 + i));
        }
        Map<String, Integer> ramBlocksByDataNode = new HashMap<>();
        Map<StorageType, Integer> replicasByTier = new EnumMap<>(StorageType.class);
        int blocksWithoutRam = 0;
        for (Path path : written.keySet()) {
            for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
                assertEquals(3, block.size(), "fully replicated: " + block);
                long ram = block.stream().filter(r -> r.type() == StorageType.RAM_DISK).count();
                assertTrue(ram <= 1, "HHH puts at most one replica in RAM: " + block);
                if (ram == 0) {
                    blocksWithoutRam++;
                }
                block.forEach(r -> replicasByTier.merge(r.type(), 1, Integer::sum));
                block.stream().filter(r -> r.type() == StorageType.RAM_DISK)
                        .forEach(r -> ramBlocksByDataNode.merge(r.datanode().getDatanodeUuid(), 1, Integer::sum));
            }
            TierClusters.assertReadsBack(fs, path, written.get(path));
        }
        // 20 blocks here and 3 before, against 3 RAM disks of 4 blocks each.
        assertTrue(blocksWithoutRam >= 20 - 3 * 4, "blocks spilled past RAM: " + blocksWithoutRam);
        ramBlocksByDataNode.values().forEach(n -> assertTrue(n <= TierClusters.RAM_BYTES / BLOCK_BYTES,
                "RAM replicas per DataNode within its RAM disk: " + ramBlocksByDataNode));
        // 60 replicas against 3 x 4 blocks of RAM and 3 x 8 of SSD (high-water 90 %): DISK takes the rest.
        assertTrue(replicasByTier.getOrDefault(StorageType.DISK, 0) >= 60 - 3 * 4 - 3 * 8,
                "replicas past RAM and SSD on DISK: " + replicasByTier);
        TierClusters.assertFsckHealthy(cluster);
    }

    /** The status command lists every tier with the cluster's capacity and each DataNode's storages. */
    @Test
    @Order(4)
    void statusShowsEachTierAndDataNode() throws Exception {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        TierStatus.print(fs, new java.io.PrintStream(bytes, true, java.nio.charset.StandardCharsets.UTF_8));
        String status = bytes.toString(java.nio.charset.StandardCharsets.UTF_8);
        long[] capacities = {TierClusters.RAM_BYTES, TierClusters.SSD_BYTES, TierClusters.DISK_BYTES};
        for (int i = 0; i < TierClusters.TYPES.length; i++) {
            assertTrue(java.util.regex.Pattern.compile("(?m)^" + TierClusters.TYPES[i] + "\\s+" + 3 * capacities[i] + "\\s")
                    .matcher(status).find(), TierClusters.TYPES[i] + " line in:\n" + status);
        }
        assertEquals(3, status.lines().filter(l -> l.startsWith("datanode ") && l.contains("RAM_DISK=")).count(), status);
    }
}
