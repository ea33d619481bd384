package io.slipstream.mapreduce.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskCompletionEvent;
import org.apache.hadoop.mapreduce.TaskReport;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.nodelabels.CommonNodeLabelsManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A NodeManager lost with the map outputs it holds: a real NodeManager process ({@link
 * NodeManagerProcess}, on its own loopback address, beside the shared mini cluster's two in-JVM
 * ones) runs every map of a job with the plugin (fallback never), and is killed with SIGKILL, its
 * containers with it, once the maps are done and before the reducers copy. The reducers find its fabric port dead; their fetch failures, reported
 * to the ApplicationMaster as Hadoop's own fetcher reports them, must make it re-run the maps on a
 * living NodeManager, and the job must finish with the right output, within a bound (a failure,
 * not a skip).
 *
 * <p>Placement is made certain with YARN node labels: the maps ask for the label {@code
 * slipstream-maps}, which only the NodeManager process has; the ApplicationMaster and reducers
 * (no label) run on the in-JVM NodeManagers. When it is killed, the label moves to an in-JVM
 * NodeManager (where the re-run maps go), and the dead one gets a label no request names: the
 * ResourceManager would otherwise count it alive for 10 minutes (its expiry interval) and could
 * place containers there, and with its node expired instead, the ApplicationMaster would re-run
 * the maps because the node was lost, not because the reducers reported their fetch failures.
 */
class NodeManagerLossTest {
    private static final int MAPS = 3;
    private static final int REDUCES = 2;
    private static final String MAPS_LABEL = SharedCluster.MAPS_LABEL;
    private static final String FENCED_LABEL = SharedCluster.FENCED_LABEL;
    private static final String LOST_HOST = "127.0.0.2";
    /** The job's whole run, kill and re-runs included; beyond it the test fails (a reducer hangs). */
    private static final long JOB_TIMEOUT_MS = 240_000;

    private static SharedCluster cluster;
    private static ResourceManager rm;
    private static NodeManagerProcess lost;
    private static NodeId lostNode;
    private static NodeId living;
    private static Path seeds;

    @BeforeAll
    static void start() throws Exception {
        cluster = SharedCluster.get();
        rm = cluster.yarn.getResourceManager();
        cluster.enableMapLabels();
        seeds = new Path(cluster.work, "loss-seeds");
        ScenarioJob.writeSeeds(cluster.fs, seeds, MAPS);
        // Room for the three maps (384 MB each) at once, and for nothing of 512 MB (AM, reducers) anyway.
        lost = new NodeManagerProcess(cluster.yarn.getConfig(), LOST_HOST, 3 * 384, new File("target/nm-" + LOST_HOST).getAbsoluteFile());
        lostNode = lost.awaitRegistered(rm);
        rm.getRMContext().getNodeLabelManager().replaceLabelsOnNode(Map.of(lostNode, Set.of(MAPS_LABEL)));
        living = cluster.yarn.getNodeManager(0).getNMContext().getNodeId();
    }

    @AfterAll
    static void stop() throws Exception {
        if (lost != null) {
            lost.close();
        }
    }

    @Test
    void a_nodemanager_killed_with_map_outputs_makes_the_reducers_report_fetch_failures_and_the_maps_re_run() throws Exception {
        Configuration conf = Jobs.withPlugin(new Configuration(cluster.conf));
        conf.setInt(ScenarioJob.RECORDS, 5_000);
        conf.setDouble(ScenarioJob.SKEW, 0.3);
        Map<String, String> expected = ScenarioJob.expected(conf, MAPS, REDUCES);
        conf.set("mapreduce.map.node-label-expression", MAPS_LABEL);
        // Reducers start when every map is done: the kill comes before any copy, with certainty.
        conf.setFloat("mapreduce.job.reduce.slowstart.completedmaps", 1.0f);
        conf.setInt("mapreduce.reduce.shuffle.max-fetch-failures-notifications", 1);
        conf.setBoolean("mapreduce.map.speculative", false);
        // The ApplicationMaster asks the dead NodeManager to clean up the failed maps' containers and
        // by default retries for 3 minutes before it lets the finished job go (Hadoop's behaviour).
        conf.setLong("yarn.client.nodemanager-connect.max-wait-ms", 3_000);
        conf.setLong("yarn.client.nodemanager-connect.retry-interval-ms", 1_000);
        Job job = ScenarioJob.job(conf, "nm-loss", seeds, new Path(cluster.work, "nm-loss"), REDUCES);
        long deadline = System.nanoTime() + JOB_TIMEOUT_MS * 1_000_000;
        job.submit();
        try {
            while (job.mapProgress() < 1.0f) {
                if (job.isComplete() || System.nanoTime() > deadline) {
                    fail("the maps did not finish: " + job.getStatus() + "\n" + lost.logTail());
                }
                Thread.sleep(100);
            }
            List<String> mapHosts = succeededMapHosts(job);
            assertEquals(MAPS, mapHosts.size(), "map completion events: " + mapHosts);
            assertTrue(mapHosts.stream().allMatch(h -> h.contains("//" + LOST_HOST + ":")), "maps ran elsewhere: " + mapHosts);
            lost.kill();
            CommonNodeLabelsManager labels = rm.getRMContext().getNodeLabelManager();
            labels.replaceLabelsOnNode(Map.of(lostNode, Set.of(FENCED_LABEL), living, Set.of(MAPS_LABEL)));
            while (!job.isComplete()) {
                if (System.nanoTime() > deadline) {
                    job.killJob();
                    fail("the job did not finish within " + JOB_TIMEOUT_MS + " ms of its start after the NodeManager was lost: " + job.getStatus());
                }
                Thread.sleep(200);
            }
        } finally {
            if (!job.isComplete()) {
                job.killJob();
            }
            rm.getRMContext().getNodeLabelManager().replaceLabelsOnNode(Map.of(living, Set.of()));
        }
        assertTrue(job.isSuccessful(), "the job did not survive the lost NodeManager: " + job.getStatus().getFailureInfo());
        assertEquals(expected, Jobs.lines(cluster.fs, new Path(cluster.work, "nm-loss")));
        for (TaskReport map : job.getTaskReports(TaskType.MAP)) {
            assertTrue(map.getSuccessfulTaskAttemptId().getId() >= 1, "map not re-run: " + map.getSuccessfulTaskAttemptId());
            // The first attempt failed because reducers reported they could not fetch its output.
            org.apache.hadoop.mapreduce.TaskAttemptID first = new org.apache.hadoop.mapreduce.TaskAttemptID(map.getTaskID(), 0);
            String diagnostics = String.join("\n", job.getTaskDiagnostics(first)).toLowerCase(java.util.Locale.ROOT);
            assertTrue(diagnostics.contains("fetch fail"), first + " was not failed by fetch failures: " + diagnostics);
        }
        List<String> rerunHosts = succeededMapHosts(job);
        assertTrue(rerunHosts.stream().noneMatch(h -> h.contains("//" + LOST_HOST + ":")), "a map output still on the lost host: " + rerunHosts);
        assertEquals(MAPS * REDUCES, Jobs.fabricCounter(job.getCounters(), "FABRIC_SHUFFLED_MAPS"));
        assertEquals(0, Jobs.fabricCounter(job.getCounters(), "HTTP_FALLBACKS"));
    }

    /** The HTTP address of each map output the job's completion events currently name as valid. */
    private static List<String> succeededMapHosts(Job job) throws IOException, InterruptedException {
        Map<org.apache.hadoop.mapreduce.TaskAttemptID, String> latest = new java.util.LinkedHashMap<>();
        int from = 0;
        TaskCompletionEvent[] events;
        do {
            events = job.getTaskCompletionEvents(from, 100);
            for (TaskCompletionEvent event : events) {
                if (!event.isMapTask()) {
                    continue;
                }
                org.apache.hadoop.mapreduce.TaskAttemptID map = event.getTaskAttemptId();
                if (event.getStatus() == TaskCompletionEvent.Status.SUCCEEDED) {
                    latest.put(map, event.getTaskTrackerHttp());
                } else if (event.getStatus() == TaskCompletionEvent.Status.OBSOLETE || event.getStatus() == TaskCompletionEvent.Status.FAILED) {
                    latest.remove(map);
                }
            }
            from += events.length;
        } while (events.length > 0);
        return new ArrayList<>(latest.values());
    }
}
