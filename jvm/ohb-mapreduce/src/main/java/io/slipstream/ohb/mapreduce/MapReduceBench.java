package io.slipstream.ohb.mapreduce;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.jobhistory.JobHistoryParser;

/**
 * The JVM side of {@code ohb mapreduce avg|rand|skew|sort|terasort} ({@code sort}: Hadoop's Sort example on
 * RandomWriter's output, see {@link SortJob}; {@code terasort}: Hadoop's TeraSort on TeraGen's output, see
 * {@link TeraSortJob}; the others: {@link GeneratorJob}): for each configuration (vanilla: Hadoop's
 * HTTP shuffle; plugin; plugin-tcp: the plugin with the fabric forced to TCP) a mini YARN cluster
 * of two NodeManagers (a fresh one for each configuration) runs the job {@code --runs} times, with reducers
 * starting after the last map ({@code slowstart=1.0}) so that the shuffle phase is the shuffle
 * alone. Prints one {@code OHB_MAPREDUCE_RESULT {json}} line per run: job time, the reducers'
 * shuffle and merge phases from the job history (longest reducer), Hadoop's and the plugin's
 * shuffle counters and the reducers' checksum. Exit status 1 when a run fails, when checksums
 * differ between configurations ({@code terasort}: from the input's), when a sort's output is out of
 * order or lost or doubled records, or when a plugin run did not carry its shuffle over the fabric.
 */
public final class MapReduceBench {
    private MapReduceBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("pattern", "avg");
        options.put("maps", "4");
        options.put("reduces", "4");
        options.put("records", "100000");
        options.put("value-bytes", "1000");
        options.put("runs", "1");
        options.put("configs", "vanilla,plugin,plugin-tcp");
        options.put("reduce-mb", "1024");
        options.put("work", "build/ohb-mapreduce");
        for (int i = 0; i < args.length; i++) {
            if (i == 0 && !args[0].startsWith("--")) {
                options.put("pattern", args[0]);
                continue;
            }
            String key = args[i].replaceFirst("^--", "");
            if (!options.containsKey(key) || i + 1 >= args.length) {
                System.err.println("usage: MapReduceBench avg|rand|skew|sort|terasort [--maps N] [--reduces N] [--records N] [--value-bytes N]"
                        + " [--runs N] [--configs vanilla,plugin,plugin-tcp] [--reduce-mb N] [--work DIR]");
                System.exit(2);
            }
            options.put(key, args[++i]);
        }
        Bench bench = new Bench(options);
        try {
            runAll(bench, options);
        } catch (Throwable e) {
            // Exit, not return: a mini cluster leaves non-daemon threads behind (a YARN scheduled pool
            // kept a failed run's JVM alive until ohb's one-hour limit).
            System.err.println("ohb mapreduce: the bench failed: " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(bench.ok ? 0 : 1);
    }

    private static void runAll(Bench bench, Map<String, String> options) throws Exception {
        try {
            if (options.get("pattern").equals("terasort")) {
                bench.startDfs();
            }
            runEach(List.of(options.get("configs").split(",")), Integer.parseInt(options.get("runs")),
                    new Clusters<BenchCluster>() {
                        @Override
                        public BenchCluster start(String transport) throws Exception {
                            return bench.startCluster(transport);
                        }

                        @Override
                        public void stop(BenchCluster cluster) {
                            cluster.stop();
                        }
                    },
                    bench::run);
        } finally {
            bench.stopDfs();
        }
    }

    /** Starts and stops the bench's clusters (a seam for {@link #runEach}'s test). */
    interface Clusters<C> {
        C start(String transport) throws Exception;

        void stop(C cluster) throws Exception;
    }

    /** Runs one job of a configuration on a cluster. */
    interface Jobs<C> {
        void run(C cluster, String config, String transport, int run) throws Exception;
    }

    /**
     * Every configuration's {@code runs} jobs, each configuration on a fresh cluster (its NodeManagers'
     * fabric over the configuration's transport), stopped before the next one starts: each
     * configuration's runs are then its cluster's first, second, ... jobs. A cluster's first 250 MiB
     * job ran 3 to 6 s faster than its later ones whatever the shuffle (vanilla three times: 26.4,
     * 32.0, 29.6 s); when vanilla and the plugin shared a cluster, the plugin always came second
     * (docs/mapreduce-shuffle.md, "A cluster's first job").
     */
    static <C> void runEach(List<String> configs, int runs, Clusters<C> clusters, Jobs<C> jobs) throws Exception {
        C cluster = null;
        try {
            for (String config : configs) {
                String transport = config.equals("plugin-tcp") ? "tcp" : "auto";
                if (cluster != null) {
                    C done = cluster;
                    cluster = null;
                    clusters.stop(done);
                }
                cluster = clusters.start(transport);
                for (int run = 0; run < runs; run++) {
                    jobs.run(cluster, config, transport, run);
                }
            }
        } finally {
            if (cluster != null) {
                clusters.stop(cluster);
            }
        }
    }

    /** The runs of one invocation, and whether all went right. */
    private static final class Bench {
        final Map<String, String> options;
        final int maps;
        final int reduces;
        final int reduceMb;
        Long checksum;
        /** {@code sort}: RandomWriter's output; {@code terasort}: TeraGen's; written at the first run. */
        org.apache.hadoop.fs.Path sortInput;
        /**
         * {@code terasort}'s HDFS (null for the other tests), the jobs' {@code fs.defaultFS}, shared by
         * both YARN clusters. TeraSort's maps read its partition file from their working directory, where
         * the distributed cache links it, through FileSystem.getLocal; but YarnChild sets the default file
         * system's working directory to the job's (the client's), and with the local file system as the
         * default that is the same object: on the bench's local-FS cluster every map failed with
         * "can't read partitions file ... FileNotFoundException: File _partition.lst does not exist".
         * With HDFS as the default, the local file system keeps the container's directory.
         */
        MiniDFSCluster dfs;
        boolean ok = true;

        Bench(Map<String, String> options) {
            this.options = options;
            maps = Integer.parseInt(options.get("maps"));
            reduces = Integer.parseInt(options.get("reduces"));
            reduceMb = Integer.parseInt(options.get("reduce-mb"));
        }

        /** A directory under {@code --work}, as Hadoop names it. */
        org.apache.hadoop.fs.Path workPath(String name) {
            return new org.apache.hadoop.fs.Path(Path.of(options.get("work"), name).toAbsolutePath().toString());
        }

        /** A job's input or output: under {@code --work}, or in {@code terasort}'s HDFS (removed at the end). */
        org.apache.hadoop.fs.Path dataPath(String name) {
            return dfs != null ? new org.apache.hadoop.fs.Path("/ohb-mapreduce/" + name) : workPath(name);
        }

        /**
         * Where {@code sort} or {@code terasort} writes a configuration's output (read back by
         * {@link SortJob#summarize} or {@link TeraSortJob#summarize}).
         */
        org.apache.hadoop.fs.Path sortOutput(String config) {
            return dataPath(options.get("pattern") + "-out-" + config);
        }

        /** {@code terasort}'s HDFS: one DataNode, on loopback (MiniDFSCluster's default), its blocks under {@code --work}. */
        void startDfs() throws IOException {
            File dir = dfsDir();
            FileUtil.fullyDelete(dir); // a killed run's
            Configuration conf = new Configuration();
            conf.setInt("dfs.replication", 1);
            dfs = new MiniDFSCluster.Builder(conf, dir).numDataNodes(1).build();
        }

        void stopDfs() {
            if (dfs != null) {
                dfs.shutdown(true);
                FileUtil.fullyDelete(dfsDir());
                dfs = null;
            }
        }

        File dfsDir() {
            return Path.of(options.get("work"), "terasort-dfs").toAbsolutePath().toFile();
        }

        BenchCluster startCluster(String transport) throws Exception {
            // Where MiniYARNCluster puts its directories (read when it is constructed).
            System.setProperty("test.build.data", Path.of(options.get("work")).toAbsolutePath().toString());
            BenchCluster cluster = new BenchCluster("ohb-mr-" + transport);
            Configuration conf = cluster.configuration(transport, Math.max(4096, (reduces + 1) * reduceMb), reduceMb);
            if (dfs != null) {
                // Set before init: MiniMRYarnCluster makes its staging and history directories on it.
                conf.set("fs.defaultFS", dfs.getURI().toString());
                conf.setInt("dfs.replication", 1); // one DataNode
            }
            cluster.init(conf);
            cluster.start();
            return cluster;
        }

        void run(BenchCluster cluster, String config, String transport, int run) throws Exception {
            Configuration conf = new Configuration(cluster.getConfig());
            conf.setInt(GeneratorJob.MAPS, maps);
            conf.setInt(GeneratorJob.RECORDS, Integer.parseInt(options.get("records")));
            conf.setInt(GeneratorJob.VALUE_BYTES, Integer.parseInt(options.get("value-bytes")));
            conf.set(GeneratorJob.PATTERN, options.get("pattern"));
            conf.setFloat("mapreduce.job.reduce.slowstart.completedmaps", 1.0f);
            boolean sort = options.get("pattern").equals("sort");
            boolean terasort = options.get("pattern").equals("terasort");
            long expectedRecords = (long) maps * Long.parseLong(options.get("records"));
            if (!config.equals("vanilla")) {
                conf.set("mapreduce.job.reduce.shuffle.consumer.plugin.class", "io.slipstream.mapreduce.SlipstreamShuffle");
                conf.set("slipstream.mapreduce.fallback", "never");
                conf.set("slipstream.mapreduce.transport", transport);
            }
            Job job;
            if (sort && sortInput == null) {
                // One input for every configuration, written once per invocation (not timed).
                sortInput = dataPath("sort-in");
                SortJob.generate(conf, sortInput, maps, Long.parseLong(options.get("records")), Integer.parseInt(options.get("value-bytes")));
            }
            if (terasort && sortInput == null) {
                // One input for every configuration, written once per invocation (not timed); its
                // checksum is read here, not taken from the first configuration's output, so that every
                // configuration (vanilla too) is held to the input's records.
                sortInput = dataPath("terasort-in");
                long teraGenChecksum = TeraSortJob.generate(conf, sortInput, maps, Long.parseLong(options.get("records")));
                TeraSortJob.Summary input = TeraSortJob.summarize(conf, sortInput, false);
                if (input.records() != expectedRecords) {
                    throw new IllegalStateException("TeraGen wrote " + input.records() + " records, not " + expectedRecords);
                }
                if (input.checksum() != teraGenChecksum) {
                    // summarize's sum is TeraGen's and TeraValidate's, or it checks nothing.
                    throw new IllegalStateException("the input's checksum read back is " + Long.toHexString(input.checksum())
                            + ", TeraGen counted " + Long.toHexString(teraGenChecksum));
                }
                checksum = input.checksum();
            }
            MemorySampler memory = new MemorySampler();
            long start = System.nanoTime();
            try {
                if (sort) {
                    job = SortJob.sort(conf, sortInput, sortOutput(config), reduces);
                } else if (terasort) {
                    job = TeraSortJob.sort(conf, sortInput, sortOutput(config), reduces);
                } else {
                    job = GeneratorJob.job(conf, "ohb-mr-" + options.get("pattern") + "-" + config, reduces);
                    if (!job.waitForCompletion(false)) {
                        System.err.println("ohb mapreduce: " + config + " failed: " + job.getStatus().getFailureInfo());
                        job = null;
                    }
                }
            } finally {
                memory.close();
            }
            double clusterPeakMib = memory.clusterPeakMib();
            long jobMs = (System.nanoTime() - start) / 1_000_000;
            if (job == null) {
                System.err.println("ohb mapreduce: " + config + " failed");
                ok = false;
                return;
            }
            Counters counters = job.getCounters();
            long sum;
            long records;
            if (sort) {
                SortJob.Summary summary = SortJob.summarize(conf, sortOutput(config));
                sum = summary.checksum();
                records = summary.records();
                if (records != expectedRecords) {
                    System.err.println("ohb mapreduce: " + config + " sorted " + records + " records, RandomWriter wrote " + expectedRecords);
                    ok = false;
                }
            } else if (terasort) {
                // Throws when a key is out of order (as SortJob.summarize does); lost or doubled
                // records show in the count and in the checksum against the input's below.
                TeraSortJob.Summary summary = TeraSortJob.summarize(conf, sortOutput(config), true);
                sum = summary.checksum();
                records = summary.records();
                if (records != expectedRecords) {
                    System.err.println("ohb mapreduce: " + config + " sorted " + records + " records, TeraGen wrote " + expectedRecords);
                    ok = false;
                }
            } else {
                sum = counters.findCounter(GeneratorJob.GROUP, "CHECKSUM").getValue();
                records = counters.findCounter(GeneratorJob.GROUP, "RECORDS").getValue();
            }
            long shuffleBytes = counters.findCounter("org.apache.hadoop.mapreduce.TaskCounter", "REDUCE_SHUFFLE_BYTES").getValue();
            long fabricBytes = counters.findCounter("io.slipstream.mapreduce.SlipstreamCounter", "FABRIC_SHUFFLE_BYTES").getValue();
            if (checksum == null) {
                checksum = sum;
            } else if (checksum != sum) {
                System.err.println("ohb mapreduce: " + config + " reducers saw other data (checksum " + sum + " vs "
                        + (terasort ? "the input's " : "") + checksum + ")");
                ok = false;
            }
            if (!config.equals("vanilla") && fabricBytes != shuffleBytes) {
                System.err.println("ohb mapreduce: " + config + " shuffled " + fabricBytes + " of " + shuffleBytes + " bytes over the fabric");
                ok = false;
            }
            if (terasort && records == expectedRecords && sum == checksum) {
                // Checked: a default run would leave 1 GB per configuration (kept when its check failed).
                FileSystem.get(conf).delete(sortOutput(config), true);
            }
            long mapTasks = counters.findCounter("org.apache.hadoop.mapreduce.JobCounter", "TOTAL_LAUNCHED_MAPS").getValue();
            long[] phases = phases(cluster, job, conf);
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("config", config);
            result.put("pattern", options.get("pattern"));
            result.put("run", run);
            result.put("maps", maps);
            result.put("reduces", reduces);
            result.put("records_per_map", Long.parseLong(options.get("records")));
            // TeraGen's records are 10 + 90 bytes whatever --value-bytes says.
            result.put("value_bytes", terasort ? TeraSortJob.VALUE_BYTES : Long.parseLong(options.get("value-bytes")));
            // The job's maps: for sort and terasort, the input's splits, not --maps.
            result.put("map_tasks", mapTasks);
            result.put("job_ms", jobMs);
            result.put("shuffle_ms", phases[0]);
            result.put("merge_ms", phases[1]);
            result.put("reduce_ms", phases[2]);
            result.put("shuffle_bytes", shuffleBytes);
            result.put("fabric_bytes", fabricBytes);
            result.put("records", records);
            result.put("reducer_peak_rss_mib", Math.round(memory.reducerPeakMib() * 10) / 10.0);
            result.put("reducers_sampled", memory.reducersSeen());
            result.put("cluster_peak_rss_mib", Math.round(clusterPeakMib * 10) / 10.0);
            result.put("cluster_peak_is_this_jobs", memory.clusterPeakIsThisJobs());
            result.put("checksum", sum);
            System.out.println("OHB_MAPREDUCE_RESULT " + json(result));
        }
    }

    /** The longest reducer's shuffle, merge and reduce phases (ms), from the job's history file; -1 if it is not there. */
    private static long[] phases(BenchCluster cluster, Job job, Configuration conf) throws Exception {
        Optional<org.apache.hadoop.fs.Path> file = cluster.historyFile(job.getJobID(), 60_000);
        if (file.isEmpty()) {
            return new long[] {-1, -1, -1};
        }
        JobHistoryParser.JobInfo info = new JobHistoryParser(file.get().getFileSystem(conf), file.get()).parse();
        long shuffle = 0;
        long merge = 0;
        long reduce = 0;
        for (JobHistoryParser.TaskInfo task : info.getAllTasks().values()) {
            if (task.getTaskType() != TaskType.REDUCE) {
                continue;
            }
            JobHistoryParser.TaskAttemptInfo attempt = task.getAllTaskAttempts().get(task.getSuccessfulAttemptId());
            if (attempt == null) {
                continue;
            }
            shuffle = Math.max(shuffle, attempt.getShuffleFinishTime() - attempt.getStartTime());
            merge = Math.max(merge, attempt.getSortFinishTime() - attempt.getShuffleFinishTime());
            reduce = Math.max(reduce, attempt.getFinishTime() - attempt.getSortFinishTime());
        }
        return new long[] {shuffle, merge, reduce};
    }

    private static String json(Map<String, Object> values) {
        List<String> fields = new ArrayList<>();
        for (Map.Entry<String, Object> entry : values.entrySet()) {
            Object value = entry.getValue();
            fields.add("\"" + entry.getKey() + "\":" + (value instanceof String ? "\"" + value + "\"" : String.valueOf(value)));
        }
        return String.format(Locale.ROOT, "{%s}", String.join(",", fields));
    }
}
