package io.slipstream.spark;

import io.slipstream.shuffle.BlockFetchException;
import io.slipstream.shuffle.BlockFetcher;
import io.slipstream.shuffle.FetchedBlock;
import io.slipstream.shuffle.MapOutputBlock;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;

/**
 * Reads a reduce task's partitions: local blocks from this executor's files, remote ones through a
 * {@link BlockFetcher} over the fabric (bounded by {@code spark.reducer.maxSizeInFlight} and
 * {@code maxReqsInFlight}), each block deserialized as soon as it is complete while the rest are
 * on the wire. After fetching, what Spark's own reader does: aggregation, then sorting if the
 * dependency has an ordering. Fills Spark's shuffle read metrics. A block that cannot be fetched
 * raises Spark's {@link FetchFailedException}, so the scheduler recomputes the lost map outputs.
 */
final class SlipstreamShuffleReader<K, C> implements ShuffleReader<K, C> {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(SlipstreamShuffleReader.class);
    /** Corrupt blocks one reader remembers (each is fetched again once); beyond, a corrupt block fails at once. */
    private static final int CORRUPT_BLOCKS_REMEMBERED_MAX = 1024;
    /** Blocks in one request: a reduce task of a wide shuffle still sends few requests per executor. */
    private static final int BLOCKS_PER_REQUEST_MAX = 1024;
    /** Beyond the fabric's own request timeout, the longest the reader waits for any response. */
    private static final Duration RESPONSE_WAIT_SLACK = Duration.ofSeconds(30);

    private final FabricShuffleRuntime runtime;
    private final BaseShuffleHandle<K, ?, C> handle;
    private final int startMapIndex;
    private final int endMapIndex;
    private final int startPartition;
    private final int endPartition;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter readMetrics;
    private final Supplier<ShuffleReader<K, C>> sparkReader;

    /**
     * Where a block comes from, as Spark names it (for its fetch-failure report); {@code dirs}: the
     * local directories of the executor that wrote it when it is read from disk on this host (null
     * for this executor's own blocks and remote ones).
     */
    private record Origin(BlockManagerId address, ShuffleBlockId blockId, int mapIndex, String[] dirs) {}

    SlipstreamShuffleReader(FabricShuffleRuntime runtime, BaseShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex,
            int startPartition, int endPartition, TaskContext context, ShuffleReadMetricsReporter readMetrics,
            Supplier<ShuffleReader<K, C>> sparkReader) {
        this.runtime = runtime;
        this.handle = handle;
        this.startMapIndex = startMapIndex;
        this.endMapIndex = endMapIndex;
        this.startPartition = startPartition;
        this.endPartition = endPartition;
        this.context = context;
        this.readMetrics = readMetrics;
        this.sparkReader = sparkReader;
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public Iterator<Product2<K, C>> read() {
        SparkEnv env = SparkEnv.get();
        MapOutputTracker tracker = env.mapOutputTracker();
        String localExecutor = env.blockManager().blockManagerId().executorId();
        List<BlockFetcher.Wanted> local = new ArrayList<>();
        Map<InetSocketAddress, List<BlockFetcher.Wanted>> remote = new LinkedHashMap<>();
        Map<String, InetSocketAddress> addresses = new HashMap<>();
        boolean hostLocalFromDisk = HostLocalDirs.enabled(env);
        String localHost = env.blockManager().blockManagerId().host();
        Map<String, Optional<String[]>> hostLocalDirs = new HashMap<>();
        int partitions = handle.dependency().partitioner().numPartitions();
        Iterator<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> byAddress =
                tracker.getMapSizesByExecutorId(handle.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition);
        while (byAddress.hasNext()) {
            Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>> next = byAddress.next();
            BlockManagerId address = next._1();
            boolean isLocal = address.executorId().equals(localExecutor);
            String[] dirs = null;
            if (!isLocal && hostLocalFromDisk && address.host().equals(localHost)) {
                // Another executor of this host: its files, as Spark reads them (readHostLocalDisk).
                dirs = hostLocalDirs.computeIfAbsent(address.executorId(), id -> hostLocalDirsOf(env, address)).orElse(null);
                isLocal = dirs != null;
            }
            InetSocketAddress peer = null;
            if (!isLocal) {
                peer = addresses.get(address.executorId());
                if (peer == null) {
                    Optional<InetSocketAddress> found = lookup(address);
                    if (found.isEmpty()) {
                        if (runtime.conf.fallback == SlipstreamConf.Fallback.NEVER) {
                            throw new IllegalStateException("slipstream: executor " + address.executorId()
                                    + " serves no map outputs over the fabric (spark.slipstream.fallback=never)");
                        }
                        // That executor serves no fabric: read this task's blocks the way Spark does.
                        FallbackLog.once("reduce tasks that need blocks of executor " + address.executorId() + " read",
                                "that executor serves no map outputs over the fabric (it runs without it)");
                        return sparkReader.get().read();
                    }
                    peer = found.get();
                    addresses.put(address.executorId(), peer);
                }
            }
            Iterator<Tuple3<BlockId, Object, Object>> blocks = next._2().iterator();
            while (blocks.hasNext()) {
                Tuple3<BlockId, Object, Object> block = blocks.next();
                if (!(block._1() instanceof ShuffleBlockId id)) {
                    // Not a plain map-output block (e.g. push-based shuffle's merged chunks): the fabric serves none.
                    String what = "a block of type " + block._1().getClass().getSimpleName() + " (" + block._1() + ")";
                    if (runtime.conf.fallback == SlipstreamConf.Fallback.NEVER) {
                        throw new IllegalStateException("slipstream: " + what + " cannot be fetched over the fabric, which"
                                + " serves map outputs only (spark.slipstream.fallback=never)");
                    }
                    FallbackLog.once("reduce tasks with blocks of type " + block._1().getClass().getSimpleName() + " read",
                            "the fabric serves map outputs only (" + block._1() + ")");
                    return sparkReader.get().read();
                }
                long expectedBytes = (Long) block._2();
                BlockFetcher.Wanted wanted = new BlockFetcher.Wanted(new MapOutputBlock(id.shuffleId(), id.mapId(), id.reduceId()),
                        expectedBytes, runtime.conf.blockBytesBound(expectedBytes, partitions),
                        new Origin(address, id, (Integer) block._3(), dirs));
                if (isLocal) {
                    local.add(wanted);
                } else {
                    remote.computeIfAbsent(peer, key -> new ArrayList<>()).add(wanted);
                }
            }
        }
        SlipstreamConf conf = runtime.conf;
        BlockFetcher fetcher = new BlockFetcher(runtime.node, runtime.authenticator,
                new BlockFetcher.Limits(conf.maxBytesInFlight, conf.maxRequestsInFlight, conf.requestBytesMax,
                        BLOCKS_PER_REQUEST_MAX, conf.requestTimeout.plus(RESPONSE_WAIT_SLACK)),
                remote);
        context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) done -> fetcher.close());
        fetcher.start();

        ShuffleDependency<K, ?, C> dependency = handle.dependency();
        Records records = new Records(fetcher, local, dependency.serializer().newInstance(), env.serializerManager());
        InterruptibleIterator<Tuple2<Object, Object>> interruptible = new InterruptibleIterator<>(context, records);

        Iterator aggregated;
        if (dependency.aggregator().isDefined()) {
            Aggregator aggregator = dependency.aggregator().get();
            aggregated = dependency.mapSideCombine()
                    ? aggregator.combineCombinersByKey((Iterator) interruptible, context)
                    : aggregator.combineValuesByKey((Iterator) interruptible, context);
        } else {
            aggregated = interruptible;
        }
        Iterator result = aggregated;
        if (dependency.keyOrdering().isDefined()) {
            ExternalSorter sorter = newSorter(context, dependency.keyOrdering(), dependency.serializer());
            result = sorter.insertAllAndUpdateMetrics(aggregated);
        }
        if (result instanceof InterruptibleIterator) {
            return result;
        }
        return new InterruptibleIterator<>(context, result);
    }

    /** Another executor's local directories; empty (its blocks then go over the fabric, said once) when they cannot be had. */
    private static Optional<String[]> hostLocalDirsOf(SparkEnv env, BlockManagerId address) {
        try {
            return Optional.of(HostLocalDirs.of(env, address));
        } catch (Exception e) {
            LOG.warn("slipstream: the local directories of executor {} on this host are unknown ({}); its blocks go over the fabric",
                    address.executorId(), e.toString());
            return Optional.empty();
        }
    }

    private Optional<InetSocketAddress> lookup(BlockManagerId address) {
        try {
            return runtime.directoryClient.lookup(address.executorId());
        } catch (RuntimeException e) {
            // The driver's directory does not answer: as for a lost executor, let Spark decide.
            throw sneaky(new FetchFailedException(address, handle.shuffleId(), -1L, -1, startPartition,
                    "slipstream: cannot look up executor " + address.executorId() + ": " + e.getMessage(), e));
        }
    }

    /**
     * ExternalSorter(context, aggregator, partitioner, ordering, serializer[, row checksums]): Spark
     * 4.2 added the last parameter, so the constructor is found by its shape rather than linked.
     */
    @SuppressWarnings("rawtypes")
    private static ExternalSorter newSorter(TaskContext context, Option<?> ordering, Serializer serializer) {
        for (Constructor<?> constructor : ExternalSorter.class.getConstructors()) {
            Class<?>[] types = constructor.getParameterTypes();
            if (types.length < 5 || types[0] != TaskContext.class || types[4] != Serializer.class) {
                continue;
            }
            Object[] arguments = new Object[types.length];
            arguments[0] = context;
            arguments[1] = Option.empty();
            arguments[2] = Option.empty();
            arguments[3] = ordering;
            arguments[4] = serializer;
            boolean usable = true;
            for (int i = 5; i < types.length; i++) {
                if (!types[i].isArray()) {
                    usable = false;
                    break;
                }
                arguments[i] = java.lang.reflect.Array.newInstance(types[i].getComponentType(), 0);
            }
            if (!usable) {
                continue;
            }
            try {
                return (ExternalSorter) constructor.newInstance(arguments);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot create Spark's ExternalSorter", e);
            }
        }
        throw new IllegalStateException("no usable ExternalSorter constructor in this Spark version");
    }

    /** The records of every block, local ones first (remote requests are already on the wire), then remote ones as they complete. */
    private final class Records extends AbstractIterator<Tuple2<Object, Object>> {
        private final BlockFetcher fetcher;
        private final List<BlockFetcher.Wanted> local;
        private final SerializerInstance serializer;
        private final SerializerManager serializerManager;
        private int nextLocal;
        private Iterator<Tuple2<Object, Object>> current;
        private boolean finished;
        private long fetchWaitMsReported;
        /** Remote blocks found corrupt once (fetched again; the second time is a fetch failure). */
        private final java.util.Set<BlockId> corrupted = new java.util.HashSet<>();

        Records(BlockFetcher fetcher, List<BlockFetcher.Wanted> local, SerializerInstance serializer,
                SerializerManager serializerManager) {
            this.fetcher = fetcher;
            this.local = local;
            this.serializer = serializer;
            this.serializerManager = serializerManager;
        }

        @Override
        public boolean hasNext() {
            while (current == null || !current.hasNext()) {
                if (finished) {
                    return false;
                }
                if (!nextBlock()) {
                    finished = true;
                    fetcher.close();
                    context.taskMetrics().mergeShuffleReadMetrics();
                    return false;
                }
            }
            return true;
        }

        @Override
        public Tuple2<Object, Object> next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            readMetrics.incRecordsRead(1);
            return current.next();
        }

        private boolean nextBlock() {
            if (nextLocal < local.size()) {
                return nextLocalBlock((Origin) local.get(nextLocal++).tag());
            }
            while (fetcher.hasNext()) {
                FetchedBlock block;
                try {
                    block = fetcher.next();
                } catch (BlockFetchException e) {
                    Origin origin = e.wanted() == null ? null : (Origin) e.wanted().tag();
                    throw sneaky(fetchFailed(origin, e.getMessage(), e));
                } finally {
                    long waitMs = TimeUnit.NANOSECONDS.toMillis(fetcher.fetchWaitNanos());
                    readMetrics.incFetchWaitTime(waitMs - fetchWaitMsReported);
                    fetchWaitMsReported = waitMs;
                }
                readMetrics.incRemoteBlocksFetched(1);
                readMetrics.incRemoteBytesRead(block.bytes());
                runtime.readCounters.add(block.bytes());
                if (openRemote(block)) {
                    return true;
                }
                // Corrupt the first time: it is on its way again.
            }
            return false;
        }

        private boolean nextLocalBlock(Origin origin) {
            SlipstreamConf conf = runtime.conf;
            InputStream raw;
            ManagedBuffer buffer;
            try {
                buffer = runtime.localBlocks().getBlockData(origin.blockId(), Option.apply(origin.dirs()));
                readMetrics.incLocalBlocksFetched(1);
                readMetrics.incLocalBytesRead(buffer.size());
                raw = buffer.createInputStream();
            } catch (Exception e) {
                throw sneaky(fetchFailed(origin, "local block unreadable: " + e, e));
            }
            InputStream wrapped;
            try {
                wrapped = serializerManager.wrapStream(origin.blockId(), raw);
                if (wrapped != raw && conf.detectCorrupt && conf.detectCorruptUseExtraMemory) {
                    wrapped = org.apache.spark.util.Utils.copyStreamUpTo(wrapped, conf.maxBytesInFlight / 3);
                }
            } catch (Exception thrown) {
                // Scala's methods declare no exceptions: IOException is what Spark treats as corruption.
                IOException e = asIOException(thrown);
                // As Spark: a local (file) block is not fetched again.
                closeQuietly(raw);
                throw sneaky(fetchFailed(origin, "local block corrupt: " + e, e));
            }
            InputStream stream = wrapped;
            if (wrapped != raw && conf.detectCorrupt) {
                stream = new CorruptBlocks.DetectingInputStream(wrapped, e -> {
                    closeQuietly(raw);
                    String diagnosis = null;
                    if (conf.checksumEnabled) {
                        try {
                            long checksum = CorruptBlocks.checksum(buffer.createInputStream(), conf.checksumAlgorithm);
                            diagnosis = CorruptBlocks.diagnosisMessage(origin.blockId(), SparkEnv.get().blockManager()
                                    .diagnoseShuffleBlockCorruption(origin.blockId(), checksum, conf.checksumAlgorithm).name(),
                                    conf.checksumAlgorithm);
                        } catch (Exception diagnosisFailure) {
                            diagnosis = CorruptBlocks.diagnosisMessage(origin.blockId(), null, conf.checksumAlgorithm);
                        }
                        LOG.error("slipstream: {}", diagnosis);
                    }
                    return fetchFailed(origin, diagnosis != null ? diagnosis : e.toString(), e);
                });
            }
            current = serializer.deserializeStream(stream).asKeyValueIterator();
            return true;
        }

        /**
         * Opens a remote block for deserialization; false when it was corrupt for the first time
         * and is being fetched again (Spark's reader does the same with detectCorrupt).
         */
        private boolean openRemote(FetchedBlock block) {
            SlipstreamConf conf = runtime.conf;
            Origin origin = (Origin) block.tag();
            BlockId blockId = origin.blockId();
            boolean seenCorrupt = corrupted.contains(blockId);
            // The second time, the checksum of what came is taken now: the bytes go back to the pool when the stream closes.
            long checksum = seenCorrupt && conf.checksumEnabled ? CorruptBlocks.checksum(block.data(), conf.checksumAlgorithm) : 0;
            InputStream raw = block.stream();
            InputStream wrapped;
            try {
                wrapped = serializerManager.wrapStream(blockId, raw);
                if (wrapped != raw && conf.detectCorrupt && conf.detectCorruptUseExtraMemory) {
                    wrapped = org.apache.spark.util.Utils.copyStreamUpTo(wrapped, conf.maxBytesInFlight / 3);
                }
            } catch (Exception thrown) {
                IOException e = asIOException(thrown);
                if (!seenCorrupt && corrupted.size() < CORRUPT_BLOCKS_REMEMBERED_MAX) {
                    LOG.warn("slipstream: got a corrupted block {} from {}, fetching it again: {}", blockId, block.peer(), e.toString());
                    corrupted.add(blockId);
                    closeQuietly(raw);
                    fetcher.fetchAgain(block);
                    return false;
                }
                String diagnosis = conf.checksumEnabled ? diagnose(block, blockId, checksum) : null;
                closeQuietly(raw);
                throw sneaky(fetchFailed(origin, diagnosis != null ? diagnosis : e.toString(), e));
            }
            InputStream stream = wrapped;
            if (wrapped != raw && conf.detectCorrupt) {
                stream = new CorruptBlocks.DetectingInputStream(wrapped, e -> {
                    // Never fetched again: records of it may already be consumed downstream (as Spark).
                    String diagnosis = null;
                    if (conf.checksumEnabled) {
                        long received = seenCorrupt ? checksum : checksumIfReadable(block, conf.checksumAlgorithm);
                        diagnosis = diagnose(block, blockId, received);
                    }
                    closeQuietly(raw);
                    return fetchFailed(origin, diagnosis != null ? diagnosis : e.toString(), e);
                });
            }
            current = serializer.deserializeStream(stream).asKeyValueIterator();
            return true;
        }

        private long checksumIfReadable(FetchedBlock block, String algorithm) {
            try {
                return CorruptBlocks.checksum(block.data(), algorithm);
            } catch (IllegalStateException released) {
                return 0;
            }
        }

        /** Asks the executor that served {@code block} why it is corrupt; Spark's words for the answer (logged as Spark logs it). */
        private String diagnose(FetchedBlock block, BlockId blockId, long checksum) {
            String algorithm = runtime.conf.checksumAlgorithm;
            String cause;
            try {
                cause = fetcher.diagnose(block, checksum, algorithm);
            } catch (RuntimeException e) {
                LOG.warn("slipstream: unable to diagnose the corruption cause of the corrupted block {}: {}", blockId, e.toString());
                cause = null;
            }
            String diagnosis = CorruptBlocks.diagnosisMessage(blockId, cause, algorithm);
            LOG.error("slipstream: {}", diagnosis);
            return diagnosis;
        }

        private FetchFailedException fetchFailed(Origin origin, String message, Throwable cause) {
            if (origin == null) {
                return new FetchFailedException(null, handle.shuffleId(), -1L, -1, startPartition, "slipstream: " + message, cause);
            }
            ShuffleBlockId id = origin.blockId();
            return new FetchFailedException(origin.address(), id.shuffleId(), id.mapId(), origin.mapIndex(), id.reduceId(),
                    "slipstream: " + message, cause);
        }
    }

    /** {@code thrown} if it is an IOException; anything else goes on up. */
    private static IOException asIOException(Exception thrown) {
        if (thrown instanceof IOException e) {
            return e;
        }
        throw sneaky(thrown);
    }

    private static void closeQuietly(InputStream in) {
        try {
            in.close();
        } catch (IOException | RuntimeException e) {
            // Closing only gives memory back; nothing to report.
        }
    }

    /** Throws a checked exception through Scala's unchecked iterator interface, as Spark's own reader does. */
    @SuppressWarnings("unchecked")
    static <E extends Throwable> RuntimeException sneaky(Throwable exception) throws E {
        throw (E) exception;
    }
}
