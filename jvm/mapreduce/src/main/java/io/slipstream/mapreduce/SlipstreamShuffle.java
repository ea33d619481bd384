package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.shuffle.BlockFetcher;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.RawKeyValueIterator;
import org.apache.hadoop.mapred.ShuffleConsumerPlugin;
import org.apache.hadoop.mapred.TaskStatus;
import org.apache.hadoop.mapreduce.MRJobConfig;
import org.apache.hadoop.mapreduce.task.reduce.ExceptionReporter;
import org.apache.hadoop.mapreduce.task.reduce.MergeManagerImpl;
import org.apache.hadoop.mapreduce.task.reduce.Shuffle;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleClientMetrics;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleSchedulerImpl;
import org.apache.hadoop.mapreduce.task.reduce.SlipstreamBridge;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reducer's side, chosen per job by {@code mapreduce.job.reduce.shuffle.consumer.plugin.class}:
 * Hadoop's own event fetcher, scheduler and merge manager, with {@link FabricCopier}s in place of
 * its HTTP fetchers. Map outputs are merged in memory and on disk while the copy goes on (Hadoop's
 * merge threads); the reducer gets the final merging iterator. When this task's fabric node cannot
 * start, {@code slipstream.mapreduce.fallback} decides: auto runs Hadoop's HTTP shuffle (one
 * warning), never fails the task. The same setting decides for one NodeManager whose fabric port
 * does not answer ({@link FabricCopier}): auto fetches its outputs over HTTP, never reports the
 * failed connection as Hadoop's fetcher does.
 */
public class SlipstreamShuffle<K, V> implements ShuffleConsumerPlugin<K, V>, ExceptionReporter {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamShuffle.class);
    private static final int PROGRESS_FREQUENCY_MS = 2000;
    /** As Hadoop's shuffle: events asked of the ApplicationMaster per call. */
    private static final int MAX_EVENTS_TO_FETCH = 10_000;
    private static final int MIN_EVENTS_TO_FETCH = 100;
    private static final int MAX_RPC_OUTSTANDING_EVENTS = 3_000_000;
    /** Beyond the fabric's own request timeout, the longest a copier waits for any response. */
    private static final Duration RESPONSE_WAIT_SLACK = Duration.ofSeconds(30);
    /** Entries in one fabric request (two per map output: index record and bytes). */
    private static final int BLOCKS_PER_REQUEST_MAX = 256;
    private static final String SSL_ENABLED = "mapreduce.shuffle.ssl.enabled";

    private ShuffleConsumerPlugin.Context<K, V> context;
    private MapReduceConf conf;
    private FabricNode node;
    private Shuffle<K, V> http;
    private ShuffleSchedulerImpl<K, V> scheduler;
    private MergeManagerImpl<K, V> merger;
    private Throwable throwable;
    private String throwingThreadName;

    @Override
    public void init(ShuffleConsumerPlugin.Context<K, V> context) {
        this.context = context;
        JobConf jobConf = context.getJobConf();
        conf = new MapReduceConf(jobConf);
        if (context.getLocalMapFiles() != null) {
            // An uber task: its maps ran in this JVM and Hadoop reads them from local files, no network.
            useHttp(context);
            return;
        }
        if (jobConf.getBoolean(SSL_ENABLED, false)) {
            // The fabric does not encrypt: a job that asked for an encrypted shuffle gets Hadoop's.
            if (conf.fallback == MapReduceConf.Fallback.NEVER) {
                throw new IllegalStateException("slipstream: " + SSL_ENABLED + "=true but the fabric does not encrypt ("
                        + MapReduceConf.FALLBACK.key() + "=never)");
            }
            LOG.warn("slipstream: {}=true: shuffling over Hadoop's encrypted HTTP shuffle, not the fabric", SSL_ENABLED);
            context.getReporter().incrCounter(SlipstreamCounter.HTTP_FALLBACKS, 1);
            useHttp(context);
            return;
        }
        long nodeStart = System.nanoTime();
        try {
            node = conf.nodeBuilder().start();
            LOG.info("slipstream: {}: fabric node started in {} ms", context.getReduceId(), (System.nanoTime() - nodeStart) / 1_000_000);
        } catch (FabricUnavailableException | RuntimeException e) {
            if (conf.fallback == MapReduceConf.Fallback.NEVER) {
                throw new IllegalStateException("slipstream: the fabric cannot start in " + context.getReduceId() + " ("
                        + MapReduceConf.FALLBACK.key() + "=never): " + e.getMessage(), e);
            }
            LOG.warn("slipstream: the fabric cannot start in {}, shuffling over HTTP: {}", context.getReduceId(), e.toString());
            context.getReporter().incrCounter(SlipstreamCounter.HTTP_FALLBACKS, 1);
            useHttp(context);
            return;
        }
        scheduler = new ShuffleSchedulerImpl<>(jobConf, context.getStatus(), context.getReduceId(), this, context.getCopyPhase(),
                context.getShuffledMapsCounter(), context.getReduceShuffleBytes(), context.getFailedShuffleCounter());
        merger = new MergeManagerImpl<>(context.getReduceId(), jobConf, context.getLocalFS(), context.getLocalDirAllocator(),
                context.getReporter(), context.getCodec(), context.getCombinerClass(), context.getCombineCollector(),
                context.getSpilledRecordsCounter(), context.getReduceCombineInputCounter(), context.getMergedMapOutputsCounter(), this,
                context.getMergePhase(), context.getMapOutputFile());
    }

    private void useHttp(ShuffleConsumerPlugin.Context<K, V> context) {
        http = new Shuffle<>();
        http.init(context);
    }

    @Override
    public RawKeyValueIterator run() throws IOException, InterruptedException {
        if (http != null) {
            return http.run();
        }
        JobConf jobConf = context.getJobConf();
        long copyStart = System.nanoTime();
        int eventsPerReducer = Math.max(MIN_EVENTS_TO_FETCH, MAX_RPC_OUTSTANDING_EVENTS / Math.max(1, jobConf.getNumReduceTasks()));
        Thread events = SlipstreamBridge.startEventFetcher(context.getReduceId(), context.getUmbilical(), scheduler, this,
                Math.min(MAX_EVENTS_TO_FETCH, eventsPerReducer));
        int copiers = Math.max(1, jobConf.getInt(MRJobConfig.SHUFFLE_PARALLEL_COPIES, 5));
        BlockFetcher.Limits limits = copierLimits(conf, copiers);
        ShuffleClientMetrics metrics = ShuffleClientMetrics.create(context.getReduceId(), jobConf);
        Set<String> httpHosts = ConcurrentHashMap.newKeySet();
        List<FabricCopier<K, V>> started = new ArrayList<>();
        for (int i = 0; i < copiers; i++) {
            FabricCopier<K, V> copier = new FabricCopier<>(i, node, conf, limits, jobConf, context.getReduceId(),
                    context.getReduceTask().getShuffleSecret(), httpHosts, scheduler, merger, context.getReporter(), metrics, this);
            copier.start();
            started.add(copier);
        }
        try {
            while (!scheduler.waitUntilDone(PROGRESS_FREQUENCY_MS)) {
                context.getReporter().progress();
                throwIfFailed();
            }
        } finally {
            SlipstreamBridge.stopEventFetcher(events);
            for (FabricCopier<K, V> copier : started) {
                copier.shutDown();
            }
            scheduler.close();
        }
        LOG.info("slipstream: {}: copy phase {} ms", context.getReduceId(), (System.nanoTime() - copyStart) / 1_000_000);
        context.getCopyPhase().complete();
        context.getStatus().setPhase(TaskStatus.Phase.SORT);
        context.getReduceTask().statusUpdate(context.getUmbilical());
        RawKeyValueIterator merged;
        try {
            merged = merger.close();
        } catch (Throwable e) {
            throw new IOException("slipstream: error in the final merge of " + context.getReduceId(), e);
        }
        throwIfFailed();
        return merged;
    }

    /**
     * One copier's share of the reducer's bytes and requests in flight. A request asks for at most
     * a fifth of that share, not of the reducer's whole budget: with a fifth of the whole (8 MiB of
     * the default 48 MiB) a copier's share (9.6 MiB with 5 copiers) held one request at a time, so
     * the NodeManager's read and signature, the wire and the reducer's check of the response ran in
     * turn instead of overlapping (docs/mapreduce-shuffle.md, "Where the shuffle's time goes").
     */
    static BlockFetcher.Limits copierLimits(MapReduceConf conf, int copiers) {
        long bytesInFlight = Math.max(conf.maxBytesInFlight / copiers, 1 << 20);
        int requestBytes = Math.min(BlockFetcher.Limits.requestBytesFor(bytesInFlight), conf.requestBytesMax);
        return new BlockFetcher.Limits(bytesInFlight, Math.max(conf.maxRequestsInFlight / copiers, 1), requestBytes,
                BLOCKS_PER_REQUEST_MAX, conf.requestTimeout.plus(RESPONSE_WAIT_SLACK));
    }

    private synchronized void throwIfFailed() throws IOException {
        if (throwable != null) {
            throw new IOException("slipstream: error in shuffle in " + throwingThreadName, throwable);
        }
    }

    @Override
    public void close() {
        if (http != null) {
            http.close();
        }
        if (node != null) {
            node.close();
            node = null;
        }
    }

    @Override
    public synchronized void reportException(Throwable t) {
        if (throwable == null) {
            throwable = t;
            throwingThreadName = Thread.currentThread().getName();
            synchronized (scheduler) {
                scheduler.notifyAll();
            }
        }
    }
}
