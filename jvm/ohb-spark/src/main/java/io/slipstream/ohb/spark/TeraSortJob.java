package io.slipstream.ohb.spark;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.storage.StorageLevel;

import scala.Tuple2;

/**
 * HiBD's Spark TeraSort: records of a {@link #KEY_BYTES}-byte random binary key (as TeraGen makes them) and a
 * value of value-bytes random bytes, generated and cached, then {@code sortByKey} in unsigned byte order (its
 * range partitioner's sampling job included), as Hadoop's TeraSort orders them. The checksum covers the keys in
 * their sorted order and every (key, value) pair, so it does not depend on where the range partitioner cut;
 * {@code ordered} says that no key is smaller than its predecessor, within or across partitions.
 */
final class TeraSortJob implements ShuffleBench.Workload {
    static final int KEY_BYTES = 10;

    /** Unsigned lexicographic order of keys, as TeraSort's. */
    static final class KeyOrder implements Comparator<byte[]>, Serializable {
        private static final long serialVersionUID = 1L;

        @Override
        public int compare(byte[] a, byte[] b) {
            return Arrays.compareUnsigned(a, b);
        }
    }

    private final BenchParams p;
    private final JavaPairRDD<byte[], byte[]> input;

    TeraSortJob(JavaSparkContext sc, BenchParams p) {
        this.p = p;
        List<Integer> mapperIds = IntStream.range(0, p.mappers).boxed().toList();
        int perMapper = p.pairsPerMapper;
        int valueBytes = p.valueBytes;
        long seed = p.seed;
        input = sc.parallelize(mapperIds, p.mappers)
                .flatMapToPair(m -> records(m, perMapper, valueBytes, seed))
                .persist(StorageLevel.MEMORY_ONLY());
    }

    static Iterator<Tuple2<byte[], byte[]>> records(int mapper, int perMapper, int valueBytes, long seed) {
        SplittableRandom random = new SplittableRandom(PairGenerator.mapperSeed(seed, mapper));
        return new Iterator<>() {
            private int made;

            @Override
            public boolean hasNext() {
                return made < perMapper;
            }

            @Override
            public Tuple2<byte[], byte[]> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                made++;
                byte[] key = new byte[KEY_BYTES];
                byte[] value = new byte[valueBytes];
                PairGenerator.fill(random, key);
                PairGenerator.fill(random, value);
                return new Tuple2<>(key, value);
            }
        };
    }

    @Override
    public long prepare() {
        return input.count();
    }

    @Override
    public int cachedRddId() {
        return input.id();
    }

    @Override
    public ShuffleBench.Outcome measure() {
        List<long[]> parts = input.sortByKey(new KeyOrder(), true, p.reducers).mapPartitions(TeraSortJob::summary).collect();
        long[] t = totals(parts);
        return new ShuffleBench.Outcome(t[0], t[2], t[3] == 0,
                json -> json.field("inversions", t[3]).field("value_bytes_total", t[1]));
    }

    // Per partition: {records, value bytes, sum of record hashes, rolling hash of the keys in order,
    // inversions, first key (hi 8 bytes, lo 2 bytes), last key (the same)}.
    static final int FIELDS = 9;

    static Iterator<long[]> summary(Iterator<Tuple2<byte[], byte[]>> records) {
        long[] s = new long[FIELDS];
        byte[] previous = null;
        while (records.hasNext()) {
            Tuple2<byte[], byte[]> r = records.next();
            byte[] key = r._1();
            if (previous == null) {
                s[5] = hi(key);
                s[6] = lo(key);
            } else if (Arrays.compareUnsigned(key, previous) < 0) {
                s[4]++;
            }
            previous = key;
            long keyHash = Checksums.mix64(hi(key) ^ Checksums.mix64(lo(key)));
            s[0]++;
            s[1] += r._2().length;
            s[2] += Checksums.mix64(keyHash ^ Checksums.valueHash(r._2()));
            s[3] = s[3] * Checksums.ROLL + keyHash;
        }
        if (previous != null) {
            s[7] = hi(previous);
            s[8] = lo(previous);
        }
        return List.of(s).iterator();
    }

    /** {records, value bytes, checksum, inversions (also across partition boundaries)}. */
    static long[] totals(List<long[]> parts) {
        long records = 0;
        long bytes = 0;
        long recordSum = 0;
        long keyRoll = 0;
        long inversions = 0;
        long[] last = null;
        for (long[] s : parts) {
            records += s[0];
            bytes += s[1];
            recordSum += s[2];
            keyRoll = keyRoll * Checksums.rollPower(s[0]) + s[3];
            inversions += s[4];
            if (s[0] > 0) {
                if (last != null && (Long.compareUnsigned(s[5], last[0]) < 0 || s[5] == last[0] && s[6] < last[1])) {
                    inversions++;
                }
                last = new long[] {s[7], s[8]};
            }
        }
        long checksum = Checksums.mix64(Checksums.mix64(Checksums.mix64(keyRoll) ^ records) ^ bytes) ^ recordSum;
        return new long[] {records, bytes, checksum, inversions};
    }

    static long hi(byte[] key) {
        return ByteBuffer.wrap(key, 0, 8).getLong();
    }

    static long lo(byte[] key) {
        return ((key[8] & 0xffL) << 8) | (key[9] & 0xffL);
    }
}
