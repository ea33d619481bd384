package io.slipstream.ohb.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;

/**
 * Collects, for the stages of the measured job(s), each stage attempt's duration and the sum of its tasks'
 * shuffle metrics. A stage belongs to the measurement when the driver thread's local property
 * {@link #PHASE} was {@link #MEASURED} when its job was submitted.
 *
 * <p>Listener events arrive asynchronously. The driver runs a tiny job with {@link #PHASE} = {@link #FENCE}
 * after the measured one; events are delivered in order, so once that job's end has arrived every event of
 * the measured job has too ({@link #awaitFence}).
 */
final class ShuffleMetricsListener extends SparkListener {
    static final String PHASE = "ohb.phase";
    static final String MEASURED = "measured";
    static final String FENCE = "fence";

    /** One attempt of one measured stage. */
    static final class StageRecord {
        final int stageId;
        final int attempt;
        final String name;
        final int tasks;
        long durationMs = -1;
        boolean completed;
        String failure;
        int tasksSucceeded;
        int tasksFailed;
        long shuffleWriteBytes;
        long shuffleRecordsWritten;
        long shuffleWriteTimeNs;
        long remoteBytesRead;
        long localBytesRead;
        long remoteBlocksFetched;
        long localBlocksFetched;
        long fetchWaitMs;
        long recordsRead;
        long executorRunMs;
        long gcMs;

        StageRecord(int stageId, int attempt, String name, int tasks) {
            this.stageId = stageId;
            this.attempt = attempt;
            this.name = name;
            this.tasks = tasks;
        }

        /** map: writes shuffle output; reduce: reads shuffle input (and writes none); other: neither (e.g. a sort's sampling). */
        String kind() {
            if (shuffleRecordsWritten > 0 || shuffleWriteBytes > 0) {
                return "map";
            }
            return recordsRead > 0 || remoteBytesRead + localBytesRead > 0 ? "reduce" : "other";
        }
    }

    private final Object lock = new Object();
    private final Map<Long, StageRecord> stages = new LinkedHashMap<>();
    private final CountDownLatch fenceEnded = new CountDownLatch(1);
    private int fenceJobId = -1;

    private static long key(int stageId, int attempt) {
        return ((long) stageId << 32) | (attempt & 0xFFFFFFFFL);
    }

    private static String phase(Properties properties) {
        return properties == null ? null : properties.getProperty(PHASE);
    }

    @Override
    public void onJobStart(SparkListenerJobStart event) {
        if (FENCE.equals(phase(event.properties()))) {
            synchronized (lock) {
                fenceJobId = event.jobId();
            }
        }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd event) {
        synchronized (lock) {
            if (event.jobId() == fenceJobId) {
                fenceEnded.countDown();
            }
        }
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted event) {
        if (!MEASURED.equals(phase(event.properties()))) {
            return;
        }
        StageInfo info = event.stageInfo();
        synchronized (lock) {
            stages.putIfAbsent(key(info.stageId(), info.attemptNumber()),
                    new StageRecord(info.stageId(), info.attemptNumber(), info.name(), info.numTasks()));
        }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd event) {
        synchronized (lock) {
            StageRecord stage = stages.get(key(event.stageId(), event.stageAttemptId()));
            if (stage == null) {
                return;
            }
            if (event.taskInfo() != null && event.taskInfo().successful()) {
                stage.tasksSucceeded++;
            } else {
                stage.tasksFailed++;
            }
            TaskMetrics metrics = event.taskMetrics();
            if (metrics == null) {
                return;
            }
            ShuffleWriteMetrics write = metrics.shuffleWriteMetrics();
            stage.shuffleWriteBytes += write.bytesWritten();
            stage.shuffleRecordsWritten += write.recordsWritten();
            stage.shuffleWriteTimeNs += write.writeTime();
            ShuffleReadMetrics read = metrics.shuffleReadMetrics();
            stage.remoteBytesRead += read.remoteBytesRead();
            stage.localBytesRead += read.localBytesRead();
            stage.remoteBlocksFetched += read.remoteBlocksFetched();
            stage.localBlocksFetched += read.localBlocksFetched();
            stage.fetchWaitMs += read.fetchWaitTime();
            stage.recordsRead += read.recordsRead();
            stage.executorRunMs += metrics.executorRunTime();
            stage.gcMs += metrics.jvmGCTime();
        }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted event) {
        StageInfo info = event.stageInfo();
        synchronized (lock) {
            StageRecord stage = stages.get(key(info.stageId(), info.attemptNumber()));
            if (stage == null) {
                return;
            }
            stage.completed = true;
            if (info.submissionTime().isDefined() && info.completionTime().isDefined()) {
                stage.durationMs = (Long) info.completionTime().get() - (Long) info.submissionTime().get();
            }
            if (info.failureReason().isDefined()) {
                stage.failure = info.failureReason().get();
            }
        }
    }

    /** Waits until the fence job's end has been delivered; false after {@code timeoutMs}. */
    boolean awaitFence(long timeoutMs) throws InterruptedException {
        return fenceEnded.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** The measured stage attempts, by stage id then attempt. */
    List<StageRecord> stages() {
        synchronized (lock) {
            List<StageRecord> list = new ArrayList<>(stages.values());
            list.sort(Comparator.comparingInt((StageRecord s) -> s.stageId).thenComparingInt(s -> s.attempt));
            return list;
        }
    }
}
