package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.security.token.Token;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** With {@code dfs.block.access.token.enable}: reads carry the client's token; missing or wrong tokens are refused. */
class HdfsBlockTokenTest {
    private static Configuration conf;
    private static MiniDFSCluster cluster;
    private static FileSystem fs;

    @BeforeAll
    static void startCluster() throws IOException {
        conf = TestClusters.conf(true);
        // DataNodes report received blocks in batches, once a second: a writer's addBlock right after a block
        // (its third and later: the one two back must be complete) meets the NameNode's "not replicated yet",
        // which HDFS's client and the plugin's stream retry.
        conf.setLong("dfs.blockreport.incremental.intervalMsec", 1000);
        cluster = TestClusters.start(conf, "tokens");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stopCluster() {
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    void readsWithTheClientsTokenGoOverTheFabric() throws IOException {
        Path path = new Path("/tokens/read");
        byte[] written = TestClusters.write(fs, path, 2 * TestClusters.BLOCK_BYTES + 3, 1);
        long before = SlipstreamHdfsCounters.bytesRead();
        byte[] got = new byte[written.length];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, got);
        }
        assertArrayEquals(written, got);
        assertEquals(written.length, SlipstreamHdfsCounters.bytesRead() - before);
    }

    @Test
    void missingAndWrongTokensAreRefused() throws Exception {
        Path path = new Path("/tokens/refused");
        TestClusters.write(fs, path, 5000, 2);
        Path other = new Path("/tokens/other");
        TestClusters.write(fs, other, 5000, 3);
        LocatedBlock block = ((DistributedFileSystem) fs).getClient().getLocatedBlocks(path.toString(), 0).get(0);
        LocatedBlock otherBlock = ((DistributedFileSystem) fs).getClient().getLocatedBlocks(other.toString(), 0).get(0);
        Token<BlockTokenIdentifier> token = block.getBlockToken();
        byte[] password = token.getPassword().clone();
        password[0] ^= 1;
        Token<BlockTokenIdentifier> forged = new Token<>(token.getIdentifier(), password, token.getKind(), token.getService());
        int xferPort = block.getLocations()[0].getXferPort();
        int port = conf.getInt(HdfsConf.PORT.key(), 0);
        try (FabricNode client = FabricNode.builder().start()) {
            FabricEndpoint endpoint = client.endpoint("127.0.0.1", port);
            assertRefused(endpoint, request(xferPort, block, new byte[0]), "token required");
            assertRefused(endpoint, request(xferPort, block, encode(forged)), "token refused");
            assertRefused(endpoint, request(xferPort, block, encode(otherBlock.getBlockToken())), "token refused");
            assertRefused(endpoint, request(xferPort, block, new byte[] {1, 2, 3}), "unreadable");
            try (FabricBuffer ok = endpoint.request(BlockReadProtocol.OP_READ, request(xferPort, block, encode(token)))) {
                assertEquals(5000, BlockReadProtocol.ReadHeader.decode(ok.byteBuffer(), ok.length()).dataLength());
            }
        }
    }

    @Test
    void writesCarryTheNameNodesTokenAndWrongTokensAreRefused() throws Exception {
        Path path = new Path("/tokens/written");
        byte[] written;
        long before = SlipstreamHdfsCounters.bytesWritten();
        long retriesBefore = SlipstreamHdfsCounters.addBlockRetries();
        try (FileSystem fabricFs = FileSystem.newInstance(fs.getUri(), HdfsWriteTest.fabricConf(conf))) {
            written = TestClusters.write(fabricFs, path, 3 * TestClusters.BLOCK_BYTES + 5, 4);
            int files = 1;
            // A block report sent in the few ms between a block's end and the next addBlock spares the retry: try again.
            for (; files < 4 && SlipstreamHdfsCounters.addBlockRetries() == retriesBefore; files++) {
                TestClusters.write(fabricFs, new Path("/tokens/written-" + files), written.length, files);
            }
            assertEquals((long) files * written.length, SlipstreamHdfsCounters.bytesWritten() - before);
        }
        assertTrue(SlipstreamHdfsCounters.addBlockRetries() > retriesBefore, "addBlock retried on NotReplicatedYetException");
        byte[] got = new byte[written.length];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, got);
        }
        assertArrayEquals(written, got);
        // OPENs of a block with a missing token, a forged one, and the token of another block (this file's first).
        LocatedBlock block = ((DistributedFileSystem) fs).getClient().getLocatedBlocks(path.toString(), 0).get(0);
        Token<BlockTokenIdentifier> token = block.getBlockToken();
        byte[] password = token.getPassword().clone();
        password[0] ^= 1;
        Token<BlockTokenIdentifier> forged = new Token<>(token.getIdentifier(), password, token.getKind(), token.getService());
        int xferPort = block.getLocations()[0].getXferPort();
        try (FabricNode client = FabricNode.builder().start()) {
            FabricEndpoint endpoint = client.endpoint("127.0.0.1", conf.getInt(HdfsConf.PORT.key(), 0));
            for (byte[] bad : new byte[][] {new byte[0], encode(forged), encode(token)}) {
                var open = new BlockWriteProtocol.Open(xferPort, 77, block.getBlock().getBlockPoolId(), block.getBlock().getBlockId() + 1000,
                        block.getBlock().getGenerationStamp(), 2, 512, org.apache.hadoop.fs.StorageType.DEFAULT, "", bad, java.util.List.of());
                FabricException e = assertThrows(FabricException.class, () -> endpoint.request(BlockWriteProtocol.OP_OPEN, open.encode()).close());
                assertTrue(e.getMessage().contains("token"), e.getMessage());
            }
        }
    }

    private static void assertRefused(FabricEndpoint endpoint, ByteBuffer request, String why) {
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(BlockReadProtocol.OP_READ, request).close());
        assertEquals(FabricException.Kind.REMOTE, e.kind());
        assertTrue(e.getMessage().contains(why), e.getMessage());
    }

    private static ByteBuffer request(int xferPort, LocatedBlock block, byte[] token) {
        return new BlockReadProtocol.ReadRequest(xferPort, block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(),
                block.getBlock().getGenerationStamp(), 0, 5000, token).encode();
    }

    private static byte[] encode(Token<BlockTokenIdentifier> token) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        token.write(new DataOutputStream(bytes));
        return bytes.toByteArray();
    }
}
