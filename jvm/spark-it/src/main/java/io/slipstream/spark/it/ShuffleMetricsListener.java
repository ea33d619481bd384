package io.slipstream.spark.it;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.FetchFailed;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * Totals over the application of what the shuffle reports to Spark (read through the metrics reporter Spark hands
 * the reader) and of the failures the scheduler saw; per scenario, remote bytes read, fetch failures and failed
 * tasks (a
 * stage belongs to the scenario named by the local property {@link #SCENARIO_PROPERTY} of the thread that submitted
 * it). Complete only after the SparkContext stopped (events arrive asynchronously; stopping drains them).
 */
final class ShuffleMetricsListener extends SparkListener {

    static final String SCENARIO_PROPERTY = "slipstream.it.scenario";

    private final Map<Integer, String> scenarioOfStage = new ConcurrentHashMap<>();
    /** Scenario to {remote bytes read, fetch failures from an executor, failed tasks, map tasks}. */
    private final Map<String, long[]> perScenario = new ConcurrentHashMap<>();

    private final AtomicLong remoteBytesRead = new AtomicLong();
    private final AtomicLong remoteBlocksFetched = new AtomicLong();
    private final AtomicLong localBytesRead = new AtomicLong();
    private final AtomicLong fetchWaitTimeMs = new AtomicLong();
    private final AtomicLong recordsRead = new AtomicLong();
    private final AtomicLong bytesWritten = new AtomicLong();
    /** Fetch failures that name the executor the blocks were to come from (a fetch was tried and failed). */
    private final AtomicLong fetchFailuresFromExecutor = new AtomicLong();
    /** Fetch failures without an address: the map statuses were already missing (nothing was fetched). */
    private final AtomicLong fetchFailuresOfMetadata = new AtomicLong();
    private final AtomicLong executorsRemoved = new AtomicLong();
    /** Tasks that ended in anything but success: failed, killed, lost with their executor. */
    private final AtomicLong failedTasks = new AtomicLong();

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted stageSubmitted) {
        Properties properties = stageSubmitted.properties();
        String scenario = properties == null ? null : properties.getProperty(SCENARIO_PROPERTY);
        scenarioOfStage.put(stageSubmitted.stageInfo().stageId(), scenario == null ? "none" : scenario);
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd taskEnd) {
        long[] scenario = perScenario.computeIfAbsent(
                scenarioOfStage.getOrDefault(taskEnd.stageId(), "none"), name -> new long[4]);
        if (!taskEnd.taskInfo().successful()) {
            failedTasks.incrementAndGet();
            scenario[2]++;
        }
        if ("ShuffleMapTask".equals(taskEnd.taskType())) {
            scenario[3]++;
        }
        TaskMetrics metrics = taskEnd.taskMetrics();
        if (metrics != null) {
            ShuffleReadMetrics read = metrics.shuffleReadMetrics();
            scenario[0] += read.remoteBytesRead();
            remoteBytesRead.addAndGet(read.remoteBytesRead());
            remoteBlocksFetched.addAndGet(read.remoteBlocksFetched());
            localBytesRead.addAndGet(read.localBytesRead());
            fetchWaitTimeMs.addAndGet(read.fetchWaitTime());
            recordsRead.addAndGet(read.recordsRead());
            bytesWritten.addAndGet(metrics.shuffleWriteMetrics().bytesWritten());
        }
        if (taskEnd.reason() instanceof FetchFailed failure) {
            if (failure.bmAddress() != null) {
                fetchFailuresFromExecutor.incrementAndGet();
                scenario[1]++;
            } else {
                fetchFailuresOfMetadata.incrementAndGet();
            }
        }
    }

    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved executorRemoved) {
        executorsRemoved.incrementAndGet();
    }

    /** Name to value, in the order of the METRIC lines. */
    Map<String, Long> totals() {
        Map<String, Long> totals = new LinkedHashMap<>();
        totals.put("remoteBytesRead", remoteBytesRead.get());
        totals.put("remoteBlocksFetched", remoteBlocksFetched.get());
        totals.put("localBytesRead", localBytesRead.get());
        totals.put("fetchWaitTimeMs", fetchWaitTimeMs.get());
        totals.put("recordsRead", recordsRead.get());
        totals.put("bytesWritten", bytesWritten.get());
        totals.put("fetchFailuresFromExecutor", fetchFailuresFromExecutor.get());
        totals.put("fetchFailuresOfMetadata", fetchFailuresOfMetadata.get());
        totals.put("executorsRemoved", executorsRemoved.get());
        totals.put("failedTasks", failedTasks.get());
        return totals;
    }

    /** Scenario to {remote bytes read, fetch failures from an executor, failed tasks, map tasks}, by name. */
    Map<String, long[]> perScenario() {
        return new TreeMap<>(perScenario);
    }
}
