package io.slipstream.ohb.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.length;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.pmod;
import static org.apache.spark.sql.functions.sum;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.StorageLevel;

/**
 * A Spark SQL query set with shuffle joins and aggregations (HiBD's Spark SQL workloads) on generated
 * tables: {@code facts} (mappers x pairs rows: id, key, amount, a payload of value-bytes random bytes) and
 * {@code dims} (one row per key: key, group). Broadcast joins and adaptive execution are off, so that every
 * query shuffles as planned ({@code spark.sql.shuffle.partitions} = reducers) and the result does not depend
 * on run-time statistics.
 * <ol>
 *   <li>facts JOIN dims ON key, GROUP BY group: count, sum(amount), sum(length(payload)); the join
 *       shuffles both tables, payloads included (the bulk of the bytes).</li>
 *   <li>facts GROUP BY key: sum(amount), max(id); then GROUP BY that sum mod 1000: count (two aggregations).</li>
 * </ol>
 * The checksum hashes the collected rows of both queries in sorted order; records = the rows the join matched
 * (every fact's key is in dims: mappers x pairs).
 */
final class SqlJob implements ShuffleBench.Workload {
    static final int ROWS_PER_KEY = 16;
    static final int GROUPS = 97;

    private final SparkSession spark;
    private final Dataset<Row> facts;
    private final Dataset<Row> dims;

    SqlJob(JavaSparkContext sc, BenchParams p) {
        spark = SparkSession.builder().sparkContext(sc.sc()).getOrCreate();
        spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "-1");
        spark.conf().set("spark.sql.adaptive.enabled", "false");
        spark.conf().set("spark.sql.shuffle.partitions", Integer.toString(p.reducers));
        long keys = Math.max(1, p.records() / ROWS_PER_KEY);
        StructType factSchema = new StructType()
                .add("id", DataTypes.LongType, false)
                .add("k", DataTypes.LongType, false)
                .add("amount", DataTypes.LongType, false)
                .add("payload", DataTypes.BinaryType, false);
        List<Integer> mapperIds = IntStream.range(0, p.mappers).boxed().toList();
        int perMapper = p.pairsPerMapper;
        int valueBytes = p.valueBytes;
        long seed = p.seed;
        JavaRDD<Row> rows = sc.parallelize(mapperIds, p.mappers).flatMap(m -> factsOf(m, perMapper, valueBytes, keys, seed));
        facts = spark.createDataFrame(rows, factSchema).persist(StorageLevel.MEMORY_ONLY());
        dims = spark.range(0, keys, 1, p.mappers).select(col("id").as("k"), pmod(col("id"), org.apache.spark.sql.functions.lit(GROUPS)).as("grp"))
                .persist(StorageLevel.MEMORY_ONLY());
    }

    /**
     * The checksum of both queries' rows, in their order: (group, count, sum of amounts, payload bytes)
     * and (bucket, keys).
     */
    static long checksum(List<long[]> joined, List<long[]> buckets) {
        long checksum = 0;
        for (long[] r : joined) {
            checksum = Checksums.mix64(checksum ^ Checksums.mix64(r[0] * 31 + r[1]) ^ Checksums.mix64(r[2]) ^ r[3]);
        }
        for (long[] r : buckets) {
            checksum = Checksums.mix64(checksum ^ Checksums.mix64(r[0]) ^ r[1]);
        }
        return checksum;
    }

    static Iterator<Row> factsOf(int mapper, int perMapper, int valueBytes, long keys, long seed) {
        SplittableRandom random = new SplittableRandom(PairGenerator.mapperSeed(seed, mapper));
        long first = (long) mapper * perMapper;
        return new Iterator<>() {
            private long id = first;

            @Override
            public boolean hasNext() {
                return id < first + perMapper;
            }

            @Override
            public Row next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                byte[] payload = new byte[valueBytes];
                PairGenerator.fill(random, payload);
                return RowFactory.create(id++, random.nextLong(keys), random.nextLong(1000), payload);
            }
        };
    }

    @Override
    public long prepare() {
        dims.count();
        return facts.count();
    }

    @Override
    public int cachedRddId() {
        return -1;
    }

    @Override
    public ShuffleBench.Outcome measure() {
        List<Row> joined = facts.join(dims, "k").groupBy("grp")
                .agg(count("*").as("n"), sum("amount").as("amount"), sum(length(col("payload"))).as("bytes"))
                .orderBy("grp").collectAsList();
        List<Row> sums = facts.groupBy("k").agg(sum("amount").as("s"), max("id").as("last"))
                .groupBy(pmod(col("s"), org.apache.spark.sql.functions.lit(1000)).as("bucket")).agg(count("*").as("keys"))
                .orderBy("bucket").collectAsList();
        long matched = 0;
        for (Row r : joined) {
            matched += r.getLong(1);
        }
        long checksum = checksum(joined.stream().map(r -> new long[] {r.getLong(0), r.getLong(1), r.getLong(2), r.getLong(3)}).toList(),
                sums.stream().map(r -> new long[] {r.getLong(0), r.getLong(1)}).toList());
        return new ShuffleBench.Outcome(matched, checksum, true);
    }
}
