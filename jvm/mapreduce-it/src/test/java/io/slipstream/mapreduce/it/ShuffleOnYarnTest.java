package io.slipstream.mapreduce.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.examples.WordCount;
import org.apache.hadoop.examples.terasort.TeraGen;
import org.apache.hadoop.examples.terasort.TeraSort;
import org.apache.hadoop.examples.terasort.TeraValidate;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Cluster;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.util.ToolRunner;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Real MapReduce jobs on a mini YARN cluster of two NodeManagers, run with Hadoop's HTTP shuffle
 * and with the plugin on the same input: the outputs must be identical, Hadoop's shuffle counters
 * filled the same way, and the plugin's counters must show every shuffled byte came over the fabric.
 */
class ShuffleOnYarnTest {
    private static Configuration conf;
    private static FileSystem fs;
    private static Path work;

    @BeforeAll
    static void startCluster() throws Exception {
        SharedCluster cluster = SharedCluster.get();
        conf = cluster.conf;
        fs = cluster.fs;
        work = cluster.work;
    }

    private static Job wordCount(Configuration jobConf, Path input, Path output) throws Exception {
        Job job = Job.getInstance(jobConf, "wordcount " + output.getName());
        job.setJarByClass(WordCount.class);
        job.setMapperClass(WordCount.TokenizerMapper.class);
        job.setCombinerClass(WordCount.IntSumReducer.class);
        job.setReducerClass(WordCount.IntSumReducer.class);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(IntWritable.class);
        job.setNumReduceTasks(3);
        FileInputFormat.addInputPath(job, input);
        FileOutputFormat.setOutputPath(job, output);
        assertTrue(job.waitForCompletion(false), job.getJobName() + " failed: " + job.getStatus().getFailureInfo());
        return job;
    }

    /** Hadoop's counters are filled as by the HTTP shuffle, and the plugin's say the bytes took the fabric. */
    static void assertShuffledOverFabric(Counters counters, long maps, long reduces) {
        long shuffleBytes = Jobs.counter(counters, "org.apache.hadoop.mapreduce.TaskCounter", "REDUCE_SHUFFLE_BYTES");
        assertTrue(shuffleBytes > 0, "no shuffle bytes");
        assertEquals(shuffleBytes, Jobs.fabricCounter(counters, "FABRIC_SHUFFLE_BYTES"), "shuffle bytes not carried by the fabric");
        assertEquals(maps * reduces, Jobs.counter(counters, "org.apache.hadoop.mapreduce.TaskCounter", "SHUFFLED_MAPS"));
        assertEquals(maps * reduces, Jobs.fabricCounter(counters, "FABRIC_SHUFFLED_MAPS"));
        assertEquals(0, Jobs.counter(counters, "org.apache.hadoop.mapreduce.TaskCounter", "FAILED_SHUFFLE"));
        assertEquals(0, Jobs.fabricCounter(counters, "HTTP_FALLBACKS"));
        assertTrue(Jobs.fabricCounter(counters, "FABRIC_REQUESTS") > 0);
    }

    @Test
    void wordcount_gives_the_same_output_as_the_http_shuffle_and_its_bytes_take_the_fabric() throws Exception {
        Path input = new Path(work, "words");
        Jobs.writeText(fs, input, 4, 20_000, 7);
        Job vanilla = wordCount(conf, input, new Path(work, "wc-http"));
        Job plugin = wordCount(Jobs.withPlugin(conf), input, new Path(work, "wc-fabric"));
        assertEquals(Jobs.digest(fs, new Path(work, "wc-http")), Jobs.digest(fs, new Path(work, "wc-fabric")));
        assertEquals(0, Jobs.fabricCounter(vanilla.getCounters(), "FABRIC_SHUFFLE_BYTES"), "the HTTP run used the plugin");
        assertEquals(Jobs.taskCounter(vanilla, "REDUCE_SHUFFLE_BYTES"), Jobs.taskCounter(plugin, "REDUCE_SHUFFLE_BYTES"));
        assertEquals(Jobs.taskCounter(vanilla, "REDUCE_INPUT_RECORDS"), Jobs.taskCounter(plugin, "REDUCE_INPUT_RECORDS"));
        assertShuffledOverFabric(plugin.getCounters(), 4, 3);
    }

    @Test
    void terasort_gives_the_same_output_as_the_http_shuffle_and_validates() throws Exception {
        String in = new Path(work, "tera-in").toString();
        assertEquals(0, ToolRunner.run(new Configuration(conf), new TeraGen(), new String[] {"-Dmapreduce.job.maps=3", "100000", in}));
        for (String mode : new String[] {"http", "fabric"}) {
            Configuration jobConf = mode.equals("fabric") ? Jobs.withPlugin(conf) : new Configuration(conf);
            String out = new Path(work, "tera-" + mode).toString();
            assertEquals(0, ToolRunner.run(jobConf, new TeraSort(), new String[] {"-Dmapreduce.job.reduces=3", in, out}), "terasort " + mode);
        }
        // The fabric's output is validated; the HTTP shuffle's must be the same bytes.
        Path report = new Path(work, "tera-validate");
        assertEquals(0, ToolRunner.run(new Configuration(conf), new TeraValidate(),
                new String[] {new Path(work, "tera-fabric").toString(), report.toString()}), "teravalidate");
        String errors;
        try (var stream = fs.open(new Path(report, "part-r-00000"))) {
            errors = new String(stream.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(errors.contains("checksum") && !errors.contains("misorder") && !errors.contains("error"), "TeraValidate: " + errors);
        assertEquals(Jobs.digest(fs, new Path(work, "tera-http")), Jobs.digest(fs, new Path(work, "tera-fabric")));
        Counters counters = lastJobCounters("TeraSort");
        assertShuffledOverFabric(counters, 3, 3);
    }

    /** The counters of the most recent job of that name (from the history server). */
    private static Counters lastJobCounters(String name) throws Exception {
        Cluster yarn = new Cluster(conf);
        try {
            JobStatus last = null;
            for (JobStatus status : yarn.getAllJobStatuses()) {
                if (status.getJobName().equals(name) && (last == null || status.getJobID().compareTo(last.getJobID()) > 0)) {
                    last = status;
                }
            }
            assertTrue(last != null, "no job named " + name);
            return yarn.getJob(last.getJobID()).getCounters();
        } finally {
            yarn.close();
        }
    }
}
