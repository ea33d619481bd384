package io.slipstream.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricNode;
import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import javax.crypto.SecretKey;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalDirAllocator;
import org.apache.hadoop.mapred.Counters;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.MROutputFiles;
import org.apache.hadoop.mapred.Reporter;
import org.apache.hadoop.mapred.TaskStatus;
import org.apache.hadoop.mapreduce.MRConfig;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.security.token.JobTokenSecretManager;
import org.apache.hadoop.mapreduce.task.reduce.MergeManagerImpl;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleClientMetrics;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleSchedulerImpl;
import org.apache.hadoop.util.Progress;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A copier facing a NodeManager where nothing listens (a lost host, or one without the plugin):
 * with Hadoop's real scheduler and merge manager, a fabric node, and no listener on the fabric or
 * HTTP port. With fallback never the failure must reach the scheduler exactly as Hadoop's HTTP
 * fetcher reports a refused connection (a host failure, every map failed as a connection error
 * and so reported to the ApplicationMaster at once, Hadoop's IO_ERROR counter); with fallback auto
 * the copier must hand that NodeManager to Hadoop's HTTP fetcher once, which then reports it.
 */
class CopierFailureTest {
    private static final long WAIT_MS = 30_000;

    @TempDir
    Path localDir;

    private FabricNode node;
    private FabricCopier<Object, Object> copier;
    private MergeManagerImpl<Object, Object> merger;
    private final Counters counters = new Counters();
    private final AtomicReference<Throwable> reported = new AtomicReference<>();
    private ShuffleSchedulerImpl<Object, Object> scheduler;
    private TaskStatus status;
    /** The NodeManager as the scheduler names it: {@code host:shufflePort}. */
    private String host;

    @AfterEach
    void close() throws Throwable {
        if (copier != null) {
            copier.shutDown();
        }
        if (scheduler != null) {
            scheduler.close();
        }
        if (merger != null) {
            merger.close();
        }
        if (node != null) {
            node.close();
        }
    }

    @Test
    void fallback_never_reports_a_refused_connection_as_hadoops_fetcher_does() throws Exception {
        TaskAttemptID map = startCopierAgainstNothing("never");
        awaitFetchFailure(map);
        // (1 with or without Hadoop's hostFailed: copyFailed counts a first host failure itself.)
        assertEquals(1, hostFailureCount());
        assertTrue(status.getFetchFailedMaps().contains(map),
                "a refused connection is reported to the ApplicationMaster at once");
        assertEquals(1, counters.findCounter("Shuffle Errors", "IO_ERROR").getValue(), "Hadoop's fetcher counts every failed fetch");
        assertEquals(0, counters.findCounter(SlipstreamCounter.HTTP_FALLBACK_HOSTS).getValue());
        assertOnlyHadoopsHealthCheckFailed();
    }

    @Test
    void fallback_auto_fetches_from_a_nodemanager_without_a_fabric_over_http() throws Exception {
        TaskAttemptID map = startCopierAgainstNothing("auto");
        awaitFetchFailure(map);
        assertEquals(1, counters.findCounter(SlipstreamCounter.HTTP_FALLBACK_HOSTS).getValue());
        // Reported by Hadoop's HTTP fetcher (nothing listens on the HTTP port either), not by the copier.
        assertEquals(1, hostFailureCount());
        assertEquals(1, counters.findCounter("Shuffle Errors", "IO_ERROR").getValue());
        assertTrue(status.getFetchFailedMaps().contains(map));
        assertOnlyHadoopsHealthCheckFailed();
    }

    /** A copier of reduce 0 with one map output known at a NodeManager whose ports nobody listens on. */
    private TaskAttemptID startCopierAgainstNothing(String fallback) throws Exception {
        JobConf job = new JobConf();
        job.set(MRConfig.LOCAL_DIR, localDir.toString());
        job.setNumMapTasks(1);
        job.set("slipstream.mapreduce.fallback", fallback);
        job.setInt("slipstream.mapreduce.port", freePort());
        job.setInt("slipstream.mapreduce.requestTimeout.ms", 5_000);
        job.set("slipstream.mapreduce.buffer.cap", "32m");
        job.set("slipstream.mapreduce.maxBytesInFlight", "4m");
        // Hadoop's HTTP fetcher tries a refused connection again for this long (3 minutes by default).
        job.setInt("mapreduce.reduce.shuffle.connect.timeout", 2_000);
        MapReduceConf conf = new MapReduceConf(job);
        TaskAttemptID reduceId = new TaskAttemptID("1700000000000", 1, TaskType.REDUCE, 0, 0);
        // As the umbilical's completion events name it (Hadoop's scheduler casts it to the old API's class).
        TaskAttemptID map = new org.apache.hadoop.mapred.TaskAttemptID("1700000000000", 1, TaskType.MAP, 0, 0);
        Reporter reporter = new CountingReporter(counters);
        status = newReduceStatus();
        org.apache.hadoop.mapreduce.task.reduce.ExceptionReporter exceptions = t -> reported.compareAndSet(null, t);
        scheduler = new ShuffleSchedulerImpl<>(job, status, reduceId, exceptions, new Progress(), counters.findCounter("t", "shuffled"),
                counters.findCounter("t", "bytes"), counters.findCounter("t", "failed"));
        MROutputFiles files = new MROutputFiles();
        files.setConf(job);
        merger = new MergeManagerImpl<>(reduceId, job, FileSystem.getLocal(job), new LocalDirAllocator(MRConfig.LOCAL_DIR), reporter,
                null, null, null, counters.findCounter("t", "spilled"), counters.findCounter("t", "combine"),
                counters.findCounter("t", "merged"), exceptions, new Progress(), files);
        int shufflePort = freePort();
        host = "127.0.0.1:" + shufflePort;
        scheduler.addKnownMapOutput(host, "http://" + host + "/mapOutput?job=job_1700000000000_0001&reduce=0&map=", map);
        node = conf.nodeBuilder().start();
        SecretKey key = JobTokenSecretManager.createSecretKey("a job's shuffle secret".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        Set<String> httpHosts = ConcurrentHashMap.newKeySet();
        copier = new FabricCopier<>(0, node, conf, SlipstreamShuffle.copierLimits(conf, 1), job, reduceId, key, httpHosts, scheduler,
                merger, reporter, ShuffleClientMetrics.create(reduceId, job), exceptions);
        copier.start();
        return map;
    }

    /** Waits (bounded) until the scheduler has one failure of {@code map}; the next try comes after Hadoop's 13 s penalty. */
    private void awaitFetchFailure(TaskAttemptID map) throws Exception {
        Method count = ShuffleSchedulerImpl.class.getDeclaredMethod("fetchFailureCount", TaskAttemptID.class);
        count.setAccessible(true);
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
        while ((int) count.invoke(scheduler, map) < 1) {
            assertTrue(System.nanoTime() < deadline, "no fetch failure of " + map + " reported within " + WAIT_MS + " ms; counters "
                    + counters + ", exception " + reported.get() + ", copier at " + java.util.Arrays.toString(copier.getStackTrace()));
            Thread.sleep(20);
        }
        assertEquals(1, (int) count.invoke(scheduler, map));
    }

    /**
     * Nothing failed the reduce, or only Hadoop's reducer health check, which gives up on a reduce
     * whose every map failed to come (as it does behind its own fetcher).
     */
    private void assertOnlyHadoopsHealthCheckFailed() {
        Throwable failure = reported.get();
        assertTrue(failure == null || String.valueOf(failure.getMessage()).contains("MAX_FAILED_UNIQUE_FETCHES"), String.valueOf(failure));
    }

    private int hostFailureCount() throws Exception {
        Method count = ShuffleSchedulerImpl.class.getDeclaredMethod("hostFailureCount", String.class);
        count.setAccessible(true);
        return (int) count.invoke(scheduler, host);
    }

    /** Hadoop's reduce task status (its class is package-private). */
    static TaskStatus newReduceStatus() throws Exception {
        var constructor = Class.forName("org.apache.hadoop.mapred.ReduceTaskStatus").getDeclaredConstructor();
        constructor.setAccessible(true);
        return (TaskStatus) constructor.newInstance();
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /** A task's reporter that keeps its counters (as Hadoop's TaskReporter does), with no umbilical. */
    static final class CountingReporter implements Reporter {
        private final Counters counters;

        CountingReporter(Counters counters) {
            this.counters = counters;
        }

        @Override
        public void setStatus(String status) {}

        @Override
        public Counters.Counter getCounter(Enum<?> name) {
            return counters.findCounter(name);
        }

        @Override
        public Counters.Counter getCounter(String group, String name) {
            return counters.findCounter(group, name);
        }

        @Override
        public void incrCounter(Enum<?> key, long amount) {
            counters.findCounter(key).increment(amount);
        }

        @Override
        public void incrCounter(String group, String counter, long amount) {
            counters.findCounter(group, counter).increment(amount);
        }

        @Override
        public InputSplit getInputSplit() {
            throw new UnsupportedOperationException("a reduce task has no input split");
        }

        @Override
        public float getProgress() {
            return 0;
        }

        @Override
        public void progress() {}
    }
}
