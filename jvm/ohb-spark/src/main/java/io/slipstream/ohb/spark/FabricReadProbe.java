package io.slipstream.ohb.spark;

import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;

import javax.management.InstanceNotFoundException;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * Reads, in every executor, what the Slipstream plugin says its reduce tasks received over the fabric: the platform
 * MBean {@value #OBJECT_NAME} (attributes RemoteBytes and RemoteBlocks, cumulative per executor; PoolBytesMappedPeak,
 * the fabric node's off-heap memory at its worst). Executors without it (vanilla Spark, or a plugin that fell back)
 * count as absent, not as zero.
 *
 * <p>Spark cannot address a task to an executor, so a probe job of a few short tasks per executor runs until every
 * registered executor has answered (bounded rounds). The executors need this class on their class path (the
 * application's jar). Also used by the integration tests' scenario application (jvm/spark-it).
 */
public final class FabricReadProbe {
    static final String OBJECT_NAME = "io.slipstream:type=SparkShuffleFabricReads";
    static final int TASKS_PER_EXECUTOR = 4;
    static final int ROUNDS_MAX = 20;
    /** Each probe task takes this long, so that one executor cannot run them all before another starts any. */
    static final long TASK_MS = 25;

    /**
     * Totals over the executors with counters: bytes and blocks summed, the largest executor's fabric memory peak
     * ({@code poolPeakBytesMax}, -1 when none has counters).
     */
    public record Totals(long bytes, long blocks, long poolPeakBytesMax, int executorsWithCounters, int executors) {}

    private FabricReadProbe() {
    }

    /** One executor's answer: {id, bytes, blocks, pool peak bytes}, all -1 when it has no counters. */
    static Object[] readHere() {
        String executorId = SparkEnv.get().executorId();
        try {
            Thread.sleep(TASK_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        try {
            ObjectName name = new ObjectName(OBJECT_NAME);
            long bytes = (Long) server.getAttribute(name, "RemoteBytes");
            long blocks = (Long) server.getAttribute(name, "RemoteBlocks");
            long poolPeak = (Long) server.getAttribute(name, "PoolBytesMappedPeak");
            return new Object[] {executorId, bytes, blocks, poolPeak};
        } catch (InstanceNotFoundException e) {
            return new Object[] {executorId, -1L, -1L, -1L};
        } catch (JMException e) {
            throw new IllegalStateException("reading " + OBJECT_NAME + ": " + e, e);
        }
    }

    /** Reads every executor's counters (the driver's too in local mode, where it is the only executor). */
    public static Totals read(JavaSparkContext sc, int executors) {
        Set<String> expected = new HashSet<>(scala.jdk.javaapi.CollectionConverters.asJava(sc.sc().getExecutorIds()));
        int tasks = Math.max(1, executors) * TASKS_PER_EXECUTOR;
        Map<String, long[]> seen = new HashMap<>();
        for (int round = 0; round < ROUNDS_MAX; round++) {
            List<Object[]> answers = sc.parallelize(IntStream.range(0, tasks).boxed().toList(), tasks)
                    .map(i -> readHere()).collect();
            for (Object[] answer : answers) {
                seen.put((String) answer[0], new long[] {(Long) answer[1], (Long) answer[2], (Long) answer[3]});
            }
            if (seen.keySet().containsAll(expected)) {
                return totals(seen, expected.isEmpty() ? seen.size() : expected.size());
            }
        }
        Set<String> missing = new HashSet<>(expected);
        missing.removeAll(seen.keySet());
        throw new IllegalStateException("executors " + missing + " ran no probe task in " + ROUNDS_MAX + " rounds");
    }

    static Totals totals(Map<String, long[]> byExecutor, int executors) {
        long bytes = 0;
        long blocks = 0;
        long poolPeakMax = -1;
        int withCounters = 0;
        for (long[] counters : byExecutor.values()) {
            if (counters[0] >= 0) {
                bytes += counters[0];
                blocks += counters[1];
                poolPeakMax = Math.max(poolPeakMax, counters[2]);
                withCounters++;
            }
        }
        return new Totals(bytes, blocks, poolPeakMax, withCounters, executors);
    }
}
