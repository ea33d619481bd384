package io.slipstream.ohb.spark;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The command line of {@link ShuffleBench}: which test, its size, the master and extra Spark settings. */
final class BenchParams {
    /** OHB's two shuffle tests. */
    enum Test {
        GROUPBY("groupby"),
        SORTBY("sortby"),
        TERASORT("terasort"),
        PAGERANK("pagerank"),
        SQL("sql");

        final String label;

        Test(String label) {
            this.label = label;
        }

        static Test parse(String text) {
            for (Test t : values()) {
                if (t.label.equals(text)) {
                    return t;
                }
            }
            throw new IllegalArgumentException("unknown test '" + text + "' (groupby, sortby, terasort, pagerank or sql)");
        }
    }

    static final int MAPPERS_MAX = 10_000;
    static final int REDUCERS_MAX = 100_000;
    static final int PAIRS_PER_MAPPER_MAX = 100_000_000;
    /** A value is one byte[]; 64 MiB is far above anything a shuffle benchmark needs. */
    static final int VALUE_BYTES_MAX = 64 << 20;
    static final int EXECUTORS_MAX = 64;

    static final String USAGE = String.join("\n",
            "Usage: java -cp 'SPARK_HOME/jars/*:slipstream-ohb-spark.jar' io.slipstream.ohb.spark.ShuffleBench",
            "         groupby|sortby|terasort|pagerank|sql [--mappers N] [--pairs N] [--value-bytes N] [--reducers N] [--seed N]",
            "         [--master M] [--executors N] [--conf key=value]...",
            "OHB's GroupByTest / SortByTest: each mapper generates --pairs random (int key, byte[--value-bytes])",
            "pairs (seeded), the input is cached and counted, then the measured job runs groupByKey(--reducers) or",
            "sortByKey(true, --reducers) with a checksum; terasort: 10-byte binary keys sorted unsigned (TeraSortJob); pagerank: 3 iterations over mappers x pairs pages (PageRankJob);",
            "sql: a shuffle join and aggregations over generated tables (SqlJob). One line 'OHB_SPARK_RESULT {json}' goes to stdout.",
            "Defaults: --mappers 8 --pairs 131072 --value-bytes 1000 --reducers = mappers --seed 42",
            "--master local-cluster[2,1,4096]; --executors: from a local-cluster master (else 0: no wait).");

    final Test test;
    final int mappers;
    final int pairsPerMapper;
    final int valueBytes;
    final int reducers;
    final long seed;
    final String master;
    /** Executors to wait for before the input is generated, so that it spreads over all of them. */
    final int executors;
    final Map<String, String> conf;

    private BenchParams(Test test, int mappers, int pairsPerMapper, int valueBytes, int reducers, long seed,
                        String master, int executors, Map<String, String> conf) {
        this.test = test;
        this.mappers = mappers;
        this.pairsPerMapper = pairsPerMapper;
        this.valueBytes = valueBytes;
        this.reducers = reducers;
        this.seed = seed;
        this.master = master;
        this.executors = executors;
        this.conf = Collections.unmodifiableMap(conf);
    }

    long records() {
        return (long) mappers * pairsPerMapper;
    }

    static BenchParams parse(String[] args) {
        if (args.length == 0) {
            throw new IllegalArgumentException("which test? groupby, sortby, terasort, pagerank or sql");
        }
        Test test = Test.parse(args[0]);
        int mappers = 8;
        int pairs = 131_072;
        int valueBytes = 1000;
        Integer reducers = null;
        long seed = 42;
        String master = "local-cluster[2,1,4096]";
        Integer executors = null;
        Map<String, String> conf = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i++) {
            String flag = args[i];
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            String value = args[++i];
            switch (flag) {
                case "--mappers" -> mappers = number(flag, value, 1, MAPPERS_MAX);
                case "--pairs" -> pairs = number(flag, value, 1, PAIRS_PER_MAPPER_MAX);
                case "--value-bytes" -> valueBytes = number(flag, value, 0, VALUE_BYTES_MAX);
                case "--reducers" -> reducers = number(flag, value, 1, REDUCERS_MAX);
                case "--executors" -> executors = number(flag, value, 0, EXECUTORS_MAX);
                case "--seed" -> {
                    try {
                        seed = Long.parseLong(value);
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("--seed: '" + value + "' is not a number");
                    }
                }
                case "--master" -> master = value;
                case "--conf" -> {
                    int eq = value.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("--conf needs key=value, got '" + value + "'");
                    }
                    conf.put(value.substring(0, eq), value.substring(eq + 1));
                }
                default -> throw new IllegalArgumentException("unknown option '" + flag + "'");
            }
        }
        int waitFor = executors != null ? executors : localClusterExecutors(master);
        return new BenchParams(test, mappers, pairs, valueBytes, reducers != null ? reducers : mappers, seed, master,
                waitFor, conf);
    }

    private static int number(String flag, String value, int min, int max) {
        int n;
        try {
            n = Integer.parseInt(value.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + ": '" + value + "' is not a number");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(flag + " must be in " + min + ".." + max + ", got " + n);
        }
        return n;
    }

    private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[\\s*(\\d+)\\s*,\\s*\\d+\\s*,\\s*\\d+\\s*]");

    /** N of {@code local-cluster[N,cores,memory]}; 0 for any other master. */
    static int localClusterExecutors(String master) {
        Matcher m = LOCAL_CLUSTER.matcher(master.trim());
        return m.matches() ? Integer.parseInt(m.group(1)) : 0;
    }
}
