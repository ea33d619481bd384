package io.slipstream.ohb.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The order of clusters and jobs in one bench invocation, with clusters that only record what happens. */
class RunEachTest {
    /** What happened, in order: "start N tcp|auto", "job N config run", "stop N". */
    private final List<String> events = new ArrayList<>();

    private final MapReduceBench.Clusters<Integer> clusters = new MapReduceBench.Clusters<>() {
        private int started;

        @Override
        public Integer start(String transport) {
            int cluster = ++started;
            events.add("start " + cluster + " " + transport);
            return cluster;
        }

        @Override
        public void stop(Integer cluster) {
            events.add("stop " + cluster);
        }
    };

    @Test
    void everyConfigurationRunsOnAFreshClusterOfItsTransport() throws Exception {
        MapReduceBench.runEach(List.of("vanilla", "plugin", "plugin-tcp"), 2, clusters,
                (cluster, config, transport, run) -> events.add("job " + cluster + " " + config + " " + run));
        // vanilla and plugin used to share cluster 1, so the plugin's jobs were always its later ones.
        assertEquals(List.of(
                "start 1 auto", "job 1 vanilla 0", "job 1 vanilla 1", "stop 1",
                "start 2 auto", "job 2 plugin 0", "job 2 plugin 1", "stop 2",
                "start 3 tcp", "job 3 plugin-tcp 0", "job 3 plugin-tcp 1", "stop 3"), events);
    }

    @Test
    void aFailedJobStillStopsItsCluster() {
        IllegalStateException failure = assertThrows(IllegalStateException.class,
                () -> MapReduceBench.runEach(List.of("vanilla", "plugin"), 1, clusters, (cluster, config, transport, run) -> {
                    events.add("job " + cluster + " " + config);
                    if (config.equals("plugin")) {
                        throw new IllegalStateException("job failed");
                    }
                }));
        assertEquals("job failed", failure.getMessage());
        assertEquals(List.of("start 1 auto", "job 1 vanilla", "stop 1", "start 2 auto", "job 2 plugin", "stop 2"), events);
    }
}
