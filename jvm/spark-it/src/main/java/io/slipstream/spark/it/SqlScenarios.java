package io.slipstream.spark.it;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Adaptive query execution reads shuffles in pieces other than one reducer's partition: several partitions at once
 * (coalescing), and one partition's blocks from a range of map outputs (skew join splits). Each scenario checks in
 * the final plan that AQE did so, since otherwise it would test nothing of the kind. The application's SQL settings
 * ({@link ScenarioApp#DEFAULTS}) make both happen on this small data.
 */
final class SqlScenarios {

    private SqlScenarios() {
    }

    static List<Scenario> all() {
        return List.of(new AqeCoalesce(), new AqeSkewJoin());
    }

    /** The final physical plan, after the query ran (AQE's plan with the shuffle reads it chose). */
    static String finalPlan(Dataset<Row> query) {
        String plan = query.queryExecution().executedPlan().toString();
        System.err.println("final plan:\n" + plan); // to the driver's log, for whoever reads it after a failure
        return plan;
    }

    static Outcome digestOfLongRows(List<Row> rows) {
        Outcome outcome = Outcome.EMPTY;
        for (Row row : rows) {
            outcome = outcome.plusUnordered(Records.hash(row.getLong(0), row.getLong(1), row.getLong(2)));
        }
        return outcome;
    }

    /** A group-by over 32 shuffle partitions of a few kilobytes each: AQE coalesces them. */
    static final class AqeCoalesce extends Scenario {
        static final long ROWS = 400_000;
        static final long KEYS = 1_000;

        AqeCoalesce() {
            super("aqeCoalesce");
        }

        @Override
        public Outcome run(SparkSession spark) {
            Dataset<Row> query = spark.sql("SELECT id % " + KEYS + " AS k, count(*) AS c, sum(id) AS s"
                    + " FROM range(0, " + ROWS + ", 1, 8) GROUP BY id % " + KEYS);
            List<Row> rows = query.collectAsList();
            String plan = finalPlan(query);
            if (!plan.contains("AQEShuffleRead") || !plan.contains("coalesced")) {
                throw new IllegalStateException("AQE did not coalesce the shuffle partitions; final plan:\n" + plan);
            }
            return digestOfLongRows(rows);
        }

        @Override
        public Outcome reference() {
            Map<Long, long[]> groups = new HashMap<>();
            for (long id = 0; id < ROWS; id++) {
                long[] group = groups.computeIfAbsent(id % KEYS, k -> new long[2]);
                group[0]++;
                group[1] += id;
            }
            Outcome outcome = Outcome.EMPTY;
            for (Map.Entry<Long, long[]> group : groups.entrySet()) {
                outcome = outcome.plusUnordered(Records.hash(group.getKey(), group.getValue()[0], group.getValue()[1]));
            }
            return outcome;
        }
    }

    /**
     * A sort-merge join whose left side has 70 % of its rows on key 0: AQE splits that partition by ranges of map
     * outputs and joins each split with a copy of the right side's partition.
     */
    static final class AqeSkewJoin extends Scenario {
        static final long LEFT_ROWS = 300_000;
        static final long RIGHT_ROWS = 2_000;
        static final long KEYS = 1_000;

        AqeSkewJoin() {
            super("aqeSkewJoin");
        }

        static long leftKey(long id) {
            return id % 10 < 7 ? 0 : id % KEYS;
        }

        @Override
        public Outcome run(SparkSession spark) {
            Dataset<Row> query = spark.sql(
                    "WITH l AS (SELECT CASE WHEN id % 10 < 7 THEN 0 ELSE id % " + KEYS + " END AS k, id AS v"
                    + "           FROM range(0, " + LEFT_ROWS + ", 1, 8)),"
                    + "     r AS (SELECT id % " + KEYS + " AS k, id AS w FROM range(0, " + RIGHT_ROWS + ", 1, 4))"
                    + " SELECT l.k, count(*) AS c, sum(l.v * 3 + r.w) AS s FROM l JOIN r ON l.k = r.k GROUP BY l.k");
            List<Row> rows = query.collectAsList();
            String plan = finalPlan(query);
            if (!plan.contains("SortMergeJoin") || !plan.contains("skew=true")) {
                throw new IllegalStateException("AQE did not split the skewed join partition; final plan:\n" + plan);
            }
            return digestOfLongRows(rows);
        }

        @Override
        public Outcome reference() {
            Map<Long, long[]> right = new HashMap<>(); // key -> {rows, sum of w}
            for (long id = 0; id < RIGHT_ROWS; id++) {
                long[] side = right.computeIfAbsent(id % KEYS, k -> new long[2]);
                side[0]++;
                side[1] += id;
            }
            Map<Long, long[]> groups = new HashMap<>(); // key -> {count, sum}
            for (long id = 0; id < LEFT_ROWS; id++) {
                long key = leftKey(id);
                long[] side = right.get(key);
                if (side != null) {
                    long[] group = groups.computeIfAbsent(key, k -> new long[2]);
                    group[0] += side[0];
                    group[1] += id * 3 * side[0] + side[1];
                }
            }
            Outcome outcome = Outcome.EMPTY;
            for (Map.Entry<Long, long[]> group : groups.entrySet()) {
                outcome = outcome.plusUnordered(Records.hash(group.getKey(), group.getValue()[0], group.getValue()[1]));
            }
            return outcome;
        }
    }
}
