package io.slipstream.ohb.spark;

import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;

import org.apache.spark.api.java.function.PairFlatMapFunction;

import scala.Tuple2;

/**
 * The map side's input, generated inside the map tasks as in Spark's GroupByTest: mapper {@code m} makes
 * {@code pairs} pairs of a random non-negative int key and {@code valueBytes} random bytes, from a seed of
 * its own derived from the run's seed, so every run and every configuration sees the same data.
 */
final class PairGenerator implements PairFlatMapFunction<Integer, Integer, byte[]> {
    private static final long serialVersionUID = 1L;

    private final int pairs;
    private final int valueBytes;
    private final long seed;

    PairGenerator(int pairs, int valueBytes, long seed) {
        if (pairs < 0 || valueBytes < 0) {
            throw new IllegalArgumentException("pairs " + pairs + ", value bytes " + valueBytes);
        }
        this.pairs = pairs;
        this.valueBytes = valueBytes;
        this.seed = seed;
    }

    static long mapperSeed(long seed, int mapper) {
        return Checksums.mix64(seed + 0x9E3779B97F4A7C15L * (mapper + 1L));
    }

    @Override
    public Iterator<Tuple2<Integer, byte[]>> call(Integer mapper) {
        SplittableRandom random = new SplittableRandom(mapperSeed(seed, mapper));
        return new Iterator<>() {
            private int made;

            @Override
            public boolean hasNext() {
                return made < pairs;
            }

            @Override
            public Tuple2<Integer, byte[]> next() {
                if (made >= pairs) {
                    throw new NoSuchElementException();
                }
                made++;
                int key = random.nextInt(Integer.MAX_VALUE);
                byte[] value = new byte[valueBytes];
                fill(random, value);
                return new Tuple2<>(key, value);
            }
        };
    }

    /** Random bytes, eight per draw. */
    static void fill(SplittableRandom random, byte[] value) {
        int i = 0;
        while (i < value.length) {
            long word = random.nextLong();
            for (int b = 0; b < Long.BYTES && i < value.length; b++, i++) {
                value[i] = (byte) word;
                word >>>= 8;
            }
        }
    }
}
