package io.slipstream.mapreduce.it;

import io.slipstream.mapreduce.SlipstreamShuffleHandler;
import java.io.IOException;
import java.net.ServerSocket;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * A mini YARN cluster of two NodeManagers (sharing this JVM, as mini clusters do; their map tasks
 * and reducers run in containers, each its own JVM), whose {@code mapreduce_shuffle} aux service
 * is the plugin's ShuffleHandler. MiniMRYarnCluster forces Hadoop's ShuffleHandler into the
 * configuration it is given; the configuration handed to it here turns that one setting into the
 * plugin's class, and leaves the rest (HTTP shuffle port 0 per NodeManager) as Hadoop sets it.
 */
final class YarnCluster extends MiniMRYarnCluster {
    static final String SHUFFLE_CLASS_KEY = "yarn.nodemanager.aux-services.mapreduce_shuffle.class";
    static final int NODE_MANAGERS = 2;
    /**
     * The application master's and tasks' JVMs here live seconds: C1 alone and the serial collector start them
     * with less CPU than C2 and G1, on a machine of two cores that runs several at once (docs/testing.md has
     * the measurement). The system property of this name replaces them (empty: the JVM's defaults).
     */
    static final String TASK_JVM_OPTS_PROPERTY = "slipstream.it.taskJvmOpts";
    static final String TASK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

    final int fabricPort;

    YarnCluster(String name) throws IOException {
        super(name, NODE_MANAGERS);
        fabricPort = freePort();
    }

    /** A port for the NodeManagers' shared fabric node (the kernel's choice of a free one, on loopback). */
    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /** The cluster's configuration before start: small containers (2 cores), the plugin's port. */
    Configuration baseConfiguration() {
        Configuration conf = new Configuration() {
            @Override
            public void setClass(String name, Class<?> theClass, Class<?> xface) {
                super.setClass(name, SHUFFLE_CLASS_KEY.equals(name) ? SlipstreamShuffleHandler.class : theClass, xface);
            }
        };
        conf.setInt("slipstream.mapreduce.port", fabricPort);
        conf.set("slipstream.mapreduce.bindAddress", "127.0.0.1");
        conf.set("slipstream.mapreduce.buffer.cap", "128m");
        conf.setInt(YarnConfiguration.NM_PMEM_MB, 3072);
        conf.setInt(YarnConfiguration.NM_VCORES, 4);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
        String taskJvm = System.getProperty(TASK_JVM_OPTS_PROPERTY, TASK_JVM_OPTS);
        conf.setInt("yarn.app.mapreduce.am.resource.mb", 512);
        conf.set("yarn.app.mapreduce.am.command-opts", ("-Xmx384m " + taskJvm).trim());
        conf.setInt("mapreduce.map.memory.mb", 384);
        conf.set("mapreduce.map.java.opts", ("-Xmx256m " + taskJvm).trim());
        conf.setInt("mapreduce.reduce.memory.mb", 512);
        conf.set("mapreduce.reduce.java.opts", ("-Xmx384m " + taskJvm).trim());
        // The client asks whether its job is done every 5 s by default: up to 5 s idle per job.
        conf.setInt("mapreduce.client.completion.pollinterval", 250);
        // Containers' logs are deleted when their application ends, not 3 hours later: a NodeManager's stop waits
        // 10 s for its pending deletions and up to 6 s for applications still holding logs (34 s per stop of
        // this cluster, seen in jstack). -Dslipstream.it.containerLogRetainSeconds=N keeps them to read.
        conf.setLong("yarn.nodemanager.log.retain-seconds", Long.getLong("slipstream.it.containerLogRetainSeconds", 0));
        conf.setInt("mapreduce.task.io.sort.mb", 32);
        conf.setInt("mapreduce.job.maxtaskfailures.per.tracker", 10);
        // Node labels, for NodeManagerLossTest's placement (maps on the NodeManager it kills); jobs
        // without a label expression run on the unlabelled NodeManagers as before.
        conf.setBoolean("yarn.node-labels.enabled", true);
        conf.set("yarn.node-labels.fs-store.root-dir", new java.io.File("target/node-labels").toURI().toString());
        return conf;
    }
}
