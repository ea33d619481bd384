package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.function.Executable;

/**
 * The shuffle across hosts: a standalone cluster (Master and two Workers from the newest Spark home) where the
 * Master and the driver share one host and each Worker, with its executors, has a host of its own ({@link
 * NetnsHosts}: network, IPC, PID and mount namespaces joined through a bridge, a private /dev/shm each). No shared
 * memory, no CMA, no loopback between executors: the fabric's UCX can reach the other executor only over TCP on the
 * veth, as between two machines (and over verbs on a cluster), and the plugin picks that device from the executor's
 * bind address. One application with the plugin (groupByKey, join, then an executor killed mid-shuffle) and one with
 * Spark's own shuffle (the same scenarios); results against references computed without Spark and against each
 * other, the fabric's counters against Spark's remote bytes, the links' byte counters against both, and where the
 * executors really ran.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SeparateHostsTest {
    static final int WORKERS = 2;
    static final String EXECUTOR_LOSS = ShuffleOnSparkTest.EXECUTOR_LOSS;
    static final List<String> SHUFFLES = List.of("groupByKey", "join");
    static final List<String> SCENARIOS = List.of("groupByKey", "join", EXECUTOR_LOSS);
    static final String EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend";
    static final long EXECUTOR_SAMPLE_MS = 200;
    static final int EXECUTOR_LOG_TAIL_LINES = 200;
    static final Pattern APP_ID = Pattern.compile("Connected to Spark cluster with app ID (app-[0-9-]+)");

    private SparkHome home;
    private NetnsHosts hosts;
    private StandaloneCluster cluster;
    private final Map<String, HostsRun> runs = new ConcurrentHashMap<>();

    /** An executor process seen while an application ran: its Worker and the namespaces it lived in. */
    record ExecutorSeen(int worker, long pid, String net, String ipc, String pidNamespace, String mnt, long devShm) {}

    /**
     * An application on the cluster, with what the Workers' links received meanwhile, which executors ran and their
     * logs (stderr).
     */
    record HostsRun(ApplicationRun run, long workerLinksRxBytes, List<ExecutorSeen> executors, String executorLogs) {
        /** For failure messages: the driver's log's tail and the executors' logs' last lines. */
        String context() {
            List<String> lines = executorLogs.lines().toList();
            return run.name + "\n" + run.logs() + "\n---- the executors' logs (last " + EXECUTOR_LOG_TAIL_LINES + " lines)\n"
                    + String.join("\n", lines.subList(Math.max(0, lines.size() - EXECUTOR_LOG_TAIL_LINES), lines.size()));
        }
    }

    @BeforeAll
    void startCluster() throws Exception {
        List<SparkHome> homes = SparkHome.listed();
        home = homes.get(homes.size() - 1);
        hosts = NetnsHosts.create(1 + WORKERS);
        List<Host> workerHosts = new ArrayList<>();
        for (int i = 1; i <= WORKERS; i++) {
            workerHosts.add(hosts.host(i));
        }
        try {
            cluster = StandaloneCluster.start("hosts-" + home.version + "-cluster", home, hosts.host(0), workerHosts, 1, Map.of());
        } catch (Exception | Error e) {
            hosts.close();
            throw e;
        }
    }

    @AfterAll
    void stopCluster() {
        try {
            if (cluster != null) {
                cluster.close();
            }
        } finally {
            if (hosts != null) {
                hosts.close();
            }
        }
    }

    /** The plugin, nothing falling back to Spark's transfer service; the fabric's counters read before the loss. */
    private HostsRun plugin() throws Exception {
        Path pluginJar = ShuffleOnSparkTest.pluginJar();
        Map<String, String> conf = ShuffleOnSparkTest.pluginSettings(pluginJar);
        conf.put("spark.slipstream.fallback", "never");
        return run("plugin", List.of(pluginJar), conf, List.of("--fabric-counters-before", EXECUTOR_LOSS));
    }

    private HostsRun vanilla() throws Exception {
        return run("vanilla", List.of(), new LinkedHashMap<>(), List.of());
    }

    /** Runs the scenarios once per variant (the tests share the runs), the driver on the Master's host. */
    private synchronized HostsRun run(String variant, List<Path> classPath, Map<String, String> conf, List<String> arguments)
            throws Exception {
        HostsRun done = runs.get(variant);
        if (done != null) {
            return done;
        }
        conf.put("spark.master", cluster.masterUrl());
        conf.put("spark.cores.max", Integer.toString(WORKERS));
        conf.put("spark.executor.cores", "1");
        // Spark's default: blocks of another executor of the same host are read from its files. Here no executor
        // shares a host, so every block of the other executor is remote.
        conf.put("spark.shuffle.readHostLocalDisk", "true");
        // Reducers go to whichever executor is free, not to the host holding the most output.
        conf.put("spark.locality.wait", "0");
        long rxBefore = workerLinksRxBytes();
        Map<Long, ExecutorSeen> seen = new ConcurrentHashMap<>();
        CountDownLatch finished = new CountDownLatch(1);
        Thread sampler = new Thread(() -> {
            try {
                do {
                    sampleExecutors(seen);
                } while (!finished.await(EXECUTOR_SAMPLE_MS, TimeUnit.MILLISECONDS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "executor-sampler");
        sampler.setDaemon(true);
        sampler.start();
        ApplicationRun run;
        try {
            run = ApplicationRun.start("hosts-" + home.version + "-" + variant, home, hosts.host(0), classPath, conf, SCENARIOS,
                    arguments);
        } finally {
            finished.countDown();
            sampler.join(TimeUnit.SECONDS.toMillis(30));
        }
        HostsRun hostsRun = new HostsRun(run, workerLinksRxBytes() - rxBefore, List.copyOf(seen.values()),
                cluster.applicationLogs(applicationId(run)));
        runs.put(variant, hostsRun);
        System.out.printf("%s: worker links received %d bytes; executors seen %s%n", run.name, hostsRun.workerLinksRxBytes,
                hostsRun.executors.stream().map(e -> e.worker() + ":" + e.pid()).toList());
        return hostsRun;
    }

    /** The application's id, from the driver's log ("" if it never connected). */
    private static String applicationId(ApplicationRun run) {
        for (String line : run.lines) {
            Matcher id = APP_ID.matcher(line);
            if (id.find()) {
                return id.group(1);
            }
        }
        return "";
    }

    private long workerLinksRxBytes() throws IOException, InterruptedException {
        long rx = 0;
        for (int i = 1; i <= WORKERS; i++) {
            rx += hosts.linkBytes(i)[0];
        }
        return rx;
    }

    /** The executors (Workers' descendants) alive now, with their namespaces as this JVM sees them in /proc. */
    private void sampleExecutors(Map<Long, ExecutorSeen> seen) {
        List<Process> workers = cluster.workers();
        for (int worker = 0; worker < workers.size(); worker++) {
            int index = worker;
            workers.get(worker).descendants().forEach(process -> {
                long pid = process.pid();
                if (seen.containsKey(pid)) {
                    return;
                }
                try {
                    String commandLine = Files.readString(Path.of("/proc", Long.toString(pid), "cmdline"), StandardCharsets.UTF_8);
                    if (!commandLine.contains(EXECUTOR_MAIN)) {
                        return;
                    }
                    Path ns = Path.of("/proc", Long.toString(pid), "ns");
                    long devShm = (Long) Files.getAttribute(Path.of("/proc", Long.toString(pid), "root", "dev", "shm"), "unix:dev");
                    seen.put(pid, new ExecutorSeen(index, pid, Files.readSymbolicLink(ns.resolve("net")).toString(),
                            Files.readSymbolicLink(ns.resolve("ipc")).toString(), Files.readSymbolicLink(ns.resolve("pid")).toString(),
                            Files.readSymbolicLink(ns.resolve("mnt")).toString(), devShm));
                } catch (IOException | RuntimeException e) {
                    // The process ended while being read: the next sample or another executor shows the same.
                }
            });
        }
    }

    private static void assertResults(ApplicationRun run, List<String> scenarios, Function<String, Outcome> expected) {
        List<Executable> checks = new ArrayList<>();
        for (String scenario : scenarios) {
            checks.add(() -> assertEquals(expected.apply(scenario), run.results.get(scenario),
                    run.name + ": scenario " + scenario + " (digest, count)"));
        }
        assertAll(run.name, checks);
    }

    private static Outcome reference(String scenario) {
        return Scenario.named(scenario).reference();
    }

    /** groupByKey and join over the fabric, executor to executor across hosts, every remote byte on the fabric. */
    @Test
    void the_plugin_shuffles_across_hosts_over_the_fabric() throws Exception {
        HostsRun hostsRun = plugin();
        ApplicationRun run = hostsRun.run();
        String context = hostsRun.context();
        run.assertCompleted();
        assertEquals(ShuffleOnSparkTest.PLUGIN_SHUFFLE_MANAGER, run.fact("EXECUTOR_SHUFFLE_MANAGER"), context);
        assertResults(run, SHUFFLES, SeparateHostsTest::reference);
        long remoteBytes = 0;
        for (String scenario : SHUFFLES) {
            assertEquals(0, run.scenarioMetric(scenario, "failedTasks"), scenario + "\n" + context);
            long scenarioRemoteBytes = run.scenarioMetric(scenario, "remoteBytesRead");
            assertTrue(scenarioRemoteBytes > 0, scenario + " read nothing from the other host\n" + context);
            remoteBytes += scenarioRemoteBytes;
        }
        assertEquals(WORKERS, run.metric("fabricCountingExecutorsBefore " + EXECUTOR_LOSS),
                "executors without the fabric\n" + context);
        assertEquals(remoteBytes, run.metric("fabricRemoteBytesBefore " + EXECUTOR_LOSS),
                "the executors' fabric counters differ from Spark's remote-bytes metric\n" + context);
        // Every remote byte of the application (the executor loss's included: nothing falls back) crossed the links into
        // the Workers' hosts, with the application's RPCs: had UCX found a path between the executors other than TCP on
        // the links, the links would have carried little more than those RPCs (about a megabyte here).
        long allRemoteBytes = run.metric("remoteBytesRead");
        assertTrue(hostsRun.workerLinksRxBytes() >= allRemoteBytes,
                "the Workers' links received " + hostsRun.workerLinksRxBytes() + " bytes, less than the " + allRemoteBytes
                        + " the executors read from each other\n" + context);
        String logs = String.join("\n", run.lines) + "\n" + hostsRun.executorLogs();
        assertTrue(logs.contains("serves map outputs over the fabric"), "the executors did not start the fabric\n" + context);
    }

    /**
     * An executor halts in the middle of a reduce stage and the survivor's reducers fetch from its host, where nothing
     * listens any more: fetch failures naming it, its maps recomputed (on its Worker's replacement executor or the
     * survivor), the right result.
     */
    @Test
    void the_plugin_recovers_from_an_executor_killed_mid_shuffle_on_another_host() throws Exception {
        assertRecoveredFromExecutorLoss(plugin());
    }

    @Test
    void spark_s_own_shuffle_gives_the_same_results_across_hosts() throws Exception {
        HostsRun vanilla = vanilla();
        ApplicationRun run = vanilla.run();
        run.assertCompleted();
        assertEquals(ShuffleOnSparkTest.SPARK_SHUFFLE_MANAGER, run.fact("EXECUTOR_SHUFFLE_MANAGER"), vanilla.context());
        assertResults(run, SHUFFLES, SeparateHostsTest::reference);
        assertRecoveredFromExecutorLoss(vanilla);
        long remoteBytes = run.metric("remoteBytesRead");
        assertTrue(remoteBytes > 0 && vanilla.workerLinksRxBytes() >= remoteBytes,
                "the Workers' links received " + vanilla.workerLinksRxBytes() + " bytes, Spark read " + remoteBytes
                        + " remotely\n" + vanilla.context());
        ApplicationRun plugin = plugin().run();
        plugin.assertCompleted();
        assertResults(plugin, SCENARIOS, run.results::get);
    }

    /**
     * Each Worker's executors lived in that Worker's network namespace, the Workers' namespaces (network, IPC, PID,
     * mount, /dev/shm) all differ from each other and from this JVM's: no path between them but the links.
     */
    @Test
    void each_worker_s_executors_run_on_its_own_host() throws Exception {
        HostsRun hostsRun = plugin();
        String context = hostsRun.executors() + "\n" + hostsRun.context();
        Map<Integer, List<ExecutorSeen>> byWorker = hostsRun.executors().stream()
                .collect(Collectors.groupingBy(ExecutorSeen::worker));
        assertEquals(Set.of(0, 1), byWorker.keySet(), "executors seen on Workers " + byWorker.keySet() + "\n" + context);
        String self = "/proc/self/ns/";
        long selfDevShm = (Long) Files.getAttribute(Path.of("/dev/shm"), "unix:dev");
        for (Map.Entry<Integer, List<ExecutorSeen>> worker : byWorker.entrySet()) {
            String expectedNet = hosts.netNamespace(1 + worker.getKey());
            for (ExecutorSeen executor : worker.getValue()) {
                assertEquals(expectedNet, executor.net(), "executor " + executor + " outside its Worker's host\n" + context);
                assertNotEquals(Files.readSymbolicLink(Path.of(self, "ipc")).toString(), executor.ipc(), context);
                assertNotEquals(Files.readSymbolicLink(Path.of(self, "pid")).toString(), executor.pidNamespace(), context);
                assertNotEquals(Files.readSymbolicLink(Path.of(self, "mnt")).toString(), executor.mnt(), context);
                assertNotEquals(selfDevShm, executor.devShm(), "an executor shares this machine's /dev/shm\n" + context);
            }
        }
        for (Function<ExecutorSeen, Object> namespace : List.<Function<ExecutorSeen, Object>>of(ExecutorSeen::net, ExecutorSeen::ipc,
                ExecutorSeen::pidNamespace, ExecutorSeen::mnt, ExecutorSeen::devShm)) {
            Set<Object> first = byWorker.get(0).stream().map(namespace).collect(Collectors.toSet());
            Set<Object> second = byWorker.get(1).stream().map(namespace).collect(Collectors.toSet());
            assertTrue(Collections.disjoint(first, second), "the Workers' executors share " + first + "\n" + context);
        }
        assertNotEquals(Files.readSymbolicLink(Path.of(self, "net")).toString(), hosts.netNamespace(1), context);
    }

    private static void assertRecoveredFromExecutorLoss(HostsRun hostsRun) {
        ApplicationRun run = hostsRun.run();
        String context = hostsRun.context();
        if (!run.results.containsKey(EXECUTOR_LOSS)) {
            String why = run.timedOut ? "(timed out)" : run.failures.getOrDefault(EXECUTOR_LOSS, "");
            fail(run.name + ": no executor-loss result " + why + "\n" + context);
        }
        assertEquals(reference(EXECUTOR_LOSS), run.results.get(EXECUTOR_LOSS), run.name + ": executor-loss result\n" + context);
        long elapsedMs = run.timesMs.get(EXECUTOR_LOSS);
        assertTrue(elapsedMs <= ShuffleOnSparkTest.EXECUTOR_LOSS_TIME_MS_MAX,
                run.name + ": executor loss took " + elapsedMs + " ms (max " + ShuffleOnSparkTest.EXECUTOR_LOSS_TIME_MS_MAX + ")");
        assertTrue(run.metric("executorsRemoved") >= 1, run.name + ": no executor was lost\n" + context);
        assertTrue(hostsRun.executorLogs().contains("executorLoss: partition 0 halts this executor"),
                "the victim did not halt\n" + context);
        assertFalse(hostsRun.executorLogs().contains("saw no victim die"), "a reducer did not see the victim die\n" + context);
        assertTrue(run.scenarioMetric(EXECUTOR_LOSS, "fetchFailuresFromExecutor") >= 1,
                run.name + ": no reducer reported a fetch failure naming the dead executor\n" + context);
        Set<Integer> workers = new TreeSet<>(hostsRun.executors().stream().map(ExecutorSeen::worker).toList());
        assertEquals(Set.of(0, 1), workers, "executors did not run on both Workers\n" + context);
    }
}
