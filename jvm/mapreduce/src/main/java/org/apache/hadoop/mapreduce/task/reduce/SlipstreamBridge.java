package org.apache.hadoop.mapreduce.task.reduce;

import org.apache.hadoop.mapred.TaskUmbilicalProtocol;
import org.apache.hadoop.mapreduce.TaskAttemptID;

/**
 * The one class of the plugin in Hadoop's package: {@code EventFetcher} (the thread that turns the
 * umbilical's map completion events into map locations for the scheduler) is package-private.
 * Nothing else here.
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
}
