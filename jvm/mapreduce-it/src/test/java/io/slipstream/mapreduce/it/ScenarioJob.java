package io.slipstream.mapreduce.it;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Partitioner;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;

/**
 * A generated shuffle (after OHB's MR-SKEW): each map, given a seed, emits records whose keys
 * name their reducer; a fraction {@code scenario.skew} goes to reducer 0, the rest spread over the
 * others but the last, which gets nothing (an empty partition in every map output). Reducers write
 * per key the count, bytes and a sum of CRCs of the values: an output that does not depend on the
 * order values arrive in, so two runs compare byte for byte.
 */
public final class ScenarioJob {
    static final String RECORDS = "scenario.records";
    static final String VALUE_BYTES = "scenario.value.bytes";
    static final String SKEW = "scenario.skew";
    static final String KEYS = "scenario.keys";

    private ScenarioJob() {}

    /** One input file per map, holding its seed. */
    static void writeSeeds(FileSystem fs, Path dir, int maps) throws IOException {
        for (int m = 0; m < maps; m++) {
            try (OutputStream out = fs.create(new Path(dir, "seed-" + m))) {
                out.write((1000 + m + "\n").getBytes(StandardCharsets.UTF_8));
            }
        }
    }

    static Job job(Configuration conf, String name, Path input, Path output, int reduces) throws IOException {
        Job job = Job.getInstance(conf, name);
        job.setJarByClass(ScenarioJob.class);
        job.setMapperClass(GenerateMapper.class);
        job.setPartitionerClass(NamedPartitioner.class);
        job.setReducerClass(SummaryReducer.class);
        job.setMapOutputKeyClass(Text.class);
        job.setMapOutputValueClass(BytesWritable.class);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(Text.class);
        job.setNumReduceTasks(reduces);
        FileInputFormat.addInputPath(job, input);
        FileOutputFormat.setOutputPath(job, output);
        return job;
    }

    public static final class GenerateMapper extends Mapper<LongWritable, Text, Text, BytesWritable> {
        @Override
        protected void map(LongWritable offset, Text line, Context context) throws IOException, InterruptedException {
            Text key = new Text();
            try {
                generate(context.getConfiguration(), Long.parseLong(line.toString().trim()), context.getNumReduceTasks(), (name, value) -> {
                    key.set(name);
                    try {
                        context.write(key, new BytesWritable(value));
                    } catch (IOException | InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                });
            } catch (IllegalStateException e) {
                throw new IOException(e);
            }
        }
    }

    /** One map's records, from its seed. */
    static void generate(Configuration conf, long seed, int reduces, java.util.function.BiConsumer<String, byte[]> out) {
        int records = conf.getInt(RECORDS, 10_000);
        int valueBytes = conf.getInt(VALUE_BYTES, 100);
        double skew = conf.getDouble(SKEW, 0.0);
        int keys = conf.getInt(KEYS, 1000);
        Random random = new Random(seed);
        for (int i = 0; i < records; i++) {
            int reducer = reduces < 3 || random.nextDouble() < skew ? 0 : 1 + random.nextInt(reduces - 2);
            String key = "r" + reducer + "-k" + random.nextInt(keys);
            byte[] value = new byte[random.nextInt(2 * valueBytes + 1)];
            random.nextBytes(value);
            out.accept(key, value);
        }
    }

    /** What the job's reducers write, computed without Hadoop: key to its output line's value. */
    static java.util.Map<String, String> expected(Configuration conf, int maps, int reduces) {
        java.util.Map<String, long[]> sums = new java.util.TreeMap<>();
        CRC32 crc = new CRC32();
        for (int m = 0; m < maps; m++) {
            generate(conf, 1000 + m, reduces, (key, value) -> {
                long[] sum = sums.computeIfAbsent(key, k -> new long[3]);
                sum[0]++;
                sum[1] += value.length;
                crc.reset();
                crc.update(value);
                sum[2] += crc.getValue();
            });
        }
        java.util.Map<String, String> lines = new java.util.TreeMap<>();
        sums.forEach((key, sum) -> lines.put(key, sum[0] + "\t" + sum[1] + "\t" + sum[2]));
        return lines;
    }

    /** The reducer a key names ({@code r<reducer>-...}). */
    public static final class NamedPartitioner extends Partitioner<Text, BytesWritable> {
        @Override
        public int getPartition(Text key, BytesWritable value, int partitions) {
            String text = key.toString();
            return Integer.parseInt(text.substring(1, text.indexOf('-'))) % partitions;
        }
    }

    public static final class SummaryReducer extends Reducer<Text, BytesWritable, Text, Text> {
        @Override
        protected void reduce(Text key, Iterable<BytesWritable> values, Context context) throws IOException, InterruptedException {
            long count = 0;
            long bytes = 0;
            long crcSum = 0;
            CRC32 crc = new CRC32();
            for (BytesWritable value : values) {
                count++;
                bytes += value.getLength();
                crc.reset();
                crc.update(value.getBytes(), 0, value.getLength());
                crcSum += crc.getValue();
            }
            context.write(key, new Text(count + "\t" + bytes + "\t" + crcSum));
        }
    }
}
