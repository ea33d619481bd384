package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.DatanodeReportType;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * HHH-L-BB when the DataNode holding the parallel file system replicas is killed (SIGKILL, no shutdown hook, no
 * flush) while their data waits in the burst buffer: that DataNode runs in a process of its own, beside a mini
 * cluster whose three DataNodes have no ARCHIVE volume, so every block's parallel file system replica is its. At
 * its restart it takes the data back from the cache before it registers; a replica whose copy the cache lost
 * meanwhile is found short, marked corrupt by the NameNode and re-replicated.
 */
class HhhlbbKilledDataNodeTest {
    private static final int FILE_BYTES = 2 * TierClusters.BLOCK_BYTES + 300_000;
    private static CacheServer cache;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    private static Path work;
    private static Process datanode;

    @BeforeAll
    static void start() throws Exception {
        cache = new CacheServer();
        Configuration conf = TierClusters.conf("hhh-l-bb");
        conf.set(TiersConf.BB_SERVERS.key(), cache.address());
        conf.set(TiersConf.BB_CHUNK_BYTES.key(), "300000");
        // Nothing is flushed while the test runs: the DataNode dies with every replica in the burst buffer.
        conf.setLong(TiersConf.BB_FLUSH_DELAY_MS.key(), TimeUnit.HOURS.toMillis(1));
        conf.setLong(TiersConf.BB_TIMEOUT_MS.key(), 2000);
        conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1);
        cluster = TierClusters.start(conf, "hhhlbb-killed");
        fs = cluster.getFileSystem();
        work = Files.createTempDirectory("slipstream-hhhlbb-killed");
        datanode = startDataNode();
        awaitLiveDataNodes(4);
    }

    @AfterAll
    static void stop() throws Exception {
        if (datanode != null) {
            datanode.destroyForcibly().waitFor();
        }
        if (cluster != null) {
            cluster.shutdown();
        }
        if (cache != null) {
            cache.close();
        }
    }

    /** The parallel file system's DataNode in a JVM of its own: the cluster's configuration, an ARCHIVE volume. */
    private static Process startDataNode() throws IOException {
        Configuration conf = new Configuration(cluster.getConfiguration(0));
        conf.set(CommonConfigurationKeysPublic.FS_DEFAULT_NAME_KEY, cluster.getURI().toString());
        conf.set(DFSConfigKeys.DFS_DATANODE_DATA_DIR_KEY, "[ARCHIVE]" + work.resolve("pfs").toUri());
        conf.set(DFSConfigKeys.DFS_DATANODE_ADDRESS_KEY, "127.0.0.1:0");
        conf.set(DFSConfigKeys.DFS_DATANODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
        conf.set(DFSConfigKeys.DFS_DATANODE_IPC_ADDRESS_KEY, "127.0.0.1:0");
        conf.set(DFSConfigKeys.DFS_DATANODE_HOST_NAME_KEY, "127.0.0.1");
        // No RAM tier on this DataNode, and no native library to lock memory with.
        conf.setLong(DFSConfigKeys.DFS_DATANODE_MAX_LOCKED_MEMORY_KEY, 0);
        Path confDir = Files.createDirectories(work.resolve("conf"));
        try (OutputStream out = Files.newOutputStream(confDir.resolve("hdfs-site.xml"))) {
            conf.writeXml(out);
        }
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "-Xmx384m", "-cp",
                confDir + File.pathSeparator + System.getProperty("java.class.path"),
                DataNode.class.getName());
        builder.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(work.resolve("datanode.log").toFile()));
        return builder.start();
    }

    private static void awaitLiveDataNodes(int count) throws InterruptedException {
        TierClusters.await(count + " live DataNodes", 90, () -> {
            try {
                return fs.getDataNodeStats(DatanodeReportType.LIVE).length == count && datanode.isAlive();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);
    }

    private static String datanodeLogTail() {
        try {
            List<String> lines = Files.readAllLines(work.resolve("datanode.log"));
            return "the DataNode process (alive: " + datanode.isAlive() + "), last lines of its log:\n"
                    + String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "no DataNode log: " + e;
        }
    }

    private static DatanodeInfo pfsDataNode() throws IOException {
        for (DatanodeInfo info : fs.getDataNodeStats(DatanodeReportType.ALL)) {
            if (cluster.getDataNodes().stream().noneMatch(dn -> dn.getDatanodeUuid().equals(info.getDatanodeUuid()))) {
                return info;
            }
        }
        throw new AssertionError("the parallel file system's DataNode is not registered");
    }

    /** The block file of {@code block} under the external DataNode's ARCHIVE volume. */
    private static File blockFile(ExtendedBlock block) throws IOException {
        String name = "blk_" + block.getBlockId();
        try (Stream<Path> files = Files.walk(work.resolve("pfs"))) {
            return files.filter(f -> f.getFileName().toString().equals(name)).findFirst()
                    .orElseThrow(() -> new AssertionError("no block file " + name)).toFile();
        }
    }

    /** Every block of the file, checked to have its ARCHIVE replica on the external DataNode. */
    private static List<ExtendedBlock> pfsBlocks(org.apache.hadoop.fs.Path path) throws Exception {
        String uuid = pfsDataNode().getDatanodeUuid();
        List<ExtendedBlock> blocks = new ArrayList<>();
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
            List<TierClusters.Replica> archive =
                    block.stream().filter(r -> r.type() == StorageType.ARCHIVE).toList();
            assertEquals(1, archive.size(), "one parallel file system replica: " + block);
            assertEquals(uuid, archive.get(0).datanode().getDatanodeUuid());
            blocks.add(archive.get(0).block().getBlock());
        }
        return blocks;
    }

    private static String chunkKey(ExtendedBlock block, String datanodeUuid, int chunk) {
        return BurstBufferRecovery.keyBase(datanodeUuid, block.getBlockPoolId(), block.getBlockId(),
                block.getGenerationStamp()) + chunk;
    }

    /** A counter of the external DataNode's burst buffer, read from its {@code /jmx} as an operator would. */
    private static long burstBufferCounter(String name) throws IOException {
        DatanodeInfo info = pfsDataNode();
        URL url = new URL("http://127.0.0.1:" + info.getInfoPort()
                + "/jmx?qry=Hadoop:service=DataNode,name=SlipstreamBurstBuffer-*");
        HttpURLConnection connection = (HttpURLConnection) url.openConnection();
        try (InputStream in = connection.getInputStream()) {
            String json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            Matcher m = Pattern.compile("\"" + name + "\"\\s*:\\s*(\\d+)").matcher(json);
            assertTrue(m.find(), name + " in " + json);
            return Long.parseLong(m.group(1));
        } finally {
            connection.disconnect();
        }
    }

    @Test
    void replicasLeftInTheBurstBufferByAKilledDataNodeAreRecoveredAtItsRestart() throws Exception {
        org.apache.hadoop.fs.Path kept = new org.apache.hadoop.fs.Path("/killed/kept");
        org.apache.hadoop.fs.Path damaged = new org.apache.hadoop.fs.Path("/killed/damaged");
        byte[] keptData = TierClusters.write(fs, kept, FILE_BYTES, 41);
        byte[] damagedData = TierClusters.write(fs, damaged, FILE_BYTES, 42);
        List<ExtendedBlock> keptBlocks = pfsBlocks(kept);
        List<ExtendedBlock> damagedBlocks = pfsBlocks(damaged);
        String uuid = pfsDataNode().getDatanodeUuid();
        for (ExtendedBlock block : keptBlocks) {
            assertEquals(0, blockFile(block).length(), "blk_" + block.getBlockId() + " waits in the burst buffer");
            assertTrue(cache.get(chunkKey(block, uuid, 0)) != null, "its first chunk is in the cache");
        }

        int killedPort = pfsDataNode().getXferPort();
        assertTrue(datanode.destroyForcibly().waitFor(30, TimeUnit.SECONDS), "the DataNode killed");
        for (ExtendedBlock block : keptBlocks) {
            assertEquals(0, blockFile(block).length(), "nothing flushed by a killed DataNode");
        }
        // The cache loses the middle chunk of one block of the other file while the DataNode is down.
        ExtendedBlock lostBlock = damagedBlocks.get(1);
        try (BurstBufferClient client = cache.client()) {
            assertTrue(client.delete(chunkKey(lostBlock, uuid, 1)));
        }

        datanode = startDataNode();
        // The NameNode has not declared the killed one dead (that takes minutes): the restart is its registration
        // from a new port. The recovery runs before the DataNode registers.
        TierClusters.await("the restarted DataNode registered", 90, () -> {
            try {
                return datanode.isAlive() && pfsDataNode().getXferPort() != killedPort;
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);

        for (int i = 0; i < keptBlocks.size(); i++) {
            ExtendedBlock block = keptBlocks.get(i);
            int from = i * TierClusters.BLOCK_BYTES;
            byte[] expected = Arrays.copyOfRange(keptData, from, Math.min(keptData.length, from + TierClusters.BLOCK_BYTES));
            assertArrayEquals(expected, Files.readAllBytes(blockFile(block).toPath()),
                    "blk_" + block.getBlockId() + "'s block file holds its data, taken back from the burst buffer");
            assertNull(cache.get(chunkKey(block, uuid, 0)), "its chunks deleted from the cache");
        }
        // JMX serves a snapshot of the metrics that is refreshed every few seconds.
        String expected = keptBlocks.size() + damagedBlocks.size() - 1 + " recovered, 1 lost";
        String[] seen = {""};
        TierClusters.await("the DataNode's /jmx to show " + expected, 60, () -> {
            try {
                seen[0] = burstBufferCounter("ReplicasRecovered") + " recovered, " + burstBufferCounter("ReplicasLost")
                        + " lost";
                return seen[0].equals(expected);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, () -> "last seen: " + seen[0] + "; " + datanodeLogTail());
        TierClusters.assertReadsBack(fs, kept, keptData);

        // The replica that could not be recovered: HDFS marks it corrupt (short) and re-replicates the block.
        TierClusters.await("the damaged file back at 3 good replicas per block", 90, () -> {
            try {
                return TierClusters.fsck(cluster, damaged.toString()).contains("is HEALTHY")
                        && TierClusters.replicas(fs, damaged).stream().allMatch(b -> b.size() == 3);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);
        TierClusters.assertReadsBack(fs, damaged, damagedData);
        TierClusters.assertFsckHealthy(cluster);
    }
}
