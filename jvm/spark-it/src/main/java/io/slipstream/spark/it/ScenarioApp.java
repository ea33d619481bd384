package io.slipstream.spark.it;

import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import io.slipstream.ohb.spark.FabricReadProbe;

/**
 * A Spark application (the driver, started with plain {@code java}) that runs the scenarios on
 * {@code local-cluster[2,1,1024]} and prints one line per fact for the tests:
 *
 * <pre>
 * SPARK_VERSION 3.5.8
 * SHUFFLE_MANAGER org.apache.spark.shuffle.sort.SortShuffleManager       (the driver's)
 * EXECUTOR_SHUFFLE_MANAGER org.apache.spark.shuffle.sort.SortShuffleManager
 * RESULT groupByKey 5a0c...e1 10000                                      (digest in hex, record count)
 * TIME groupByKey 2345                                                   (milliseconds)
 * FAILED sortByKey java.lang.IllegalStateException: ...                  (the scenario threw; exit status 1)
 * METRIC remoteBytesRead 123456                                          (after the context stopped)
 * SCENARIO_METRIC largeRecord remoteBytesRead 146800640
 * SCENARIO_METRIC executorLoss fetchFailuresFromExecutor 2
 * SCENARIO_METRIC groupByKey mapTasks 8                                  (tasks of map stages, retries included)
 * SCENARIO_METRIC none failedTasks 0                                     ("none": jobs outside the scenarios)
 * FABRIC_COUNTERS 123456 64 2 2 8388608 (the plugin's executors: bytes, blocks received over the fabric; executors
 *                                     with counters, executors probed; the largest fabric memory peak; after the
 *                                     scenarios)
 * FABRIC_COUNTERS_BEFORE executorLoss 123456 64 2 2 8388608  (the same, before that scenario ran: asked for with
 *                                     --fabric-counters-before; a scenario that kills an executor takes its
 *                                     counters with it)
 * </pre>
 *
 * Arguments: {@code --conf key=value} (any number; over the defaults below), {@code --scenarios a,b,c}
 * (default: all, in {@link Scenario#all()}'s order) and {@code --fabric-counters-before scenario}. The application's
 * own classes reach the executors through {@code spark.executor.extraClassPath}, appended to whatever the caller put
 * there (the plugin jar).
 */
public final class ScenarioApp {

    /** Settings every run has unless the caller overrides them. */
    static final Map<String, String> DEFAULTS = new LinkedHashMap<>();

    static {
        // Two executors of one core in their own JVMs: every shuffle crosses processes.
        DEFAULTS.put("spark.master", "local-cluster[2,1,1024]");
        DEFAULTS.put("spark.app.name", "slipstream-spark-it");
        DEFAULTS.put("spark.executor.memory", "1024m");
        DEFAULTS.put("spark.ui.enabled", "false");
        // As across hosts: without this, vanilla Spark reads the other executor's blocks from disk, not the network.
        DEFAULTS.put("spark.shuffle.readHostLocalDisk", "false");
        // Kryo, as production jobs use; the largeRecord scenario's 70 MB value must fit one Kryo buffer.
        DEFAULTS.put("spark.serializer", "org.apache.spark.serializer.KryoSerializer");
        DEFAULTS.put("spark.kryoserializer.buffer.max", "256m");
        // Vanilla Spark retries a refused connection 3 times, 5 s apart; 1 s keeps the executor-loss scenario short.
        DEFAULTS.put("spark.shuffle.io.retryWait", "1s");
        // SQL: shuffle partitions of a few hundred kilobytes, so that AQE both coalesces and splits skew.
        DEFAULTS.put("spark.sql.shuffle.partitions", "32");
        DEFAULTS.put("spark.sql.adaptive.enabled", "true");
        DEFAULTS.put("spark.sql.adaptive.coalescePartitions.enabled", "true");
        DEFAULTS.put("spark.sql.adaptive.advisoryPartitionSizeInBytes", "256k");
        DEFAULTS.put("spark.sql.adaptive.skewJoin.enabled", "true");
        DEFAULTS.put("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "2");
        DEFAULTS.put("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "256k");
        // The skew join is followed by a group-by on the join key: splitting it costs one more shuffle, which AQE
        // refuses unless forced.
        DEFAULTS.put("spark.sql.adaptive.forceOptimizeSkewedJoin", "true");
        // A broadcast join would have no shuffle to split.
        DEFAULTS.put("spark.sql.autoBroadcastJoinThreshold", "-1");
    }

    static final long EXECUTOR_REGISTRATION_WAIT_MS = 120_000;

    private ScenarioApp() {
    }

    public static void main(String[] args) throws Exception {
        SparkConf conf = new SparkConf();
        DEFAULTS.forEach(conf::set);
        List<Scenario> scenarios = Scenario.all();
        String fabricCountersBefore = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--conf" -> {
                    String setting = args[++i];
                    int equals = setting.indexOf('=');
                    if (equals < 1) {
                        throw new IllegalArgumentException("--conf takes key=value, not " + setting);
                    }
                    conf.set(setting.substring(0, equals), setting.substring(equals + 1));
                }
                case "--scenarios" -> {
                    scenarios = new ArrayList<>();
                    for (String name : args[++i].split(",")) {
                        scenarios.add(Scenario.named(name));
                    }
                }
                case "--fabric-counters-before" -> fabricCountersBefore = args[++i];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        String appClasses = codeSource(ScenarioApp.class) + File.pathSeparator + codeSource(FabricReadProbe.class);
        String executorClassPath = conf.get("spark.executor.extraClassPath", "");
        conf.set("spark.executor.extraClassPath",
                executorClassPath.isEmpty() ? appClasses : executorClassPath + File.pathSeparator + appClasses);

        SparkSession spark = SparkSession.builder().config(conf).getOrCreate();
        ShuffleMetricsListener metrics = new ShuffleMetricsListener();
        SparkContext context = spark.sparkContext();
        context.addSparkListener(metrics);
        int failures = 0;
        try {
            awaitExecutors(context, 2);
            System.out.println("SPARK_VERSION " + context.version());
            System.out.println("SHUFFLE_MANAGER " + SparkEnv.get().shuffleManager().getClass().getName());
            System.out.println("EXECUTOR_SHUFFLE_MANAGER " + String.join(",", executorShuffleManagers(context)));
            for (Scenario scenario : scenarios) {
                if (scenario.name.equals(fabricCountersBefore)) {
                    printFabricCounters("FABRIC_COUNTERS_BEFORE " + scenario.name, context);
                }
                context.setLocalProperty(ShuffleMetricsListener.SCENARIO_PROPERTY, scenario.name);
                long started = System.nanoTime();
                try {
                    Outcome outcome = scenario.run(spark);
                    System.out.println("RESULT " + scenario.name + " " + outcome);
                } catch (Exception e) {
                    failures++;
                    System.out.println("FAILED " + scenario.name + " " + e.toString().replace('\n', ' '));
                    e.printStackTrace();
                }
                System.out.println("TIME " + scenario.name + " " + (System.nanoTime() - started) / 1_000_000);
            }
            // What the plugin's executors say the fabric carried (absent with Spark's own shuffle), before they stop.
            printFabricCounters("FABRIC_COUNTERS", context);
        } finally {
            spark.stop(); // drains the listener bus: the metrics are complete after this
        }
        metrics.totals().forEach((name, value) -> System.out.println("METRIC " + name + " " + value));
        metrics.perScenario().forEach((name, values) -> {
            System.out.println("SCENARIO_METRIC " + name + " remoteBytesRead " + values[0]);
            System.out.println("SCENARIO_METRIC " + name + " fetchFailuresFromExecutor " + values[1]);
            System.out.println("SCENARIO_METRIC " + name + " failedTasks " + values[2]);
            System.out.println("SCENARIO_METRIC " + name + " mapTasks " + values[3]);
        });
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    /** What the plugin's executors say the fabric carried so far, as one line after {@code label}. */
    private static void printFabricCounters(String label, SparkContext context) {
        FabricReadProbe.Totals fabric = FabricReadProbe.read(JavaSparkContext.fromSparkContext(context), 2);
        System.out.println(label + " " + fabric.bytes() + " " + fabric.blocks() + " " + fabric.executorsWithCounters() + " "
                + fabric.executors() + " " + fabric.poolPeakBytesMax());
    }

    /** The folder or jar a class was loaded from (for the executors' class path). */
    private static String codeSource(Class<?> type) throws java.net.URISyntaxException {
        return new File(type.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath();
    }

    /** local-cluster starts its executors after the context: a shuffle before both registered would stay local. */
    private static void awaitExecutors(SparkContext context, int executors) throws InterruptedException {
        long deadline = System.currentTimeMillis() + EXECUTOR_REGISTRATION_WAIT_MS;
        // The status tracker lists the driver too.
        while (context.statusTracker().getExecutorInfos().length < executors + 1) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("only " + (context.statusTracker().getExecutorInfos().length - 1)
                        + " of " + executors + " executors registered in " + EXECUTOR_REGISTRATION_WAIT_MS + " ms");
            }
            Thread.sleep(100);
        }
    }

    /** The shuffle manager classes the executors run (one task per executor slot, several times over). */
    private static TreeSet<String> executorShuffleManagers(SparkContext context) {
        JavaSparkContext sc = JavaSparkContext.fromSparkContext(context);
        return new TreeSet<>(sc.parallelize(Scenario.range(8), 8)
                .map(i -> SparkEnv.get().shuffleManager().getClass().getName()).collect());
    }
}
