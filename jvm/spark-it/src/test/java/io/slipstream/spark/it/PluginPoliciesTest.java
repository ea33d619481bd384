package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The plugin's policies on real Spark (the newest home; one small scenario per application): requests
 * authenticated with the application's secret, the fallback policy when executors cannot start the fabric,
 * Spark's network encryption (which the fabric does not provide), and corrupt blocks.
 */
class PluginPoliciesTest {
    private static final String SCENARIO = "groupByKey";
    /** UCX finds no device of this name: the fabric cannot start where the variable is set. */
    private static final String NO_SUCH_DEVICE = "spark.executorEnv.UCX_NET_DEVICES";

    private static SparkHome newest() throws IOException {
        List<SparkHome> homes = SparkHome.listed();
        return homes.get(homes.size() - 1);
    }

    private static ApplicationRun plugin(String variant, Map<String, String> conf) throws Exception {
        return plugin(variant, conf, List.of(SCENARIO));
    }

    private static ApplicationRun plugin(String variant, Map<String, String> conf, List<String> scenarios) throws Exception {
        Path pluginJar = ShuffleOnSparkTest.pluginJar();
        SparkHome home = newest();
        Map<String, String> settings = ShuffleOnSparkTest.pluginSettings(pluginJar);
        // A failing task is retried once, not three times: these runs expect failures.
        settings.put("spark.task.maxFailures", "2");
        settings.putAll(conf);
        return ApplicationRun.start("policy-" + home.version + "-" + variant, home, List.of(pluginJar), settings, scenarios);
    }

    /** Every line of the driver's and the executors' logs. */
    private static String allLogs(ApplicationRun run) {
        StringBuilder text = new StringBuilder(String.join("\n", run.lines));
        try (Stream<Path> files = Files.walk(run.folder)) {
            for (Path file : files.filter(f -> f.getFileName().toString().equals("stderr")).toList()) {
                text.append('\n').append(Files.readString(file, StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return text.toString();
    }

    private static void assertCorrect(ApplicationRun run) throws Exception {
        run.assertCompleted();
        Outcome expected = Scenario.named(SCENARIO).reference();
        assertEquals(expected, run.results.get(SCENARIO), run.name + "\n" + run.logs());
    }

    @Test
    void with_spark_authenticate_requests_carry_the_application_s_secret() throws Exception {
        ApplicationRun run = plugin("authenticate", Map.of("spark.authenticate", "true",
                "spark.authenticate.secret", "slipstream-it-secret", "spark.slipstream.fallback", "never"));
        assertCorrect(run);
        assertTrue(run.metric("remoteBytesRead") > 0, run.logs());
        String logs = allLogs(run);
        assertTrue(logs.contains("serves map outputs over the fabric"), "the executors did not start the fabric\n" + run.logs());
        assertFalse(logs.contains("refused a request"), "a request was refused\n" + run.logs());
        assertEquals(0, run.scenarioMetric(SCENARIO, "failedTasks"), run.logs());
        assertEquals(2, run.metric("fabricCountingExecutors"), run.logs());
        assertEquals(run.metric("remoteBytesRead"), run.metric("fabricRemoteBytes"),
                "the executors' fabric counters differ from Spark's remote-bytes metric\n" + run.logs());
        assertEquals(run.metric("remoteBlocksFetched"), run.metric("fabricRemoteBlocks"), run.logs());
        // The blocks went through registered memory, which stayed under the default cap (256 MiB) plus the
        // fabric's small-buffer reserve (1 MiB).
        long peak = run.metric("fabricPoolPeakBytes");
        assertTrue(peak > 0 && peak <= (256L << 20) + (1L << 20), "fabric memory peak " + peak + "\n" + run.logs());
    }

    /**
     * Spark's default {@code spark.shuffle.readHostLocalDisk=true}: both executors run on this host, so every block
     * of the other executor is read from its files, as Spark's own reader does, and the fabric carries nothing. (The
     * authentication test runs with it off: there the fabric carries every remote byte.)
     */
    @Test
    void with_read_host_local_disk_blocks_of_this_host_come_from_disk_not_over_the_fabric() throws Exception {
        ApplicationRun run = plugin("host-local", Map.of("spark.shuffle.readHostLocalDisk", "true", "spark.slipstream.fallback", "never"));
        assertCorrect(run);
        assertEquals(0, run.metric("remoteBytesRead"), "blocks of this host were read remotely\n" + run.logs());
        assertTrue(run.metric("localBytesRead") > 0, run.logs());
        assertEquals(2, run.metric("fabricCountingExecutors"), "the executors run without the fabric\n" + run.logs());
        assertEquals(0, run.metric("fabricRemoteBytes"), "the fabric carried blocks of this host\n" + run.logs());
        assertEquals(0, run.scenarioMetric(SCENARIO, "failedTasks"), run.logs());
    }

    /**
     * Dynamic allocation with shuffle tracking (no external shuffle service): the plugin runs under Spark's executor
     * allocation manager as Spark's own shuffle does (executors holding map outputs are kept by shuffle tracking).
     */
    @Test
    void dynamic_allocation_with_shuffle_tracking_works_as_with_spark_s_shuffle() throws Exception {
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("spark.slipstream.fallback", "never");
        conf.put("spark.dynamicAllocation.enabled", "true");
        conf.put("spark.dynamicAllocation.shuffleTracking.enabled", "true");
        conf.put("spark.dynamicAllocation.initialExecutors", "2");
        conf.put("spark.dynamicAllocation.minExecutors", "0");
        conf.put("spark.dynamicAllocation.maxExecutors", "2");
        // Long enough that executors do not churn between the application's jobs: with 1 s the run took 289 s on a
        // loaded machine (each replacement executor starts anew) and once passed the 5-minute limit.
        conf.put("spark.dynamicAllocation.executorIdleTimeout", "30s");
        ApplicationRun run = plugin("dynamic-allocation", conf);
        assertCorrect(run);
        assertTrue(run.metric("remoteBytesRead") > 0, run.logs());
        assertEquals(0, run.scenarioMetric(SCENARIO, "failedTasks"), run.logs());
        assertTrue(allLogs(run).contains("serves map outputs over the fabric"), run.logs());
    }

    /**
     * Corrupt blocks as Spark's reader handles them (detectCorrupt with useExtraMemory, checksums on): the executors'
     * servers damage the first two responses carrying a block of partition 0 (on the wire), so that block is fetched
     * again, damaged again, diagnosed as a network issue and reported as a fetch failure; then a map output damaged
     * on disk is diagnosed as a disk issue. Spark recomputes the maps and both results are right.
     */
    @Test
    void corrupt_blocks_are_fetched_again_then_diagnosed_and_recomputed() throws Exception {
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("spark.slipstream.fallback", "never");
        conf.put("spark.slipstream.cache.size", "0"); // a cached copy would hide the damage on disk
        conf.put("spark.shuffle.detectCorrupt.useExtraMemory", "true");
        conf.put("spark.executor.extraJavaOptions", "-Dslipstream.test.corruptResponses=0:2");
        // Each damaged shuffle may fail up to two stage attempts (one per executor's server).
        conf.put("spark.stage.maxConsecutiveAttempts", "8");
        ApplicationRun run = plugin("corrupt-blocks", conf, List.of(SCENARIO, CorruptMapOutputScenario.NAME));
        run.assertCompleted();
        assertEquals(Scenario.named(SCENARIO).reference(), run.results.get(SCENARIO), run.logs());
        assertEquals(Scenario.named(CorruptMapOutputScenario.NAME).reference(), run.results.get(CorruptMapOutputScenario.NAME),
                run.logs());
        String logs = allLogs(run);
        assertTrue(logs.contains("TEST: flipped byte"), "no response was damaged\n" + run.logs());
        assertTrue(logs.contains("got a corrupted block"), "no block was fetched again\n" + run.logs());
        assertTrue(logs.contains("is corrupted due to NETWORK_ISSUE"), "no network diagnosis\n" + run.logs());
        assertTrue(logs.contains("is corrupted due to DISK_ISSUE"), "no disk diagnosis\n" + run.logs());
        assertTrue(run.scenarioMetric(SCENARIO, "fetchFailuresFromExecutor") >= 1, "no fetch failure on the wire\n" + run.logs());
        assertTrue(run.scenarioMetric(CorruptMapOutputScenario.NAME, "fetchFailuresFromExecutor") >= 1,
                "no fetch failure on disk\n" + run.logs());
    }

    @Test
    void fallback_auto_reads_through_spark_when_executors_cannot_start_the_fabric() throws Exception {
        ApplicationRun run = plugin("fallback-auto", Map.of(NO_SUCH_DEVICE, "no_such_device0", "spark.slipstream.fallback", "auto"));
        assertCorrect(run);
        String logs = allLogs(run);
        assertTrue(logs.contains("the fabric cannot start on executor"), "no warning\n" + run.logs());
        assertTrue(logs.contains("Spark's own transfer service"), "the warning does not say what happens\n" + run.logs());
        assertEquals(0, run.scenarioMetric(SCENARIO, "failedTasks"), run.logs());
    }

    /** Every task that needs the fabric fails, retries included (a retry must not slip through to Spark's transfer). */
    @Test
    void fallback_never_fails_the_job_when_executors_cannot_start_the_fabric() throws Exception {
        ApplicationRun run = plugin("fallback-never", Map.of(NO_SUCH_DEVICE, "no_such_device0", "spark.slipstream.fallback", "never"));
        assertFalse(run.timedOut, run.logs());
        assertFalse(run.results.containsKey(SCENARIO) && run.failures.isEmpty(),
                "the job succeeded although the fabric could not start\n" + run.logs());
        assertTrue(allLogs(run).contains("spark.slipstream.fallback=never"), "the failure does not say why\n" + run.logs());
    }

    @Test
    void with_network_encryption_the_plugin_steps_aside_or_refuses() throws Exception {
        Map<String, String> crypto = Map.of("spark.authenticate", "true", "spark.authenticate.secret", "slipstream-it-secret",
                "spark.network.crypto.enabled", "true");
        Map<String, String> auto = new LinkedHashMap<>(crypto);
        auto.put("spark.slipstream.fallback", "auto");
        ApplicationRun stepsAside = plugin("crypto-auto", auto);
        assertCorrect(stepsAside);
        String logs = allLogs(stepsAside);
        assertTrue(logs.contains("spark.network.crypto.enabled is on"), "no warning\n" + stepsAside.logs());
        assertFalse(logs.contains("serves map outputs over the fabric"), "shuffle data went over the fabric in clear");

        Map<String, String> never = new LinkedHashMap<>(crypto);
        never.put("spark.slipstream.fallback", "never");
        ApplicationRun refuses = plugin("crypto-never", never);
        assertFalse(refuses.timedOut, refuses.logs());
        assertNotEquals(0, refuses.exitStatus, "the application ran with shuffle data in clear\n" + refuses.logs());
        assertTrue(allLogs(refuses).contains("must not travel in clear"), refuses.logs());
    }
}
