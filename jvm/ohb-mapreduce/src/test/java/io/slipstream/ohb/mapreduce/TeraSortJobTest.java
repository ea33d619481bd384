package io.slipstream.ohb.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The check that passes or fails {@code ohb mapreduce terasort}'s runs, on files written here (no
 * cluster): TeraValidate's checksum, and every key in order within and across parts.
 */
class TeraSortJobTest {
    private static final Configuration CONF = new Configuration();

    @TempDir
    Path dir;

    /** Records with random keys and values, sorted by key (unsigned bytes) when {@code sorted}. */
    private static byte[][] records(int count, boolean sorted, long seed) {
        Random random = new Random(seed);
        byte[][] records = new byte[count][TeraSortJob.RECORD_BYTES];
        for (byte[] record : records) {
            random.nextBytes(record);
        }
        if (sorted) {
            Arrays.sort(records, (a, b) -> Arrays.compareUnsigned(a, 0, TeraSortJob.KEY_BYTES, b, 0, TeraSortJob.KEY_BYTES));
        }
        return records;
    }

    private void write(String name, byte[][] records, int from, int to) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int i = from; i < to; i++) {
            bytes.write(records[i]);
        }
        Files.write(dir.resolve(name), bytes.toByteArray());
    }

    private static long crcSum(byte[][] records) {
        long sum = 0;
        CRC32 crc = new CRC32();
        for (byte[] record : records) {
            crc.reset();
            crc.update(record);
            sum += crc.getValue();
        }
        return sum;
    }

    private TeraSortJob.Summary summarize(boolean ordered) throws Exception {
        return TeraSortJob.summarize(CONF, new org.apache.hadoop.fs.Path(dir.toUri()), ordered);
    }

    @Test
    void sorted_parts_give_the_sum_of_every_records_crc() throws Exception {
        byte[][] records = records(3000, true, 1);
        write("part-r-00000", records, 0, 1000);
        write("part-r-00001", records, 1000, 1000); // an empty partition
        write("part-r-00002", records, 1000, 3000);
        write("_SUCCESS", records, 0, 0);
        write("_partition.lst", records, 0, 7); // not a part: not read
        TeraSortJob.Summary summary = summarize(true);
        assertEquals(3000, summary.records());
        assertEquals(crcSum(records), summary.checksum());
        assertTrue(summary.checksum() > 0xFFFF_FFFFL, "a sum, not one CRC");
    }

    @Test
    void a_key_out_of_order_within_a_part_fails() throws Exception {
        byte[][] records = records(100, true, 2);
        byte[] swap = records[40];
        records[40] = records[41];
        records[41] = swap;
        write("part-r-00000", records, 0, 100);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> summarize(true));
        assertTrue(e.getMessage().contains("out of order at record 41"), e.getMessage());
    }

    @Test
    void parts_out_of_order_with_each_other_fail_as_teravalidate_fails_them() throws Exception {
        byte[][] records = records(200, true, 3);
        // Each part sorted, but the higher keys in the first part: a partitioner's total order broken.
        write("part-r-00000", records, 100, 200);
        write("part-r-00001", records, 0, 100);
        assertThrows(IllegalStateException.class, () -> summarize(true));
    }

    @Test
    void the_input_is_not_held_to_an_order_but_gives_the_same_checksum() throws Exception {
        byte[][] records = records(500, false, 4);
        write("part-m-00000", records, 0, 250);
        write("part-m-00001", records, 250, 500);
        TeraSortJob.Summary input = summarize(false);
        assertEquals(500, input.records());
        assertEquals(crcSum(records), input.checksum(), "the sum does not depend on the records' order");
        assertThrows(IllegalStateException.class, () -> summarize(true));
    }

    @Test
    void a_part_of_partial_records_fails() throws Exception {
        byte[][] records = records(10, true, 5);
        write("part-r-00000", records, 0, 10);
        Files.write(dir.resolve("part-r-00001"), new byte[TeraSortJob.RECORD_BYTES - 1]);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> summarize(true));
        assertTrue(e.getMessage().contains("not whole records"), e.getMessage());
    }
}
