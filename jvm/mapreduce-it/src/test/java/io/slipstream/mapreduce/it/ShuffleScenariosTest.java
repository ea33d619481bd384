package io.slipstream.mapreduce.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The shuffle's harder cases on the shared mini cluster, run with the plugin: a skewed job with an
 * empty partition in every map output, and compressed map outputs too large for the reducer's
 * in-memory shuffle (so they go to disk and are merged there). The output is checked against what
 * the maps wrote, computed here without Hadoop ({@link ScenarioJob#expected}), each key in its
 * reducer's part file, and Hadoop's shuffle counters against the HTTP shuffle's own invariant
 * (every materialized map output byte shuffled once); an HTTP run of each job would add a minute to
 * the suite and check nothing more (ShuffleOnYarnTest compares the two shuffles side by side).
 */
class ShuffleScenariosTest {
    private static final int MAPS = 4;
    private static final int REDUCES = 4;
    private static SharedCluster cluster;
    private static Path seeds;

    @BeforeAll
    static void start() throws Exception {
        cluster = SharedCluster.get();
        seeds = new Path(cluster.work, "scenario-seeds");
        if (!cluster.fs.exists(seeds)) {
            ScenarioJob.writeSeeds(cluster.fs, seeds, MAPS);
        }
    }

    private static Job run(Configuration conf, String name) throws Exception {
        Job job = ScenarioJob.job(conf, name, seeds, new Path(cluster.work, name), REDUCES);
        assertTrue(job.waitForCompletion(false), name + " failed: " + job.getStatus().getFailureInfo());
        return job;
    }

    private static Configuration scenario(int records, int valueBytes, double skew) {
        Configuration conf = new Configuration(cluster.conf);
        conf.setInt(ScenarioJob.RECORDS, records);
        conf.setInt(ScenarioJob.VALUE_BYTES, valueBytes);
        conf.setDouble(ScenarioJob.SKEW, skew);
        return conf;
    }

    /** Records the reducer of these keys received (the first field of its output lines). */
    private static long records(java.util.Map<String, String> lines, String keyPrefix) {
        return lines.entrySet().stream().filter(e -> e.getKey().startsWith(keyPrefix))
                .mapToLong(e -> Long.parseLong(e.getValue().split("\t")[0])).sum();
    }

    /**
     * The output holds what the maps wrote, each key in the part file of the reducer it names (so no key is in
     * two parts); returns its lines. Each part file is read once.
     */
    private static java.util.Map<String, String> assertOutput(Configuration conf, Path output) throws Exception {
        java.util.Map<String, String> lines = new java.util.TreeMap<>();
        for (int reducer = 0; reducer < REDUCES; reducer++) {
            String prefix = "r" + reducer + "-";
            Path part = new Path(output, String.format("part-r-%05d", reducer));
            java.util.Map<String, String> partLines = Jobs.lines(cluster.fs, part);
            for (String key : partLines.keySet()) {
                assertTrue(key.startsWith(prefix), key + " in " + part);
            }
            lines.putAll(partLines);
        }
        assertEquals(ScenarioJob.expected(conf, MAPS, REDUCES), lines, "not what the maps wrote");
        return lines;
    }

    /** What Hadoop's HTTP shuffle gives too: every map output byte materialized was shuffled, once. */
    private static void assertShuffledEveryMaterializedByte(Job job) throws Exception {
        assertEquals(Jobs.taskCounter(job, "MAP_OUTPUT_MATERIALIZED_BYTES"), Jobs.taskCounter(job, "REDUCE_SHUFFLE_BYTES"));
    }

    @Test
    void a_skewed_job_with_empty_partitions_gives_what_the_maps_wrote() throws Exception {
        Configuration conf = scenario(20_000, 100, 0.8);
        Job plugin = run(Jobs.withPlugin(conf), "skew-fabric");
        FileSystem fs = cluster.fs;
        java.util.Map<String, String> lines = assertOutput(conf, new Path(cluster.work, "skew-fabric"));
        assertShuffledEveryMaterializedByte(plugin);
        assertEquals(0, fs.getFileStatus(new Path(cluster.work, "skew-fabric/part-r-00003")).getLen(), "the last reducer's partition is empty");
        assertTrue(records(lines, "r0-") > 3 * records(lines, "r1-"), "no skew");
        ShuffleOnYarnTest.assertShuffledOverFabric(plugin.getCounters(), MAPS, REDUCES);
    }

    @Test
    void compressed_map_outputs_merged_on_disk_give_what_the_maps_wrote() throws Exception {
        Configuration conf = scenario(20_000, 120, 0.0);
        conf.setBoolean("mapreduce.map.output.compress", true);
        conf.set("mapreduce.map.output.compress.codec", "org.apache.hadoop.io.compress.DefaultCodec");
        // A map output above 0.2% of the shuffle memory (about 70 KB here) goes to disk; with a merge
        // factor of 2, three such outputs start an on-disk merge while the copy goes on.
        conf.setFloat("mapreduce.reduce.shuffle.input.buffer.percent", 0.1f);
        conf.setFloat("mapreduce.reduce.shuffle.memory.limit.percent", 0.002f);
        conf.setInt("mapreduce.task.io.sort.factor", 2);
        Job plugin = run(Jobs.withPlugin(conf), "disk-fabric");
        assertOutput(conf, new Path(cluster.work, "disk-fabric"));
        ShuffleOnYarnTest.assertShuffledOverFabric(plugin.getCounters(), MAPS, REDUCES);
        // Compressed on the wire: fewer shuffled bytes than the map output's raw bytes.
        assertTrue(Jobs.taskCounter(plugin, "REDUCE_SHUFFLE_BYTES") < Jobs.taskCounter(plugin, "MAP_OUTPUT_BYTES"));
        assertShuffledEveryMaterializedByte(plugin);
        // Reducers wrote map outputs to disk (spilled records beyond the maps' own).
        assertTrue(Jobs.taskCounter(plugin, "SPILLED_RECORDS") > Jobs.taskCounter(plugin, "MAP_OUTPUT_RECORDS"),
                "no on-disk shuffle on the reduce side");
    }
}
