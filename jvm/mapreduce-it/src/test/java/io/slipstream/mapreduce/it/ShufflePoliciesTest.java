package io.slipstream.mapreduce.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskReport;
import org.apache.hadoop.mapreduce.TaskType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What happens when things go wrong, on the shared mini cluster: a reducer whose fabric cannot
 * start (fallback auto: the HTTP shuffle; never: the task fails), and a map output lost after its
 * map finished (the fetch failure is reported as Hadoop's own fetcher reports it, the map re-runs
 * and the job's output is still right).
 */
class ShufflePoliciesTest {
    private static final int MAPS = 3;
    private static final int REDUCES = 2;
    private static SharedCluster cluster;
    private static org.apache.hadoop.fs.Path seeds;
    private static java.util.Map<String, String> expected;

    @BeforeAll
    static void start() throws Exception {
        cluster = SharedCluster.get();
        seeds = new org.apache.hadoop.fs.Path(cluster.work, "policy-seeds");
        ScenarioJob.writeSeeds(cluster.fs, seeds, MAPS);
        // The reference, computed without Hadoop (the HTTP shuffle's output is compared in the other tests).
        expected = ScenarioJob.expected(scenario(), MAPS, REDUCES);
    }

    private static Configuration scenario() {
        Configuration conf = new Configuration(cluster.conf);
        conf.setInt(ScenarioJob.RECORDS, 5_000);
        conf.setDouble(ScenarioJob.SKEW, 0.3);
        return conf;
    }

    private static Job job(Configuration conf, String name) throws IOException {
        return ScenarioJob.job(conf, name, seeds, new org.apache.hadoop.fs.Path(cluster.work, name), REDUCES);
    }

    private static java.util.Map<String, String> output(String name) throws IOException {
        return Jobs.lines(cluster.fs, new org.apache.hadoop.fs.Path(cluster.work, name));
    }

    /** The reducers look for the fabric's native library where there is none: their fabric cannot start. */
    private static Configuration withoutFabric(String fallback) {
        Configuration conf = Jobs.withPlugin(scenario());
        conf.set("mapreduce.reduce.java.opts", conf.get("mapreduce.reduce.java.opts", "") + " -Dslipstream.fabric.native.dir=/nonexistent");
        conf.set("slipstream.mapreduce.fallback", fallback);
        return conf;
    }

    @Test
    void fallback_auto_shuffles_over_http_when_the_reducers_fabric_cannot_start() throws Exception {
        Job job = job(withoutFabric("auto"), "policy-auto");
        assertTrue(job.waitForCompletion(false), "fallback=auto failed: " + job.getStatus().getFailureInfo());
        assertEquals(expected, output("policy-auto"));
        assertEquals(REDUCES, Jobs.fabricCounter(job.getCounters(), "HTTP_FALLBACKS"));
        assertEquals(0, Jobs.fabricCounter(job.getCounters(), "FABRIC_SHUFFLE_BYTES"));
        assertTrue(Jobs.taskCounter(job, "REDUCE_SHUFFLE_BYTES") > 0);
    }

    @Test
    void fallback_never_fails_the_reduce_task_when_its_fabric_cannot_start() throws Exception {
        Configuration conf = withoutFabric("never");
        conf.setInt("mapreduce.reduce.maxattempts", 1);
        Job job = job(conf, "policy-never");
        assertFalse(job.waitForCompletion(false), "fallback=never ran without the fabric");
        // The first reducer to fail fails the job, and the job then kills the other ("Task KILL is
        // received"): the reason is in whichever failed first.
        StringBuilder diagnostics = new StringBuilder();
        for (TaskReport reduce : job.getTaskReports(TaskType.REDUCE)) {
            diagnostics.append(String.join("\n", job.getTaskDiagnostics(new TaskAttemptID(reduce.getTaskID(), 0)))).append('\n');
        }
        assertTrue(diagnostics.toString().contains("slipstream.mapreduce.fallback=never"), "the failure does not say why: " + diagnostics);
    }

    @Test
    void a_map_output_lost_after_its_map_finished_is_reported_and_the_map_re_runs() throws Exception {
        Configuration conf = Jobs.withPlugin(scenario());
        // Reducers start after every map finished, so the output is gone before any fetch; one
        // report of a fetch failure is enough for the ApplicationMaster to re-run the map.
        conf.setFloat("mapreduce.job.reduce.slowstart.completedmaps", 1.0f);
        conf.setInt("mapreduce.reduce.shuffle.max-fetch-failures-notifications", 1);
        Job job = job(conf, "policy-lost");
        job.submit();
        String firstAttempt = "attempt_" + job.getJobID().toString().substring("job_".length()) + "_m_000000_0";
        Path deleted = null;
        long deadline = System.nanoTime() + 240_000_000_000L;
        while (deleted == null && !job.isComplete() && System.nanoTime() < deadline) {
            Optional<Path> output = findMapOutput(firstAttempt);
            if (output.isPresent()) {
                Files.delete(output.get());
                deleted = output.get();
            } else {
                Thread.sleep(50);
            }
        }
        assertTrue(deleted != null, "never saw " + firstAttempt + "'s output");
        assertTrue(job.waitForCompletion(false), "the job did not survive the lost map output: " + job.getStatus().getFailureInfo());
        assertEquals(expected, output("policy-lost"));
        TaskReport map0 = java.util.Arrays.stream(job.getTaskReports(TaskType.MAP)).filter(r -> r.getTaskID().getId() == 0).findFirst()
                .orElseThrow();
        assertTrue(map0.getSuccessfulTaskAttemptId().getId() >= 1, "map 0 was not re-run: " + map0.getSuccessfulTaskAttemptId());
        // (FAILED_SHUFFLE is not checked: the reducer that met the loss may itself be failed by Hadoop's
        // reducer-health check and re-run, and the job's counters are its successful attempts'.)
    }

    /** A map attempt's file.out in one of the NodeManagers' local directories. */
    private static Optional<Path> findMapOutput(String attempt) throws IOException {
        try (Stream<Path> files = Files.walk(cluster.yarn.getTestWorkDir().toPath())) {
            return files.filter(p -> p.getFileName().toString().equals("file.out") && p.getParent().getFileName().toString().equals(attempt))
                    .findFirst();
        } catch (java.io.UncheckedIOException | java.nio.file.NoSuchFileException e) {
            return Optional.empty(); // a directory went away while walking (containers finish): look again
        }
    }
}
