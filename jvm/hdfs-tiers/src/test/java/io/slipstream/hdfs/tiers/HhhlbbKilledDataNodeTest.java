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
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.DatanodeReportType;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * HHH-L-BB when the DataNode holding the parallel file system replicas is killed (SIGKILL, no shutdown hook, no
 * flush) while their data waits in the burst buffer: that DataNode runs in a process of its own, beside a mini
 * cluster whose three DataNodes have no ARCHIVE volume, so every block's parallel file system replica is its. At
 * its restart it takes the data back from the cache before it registers; a replica whose copy the cache lost
 * meanwhile is found short, marked corrupt by the NameNode and re-replicated. The chunks it cannot use (a replica
 * being written when it died, a lost one) are deleted from the cache, at the restart or, when the cache could not
 * be reached then, once HDFS deletes the replica. Each test kills and restarts the DataNode once.
 */
class HhhlbbKilledDataNodeTest {
    private static final int FILE_BYTES = 2 * TierClusters.BLOCK_BYTES + 300_000;
    private static final int CHUNK_BYTES = 300_000;
    /** The most chunks a block's replica has (the last one partial). */
    private static final int CHUNKS_PER_BLOCK = (TierClusters.BLOCK_BYTES + CHUNK_BYTES - 1) / CHUNK_BYTES;
    private static CacheServer cache;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    private static Path work;
    private static Process datanode;
    /** In front of the cache for a restart that cannot reach it; open until the end (the DataNode may still use it). */
    private static CacheRelay relay;

    @BeforeAll
    static void start() throws Exception {
        cache = new CacheServer();
        Configuration conf = TierClusters.conf("hhh-l-bb");
        conf.set(TiersConf.BB_SERVERS.key(), cache.address());
        conf.set(TiersConf.BB_CHUNK_BYTES.key(), String.valueOf(CHUNK_BYTES));
        // Nothing is flushed while the test runs: the DataNode dies with every replica in the burst buffer.
        conf.setLong(TiersConf.BB_FLUSH_DELAY_MS.key(), TimeUnit.HOURS.toMillis(1));
        conf.setLong(TiersConf.BB_TIMEOUT_MS.key(), 2000);
        conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1);
        cluster = TierClusters.start(conf, "hhhlbb-killed");
        fs = cluster.getFileSystem();
        work = Files.createTempDirectory("slipstream-hhhlbb-killed");
        relay = new CacheRelay(cache);
        datanode = startDataNode(cache.address());
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
        if (relay != null) {
            relay.close();
        }
        if (cache != null) {
            cache.close();
        }
    }

    /**
     * The parallel file system's DataNode in a JVM of its own: the cluster's configuration, an ARCHIVE volume, the
     * burst buffer at {@code servers} (the cache, or a relay in front of it).
     */
    private static Process startDataNode(String servers) throws IOException {
        Configuration conf = new Configuration(cluster.getConfiguration(0));
        conf.set(CommonConfigurationKeysPublic.FS_DEFAULT_NAME_KEY, cluster.getURI().toString());
        conf.set(TiersConf.BB_SERVERS.key(), servers);
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
        // Its /jmx serves the metrics as of the metrics system's last snapshot, every `period` seconds (10 by default).
        Files.writeString(confDir.resolve("hadoop-metrics2-datanode.properties"), "*.period=1\n");
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

    /** SIGKILL to the parallel file system's DataNode: no shutdown hook, nothing flushed. Its transfer port. */
    private static int killDataNode() throws Exception {
        int killedPort = pfsDataNode().getXferPort();
        assertTrue(datanode.destroyForcibly().waitFor(30, TimeUnit.SECONDS), "the DataNode killed");
        return killedPort;
    }

    /**
     * Waits for the restarted DataNode's registration. The NameNode has not declared the killed one dead (that takes
     * minutes): the restart is its registration from a new port. What a restart does with the burst buffer is done
     * before the DataNode registers.
     */
    private static void awaitRestarted(int killedPort) throws InterruptedException {
        TierClusters.await("the restarted DataNode registered", 90, () -> {
            try {
                return datanode.isAlive() && pfsDataNode().getXferPort() != killedPort;
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);
    }

    /** Waits for a line matching {@code regex} in what the DataNode process logged past {@code from} bytes. */
    private static void awaitLogged(long from, String regex) throws InterruptedException {
        Pattern pattern = Pattern.compile(regex);
        TierClusters.await("the DataNode to log /" + regex + "/", 90, () -> {
            try (java.io.RandomAccessFile log = new java.io.RandomAccessFile(work.resolve("datanode.log").toFile(), "r")) {
                byte[] bytes = new byte[(int) Math.max(0, log.length() - from)];
                log.seek(from);
                log.readFully(bytes);
                return pattern.matcher(new String(bytes, StandardCharsets.UTF_8)).find();
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

    /** The block file of {@code block} under the external DataNode's ARCHIVE volume (finalized or rbw). */
    private static File blockFile(ExtendedBlock block) throws IOException {
        return blockFileIfAny(block).orElseThrow(() -> new AssertionError("no block file blk_" + block.getBlockId()));
    }

    private static Optional<File> blockFileIfAny(ExtendedBlock block) throws IOException {
        String name = "blk_" + block.getBlockId();
        try (Stream<Path> files = Files.walk(work.resolve("pfs"))) {
            return files.filter(f -> f.getFileName().toString().equals(name)).findFirst().map(Path::toFile);
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

    private static List<Integer> uncheckedChunksInCache(ExtendedBlock block, String datanodeUuid) {
        try {
            return chunksInCache(block, datanodeUuid);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The numbers of the block's chunks the cache holds, asked of it with a client of its own (each key, 0 on). */
    private static List<Integer> chunksInCache(ExtendedBlock block, String datanodeUuid) throws IOException {
        List<Integer> held = new ArrayList<>();
        // Past the last chunk a block can have: a chunk number the DataNode never writes is never there either.
        for (int chunk = 0; chunk <= CHUNKS_PER_BLOCK; chunk++) {
            if (cache.get(chunkKey(block, datanodeUuid, chunk)) != null) {
                held.add(chunk);
            }
        }
        return held;
    }

    /**
     * Waits until the external DataNode's {@code /jmx} shows {@code expected} ("Name=value ..." in that order): JMX
     * serves a snapshot of the metrics, refreshed every second here.
     */
    private static void awaitCounters(String expected) throws InterruptedException {
        String[] seen = {""};
        TierClusters.await("the DataNode's /jmx to show " + expected, 60, () -> {
            try {
                StringBuilder now = new StringBuilder();
                for (String counter : expected.split(" ")) {
                    String name = counter.substring(0, counter.indexOf('='));
                    now.append(now.length() == 0 ? "" : " ").append(name).append('=').append(burstBufferCounter(name));
                }
                seen[0] = now.toString();
                return seen[0].equals(expected);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, () -> "last seen: " + seen[0] + "; " + datanodeLogTail());
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

        int killedPort = killDataNode();
        for (ExtendedBlock block : keptBlocks) {
            assertEquals(0, blockFile(block).length(), "nothing flushed by a killed DataNode");
        }
        // The cache loses the middle chunk of one block of the other file while the DataNode is down.
        ExtendedBlock lostBlock = damagedBlocks.get(1);
        try (BurstBufferClient client = cache.client()) {
            assertTrue(client.delete(chunkKey(lostBlock, uuid, 1)));
        }

        datanode = startDataNode(cache.address());
        awaitRestarted(killedPort);

        for (int i = 0; i < keptBlocks.size(); i++) {
            ExtendedBlock block = keptBlocks.get(i);
            int from = i * TierClusters.BLOCK_BYTES;
            byte[] expected = Arrays.copyOfRange(keptData, from, Math.min(keptData.length, from + TierClusters.BLOCK_BYTES));
            assertArrayEquals(expected, Files.readAllBytes(blockFile(block).toPath()),
                    "blk_" + block.getBlockId() + "'s block file holds its data, taken back from the burst buffer");
            assertNull(cache.get(chunkKey(block, uuid, 0)), "its chunks deleted from the cache");
        }
        // The lost replica's other chunks (0, 2 and 3 of its four) are of no use to anything: deleted too.
        assertEquals(List.of(), chunksInCache(lostBlock, uuid), "the lost replica's chunks left in the cache");
        awaitCounters("ReplicasRecovered=" + (keptBlocks.size() + damagedBlocks.size() - 1)
                + " ReplicasLost=1 ReplicasDiscarded=0 ChunksDiscarded=" + (CHUNKS_PER_BLOCK - 1));
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

    @Test
    void theChunksOfAReplicaBeingWrittenWhenItsDataNodeIsKilledAreDeletedAtItsRestart() throws Exception {
        org.apache.hadoop.fs.Path open = new org.apache.hadoop.fs.Path("/killed/open");
        // Three full chunks handed to the stores, and the writer's chunk in memory: less than a block.
        byte[] data = new byte[3 * CHUNK_BYTES + 50_000];
        new Random(43).nextBytes(data);
        // The writer is a client of its own, which dies with the test's help (its streams aborted, as a dead
        // client's would be); HDFS's lease recovery then closes the file.
        DistributedFileSystem writer = (DistributedFileSystem) FileSystem.newInstance(fs.getUri(), fs.getConf());
        ExtendedBlock block;
        String uuid = pfsDataNode().getDatanodeUuid();
        try {
            FSDataOutputStream out = writer.create(open, (short) 3);
            out.write(data);
            out.hflush();
            LocatedBlock last = fs.getClient().getLocatedBlocks(open.toString(), 0).getLastLocatedBlock();
            int archive = Arrays.asList(last.getStorageTypes()).indexOf(StorageType.ARCHIVE);
            assertTrue(archive >= 0, "a parallel file system replica in the pipeline: " + last);
            assertEquals(uuid, last.getLocations()[archive].getDatanodeUuid());
            block = last.getBlock();
            // hflush does not wait for the stores; the test waits until all three chunks are in the cache.
            TierClusters.await("the open replica's three full chunks stored", 30,
                    () -> uncheckedChunksInCache(block, uuid).equals(List.of(0, 1, 2)),
                    () -> "in the cache: " + uncheckedChunksInCache(block, uuid));
            assertEquals(0, blockFile(block).length(), "the replica being written waits in the burst buffer");

            int killedPort = killDataNode();
            assertEquals(List.of(0, 1, 2), chunksInCache(block, uuid), "a killed DataNode deletes nothing");
            datanode = startDataNode(cache.address());
            awaitRestarted(killedPort);
            assertEquals(List.of(), chunksInCache(block, uuid),
                    "the chunks of the replica being written, deleted before the DataNode registered");
            awaitCounters("ReplicasDiscarded=1 ChunksDiscarded=3");
        } finally {
            // Aborted, not closed: the writer dies without completing the file (and cannot hide a failure above).
            writer.getClient().closeOutputStreams(true);
            writer.close();
        }

        // HDFS's own recovery decides the file's data: the hflushed bytes, from the replicas that live on.
        TierClusters.await("the lease on " + open + " recovered", 60, () -> {
            try {
                return fs.recoverLease(open);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);
        assertEquals(data.length, fs.getFileStatus(open).getLen());
        TierClusters.assertReadsBack(fs, open, data);
        TierClusters.await(open + " healthy at 3 replicas", 90, () -> {
            try {
                return TierClusters.fsck(cluster, open.toString()).contains("is HEALTHY")
                        && TierClusters.replicas(fs, open).stream().allMatch(b -> b.size() == 3);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, HhhlbbKilledDataNodeTest::datanodeLogTail);
        TierClusters.assertFsckHealthy(cluster);
    }

    @Test
    void theChunksARestartCouldNotReachAreDeletedWithTheReplica() throws Exception {
        org.apache.hadoop.fs.Path path = new org.apache.hadoop.fs.Path("/killed/unreached");
        byte[] data = TierClusters.write(fs, path, 2 * CHUNK_BYTES + 100_000, 44);
        ExtendedBlock block = pfsBlocks(path).get(0);
        String uuid = pfsDataNode().getDatanodeUuid();
        assertEquals(List.of(0, 1, 2), chunksInCache(block, uuid));

        int killedPort = killDataNode();
        // The restart meets a cache it cannot reach (the relay closes every connection), which comes back once the
        // restart has given up on it: the replica keeps its empty block file and its chunks stay, for now.
        relay.refuse();
        long logFrom = Files.size(work.resolve("datanode.log"));
        datanode = startDataNode(relay.address());
        awaitLogged(logFrom, "[1-9][0-9]* left to HDFS \\(cache unreachable\\)");
        assertEquals(List.of(0, 1, 2), chunksInCache(block, uuid), "nothing deleted while the cache was unreachable");
        relay.admit();
        awaitRestarted(killedPort);

        // The NameNode finds the replica short, re-replicates the block and deletes the replica: its chunks go too.
        TierClusters.await("the short replica deleted, with its chunks", 90, () -> {
            try {
                return blockFileIfAny(block).isEmpty() && chunksInCache(block, uuid).isEmpty()
                        && TierClusters.fsck(cluster, path.toString()).contains("is HEALTHY")
                        && TierClusters.replicas(fs, path).stream().allMatch(b -> b.size() == 3);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, () -> "in the cache: " + uncheckedChunksInCache(block, uuid) + "; " + datanodeLogTail());
        awaitCounters("ReplicasRecovered=0 ChunksDiscarded=3");
        TierClusters.assertReadsBack(fs, path, data);
        TierClusters.assertFsckHealthy(cluster);
    }
}
