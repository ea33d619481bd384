package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static io.slipstream.hdfs.tiers.TierClusters.RAM_BYTES;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.protocol.DatanodeStorageReport;
import org.apache.hadoop.hdfs.server.protocol.StorageReport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The RAM evictor on a real mini cluster: once a DataNode's RAM replicas pass the high-water mark, persisted
 * ones are evicted (HDFS's eviction) down to the low-water mark, and new blocks get RAM replicas again.
 */
class TierEvictionTest {
    private static final double LOW_WATER = 0.5;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TierClusters.conf("hhh");
        conf.setLong(TiersConf.RAM_EVICT_CHECK_MS.key(), 500);
        conf.set(TiersConf.RAM_LOW_WATER.key(), String.valueOf(LOW_WATER));
        cluster = TierClusters.start(conf, "evict");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    void ramPastHighWaterIsEvictedToLowWaterAndTakesNewBlocksAgain() throws Exception {
        Map<Path, byte[]> written = new LinkedHashMap<>();
        for (int i = 0; i < 6; i++) {
            Path path = new Path("/evict/" + i);
            written.put(path, TierClusters.write(fs, path, 2 * BLOCK_BYTES, i));
        }
        TierClusters.await("every DataNode's RAM replicas at or below the low-water mark", 60, () -> {
            for (DataNode dn : cluster.getDataNodes()) {
                if (dn.getFSDataset().getCacheUsed() > LOW_WATER * RAM_BYTES) {
                    return false;
                }
            }
            return true;
        });
        TierClusters.await("the NameNode to see the RAM tier below its high-water mark", 30,
                () -> ramRemainingBytes() >= 3 * RAM_BYTES * (1 - LOW_WATER) - BLOCK_BYTES);
        // Evicted replicas live on in their persisted copies: every block still has three replicas.
        int onRam = 0;
        for (Map.Entry<Path, byte[]> file : written.entrySet()) {
            for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, file.getKey(), 3)) {
                assertEquals(3, block.size(), block.toString());
                onRam += (int) block.stream().filter(r -> r.type() == StorageType.RAM_DISK).count();
            }
            TierClusters.assertReadsBack(fs, file.getKey(), file.getValue());
        }
        assertTrue(onRam <= 3 * LOW_WATER * RAM_BYTES / BLOCK_BYTES, "RAM replicas left after eviction: " + onRam);

        // The NameNode sees the freed RAM through heartbeats and block reports: new blocks get RAM replicas again
        // within seconds (each attempt writes a one-block file; those written before keep their SSD/DISK replicas).
        int[] attempt = {0};
        TierClusters.await("a new block with a RAM replica after eviction", 30, () -> {
            try {
                Path after = new Path("/evict/after-" + attempt[0]++);
                byte[] data = TierClusters.write(fs, after, BLOCK_BYTES, 99);
                TierClusters.assertReadsBack(fs, after, data);
                return TierClusters.awaitReplicas(fs, after, 3).get(0).stream()
                        .filter(r -> r.type() == StorageType.RAM_DISK).count() == 1;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        TierClusters.assertFsckHealthy(cluster);
    }

    private static long ramRemainingBytes() {
        try {
            long remaining = 0;
            for (DatanodeStorageReport datanode :
                    fs.getClient().getDatanodeStorageReport(HdfsConstants.DatanodeReportType.LIVE)) {
                for (StorageReport storage : datanode.getStorageReports()) {
                    if (storage.getStorage().getStorageType() == StorageType.RAM_DISK) {
                        remaining += storage.getRemaining();
                    }
                }
            }
            return remaining;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
