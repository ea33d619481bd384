package io.slipstream.mapreduce.it;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * One HDFS (one DataNode) and one {@link YarnCluster} for every test class of this JVM: a mini
 * cluster takes tens of seconds to start on two cores. Started by the first test that asks,
 * stopped when the JVM exits.
 */
final class SharedCluster {
    private static SharedCluster started;

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
