package io.slipstream.ohb.spark;

import java.util.Iterator;
import java.util.List;
import java.util.stream.IntStream;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.storage.RDDInfo;
import org.apache.spark.storage.StorageLevel;

import scala.Tuple2;

/**
 * OHB's GroupByTest and SortByTest (after Spark's examples) as one Spark application, run by {@code ohb spark}.
 *
 * <ol>
 *   <li>Waits until the expected executors have registered, so the input spreads over all of them.</li>
 *   <li>Generates the input inside the map tasks ({@link PairGenerator}), caches it and counts it: generation
 *       is not part of the measurement (as in Spark's GroupByTest).</li>
 *   <li>The measured job, timed with {@code System.nanoTime} around it: {@code groupByKey(reducers)} or
 *       {@code sortByKey(true, reducers)} (its range partitioner's sampling job included), each followed by one
 *       action that summarises every reduce partition ({@link Checksums}).</li>
 *   <li>Prints {@code OHB_SPARK_RESULT {json}} on stdout: job time, stage times and shuffle metrics of the
 *       measured stages ({@link ShuffleMetricsListener}), the checksum, and what the plugin's executors say the
 *       fabric carried during the measured job ({@link FabricReadProbe}, read before and after it).</li>
 * </ol>
 * Exit status: 0 with a result line, 1 when the run failed, 2 for a bad command line.
 */
public final class ShuffleBench {
    private ShuffleBench() {
    }

    /** The stdout line `ohb spark` looks for: this prefix, then one JSON object. */
    static final String RESULT_PREFIX = "OHB_SPARK_RESULT ";
    /** Executors register a few seconds after the context starts; a cluster that needs more is broken. */
    static final long EXECUTOR_WAIT_MS = 180_000;
    /** The listener bus delivers in milliseconds; a minute means it is stuck. */
    static final long FENCE_WAIT_MS = 60_000;

    public static void main(String[] args) {
        BenchParams params;
        try {
            params = BenchParams.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("ShuffleBench: " + e.getMessage());
            System.err.println(BenchParams.USAGE);
            System.exit(2);
            return;
        }
        int status = 0;
        try {
            String json = run(params);
            System.out.println(RESULT_PREFIX + json);
        } catch (Throwable e) {
            System.err.println("ShuffleBench: " + params.test.label + " failed: " + e);
            e.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.err.flush();
        // Threads a shuffle manager (or Spark) leaves behind must not keep the driver alive.
        System.exit(status);
    }

    /** Runs the test; returns the result's JSON. */
    static String run(BenchParams p) throws Exception {
        SparkConf conf = new SparkConf().setAppName("ohb-spark-" + p.test.label).setMaster(p.master);
        p.conf.forEach(conf::set);
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            sc.setLogLevel("WARN");
            ShuffleMetricsListener listener = new ShuffleMetricsListener();
            sc.sc().addSparkListener(listener);
            waitForExecutors(sc, p.executors);

            Workload workload = switch (p.test) {
                case GROUPBY, SORTBY -> new PairShuffle(sc, p);
                case TERASORT -> new TeraSortJob(sc, p);
                case PAGERANK -> new PageRankJob(sc, p);
                case SQL -> new SqlJob(sc, p);
            };
            long generateStart = System.nanoTime();
            long inputRecords = workload.prepare();
            long generateMs = (System.nanoTime() - generateStart) / 1_000_000;
            if (inputRecords != p.records()) {
                throw new IllegalStateException("generated " + inputRecords + " records, expected " + p.records());
            }
            int cachedPartitions = workload.cachedRddId() < 0 ? p.mappers : cachedPartitions(sc, workload.cachedRddId());
            System.err.printf("ShuffleBench: %d records generated and cached (%d of %d partitions) in %d ms%n",
                    inputRecords, cachedPartitions, p.mappers, generateMs);

            FabricReadProbe.Totals fabricBefore = FabricReadProbe.read(sc, p.executors);

            sc.setLocalProperty(ShuffleMetricsListener.PHASE, ShuffleMetricsListener.MEASURED);
            long jobStart = System.nanoTime();
            Outcome outcome = workload.measure();
            long jobNs = System.nanoTime() - jobStart;
            sc.setLocalProperty(ShuffleMetricsListener.PHASE, ShuffleMetricsListener.FENCE);
            sc.parallelize(List.of(0), 1).count();
            sc.setLocalProperty(ShuffleMetricsListener.PHASE, null);
            if (!listener.awaitFence(FENCE_WAIT_MS)) {
                throw new IllegalStateException("listener events not delivered within " + FENCE_WAIT_MS + " ms");
            }
            FabricReadProbe.Totals fabricAfter = FabricReadProbe.read(sc, p.executors);

            Json json = new Json()
                    .field("test", p.test.label)
                    .field("spark_version", sc.version())
                    .field("master", p.master)
                    .field("shuffle_manager", conf.get("spark.shuffle.manager", "sort"))
                    .field("mappers", p.mappers)
                    .field("pairs_per_mapper", p.pairsPerMapper)
                    .field("value_bytes", p.valueBytes)
                    .field("reducers", p.reducers)
                    .field("seed", p.seed)
                    .field("executors", p.executors)
                    .field("input_records", inputRecords)
                    .field("input_cached_partitions", cachedPartitions)
                    .field("generate_ms", generateMs)
                    .field("job_ns", jobNs)
                    .field("job_ms", jobNs / 1_000_000);
            addStageFields(json, listener.stages());
            addFabricFields(json, fabricBefore, fabricAfter);
            json.field("records", outcome.records());
            outcome.fields().accept(json);
            json.field("ordered", outcome.ordered()).field("checksum", Checksums.hex(outcome.checksum()));
            return json.toString();
        }
    }

    /** One test's data and measured job. */
    interface Workload {
        /** Generates and caches the input (not measured); returns its records. */
        long prepare();

        /** The cached input's RDD id, or -1 when it is not one RDD (a cached SQL table). */
        int cachedRddId();

        /** The measured job: one or more shuffles and the actions that summarise their output. */
        Outcome measure();
    }

    /** What a measured job produced: records at its end, an order-independent checksum, whether ordered. */
    record Outcome(long records, long checksum, boolean ordered, java.util.function.Consumer<Json> fields) {
        Outcome(long records, long checksum, boolean ordered) {
            this(records, checksum, ordered, json -> { });
        }
    }

    /** GroupByTest and SortByTest: random (int, byte[]) pairs, grouped or sorted by key. */
    static final class PairShuffle implements Workload {
        private final BenchParams p;
        private final JavaPairRDD<Integer, byte[]> input;

        PairShuffle(JavaSparkContext sc, BenchParams p) {
            this.p = p;
            List<Integer> mapperIds = IntStream.range(0, p.mappers).boxed().toList();
            input = sc.parallelize(mapperIds, p.mappers)
                    .flatMapToPair(new PairGenerator(p.pairsPerMapper, p.valueBytes, p.seed))
                    .persist(StorageLevel.MEMORY_ONLY());
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
        public Outcome measure() {
            if (p.test == BenchParams.Test.GROUPBY) {
                List<long[]> summaries = input.groupByKey(p.reducers)
                        .mapPartitionsWithIndex(ShuffleBench::groupSummary, false).collect();
                Checksums.GroupTotals t = Checksums.groupTotals(summaries);
                return new Outcome(t.records(), t.checksum(), true,
                        json -> json.field("groups", t.groups()).field("value_bytes_total", t.valueBytes()));
            }
            List<long[]> summaries = input.sortByKey(true, p.reducers)
                    .mapPartitionsWithIndex(ShuffleBench::sortSummary, false).collect();
            Checksums.SortTotals t = Checksums.sortTotals(summaries);
            return new Outcome(t.records(), t.checksum(), t.inversions() == 0,
                    json -> json.field("inversions", t.inversions()).field("value_bytes_total", t.valueBytes()));
        }
    }

    static Iterator<long[]> groupSummary(Integer partition, Iterator<Tuple2<Integer, Iterable<byte[]>>> groups) {
        return List.of(Checksums.groupPartition(partition, groups)).iterator();
    }

    static Iterator<long[]> sortSummary(Integer partition, Iterator<Tuple2<Integer, byte[]>> records) {
        return List.of(Checksums.sortPartition(records)).iterator();
    }

    /** Sums of the measured stages by kind, and each stage attempt. */
    static void addStageFields(Json json, List<ShuffleMetricsListener.StageRecord> stages) {
        long mapMs = 0;
        long reduceMs = 0;
        long otherMs = 0;
        long writeBytes = 0;
        long recordsWritten = 0;
        long writeTimeNs = 0;
        long remoteBytes = 0;
        long localBytes = 0;
        long remoteBlocks = 0;
        long localBlocks = 0;
        long fetchWaitMs = 0;
        long recordsRead = 0;
        long gcMs = 0;
        long failedTasks = 0;
        boolean allCompleted = true;
        StringBuilder list = new StringBuilder("[");
        for (ShuffleMetricsListener.StageRecord s : stages) {
            long duration = Math.max(s.durationMs, 0);
            switch (s.kind()) {
                case "map" -> mapMs += duration;
                case "reduce" -> reduceMs += duration;
                default -> otherMs += duration;
            }
            writeBytes += s.shuffleWriteBytes;
            recordsWritten += s.shuffleRecordsWritten;
            writeTimeNs += s.shuffleWriteTimeNs;
            remoteBytes += s.remoteBytesRead;
            localBytes += s.localBytesRead;
            remoteBlocks += s.remoteBlocksFetched;
            localBlocks += s.localBlocksFetched;
            fetchWaitMs += s.fetchWaitMs;
            recordsRead += s.recordsRead;
            gcMs += s.gcMs;
            failedTasks += s.tasksFailed;
            allCompleted &= s.completed && s.failure == null;
            if (list.length() > 1) {
                list.append(',');
            }
            list.append(new Json().field("id", s.stageId).field("attempt", s.attempt).field("name", s.name)
                    .field("kind", s.kind()).field("tasks", s.tasks).field("tasks_succeeded", s.tasksSucceeded)
                    .field("tasks_failed", s.tasksFailed).field("duration_ms", s.durationMs)
                    .field("executor_run_ms", s.executorRunMs).field("gc_ms", s.gcMs)
                    .field("shuffle_write_bytes", s.shuffleWriteBytes).field("remote_bytes_read", s.remoteBytesRead)
                    .field("local_bytes_read", s.localBytesRead).field("fetch_wait_ms", s.fetchWaitMs)
                    .field("records_read", s.recordsRead).field("failure", s.failure));
        }
        list.append(']');
        json.field("map_stage_ms", mapMs)
                .field("reduce_stage_ms", reduceMs)
                .field("other_stages_ms", otherMs)
                .field("shuffle_write_bytes", writeBytes)
                .field("shuffle_records_written", recordsWritten)
                .field("shuffle_write_time_ms", writeTimeNs / 1_000_000)
                .field("remote_bytes_read", remoteBytes)
                .field("local_bytes_read", localBytes)
                .field("remote_blocks_fetched", remoteBlocks)
                .field("local_blocks_fetched", localBlocks)
                .field("fetch_wait_ms", fetchWaitMs)
                .field("records_read", recordsRead)
                .field("gc_ms", gcMs)
                .field("failed_tasks", failedTasks)
                .field("stage_attempts", stages.size())
                .field("stages_completed", allCompleted)
                .raw("stages", list.toString());
    }

    /**
     * What the plugin's executors say they received over the fabric during the measured job (beside Spark's
     * {@code remote_bytes_read}: equal when nothing fell back): {@code fabric_remote_bytes},
     * {@code fabric_remote_blocks}, {@code fabric_pool_peak_bytes} (the largest executor's fabric memory peak), null
     * when no executor has the plugin's counters; and
     * {@code fabric_counting_executors} of {@code executors_probed}.
     */
    static void addFabricFields(Json json, FabricReadProbe.Totals before, FabricReadProbe.Totals after) {
        boolean counted = after.executorsWithCounters() > 0;
        json.raw("fabric_remote_bytes", counted ? Long.toString(after.bytes() - before.bytes()) : "null")
                .raw("fabric_remote_blocks", counted ? Long.toString(after.blocks() - before.blocks()) : "null")
                // The node's peak since the executor started (generation and maps included): its off-heap worst.
                .raw("fabric_pool_peak_bytes", counted ? Long.toString(after.poolPeakBytesMax()) : "null")
                .field("fabric_counting_executors", after.executorsWithCounters())
                .field("executors_probed", after.executors());
    }

    /** Blocks until {@code executors} executors (besides the driver) have registered. */
    static void waitForExecutors(JavaSparkContext sc, int executors) throws InterruptedException {
        long deadline = System.nanoTime() + EXECUTOR_WAIT_MS * 1_000_000;
        while (sc.sc().statusTracker().getExecutorInfos().length < executors + 1) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException((sc.sc().statusTracker().getExecutorInfos().length - 1) + " of " + executors
                        + " executors registered within " + EXECUTOR_WAIT_MS + " ms");
            }
            Thread.sleep(100);
        }
    }

    private static int cachedPartitions(JavaSparkContext sc, int rddId) {
        for (RDDInfo info : sc.sc().getRDDStorageInfo()) {
            if (info.id() == rddId) {
                return info.numCachedPartitions();
            }
        }
        return 0;
    }
}
