package io.slipstream.ohb.mapreduce;

import io.slipstream.mapreduce.SlipstreamShuffleHandler;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.MRJobConfig;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * A mini YARN cluster of two NodeManagers on the local file system (or on HDFS, when the configuration
 * given to init names one as {@code fs.defaultFS}: {@code terasort}), whose {@code mapreduce_shuffle}
 * is the plugin's handler (Hadoop's HTTP shuffle stays in it), with the NodeManagers' fabric on
 * loopback over the given transport. MiniMRYarnCluster forces Hadoop's ShuffleHandler class into
 * its configuration; the configuration given to it turns that one setting into the plugin's.
 */
final class BenchCluster extends MiniMRYarnCluster {
    private static final String SHUFFLE_CLASS_KEY = "yarn.nodemanager.aux-services.mapreduce_shuffle.class";

    /** Extra JVM options for the reducers (a profiler agent), as a system property of the bench's JVM. */
    static final String REDUCE_JAVA_OPTS = "ohb.mapreduce.reduceJavaOpts";

    final int fabricPort;

    BenchCluster(String name) throws IOException {
        super(name, 2);
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            fabricPort = socket.getLocalPort();
        }
    }

    Configuration configuration(String transport, int nodeManagerMemoryMb, int reduceMemoryMb) {
        Configuration conf = new Configuration() {
            @Override
            public void setClass(String name, Class<?> theClass, Class<?> xface) {
                super.setClass(name, SHUFFLE_CLASS_KEY.equals(name) ? SlipstreamShuffleHandler.class : theClass, xface);
            }
        };
        conf.setInt("slipstream.mapreduce.port", fabricPort);
        conf.set("slipstream.mapreduce.bindAddress", "127.0.0.1");
        conf.set("slipstream.mapreduce.transport", transport);
        conf.setInt(YarnConfiguration.NM_PMEM_MB, nodeManagerMemoryMb);
        conf.setInt(YarnConfiguration.NM_VCORES, 8);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
        conf.setInt("yarn.app.mapreduce.am.resource.mb", 512);
        conf.set("yarn.app.mapreduce.am.command-opts", "-Xmx384m");
        conf.setInt("mapreduce.map.memory.mb", 512);
        conf.set("mapreduce.map.java.opts", "-Xmx384m");
        conf.setInt("mapreduce.reduce.memory.mb", reduceMemoryMb);
        // job_ms is waitForCompletion's wall time, and the client asks whether the job is done every 5 s by
        // default: every figure was rounded up to the next poll (up to 5 s of a 30 s job). 100 ms bounds that.
        conf.setInt("mapreduce.client.completion.pollinterval", 100);
        // Hadoop's Sort and TeraSort wait with waitForCompletion(true), which polls at this interval
        // instead (1 s by default): the same rounding for sort and terasort, bounded the same way.
        conf.setInt("mapreduce.client.progressmonitor.pollinterval", 100);
        // Containers' logs are deleted when their application ends, not 3 hours later: each NodeManager's stop
        // waited 10 s for its pending deletions and up to 6 s for applications still holding logs (34 s per
        // cluster, seen in jstack). -Dohb.mapreduce.containerLogRetainSeconds=N keeps them to read.
        conf.setLong("yarn.nodemanager.log.retain-seconds", Long.getLong("ohb.mapreduce.containerLogRetainSeconds", 0));
        // A profiler for the reducers, e.g. -Dohb.mapreduce.reduceJavaOpts=-agentpath:.../libasyncProfiler.so=...
        // (how docs/mapreduce-shuffle.md's profiles were taken).
        conf.set("mapreduce.reduce.java.opts", ("-Xmx" + (reduceMemoryMb * 3 / 4) + "m " + System.getProperty(REDUCE_JAVA_OPTS, "")).trim());
        return conf;
    }

    /**
     * The job's history file, once the ApplicationMaster has written it (empty after the wait). It is
     * under the staging directory (MiniMRYarnCluster puts that in its work directory, and the history
     * directories under it), on the cluster's file system: the local one, or {@code terasort}'s HDFS.
     */
    Optional<org.apache.hadoop.fs.Path> historyFile(JobID job, long waitMs) throws IOException, InterruptedException {
        long deadline = System.currentTimeMillis() + waitMs;
        Configuration conf = getConfig();
        org.apache.hadoop.fs.Path root = new org.apache.hadoop.fs.Path(conf.get(MRJobConfig.MR_AM_STAGING_DIR));
        FileSystem fs = root.getFileSystem(conf);
        do {
            try {
                RemoteIterator<LocatedFileStatus> files = fs.listFiles(root, true);
                while (files.hasNext()) {
                    org.apache.hadoop.fs.Path path = files.next().getPath();
                    String name = path.getName();
                    if (name.startsWith(job.toString()) && name.endsWith(".jhist")) {
                        return Optional.of(path);
                    }
                }
            } catch (FileNotFoundException | java.io.UncheckedIOException e) {
                // a file or directory went away while listing (the history moves from one to the next): look again
            }
            Thread.sleep(200);
        } while (System.currentTimeMillis() < deadline);
        return Optional.empty();
    }
}
