package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.DataNodeTestUtils;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * HHH-L on a real mini cluster: each DataNode has an ARCHIVE directory standing for its directory on a
 * parallel file system. One replica per block there, the others local; readers sent to local replicas first;
 * the parallel file system failing under the DataNodes loses nothing and new blocks stay local.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HhhlClusterTest {
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    private static byte[] firstFile;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TierClusters.conf("hhh-l");
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
        // A DataNode whose parallel file system directory fails keeps running on its local volumes.
        conf.setInt(DFSConfigKeys.DFS_DATANODE_FAILED_VOLUMES_TOLERATED_KEY, 1);
        // The DataNode checks a volume at most every 15 min by default; the test's checks must not be skipped.
        conf.setTimeDuration(DFSConfigKeys.DFS_DATANODE_DISK_CHECK_MIN_GAP_KEY, 0, java.util.concurrent.TimeUnit.MILLISECONDS);
        conf.setLong(TiersConf.RAM_EVICT_CHECK_MS.key(), 0);
        cluster = TierClusters.startWithPfs(conf, "hhhl");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    /** Each block: one replica on ARCHIVE (the parallel file system), two local (RAM first, then SSD). */
    @Test
    @Order(1)
    void oneReplicaOnTheParallelFileSystemTheOthersLocal() throws Exception {
        Path path = new Path("/hhhl/placement");
        firstFile = TierClusters.write(fs, path, 2 * BLOCK_BYTES, 7);
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
            List<StorageType> types = new ArrayList<>();
            for (TierClusters.Replica replica : block) {
                assertEquals(replica.type(), TierClusters.tierOnDataNode(cluster, replica),
                        "the DataNode holds the replica on the tier the NameNode records");
                types.add(replica.type());
            }
            assertEquals(1, types.stream().filter(t -> t == StorageType.ARCHIVE).count(), "one PFS replica: " + types);
            assertEquals(1, types.stream().filter(t -> t == StorageType.RAM_DISK).count(), "one RAM replica: " + types);
            assertTrue(types.contains(StorageType.SSD), "the other local replica on SSD: " + types);
        }
        TierClusters.assertReadsBack(fs, path, firstFile);
    }

    /**
     * With dfs.namenode.read.considerStorageType the NameNode orders replicas at the same distance by tier, so
     * the parallel file system's comes last: only the reader's own DataNode (distance 0; here all DataNodes
     * share the host and the NameNode takes one of them as the reader's) may come before a local replica.
     */
    @Test
    @Order(2)
    void readersGetLocalReplicasBeforeTheParallelFileSystems() throws Exception {
        for (int i = 0; i < 5; i++) {
            for (LocatedBlock block : fs.getClient().getLocatedBlocks("/hhhl/placement", 0).getLocatedBlocks()) {
                StorageType[] order = block.getStorageTypes();
                assertEquals(3, order.length);
                if (order[0] != StorageType.ARCHIVE) {
                    assertEquals(StorageType.ARCHIVE, order[2], "PFS replica last: " + java.util.Arrays.toString(order));
                }
            }
        }
    }

    /**
     * The parallel file system fails under every DataNode: nothing written is lost (the local replicas serve it
     * and HDFS re-replicates it on local tiers), and new blocks keep every replica local, without failed writes.
     */
    @Test
    @Order(3)
    void theParallelFileSystemGoneLosesNothingAndNewBlocksStayLocal() throws Exception {
        for (DataNode dn : cluster.getDataNodes()) {
            FsVolumeSpi pfs = null;
            try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
                for (FsVolumeSpi volume : volumes) {
                    if (volume.getStorageType() == StorageType.ARCHIVE) {
                        pfs = volume;
                    }
                }
            }
            assertTrue(pfs != null, "DataNode " + dn + " has an ARCHIVE volume");
            // HDFS's own test helper: the directory replaced by a file, as a mount gone bad looks to the DataNode,
            // which finds it in its disk check and takes the volume out.
            DataNodeTestUtils.injectDataDirFailure(new File(pfs.getBaseURI()));
            dn.checkDiskErrorAsync(pfs);
        }
        for (DataNode dn : cluster.getDataNodes()) {
            DataNodeTestUtils.triggerHeartbeat(dn);
        }
        TierClusters.await("no DataNode reports an ARCHIVE storage", 30, () -> {
            for (DataNode dn : cluster.getDataNodes()) {
                try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
                    for (FsVolumeSpi volume : volumes) {
                        if (volume.getStorageType() == StorageType.ARCHIVE) {
                            return false;
                        }
                    }
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
            return true;
        });
        TierClusters.assertReadsBack(fs, new Path("/hhhl/placement"), firstFile);

        Path after = new Path("/hhhl/after");
        byte[] data = TierClusters.write(fs, after, 2 * BLOCK_BYTES, 8);
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, after, 3)) {
            assertFalse(block.stream().anyMatch(r -> r.type() == StorageType.ARCHIVE), "all local: " + block);
        }
        TierClusters.assertReadsBack(fs, after, data);
        // HDFS re-replicates the first file's lost PFS replicas on local tiers.
        TierClusters.await("the first file back at 3 local replicas per block", 60, () -> {
            try {
                return TierClusters.replicas(fs, new Path("/hhhl/placement")).stream().allMatch(b -> b.size() == 3
                        && b.stream().noneMatch(r -> r.type() == StorageType.ARCHIVE));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        TierClusters.assertFsckHealthy(cluster);
    }
}
