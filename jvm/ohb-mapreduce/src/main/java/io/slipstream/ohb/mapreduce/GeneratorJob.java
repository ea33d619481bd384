package io.slipstream.ohb.mapreduce;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.mapreduce.InputFormat;
import org.apache.hadoop.mapreduce.InputSplit;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Partitioner;
import org.apache.hadoop.mapreduce.RecordReader;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.NullOutputFormat;

/**
 * OHB's stand-alone MapReduce shuffle job (no HDFS): each of {@code ohb.maps} maps generates
 * {@code ohb.records} pairs of an 8-byte key and {@code ohb.value.bytes} bytes; the key names its
 * reducer, chosen by the pattern: {@code avg} round robin (even), {@code rand} pseudo-random,
 * {@code skew} half to reducer 0 and the rest pseudo-random. Reducers consume the pairs and count
 * records, bytes and a sum of CRCs (order-independent) in counters, so runs compare.
 */
public final class GeneratorJob {
    static final String MAPS = "ohb.maps";
    static final String RECORDS = "ohb.records";
    static final String VALUE_BYTES = "ohb.value.bytes";
    static final String PATTERN = "ohb.pattern";
    static final String SEED = "ohb.seed";
    /** Counter group of the reducers' summary. */
    static final String GROUP = "OHB";
    private static final int REDUCER_SHIFT = 40;

    private GeneratorJob() {}

    static Job job(Configuration conf, String name, int reduces) throws IOException {
        Job job = Job.getInstance(conf, name);
        job.setJarByClass(GeneratorJob.class);
        job.setInputFormatClass(SplitsOnly.class);
        job.setMapperClass(Generate.class);
        job.setPartitionerClass(ByReducer.class);
        job.setReducerClass(Consume.class);
        job.setMapOutputKeyClass(LongWritable.class);
        job.setMapOutputValueClass(BytesWritable.class);
        job.setOutputFormatClass(NullOutputFormat.class);
        job.setNumReduceTasks(reduces);
        return job;
    }

    /** {@code ohb.maps} splits without files, each one record: its map index. */
    public static final class SplitsOnly extends InputFormat<IntWritable, NullWritable> {
        @Override
        public List<InputSplit> getSplits(JobContext context) {
            List<InputSplit> splits = new ArrayList<>();
            for (int i = 0; i < context.getConfiguration().getInt(MAPS, 2); i++) {
                splits.add(new IndexSplit(i));
            }
            return splits;
        }

        @Override
        public RecordReader<IntWritable, NullWritable> createRecordReader(InputSplit split, TaskAttemptContext context) {
            return new RecordReader<>() {
                private boolean done;

                @Override
                public void initialize(InputSplit s, TaskAttemptContext c) {}

                @Override
                public boolean nextKeyValue() {
                    boolean first = !done;
                    done = true;
                    return first;
                }

                @Override
                public IntWritable getCurrentKey() {
                    return new IntWritable(((IndexSplit) split).index);
                }

                @Override
                public NullWritable getCurrentValue() {
                    return NullWritable.get();
                }

                @Override
                public float getProgress() {
                    return done ? 1 : 0;
                }

                @Override
                public void close() {}
            };
        }
    }

    public static final class IndexSplit extends InputSplit implements Writable {
        int index;

        public IndexSplit() {}

        IndexSplit(int index) {
            this.index = index;
        }

        @Override
        public long getLength() {
            return 0;
        }

        @Override
        public String[] getLocations() {
            return new String[0];
        }

        @Override
        public void write(DataOutput out) throws IOException {
            out.writeInt(index);
        }

        @Override
        public void readFields(DataInput in) throws IOException {
            index = in.readInt();
        }
    }

    public static final class Generate extends Mapper<IntWritable, NullWritable, LongWritable, BytesWritable> {
        @Override
        protected void map(IntWritable index, NullWritable none, Context context) throws IOException, InterruptedException {
            Configuration conf = context.getConfiguration();
            int records = conf.getInt(RECORDS, 1000);
            int valueBytes = conf.getInt(VALUE_BYTES, 100);
            String pattern = conf.get(PATTERN, "avg");
            int reduces = context.getNumReduceTasks();
            Random random = new Random(conf.getLong(SEED, 42) * 1_000_003 + index.get());
            // Values are windows of one random buffer: generating is cheap next to the shuffle.
            byte[] pool = new byte[(1 << 20) + valueBytes];
            random.nextBytes(pool);
            LongWritable key = new LongWritable();
            BytesWritable value = new BytesWritable();
            for (int i = 0; i < records; i++) {
                int reducer = switch (pattern) {
                    case "avg" -> (index.get() + i) % reduces;
                    case "rand" -> random.nextInt(reduces);
                    case "skew" -> random.nextBoolean() ? 0 : random.nextInt(reduces);
                    default -> throw new IllegalArgumentException("pattern " + pattern);
                };
                key.set(((long) reducer << REDUCER_SHIFT) | (random.nextLong() & ((1L << REDUCER_SHIFT) - 1)));
                value.set(pool, random.nextInt(1 << 20), valueBytes);
                context.write(key, value);
            }
        }
    }

    public static final class ByReducer extends Partitioner<LongWritable, BytesWritable> {
        @Override
        public int getPartition(LongWritable key, BytesWritable value, int partitions) {
            return (int) ((key.get() >>> REDUCER_SHIFT) % partitions);
        }
    }

    public static final class Consume extends Reducer<LongWritable, BytesWritable, NullWritable, NullWritable> {
        private long records;
        private long bytes;
        private long checksum;
        private final CRC32 crc = new CRC32();

        @Override
        protected void reduce(LongWritable key, Iterable<BytesWritable> values, Context context) {
            for (BytesWritable value : values) {
                records++;
                bytes += value.getLength();
                crc.reset();
                crc.update(value.getBytes(), 0, value.getLength());
                checksum += crc.getValue() ^ key.get();
            }
        }

        @Override
        protected void cleanup(Context context) {
            context.getCounter(GROUP, "RECORDS").increment(records);
            context.getCounter(GROUP, "VALUE_BYTES").increment(bytes);
            context.getCounter(GROUP, "CHECKSUM").increment(checksum);
        }
    }
}
