package io.slipstream.mapreduce.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapred.ShuffleHandler;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskCompletionEvent;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskReport;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.TypeConverter;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.nodelabels.CommonNodeLabelsManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.scheduler.SchedulerNode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Per-NodeManager fallback in a real job: the maps of one job run on two NodeManagers, one with the
 * plugin's {@code SlipstreamShuffleHandler} (an in-JVM NodeManager of the shared cluster, its fabric
 * on 127.0.0.1) and one with Hadoop's plain {@code ShuffleHandler} ({@link NodeManagerProcess} on
 * 127.0.0.3, where nothing listens on the fabric port). The reducers run the plugin. With fallback
 * auto each reducer must fetch the plain NodeManager's outputs over Hadoop's HTTP shuffle (one
 * {@code HTTP_FALLBACK_HOSTS}, no failed fetch) and the other's over the fabric, and the job's output
 * must be right; with fallback never its fetches from the plain NodeManager must fail as Hadoop's
 * fetcher reports a refused connection, so that the ApplicationMaster fails that map attempt and
 * re-runs it on a NodeManager with the plugin.
 *
 * <p>Placement is made certain with YARN node labels: the maps ask for {@link
 * SharedCluster#MAPS_LABEL}, which only the plain NodeManager has (with room for one map) until
 * one of the job's maps is placed there; the label then moves to an in-JVM NodeManager, where the
 * other maps (and a re-run) go. The ApplicationMaster and reducers ask for no label and run on the
 * other in-JVM NodeManager.
 */
class PerHostFallbackTest {
    private static final int MAPS = 3;
    private static final int REDUCES = 2;
    private static final String PLAIN_HOST = "127.0.0.3";
    /** One job's whole run; beyond it the test fails (a reducer hangs, or a map is never placed). */
    private static final long JOB_TIMEOUT_MS = 240_000;
    private static final String SHUFFLE_ERRORS = "Shuffle Errors";

    private static SharedCluster cluster;
    private static ResourceManager rm;
    private static NodeManagerProcess plain;
    private static NodeId plainNode;
    private static NodeId pluginNode;
    private static Path seeds;
    private static Map<String, String> expected;

    @BeforeAll
    static void start() throws Exception {
        cluster = SharedCluster.get();
        rm = cluster.yarn.getResourceManager();
        cluster.enableMapLabels();
        seeds = new Path(cluster.work, "per-host-seeds");
        ScenarioJob.writeSeeds(cluster.fs, seeds, MAPS);
        expected = ScenarioJob.expected(scenario(), MAPS, REDUCES);
        Configuration plainConf = new Configuration(cluster.yarn.getConfig());
        plainConf.set(YarnCluster.SHUFFLE_CLASS_KEY, ShuffleHandler.class.getName());
        // Room for one map (384 MB) at a time, and for nothing of 512 MB (AM, reducers) anyway.
        plain = new NodeManagerProcess(plainConf, PLAIN_HOST, 384, new File("target/nm-" + PLAIN_HOST).getAbsoluteFile());
        plainNode = plain.awaitRegistered(rm);
        pluginNode = cluster.yarn.getNodeManager(0).getNMContext().getNodeId();
    }

    @AfterAll
    static void stop() throws Exception {
        if (plainNode != null) {
            // The ResourceManager counts the killed process alive for its expiry interval: nothing may go there.
            rm.getRMContext().getNodeLabelManager().replaceLabelsOnNode(Map.of(plainNode, Set.of(SharedCluster.FENCED_LABEL)));
        }
        if (plain != null) {
            plain.close();
        }
    }

    private static Configuration scenario() {
        Configuration conf = new Configuration(cluster.conf);
        conf.setInt(ScenarioJob.RECORDS, 5_000);
        conf.setDouble(ScenarioJob.SKEW, 0.3);
        return conf;
    }

    private static Configuration withPlugin(String fallback) {
        Configuration conf = Jobs.withPlugin(scenario());
        conf.set("slipstream.mapreduce.fallback", fallback);
        conf.set("mapreduce.map.node-label-expression", SharedCluster.MAPS_LABEL);
        conf.setBoolean("mapreduce.map.speculative", false);
        conf.setBoolean("mapreduce.reduce.speculative", false);
        return conf;
    }

    @Test
    void fallback_auto_fetches_the_plain_nodemanagers_outputs_over_http_and_the_others_over_the_fabric() throws Exception {
        Job job = run(withPlugin("auto"), "per-host-auto");
        assertTrue(job.isSuccessful(), "the job failed: " + job.getStatus().getFailureInfo() + failedAttempts(job));
        assertEquals(expected, Jobs.lines(cluster.fs, new Path(cluster.work, "per-host-auto")));

        Map<TaskID, String> hosts = firstAttemptHosts(job);
        assertEquals(MAPS, hosts.size(), "first attempts' completion events: " + mapEvents(job));
        long plainMaps = hosts.values().stream().filter(PerHostFallbackTest::onPlainHost).count();
        assertTrue(plainMaps >= 1 && plainMaps < MAPS, "maps on both NodeManagers: " + hosts);
        long plainBytes = 0;
        long pluginBytes = 0;
        for (TaskReport map : job.getTaskReports(TaskType.MAP)) {
            // No fetch failed: every map's first attempt is the one that succeeded.
            TaskAttemptID first = new TaskAttemptID(map.getTaskID(), 0);
            assertEquals(0, map.getSuccessfulTaskAttemptId().getId(), "map re-run (" + hosts.get(map.getTaskID()) + "): "
                    + String.join("\n", job.getTaskDiagnostics(first)));
            long bytes = map.getTaskCounters().findCounter(org.apache.hadoop.mapreduce.TaskCounter.MAP_OUTPUT_MATERIALIZED_BYTES).getValue();
            if (onPlainHost(hosts.get(map.getTaskID()))) {
                plainBytes += bytes;
            } else {
                pluginBytes += bytes;
            }
        }
        for (TaskReport reduce : job.getTaskReports(TaskType.REDUCE)) {
            Counters counters = reduce.getTaskCounters();
            String which = reduce.getSuccessfulTaskAttemptId() + ": ";
            assertEquals(1, Jobs.fabricCounter(counters, "HTTP_FALLBACK_HOSTS"), which + "NodeManagers fetched from over HTTP");
            assertEquals(0, Jobs.fabricCounter(counters, "HTTP_FALLBACKS"), which + "the whole shuffle fell back");
            assertEquals(MAPS - plainMaps, Jobs.fabricCounter(counters, "FABRIC_SHUFFLED_MAPS"), which + "maps over the fabric");
            assertEquals(MAPS, Jobs.counter(counters, "org.apache.hadoop.mapreduce.TaskCounter", "SHUFFLED_MAPS"), which + "maps shuffled");
            assertTrue(Jobs.fabricCounter(counters, "FABRIC_SHUFFLE_BYTES") > 0, which + "no bytes over the fabric");
        }
        // Across the reducers: exactly the plugin NodeManager's map outputs came over the fabric, and
        // the plain one's over HTTP (the rest of what the reducers shuffled).
        Counters counters = job.getCounters();
        assertEquals(pluginBytes, Jobs.fabricCounter(counters, "FABRIC_SHUFFLE_BYTES"));
        assertEquals(pluginBytes + plainBytes, Jobs.taskCounter(job, "REDUCE_SHUFFLE_BYTES"));
        assertTrue(plainBytes > 0);
        assertEquals(REDUCES * (MAPS - plainMaps), Jobs.fabricCounter(counters, "FABRIC_SHUFFLED_MAPS"));
        assertEquals(REDUCES, Jobs.fabricCounter(counters, "HTTP_FALLBACK_HOSTS"));
        // The fallback is not a failed fetch.
        assertEquals(0, Jobs.counter(counters, SHUFFLE_ERRORS, "IO_ERROR"));
        assertEquals(0, Jobs.counter(counters, SHUFFLE_ERRORS, "CONNECTION"));
        assertEquals(0, Jobs.taskCounter(job, "FAILED_SHUFFLE"));
    }

    @Test
    void fallback_never_fails_the_fetches_from_the_plain_nodemanager_and_its_map_re_runs_on_a_plugin_nodemanager() throws Exception {
        Configuration conf = withPlugin("never");
        // One reducer's report is enough for the ApplicationMaster to fail the map attempt (3 by
        // default, each after the reducer's back-off): the same outcome, sooner.
        conf.setInt("mapreduce.reduce.shuffle.max-fetch-failures-notifications", 1);
        Job job = run(conf, "per-host-never");
        assertTrue(job.isSuccessful(), "the job failed: " + job.getStatus().getFailureInfo() + failedAttempts(job));
        assertEquals(expected, Jobs.lines(cluster.fs, new Path(cluster.work, "per-host-never")));

        Map<TaskID, String> firstHosts = firstAttemptHosts(job);
        assertEquals(MAPS, firstHosts.size(), "first attempts' completion events: " + mapEvents(job));
        Map<TaskID, String> hosts = succeededMapHosts(job);
        int plainMaps = 0;
        for (TaskReport map : job.getTaskReports(TaskType.MAP)) {
            TaskAttemptID succeeded = map.getSuccessfulTaskAttemptId();
            if (!onPlainHost(firstHosts.get(map.getTaskID()))) {
                assertEquals(0, succeeded.getId(), "a map of the plugin's NodeManager re-run: " + succeeded);
                continue;
            }
            plainMaps++;
            // Its output was never fetched over HTTP: reducers reported it, the map re-ran elsewhere.
            assertTrue(succeeded.getId() >= 1, "the plain NodeManager's map was not re-run: " + succeeded);
            TaskAttemptID first = new TaskAttemptID(map.getTaskID(), 0);
            String diagnostics = String.join("\n", job.getTaskDiagnostics(first)).toLowerCase(Locale.ROOT);
            assertTrue(diagnostics.contains("fetch fail"), first + " was not failed by fetch failures: " + diagnostics);
            assertFalse(onPlainHost(hosts.get(map.getTaskID())), succeeded + " re-ran on the plain NodeManager");
        }
        assertTrue(plainMaps >= 1 && plainMaps < MAPS, "maps on both NodeManagers: " + firstHosts);
        Counters counters = job.getCounters();
        assertEquals(0, Jobs.fabricCounter(counters, "HTTP_FALLBACK_HOSTS"));
        assertEquals(0, Jobs.fabricCounter(counters, "HTTP_FALLBACKS"));
        // Every map output the reducers merged came over the fabric.
        assertEquals(MAPS * REDUCES, Jobs.fabricCounter(counters, "FABRIC_SHUFFLED_MAPS"));
        assertEquals(Jobs.taskCounter(job, "REDUCE_SHUFFLE_BYTES"), Jobs.fabricCounter(counters, "FABRIC_SHUFFLE_BYTES"));
    }

    /**
     * Runs {@code conf}'s job with one map placed on the plain NodeManager and the others on the
     * plugin's, within {@link #JOB_TIMEOUT_MS}; returns it complete.
     */
    private static Job run(Configuration conf, String name) throws Exception {
        CommonNodeLabelsManager labels = rm.getRMContext().getNodeLabelManager();
        labels.replaceLabelsOnNode(Map.of(plainNode, Set.of(SharedCluster.MAPS_LABEL), pluginNode, Set.of()));
        Job job = ScenarioJob.job(conf, name, seeds, new Path(cluster.work, name), REDUCES);
        long deadline = System.nanoTime() + JOB_TIMEOUT_MS * 1_000_000;
        job.submit();
        try {
            ApplicationId application = TypeConverter.toYarn(job.getJobID()).getAppId();
            while (!hasContainerOf(plainNode, application)) {
                if (job.isComplete() || System.nanoTime() > deadline || !plain.isAlive()) {
                    fail("no map placed on the plain NodeManager: " + job.getStatus() + "\n" + plain.logTail());
                }
                Thread.sleep(100);
            }
            // The plain NodeManager has room for that one map; the others (and any re-run) go to the plugin's.
            labels.replaceLabelsOnNode(Map.of(plainNode, Set.of(SharedCluster.FENCED_LABEL), pluginNode, Set.of(SharedCluster.MAPS_LABEL)));
            while (!job.isComplete()) {
                if (System.nanoTime() > deadline) {
                    fail("the job did not finish within " + JOB_TIMEOUT_MS + " ms: " + job.getStatus());
                }
                Thread.sleep(200);
            }
        } finally {
            if (!job.isComplete()) {
                job.killJob();
            }
            labels.replaceLabelsOnNode(Map.of(plainNode, Set.of(SharedCluster.FENCED_LABEL), pluginNode, Set.of()));
        }
        return job;
    }

    /** Whether the scheduler has a container of {@code application} running on {@code node}. */
    private static boolean hasContainerOf(NodeId node, ApplicationId application) {
        SchedulerNode scheduled = ((org.apache.hadoop.yarn.server.resourcemanager.scheduler.AbstractYarnScheduler<?, ?>) rm.getResourceScheduler())
                .getSchedulerNode(node);
        return scheduled != null && scheduled.getCopiedListOfRunningContainers().stream()
                .anyMatch(container -> container.getApplicationAttemptId().getApplicationId().equals(application));
    }

    private static boolean onPlainHost(String taskTrackerHttp) {
        return taskTrackerHttp != null && taskTrackerHttp.contains("//" + PLAIN_HOST + ":");
    }

    /** Each map's output location as the job's completion events name it now (an obsolete one dropped). */
    private static Map<TaskID, String> succeededMapHosts(Job job) throws IOException, InterruptedException {
        Map<TaskID, String> latest = new LinkedHashMap<>();
        for (TaskCompletionEvent event : mapEvents(job)) {
            if (event.getStatus() == TaskCompletionEvent.Status.SUCCEEDED) {
                latest.put(event.getTaskAttemptId().getTaskID(), event.getTaskTrackerHttp());
            } else if (event.getStatus() == TaskCompletionEvent.Status.OBSOLETE || event.getStatus() == TaskCompletionEvent.Status.FAILED) {
                latest.remove(event.getTaskAttemptId().getTaskID());
            }
        }
        return latest;
    }

    /**
     * Where each map's first attempt ran, from its completion event: SUCCEEDED, or OBSOLETE once the
     * ApplicationMaster failed the attempt after it succeeded (it changes that event's status).
     */
    private static Map<TaskID, String> firstAttemptHosts(Job job) throws IOException, InterruptedException {
        Map<TaskID, String> first = new LinkedHashMap<>();
        for (TaskCompletionEvent event : mapEvents(job)) {
            if (event.getTaskAttemptId().getId() == 0 && (event.getStatus() == TaskCompletionEvent.Status.SUCCEEDED
                    || event.getStatus() == TaskCompletionEvent.Status.OBSOLETE)) {
                first.put(event.getTaskAttemptId().getTaskID(), event.getTaskTrackerHttp());
            }
        }
        return first;
    }

    /** Every attempt that did not succeed (or was made obsolete), where it ran and why (for a failure's message). */
    private static String failedAttempts(Job job) throws IOException, InterruptedException {
        StringBuilder text = new StringBuilder();
        TaskCompletionEvent[] events;
        int from = 0;
        do {
            events = job.getTaskCompletionEvents(from, 100);
            from += events.length;
            for (TaskCompletionEvent event : events) {
                if (event.getStatus() != TaskCompletionEvent.Status.SUCCEEDED) {
                    String[] why = job.getTaskDiagnostics(event.getTaskAttemptId());
                    text.append("\n").append(event.getTaskAttemptId()).append(' ').append(event.getStatus()).append(" at ")
                            .append(event.getTaskTrackerHttp()).append(": ").append(why.length > 0 ? why[0] : "");
                }
            }
        } while (events.length > 0);
        return text.toString();
    }

    private static java.util.List<TaskCompletionEvent> mapEvents(Job job) throws IOException, InterruptedException {
        java.util.List<TaskCompletionEvent> all = new java.util.ArrayList<>();
        TaskCompletionEvent[] events;
        do {
            events = job.getTaskCompletionEvents(all.size(), 100);
            all.addAll(java.util.Arrays.asList(events));
        } while (events.length > 0);
        all.removeIf(event -> !event.isMapTask());
        return all;
    }
}
