package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocolPB.ClientDatanodeProtocolPB;
import org.apache.hadoop.hdfs.protocolPB.ClientNamenodeProtocolPB;
import org.apache.hadoop.hdfs.protocolPB.DatanodeProtocolPB;
import org.apache.hadoop.hdfs.protocolPB.InterDatanodeProtocolPB;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.ipc.RPC;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A real HDFS (NameNode and two DataNodes, one cluster for the class) whose protocols between clients,
 * NameNode and DataNodes take {@link FabricRpcEngine} and whose call queues are {@link FabricCallQueue}s, with
 * fallback never: every call of those protocols goes over the fabric, which the engine's counters and the
 * servers' sessions show; a MapReduce job (Hadoop's local runner) reads and writes it. The NameNode's fabric
 * port is fixed, as its RPC port is, so that a restarted NameNode is found where it was.
 */
class HdfsOverFabricTest {
    /**
     * HDFS's protocols that take the engine: the clients' to the NameNode, the DataNodes' to the NameNode
     * (heartbeats, block reports, received blocks, lease recovery's commit), the clients' to a DataNode (the
     * visible length of a replica being written) and the DataNodes' to each other (lease recovery).
     */
    private static final Class<?>[] FABRIC_PROTOCOLS = {ClientNamenodeProtocolPB.class, DatanodeProtocolPB.class,
        ClientDatanodeProtocolPB.class, InterDatanodeProtocolPB.class};
    private static MiniDFSCluster cluster;
    private static FileSystem fs;
    private static File base;

    @BeforeAll
    static void start() throws Exception {
        base = Files.createTempDirectory("slipstream-hdfs-rpc").toFile();
        Configuration conf = new Configuration();
        for (Class<?> protocol : FABRIC_PROTOCOLS) {
            conf.set("rpc.engine." + protocol.getName(), FabricRpcEngine.class.getName());
        }
        conf.set(RpcConf.FALLBACK, "never");
        // The README's recommended call queue: the NameNode's idle handlers pull the fabric's calls (the
        // DataNodes' own RPC servers get it too).
        conf.set("ipc.callqueue.impl", FabricCallQueue.class.getName());
        // The NameNode's RPC and fabric ports are fixed, so that a restarted NameNode is found where it was; the
        // fabric port under the NameNode's own key (ipc.<its RPC port>.slipstream.rpc.port), as the DataNodes'
        // servers of the same configuration take free ones.
        int nameNodePort = freePort();
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:" + nameNodePort);
        conf.setInt("ipc." + nameNodePort + "." + RpcConf.PORT, freePort());
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
        cluster = new MiniDFSCluster.Builder(conf, base).nameNodePort(nameNodePort).numDataNodes(2).build();
        cluster.waitActive();
        fs = cluster.getFileSystem();
    }

    private static int freePort() throws IOException {
        try (ServerSocket free = new ServerSocket(0)) {
            return free.getLocalPort();
        }
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
        // The client's first frame, of the session the restart lost; and each DataNode's next DatanodeProtocol
        // frame (their sessions were lost too), if it came by now.
        long refused = nameNode.fabricFramesRefused();
        assertTrue(refused >= 1 && refused <= 1 + cluster.getDataNodes().size(),
                "frames of sessions the restart lost: " + refused);
        assertTrue(nameNode.fabricCallsReceived() >= FabricRpcEngine.fabricCalls() - sentBefore,
                "every call reached the restarted NameNode");
    }

    /**
     * The DataNodes' calls: heartbeats and block reports to the NameNode, a reader asking a DataNode for the
     * visible length of a replica still being written, and lease recovery (the primary DataNode asks the other
     * one to recover its replica, then commits the block at the NameNode). Each protocol's session is held by
     * the server it went to, and nothing went over sockets.
     */
    @Test
    void theDataNodesProtocolsGoOverTheFabric() throws Exception {
        long socketBefore = FabricRpcEngine.socketCalls();
        Path file = new Path("/slipstream/datanodes/open.bin");
        byte[] data = new byte[4096];
        new java.util.Random(16).nextBytes(data);
        FSDataOutputStream out = fs.create(file, (short) 2);
        out.write(data);
        out.hflush();
        byte[] back = new byte[data.length];
        try (FSDataInputStream in = fs.open(file)) {
            in.readFully(back);
        }
        assertArrayEquals(data, back, "a file being written, read to its visible length");
        try (org.apache.hadoop.hdfs.DistributedFileSystem other = (org.apache.hadoop.hdfs.DistributedFileSystem)
                FileSystem.newInstance(fs.getUri(), cluster.getConfiguration(0))) {
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(60);
            while (!other.recoverLease(file)) {
                assertTrue(System.nanoTime() < deadline, "lease recovery of " + file + " did not finish in 60 s");
                Thread.sleep(200);
            }
        }
        assertThrowsQuietly(out);
        assertEquals(data.length, fs.getFileStatus(file).getLen(), "the recovered file keeps what was flushed");
        try (FSDataInputStream in = fs.open(file)) {
            in.readFully(back);
        }
        assertArrayEquals(data, back);

        FabricRpcServer nameNode = (FabricRpcServer) nameNodeClientServer();
        assertTrue(nameNode.fabricSessionProtocols().contains(RPC.getProtocolName(DatanodeProtocolPB.class)),
                "the NameNode's sessions: " + nameNode.fabricSessionProtocols());
        java.util.Set<String> dataNodeProtocols = new java.util.TreeSet<>();
        long dataNodeCalls = 0;
        for (DataNode dn : cluster.getDataNodes()) {
            assertTrue(dn.ipcServer instanceof FabricRpcServer, "a DataNode's RPC server is " + dn.ipcServer);
            FabricRpcServer server = (FabricRpcServer) dn.ipcServer;
            dataNodeProtocols.addAll(server.fabricSessionProtocols());
            dataNodeCalls += server.fabricCallsReceived();
        }
        assertTrue(dataNodeProtocols.contains(RPC.getProtocolName(ClientDatanodeProtocolPB.class))
                && dataNodeProtocols.contains(RPC.getProtocolName(InterDatanodeProtocolPB.class)),
                "the DataNodes' sessions: " + dataNodeProtocols);
        // getReplicaVisibleLength, then initReplicaRecovery and updateReplicaUnderRecovery.
        assertTrue(dataNodeCalls >= 3, "calls the DataNodes took over the fabric: " + dataNodeCalls);
        assertEquals(0, FabricRpcEngine.socketCalls() - socketBefore, "calls that fell back to sockets");
        assertTrue(fs.delete(new Path("/slipstream/datanodes"), true));
    }

    /** The writer of a file whose lease another client recovered: its close fails, as HDFS's does. */
    private static void assertThrowsQuietly(FSDataOutputStream out) {
        try {
            out.close();
        } catch (IOException expected) {
            return;
        }
        throw new AssertionError("the writer closed a file whose lease was recovered by another client");
    }

    /**
     * An operator's check of a cluster: TeraGen writes, TeraSort reads and writes, TeraValidate reads, in
     * Hadoop's local job runner, every NameNode and DataNode call over the fabric (job submission's staging
     * files, splits, commits, the outputs' blocks).
     */
    @Test
    void aMapReduceJobReadsAndWritesThroughIt() throws Exception {
        Configuration jobs = new Configuration(cluster.getConfiguration(0));
        jobs.set("fs.defaultFS", fs.getUri().toString());
        jobs.set("mapreduce.framework.name", "local");
        java.nio.file.Path local = Files.createTempDirectory(base.toPath(), "jobs");
        jobs.set("hadoop.tmp.dir", local.toString());
        jobs.set("mapreduce.cluster.local.dir", local.resolve("local").toString());
        long sentBefore = FabricRpcEngine.fabricCalls();
        long socketBefore = FabricRpcEngine.socketCalls();
        Path in = new Path("/slipstream/tera/in");
        Path sorted = new Path("/slipstream/tera/out");
        Path report = new Path("/slipstream/tera/validate");
        assertEquals(0, org.apache.hadoop.util.ToolRunner.run(new Configuration(jobs),
                new org.apache.hadoop.examples.terasort.TeraGen(),
                new String[] {"-Dmapreduce.job.maps=2", "5000", in.toString()}), "teragen");
        assertEquals(0, org.apache.hadoop.util.ToolRunner.run(new Configuration(jobs),
                new org.apache.hadoop.examples.terasort.TeraSort(),
                new String[] {"-Dmapreduce.job.reduces=2", in.toString(), sorted.toString()}), "terasort");
        assertEquals(0, org.apache.hadoop.util.ToolRunner.run(new Configuration(jobs),
                new org.apache.hadoop.examples.terasort.TeraValidate(),
                new String[] {sorted.toString(), report.toString()}), "teravalidate");
        String validated;
        try (FSDataInputStream stream = fs.open(new Path(report, "part-r-00000"))) {
            validated = new String(stream.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(validated.contains("checksum") && !validated.contains("misorder") && !validated.contains("error"),
                "TeraValidate: " + validated);
        long sortedBytes = 0;
        for (FileStatus part : fs.listStatus(sorted)) {
            if (part.getPath().getName().startsWith("part-")) {
                sortedBytes += part.getLen();
            }
        }
        assertEquals(100L * 5000, sortedBytes, "TeraSort's output: every record, 100 bytes each");
        long sent = FabricRpcEngine.fabricCalls() - sentBefore;
        assertTrue(sent >= 50, "calls over the fabric for three jobs: " + sent);
        assertEquals(0, FabricRpcEngine.socketCalls() - socketBefore, "calls that fell back to sockets");
        assertTrue(fs.delete(new Path("/slipstream/tera"), true));
    }

    /** NameNodeRpcServer keeps its client server in a private field: read it as the tests of HDFS do. */
    private static RPC.Server nameNodeClientServer() throws ReflectiveOperationException {
        Object rpc = cluster.getNameNodeRpc();
        java.lang.reflect.Field field = rpc.getClass().getDeclaredField("clientRpcServer");
        field.setAccessible(true);
        return (RPC.Server) field.get(rpc);
    }
}
