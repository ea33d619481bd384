package io.slipstream.spark.it;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The shuffles of the RDD API: each of Spark's three shuffle writers (bypass-merge for few reducers without map-side
 * combine, sort with map-side combine, serialized for more than 200 reducers), skew, empty blocks, and one record
 * larger than 64 MB.
 */
final class RddScenarios {

    /** 8 maps on 2 one-core executors: each executor writes map outputs the other one must fetch. */
    static final int MAPS = 8;
    static final int LARGE_VALUE_BYTES = 70 << 20;

    private RddScenarios() {
    }

    static List<Scenario> all() {
        return List.of(
                new GroupByKey("groupByKey", PairData.uniform(1, MAPS, 25_000, 10_000, 100), 16),
                new ReduceByKey(),
                new SortByKey(),
                new Join(),
                new Repartition(),
                // 80 % of the records on key 0: one reducer gets most of the shuffle.
                new GroupByKey("skewedKeys", new PairData(5, MAPS, 25_000, PairData.Keys.SKEWED, 1_000, 100, 1), 8),
                // 5 keys for 32 reducers, and 12 of 16 maps write nothing: empty blocks and empty map outputs.
                new GroupByKey("emptyPartitions",
                        new PairData(6, 16, 1_000, PairData.Keys.UNIFORM, 5, 100, 5), 32),
                new GroupByKey("emptyMapOutputs", new PairData(7, MAPS, 1_000, PairData.Keys.UNIFORM, 5, 100, 0), 8),
                // Two maps of two 70 MB records each, keys 0 to 3 for 2 reducers: every reducer gets one record from
                // each map, so reduce-side locality cannot keep them all local (one map per executor).
                new GroupByKey("largeRecord", new PairData(8, 2, 2, PairData.Keys.INDEX, 0, LARGE_VALUE_BYTES, 1), 2));
    }

    /** A group's hash: its key, its size and the (order-free) sum of its values' hashes. */
    static long groupHash(long key, Iterable<byte[]> values) {
        long count = 0;
        long valueHashSum = 0;
        for (byte[] value : values) {
            valueHashSum += Records.hash(value);
            count++;
        }
        return Records.hash(key, count, valueHashSum);
    }

    /** groupByKey: every value of a key in one place (no map-side combine). */
    static final class GroupByKey extends Scenario {
        private final PairData data;
        private final int reducers;

        GroupByKey(String name, PairData data, int reducers) {
            super(name);
            this.data = data;
            this.reducers = reducers;
        }

        @Override
        public Outcome run(SparkSession spark) {
            JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            JavaPairRDD<Long, Iterable<byte[]>> groups = data.generate(sc).groupByKey(reducers);
            return unorderedCheckedPartitions(groups.map(group -> groupHash(group._1, group._2)), reducers);
        }

        @Override
        public Outcome reference() {
            Map<Long, long[]> groups = new HashMap<>();
            data.forEach((key, value) -> {
                long[] group = groups.computeIfAbsent(key, k -> new long[2]);
                group[0]++;
                group[1] += Records.hash(value);
            });
            Outcome outcome = Outcome.EMPTY;
            for (Map.Entry<Long, long[]> group : groups.entrySet()) {
                outcome = outcome.plusUnordered(Records.hash(group.getKey(), group.getValue()[0], group.getValue()[1]));
            }
            return outcome;
        }
    }

    /** reduceByKey: map-side combine, then the partial sums shuffled (Spark's sort-based writer). */
    static final class ReduceByKey extends Scenario {
        private final PairData data = PairData.uniform(2, MAPS, 25_000, 10_000, 100);

        ReduceByKey() {
            super("reduceByKey");
        }

        @Override
        public Outcome run(SparkSession spark) {
            JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            JavaPairRDD<Long, Long> sums = data.generate(sc).mapValues(Records::hash).reduceByKey(Long::sum, 16);
            return unorderedCheckedPartitions(sums.map(sum -> Records.hash(sum._1, sum._2)), 16);
        }

        @Override
        public Outcome reference() {
            Map<Long, Long> sums = new HashMap<>();
            data.forEach((key, value) -> sums.merge(key, Records.hash(value), Long::sum));
            Outcome outcome = Outcome.EMPTY;
            for (Map.Entry<Long, Long> sum : sums.entrySet()) {
                outcome = outcome.plusUnordered(Records.hash(sum.getKey(), sum.getValue()));
            }
            return outcome;
        }
    }

    /** sortByKey: a range-partitioned shuffle whose order is checked record by record. */
    static final class SortByKey extends Scenario {
        private static final int REDUCERS = 12;
        private final PairData data = new PairData(3, MAPS, 20_000, PairData.Keys.UNIQUE, 0, 50, 1);

        SortByKey() {
            super("sortByKey");
        }

        @Override
        public Outcome run(SparkSession spark) {
            JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            JavaPairRDD<Long, byte[]> sorted = data.generate(sc).sortByKey(true, REDUCERS);
            // Per partition: count, ordered digest, first and last key, and whether it was in order.
            List<long[]> partitions = sorted.mapPartitions((Iterator<Tuple2<Long, byte[]>> records) -> {
                Outcome outcome = Outcome.EMPTY;
                long first = 0;
                long last = 0;
                boolean ordered = true;
                while (records.hasNext()) {
                    Tuple2<Long, byte[]> record = records.next();
                    if (outcome.count == 0) {
                        first = record._1;
                    } else if (record._1 <= last) {
                        ordered = false;
                    }
                    last = record._1;
                    outcome = outcome.plusOrdered(Records.hash(record._1, Records.hash(record._2)));
                }
                return List.of(new long[] {outcome.count, outcome.digest, first, last, ordered ? 1 : 0}).iterator();
            }).collect();
            Outcome outcome = Outcome.EMPTY;
            Long previousLast = null;
            for (int p = 0; p < partitions.size(); p++) {
                long[] partition = partitions.get(p);
                if (partition[4] != 1) {
                    throw new IllegalStateException("sortByKey: partition " + p + " is not in key order");
                }
                if (partition[0] > 0) {
                    if (previousLast != null && partition[2] <= previousLast) {
                        throw new IllegalStateException("sortByKey: partition " + p + " starts below its predecessor");
                    }
                    previousLast = partition[3];
                }
                outcome = outcome.concatOrdered(new Outcome(partition[0], partition[1]));
            }
            return outcome;
        }

        @Override
        public Outcome reference() {
            List<long[]> records = new ArrayList<>();
            data.forEach((key, value) -> records.add(new long[] {key, Records.hash(value)}));
            records.sort((a, b) -> Long.compare(a[0], b[0]));
            Outcome outcome = Outcome.EMPTY;
            for (long[] record : records) {
                outcome = outcome.plusOrdered(Records.hash(record[0], record[1]));
            }
            return outcome;
        }
    }

    /** join: two shuffles (one per side) read together; keys with 4 x 2 matches and keys with none. */
    static final class Join extends Scenario {
        // Left: keys 0..19999, 4 records each. Right: keys 0, 3, 6, ..., 29997, 2 records each.
        private final PairData left = PairData.uniform(4, MAPS, 10_000, 1, 40);
        private final PairData right = PairData.uniform(40, 4, 5_000, 1, 60);

        Join() {
            super("join");
        }

        private static long leftKey(long index) {
            return index % 20_000;
        }

        private static long rightKey(long index) {
            return index * 3 % 30_000;
        }

        @Override
        public Outcome run(SparkSession spark) {
            JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            JavaPairRDD<Long, byte[]> leftRecords =
                    keyedByIndex(sc, left).mapToPair(r -> new Tuple2<>(leftKey(r._1), r._2));
            JavaPairRDD<Long, byte[]> rightRecords =
                    keyedByIndex(sc, right).mapToPair(r -> new Tuple2<>(rightKey(r._1), r._2));
            JavaRDD<Long> joined = leftRecords.join(rightRecords, 10)
                    .map(r -> Records.hash(r._1, Records.hash(r._2._1), Records.hash(r._2._2)));
            return unorderedCheckedPartitions(joined, 10);
        }

        /** The records keyed by their index (the join keys are derived from it). */
        private static JavaPairRDD<Long, byte[]> keyedByIndex(JavaSparkContext sc, PairData data) {
            return sc.parallelize(Scenario.range(data.maps), data.maps).flatMapToPair(map -> {
                List<Tuple2<Long, byte[]>> records = new ArrayList<>(data.recordsPerMap);
                for (long index = (long) map * data.recordsPerMap; index < (long) (map + 1) * data.recordsPerMap;
                        index++) {
                    records.add(new Tuple2<>(index, data.value(index)));
                }
                return records.iterator();
            });
        }

        @Override
        public Outcome reference() {
            Map<Long, List<Long>> rightHashes = new HashMap<>();
            for (long index = 0; index < (long) right.maps * right.recordsPerMap; index++) {
                rightHashes.computeIfAbsent(rightKey(index), k -> new ArrayList<>())
                        .add(Records.hash(right.value(index)));
            }
            Outcome outcome = Outcome.EMPTY;
            for (long index = 0; index < (long) left.maps * left.recordsPerMap; index++) {
                long key = leftKey(index);
                long leftHash = Records.hash(left.value(index));
                for (long rightHash : rightHashes.getOrDefault(key, List.of())) {
                    outcome = outcome.plusUnordered(Records.hash(key, leftHash, rightHash));
                }
            }
            return outcome;
        }
    }

    /** repartition to 250: more than 200 reducers, so Spark takes its serialized (unsafe) writer. */
    static final class Repartition extends Scenario {
        private static final int REDUCERS = 250;
        private final PairData data = PairData.uniform(9, MAPS, 20_000, 1, 64);

        Repartition() {
            super("repartition");
        }

        @Override
        public Outcome run(SparkSession spark) {
            JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            JavaRDD<byte[]> values = data.generate(sc).values().repartition(REDUCERS);
            return unorderedCheckedPartitions(values.map(Records::hash), REDUCERS);
        }

        @Override
        public Outcome reference() {
            Outcome[] outcome = {Outcome.EMPTY};
            data.forEach((key, value) -> outcome[0] = outcome[0].plusUnordered(Records.hash(value)));
            return outcome[0];
        }
    }

    /** The unordered digest, after checking that the shuffle kept the number of reduce partitions asked for. */
    static Outcome unorderedCheckedPartitions(JavaRDD<Long> recordHashes, int reducers) {
        if (recordHashes.getNumPartitions() != reducers) {
            throw new IllegalStateException(
                    "expected " + reducers + " reduce partitions, the RDD has " + recordHashes.getNumPartitions());
        }
        return Scenario.unorderedDigest(recordHashes);
    }
}
