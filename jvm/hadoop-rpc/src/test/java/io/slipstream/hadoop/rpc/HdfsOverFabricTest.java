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
 * takes {@link FabricRpcEngine} and whose call queues are {@link FabricCallQueue}s, with fallback never: every metadata call of the client goes over the
 * fabric, which the engine's counters show. The NameNode's fabric port is fixed, as its RPC port is, so that
 * a restarted NameNode is found where it was.
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
        // The README's recommended call queue: the NameNode's idle handlers pull the fabric's calls (the
        // DataNodes' own RPC servers get it too, as a plain FIFO).
        conf.set("ipc.callqueue.impl", FabricCallQueue.class.getName());
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        try (java.net.ServerSocket free = new java.net.ServerSocket(0)) {
            conf.setInt(RpcConf.PORT, free.getLocalPort());
        }
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
        assertTrue(nameNode.handlersPulling() >= 0, "the NameNode's call queue is a FabricCallQueue");
        assertFalse(nameNode.receiverThreadsStarted(), "its handlers pull, no receiver threads");
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

    /**
     * A NameNode restarted under a client that held a session: the client's next calls (create is
     * {@code @AtMostOnce}, mkdirs {@code @Idempotent}, delete {@code @AtMostOnce}; the client's proxy has no retry
     * policy, as HDFS's default for a NameNode without HA) are refused as of an unknown session, the restarted
     * NameNode confirms it holds no such session, and each call runs once, over the fabric (docs/hadoop-rpc.md,
     * message 7). On sockets the first call after a restart also just works (a new connection).
     */
    @Test
    void aRestartedNameNodeServesTheClientsNextCallsOverTheFabric() throws Exception {
        assertTrue(fs.mkdirs(new Path("/slipstream/before-restart")));
        cluster.restartNameNode(true);
        FabricRpcServer nameNode = (FabricRpcServer) nameNodeClientServer();
        long sentBefore = FabricRpcEngine.fabricCalls();
        long socketBefore = FabricRpcEngine.socketCalls();
        Path file = new Path("/slipstream/after-restart/a.txt");
        try (FSDataOutputStream out = fs.create(file, (short) 2)) {
            out.write(1);
        }
        assertEquals(1, fs.getFileStatus(file).getLen());
        assertTrue(fs.delete(new Path("/slipstream/after-restart"), true));
        assertTrue(fs.delete(new Path("/slipstream/before-restart"), true));
        assertEquals(0, FabricRpcEngine.socketCalls() - socketBefore, "calls that fell back to sockets");
        assertTrue(FabricRpcEngine.fabricCalls() - sentBefore >= 5, "calls over the fabric after the restart");
        assertEquals(1, nameNode.fabricFramesRefused(), "the first frame, of the session the restart lost");
        assertTrue(nameNode.fabricCallsReceived() >= FabricRpcEngine.fabricCalls() - sentBefore,
                "every call reached the restarted NameNode");
    }

    /** NameNodeRpcServer keeps its client server in a private field: read it as the tests of HDFS do. */
    private static RPC.Server nameNodeClientServer() throws ReflectiveOperationException {
        Object rpc = cluster.getNameNodeRpc();
        java.lang.reflect.Field field = rpc.getClass().getDeclaredField("clientRpcServer");
        field.setAccessible(true);
        return (RPC.Server) field.get(rpc);
    }
}
