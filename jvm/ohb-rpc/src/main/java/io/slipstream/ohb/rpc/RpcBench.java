package io.slipstream.ohb.rpc;

import io.slipstream.hadoop.rpc.FabricCallQueue;
import io.slipstream.hadoop.rpc.FabricRpcEngine;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoRequestProto;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;

/**
 * {@code ohb rpc lat|thr}'s JVM side. For each configuration ({@code vanilla}, {@code fabric},
 * {@code fabric-tcp}) it starts a Hadoop RPC server in its own process ({@code serve <config>}), measures
 * from this process, and prints one {@code OHB_RPC_RESULT {json}} line per point:
 * <ul>
 * <li>{@code lat}: one client, one call at a time, per payload size: min, p50, p99, avg in microseconds;</li>
 * <li>{@code thr}: N client threads (sharing the process's connection, as Hadoop's clients do) calling
 * for a fixed time: calls per second, and the CPU time per call of this process (the clients) and of the
 * server's, each whole JVM.</li>
 * </ul>
 * {@code ohb} runs this JVM once per configuration ({@code --configs <one>}), so that no configuration measures on
 * a client whose JIT and heap another configuration warmed.
 * The fabric configurations run with {@code slipstream.rpc.fallback=never} and check the engine's
 * counter: every call of the point went over the fabric, or the point fails (exit status 1).
 */
public final class RpcBench {
    private static final String RESULT = "OHB_RPC_RESULT ";
    private static final int SERVER_HANDLERS = 16;

    private RpcBench() {
    }

    static Configuration conf(String config) {
        Configuration conf = new Configuration();
        RPC.setProtocolEngine(conf, BenchProtocols.Vanilla.class, ProtobufRpcEngine2.class);
        RPC.setProtocolEngine(conf, BenchProtocols.Fabric.class, config.equals("vanilla") ? ProtobufRpcEngine2.class
                : FabricRpcEngine.class);
        conf.set("slipstream.rpc.fallback", "never");
        conf.set("slipstream.rpc.transport", config.equals("fabric-tcp") ? "tcp" : "auto");
        if (!config.equals("vanilla")) {
            fabricCallQueue(conf);
        }
        return conf;
    }

    /**
     * The engine's recommended call queue (README) for a fabric configuration's server: idle handlers pull the
     * fabric's calls. {@code OHB_RPC_FABRIC_QUEUE=hadoop} keeps Hadoop's default queue (receiver threads) for an A/B.
     */
    static void fabricCallQueue(Configuration conf) {
        if (!"hadoop".equals(System.getenv("OHB_RPC_FABRIC_QUEUE"))) {
            conf.set("ipc.callqueue.impl", FabricCallQueue.class.getName());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 2 && args[0].equals("serve")) {
            serve(args[1]);
            return;
        }
        Options o = Options.parse(args);
        boolean failed = false;
        for (String config : o.configs) {
            Process server = startServer(config);
            try {
                int port = readPort(server);
                failed |= !measure(o, config, new InetSocketAddress("127.0.0.1", port), server.toHandle());
            } finally {
                server.getOutputStream().close(); // the server exits when its stdin closes
                server.waitFor();
            }
        }
        System.exit(failed ? 1 : 0);
    }

    /** One server process: prints its port, serves until its stdin closes. */
    private static void serve(String config) throws Exception {
        Configuration conf = conf(config);
        Class<?> protocol = config.equals("vanilla") ? BenchProtocols.Vanilla.class : BenchProtocols.Fabric.class;
        RPC.Server server = new RPC.Builder(conf).setProtocol(protocol).setInstance(BenchProtocols.echoService())
                .setBindAddress("127.0.0.1").setPort(0).setNumHandlers(SERVER_HANDLERS).build();
        server.start();
        System.out.println("PORT " + server.getListenerAddress().getPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // wait for the parent to close our stdin (or die)
        }
        server.stop();
    }

    private static Process startServer(String config) throws IOException {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        return new ProcessBuilder(java, "-Xmx1g", "-cp", System.getProperty("java.class.path"), RpcBench.class.getName(),
                "serve", config).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static int readPort(Process server) throws IOException {
        BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith("PORT ")) {
                return Integer.parseInt(line.substring(5).trim());
            }
        }
        throw new IOException("ohb rpc: the server exited before printing its port");
    }

    /** Runs every point of one configuration; false when one failed. */
    private static boolean measure(Options o, String config, InetSocketAddress server, ProcessHandle serverProcess)
            throws Exception {
        Configuration conf = conf(config);
        Class<? extends TestProtobufRpcProto.BlockingInterface> type = config.equals("vanilla") ? BenchProtocols.Vanilla.class
                : BenchProtocols.Fabric.class;
        TestProtobufRpcProto.BlockingInterface proxy = RPC.getProxy(type, 1, server, conf);
        boolean ok = true;
        try {
            if (o.test.equals("lat")) {
                for (int size : o.sizes) {
                    ok &= latency(o, config, proxy, size);
                }
            } else {
                for (int clients : o.clients) {
                    ok &= throughput(o, config, proxy, clients, serverProcess);
                }
            }
        } finally {
            RPC.stopProxy(proxy);
        }
        return ok;
    }

    private static EchoRequestProto payload(int bytes) {
        return EchoRequestProto.newBuilder().setMessage("x".repeat(bytes)).build();
    }

    private static boolean latency(Options o, String config, TestProtobufRpcProto.BlockingInterface proxy, int size)
            throws Exception {
        EchoRequestProto request = payload(size);
        for (int i = 0; i < o.warmup; i++) {
            proxy.echo(null, request);
        }
        long fabricBefore = FabricRpcEngine.fabricCalls();
        long[] ns = new long[o.iterations];
        for (int i = 0; i < ns.length; i++) {
            long start = System.nanoTime();
            String back = proxy.echo(null, request).getMessage();
            ns[i] = System.nanoTime() - start;
            if (back.length() != size) {
                throw new IllegalStateException("echo of " + size + " bytes came back with " + back.length());
            }
        }
        String check = counterCheck(config, FabricRpcEngine.fabricCalls() - fabricBefore, ns.length);
        Arrays.sort(ns);
        double sum = 0;
        for (long v : ns) {
            sum += v;
        }
        print(String.format(Locale.ROOT, "{\"test\":\"lat\",\"config\":\"%s\",\"bytes\":%d,\"calls\":%d,\"min_us\":%.2f,"
                + "\"p50_us\":%.2f,\"p99_us\":%.2f,\"avg_us\":%.2f,\"fabric_calls\":%d,\"error\":%s}", config, size, ns.length,
                ns[0] / 1e3, ns[ns.length / 2] / 1e3, ns[(int) Math.min(ns.length - 1, Math.ceil(ns.length * 0.99) - 1)] / 1e3,
                sum / ns.length / 1e3, FabricRpcEngine.fabricCalls() - fabricBefore, json(check)));
        return check == null;
    }

    private static boolean throughput(Options o, String config, TestProtobufRpcProto.BlockingInterface proxy, int clients,
            ProcessHandle serverProcess) throws Exception {
        EchoRequestProto request = payload(o.thrBytes);
        runFor(proxy, request, clients, o.warmupMs); // warm up
        long fabricBefore = FabricRpcEngine.fabricCalls();
        long clientCpuBefore = cpuNanos(ProcessHandle.current());
        long serverCpuBefore = cpuNanos(serverProcess);
        long startNs = System.nanoTime();
        long calls = runFor(proxy, request, clients, o.durationMs);
        double seconds = (System.nanoTime() - startNs) / 1e9;
        double clientCpuUs = (cpuNanos(ProcessHandle.current()) - clientCpuBefore) / 1e3 / Math.max(calls, 1);
        double serverCpuUs = (cpuNanos(serverProcess) - serverCpuBefore) / 1e3 / Math.max(calls, 1);
        String check = counterCheck(config, FabricRpcEngine.fabricCalls() - fabricBefore, calls);
        print(String.format(Locale.ROOT, "{\"test\":\"thr\",\"config\":\"%s\",\"bytes\":%d,\"clients\":%d,\"calls\":%d,"
                + "\"seconds\":%.3f,\"calls_per_s\":%.1f,\"client_cpu_us_per_call\":%.2f,\"server_cpu_us_per_call\":%.2f,"
                + "\"fabric_calls\":%d,\"error\":%s}", config, o.thrBytes, clients, calls, seconds, calls / seconds, clientCpuUs,
                serverCpuUs, FabricRpcEngine.fabricCalls() - fabricBefore, json(check)));
        return check == null;
    }

    /**
     * CPU time (user + system, every thread: JIT and GC included) of a process so far, from the OS
     * ({@code /proc/<pid>/stat} on Linux); a process whose CPU time the OS does not give fails the run.
     */
    private static long cpuNanos(ProcessHandle process) {
        return process.info().totalCpuDuration()
                .orElseThrow(() -> new IllegalStateException("ohb rpc: no CPU time for process " + process.pid()))
                .toNanos();
    }

    /** {@code clients} threads call until {@code ms} passed; the calls they completed. */
    private static long runFor(TestProtobufRpcProto.BlockingInterface proxy, EchoRequestProto request, int clients, long ms)
            throws Exception {
        long deadline = System.nanoTime() + ms * 1_000_000L;
        long[] counts = new long[clients];
        AtomicReference<Throwable> error = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(clients);
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            final int me = c;
            Thread t = new Thread(() -> {
                try {
                    while (System.nanoTime() < deadline) {
                        proxy.echo(null, request);
                        counts[me]++;
                    }
                } catch (Throwable e) {
                    error.compareAndSet(null, e);
                } finally {
                    done.countDown();
                }
            }, "ohb-rpc-client-" + c);
            threads.add(t);
            t.start();
        }
        done.await();
        if (error.get() != null) {
            throw new IllegalStateException("a client failed", error.get());
        }
        return Arrays.stream(counts).sum();
    }

    /** Null when the point's calls went where the configuration says; the reason otherwise. */
    private static String counterCheck(String config, long fabricCalls, long calls) {
        if (config.equals("vanilla")) {
            return fabricCalls == 0 ? null : fabricCalls + " calls went over the fabric in the vanilla configuration";
        }
        return fabricCalls == calls ? null : "only " + fabricCalls + " of " + calls + " calls went over the fabric";
    }

    private static String json(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static void print(String line) {
        System.out.println(RESULT + line);
        System.out.flush();
    }

    /** The command line: {@code lat|thr --configs a,b --sizes ... --iterations N --warmup N --clients ... --thr-bytes N --duration-ms N}. */
    static final class Options {
        String test;
        List<String> configs = List.of("vanilla", "fabric", "fabric-tcp");
        int[] sizes = {1, 64, 1024, 4096, 16384, 65536};
        int iterations = 5000;
        int warmup = 20_000;
        int[] clients = {1, 2, 4, 8, 16};
        int thrBytes = 1024;
        long durationMs = 2000;
        /**
         * Calls before a throughput point, per point and configuration: 500 ms measured the JIT (one client
         * over the fabric: 7.2k calls/s after 500 ms, 19.6k after 8 s; docs/benchmarks.md, session 32).
         */
        long warmupMs = 5000;

        static Options parse(String[] args) {
            Options o = new Options();
            if (args.length == 0 || !(args[0].equals("lat") || args[0].equals("thr"))) {
                throw new IllegalArgumentException("ohb rpc: lat or thr first");
            }
            o.test = args[0];
            for (int i = 1; i + 1 < args.length; i += 2) {
                String v = args[i + 1];
                switch (args[i]) {
                    case "--configs" -> o.configs = List.of(v.split(","));
                    case "--sizes" -> o.sizes = ints(v);
                    case "--iterations" -> o.iterations = Integer.parseInt(v);
                    case "--warmup" -> o.warmup = Integer.parseInt(v);
                    case "--clients" -> o.clients = ints(v);
                    case "--thr-bytes" -> o.thrBytes = Integer.parseInt(v);
                    case "--duration-ms" -> o.durationMs = Long.parseLong(v);
                    case "--warmup-ms" -> o.warmupMs = Long.parseLong(v);
                    default -> throw new IllegalArgumentException("ohb rpc: unknown option " + args[i]);
                }
            }
            for (String c : o.configs) {
                if (!List.of("vanilla", "fabric", "fabric-tcp").contains(c)) {
                    throw new IllegalArgumentException("ohb rpc: unknown configuration " + c);
                }
            }
            return o;
        }

        private static int[] ints(String csv) {
            return Arrays.stream(csv.split(",")).mapToInt(Integer::parseInt).toArray();
        }
    }
}
