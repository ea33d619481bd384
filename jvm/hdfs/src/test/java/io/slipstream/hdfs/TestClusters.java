package io.slipstream.hdfs;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/** Real HDFS mini clusters for the tests: a NameNode and three (or more) DataNodes on loopback with the plugin loaded. */
final class TestClusters {
    static final int BLOCK_BYTES = 256 << 10;
    static final int REQUEST_BYTES = 64 << 10;

    private TestClusters() {
    }

    /** The cluster's and its clients' configuration: plugin on both sides, fallback never, small blocks. */
    static Configuration conf(boolean blockTokens) {
        Configuration conf = new HdfsConfiguration();
        conf.set("dfs.datanode.plugins", SlipstreamDataNodePlugin.class.getName());
        conf.set("dfs.client.replica.accessor.builder.classes", SlipstreamReplicaAccessorBuilder.class.getName());
        conf.setInt(HdfsConf.PORT.key(), freePort());
        conf.set(HdfsConf.FALLBACK.key(), "never");
        conf.set(HdfsConf.BUFFER_CAP.key(), "32m");
        conf.set(HdfsConf.SERVER_MAX_BYTES_IN_FLIGHT.key(), "4m");
        conf.setInt(HdfsConf.REQUEST_BYTES.key(), REQUEST_BYTES);
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, BLOCK_BYTES);
        conf.setInt(DFSConfigKeys.DFS_BYTES_PER_CHECKSUM_KEY, 512);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
        conf.setBoolean(DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY, blockTokens);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        // A stopped DataNode is noticed by the client's own retries, not waited for.
        conf.setInt("dfs.client.retry.window.base", 10);
        return conf;
    }

    static MiniDFSCluster start(Configuration conf, String name) throws IOException {
        return start(conf, name, 3);
    }

    static MiniDFSCluster start(Configuration conf, String name, int dataNodes) throws IOException {
        Path base = Files.createTempDirectory("slipstream-hdfs-" + name);
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(dataNodes).build();
        cluster.waitActive();
        return cluster;
    }

    /** Writes {@code length} seeded random bytes to {@code path}, replication 3; returns them. */
    static byte[] write(FileSystem fs, org.apache.hadoop.fs.Path path, int length, long seed) throws IOException {
        byte[] data = new byte[length];
        new Random(seed).nextBytes(data);
        try (FSDataOutputStream out = fs.create(path, (short) 3)) {
            out.write(data);
        }
        return data;
    }

    /** A port free on loopback now, for the fabric port both sides read from the configuration. */
    static int freePort() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
