package io.slipstream.spark;

import io.slipstream.fabric.FabricUnavailableException;
import java.net.InetSocketAddress;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's sort shuffle with reducers fetching over the fabric:
 * {@code spark.shuffle.manager=io.slipstream.spark.SlipstreamShuffleManager}.
 *
 * <p>Map side: Spark's own sort-based writers and file layout, unchanged; each committed map output
 * is also read into the prefetch cache. Each executor serves its map outputs through a fabric node
 * registered in a directory the driver keeps. Reduce side: {@link SlipstreamShuffleReader}.
 *
 * <p>When the fabric cannot serve (it cannot start, Spark's network encryption is on, a peer has no
 * fabric server), {@code spark.slipstream.fallback} decides: {@code auto} reads through Spark's
 * own transfer service with one warning, {@code never} fails fast, {@code always} never uses the
 * fabric. It extends SortShuffleManager (not only implements ShuffleManager) because Spark 4.3
 * accepts only that, and takes the block resolver from it (its constructor changes across versions).
 */
public class SlipstreamShuffleManager extends SortShuffleManager {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamShuffleManager.class);

    /** How long an executor's starter thread waits for the block manager before leaving the start to the first task. */
    private static final java.time.Duration EAGER_START_WAIT = java.time.Duration.ofMinutes(2);
    private static final java.time.Duration EAGER_START_POLL = java.time.Duration.ofMillis(50);

    private final SparkConf sparkConf;
    private final boolean isDriver;
    private final SlipstreamConf conf;
    private final Object startLock = new Object();
    /** Executors: started at the first task (SparkEnv is not ready in the constructor). */
    private volatile boolean startAttempted;
    private volatile FabricShuffleRuntime runtime;
    /** Under fallback=never: why the fabric could not start here. */
    private volatile IllegalStateException startFailure;

    public SlipstreamShuffleManager(SparkConf sparkConf, boolean isDriver) {
        super(sparkConf);
        this.sparkConf = sparkConf;
        this.isDriver = isDriver;
        this.conf = new SlipstreamConf(sparkConf);
        if (conf.fallback == SlipstreamConf.Fallback.ALWAYS) {
            LOG.info("slipstream: spark.slipstream.fallback=always: shuffle blocks travel through Spark's own transfer service");
            startAttempted = true;
            return;
        }
        if (conf.networkCrypto) {
            String why = "spark.network.crypto.enabled is on and the fabric does not encrypt: shuffle data must not travel in clear";
            if (conf.fallback == SlipstreamConf.Fallback.NEVER) {
                throw new IllegalStateException("slipstream: " + why + " (spark.slipstream.fallback=never)");
            }
            if (isDriver) {
                LOG.warn("slipstream: {}; using Spark's encrypted transfer service instead", why);
            }
            startAttempted = true;
            return;
        }
        if (isDriver) {
            startDriver();
        } else {
            startWhenExecutorIsReady();
        }
    }

    /**
     * Executors: the fabric needs the block manager's identity, which does not exist yet when Spark
     * constructs the shuffle manager. A daemon thread starts it as soon as it does, so the first
     * map task does not pay for UCX's start; a task that comes first starts it itself (runtime()).
     */
    private void startWhenExecutorIsReady() {
        Thread starter = new Thread(() -> {
            long deadline = System.nanoTime() + EAGER_START_WAIT.toNanos();
            while (!startAttempted && System.nanoTime() < deadline) {
                SparkEnv env = SparkEnv.get();
                if (env != null && env.blockManager() != null && env.blockManager().blockManagerId() != null) {
                    try {
                        runtime();
                    } catch (RuntimeException e) {
                        // fallback=never: the tasks that need the fabric fail with this, not this thread.
                    }
                    return;
                }
                try {
                    Thread.sleep(EAGER_START_POLL.toMillis());
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "slipstream-start");
        starter.setDaemon(true);
        starter.start();
    }

    /** Spark instantiates shuffle managers with (SparkConf, boolean) when it can; this one is for older callers. */
    public SlipstreamShuffleManager(SparkConf sparkConf) {
        this(sparkConf, false);
    }

    private void startDriver() {
        startAttempted = true;
        String host = !conf.bindAddress.isEmpty() ? conf.bindAddress
                : sparkConf.get("spark.driver.bindAddress", sparkConf.get("spark.driver.host", "127.0.0.1"));
        try {
            runtime = FabricShuffleRuntime.startDriver(conf, host);
            InetSocketAddress address = runtime.node.localAddress();
            // The executors get the driver's configuration when they start, this included.
            sparkConf.set(SlipstreamConf.DIRECTORY_ADDRESS, address.getAddress().getHostAddress() + ":" + address.getPort());
            LOG.info("slipstream: shuffle over the fabric ({} transport); peer directory at {}", conf.transport, address);
            if (conf.externalShuffleService) {
                LOG.info("slipstream: spark.shuffle.service.enabled: blocks of live executors come over the fabric; blocks of"
                        + " lost executors (the directory says gone) from the external shuffle service through Spark's own"
                        + " client, so Spark keeps their map outputs and does not recompute them");
            }
        } catch (FabricUnavailableException | RuntimeException e) {
            unavailable("the fabric cannot start on the driver", e);
        }
    }

    /** The executor's runtime, started on first use; null when this executor reads through Spark's transfer service. */
    FabricShuffleRuntime runtime() {
        if (startAttempted) {
            return startedOrFail();
        }
        synchronized (startLock) {
            if (startAttempted) {
                return startedOrFail();
            }
            startAttempted = true;
            SparkEnv env = SparkEnv.get();
            String directory = env.conf().get(SlipstreamConf.DIRECTORY_ADDRESS, "");
            if (directory.isEmpty()) {
                unavailable("the driver published no peer directory (it runs without the fabric)", null);
                return null;
            }
            BlockManagerId self = env.blockManager().blockManagerId();
            String host = !conf.bindAddress.isEmpty() ? conf.bindAddress : self.host();
            int colon = directory.lastIndexOf(':');
            InetSocketAddress directoryAddress = new InetSocketAddress(directory.substring(0, colon),
                    Integer.parseInt(directory.substring(colon + 1)));
            try {
                runtime = FabricShuffleRuntime.startExecutor(conf, host, directoryAddress, self.executorId(), shuffleBlockResolver());
            } catch (FabricUnavailableException | RuntimeException e) {
                unavailable("the fabric cannot start on executor " + self.executorId(), e);
            }
            return runtime;
        }
    }

    /** The runtime; under fallback=never, a start that failed fails every task that asks, not only the first. */
    private FabricShuffleRuntime startedOrFail() {
        IllegalStateException failure = startFailure;
        if (failure != null) {
            throw new IllegalStateException(failure.getMessage(), failure);
        }
        return runtime;
    }

    /** Under fallback=never, fails; under auto, warns once (the caller then uses Spark's transfer service). */
    private void unavailable(String why, Throwable cause) {
        if (conf.fallback == SlipstreamConf.Fallback.NEVER) {
            startFailure = new IllegalStateException("slipstream: " + why + " (spark.slipstream.fallback=never)"
                    + (cause == null ? "" : ": " + cause), cause);
            throw startFailure;
        }
        LOG.warn("slipstream: {}{}; shuffle blocks travel through Spark's own transfer service (spark.slipstream.fallback=auto)",
                why, cause == null ? "" : ": " + cause);
    }

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
            ShuffleWriteMetricsReporter metrics) {
        FabricShuffleRuntime started = runtime();
        ShuffleWriter<K, V> writer = super.getWriter(handle, mapId, context, metrics);
        if (started == null || started.cache == null) {
            return writer;
        }
        return new PrefetchingShuffleWriter<>(writer, started, handle.shuffleId(), mapId);
    }

    @Override
    public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex, int startPartition,
            int endPartition, TaskContext context, ShuffleReadMetricsReporter metrics) {
        FabricShuffleRuntime started = runtime();
        @SuppressWarnings("unchecked")
        BaseShuffleHandle<K, ?, C> base = (BaseShuffleHandle<K, ?, C>) handle;
        if (started == null) {
            // No fabric in this process: unavailable() said why, once.
            return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        if (isDriver) {
            FallbackLog.onceInfo("reduce tasks in the driver (local mode) read",
                    "the driver serves no map outputs and every block is local to it");
            return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        if (base.dependency().isShuffleMergeFinalizedMarked()) {
            String why = "push-based shuffle's merged blocks are served by the external shuffle service, not by the fabric";
            if (conf.fallback == SlipstreamConf.Fallback.NEVER) {
                throw new IllegalStateException("slipstream: " + why + " (spark.slipstream.fallback=never)");
            }
            FallbackLog.once("reduce tasks of push-merged shuffles read", why);
            return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        return new SlipstreamShuffleReader<>(started, base, startMapIndex, endMapIndex, startPartition, endPartition, context,
                metrics, () -> super.<K, C>getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics));
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        FabricShuffleRuntime started = runtime;
        if (started != null) {
            started.removeShuffle(shuffleId);
        }
        return super.unregisterShuffle(shuffleId);
    }

    @Override
    public void stop() {
        FabricShuffleRuntime started = runtime;
        runtime = null;
        if (started != null) {
            started.close();
        }
        super.stop();
    }

    /** Whether this process moves shuffle blocks over the fabric (for tests and the benchmark). */
    public boolean fabricActive() {
        return runtime != null;
    }

    /** Driver: executors registered in the peer directory (for tests and the benchmark). */
    public int registeredExecutors() {
        FabricShuffleRuntime started = runtime;
        return started == null || started.directory == null ? 0 : started.directory.size();
    }
}
