package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.protocol.DatanodeStorageReport;
import org.apache.hadoop.hdfs.server.protocol.StorageReport;
import org.apache.hadoop.ipc.RemoteException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/** HHH-M on a real mini cluster: short-lived files all in RAM, the memory budget's clear error, other files as HHH. */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HhhmClusterTest {
    /** Room for one block's three replicas in RAM, not two. */
    private static final long BUDGET_BYTES = 5L * BLOCK_BYTES;
    private static final Path SHORT_LIVED = new Path("/scratch");

    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TierClusters.conf("hhh-m");
        conf.setLong(TiersConf.HHHM_BUDGET_BYTES.key(), BUDGET_BYTES);
        cluster = TierClusters.start(conf, "hhhm");
        fs = cluster.getFileSystem();
        fs.mkdirs(SHORT_LIVED);
        fs.setStoragePolicy(SHORT_LIVED, HdfsConstants.MEMORY_STORAGE_POLICY_NAME);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    @Order(1)
    void shortLivedFileKeepsEveryReplicaInRam() throws Exception {
        Path path = new Path(SHORT_LIVED, "a");
        byte[] data = TierClusters.write(fs, path, BLOCK_BYTES, 1);
        List<List<TierClusters.Replica>> blocks = TierClusters.awaitReplicas(fs, path, 3);
        assertEquals(1, blocks.size());
        assertEquals(3, blocks.get(0).size(), blocks.toString());
        for (TierClusters.Replica replica : blocks.get(0)) {
            assertEquals(StorageType.RAM_DISK, replica.type(), blocks.toString());
            assertEquals(StorageType.RAM_DISK, TierClusters.tierOnDataNode(cluster, replica));
        }
        TierClusters.assertReadsBack(fs, path, data);
    }

    /** The NameNode counts what the RAM disks hold from heartbeats; past the budget a new all-RAM block is refused. */
    @Test
    @Order(2)
    void budgetExceededGivesAClearErrorAndOtherFilesStillWrite() throws Exception {
        TierClusters.await("the NameNode to count the first file's replicas on RAM_DISK", 30,
                () -> ramDfsUsedBytes() >= 3L * BLOCK_BYTES);
        IOException refused = assertThrows(IOException.class,
                () -> TierClusters.write(fs, new Path(SHORT_LIVED, "b"), BLOCK_BYTES, 2));
        // The NameNode's exception reaches the writer by class name; unwrapRemoteException rebuilds it.
        IOException unwrapped = refused instanceof RemoteException remote ? remote.unwrapRemoteException() : refused;
        assertEquals(TierBudgetExceededException.class, unwrapped.getClass(), String.valueOf(refused));
        String message = String.valueOf(refused.getMessage());
        assertTrue(message.contains("HHH-M memory budget exceeded")
                && message.contains(TiersConf.HHHM_BUDGET_BYTES.key()), message);

        // The budget holds short-lived files only: an unmarked file is placed as under HHH.
        Path other = new Path("/kept");
        byte[] data = TierClusters.write(fs, other, BLOCK_BYTES, 3);
        List<TierClusters.Replica> replicas = TierClusters.awaitReplicas(fs, other, 3).get(0);
        assertEquals(3, replicas.size(), replicas.toString());
        assertTrue(replicas.stream().filter(r -> r.type() != StorageType.RAM_DISK).count() >= 2, replicas.toString());
        TierClusters.assertReadsBack(fs, other, data);
        TierClusters.assertFsckHealthy(cluster);
    }

    private static long ramDfsUsedBytes() {
        try {
            long used = 0;
            for (DatanodeStorageReport datanode :
                    fs.getClient().getDatanodeStorageReport(HdfsConstants.DatanodeReportType.LIVE)) {
                for (StorageReport storage : datanode.getStorageReports()) {
                    if (storage.getStorage().getStorageType() == StorageType.RAM_DISK) {
                        used += storage.getDfsUsed();
                    }
                }
            }
            return used;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
