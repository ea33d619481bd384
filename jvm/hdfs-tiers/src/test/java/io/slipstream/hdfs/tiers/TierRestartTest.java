package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.BlockMissingException;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The durability each mode promises, on a real mini cluster whose RAM disks lose their contents (as tmpfs
 * does when a node reboots) before any RAM replica was persisted: HHH loses no file (HDFS re-replicates the
 * lost RAM replica from the persistent ones); HHH-M loses its short-lived file, by design.
 */
class TierRestartTest {
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TierClusters.conf("hhh-m");
        // No background persistence during the test: every RAM replica is unpersisted when the RAM disks go.
        conf.setInt(DFSConfigKeys.DFS_DATANODE_LAZY_WRITER_INTERVAL_SEC, 3600);
        conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1);
        // A reader gives up on a missing block after its retries; a short backoff keeps that brief.
        conf.setInt("dfs.client.retry.window.base", 10);
        conf.setLong(DFSConfigKeys.DFS_BLOCKREPORT_INTERVAL_MSEC_KEY, 1000);
        cluster = TierClusters.start(conf, "restart");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    void ramLossCostsHhhNothingAndHhhmItsUnpersistedData() throws Exception {
        Path kept = new Path("/kept");
        byte[] keptData = TierClusters.write(fs, kept, BLOCK_BYTES, 1);
        Path scratch = new Path("/scratch");
        fs.mkdirs(scratch);
        fs.setStoragePolicy(scratch, HdfsConstants.MEMORY_STORAGE_POLICY_NAME);
        Path shortLived = new Path(scratch, "a");
        TierClusters.write(fs, shortLived, BLOCK_BYTES, 2);
        assertEquals(1, ramReplicas(kept), "HHH: one RAM replica");
        assertEquals(3, ramReplicas(shortLived), "HHH-M: three RAM replicas");

        // Every DataNode down before any comes back, as after a power cut: restarted one after the other, the
        // NameNode re-replicated HHH-M's block from a DataNode still up onto the restarted one's persistent
        // volume (a re-replicated LAZY_PERSIST replica is not written to RAM), and the file survived (seen twice
        // in this module's runs, on a quiet machine too).
        List<MiniDFSCluster.DataNodeProperties> stopped = new java.util.ArrayList<>();
        for (int i = cluster.getDataNodes().size() - 1; i >= 0; i--) {
            List<java.nio.file.Path> ramDirs = ramVolumeDirs(cluster.getDataNodes().get(i));
            stopped.add(cluster.stopDataNode(i));
            ramDirs.forEach(TierRestartTest::deleteBlockFiles);
        }
        for (MiniDFSCluster.DataNodeProperties dataNode : stopped) {
            assertTrue(cluster.restartDataNode(dataNode, true), "a DataNode restarts");
        }
        cluster.waitActive();

        // HDFS takes a DataNode's first block report after it re-registers as additions only: the NameNode
        // drops the lost replicas at the next full report (every second here, dfs.blockreport.intervalMsec).
        TierClusters.await("the NameNode to drop HHH's lost RAM replica", 60, () -> ramReplicasOrFail(kept) == 0);
        TierClusters.await("HDFS to re-replicate HHH's lost RAM replica from the persistent ones", 60,
                () -> liveReplicas(kept) == 3);
        TierClusters.assertReadsBack(fs, kept, keptData);
        // HHH-M's file is gone with its RAM replicas: fsck names the block MISSING and a read fails. Each
        // DataNode's lost replicas leave the NameNode at that DataNode's own next full report, so the
        // last may still count as live for a moment (a clean-clone run once saw 1 of 3 there).
        String[] lastFsck = {""};
        TierClusters.await("the NameNode to drop HHH-M's lost RAM replicas", 60,
                () -> (lastFsck[0] = fsckOrFail("/scratch")).contains("MISSING 1 blocks"),
                () -> "replicas of " + shortLived + ": " + replicasOrError(shortLived) + "\nlast fsck of /scratch:\n"
                        + lastFsck[0]);
        String report = TierClusters.fsck(cluster, "/scratch");
        assertTrue(report.contains("MISSING 1 blocks") && report.contains("CORRUPT"), report);
        assertThrows(BlockMissingException.class, () -> {
            try (FSDataInputStream in = fs.open(shortLived)) {
                in.readFully(0, new byte[BLOCK_BYTES]);
            }
        });
        assertTrue(TierClusters.fsck(cluster, "/kept").contains("is HEALTHY"), "HHH's file is healthy");
    }

    private static long ramReplicas(Path path) throws Exception {
        return TierClusters.awaitReplicas(fs, path, 3).get(0).stream().filter(r -> r.type() == StorageType.RAM_DISK).count();
    }

    /** RAM replicas of the file's block the NameNode knows of now. */
    private static String fsckOrFail(String path) {
        try {
            return TierClusters.fsck(cluster, path);
        } catch (Exception e) {
            throw new IllegalStateException("fsck " + path, e);
        }
    }

    private static String replicasOrError(Path path) {
        try {
            return TierClusters.replicas(fs, path).toString();
        } catch (IOException e) {
            return e.toString();
        }
    }

    private static long ramReplicasOrFail(Path path) {
        try {
            return TierClusters.replicas(fs, path).get(0).stream().filter(r -> r.type() == StorageType.RAM_DISK).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int liveReplicas(Path path) {
        try {
            return TierClusters.replicas(fs, path).get(0).size();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static boolean exists(Path path) {
        try {
            return fs.exists(path);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static List<java.nio.file.Path> ramVolumeDirs(DataNode dn) throws IOException {
        List<java.nio.file.Path> dirs = new ArrayList<>();
        try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
            for (FsVolumeSpi volume : volumes) {
                if (volume.isTransientStorage()) {
                    dirs.add(java.nio.file.Path.of(volume.getBaseURI()));
                }
            }
        }
        assertEquals(1, dirs.size(), "one RAM_DISK volume per DataNode");
        return dirs;
    }

    /**
     * What a RAM disk loses when its node reboots: the replicas (block and meta files) and the replica list
     * the DataNode saved at shutdown to start faster (it would otherwise list the lost replicas again);
     * HDFS's directory layout and VERSION files are kept so that the volume is the same storage.
     */
    private static void deleteBlockFiles(java.nio.file.Path dir) {
        try (Stream<java.nio.file.Path> files = Files.walk(dir)) {
            for (java.nio.file.Path file : files.filter(f -> f.getFileName().toString().startsWith("blk_")
                    || f.getFileName().toString().equals("replicas")).toList()) {
                Files.delete(file);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
