package io.slipstream.ohb.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * The applications end to end in local mode (one JVM, no Spark home needed): the listener sees the measured
 * stages, the checksums do not depend on the serializer. `ohb spark` runs them on a local cluster.
 */
class ShuffleBenchLocalTest {
    private static String run(String... args) throws Exception {
        String[] all = new String[args.length + 6];
        System.arraycopy(args, 0, all, 0, args.length);
        System.arraycopy(new String[] {"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf",
            "spark.driver.host=127.0.0.1"}, 0, all, args.length, 6);
        return ShuffleBench.run(BenchParams.parse(all));
    }

    private static String text(String json, String field) {
        Matcher m = Pattern.compile("\"" + field + "\":(\"[^\"]*\"|[^,}\\]]*)").matcher(json);
        assertTrue(m.find(), field + " in " + json);
        return m.group(1).replace("\"", "");
    }

    private static long number(String json, String field) {
        return Long.parseLong(text(json, field));
    }

    @Test
    void groupByChecksumDoesNotDependOnTheSerializer() throws Exception {
        String kryo = run("groupby", "--mappers", "3", "--pairs", "2000", "--value-bytes", "100", "--reducers", "4",
                "--conf", "spark.serializer=org.apache.spark.serializer.KryoSerializer");
        String java = run("groupby", "--mappers", "3", "--pairs", "2000", "--value-bytes", "100", "--reducers", "4");
        for (String json : new String[] {kryo, java}) {
            assertEquals(6000, number(json, "records"));
            assertEquals(6000, number(json, "records_read"));
            assertEquals(6000, number(json, "shuffle_records_written"));
            assertEquals(3, number(json, "input_cached_partitions"));
            assertEquals(2, number(json, "stage_attempts"));
            assertTrue(number(json, "shuffle_write_bytes") > 600_000, json);
            assertTrue(number(json, "job_ns") > 0, json);
            assertEquals("true", text(json, "stages_completed"));
            assertEquals("sort", text(json, "shuffle_manager"));
            assertEquals("null", text(json, "fabric_remote_bytes"), "vanilla Spark has no fabric counters: " + json);
            assertEquals("null", text(json, "fabric_pool_peak_bytes"), json);
            assertEquals(0, number(json, "fabric_counting_executors"));
            assertEquals(1, number(json, "executors_probed"), "local mode: the driver is the executor");
        }
        assertEquals(text(kryo, "checksum"), text(java, "checksum"));
        assertEquals(text(kryo, "groups"), text(java, "groups"));
    }

    @Test
    void sortByIsOrderedAndCountsItsSamplingStage() throws Exception {
        String json = run("sortby", "--mappers", "2", "--pairs", "3000", "--value-bytes", "16", "--reducers", "3");
        assertEquals("true", text(json, "ordered"));
        assertEquals(0, number(json, "inversions"));
        assertEquals(6000, number(json, "records"));
        assertEquals(3, number(json, "stage_attempts"), "sampling, map, reduce: " + json);
        assertTrue(json.contains("\"kind\":\"other\"") && json.contains("\"kind\":\"map\"")
                && json.contains("\"kind\":\"reduce\""), json);
    }

    @Test
    void pageRankMatchesAPlainJavaPageRankWhateverThePartitioning() throws Exception {
        String two = run("pagerank", "--mappers", "2", "--pairs", "500", "--reducers", "2");
        String five = run("pagerank", "--mappers", "2", "--pairs", "500", "--reducers", "5");
        assertEquals(1000, number(two, "records"), "every page has an in-link and keeps a rank");
        assertEquals(text(two, "checksum"), text(five, "checksum"));
        assertEquals(Checksums.hex(plainPageRank(2, 500, 42)), text(two, "checksum"));
        assertTrue(number(two, "stage_attempts") >= PageRankJob.ITERATIONS, two);
    }

    /** The same fixed-point PageRank without Spark: the expected checksum. */
    private static long plainPageRank(int mappers, int perMapper, long seed) {
        long pages = (long) mappers * perMapper;
        java.util.Map<Long, long[]> links = new java.util.HashMap<>();
        for (int m = 0; m < mappers; m++) {
            PageRankJob.linksOf(m, perMapper, pages, seed).forEachRemaining(t -> links.put(t._1(), t._2()));
        }
        java.util.Map<Long, Long> ranks = new java.util.HashMap<>();
        links.keySet().forEach(page -> ranks.put(page, PageRankJob.SCALE));
        for (int i = 0; i < PageRankJob.ITERATIONS; i++) {
            java.util.Map<Long, Long> sums = new java.util.HashMap<>();
            for (var e : links.entrySet()) {
                Long rank = ranks.get(e.getKey());
                if (rank == null) {
                    continue;
                }
                for (long target : e.getValue()) {
                    sums.merge(target, rank / e.getValue().length, Long::sum);
                }
            }
            ranks.clear();
            sums.forEach((page, sum) -> ranks.put(page, PageRankJob.BASE + sum * 85 / 100));
        }
        java.util.List<scala.Tuple2<Long, Long>> all = new java.util.ArrayList<>();
        ranks.forEach((page, rank) -> all.add(new scala.Tuple2<>(page, rank)));
        return PageRankJob.summary(all.iterator()).next()[1];
    }

    @Test
    void sqlQueriesMatchAPlainJavaEvaluationWhateverThePartitioning() throws Exception {
        String two = run("sql", "--mappers", "2", "--pairs", "800", "--value-bytes", "50", "--reducers", "2");
        String three = run("sql", "--mappers", "2", "--pairs", "800", "--value-bytes", "50", "--reducers", "3");
        assertEquals(1600, number(two, "records"), "every fact joins its key's row");
        assertEquals(text(two, "checksum"), text(three, "checksum"));
        assertEquals(Checksums.hex(plainSql(2, 800, 50, 42)), text(two, "checksum"));
        assertTrue(number(two, "remote_bytes_read") + number(two, "local_bytes_read") > 1600 * 50, two);
    }

    /** Both queries of SqlJob evaluated without Spark: the expected checksum. */
    private static long plainSql(int mappers, int perMapper, int valueBytes, long seed) {
        long keys = Math.max(1, (long) mappers * perMapper / SqlJob.ROWS_PER_KEY);
        java.util.TreeMap<Long, long[]> groups = new java.util.TreeMap<>();
        java.util.Map<Long, Long> amountByKey = new java.util.HashMap<>();
        for (int m = 0; m < mappers; m++) {
            SqlJob.factsOf(m, perMapper, valueBytes, keys, seed).forEachRemaining(row -> {
                long k = row.getLong(1);
                long amount = row.getLong(2);
                long[] g = groups.computeIfAbsent(Math.floorMod(k, (long) SqlJob.GROUPS), grp -> new long[] {grp, 0, 0, 0});
                g[1]++;
                g[2] += amount;
                g[3] += ((byte[]) row.get(3)).length;
                amountByKey.merge(k, amount, Long::sum);
            });
        }
        java.util.TreeMap<Long, long[]> buckets = new java.util.TreeMap<>();
        amountByKey.values().forEach(s -> buckets.computeIfAbsent(Math.floorMod(s, 1000L), b -> new long[] {b, 0})[1]++);
        return SqlJob.checksum(new java.util.ArrayList<>(groups.values()), new java.util.ArrayList<>(buckets.values()));
    }

    @Test
    void teraSortIsOrderedUnsignedAndItsChecksumIsThatOfAPlainSort() throws Exception {
        String two = run("terasort", "--mappers", "2", "--pairs", "1500", "--value-bytes", "90", "--reducers", "2");
        String four = run("terasort", "--mappers", "2", "--pairs", "1500", "--value-bytes", "90", "--reducers", "4");
        assertEquals("true", text(two, "ordered"));
        assertEquals(0, number(four, "inversions"));
        assertEquals(3000, number(two, "records"));
        assertEquals(text(two, "checksum"), text(four, "checksum"), "the range partitioner's cuts do not matter");
        java.util.List<scala.Tuple2<byte[], byte[]>> all = new java.util.ArrayList<>();
        for (int m = 0; m < 2; m++) {
            TeraSortJob.records(m, 1500, 90, 42).forEachRemaining(all::add);
        }
        all.sort((a, b) -> java.util.Arrays.compareUnsigned(a._1(), b._1()));
        long[] plain = TeraSortJob.totals(java.util.List.of(TeraSortJob.summary(all.iterator()).next()));
        assertEquals(Checksums.hex(plain[2]), text(two, "checksum"));
        assertTrue(all.stream().anyMatch(r -> r._1()[0] < 0), "keys with the top bit set exist: unsigned order is tested");
    }
}
