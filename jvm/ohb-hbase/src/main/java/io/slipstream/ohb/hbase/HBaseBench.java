package io.slipstream.ohb.hbase;

import io.slipstream.hbase.rpc.FabricCallQueue;
import io.slipstream.hbase.rpc.FabricRpcClient;
import io.slipstream.hbase.rpc.FabricRpcServer;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.PerformanceEvaluation;
import org.apache.hadoop.hbase.ipc.NettyRpcClient;
import org.apache.hadoop.hbase.ipc.NettyRpcServer;
import org.apache.hadoop.util.ToolRunner;
import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.ConsoleAppender;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.PatternLayout;
import org.apache.log4j.spi.LoggingEvent;

/**
 * {@code ohb hbase}'s JVM side. For each configuration ({@code netty}: HBase's Netty RPC server and client;
 * {@code fabric}: {@code FabricRpcServer}/{@code FabricRpcClient}, fallback never; {@code fabric-tcp}: the
 * same forced to TCP) it starts a real HBase (HMaster, one RegionServer, ZooKeeper, HDFS) in its own
 * process ({@code serve <config>}), then runs HBase's own {@code PerformanceEvaluation} from this process
 * (in-process clients, {@code --nomapred --latency --autoFlush=true}: one RPC per row): sequentialWrite (fills
 * the table), randomRead, randomWrite, scanRange100 (a scan of up to 100 rows per operation: several RPCs),
 * one client each, each test's first rows a warm-up its latency report leaves out ({@code --measureAfter}).
 * PerformanceEvaluation's latency report (its log line "Latency (us) : ...")
 * becomes one {@code OHB_HBASE_RESULT {json}} line per point. A fabric point whose calls did not all go over
 * the fabric (the client's counters) is a failed point (exit status 1). {@code ohb} runs this JVM once per
 * configuration ({@code --configs <one>}): in one client JVM for all three, the later configurations ran on a
 * client the earlier ones had warmed (randomRead 1.08x Netty-first, 0.98x fabric-first with {@code --quick}).
 */
public final class HBaseBench {
    private static final String RESULT = "OHB_HBASE_RESULT ";
    static final List<String> CONFIGS = List.of("netty", "fabric", "fabric-tcp");
    private static final List<String> TESTS = List.of("sequentialWrite", "randomRead", "randomWrite", "scanRange100");
    private static final Pattern FIELD = Pattern.compile("(?<![\\w.])(mean|min|max|50th|99th)=([0-9.]+)");

    private HBaseBench() {
    }

    static Configuration conf(String config) {
        Configuration conf = HBaseConfiguration.create();
        boolean fabric = !config.equals("netty");
        conf.set("hbase.rpc.server.impl", fabric ? FabricRpcServer.class.getName() : NettyRpcServer.class.getName());
        conf.set("hbase.rpc.client.impl", fabric ? FabricRpcClient.class.getName() : NettyRpcClient.class.getName());
        conf.set("slipstream.hbase.rpc.fallback", "never");
        conf.set("slipstream.hbase.rpc.transport", config.equals("fabric-tcp") ? "tcp" : "auto");
        conf.set("hbase.master.ipc.address", "127.0.0.1");
        conf.set("hbase.regionserver.ipc.address", "127.0.0.1");
        conf.set("hbase.master.hostname", "localhost");
        conf.set("hbase.unsafe.regionserver.hostname", "localhost");
        conf.setInt("hbase.master.info.port", -1);
        conf.setInt("hbase.regionserver.info.port", -1);
        conf.set("hbase.zookeeper.quorum", "localhost");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        if (fabric) {
            fabricCallQueue(conf);
        }
        return conf;
    }

    /**
     * The README's recommended call queue for a fabric configuration's servers: idle handlers pull the fabric's
     * calls. {@code OHB_HBASE_FABRIC_QUEUE=hbase} keeps HBase's default queue (receiver threads) for an A/B.
     */
    static void fabricCallQueue(Configuration conf) {
        if (!"hbase".equals(System.getenv("OHB_HBASE_FABRIC_QUEUE"))) {
            conf.set("hbase.ipc.server.callqueue.type", "pluggable");
            conf.set("hbase.ipc.server.callqueue.pluggable.queue.class.name", FabricCallQueue.class.getName());
        }
    }

    public static void main(String[] args) throws Exception {
        logging();
        if (args.length >= 2 && args[0].equals("serve")) {
            serve(args[1]);
            return;
        }
        int rows = 20000; // as ohb hbase
        int warmup = 20000; // rows run before the measured ones (PerformanceEvaluation's --measureAfter)
        List<String> configs = CONFIGS;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--rows" -> rows = Integer.parseInt(args[i + 1]);
                case "--warmup" -> warmup = Integer.parseInt(args[i + 1]);
                case "--configs" -> configs = Arrays.asList(args[i + 1].split(","));
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        boolean failed = false;
        for (String config : configs) {
            if (!CONFIGS.contains(config)) {
                throw new IllegalArgumentException("unknown configuration " + config);
            }
            Process server = startServer(config);
            try {
                int zkPort = readPort(server);
                failed |= !measure(config, zkPort, rows, warmup);
            } finally {
                server.getOutputStream().close(); // the cluster shuts down when its stdin closes
                server.waitFor();
            }
        }
        System.exit(failed ? 1 : 0);
    }

    /** A cluster process: prints its ZooKeeper port, serves until its stdin closes. */
    private static void serve(String config) throws Exception {
        HBaseTestingUtility util = new HBaseTestingUtility(conf(config));
        util.startMiniCluster(1);
        System.out.println("ZK " + util.getZkCluster().getClientPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // serve until the bench closes our stdin
        }
        util.shutdownMiniCluster();
    }

    private static boolean measure(String config, int zkPort, int rows, int warmup) throws Exception {
        Configuration conf = conf(config);
        conf.setInt("hbase.zookeeper.property.clientPort", zkPort);
        boolean ok = true;
        for (String test : TESTS) {
            long fabricBefore = FabricRpcClient.fabricCalls();
            long socketBefore = FabricRpcClient.socketCalls();
            String report = runPe(conf, test, rows, warmup);
            long fabricCalls = FabricRpcClient.fabricCalls() - fabricBefore;
            long socketCalls = FabricRpcClient.socketCalls() - socketBefore;
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("config", config);
            result.put("test", test);
            result.put("rows", rows);
            result.put("warmup_rows", warmup);
            String error = null;
            if (report == null) {
                error = "PerformanceEvaluation printed no latency report";
            } else {
                Matcher m = FIELD.matcher(report);
                while (m.find()) {
                    String key = switch (m.group(1)) {
                        case "mean" -> "avg_us";
                        case "50th" -> "p50_us";
                        case "99th" -> "p99_us";
                        default -> m.group(1) + "_us";
                    };
                    result.put(key, Double.parseDouble(m.group(2)));
                }
                if (!result.containsKey("p50_us")) {
                    error = "no percentiles in PerformanceEvaluation's report: " + report;
                }
            }
            result.put("fabric_calls", fabricCalls);
            result.put("socket_calls", socketCalls);
            // Every row is one call (autoFlush): all of them, and the table's own lookups, over the fabric.
            if (error == null && !config.equals("netty") && (fabricCalls < rows + warmup || socketCalls != 0)) {
                error = fabricCalls + " calls over the fabric, " + socketCalls + " over sockets for " + (rows + warmup)
                        + " rows";
            }
            if (error != null) {
                result.put("error", error);
                ok = false;
            }
            System.out.println(RESULT + json(result));
            System.out.flush();
        }
        return ok;
    }

    /**
     * One PerformanceEvaluation run of {@code warmup + rows} rows whose latency report covers the last {@code rows}
     * ({@code --measureAfter}); its "Latency (us) : ..." report line, or null. Why the warm-up: without it the
     * median was the JVMs' warm-up (the cluster's and the client's): over 20 000 rows of randomRead (one Netty run)
     * the mean of each 2000 still fell from about 730 to 120 us (session 37), and where the median fell in that
     * slope decided the ratio (Netty over fabric 0.68x to 1.45x for the same code in one hour).
     */
    private static String runPe(Configuration conf, String test, int rows, int warmup) throws Exception {
        AtomicReference<String> report = new AtomicReference<>();
        AppenderSkeleton capture = new AppenderSkeleton() {
            @Override
            protected void append(LoggingEvent event) {
                String message = event.getRenderedMessage();
                if (message != null && message.contains("Latency (us) : ")) {
                    report.set(message);
                }
            }

            @Override
            public void close() {
            }

            @Override
            public boolean requiresLayout() {
                return false;
            }
        };
        Logger pe = Logger.getLogger(PerformanceEvaluation.class);
        pe.addAppender(capture);
        try {
            // autoFlush: each put is its own RPC (PerformanceEvaluation buffers them otherwise, and measures the buffer).
            String[] args = {"--nomapred", "--latency", "--oneCon=true", "--autoFlush=true", "--rows=" + (warmup + rows),
                "--measureAfter=" + warmup, test, "1"};
            int status = ToolRunner.run(new Configuration(conf), new PerformanceEvaluation(conf), args);
            if (status != 0) {
                throw new IOException("PerformanceEvaluation " + String.join(" ", args) + " exited with " + status);
            }
        } finally {
            pe.removeAppender(capture);
        }
        return report.get();
    }

    private static void logging() {
        Logger root = Logger.getRootLogger();
        root.removeAllAppenders();
        root.addAppender(new ConsoleAppender(new PatternLayout("%d{HH:mm:ss,SSS} %-5p [%t] %c{1}: %m%n"), "System.err"));
        root.setLevel(Level.WARN);
        Logger.getLogger(PerformanceEvaluation.class).setLevel(Level.INFO);
        Logger.getLogger("io.slipstream").setLevel(Level.INFO);
    }

    private static Process startServer(String config) throws IOException {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        return new ProcessBuilder(java, "-Xmx1g", "-cp", System.getProperty("java.class.path"), HBaseBench.class.getName(),
                "serve", config).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static int readPort(Process server) throws IOException {
        BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
        List<String> seen = new ArrayList<>();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith("ZK ")) {
                return Integer.parseInt(line.substring(3).trim());
            }
            seen.add(line);
        }
        throw new IOException("the HBase cluster exited before printing its ZooKeeper port: " + seen);
    }

    private static String json(Map<String, Object> fields) {
        StringBuilder s = new StringBuilder("{");
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            if (s.length() > 1) {
                s.append(',');
            }
            s.append('"').append(e.getKey()).append("\":");
            Object v = e.getValue();
            if (v instanceof Number) {
                s.append(v instanceof Double d ? String.format(Locale.ROOT, "%.1f", d) : v.toString());
            } else {
                s.append('"').append(String.valueOf(v).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
        }
        return s.append('}').toString();
    }
}
