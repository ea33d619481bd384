package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The shuffle plugin in real Spark applications, on every Spark home: two executors in their own JVMs
 * (local-cluster), every scenario of {@link Scenario#all()} run with the plugin on every home, and with Spark's own
 * shuffle on the newest. Results must equal the references computed here without Spark, and each other.
 *
 * <p>One application per (home, shuffle) runs all scenarios (starting one costs 10 to 20 s, running them a minute);
 * the tests share them. Spark's own shuffle runs on one home only: it checks that the scenarios and their references
 * agree with Spark, which does not depend on the version, and a second run cost a minute of the suite.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ShuffleOnSparkTest {

    static final String SPARK_SHUFFLE_MANAGER = "org.apache.spark.shuffle.sort.SortShuffleManager";
    static final String PLUGIN_SHUFFLE_MANAGER = "io.slipstream.spark.SlipstreamShuffleManager";
    static final String EXECUTOR_LOSS = "executorLoss";
    /** The executor-loss scenario, from the victim's halt through recomputing its maps to the result. */
    static final long EXECUTOR_LOSS_TIME_MS_MAX = 180_000;

    private final Map<String, ApplicationRun> runs = new ConcurrentHashMap<>();
    private Map<String, Outcome> references;

    Stream<SparkHome> sparkHomes() throws Exception {
        return SparkHome.listed().stream();
    }

    /** The newest Spark home: the one Spark's own shuffle runs on. */
    static SparkHome newestHome() throws Exception {
        List<SparkHome> homes = SparkHome.listed();
        return homes.get(homes.size() - 1);
    }

    /** Spark's own shuffle, as across hosts (no reading of the other executor's files from disk). */
    private ApplicationRun sparkShuffle(SparkHome home) throws Exception {
        String name = "spark-" + home.version + "-vanilla";
        ApplicationRun run = runs.get(name);
        if (run == null) {
            run = ApplicationRun.start(name, home, List.of(), Map.of("spark.shuffle.readHostLocalDisk", "false"),
                    List.of());
            runs.put(name, run);
        }
        return run;
    }

    private ApplicationRun pluginShuffle(SparkHome home) throws Exception {
        return pluginShuffle(home, "plugin", Map.of(), List.of());
    }

    /**
     * The plugin on the driver's class path and through extraClassPath on the executors', with {@code conf} over
     * the application's defaults.
     */
    private ApplicationRun pluginShuffle(SparkHome home, String variant, Map<String, String> conf,
            List<String> scenarios) throws Exception {
        Path pluginJar = pluginJar();
        String name = "spark-" + home.version + "-" + variant;
        ApplicationRun run = runs.get(name);
        if (run == null) {
            Map<String, String> settings = pluginSettings(pluginJar);
            // No silent fall back to Spark's own transfer: these runs are there to test the plugin's.
            settings.put("spark.slipstream.fallback", "never");
            settings.putAll(conf);
            run = ApplicationRun.start(name, home, List.of(pluginJar), settings, scenarios);
            runs.put(name, run);
        }
        return run;
    }

    /** The plugin jar the tests use (built by jvm/spark); fails, not skips, when it is missing. */
    static Path pluginJar() {
        Path pluginJar = Path.of(System.getProperty("slipstream.it.pluginJar", "../spark/target/slipstream-spark.jar"))
                .toAbsolutePath().normalize();
        if (!Files.isRegularFile(pluginJar)) {
            fail("the plugin jar " + pluginJar + " is missing: build jvm/spark first (mvn -f jvm/pom.xml install)");
        }
        return pluginJar;
    }

    /** The settings that make an application use the plugin, as the README tells users (Spark 3.5's way). */
    static Map<String, String> pluginSettings(Path pluginJar) {
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("spark.shuffle.manager", PLUGIN_SHUFFLE_MANAGER);
        settings.put("spark.driver.extraClassPath", pluginJar.toString());
        settings.put("spark.executor.extraClassPath", pluginJar.toString());
        return settings;
    }

    private synchronized Map<String, Outcome> references() throws Exception {
        if (references == null) {
            references = new LinkedHashMap<>();
            for (Scenario scenario : Scenario.all()) {
                references.put(scenario.name, scenario.reference());
            }
        }
        return references;
    }

    @Test
    void sparkShuffleGivesTheReferenceResults() throws Exception {
        SparkHome home = newestHome();
        ApplicationRun run = sparkShuffle(home);
        run.assertCompleted();
        assertEquals(home.version, run.fact("SPARK_VERSION"), "the application ran on another Spark");
        assertEquals(SPARK_SHUFFLE_MANAGER, run.fact("SHUFFLE_MANAGER"));
        assertEquals(SPARK_SHUFFLE_MANAGER, run.fact("EXECUTOR_SHUFFLE_MANAGER"));
        assertResults(run, references());
        assertTrue(run.metric("remoteBytesRead") > 0, "no shuffle data crossed executors\n" + run.logs());
        assertLargeRecordCrossedExecutors(run);
        assertNoTaskFailedOutsideExecutorLoss(run);
    }

    @ParameterizedTest(name = "Spark {0}")
    @MethodSource("sparkHomes")
    void pluginGivesTheResultsOfSparkShuffle(SparkHome home) throws Exception {
        ApplicationRun plugin = pluginShuffle(home);
        plugin.assertCompleted();
        assertEquals(home.version, plugin.fact("SPARK_VERSION"), "the application ran on another Spark");
        assertEquals(PLUGIN_SHUFFLE_MANAGER, plugin.fact("SHUFFLE_MANAGER"), "the driver's shuffle manager");
        assertEquals(PLUGIN_SHUFFLE_MANAGER, plugin.fact("EXECUTOR_SHUFFLE_MANAGER"), "the executors' shuffle manager");
        assertTrue(plugin.metric("remoteBytesRead") > 0,
                "the plugin reported no remote bytes read (the reader's metrics reporter)\n" + plugin.logs());

        assertEquals(references().keySet(), plugin.results.keySet(), "scenarios with a result");
        assertResults(plugin, references());
        if (home.version.equals(newestHome().version)) {
            ApplicationRun spark = sparkShuffle(home);
            spark.assertCompleted();
            assertResults(plugin, spark.results);
        }
        assertLargeRecordCrossedExecutors(plugin);
        assertNoTaskFailedOutsideExecutorLoss(plugin);
    }

    /**
     * Uncompressed shuffle blocks, on the newest Spark only (compression is an executor-wide setting, hence an
     * application of its own): the RDD scenarios whose blocks differ in kind (many small ones, empty ones, the
     * 70 MB records, a sort), not all of them (they took a minute).
     */
    static final List<String> UNCOMPRESSED_SCENARIOS = List.of("groupByKey", "sortByKey", "emptyPartitions",
            "largeRecord");

    @Test
    void pluginWithoutShuffleCompressionGivesTheReferenceResults() throws Exception {
        SparkHome newest = newestHome();
        List<String> rddScenarios = RddScenarios.all().stream().map(scenario -> scenario.name)
                .filter(UNCOMPRESSED_SCENARIOS::contains).toList();
        assertEquals(UNCOMPRESSED_SCENARIOS.size(), rddScenarios.size(), "scenarios named that do not exist");
        ApplicationRun plugin = pluginShuffle(newest, "plugin-uncompressed", Map.of("spark.shuffle.compress", "false"),
                rddScenarios);
        plugin.assertCompleted();
        Map<String, Outcome> expected = new LinkedHashMap<>(references());
        expected.keySet().retainAll(rddScenarios);
        assertResults(plugin, expected);
        assertLargeRecordCrossedExecutors(plugin);
        assertNoTaskFailedOutsideExecutorLoss(plugin);
    }

    @Test
    void sparkShuffleRecoversFromExecutorLoss() throws Exception {
        assertRecoveredFromExecutorLoss(sparkShuffle(newestHome()));
    }

    @ParameterizedTest(name = "Spark {0}")
    @MethodSource("sparkHomes")
    void pluginRecoversFromExecutorLoss(SparkHome home) throws Exception {
        assertRecoveredFromExecutorLoss(pluginShuffle(home));
    }

    /**
     * At least one of the 70 MB records was read from the other executor: the scenario exists for blocks above 64 MB
     * on the network. (Its two maps run one per executor, and each reducer needs a record from each map.)
     */
    private static void assertLargeRecordCrossedExecutors(ApplicationRun run) {
        long remoteBytesRead = run.scenarioMetric("largeRecord", "remoteBytesRead");
        assertTrue(remoteBytesRead >= RddScenarios.LARGE_VALUE_BYTES,
                run.name + ": largeRecord read " + remoteBytesRead
                        + " bytes from the other executor, less than one record");
    }

    /** A result per expected scenario, each equal to the expected one (all compared, all differences reported). */
    private static void assertResults(ApplicationRun run, Map<String, Outcome> expected) {
        List<Executable> checks = new ArrayList<>();
        for (Map.Entry<String, Outcome> scenario : expected.entrySet()) {
            checks.add(() -> assertEquals(scenario.getValue(), run.results.get(scenario.getKey()),
                    run.name + ": scenario " + scenario.getKey() + " (digest, count)"));
        }
        assertAll(run.name, checks);
    }

    /**
     * The executor-loss scenario gave the right result in bounded time, after at least one fetch from the dead
     * executor failed as a fetch failure naming it (what makes Spark recompute the lost map outputs).
     */
    private void assertRecoveredFromExecutorLoss(ApplicationRun run) throws Exception {
        if (!run.results.containsKey(EXECUTOR_LOSS)) {
            String why = run.timedOut ? "(timed out)" : run.failures.getOrDefault(EXECUTOR_LOSS, "");
            fail(run.name + ": no executor-loss result " + why + "\n" + run.logs());
        }
        assertEquals(references().get(EXECUTOR_LOSS), run.results.get(EXECUTOR_LOSS),
                run.name + ": executor-loss result (digest, count)");
        long elapsedMs = run.timesMs.get(EXECUTOR_LOSS);
        assertTrue(elapsedMs <= EXECUTOR_LOSS_TIME_MS_MAX,
                run.name + ": executor loss took " + elapsedMs + " ms (max " + EXECUTOR_LOSS_TIME_MS_MAX + ")");
        assertTrue(run.metric("executorsRemoved") >= 1, run.name + ": no executor was lost\n" + run.logs());
        assertTrue(run.scenarioMetric(EXECUTOR_LOSS, "fetchFailuresFromExecutor") >= 1,
                run.name + ": no reducer reported a fetch failure naming the dead executor\n" + run.logs());
    }

    /**
     * Retries hide failures from results: a task that failed and succeeded on its second attempt (a fetch that
     * timed out, a transport that started only the second time) leaves a correct result behind. Outside the
     * executor-loss scenario no task may fail ("none": the application's jobs outside any scenario).
     */
    private static void assertNoTaskFailedOutsideExecutorLoss(ApplicationRun run) {
        List<Executable> checks = new ArrayList<>();
        for (String key : run.scenarioMetrics.keySet()) {
            String scenario = key.split(" ")[0];
            if (key.endsWith(" failedTasks") && !scenario.equals(EXECUTOR_LOSS)) {
                checks.add(() -> assertEquals(0, run.scenarioMetric(scenario, "failedTasks"),
                        run.name + ": failed tasks in scenario " + scenario + " (see the logs in " + run.folder + ")"));
            }
        }
        assertFalse(checks.isEmpty(), run.name + ": no SCENARIO_METRIC failedTasks lines\n" + run.logs());
        assertAll(run.name + ": failed tasks", checks);
    }
}
