package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSTestUtil;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.client.HdfsClientConfigKeys;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.tools.DFSck;
import org.apache.hadoop.util.DataChecksum;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Block writes and pipeline replication over the fabric on a real HDFS 3.4 mini cluster (NameNode,
 * three DataNodes, replication 3, 256 KiB blocks, 16 KiB packets, 4 in flight), one cluster for the
 * class. Files are written through {@link SlipstreamDistributedFileSystem} ({@code fs.hdfs.impl})
 * and read back by HDFS's own readers: replicas created, written, replicated down the pipeline,
 * finalized and reported, hflush/hsync visibility, bad packets, limits, fallback, and a DataNode
 * stopped mid-write.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HdfsWriteTest {
    private static final int PACKET_BYTES = 16 << 10;
    private static final int PACKETS_IN_FLIGHT = 4;
    private static final int MAX_WRITES = 4;
    private static final long IDLE_TIMEOUT_MS = 2000;
    static final DataChecksum CRC32C_512 = DataChecksum.newDataChecksum(DataChecksum.Type.CRC32C, 512);
    private static Configuration conf;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    /** The plugin's client: {@code fs.hdfs.impl=SlipstreamDistributedFileSystem}. */
    private static FileSystem fabricFs;
    /** HDFS's own readers only: no replica accessor. */
    private static FileSystem vanilla;

    @BeforeAll
    static void startCluster() throws IOException {
        conf = TestClusters.conf(false);
        conf.setInt(HdfsConf.WRITE_PACKET_BYTES.key(), PACKET_BYTES);
        conf.setInt(HdfsConf.WRITE_PACKETS_IN_FLIGHT.key(), PACKETS_IN_FLIGHT);
        conf.setInt(HdfsConf.SERVER_MAX_WRITES.key(), MAX_WRITES);
        conf.setLong(HdfsConf.WRITE_IDLE_TIMEOUT_MS.key(), IDLE_TIMEOUT_MS);
        cluster = TestClusters.start(conf, "write");
        fs = cluster.getFileSystem();
        Configuration plain = new Configuration(conf);
        plain.set("dfs.client.replica.accessor.builder.classes", "");
        vanilla = FileSystem.newInstance(fs.getUri(), plain);
        fabricFs = FileSystem.newInstance(fs.getUri(), fabricConf(conf));
    }

    static Configuration fabricConf(Configuration base) {
        Configuration c = new Configuration(base);
        c.set("fs.hdfs.impl", SlipstreamDistributedFileSystem.class.getName());
        c.setBoolean("fs.hdfs.impl.disable.cache", true);
        return c;
    }

    @AfterAll
    static void stopCluster() throws IOException {
        if (vanilla != null) {
            vanilla.close();
        }
        if (fabricFs != null) {
            fabricFs.close();
        }
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    @Order(1)
    void filesOfEverySizeAreWrittenReplicatedAndReadBackByHdfs() throws Exception {
        int block = TestClusters.BLOCK_BYTES;
        int[] sizes = {0, 1, 511, 512, 4099, PACKET_BYTES + 1, block - 1, block, block + 1, 3 * block + 12345};
        for (int size : sizes) {
            Path path = new Path("/written/" + size);
            long clientBefore = SlipstreamHdfsCounters.bytesWritten();
            long dataNodesBefore = dataNodeBytesWritten();
            byte[] written = TestClusters.write(fabricFs, path, size, size);
            assertEquals(size, SlipstreamHdfsCounters.bytesWritten() - clientBefore, "client bytes over the fabric for " + size);
            assertEquals(3L * size, dataNodeBytesWritten() - dataNodesBefore, "bytes the three DataNodes wrote for " + size);
            assertEquals(size, vanilla.getFileStatus(path).getLen());
            assertArrayEquals(written, readAll(vanilla, path), "file of " + size + " bytes read by HDFS's readers");
            int blocks = (size + block - 1) / block;
            // The DataNodes report a finished replica to the NameNode asynchronously (incremental block
            // reports), as for HDFS's own pipeline: under load the NameNode may know one replica when
            // the file is complete (seen with the machine busy), so wait as HDFS's tests do.
            DFSTestUtil.waitReplication(vanilla, path, (short) 3);
            var locations = fs.getClient().getLocatedBlocks(path.toString(), 0).getLocatedBlocks();
            assertEquals(blocks, locations.size());
            for (var located : locations) {
                assertEquals(3, located.getLocations().length, "replicas of " + located.getBlock());
            }
        }
    }

    @Test
    @Order(2)
    void hflushMakesDataVisibleAndHsyncToo() throws IOException {
        Path path = new Path("/hflush");
        byte[] data = new byte[3000];
        new Random(5).nextBytes(data);
        long before = SlipstreamHdfsCounters.bytesWritten();
        try (FSDataOutputStream out = fabricFs.create(path)) {
            assertTrue(out.getWrappedStream() instanceof FabricOutputStream, String.valueOf(out.getWrappedStream()));
            assertTrue(out.hasCapability("hflush") && out.hasCapability("hsync"));
            out.write(data, 0, 1000);
            out.hflush();
            assertArrayEquals(Arrays.copyOf(data, 1000), readAll(vanilla, path), "after hflush of 1000 bytes (mid-chunk)");
            out.write(data, 1000, 700);
            out.hsync();
            assertArrayEquals(Arrays.copyOf(data, 1700), readAll(vanilla, path), "after hsync of 1700 bytes");
            out.hflush(); // nothing new: no packet, nothing changes
            out.write(data, 1700, 1300);
        }
        assertEquals(3000, SlipstreamHdfsCounters.bytesWritten() - before, "the partial chunk sent again counts once");
        // createNonRecursive (HBase's WALs) writes over the fabric too, and needs the parent.
        long nonRecursiveBefore = SlipstreamHdfsCounters.bytesWritten();
        try (FSDataOutputStream out = fabricFs.createNonRecursive(new Path("/written/non-recursive"), true, 4096, (short) 3,
                TestClusters.BLOCK_BYTES, null)) {
            assertTrue(out.getWrappedStream() instanceof FabricOutputStream);
            out.write(data);
        }
        assertEquals(data.length, SlipstreamHdfsCounters.bytesWritten() - nonRecursiveBefore);
        assertArrayEquals(data, readAll(vanilla, new Path("/written/non-recursive")));
        assertThrows(java.io.FileNotFoundException.class,
                () -> fabricFs.createNonRecursive(new Path("/no-such-dir/file"), true, 4096, (short) 3, TestClusters.BLOCK_BYTES, null));
        // Appends are HDFS's own path, onto the replicas the fabric wrote.
        byte[] more = new byte[700];
        new Random(6).nextBytes(more);
        try (FSDataOutputStream out = fabricFs.append(path)) {
            assertTrue(!(out.getWrappedStream() instanceof FabricOutputStream));
            out.write(more);
        }
        byte[] appended = Arrays.copyOf(data, data.length + more.length);
        System.arraycopy(more, 0, appended, data.length, more.length);
        assertArrayEquals(appended, readAll(vanilla, path), "after an append by HDFS's stream");
        assertArrayEquals(appended, readAll(fs, path), "read over the fabric too");
    }

    @Test
    @Order(3)
    void concurrentWritersWhileOthersReadEachGetTheirFile() throws Exception {
        int writers = MAX_WRITES;
        int size = TestClusters.BLOCK_BYTES + 54321;
        Path readPath = new Path("/concurrent/read");
        byte[] readData = TestClusters.write(fabricFs, readPath, 2 * TestClusters.BLOCK_BYTES, 77);
        long before = SlipstreamHdfsCounters.bytesWritten();
        ExecutorService pool = Executors.newFixedThreadPool(writers + 2);
        try {
            List<Future<byte[]>> written = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int seed = 100 + w;
                written.add(pool.submit(() -> TestClusters.write(fabricFs, new Path("/concurrent/" + seed), size, seed)));
            }
            List<Future<byte[]>> reads = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                reads.add(pool.submit(() -> readAll(fs, readPath)));
            }
            for (int w = 0; w < writers; w++) {
                assertArrayEquals(written.get(w).get(60, TimeUnit.SECONDS), readAll(vanilla, new Path("/concurrent/" + (100 + w))));
            }
            for (Future<byte[]> read : reads) {
                assertArrayEquals(readData, read.get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals((long) writers * size, SlipstreamHdfsCounters.bytesWritten() - before);
    }

    @Test
    @Order(4)
    void badMessagesFailTheirWriteAndTheDataNodesKeepServing() throws Exception {
        List<DataNode> dataNodes = cluster.getDataNodes();
        int first = dataNodes.get(0).getXferPort();
        FabricEndpoint endpoint = ClientFabric.get(new HdfsConf(conf)).node.endpoint("127.0.0.1", conf.getInt(HdfsConf.PORT.key(), 0));
        String pool = cluster.getNamesystem().getBlockPoolId();
        long failedBefore = dataNodes.stream().mapToLong(d -> writes(d).writesFailed.get()).sum();

        // Frames that cannot be read are answered, then their connection is closed (counted); a packet
        // of no open write is read fine and refused alone. The next request connects again.
        AtomicLong malformed = DataNodeFabric.current().framesMalformed;
        long malformedBefore = malformed.get();
        assertRefused(endpoint, BlockWriteProtocol.OP_OPEN, ByteBuffer.wrap(new byte[] {1, 2, 3}), "malformed block message: truncated open");
        assertEquals(malformedBefore + 1, malformed.get());
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(first, 12345, 0, 0, 0, new byte[10], false), "no open write 12345");
        assertEquals(malformedBefore + 1, malformed.get());
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, ByteBuffer.wrap(new byte[7]), "packet of 7 bytes");
        assertRefused(endpoint, 77, ByteBuffer.wrap(new byte[1]), "unknown operation 77");
        assertEquals(malformedBefore + 3, malformed.get());

        // A packet larger than the DataNode takes, then one whose data does not match its checksums:
        // the last DataNode of a three-node pipeline finds it, and the failure names it.
        long writeId = 1_000_001;
        open(endpoint, pool, 1L << 40, writeId, dataNodes);
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(first, writeId, 0, 0, 0, new byte[TestClusters.REQUEST_BYTES + 512], false),
                "inconsistent packet header");
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(first, writeId, 0, 0, 0, new byte[10], false), "no open write " + writeId);
        writeId++;
        open(endpoint, pool, (1L << 40) + 1, writeId, dataNodes);
        String last = "127.0.0.1:" + dataNodes.get(2).getXferPort();
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(first, writeId, 0, 0, 0, new byte[2000], true),
                "pipeline node " + last + " failed: Checksum CRC32C not matched");
        // A failed write is gone: its later packets are refused.
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(first, writeId, 1, 2048, 0, new byte[10], false), "no open write " + writeId);

        // More packets out of order than write.packetsInFlight: the write fails at the limit.
        writeId++;
        open(endpoint, pool, (1L << 40) + 2, writeId, dataNodes.subList(0, 1));
        List<CompletableFuture<FabricBuffer>> ahead = new ArrayList<>();
        for (int seqno = 1; seqno <= PACKETS_IN_FLIGHT + 1; seqno++) {
            ahead.add(endpoint.requestAsync(BlockWriteProtocol.OP_PACKET, packet(first, writeId, seqno, seqno * 512L, 0, new byte[512], false)));
        }
        for (CompletableFuture<FabricBuffer> f : ahead) {
            Exception e = assertThrows(Exception.class, () -> f.get(30, TimeUnit.SECONDS).close());
            assertTrue(String.valueOf(e.getMessage()).contains("out of order"), e.getMessage());
        }

        // server.maxWrites single-node writes open on one DataNode; one more is refused as busy; then all finish.
        List<Long> open = new ArrayList<>();
        for (int i = 0; i < MAX_WRITES; i++) {
            open.add(++writeId);
            open(endpoint, pool, (1L << 40) + 10 + i, writeId, dataNodes.subList(0, 1));
        }
        Exception busy = assertThrows(FabricException.class, () -> open(endpoint, pool, (1L << 40) + 99, 999, dataNodes.subList(0, 1)));
        assertTrue(busy.getMessage().contains("busy"), busy.getMessage());
        for (long id : open) {
            try (FabricBuffer ack = endpoint.request(BlockWriteProtocol.OP_PACKET,
                    packet(first, id, 0, 0, BlockWriteProtocol.FLAG_LAST, new byte[1000], false))) {
                assertEquals(0, BlockWriteProtocol.decodeAck(ack.byteBuffer()));
            }
        }
        assertEquals(0, writes(dataNodes.get(0)).openWrites());
        // The three failed writes were counted where they failed, and the DataNodes write files on.
        assertTrue(dataNodes.stream().mapToLong(d -> writes(d).writesFailed.get()).sum() - failedBefore >= 3);
        Path path = new Path("/after-bad-messages");
        byte[] written = TestClusters.write(fabricFs, path, TestClusters.BLOCK_BYTES + 100, 9);
        assertArrayEquals(written, readAll(vanilla, path));
    }

    @Test
    @Order(5)
    void anIdleWriteIsFailedByItsDataNodeButAnOpenStreamKeepsItsPipelineWithHeartbeats() throws Exception {
        List<DataNode> dataNodes = cluster.getDataNodes();
        FabricEndpoint endpoint = ClientFabric.get(new HdfsConf(conf)).node.endpoint("127.0.0.1", conf.getInt(HdfsConf.PORT.key(), 0));
        long writeId = 2_000_001;
        open(endpoint, cluster.getNamesystem().getBlockPoolId(), (1L << 40) + 500, writeId, dataNodes.subList(0, 1));
        Path path = new Path("/idle");
        byte[] data = new byte[5000];
        new Random(13).nextBytes(data);
        long recoveriesBefore = SlipstreamHdfsCounters.pipelineRecoveries();
        long replacementsMissedBefore = SlipstreamHdfsCounters.pipelineReplacementsMissed();
        // Three DataNodes and an hflushed stream: HDFS's DEFAULT replace-datanode-on-failure policy asks for a
        // new DataNode and there is none, so (as HDFS's own stream) only best-effort lets the write go on.
        Configuration bestEffort = fabricConf(conf);
        bestEffort.setBoolean(HdfsClientConfigKeys.BlockWrite.ReplaceDatanodeOnFailure.BEST_EFFORT_KEY, true);
        try (FileSystem writer = FileSystem.newInstance(fs.getUri(), bestEffort); FSDataOutputStream out = writer.create(path)) {
            out.write(data, 0, 1000);
            out.hflush();
            Thread.sleep(2 * IDLE_TIMEOUT_MS);
            out.write(data, 1000, 4000);
        }
        assertEquals(0, SlipstreamHdfsCounters.pipelineRecoveries() - recoveriesBefore, "heartbeats kept the pipeline open");
        assertArrayEquals(data, readAll(vanilla, path));
        // The raw write opened above sent nothing: its DataNode failed it as idle.
        assertRefused(endpoint, BlockWriteProtocol.OP_PACKET, packet(dataNodes.get(0).getXferPort(), writeId, 0, 0, 0, new byte[10], false),
                "no open write " + writeId);
    }

    @Test
    @Order(6)
    void withoutAFabricOnTheDataNodesAutoWritesThroughHdfsAndNeverFails() throws IOException {
        Configuration elsewhere = fabricConf(conf);
        elsewhere.setInt(HdfsConf.PORT.key(), TestClusters.freePort());
        elsewhere.set(HdfsConf.FALLBACK.key(), "auto");
        long fabricBefore = SlipstreamHdfsCounters.bytesWritten();
        long declinedBefore = SlipstreamHdfsCounters.writesDeclined();
        Path path = new Path("/fallback/auto");
        try (FileSystem auto = FileSystem.newInstance(fs.getUri(), elsewhere)) {
            byte[] written = new byte[TestClusters.BLOCK_BYTES + 3];
            new Random(21).nextBytes(written);
            try (FSDataOutputStream out = auto.create(path)) {
                out.write(written);
                assertTrue(((FabricOutputStream) out.getWrappedStream()).fellBack());
            }
            assertArrayEquals(written, readAll(vanilla, path));
        }
        assertEquals(0, SlipstreamHdfsCounters.bytesWritten() - fabricBefore);
        assertEquals(1, SlipstreamHdfsCounters.writesDeclined() - declinedBefore);
        // A checksum the fabric path does not write (NULL): HDFS's stream, whatever the fallback.
        Configuration nullChecksums = fabricConf(conf);
        nullChecksums.set("dfs.checksum.type", "NULL");
        try (FileSystem plain = FileSystem.newInstance(fs.getUri(), nullChecksums);
                FSDataOutputStream out = plain.create(new Path("/fallback/null-checksum"))) {
            assertTrue(!(out.getWrappedStream() instanceof FabricOutputStream), String.valueOf(out.getWrappedStream()));
            out.write(new byte[100]);
        }
        elsewhere.set(HdfsConf.FALLBACK.key(), "never");
        try (FileSystem never = FileSystem.newInstance(fs.getUri(), elsewhere)) {
            FSDataOutputStream out = never.create(new Path("/fallback/never"));
            IOException e = assertThrows(IOException.class, () -> out.write(new byte[10]));
            assertTrue(e.getMessage().contains("pipeline node"), e.getMessage());
            assertThrows(IOException.class, out::close);
        }
    }

    /**
     * {@code createFile}'s builder (favored nodes, storage and erasure-coding policies) calls a private create of
     * {@code DistributedFileSystem} that the plugin cannot override (the builder class is final): such files are
     * written by HDFS's own stream, with every option the builder carried, and read back over the fabric.
     */
    @Test
    @Order(7)
    void filesOfTheCreateFileBuilderAreHdfssOwnWritesWithTheirOptions() throws Exception {
        DistributedFileSystem plugin = (DistributedFileSystem) fabricFs;
        Path path = new Path("/builder/warm");
        byte[] data = new byte[TestClusters.BLOCK_BYTES + 777];
        new Random(23).nextBytes(data);
        long writtenBefore = SlipstreamHdfsCounters.bytesWritten();
        long readBefore = SlipstreamHdfsCounters.bytesRead();
        java.net.InetSocketAddress favored = new java.net.InetSocketAddress("127.0.0.1",
                cluster.getDataNodes().get(1).getXferPort());
        try (FSDataOutputStream out = plugin.createFile(path).recursive().replication((short) 2).storagePolicyName("WARM")
                .favoredNodes(new java.net.InetSocketAddress[] {favored}).build()) {
            out.write(data);
        }
        assertEquals(0, SlipstreamHdfsCounters.bytesWritten() - writtenBefore, "bytes the plugin's stream wrote");
        assertEquals("WARM", fs.getStoragePolicy(path).getName(), "the builder's storage policy");
        assertEquals(2, fs.getFileStatus(path).getReplication(), "the builder's replication");
        for (org.apache.hadoop.fs.BlockLocation block : fs.getFileBlockLocations(path, 0, data.length)) {
            assertTrue(Arrays.asList(block.getNames()).contains("127.0.0.1:" + favored.getPort()),
                    "the favored DataNode holds " + Arrays.toString(block.getNames()));
        }
        byte[] back = new byte[data.length];
        try (FSDataInputStream in = fabricFs.open(path)) {
            in.readFully(0, back);
        }
        assertArrayEquals(data, back);
        assertTrue(SlipstreamHdfsCounters.bytesRead() - readBefore >= data.length, "read back over the fabric");
    }

    @Test
    @Order(8)
    void fsckFindsEveryFileHealthy() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = new DFSck(conf, new PrintStream(out, true, "UTF-8")).run(new String[] {"/", "-files", "-blocks"});
        String report = out.toString("UTF-8");
        assertEquals(0, status, report);
        assertTrue(report.contains("is HEALTHY"), report);
        assertTrue(report.contains("/written/798777"), report);
    }

    @Test
    @Order(9)
    void aDataNodeStoppedMidWriteIsDroppedFromThePipelineAndTheFileIsComplete() throws Exception {
        Path path = new Path("/stopped-mid-write");
        byte[] data = new byte[2 * TestClusters.BLOCK_BYTES + 5000];
        new Random(11).nextBytes(data);
        long recoveriesBefore = SlipstreamHdfsCounters.pipelineRecoveries();
        long replacementsMissedBefore = SlipstreamHdfsCounters.pipelineReplacementsMissed();
        // Three DataNodes and an hflushed stream: HDFS's DEFAULT replace-datanode-on-failure policy asks for a
        // new DataNode and there is none, so (as HDFS's own stream) only best-effort lets the write go on.
        Configuration bestEffort = fabricConf(conf);
        bestEffort.setBoolean(HdfsClientConfigKeys.BlockWrite.ReplaceDatanodeOnFailure.BEST_EFFORT_KEY, true);
        try (FileSystem writer = FileSystem.newInstance(fs.getUri(), bestEffort); FSDataOutputStream out = writer.create(path)) {
            out.write(data, 0, 100_000);
            out.hflush();
            var victim = ((FabricOutputStream) out.getWrappedStream()).pipeline()[1];
            int index = -1;
            for (int i = 0; i < cluster.getDataNodes().size(); i++) {
                if (cluster.getDataNodes().get(i).getXferPort() == victim.getXferPort()) {
                    index = i;
                }
            }
            assertTrue(index >= 0);
            cluster.stopDataNode(index);
            // Packets in flight fail at the stopped DataNode; the stream recovers the pipeline with the two
            // others, sends again what was not acknowledged, and goes on into the next blocks.
            out.write(data, 100_000, data.length - 100_000);
        }
        assertEquals(1, SlipstreamHdfsCounters.pipelineRecoveries() - recoveriesBefore);
        assertEquals(1, SlipstreamHdfsCounters.pipelineReplacementsMissed() - replacementsMissedBefore);
        assertEquals(data.length, vanilla.getFileStatus(path).getLen());
        assertArrayEquals(data, readAll(vanilla, path), "the recovered file read by HDFS's readers");
        // Every block on the two DataNodes left, once their asynchronous reports reached the NameNode.
        DFSTestUtil.waitReplication(vanilla, path, (short) 2);
        var first = fs.getClient().getLocatedBlocks(path.toString(), 0).get(0);
        assertEquals(2, first.getLocations().length, "the recovered block's replicas: the two DataNodes left");
        // The two DataNodes left write a new file: the NameNode still lists the stopped one, whose
        // pipeline fails to open naming it; the stream abandons the block and asks for another without it.
        Path after = new Path("/after-stop");
        byte[] written = TestClusters.write(fabricFs, after, TestClusters.BLOCK_BYTES + 7, 12);
        assertArrayEquals(written, readAll(vanilla, after));
    }

    private static DataNodeWrites writes(DataNode dataNode) {
        DataNodeWrites writes = DataNodeFabric.current().writesOf(dataNode.getXferPort());
        assertNotNull(writes, "DataNode " + dataNode.getXferPort() + " serves writes over the fabric");
        return writes;
    }

    private static long dataNodeBytesWritten() {
        return cluster.getDataNodes().stream().mapToLong(d -> writes(d).bytesWritten.get()).sum();
    }

    private static byte[] readAll(FileSystem fileSystem, Path path) throws IOException {
        ByteArrayOutputStream read = new ByteArrayOutputStream();
        byte[] buf = new byte[8191];
        try (FSDataInputStream in = fileSystem.open(path)) {
            for (int n; (n = in.read(buf)) > 0;) {
                read.write(buf, 0, n);
            }
        }
        return read.toByteArray();
    }

    /** Opens a write of a block no file owns on {@code pipeline} (the DataNode accepts it: the NameNode will delete it). */
    private static void open(FabricEndpoint endpoint, String pool, long blockId, long writeId, List<DataNode> pipeline) {
        List<BlockWriteProtocol.Target> downstream = new ArrayList<>();
        for (DataNode d : pipeline.subList(1, pipeline.size())) {
            downstream.add(new BlockWriteProtocol.Target("127.0.0.1", d.getXferPort(), StorageType.DEFAULT, ""));
        }
        var open = new BlockWriteProtocol.Open(pipeline.get(0).getXferPort(), writeId, pool, blockId, 1001, CRC32C_512.getChecksumType().id,
                512, StorageType.DEFAULT, "", new byte[0], downstream);
        try (FabricBuffer answer = endpoint.request(BlockWriteProtocol.OP_OPEN, open.encode())) {
            assertEquals(1, answer.length());
        }
    }

    /** A PACKET with correct CRC32C/512 checksums, or with its data's first byte flipped after checksumming. */
    private static ByteBuffer packet(int xferPort, long writeId, long seqno, long offset, int flags, byte[] data, boolean corrupt) {
        int chunks = (data.length + 511) / 512;
        ByteBuffer out = ByteBuffer.allocate(BlockWriteProtocol.PACKET_HEADER_BYTES + chunks * 4 + data.length);
        new BlockWriteProtocol.PacketHeader(xferPort, writeId, seqno, offset, flags, data.length, chunks * 4).encode(out);
        byte[] sums = new byte[chunks * 4];
        CRC32C_512.calculateChunkedSums(data, 0, data.length, sums, 0);
        out.put(sums);
        byte[] sent = data.clone();
        if (corrupt) {
            sent[0] ^= 1;
        }
        out.put(sent);
        return out.flip();
    }

    /** Refused with {@code expected}; a frame the DataNode cannot read also closes the connection: awaited. */
    private static void assertRefused(FabricEndpoint endpoint, int op, ByteBuffer payload, String expected) throws InterruptedException {
        long malformed = DataNodeFabric.current().framesMalformed.get();
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(op, payload).close());
        assertEquals(FabricException.Kind.REMOTE, e.kind(), e.toString());
        assertTrue(e.getMessage().contains(expected), "expected '" + expected + "' in: " + e.getMessage());
        HdfsReadTest.awaitClosedIf(DataNodeFabric.current().framesMalformed.get() > malformed, endpoint.node());
    }
}
