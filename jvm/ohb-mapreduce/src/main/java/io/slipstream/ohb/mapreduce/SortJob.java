package io.slipstream.ohb.mapreduce;

import java.io.IOException;
import java.util.Arrays;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.examples.RandomWriter;
import org.apache.hadoop.examples.Sort;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.SequenceFile;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.util.ToolRunner;

/**
 * {@code ohb mapreduce sort}: Hadoop's own Sort example on RandomWriter's output, as Hadoop's and
 * OHB's Sort benchmark runs it. RandomWriter writes the input once ({@code maps} files of random
 * keys of 10 bytes and values of {@code value-bytes}); each configuration sorts it with
 * {@code reduces} reducers, and its output is read back: every part file must be in key order, and
 * a CRC over every record in order (the configurations must agree) is the checksum.
 */
final class SortJob {
    private static final int KEY_BYTES = 10;

    private SortJob() {}

    /** Writes the input with RandomWriter: {@code maps} files of about records x (10 + valueBytes) bytes. */
    static void generate(Configuration base, Path input, int maps, long records, int valueBytes) throws Exception {
        Configuration conf = new Configuration(base);
        long bytesPerMap = records * (KEY_BYTES + valueBytes);
        conf.setLong(RandomWriter.BYTES_PER_MAP, bytesPerMap);
        conf.setLong(RandomWriter.TOTAL_BYTES, bytesPerMap * maps);
        conf.setInt(RandomWriter.MIN_KEY, KEY_BYTES);
        conf.setInt(RandomWriter.MAX_KEY, KEY_BYTES);
        conf.setInt(RandomWriter.MIN_VALUE, valueBytes);
        conf.setInt(RandomWriter.MAX_VALUE, valueBytes);
        FileSystem.get(conf).delete(input, true);
        if (ToolRunner.run(conf, new RandomWriter(), new String[] {input.toString()}) != 0) {
            throw new IllegalStateException("RandomWriter failed");
        }
    }

    /** Runs Sort from {@code input} to {@code output}; the finished job, or null when it failed. */
    static Job sort(Configuration conf, Path input, Path output, int reduces) throws Exception {
        FileSystem.get(conf).delete(output, true);
        Sort<BytesWritable, BytesWritable> sort = new Sort<>();
        int status = ToolRunner.run(conf, sort, new String[] {"-r", Integer.toString(reduces), input.toString(), output.toString()});
        return status == 0 ? sort.getResult() : null;
    }

    /** What the output holds: records, and a CRC of every record in file and key order. */
    record Summary(long records, long checksum) {}

    /**
     * Reads Sort's output: each part file's keys must be in order (Sort's contract), and the
     * records of all parts in part order give the checksum.
     *
     * @throws IllegalStateException a part file out of order
     */
    static Summary summarize(Configuration conf, Path output) throws IOException {
        FileSystem fs = output.getFileSystem(conf);
        FileStatus[] parts = fs.listStatus(output, p -> p.getName().startsWith("part-"));
        Arrays.sort(parts);
        CRC32 crc = new CRC32();
        long records = 0;
        BytesWritable key = new BytesWritable();
        BytesWritable value = new BytesWritable();
        for (FileStatus part : parts) {
            BytesWritable previous = new BytesWritable();
            boolean first = true;
            try (SequenceFile.Reader reader = new SequenceFile.Reader(conf, SequenceFile.Reader.file(part.getPath()))) {
                while (reader.next(key, value)) {
                    if (!first && previous.compareTo(key) > 0) {
                        throw new IllegalStateException(part.getPath() + " is out of order at record " + records);
                    }
                    previous.set(key);
                    first = false;
                    crc.update(key.getBytes(), 0, key.getLength());
                    crc.update(value.getBytes(), 0, value.getLength());
                    records++;
                }
            }
        }
        return new Summary(records, crc.getValue());
    }
}
