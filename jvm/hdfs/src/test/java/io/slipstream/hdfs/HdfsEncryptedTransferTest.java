package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * With {@code dfs.encrypt.data.transfer=true} the fabric, which does not encrypt, carries no block: the
 * DataNode plugin does not start and the client's accessor and stream decline, whatever the fallback (never
 * here), so HDFS's encrypted data transfer carries every read and write.
 */
class HdfsEncryptedTransferTest {
    private static MiniDFSCluster cluster;
    private static FileSystem fs;

    @BeforeAll
    static void startCluster() throws IOException {
        Configuration conf = TestClusters.conf(true); // encrypted transfer needs block tokens
        conf.setBoolean(DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_KEY, true);
        cluster = TestClusters.start(conf, "encrypted", 2);
        Configuration client = new Configuration(cluster.getConfiguration(0));
        client.set("fs.hdfs.impl", SlipstreamDistributedFileSystem.class.getName());
        client.setBoolean("fs.hdfs.impl.disable.cache", true);
        fs = FileSystem.get(cluster.getURI(), client);
        assertTrue(fs instanceof SlipstreamDistributedFileSystem, "the plugin's file system: " + fs.getClass());
    }

    @AfterAll
    static void stopCluster() throws IOException {
        if (fs != null) {
            fs.close();
        }
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    void blocksGoThroughHdfsEncryptedTransferNotTheFabric() throws IOException {
        for (DataNode dataNode : cluster.getDataNodes()) {
            assertTrue(dataNode.getDnConf().getEncryptDataTransfer(), "HDFS's encrypted transfer is on");
        }
        assertNull(DataNodeFabric.current(), "no DataNode of this process serves over the fabric");
        long written = SlipstreamHdfsCounters.bytesWritten();
        long read = SlipstreamHdfsCounters.bytesRead();
        long served = SlipstreamHdfsCounters.dataNodeBytesServed();
        long received = SlipstreamHdfsCounters.dataNodeBytesReceived();
        long declined = SlipstreamHdfsCounters.declined();
        Path path = new Path("/encrypted/file");
        byte[] data = new byte[2 * TestClusters.BLOCK_BYTES + 5];
        new java.util.Random(7).nextBytes(data);
        try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(path, (short) 2)) {
            out.write(data);
        }
        byte[] back = new byte[data.length];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, back);
        }
        assertArrayEquals(data, back);
        assertEquals(0, SlipstreamHdfsCounters.bytesWritten() - written, "bytes written over the fabric");
        assertEquals(0, SlipstreamHdfsCounters.bytesRead() - read, "bytes read over the fabric");
        assertEquals(0, SlipstreamHdfsCounters.dataNodeBytesServed() - served, "bytes the DataNodes served over it");
        assertEquals(0, SlipstreamHdfsCounters.dataNodeBytesReceived() - received, "bytes the DataNodes received over it");
        assertTrue(SlipstreamHdfsCounters.declined() - declined >= 3, "the accessor declined each of the three blocks");
    }
}
