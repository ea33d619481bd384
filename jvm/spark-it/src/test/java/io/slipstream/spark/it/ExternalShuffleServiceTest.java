package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The plugin with Spark's external shuffle service, on a real standalone cluster (Master and Worker from the newest
 * Spark home, the Worker running the service on a free port of 127.0.0.1): an executor is lost after its map stage,
 * and reading the shuffle again must get its blocks from the service, not recompute its maps, with the live
 * executors' blocks over the fabric and no fallback (spark.slipstream.fallback=never). The first block each executor
 * gets from the service is damaged on purpose and must be fetched again, not recomputed.
 */
class ExternalShuffleServiceTest {
    private static final String SCENARIO = LostExecutorServedScenario.NAME;
    private static final String AFTER_LOSS = SCENARIO + LostExecutorServedScenario.AFTER_LOSS;

    @Test
    void a_lost_executor_s_map_outputs_come_from_the_service_and_are_not_recomputed() throws Exception {
        List<SparkHome> homes = SparkHome.listed();
        SparkHome home = homes.get(homes.size() - 1);
        int servicePort = StandaloneCluster.freePort();
        Map<String, String> service = Map.of("spark.shuffle.service.enabled", "true",
                "spark.shuffle.service.port", Integer.toString(servicePort));
        try (StandaloneCluster cluster = StandaloneCluster.start("ess-" + home.version + "-cluster", home, 2, service)) {
            Path pluginJar = ShuffleOnSparkTest.pluginJar();
            Map<String, String> conf = ShuffleOnSparkTest.pluginSettings(pluginJar);
            conf.putAll(service);
            conf.put("spark.master", cluster.masterUrl());
            conf.put("spark.cores.max", "2");
            conf.put("spark.executor.cores", "1");
            conf.put("spark.slipstream.fallback", "never");
            // Reducers go to whichever executor is free (not all to the one holding the most output).
            conf.put("spark.locality.wait", "0");
            // The first block each executor gets from the service arrives damaged: found while decompressing its start,
            // it is fetched again, as Spark's reader does, and no map is recomputed.
            conf.put("spark.shuffle.detectCorrupt.useExtraMemory", "true");
            conf.put("spark.executor.extraJavaOptions", "-Dslipstream.test.corruptServiceBlocks=1");
            ApplicationRun run = ApplicationRun.start("ess-" + home.version + "-lost-executor", home, List.of(pluginJar), conf,
                    List.of(SCENARIO));
            String logs = String.join("\n", run.lines) + "\n" + cluster.logs();
            String context = run.name + "\n" + run.logs() + "\n" + cluster.logs();
            run.assertCompleted();
            assertEquals(Scenario.named(SCENARIO).reference(), run.results.get(SCENARIO), context);
            assertTrue(logs.contains(SCENARIO + ": this executor halts"), "no executor was lost\n" + context);
            assertTrue(run.metric("executorsRemoved") >= 1, context);
            // The first read ran the maps once; the read after the loss ran none and failed no fetch.
            assertEquals(RddScenarios.MAPS, run.scenarioMetric(SCENARIO, "mapTasks"), context);
            assertEquals(0, run.scenarioMetric(AFTER_LOSS, "mapTasks"), "the lost executor's maps were recomputed\n" + context);
            assertEquals(0, run.scenarioMetric(AFTER_LOSS, "fetchFailuresFromExecutor"), context);
            assertEquals(0, run.scenarioMetric(AFTER_LOSS, "failedTasks"), context);
            // Every reducer of the second read needs the lost executor's blocks. The survivor knew its fabric address:
            // its first reducer's fetch fails and moves them to the service (one warning); the later ones, and any on
            // the replacement executor, hear "gone" from the directory at once and go to the service directly.
            String executorLogs = cluster.logs();
            assertTrue(executorLogs.contains("are fetched from the external shuffle service"),
                    "no executor fetched from the service\n" + context);
            long moved = executorLogs.lines().filter(line -> line.contains("remaining blocks come from the external shuffle"))
                    .count();
            assertTrue(moved >= 1 && moved < LostExecutorServedScenario.REDUCERS,
                    moved + " reducers moved a failed peer's blocks to the service, expected 1 to "
                            + (LostExecutorServedScenario.REDUCERS - 1) + "\n" + context);
            assertTrue(executorLogs.contains("flipped byte"), "no block from the service was damaged\n" + context);
            assertTrue(executorLogs.contains("got a corrupted block from the external shuffle service"),
                    "a damaged block from the service was not fetched again\n" + context);
            assertTrue(logs.contains("blocks of lost executors (the directory says gone) from the external shuffle service"),
                    "the driver did not say how the service is used\n" + context);
            // Live executors' blocks came over the fabric.
            assertTrue(run.metric("fabricRemoteBytes") > 0, "the fabric carried nothing\n" + context);
        }
    }
}
