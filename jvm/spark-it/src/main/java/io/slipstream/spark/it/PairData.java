package io.slipstream.spark.it;

import java.io.Serializable;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * A deterministic data set of (key, value) records, made by map tasks: map m makes records m * recordsPerMap to
 * (m + 1) * recordsPerMap - 1, unless it is one of the maps told to make nothing. Spark generates it inside the map
 * tasks (the driver never holds it); the tests' reference computations walk the same records without Spark.
 */
public final class PairData implements Serializable {

    private static final long serialVersionUID = 1L;

    /** How keys are drawn. */
    public enum Keys {
        /** Uniform over 0 to keyCount - 1. */
        UNIFORM,
        /** Distinct pseudo-random keys (for sorts, where ties would have no defined order). */
        UNIQUE,
        /** 80 % on key 0, the rest uniform over 1 to keyCount - 1. */
        SKEWED,
        /** The record's index: key i for record i. */
        INDEX
    }

    final long seed;
    final int maps;
    final int recordsPerMap;
    final Keys keys;
    final int keyCount;
    final int valueBytes;
    /** Only maps whose index is a multiple of this make records (1: all of them; 0: none). */
    final int producingMapStride;

    public PairData(long seed, int maps, int recordsPerMap, Keys keys, int keyCount, int valueBytes,
            int producingMapStride) {
        this.seed = seed;
        this.maps = maps;
        this.recordsPerMap = recordsPerMap;
        this.keys = keys;
        this.keyCount = keyCount;
        this.valueBytes = valueBytes;
        this.producingMapStride = producingMapStride;
    }

    public static PairData uniform(long seed, int maps, int recordsPerMap, int keyCount, int valueBytes) {
        return new PairData(seed, maps, recordsPerMap, Keys.UNIFORM, keyCount, valueBytes, 1);
    }

    public boolean produces(int map) {
        return producingMapStride > 0 && map % producingMapStride == 0;
    }

    public long key(long index) {
        return switch (keys) {
            case UNIFORM -> Records.key(seed, index, keyCount);
            case UNIQUE -> Records.uniqueKey(seed, index);
            // 80 %: the bulk of the data on one reducer, as in a real skew (a null or default key).
            case SKEWED -> Records.skewedKey(seed, index, keyCount, 80);
            case INDEX -> index;
        };
    }

    public byte[] value(long index) {
        return Records.value(seed, index, valueBytes);
    }

    /** Calls {@code consumer} for every record, in index order: what the map tasks make, without Spark. */
    public void forEach(RecordConsumer consumer) {
        for (int map = 0; map < maps; map++) {
            if (produces(map)) {
                for (long index = (long) map * recordsPerMap; index < (long) (map + 1) * recordsPerMap; index++) {
                    consumer.accept(key(index), value(index));
                }
            }
        }
    }

    /** One record. */
    @FunctionalInterface
    public interface RecordConsumer {
        void accept(long key, byte[] value);
    }

    /** The records as an RDD: one partition per map, each generated lazily inside its task. */
    public JavaPairRDD<Long, byte[]> generate(JavaSparkContext sc) {
        return sc.parallelize(Scenario.range(maps), maps).flatMapToPair(this::recordsOf);
    }

    private Iterator<Tuple2<Long, byte[]>> recordsOf(int map) {
        long first = (long) map * recordsPerMap;
        long end = produces(map) ? first + recordsPerMap : first;
        return new Iterator<>() {
            private long next = first;

            @Override
            public boolean hasNext() {
                return next < end;
            }

            @Override
            public Tuple2<Long, byte[]> next() {
                if (next >= end) {
                    throw new NoSuchElementException();
                }
                long index = next++;
                return new Tuple2<>(key(index), value(index));
            }
        };
    }

    /** Each record's hash of (key, value): what the scenarios that move every record digest, unordered. */
    static Iterator<Long> recordHashes(Iterator<Tuple2<Long, byte[]>> records) {
        return new Iterator<>() {
            @Override
            public boolean hasNext() {
                return records.hasNext();
            }

            @Override
            public Long next() {
                Tuple2<Long, byte[]> record = records.next();
                return Records.hash(record._1, Records.hash(record._2));
            }
        };
    }

    /** The unordered digest of every record's {@link #recordHashes hash}, computed here without Spark. */
    Outcome unorderedReference() {
        Outcome[] outcome = {Outcome.EMPTY};
        forEach((key, value) -> outcome[0] = outcome[0].plusUnordered(Records.hash(key, Records.hash(value))));
        return outcome[0];
    }
}
