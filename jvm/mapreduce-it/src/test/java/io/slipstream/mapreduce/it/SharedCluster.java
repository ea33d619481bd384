package io.slipstream.mapreduce.it;

import java.io.IOException;
import java.util.List;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.nodelabels.CommonNodeLabelsManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler;

/**
 * One HDFS (one DataNode) and one {@link YarnCluster} for every test class of this JVM: a mini
 * cluster takes tens of seconds to start on two cores. Started by the first test that asks,
 * stopped when the JVM exits.
 */
final class SharedCluster {
    /** The YARN node label that jobs placing their maps on chosen NodeManagers ask for. */
    static final String MAPS_LABEL = "slipstream-maps";
    /** A label no job asks for: a NodeManager given it gets no more containers (jobs without a label skip it too). */
    static final String FENCED_LABEL = "slipstream-fenced";

    private static SharedCluster started;
    private boolean labelsEnabled;

    final MiniDFSCluster dfs;
    final YarnCluster yarn;
    /** The jobs' configuration (HTTP shuffle unless a test turns the plugin on). */
    final Configuration conf;
    final FileSystem fs;
    final Path work = new Path("/it");

    private SharedCluster() throws IOException {
        yarn = new YarnCluster("slipstream-mr");
        Configuration base = yarn.baseConfiguration();
        // HDFS as the jobs' file system: TeraSort's partition file travels through the distributed
        // cache, which the local file system does not give it here.
        System.setProperty(MiniDFSCluster.PROP_TEST_BUILD_DATA, new java.io.File("target/dfs").getAbsolutePath());
        dfs = new MiniDFSCluster.Builder(new Configuration()).numDataNodes(1).build();
        base.set("fs.defaultFS", dfs.getFileSystem().getUri().toString());
        yarn.init(base);
        yarn.start();
        conf = new Configuration(yarn.getConfig());
        fs = FileSystem.get(conf);
    }

    /**
     * Makes {@link #MAPS_LABEL} and {@link #FENCED_LABEL} cluster labels the default queue may use
     * (as {@code yarn rmadmin -refreshQueues} after editing capacity-scheduler.xml); jobs without a
     * label expression are unaffected. Once per cluster.
     */
    synchronized void enableMapLabels() throws IOException {
        if (labelsEnabled) {
            return;
        }
        ResourceManager rm = yarn.getResourceManager();
        CommonNodeLabelsManager labels = rm.getRMContext().getNodeLabelManager();
        labels.addToCluserNodeLabelsWithDefaultExclusivity(Set.of(MAPS_LABEL, FENCED_LABEL));
        Configuration queues = new Configuration(yarn.getConfig());
        for (String label : List.of(MAPS_LABEL, FENCED_LABEL)) {
            queues.set("yarn.scheduler.capacity.root.accessible-node-labels." + label + ".capacity", "100");
            queues.set("yarn.scheduler.capacity.root.default.accessible-node-labels." + label + ".capacity", "100");
        }
        String all = String.join(",", MAPS_LABEL, FENCED_LABEL);
        queues.set("yarn.scheduler.capacity.root.accessible-node-labels", all);
        queues.set("yarn.scheduler.capacity.root.default.accessible-node-labels", all);
        ((CapacityScheduler) rm.getResourceScheduler()).reinitialize(queues, rm.getRMContext());
        labelsEnabled = true;
    }

    static synchronized SharedCluster get() throws IOException {
        if (started == null) {
            SharedCluster cluster = new SharedCluster();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                cluster.yarn.stop();
                cluster.dfs.shutdown();
            }, "stop-mini-clusters"));
            started = cluster;
        }
        return started;
    }
}
