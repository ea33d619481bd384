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

    /**
     * A port for the NodeManagers' shared fabric node (on 127.0.0.1, and on 127.0.0.2 for {@link
     * NodeManagerProcess}), which listens on it seconds later, when the NodeManagers start. Not the
     * kernel's choice of a free port: that comes from the ephemeral range, which every outgoing
     * connection draws from too (the HDFS and YARN mini clusters open many while they start, and the
     * machine is shared). A port taken by then fails the fabric's listener ("ucp_listener_create
     * failed: Device is busy"), and the NodeManagers serve HTTP only: seen once with the kernel's
     * choice. So: a port below that range, free now on the three loopback addresses the tests use.
     */
    private static int freePort() throws IOException {
        int ephemeralLow = 32768; // Linux's default
        try {
            // (Files.readString and readAllBytes return the first byte only of this file, whose size says 0, on JDK 17.)
            String range = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/sys/net/ipv4/ip_local_port_range")).get(0);
            int read = Integer.parseInt(range.trim().split("\\s+")[0]);
            if (read >= 2048 && read <= 65535) {
                ephemeralLow = read;
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or unreadable: the default
        }
        int low = Math.min(10_000, ephemeralLow / 2);
        java.util.Random random = new java.util.Random();
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = low + random.nextInt(ephemeralLow - low);
            if (freeOn(port, "127.0.0.1") && freeOn(port, "127.0.0.2") && freeOn(port, "127.0.0.3")) {
                return port;
            }
        }
        throw new IOException("no port below " + ephemeralLow + " free on 127.0.0.1 to 127.0.0.3 in 200 tries");
    }

    private static boolean freeOn(int port, String host) {
        try (ServerSocket socket = new ServerSocket(port, 1, java.net.InetAddress.getByName(host))) {
            return true;
        } catch (IOException e) {
            return false;
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
