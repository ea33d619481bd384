package io.slipstream.ohb.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Iterator;
import java.util.List;

import scala.Tuple2;

/**
 * The checksums of the measured jobs: every reduce partition summarises what it received in one
 * {@code long[]}, the driver combines the summaries. Equal data gives equal checksums whatever the
 * shuffle implementation; the order of values within a group, and of equal keys after a sort, is not
 * part of them (Spark does not define it).
 *
 * <p>Costs one pass over the bytes of each value (eight bytes per step), in every configuration alike.
 */
final class Checksums {
    private Checksums() {
    }

    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    /** An odd multiplier (2^64 / golden ratio) for the order-sensitive rolling hash of sorted keys. */
    static final long ROLL = 0x9E3779B97F4A7C15L;

    /** SplitMix64's finaliser: a bijection on 64 bits that spreads every input bit. */
    static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** A hash of every byte of {@code value} and of its length. */
    static long valueHash(byte[] value) {
        long h = mix64(value.length);
        int i = 0;
        for (; i + Long.BYTES <= value.length; i += Long.BYTES) {
            h = (h ^ (long) LONGS.get(value, i)) * 0x100000001B3L;
        }
        long tail = 0;
        for (int shift = 0; i < value.length; i++, shift += 8) {
            tail |= (value[i] & 0xFFL) << shift;
        }
        return mix64(h ^ tail);
    }

    /** One record as received by reduce partition {@code partition}: a record in the wrong partition counts differently. */
    static long recordHash(int partition, int key, byte[] value) {
        return mix64((((long) partition << 32) | (key & 0xFFFFFFFFL)) + 0x632BE59BD9B4E019L * valueHash(value));
    }

    // -------------------------------------------------------------------------------------------
    // groupByKey: per partition {groups, records, value bytes, sum of record hashes, sum of group hashes}.

    static final int G_GROUPS = 0;
    static final int G_RECORDS = 1;
    static final int G_BYTES = 2;
    static final int G_RECORD_SUM = 3;
    static final int G_GROUP_SUM = 4;
    static final int G_FIELDS = 5;

    static long[] groupPartition(int partition, Iterator<Tuple2<Integer, Iterable<byte[]>>> groups) {
        long[] s = new long[G_FIELDS];
        while (groups.hasNext()) {
            Tuple2<Integer, Iterable<byte[]>> group = groups.next();
            int key = group._1();
            long valuesInGroup = 0;
            for (byte[] value : group._2()) {
                valuesInGroup++;
                s[G_BYTES] += value.length;
                s[G_RECORD_SUM] += recordHash(partition, key, value);
            }
            s[G_GROUPS]++;
            s[G_RECORDS] += valuesInGroup;
            // A key split over two groups (or partitions) changes this sum.
            s[G_GROUP_SUM] += mix64(((long) key << 20) ^ valuesInGroup ^ ((long) partition << 52));
        }
        return s;
    }

    /** Totals over partitions (sums are order-independent); the checksum folds them into one value. */
    static GroupTotals groupTotals(List<long[]> partitions) {
        long groups = 0;
        long records = 0;
        long bytes = 0;
        long recordSum = 0;
        long groupSum = 0;
        for (long[] s : partitions) {
            if (s.length != G_FIELDS) {
                throw new IllegalStateException("a group summary has " + s.length + " fields, not " + G_FIELDS);
            }
            groups += s[G_GROUPS];
            records += s[G_RECORDS];
            bytes += s[G_BYTES];
            recordSum += s[G_RECORD_SUM];
            groupSum += s[G_GROUP_SUM];
        }
        long checksum = mix64(mix64(mix64(mix64(groups) ^ records) ^ bytes) ^ recordSum) ^ groupSum;
        return new GroupTotals(groups, records, bytes, checksum);
    }

    record GroupTotals(long groups, long records, long valueBytes, long checksum) {
    }

    // -------------------------------------------------------------------------------------------
    // sortByKey: per partition {records, value bytes, sum of record hashes, rolling hash of the keys in
    // order, first key, last key, keys smaller than their predecessor}.

    static final int S_RECORDS = 0;
    static final int S_BYTES = 1;
    static final int S_RECORD_SUM = 2;
    static final int S_KEY_ROLL = 3;
    static final int S_FIRST = 4;
    static final int S_LAST = 5;
    static final int S_INVERSIONS = 6;
    static final int S_FIELDS = 7;

    static long[] sortPartition(Iterator<Tuple2<Integer, byte[]>> records) {
        long[] s = new long[S_FIELDS];
        long previous = Long.MIN_VALUE;
        while (records.hasNext()) {
            Tuple2<Integer, byte[]> record = records.next();
            int key = record._1();
            byte[] value = record._2();
            if (s[S_RECORDS] == 0) {
                s[S_FIRST] = key;
            } else if (key < previous) {
                s[S_INVERSIONS]++;
            }
            previous = key;
            s[S_RECORDS]++;
            s[S_BYTES] += value.length;
            // Partition 0: the record hash of a sort does not depend on where the range partitioner put it.
            s[S_RECORD_SUM] += recordHash(0, key, value);
            s[S_KEY_ROLL] = s[S_KEY_ROLL] * ROLL + mix64(key);
        }
        s[S_LAST] = previous;
        return s;
    }

    /** ROLL^n mod 2^64. */
    static long rollPower(long n) {
        long result = 1;
        long base = ROLL;
        while (n > 0) {
            if ((n & 1) != 0) {
                result *= base;
            }
            base *= base;
            n >>>= 1;
        }
        return result;
    }

    /**
     * Totals over partitions in partition order. The rolling hash composes (H(a ++ b) = H(a) * ROLL^|b| + H(b)),
     * so the checksum is that of the whole sorted key sequence, independent of the partition boundaries.
     */
    static SortTotals sortTotals(List<long[]> partitions) {
        long records = 0;
        long bytes = 0;
        long recordSum = 0;
        long keyRoll = 0;
        long inversions = 0;
        boolean havePrevious = false;
        long previousLast = 0;
        for (long[] s : partitions) {
            if (s.length != S_FIELDS) {
                throw new IllegalStateException("a sort summary has " + s.length + " fields, not " + S_FIELDS);
            }
            records += s[S_RECORDS];
            bytes += s[S_BYTES];
            recordSum += s[S_RECORD_SUM];
            keyRoll = keyRoll * rollPower(s[S_RECORDS]) + s[S_KEY_ROLL];
            inversions += s[S_INVERSIONS];
            if (s[S_RECORDS] > 0) {
                if (havePrevious && s[S_FIRST] < previousLast) {
                    inversions++;
                }
                havePrevious = true;
                previousLast = s[S_LAST];
            }
        }
        long checksum = mix64(mix64(mix64(keyRoll) ^ records) ^ bytes) ^ recordSum;
        return new SortTotals(records, bytes, inversions, checksum);
    }

    /** {@code inversions}: adjacent records (within or across partitions) out of order; 0 when sorted. */
    record SortTotals(long records, long valueBytes, long inversions, long checksum) {
    }

    static String hex(long checksum) {
        return String.format("%016x", checksum);
    }
}
