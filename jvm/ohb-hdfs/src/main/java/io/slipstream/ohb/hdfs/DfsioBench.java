package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.SlipstreamDataNodePlugin;
import io.slipstream.hdfs.SlipstreamDistributedFileSystem;
import io.slipstream.hdfs.SlipstreamHdfsCounters;
import io.slipstream.hdfs.SlipstreamReplicaAccessorBuilder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.TestDFSIO;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.util.ToolRunner;

/**
 * The JVM side of {@code ohb hdfs dfsio}: Hadoop's own {@code TestDFSIO} (the 3.4.2 tests jar,
 * unmodified) {@code -write} then {@code -read} against a mini HDFS cluster of a NameNode and three
 * DataNodes (replication 3, short-circuit reads off) in this JVM, one configuration per JVM:
 * {@code vanilla}, {@code plugin} (fallback never) or {@code plugin-tcp}. TestDFSIO runs through
 * {@code ToolRunner.run(new TestDFSIO(), args)}, the call its {@code main} makes (its main would
 * end this JVM before the counters are read). Its MapReduce job runs in the LocalJobRunner
 * ({@code mapreduce.framework.name=local}): the map tasks are threads of this JVM.
 *
 * <p>How the plugin's client settings reach the map tasks: they are given to TestDFSIO only, as
 * its generic {@code -D} options (the cluster's own configuration carries the DataNode plugin
 * alone, and FileSystem's cache is emptied after the cluster starts). TestDFSIO copies its
 * configuration into the job's; the LocalJobRunner builds each task's JobConf from the job.xml it
 * submitted; the mapper calls {@code FileSystem.get(jobConf)}, and {@code fs.hdfs.impl.disable.cache=true}
 * makes that build a new FileSystem from the task's own configuration rather than reuse one.
 * Then the plugin's counters must show every byte TestDFSIO wrote and read over the fabric,
 * client side and DataNode side, or the run fails; a vanilla run must show none.
 *
 * <p>Prints TestDFSIO's own result file (its {@code ----- TestDFSIO ----- :} blocks) and one
 * {@code OHB_HDFS_DFSIO {json}} line with the counters; exits 1 when TestDFSIO fails or the
 * configuration's path was not taken.
 */
public final class DfsioBench {
    private DfsioBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        o.put("config", "vanilla");
        o.put("files", "2");
        o.put("file-bytes", String.valueOf(64 << 20));
        o.put("block-bytes", String.valueOf(128 << 20));
        o.put("maps", "2");
        o.put("work", "build/ohb-hdfs");
        HdfsBench.parseOptions(args, o, "usage: DfsioBench --config vanilla|plugin|plugin-tcp [--files N] [--file-bytes N] [--block-bytes N]"
                + " [--maps N] [--work DIR]");
        String config = o.get("config");
        int files = Integer.parseInt(o.get("files"));
        long fileBytes = Long.parseLong(o.get("file-bytes"));
        long blockBytes = Long.parseLong(o.get("block-bytes"));
        int maps = Integer.parseInt(o.get("maps"));
        if (!List.of("vanilla", "plugin", "plugin-tcp").contains(config)) {
            throw new IllegalArgumentException("unknown configuration " + config);
        }
        Path work = Files.createDirectories(Path.of(o.get("work")).toAbsolutePath()).resolve("dfsio-" + config);
        HdfsBench.deleteTree(work);
        Files.createDirectories(work);
        Path resFile = work.resolve("TestDFSIO_results.log");

        MiniDFSCluster cluster = new MiniDFSCluster.Builder(clusterConf(config, blockBytes, work)).numDataNodes(3).build();
        Map<String, Object> result = new LinkedHashMap<>();
        String failure = "";
        try {
            cluster.waitActive();
            // The cluster's client (made with the cluster's conf) must not serve TestDFSIO's gets.
            FileSystem.closeAll();
            List<String> generic = genericOptions(config, cluster.getURI().toString(), blockBytes, maps, work);
            long bytes = files * fileBytes;
            for (String phase : List.of("write", "read")) {
                long clientWrittenBefore = SlipstreamHdfsCounters.bytesWritten();
                long clientReadBefore = SlipstreamHdfsCounters.bytesRead();
                long dataNodeReceivedBefore = SlipstreamHdfsCounters.dataNodeBytesReceived();
                long dataNodeServedBefore = SlipstreamHdfsCounters.dataNodeBytesServed();
                int rc = runTestDfsio(generic, phase, files, fileBytes, resFile, "ohb hdfs dfsio");
                long client = phase.equals("write") ? SlipstreamHdfsCounters.bytesWritten() - clientWrittenBefore
                        : SlipstreamHdfsCounters.bytesRead() - clientReadBefore;
                long dataNode = phase.equals("write") ? SlipstreamHdfsCounters.dataNodeBytesReceived() - dataNodeReceivedBefore
                        : SlipstreamHdfsCounters.dataNodeBytesServed() - dataNodeServedBefore;
                result.put(phase + "_exit_code", rc);
                result.put(phase + "_fabric_bytes_client", client);
                result.put(phase + "_fabric_bytes_datanodes", dataNode);
                String why = rc != 0 ? "TestDFSIO -" + phase + " exited with " + rc : pathCheck(config, phase, bytes, client, dataNode);
                if (why != null) {
                    failure = config + " " + phase + ": " + why;
                    break;
                }
            }
        } catch (Exception e) {
            failure = config + ": " + e;
            e.printStackTrace();
        } finally {
            cluster.shutdown();
        }
        printResults(resFile);
        // The replicas written (three per byte) go now, before the next configuration's JVM
        // starts: deleted files' dirty pages are dropped, not written back during its run.
        HdfsBench.deleteTree(work.resolve("cluster"));
        result.put("config", config);
        result.put("files", files);
        result.put("file_bytes", fileBytes);
        result.put("block_bytes", blockBytes);
        result.put("maps", maps);
        result.put("ok", failure.isEmpty());
        result.put("failure", failure);
        result.put("counters", SlipstreamHdfsCounters.summary());
        System.out.println("OHB_HDFS_DFSIO " + HdfsBench.json(result));
        if (!failure.isEmpty()) {
            System.err.println("ohb hdfs dfsio: " + failure);
        }
        System.exit(failure.isEmpty() ? 0 : 1);
    }

    /**
     * TestDFSIO's {@code -<phase>} ({@code write} or {@code read}) of {@code files} files of {@code fileBytes} with the
     * generic options given, through {@code ToolRunner.run(new TestDFSIO(), args)} (its main would end this JVM); its
     * result block is appended to {@code resFile}. The command line goes to stderr after {@code label}. Returns
     * TestDFSIO's exit code.
     */
    static int runTestDfsio(List<String> generic, String phase, int files, long fileBytes, Path resFile, String label) throws Exception {
        List<String> argv = new ArrayList<>(generic);
        argv.addAll(List.of("-" + phase, "-nrFiles", String.valueOf(files), "-size", fileBytes + "B", "-resFile", resFile.toString()));
        System.err.println(label + ": TestDFSIO " + String.join(" ", argv));
        return ToolRunner.run(new TestDFSIO(), argv.toArray(new String[0]));
    }

    /** TestDFSIO's result file on stdout (its {@code ----- TestDFSIO ----- :} blocks, which {@code ohb} parses), if written. */
    static void printResults(Path resFile) throws java.io.IOException {
        if (Files.exists(resFile)) {
            System.out.print(Files.readString(resFile, StandardCharsets.UTF_8));
        }
    }

    /** Each phase's "Throughput mb/sec" in a TestDFSIO result file ({@code write}, {@code read}), in file order. */
    static Map<String, Double> throughputs(Path resFile) throws java.io.IOException {
        Map<String, Double> byPhase = new LinkedHashMap<>();
        String phase = null;
        for (String line : Files.readAllLines(resFile, StandardCharsets.UTF_8)) {
            String trimmed = line.trim();
            if (trimmed.startsWith("----- TestDFSIO ----- :")) {
                phase = trimmed.substring(trimmed.indexOf(':') + 1).trim();
            } else if (phase != null && trimmed.startsWith("Throughput mb/sec:")) {
                byPhase.put(phase, Double.parseDouble(trimmed.substring(trimmed.indexOf(':') + 1).trim()));
            }
        }
        return byPhase;
    }

    /**
     * Null when the phase took the configuration's path: plugin, every byte TestDFSIO moved over the
     * fabric at the client and at the DataNodes (writes: on all three replicas); vanilla, none.
     */
    static String pathCheck(String config, String phase, long bytes, long client, long dataNodes) {
        boolean write = phase.equals("write");
        long dataNodeMin = write ? 3 * bytes : bytes;
        if (config.startsWith("plugin")) {
            if (client < bytes || dataNodes < dataNodeMin) {
                return "client moved " + client + " and DataNodes " + dataNodes + " bytes over the fabric; TestDFSIO moved " + bytes
                        + " (DataNodes at least " + dataNodeMin + ") (" + SlipstreamHdfsCounters.summary() + ")";
            }
        } else if (client != 0 || dataNodes != 0) {
            return client + " client and " + dataNodes + " DataNode bytes over the fabric in a vanilla configuration";
        }
        return null;
    }

    /** The mini cluster's own configuration: the DataNode plugin only, no client setting. */
    private static Configuration clusterConf(String config, long blockBytes, Path work) {
        Configuration conf = new HdfsConfiguration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, work.resolve("cluster").toString());
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, blockBytes);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
        // As TestDFSIO's own JUnit set-up: replicas are reported to the NameNode sooner.
        conf.setInt(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        if (config.startsWith("plugin")) {
            conf.set("dfs.datanode.plugins", SlipstreamDataNodePlugin.class.getName());
            conf.set("slipstream.hdfs.fallback", "never");
            conf.set("slipstream.hdfs.transport", config.equals("plugin-tcp") ? "tcp" : "auto");
        }
        return conf;
    }

    /** TestDFSIO's generic options: the cluster, the LocalJobRunner, and (plugin) the client's settings. */
    static List<String> genericOptions(String config, String fsUri, long blockBytes, int maps, Path work) {
        Map<String, String> d = new LinkedHashMap<>();
        d.put("fs.defaultFS", fsUri);
        d.put("dfs.replication", "3");
        d.put("dfs.blocksize", String.valueOf(blockBytes));
        d.put("dfs.client.read.shortcircuit", "false");
        d.put("mapreduce.framework.name", "local");
        d.put("mapreduce.local.map.tasks.maximum", String.valueOf(maps));
        d.put("hadoop.tmp.dir", work.resolve("tmp").toString());
        d.put("fs.hdfs.impl.disable.cache", "true");
        if (config.startsWith("plugin")) {
            d.put("fs.hdfs.impl", SlipstreamDistributedFileSystem.class.getName());
            d.put("dfs.client.replica.accessor.builder.classes", SlipstreamReplicaAccessorBuilder.class.getName());
            d.put("slipstream.hdfs.fallback", "never");
            d.put("slipstream.hdfs.transport", config.equals("plugin-tcp") ? "tcp" : "auto");
        }
        List<String> out = new ArrayList<>();
        d.forEach((k, v) -> out.addAll(List.of("-D", k + "=" + v)));
        return out;
    }
}
