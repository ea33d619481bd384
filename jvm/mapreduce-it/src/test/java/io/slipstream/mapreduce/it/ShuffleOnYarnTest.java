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
        // The HTTP shuffle's invariant that ShuffleScenariosTest checks of the plugin alone.
        assertEquals(Jobs.taskCounter(vanilla, "MAP_OUTPUT_MATERIALIZED_BYTES"), Jobs.taskCounter(vanilla, "REDUCE_SHUFFLE_BYTES"));
        assertShuffledOverFabric(plugin.getCounters(), 4, 3);
    }

    /**
     * TeraGen, TeraSort over the fabric, TeraValidate, as an operator checks a cluster: the output is in order
     * and TeraValidate's checksum (the sum of every record's CRC-32) is the input's, computed here from TeraGen's
     * files: the same records, none lost or doubled. (No HTTP TeraSort beside it: the checksum already says the
     * output is the only right one, and the run cost 40 s of the suite.)
     */
    @Test
    void terasort_over_the_fabric_validates_with_the_inputs_checksum() throws Exception {
        Path in = new Path(work, "tera-in");
        assertEquals(0, ToolRunner.run(new Configuration(conf), new TeraGen(), new String[] {"-Dmapreduce.job.maps=3", "100000", in.toString()}));
        Path out = new Path(work, "tera-fabric");
        assertEquals(0, ToolRunner.run(Jobs.withPlugin(conf), new TeraSort(), new String[] {"-Dmapreduce.job.reduces=3", in.toString(), out.toString()}), "terasort");
        Path report = new Path(work, "tera-validate");
        assertEquals(0, ToolRunner.run(new Configuration(conf), new TeraValidate(),
                new String[] {out.toString(), report.toString()}), "teravalidate");
        String validated;
        try (var stream = fs.open(new Path(report, "part-r-00000"))) {
            validated = new String(stream.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(!validated.contains("misorder") && !validated.contains("error"), "TeraValidate: " + validated);
        java.util.regex.Matcher checksum = java.util.regex.Pattern.compile("checksum\\t([0-9a-fA-F]+)").matcher(validated);
        assertTrue(checksum.find(), "TeraValidate: " + validated);
        assertEquals(recordChecksum(in), new java.math.BigInteger(checksum.group(1), 16), "TeraValidate's checksum against the input's");
        Counters counters = lastJobCounters("TeraSort");
        assertShuffledOverFabric(counters, 3, 3);
    }

    /** TeraValidate's checksum of TeraGen's files: the sum of the CRC-32 of every 100-byte record. */
    private static java.math.BigInteger recordChecksum(Path dir) throws Exception {
        long sum = 0; // 100 000 records of at most 2^32 each: far from a long's limit
        byte[] record = new byte[100];
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        long records = 0;
        for (org.apache.hadoop.fs.FileStatus part : fs.listStatus(dir)) {
            if (!part.getPath().getName().startsWith("part-")) {
                continue;
            }
            assertEquals(0, part.getLen() % record.length, part.getPath() + " is not whole records");
            try (var stream = fs.open(part.getPath())) {
                for (long left = part.getLen() / record.length; left > 0; left--) {
                    stream.readFully(record);
                    crc.reset();
                    crc.update(record);
                    sum += crc.getValue();
                    records++;
                }
            }
        }
        assertEquals(100_000, records, "TeraGen's records");
        return java.math.BigInteger.valueOf(sum);
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
