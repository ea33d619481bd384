package io.slipstream.spark;

import io.slipstream.shuffle.BlockFetchException;
import io.slipstream.shuffle.BlockFetcher;
import io.slipstream.shuffle.FetchedBlock;
import io.slipstream.shuffle.MapOutputBlock;
import io.slipstream.shuffle.PeerDirectoryClient;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.Set;
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
    /**
     * With the external shuffle service, how long a reducer whose fabric peer failed waits for the driver to learn that
     * the peer's executor is gone: a killed executor's connection fails at once, and the driver hears of the loss a
     * moment later (the worker reports the exit, then the block manager master drops it). Spark's own fetch retries a
     * failed block after 5 s (spark.shuffle.io.retryWait); a live peer's failure is reported after this wait.
     */
    static final Duration GONE_CONFIRM_WAIT = Duration.ofSeconds(5);
    private static final long GONE_CONFIRM_POLL_MS = 100;
    private static final java.util.concurrent.atomic.AtomicBoolean SERVICE_LOGGED = new java.util.concurrent.atomic.AtomicBoolean();
    /** A gone executor's blocks, at its host's external shuffle service: Spark's map status names it (port included). */
    private static final ServiceBlocks.Addressing SERVICE_ADDRESSING = new ServiceBlocks.Addressing() {
        @Override
        public BlockManagerId serviceOf(BlockFetcher.Wanted wanted) {
            return ((Origin) wanted.tag()).address();
        }

        @Override
        public String blockName(BlockFetcher.Wanted wanted) {
            return ((Origin) wanted.tag()).blockId().name();
        }
    };

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
        Map<InetSocketAddress, String> executorOfPeer = new HashMap<>();
        Set<String> goneExecutors = new java.util.HashSet<>();
        SlipstreamConf conf = runtime.conf;
        ServiceBlocks service = conf.externalShuffleService ? new ServiceBlocks(env.blockManager().blockStoreClient(),
                SERVICE_ADDRESSING, conf.maxBytesInFlight, conf.requestTimeout.plus(RESPONSE_WAIT_SLACK)) : null;
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
            boolean fromService = false;
            if (!isLocal) {
                peer = addresses.get(address.executorId());
                if (peer == null && goneExecutors.contains(address.executorId())) {
                    fromService = true;
                } else if (peer == null) {
                    Optional<InetSocketAddress> found = lookup(address);
                    if (found == null) {
                        // Gone, and the external shuffle service of its host serves its files.
                        goneExecutors.add(address.executorId());
                        fromService = true;
                    } else if (found.isEmpty()) {
                        if (runtime.conf.fallback == SlipstreamConf.Fallback.NEVER) {
                            throw new IllegalStateException("slipstream: executor " + address.executorId()
                                    + " serves no map outputs over the fabric (spark.slipstream.fallback=never)");
                        }
                        // That executor serves no fabric: read this task's blocks the way Spark does.
                        FallbackLog.once("reduce tasks that need blocks of executor " + address.executorId() + " read",
                                "that executor serves no map outputs over the fabric (it runs without it)");
                        return sparkReader.get().read();
                    } else {
                        peer = found.get();
                        addresses.put(address.executorId(), peer);
                        executorOfPeer.put(peer, address.executorId());
                    }
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
                } else if (fromService) {
                    service.add(wanted);
                } else {
                    remote.computeIfAbsent(peer, key -> new ArrayList<>()).add(wanted);
                }
            }
        }
        ShuffleDependency<K, ?, C> dependency = handle.dependency();
        Records records = new Records(remote, executorOfPeer, service, local, dependency.serializer().newInstance(),
                env.serializerManager());
        context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) done -> records.close());
        records.start();
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

    /**
     * The fabric address of {@code address}'s executor; empty if it serves no fabric; null if it is
     * gone and the external shuffle service serves its files (Spark kept its map outputs).
     */
    private Optional<InetSocketAddress> lookup(BlockManagerId address) {
        try {
            return runtime.directoryClient.lookup(address.executorId());
        } catch (PeerDirectoryClient.PeerGoneException gone) {
            if (runtime.conf.externalShuffleService) {
                logServiceOnce(address.executorId(), "the driver's directory says it is gone");
                return null;
            }
            throw sneaky(new FetchFailedException(address, handle.shuffleId(), -1L, -1, startPartition,
                    "slipstream: cannot look up executor " + address.executorId() + ": " + gone.getMessage(), gone));
        } catch (RuntimeException e) {
            // The driver's directory does not answer: as for a lost executor, let Spark decide.
            throw sneaky(new FetchFailedException(address, handle.shuffleId(), -1L, -1, startPartition,
                    "slipstream: cannot look up executor " + address.executorId() + ": " + e.getMessage(), e));
        }
    }

    /** Once per process: blocks of lost executors come from the external shuffle service (not a fallback of live peers). */
    private static void logServiceOnce(String executorId, String why) {
        if (SERVICE_LOGGED.compareAndSet(false, true)) {
            LOG.info("slipstream: blocks of lost executors (first: executor {}, {}) are fetched from the external shuffle"
                    + " service with Spark's client, so their map outputs are not recomputed; blocks of live executors"
                    + " come over the fabric (logged once)", executorId, why);
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

    /**
     * The records of every block, local ones first (remote requests are already on the wire), then remote ones as they
     * complete, then those of gone executors from the external shuffle service.
     */
    private final class Records extends AbstractIterator<Tuple2<Object, Object>> {
        /** Remote blocks not yet delivered are among these (replaced when a gone executor's blocks move to the service). */
        private Map<InetSocketAddress, List<BlockFetcher.Wanted>> remote;
        private final Map<InetSocketAddress, String> executorOfPeer;
        /** Null without the external shuffle service. */
        private final ServiceBlocks service;
        private BlockFetcher fetcher;
        private final List<BlockFetcher.Wanted> local;
        private final SerializerInstance serializer;
        private final SerializerManager serializerManager;
        private int nextLocal;
        private Iterator<Tuple2<Object, Object>> current;
        private ServiceBlocks.Fetched currentFromService;
        private boolean finished;
        private long fetchWaitMsReported;
        /** Fetch wait of fetchers given up (their peer died), in nanoseconds. */
        private long fetchWaitNanosBefore;
        /** Remote blocks found corrupt once (fetched again; the second time is a fetch failure). */
        private final java.util.Set<BlockId> corrupted = new java.util.HashSet<>();
        /** Tags of remote blocks delivered by the fabric (a block fetched again is removed until it comes again). */
        private final Set<Object> deliveredTags = Collections.newSetFromMap(new IdentityHashMap<>());
        /** Fabric peers whose remaining blocks moved to the external shuffle service. */
        private final Set<InetSocketAddress> abandoned = new java.util.HashSet<>();

        Records(Map<InetSocketAddress, List<BlockFetcher.Wanted>> remote, Map<InetSocketAddress, String> executorOfPeer,
                ServiceBlocks service, List<BlockFetcher.Wanted> local, SerializerInstance serializer,
                SerializerManager serializerManager) {
            this.remote = remote;
            this.executorOfPeer = executorOfPeer;
            this.service = service;
            this.fetcher = newFetcher(remote);
            this.local = local;
            this.serializer = serializer;
            this.serializerManager = serializerManager;
        }

        private BlockFetcher newFetcher(Map<InetSocketAddress, List<BlockFetcher.Wanted>> blocks) {
            SlipstreamConf conf = runtime.conf;
            return new BlockFetcher(runtime.node, runtime.authenticator,
                    new BlockFetcher.Limits(conf.maxBytesInFlight, conf.maxRequestsInFlight, conf.requestBytesMax,
                            BLOCKS_PER_REQUEST_MAX, conf.requestTimeout.plus(RESPONSE_WAIT_SLACK)),
                    blocks);
        }

        /** Puts the first requests on the wire. */
        void start() {
            fetcher.start();
            if (service != null) {
                service.start();
            }
        }

        /** Gives every buffer back (the task's end, whatever it was). */
        void close() {
            fetcher.close();
            if (service != null) {
                service.close();
            }
        }

        @Override
        public boolean hasNext() {
            while (current == null || !current.hasNext()) {
                if (finished) {
                    return false;
                }
                if (!nextBlock()) {
                    finished = true;
                    close();
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
            if (currentFromService != null) {
                service.release(currentFromService);
                currentFromService = null;
            }
            while (fetcher.hasNext()) {
                FetchedBlock block;
                try {
                    block = fetcher.next();
                } catch (BlockFetchException e) {
                    if (servedByServiceInstead(e)) {
                        continue;
                    }
                    Origin origin = e.wanted() == null ? null : (Origin) e.wanted().tag();
                    throw sneaky(fetchFailed(origin, e.getMessage(), e));
                } finally {
                    reportFetchWait();
                }
                readMetrics.incRemoteBlocksFetched(1);
                readMetrics.incRemoteBytesRead(block.bytes());
                runtime.readCounters.add(block.bytes());
                deliveredTags.add(block.tag());
                if (openRemote(block)) {
                    return true;
                }
                // Corrupt the first time: it is on its way again.
                deliveredTags.remove(block.tag());
            }
            while (service != null && service.hasNext()) {
                ServiceBlocks.Fetched block;
                try {
                    block = service.next();
                } catch (ServiceBlocks.ServiceFetchException e) {
                    Origin origin = e.wanted == null ? null : (Origin) e.wanted.tag();
                    throw sneaky(fetchFailed(origin, e.getMessage(), e));
                } finally {
                    reportFetchWait();
                }
                currentFromService = block;
                readMetrics.incRemoteBlocksFetched(1);
                readMetrics.incRemoteBytesRead(block.buffer().size());
                if (openFromService(block)) {
                    return true;
                }
                // Corrupt the first time: released, and asked of the service again.
            }
            return false;
        }

        private void reportFetchWait() {
            long waitNanos = fetchWaitNanosBefore + fetcher.fetchWaitNanos() + (service == null ? 0 : service.fetchWaitNanos());
            long waitMs = TimeUnit.NANOSECONDS.toMillis(waitNanos);
            readMetrics.incFetchWaitTime(waitMs - fetchWaitMsReported);
            fetchWaitMsReported = waitMs;
        }

        /**
         * With the external shuffle service: when a fabric peer fails and the driver's directory, asked again, says its
         * executor is gone (Spark kept its map outputs: the service serves its files), that executor's blocks not yet
         * delivered come from the service, the other peers' from a new fetcher. Each peer at most once per task; a
         * peer the directory still knows as alive after {@link #GONE_CONFIRM_WAIT} is a fetch failure, as without the
         * service.
         */
        private boolean servedByServiceInstead(BlockFetchException failure) {
            InetSocketAddress peer = failure.peer();
            String executorId = peer == null ? null : executorOfPeer.get(peer);
            if (service == null || executorId == null || abandoned.contains(peer)) {
                return false;
            }
            // The fetch from a killed executor fails before the driver knows (ExternalShuffleServiceTest saw the first
            // lookup answer "found", and the maps were recomputed): ask again for a while.
            if (!runtime.directoryClient.awaitGone(executorId, GONE_CONFIRM_WAIT, GONE_CONFIRM_POLL_MS)) {
                return false;
            }
            logServiceOnce(executorId, "its fabric server stopped answering and the driver's directory says it is gone");
            abandoned.add(peer);
            fetchWaitNanosBefore += fetcher.fetchWaitNanos();
            fetcher.close();
            Map<InetSocketAddress, List<BlockFetcher.Wanted>> rest = new LinkedHashMap<>();
            int moved = 0;
            for (Map.Entry<InetSocketAddress, List<BlockFetcher.Wanted>> entry : remote.entrySet()) {
                for (BlockFetcher.Wanted wanted : entry.getValue()) {
                    if (deliveredTags.contains(wanted.tag())) {
                        continue;
                    }
                    if (entry.getKey().equals(peer)) {
                        service.add(wanted);
                        moved++;
                    } else {
                        rest.computeIfAbsent(entry.getKey(), key -> new ArrayList<>()).add(wanted);
                    }
                }
            }
            LOG.warn("slipstream: executor {} is gone ({}); its {} remaining blocks come from the external shuffle service",
                    executorId, failure.getMessage(), moved);
            remote = rest;
            fetcher = newFetcher(rest);
            start();
            return true;
        }

        /**
         * A gone executor's block from the service; false when it was corrupt for the first time (found while
         * decompressing its start, {@code detectCorrupt.useExtraMemory}) and is asked for again, as Spark's reader
         * fetches a remote block again once. A second corruption, or one later in the stream, is a fetch failure (its
         * map is recomputed).
         */
        private boolean openFromService(ServiceBlocks.Fetched block) {
            Origin origin = (Origin) block.wanted().tag();
            InputStream raw;
            try {
                raw = block.buffer().createInputStream();
            } catch (Exception e) {
                throw sneaky(fetchFailed(origin, "block from the external shuffle service unreadable: " + e, e));
            }
            BlockManagerId service = origin.address();
            ShuffleBlockId id = origin.blockId();
            String algorithm = runtime.conf.checksumAlgorithm;
            Runnable fetchAgain = () -> {
                this.service.release(block);
                currentFromService = null;
                this.service.add(block.wanted());
            };
            return openStream(origin, raw, "block from the external shuffle service", checksum -> SparkEnv.get().blockManager()
                    .blockStoreClient().diagnoseCorruption(service.host(), service.port(), service.executorId(), id.shuffleId(),
                            id.mapId(), id.reduceId(), checksum, algorithm).name(), block.buffer(), fetchAgain);
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
            return openStream(origin, raw, "local block", checksum -> SparkEnv.get().blockManager()
                    .diagnoseShuffleBlockCorruption(origin.blockId(), checksum, conf.checksumAlgorithm).name(), buffer, null);
        }

        /**
         * Opens a block read whole from a file or from the external shuffle service: corrupt bytes are a fetch failure
         * (at once for local blocks, as Spark does), diagnosed by {@code causeOf} (the checksum of {@code buffer}'s
         * bytes to the name of Spark's cause) when checksums are on. With {@code fetchAgain} (a remote block), a
         * corruption found at the start the first time runs it instead and gives false.
         */
        private boolean openStream(Origin origin, InputStream raw, String what,
                java.util.function.LongFunction<String> causeOf, ManagedBuffer buffer, Runnable fetchAgain) {
            SlipstreamConf conf = runtime.conf;
            InputStream wrapped;
            try {
                wrapped = serializerManager.wrapStream(origin.blockId(), raw);
                if (wrapped != raw && conf.detectCorrupt && conf.detectCorruptUseExtraMemory) {
                    wrapped = org.apache.spark.util.Utils.copyStreamUpTo(wrapped, conf.maxBytesInFlight / 3);
                }
            } catch (Exception thrown) {
                // Scala's methods declare no exceptions: IOException is what Spark treats as corruption.
                IOException e = asIOException(thrown);
                closeQuietly(raw);
                // As Spark: a remote block is fetched again once, a local (file) block never.
                if (fetchAgain != null && firstCorruption(what, origin.blockId(), origin.address(), e)) {
                    fetchAgain.run();
                    return false;
                }
                throw sneaky(fetchFailed(origin, what + " corrupt: " + e, e));
            }
            InputStream stream = wrapped;
            if (wrapped != raw && conf.detectCorrupt) {
                stream = new CorruptBlocks.DetectingInputStream(wrapped, e -> {
                    closeQuietly(raw);
                    String diagnosis = null;
                    if (conf.checksumEnabled) {
                        try {
                            long checksum = CorruptBlocks.checksum(buffer.createInputStream(), conf.checksumAlgorithm);
                            diagnosis = CorruptBlocks.diagnosisMessage(origin.blockId(), causeOf.apply(checksum),
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
                if (!seenCorrupt && firstCorruption("block", blockId, block.peer(), e)) {
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

        /**
         * Whether a remote block found corrupt at its start is fetched again: the first time it is (remembered and
         * logged), within {@link #CORRUPT_BLOCKS_REMEMBERED_MAX} such blocks per task; after that it is a fetch failure.
         */
        private boolean firstCorruption(String what, BlockId blockId, Object from, IOException e) {
            if (corrupted.size() >= CORRUPT_BLOCKS_REMEMBERED_MAX || !corrupted.add(blockId)) {
                return false;
            }
            LOG.warn("slipstream: got a corrupted {} {} from {}, fetching it again: {}", what, blockId, from, e.toString());
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
