package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.client.HdfsClientConfigKeys.BlockWrite.ReplaceDatanodeOnFailure;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * HDFS's replace-datanode-on-failure for writes over the fabric, on a mini cluster of four DataNodes (one
 * more than a block's pipeline): a DataNode of the pipeline is stopped mid-block, and whether the recovered
 * pipeline gets a new DataNode (with a copy of the replica from a survivor) is decided by the client's
 * policy, as for HDFS's own stream. The NameNode's own re-replication is held off (its redundancy monitor
 * runs every 1000 s here), so a third replica can only come from the stream.
 */
class HdfsPipelineReplacementTest {
    private static final int BLOCK_BYTES = TestClusters.BLOCK_BYTES;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    private static final List<MiniDFSCluster.DataNodeProperties> stopped = new ArrayList<>();

    @BeforeAll
    static void startCluster() throws IOException {
        Configuration conf = TestClusters.conf(false);
        conf.setInt(HdfsConf.WRITE_PACKET_BYTES.key(), 16 << 10);
        conf.setInt(HdfsConf.WRITE_PACKETS_IN_FLIGHT.key(), 4);
        conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1000);
        cluster = TestClusters.start(conf, "replacement", 4);
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stopCluster() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    /** Every test starts with the four DataNodes up. */
    @AfterEach
    void restartStopped() throws IOException {
        for (MiniDFSCluster.DataNodeProperties dn : stopped) {
            cluster.restartDataNode(dn, true);
        }
        stopped.clear();
        cluster.waitActive();
    }

    /** The plugin's client with HDFS's replace-datanode-on-failure policy set as a user sets it. */
    private static FileSystem client(String policy, boolean bestEffort) throws IOException {
        Configuration c = HdfsWriteTest.fabricConf(cluster.getConfiguration(0));
        c.set(ReplaceDatanodeOnFailure.POLICY_KEY, policy);
        c.setBoolean(ReplaceDatanodeOnFailure.BEST_EFFORT_KEY, bestEffort);
        return FileSystem.newInstance(fs.getUri(), c);
    }

    private static void stop(DatanodeInfo node) {
        stop(node.getXferPort());
    }

    private static void stop(int xferPort) {
        for (int i = 0; i < cluster.getDataNodes().size(); i++) {
            if (cluster.getDataNodes().get(i).getXferPort() == xferPort) {
                stopped.add(cluster.stopDataNode(i));
                return;
            }
        }
        throw new AssertionError("no DataNode on port " + xferPort);
    }

    /** Waits (at most 30 s) for what the stream does in its own time; fails naming it. */
    private static void await(String what, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 30 s: " + what);
            }
            Thread.sleep(20);
        }
    }

    private static DatanodeInfo[] pipeline(FSDataOutputStream out) {
        return ((FabricOutputStream) out.getWrappedStream()).pipeline();
    }

    private static byte[] data(long seed) {
        byte[] data = new byte[BLOCK_BYTES + 70_000];
        new Random(seed).nextBytes(data);
        return data;
    }

    private static void assertReadsBack(Path path, byte[] expected) throws IOException {
        byte[] read = new byte[expected.length];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, read);
        }
        assertArrayEquals(expected, read, path + " as HDFS reads it");
    }

    /** The DataNodes the NameNode lists for the file's first block once the stream closed. */
    private static List<DatanodeInfo> firstBlockReplicas(Path path) throws IOException {
        LocatedBlock first = fs.getClient().getLocatedBlocks(path.toString(), 0).get(0);
        return Arrays.asList(first.getLocations());
    }

    /**
     * HBase's WAL case: a stream that was hflushed loses a DataNode; HDFS's DEFAULT policy (replication 3,
     * hflushed) asks for a replacement, which gets the replica's acknowledged bytes from a survivor, and the
     * block ends with three replicas, none on the stopped DataNode.
     */
    @Test
    void anHflushedStreamGetsANewDataNodeUnderTheDefaultPolicy() throws Exception {
        Path path = new Path("/replaced/hflushed");
        byte[] data = data(1);
        long replacedBefore = SlipstreamHdfsCounters.pipelineReplacements();
        try (FileSystem writer = client("DEFAULT", false); FSDataOutputStream out = writer.create(path, (short) 3)) {
            out.write(data, 0, 100_000);
            out.hflush();
            DatanodeInfo[] original = pipeline(out);
            assertEquals(3, original.length);
            DatanodeInfo victim = original[1];
            stop(victim);
            out.write(data, 100_000, 60_000);
            out.hflush();
            DatanodeInfo[] recovered = pipeline(out);
            assertEquals(3, recovered.length, "the recovered pipeline: " + Arrays.toString(recovered));
            assertFalse(Arrays.asList(recovered).contains(victim), "without the stopped DataNode");
            assertEquals(1, Arrays.stream(recovered).filter(n -> !Arrays.asList(original).contains(n)).count(),
                    "one DataNode not in the first pipeline: " + Arrays.toString(recovered));
            out.write(data, 160_000, data.length - 160_000);
        }
        assertEquals(1, SlipstreamHdfsCounters.pipelineReplacements() - replacedBefore);
        assertReadsBack(path, data);
        List<DatanodeInfo> replicas = firstBlockReplicas(path);
        assertEquals(3, replicas.size(), "the first block's replicas: " + replicas);
    }

    /** The DEFAULT policy does not replace one DataNode of three for a stream never flushed: two replicas. */
    @Test
    void aStreamNeverFlushedGoesOnWithTheSurvivorsUnderTheDefaultPolicy() throws Exception {
        Path path = new Path("/replaced/unflushed");
        byte[] data = data(2);
        long replacedBefore = SlipstreamHdfsCounters.pipelineReplacements();
        long recoveredBefore = SlipstreamHdfsCounters.pipelineRecoveries();
        try (FileSystem writer = client("DEFAULT", false); FSDataOutputStream out = writer.create(path, (short) 3)) {
            out.write(data, 0, 100_000);
            // Until the first packets went, the stream has no pipeline to look at.
            await("the first block's pipeline opened", () -> pipeline(out).length == 3);
            stop(pipeline(out)[2]);
            out.write(data, 100_000, 120_000);
            await("the pipeline recovered", () -> SlipstreamHdfsCounters.pipelineRecoveries() > recoveredBefore);
            assertEquals(2, pipeline(out).length, Arrays.toString(pipeline(out)));
            out.write(data, 220_000, data.length - 220_000);
        }
        assertEquals(0, SlipstreamHdfsCounters.pipelineReplacements() - replacedBefore);
        assertReadsBack(path, data);
        assertEquals(2, firstBlockReplicas(path).size());
    }

    /**
     * No DataNode left to add (the fourth stopped too): HDFS's stream fails with "Failed to replace a bad
     * datanode", and so does this one; with best-effort the write goes on with the survivors.
     */
    @Test
    void withNoDataNodeToAddTheWriteFailsUnlessBestEffort() throws Exception {
        for (boolean bestEffort : new boolean[] {false, true}) {
            Path path = new Path("/replaced/none-left-" + bestEffort);
            byte[] data = data(3);
            long missedBefore = SlipstreamHdfsCounters.pipelineReplacementsMissed();
            try (FileSystem writer = client("ALWAYS", bestEffort)) {
                FSDataOutputStream out = writer.create(path, (short) 3);
                out.write(data, 0, 100_000);
                out.hflush();
                DatanodeInfo[] original = pipeline(out);
                List<Integer> spare = new ArrayList<>();
                for (var dn : cluster.getDataNodes()) {
                    if (Arrays.stream(original).noneMatch(n -> n.getXferPort() == dn.getXferPort())) {
                        spare.add(dn.getXferPort());
                    }
                }
                assertEquals(1, spare.size());
                stop(spare.get(0));
                stop(original[0]);
                if (bestEffort) {
                    out.write(data, 100_000, data.length - 100_000);
                    out.close();
                    assertReadsBack(path, data);
                    assertEquals(1, SlipstreamHdfsCounters.pipelineReplacementsMissed() - missedBefore);
                } else {
                    IOException e = assertThrows(IOException.class, () -> {
                        out.write(data, 100_000, data.length - 100_000);
                        out.hflush();
                    });
                    assertTrue(String.valueOf(e.getMessage()).contains("replace") || String.valueOf(e.getMessage())
                            .contains("add a datanode"), "HDFS's reason: " + e);
                    assertThrows(IOException.class, out::close);
                }
            }
            restartStopped();
        }
    }
}
