package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocolPB.ClientNamenodeProtocolPB;
import org.apache.hadoop.ipc.RPC;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A real HDFS (NameNode and two DataNodes, one cluster for the class) whose NameNode client protocol
 * takes {@link FabricRpcEngine}, with fallback never: every metadata call of the client goes over the
 * fabric, which the engine's counters show.
 */
class HdfsOverFabricTest {
    private static MiniDFSCluster cluster;
    private static FileSystem fs;
    private static File base;

    @BeforeAll
    static void start() throws Exception {
        base = Files.createTempDirectory("slipstream-hdfs-rpc").toFile();
        Configuration conf = new Configuration();
        conf.set("rpc.engine." + ClientNamenodeProtocolPB.class.getName(), FabricRpcEngine.class.getName());
        conf.set(RpcConf.FALLBACK, "never");
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
        cluster = new MiniDFSCluster.Builder(conf, base).numDataNodes(2).build();
        cluster.waitActive();
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() throws Exception {
        if (fs != null) {
            fs.close();
        }
        if (cluster != null) {
            cluster.shutdown();
        }
        org.apache.hadoop.fs.FileUtil.fullyDelete(base);
    }

    @Test
    void theNameNodeServesClientsOverTheFabric() throws Exception {
        RPC.Server server = cluster.getNameNodeRpc() == null ? null : nameNodeClientServer();
        assertTrue(server instanceof FabricRpcServer, "the NameNode's client RPC server is " + server);
        FabricRpcServer nameNode = (FabricRpcServer) server;
        long sentBefore = FabricRpcEngine.fabricCalls();
        long receivedBefore = nameNode.fabricCallsReceived();
        long socketBefore = FabricRpcEngine.socketCalls();

        Path dir = new Path("/slipstream/rpc");
        assertTrue(fs.mkdirs(dir));
        Path file = new Path(dir, "a.txt");
        byte[] data = "written through a NameNode reached over the fabric".getBytes(StandardCharsets.UTF_8);
        try (FSDataOutputStream out = fs.create(file, (short) 2)) {
            out.write(data);
        }
        FileStatus status = fs.getFileStatus(file);
        assertEquals(data.length, status.getLen());
        assertEquals(2, status.getReplication());
        FileStatus[] listing = fs.listStatus(dir);
        assertEquals(1, listing.length);
        assertEquals("a.txt", listing[0].getPath().getName());
        byte[] back = new byte[data.length];
        try (FSDataInputStream in = fs.open(file)) {
            in.readFully(back);
        }
        assertArrayEquals(data, back);
        Path renamed = new Path(dir, "b.txt");
        assertTrue(fs.rename(file, renamed));
        assertFalse(fs.exists(file));
        assertTrue(fs.exists(renamed));
        assertTrue(fs.delete(dir, true));
        assertFalse(fs.exists(dir));

        long sent = FabricRpcEngine.fabricCalls() - sentBefore;
        assertTrue(sent >= 10, "metadata calls over the fabric: " + sent);
        assertEquals(0, FabricRpcEngine.socketCalls() - socketBefore, "calls that fell back to sockets");
        assertTrue(nameNode.fabricCallsReceived() - receivedBefore >= sent,
                "the NameNode took " + (nameNode.fabricCallsReceived() - receivedBefore) + " of " + sent);
        assertEquals(0, fs.listStatus(new Path("/slipstream")).length);
    }

    /** NameNodeRpcServer keeps its client server in a private field: read it as the tests of HDFS do. */
    private static RPC.Server nameNodeClientServer() throws ReflectiveOperationException {
        Object rpc = cluster.getNameNodeRpc();
        java.lang.reflect.Field field = rpc.getClass().getDeclaredField("clientRpcServer");
        field.setAccessible(true);
        return (RPC.Server) field.get(rpc);
    }
}
