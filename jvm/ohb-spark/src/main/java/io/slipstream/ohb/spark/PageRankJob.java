package io.slipstream.ohb.spark;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.storage.StorageLevel;

import scala.Tuple2;

/**
 * HiBD's PageRank workload (after Spark's {@code SparkPageRank} example) on a generated graph: {@code pages}
 * (= mappers x pairs) pages, each linking to its successor and to {@link #RANDOM_LINKS} random pages, so every
 * page has an in-link and keeps a rank. The links are partitioned and cached before the measurement; each of
 * {@link #ITERATIONS} iterations joins them with the ranks (no shuffle: same partitioner) and shuffles the
 * contributions ({@code reduceByKey}): many small blocks, the opposite of GroupBy's large ones.
 *
 * <p>Ranks are fixed-point longs ({@link #SCALE} = 1.0), so their sums do not depend on the order in which a
 * shuffle delivers the contributions, and every configuration must produce the same checksum.
 */
final class PageRankJob implements ShuffleBench.Workload {
    static final int ITERATIONS = 3;
    static final int RANDOM_LINKS = 7;
    static final long SCALE = 1_000_000_000L;
    /** The damping factor 0.85 as (1 - d) * SCALE and d in percent. */
    static final long BASE = 15 * SCALE / 100;

    private final BenchParams p;
    private final JavaPairRDD<Long, long[]> links;
    private final long pages;

    PageRankJob(JavaSparkContext sc, BenchParams p) {
        this.p = p;
        this.pages = p.records();
        List<Integer> mapperIds = IntStream.range(0, p.mappers).boxed().toList();
        long seed = p.seed;
        int perMapper = p.pairsPerMapper;
        long total = pages;
        links = sc.parallelize(mapperIds, p.mappers)
                .flatMapToPair(mapper -> linksOf(mapper, perMapper, total, seed))
                .partitionBy(new HashPartitioner(p.reducers))
                .persist(StorageLevel.MEMORY_ONLY());
    }

    /** The out-links of mapper {@code mapper}'s pages: its successor, then random pages. */
    static Iterator<Tuple2<Long, long[]>> linksOf(int mapper, int perMapper, long pages, long seed) {
        SplittableRandom random = new SplittableRandom(PairGenerator.mapperSeed(seed, mapper));
        long first = (long) mapper * perMapper;
        return new Iterator<>() {
            private long page = first;

            @Override
            public boolean hasNext() {
                return page < first + perMapper;
            }

            @Override
            public Tuple2<Long, long[]> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                long[] out = new long[1 + RANDOM_LINKS];
                out[0] = (page + 1) % pages;
                for (int i = 1; i < out.length; i++) {
                    out[i] = random.nextLong(pages);
                }
                return new Tuple2<>(page++, out);
            }
        };
    }

    @Override
    public long prepare() {
        return links.count();
    }

    @Override
    public int cachedRddId() {
        return links.id();
    }

    @Override
    public ShuffleBench.Outcome measure() {
        JavaPairRDD<Long, Long> ranks = links.mapValues(out -> SCALE);
        HashPartitioner partitioner = new HashPartitioner(p.reducers);
        for (int i = 0; i < ITERATIONS; i++) {
            ranks = links.join(ranks).values()
                    .flatMapToPair(PageRankJob::contributions)
                    .reduceByKey(partitioner, Long::sum)
                    .mapValues(sum -> BASE + sum * 85 / 100);
        }
        List<long[]> parts = ranks.mapPartitions(PageRankJob::summary).collect();
        long count = 0;
        long checksum = 0;
        for (long[] part : parts) {
            count += part[0];
            checksum += part[1];
        }
        return new ShuffleBench.Outcome(count, checksum, true);
    }

    static Iterator<Tuple2<Long, Long>> contributions(Tuple2<long[], Long> pageLinksAndRank) {
        long[] out = pageLinksAndRank._1();
        long share = pageLinksAndRank._2() / out.length;
        List<Tuple2<Long, Long>> contributions = new ArrayList<>(out.length);
        for (long target : out) {
            contributions.add(new Tuple2<>(target, share));
        }
        return contributions.iterator();
    }

    /** {count, sum of a hash of (page, rank)}: independent of the order of pages. */
    static Iterator<long[]> summary(Iterator<Tuple2<Long, Long>> ranks) {
        long count = 0;
        long sum = 0;
        while (ranks.hasNext()) {
            Tuple2<Long, Long> r = ranks.next();
            count++;
            sum += Checksums.mix64(r._1() * 0x9E3779B97F4A7C15L ^ r._2());
        }
        return List.of(new long[] {count, sum}).iterator();
    }
}
