package io.slipstream.ohb.rpc;

import io.slipstream.hadoop.rpc.FabricRpcEngine;
import io.slipstream.hadoop.rpc.FabricRpcServer;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocolPB.ClientNamenodeProtocolPB;
import org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.util.ExitUtil;
import org.apache.log4j.ConsoleAppender;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.PatternLayout;

/**
 * {@code ohb hdfs meta}'s JVM side: Hadoop's own {@code NNThroughputBenchmark} (hadoop-hdfs's test jar),
 * unmodified, with its own arguments and {@code -fs hdfs://127.0.0.1:<port>}, against a NameNode in its own
 * process (a {@code MiniDFSCluster} without DataNodes: the create, open, fileStatus and delete operations
 * make files without blocks). One configuration per process pair:
 * <ul>
 * <li>{@code vanilla}: Hadoop's {@code ProtobufRpcEngine2} on both sides;</li>
 * <li>{@code fabric}: {@code rpc.engine.ClientNamenodeProtocolPB = FabricRpcEngine} in the NameNode's and in
 * the tool's configuration, fallback never; {@code fabric-tcp}: the same forced to TCP.</li>
 * </ul>
 * The tool's measured calls all go through its {@code ClientProtocol} proxy (the DFS client's, built by the
 * engine configured for {@code ClientNamenodeProtocolPB}); its other proxies (NamenodeProtocol for one
 * {@code versionRequest}, DatanodeProtocol, RefreshUserMappingsProtocol) keep Hadoop's engine.
 *
 * <p>Arguments: {@code <config> --run <tool args...> [--run ...]} (output framed by {@link ToolRuns}), then
 * {@code OHB_NN_SERVER {json}}: the calls the NameNode took over the fabric (its server's counter).
 * {@code serve <config> <dir>} is the NameNode process: it prints {@code PORT <n>}, serves until its stdin
 * closes, then prints {@code SERVED <fabric calls received>}.
 */
public final class NnMetaBench {
    /** Bounds the NameNode process's start and its stop. */
    private static final long NAMENODE_START_SECONDS = 180;

    private NnMetaBench() {
    }

    static Configuration conf(String config) {
        Configuration conf = new HdfsConfiguration();
        if (!config.equals("vanilla")) {
            conf.set("rpc.engine." + ClientNamenodeProtocolPB.class.getName(), FabricRpcEngine.class.getName());
            RpcBench.fabricCallQueue(conf);
        }
        conf.set("slipstream.rpc.fallback", "never");
        conf.set("slipstream.rpc.transport", config.equals("fabric-tcp") ? "tcp" : "auto");
        return conf;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("serve")) {
            serve(args[1], new File(args[2]));
            return;
        }
        List<List<String>> runs = args.length < 2 ? null : ToolRuns.split(Arrays.asList(args).subList(1, args.length));
        if (runs == null) {
            System.err.println("usage: NnMetaBench vanilla|fabric|fabric-tcp --run <NNThroughputBenchmark args> [--run ...]");
            System.exit(2);
        }
        String config = args[0];
        Path dir = Files.createTempDirectory("ohb-hdfs-meta-");
        // The tool's printUsage ends the JVM through ExitUtil: make that an exception of this run instead.
        ExitUtil.disableSystemExit();
        // The tool prints its results with LOG.info: its logger alone to stdout (the module ships no
        // log4j.properties, so Hadoop's other logs stay off).
        Logger toolLog = Logger.getLogger(NNThroughputBenchmark.class);
        toolLog.setLevel(Level.INFO);
        toolLog.addAppender(new ConsoleAppender(new PatternLayout("%m%n"), ConsoleAppender.SYSTEM_OUT));
        boolean ok;
        Process server = startServer(config, dir.resolve("namenode").toFile());
        ServerOutput serverOut = new ServerOutput(server);
        try {
            int port = serverOut.port.get(NAMENODE_START_SECONDS, TimeUnit.SECONDS);
            Configuration conf = conf(config);
            // The tool writes its hosts include/exclude files under hadoop.tmp.dir.
            conf.set("hadoop.tmp.dir", dir.resolve("tool").toString());
            ok = ToolRuns.runAll(config, runs, toolArgs -> {
                List<String> all = new ArrayList<>(List.of("-fs", "hdfs://127.0.0.1:" + port));
                all.addAll(Arrays.asList(toolArgs));
                NNThroughputBenchmark.runBenchmark(conf, all.toArray(new String[0]));
                return 0;
            });
            server.getOutputStream().close(); // the NameNode process ends when its stdin closes
            ok &= server.waitFor(NAMENODE_START_SECONDS, TimeUnit.SECONDS) && server.exitValue() == 0;
            serverOut.reader.join(TimeUnit.SECONDS.toMillis(NAMENODE_START_SECONDS));
            System.out.println("OHB_NN_SERVER {\"config\":\"" + config + "\",\"fabric_calls_received\":"
                    + serverOut.served.get() + "}");
        } finally {
            server.destroy();
            deleteTree(dir);
        }
        // The DFS client's threads outlive the tool: exit explicitly.
        System.exit(ok ? 0 : 1);
    }

    /** The NameNode process: no DataNodes, bound to 127.0.0.1. */
    private static void serve(String config, File dir) throws Exception {
        Configuration conf = conf(config);
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, dir.getAbsolutePath());
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf, dir).numDataNodes(0).build();
        try {
            cluster.waitActive();
            System.out.println("PORT " + cluster.getNameNodePort());
            System.out.flush();
            while (System.in.read() >= 0) {
                // wait for the parent to close our stdin (or die)
            }
            RPC.Server server = nameNodeClientServer(cluster);
            System.out.println("SERVED " + (server instanceof FabricRpcServer f ? f.fabricCallsReceived() : 0));
            System.out.flush();
        } finally {
            cluster.shutdown();
        }
    }

    /** NameNodeRpcServer keeps its client server in a private field: read it as HDFS's own tests do. */
    private static RPC.Server nameNodeClientServer(MiniDFSCluster cluster) throws ReflectiveOperationException {
        Object rpc = cluster.getNameNodeRpc();
        java.lang.reflect.Field field = rpc.getClass().getDeclaredField("clientRpcServer");
        field.setAccessible(true);
        return (RPC.Server) field.get(rpc);
    }

    private static Process startServer(String config, File dir) throws IOException {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        return new ProcessBuilder(java, "-Xmx1g", "-cp", System.getProperty("java.class.path"),
                NnMetaBench.class.getName(), "serve", config, dir.getAbsolutePath())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    /**
     * Reads the NameNode process's stdout to its end (a pipe left unread would stall its logging): the
     * {@code PORT} and {@code SERVED} lines, every other line (its log) to this process's stderr.
     */
    private static final class ServerOutput {
        final CompletableFuture<Integer> port = new CompletableFuture<>();
        final AtomicReference<Long> served = new AtomicReference<>();
        final Thread reader;

        ServerOutput(Process server) {
            reader = new Thread(() -> {
                try (BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    for (String line; (line = out.readLine()) != null; ) {
                        if (line.startsWith("PORT ")) {
                            port.complete(Integer.parseInt(line.substring(5).trim()));
                        } else if (line.startsWith("SERVED ")) {
                            served.set(Long.parseLong(line.substring(7).trim()));
                        } else {
                            System.err.println("namenode| " + line); // its stray output, if any
                        }
                    }
                } catch (IOException | NumberFormatException e) {
                    port.completeExceptionally(e);
                }
                port.completeExceptionally(new IOException(
                        "ohb hdfs meta: the NameNode process exited before printing its port"));
            }, "namenode-output");
            reader.setDaemon(true);
            reader.start();
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
