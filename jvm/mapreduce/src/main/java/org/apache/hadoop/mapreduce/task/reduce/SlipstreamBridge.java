package org.apache.hadoop.mapreduce.task.reduce;

import java.io.IOException;
import javax.crypto.SecretKey;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;
import org.apache.hadoop.mapred.TaskUmbilicalProtocol;
import org.apache.hadoop.mapreduce.TaskAttemptID;

/**
 * The one class of the plugin in Hadoop's package: {@code EventFetcher} (the thread that turns the
 * umbilical's map completion events into map locations for the scheduler) is package-private, and
 * so is {@code Fetcher.copyFromHost} (one pass of Hadoop's HTTP fetcher over one NodeManager), which
 * a reducer uses for a NodeManager it cannot reach over the fabric (per-host fallback). Nothing else
 * here.
 */
public final class SlipstreamBridge {
    private SlipstreamBridge() {}

    /** Starts Hadoop's own map-completion event fetcher for {@code scheduler}; stop it with {@link #stopEventFetcher}. */
    public static <K, V> Thread startEventFetcher(TaskAttemptID reduceId, TaskUmbilicalProtocol umbilical,
            ShuffleScheduler<K, V> scheduler, ExceptionReporter reporter, int maxEventsToFetch) {
        EventFetcher<K, V> fetcher = new EventFetcher<>(reduceId, umbilical, scheduler, reporter, maxEventsToFetch);
        fetcher.start();
        return fetcher;
    }

    public static void stopEventFetcher(Thread fetcher) {
        ((EventFetcher<?, ?>) fetcher).shutDown();
    }

    /**
     * Hadoop's HTTP fetcher, not started: {@link #copyOverHttp} runs its passes on the caller's
     * thread, one NodeManager at a time. Close it with {@link #closeHttpFetcher}.
     */
    public static <K, V> Thread httpFetcher(JobConf job, TaskAttemptID reduceId, ShuffleSchedulerImpl<K, V> scheduler,
            MergeManager<K, V> merger, Reporter reporter, ShuffleClientMetrics metrics, ExceptionReporter exceptionReporter,
            SecretKey shuffleKey) {
        return new Fetcher<>(job, reduceId, scheduler, merger, reporter, metrics, exceptionReporter, shuffleKey);
    }

    /**
     * One pass of Hadoop's HTTP fetcher over {@code host}'s known map outputs: what it copies goes
     * to the merge manager, what fails is reported to the scheduler, all as the HTTP shuffle does.
     */
    public static void copyOverHttp(Thread fetcher, MapHost host) throws IOException {
        ((Fetcher<?, ?>) fetcher).copyFromHost(host);
    }

    public static void closeHttpFetcher(Thread fetcher) throws InterruptedException {
        ((Fetcher<?, ?>) fetcher).shutDown();
    }
}
