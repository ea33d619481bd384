package io.slipstream.hdfs.tiers;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.client.HdfsClientConfigKeys;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HHH-L-BB's burst buffer on one DataNode: a replica HDFS puts on the parallel file system (the ARCHIVE
 * volume) is written into slipstream-cache servers instead of its block file, and a flusher copies it to the
 * block file afterwards (docs/hdfs-tiers.md, "HHH-L-BB"). HDFS's replica is real from the start (its state,
 * lengths and checksum file are HDFS's; the NameNode learns of it as of any replica); only its data bytes wait
 * in the cache. Reads of a replica not yet flushed are served from the cache; every HDFS operation that hands
 * the block file to something else (recoveries, appends, moves) flushes it first.
 *
 * <p>Limits: replica bytes held not yet flushed ({@code bb.maxPending.bytes}; past it a new replica is written
 * straight to the parallel file system), chunks being stored per replica ({@code bb.maxInFlight.chunks}) and
 * their bytes per DataNode ({@code bb.maxInFlight.bytes}; writers wait past them), connections per server, one
 * flush at a time. A copy lost from the
 * cache (restarted, evicted, corrupted: the flush checks every byte against HDFS's checksums) is reported to the
 * NameNode as a bad replica, and HDFS re-replicates the block from its local replicas.
 */
public final class BurstBuffer implements AutoCloseable, org.apache.hadoop.metrics2.MetricsSource {
    private static final Logger LOG = LoggerFactory.getLogger(BurstBuffer.class);
    /** After a failed write to the cache, new replicas go straight to the parallel file system for this long. */
    private static final long UNAVAILABLE_BACKOFF_NS = TimeUnit.SECONDS.toNanos(10);
    /** A flush that fails for want of the cache (not for a lost copy) is tried again after these delays. */
    private static final long[] RETRY_DELAYS_MS = {1000, 2000, 4000};
    /** How long closing the DataNode waits for finished replicas to be flushed. */
    public static final long DRAIN_MS = 30_000;

    /** What the burst buffer needs from HDFS's dataset (the bridge implements it). */
    public interface Dataset {
        /** The replica's block file and checksum file now; null if the DataNode no longer has it. */
        File[] files(String bpid, long blockId);

        /** Reports the replica as bad to the NameNode, which then re-replicates the block. */
        void reportBad(String bpid, long blockId) throws IOException;

        /** HDFS's own stream over the block file, from {@code offset}. */
        InputStream fileStream(String bpid, long blockId, long offset) throws IOException;

        /** This DataNode's id (part of the cache keys). */
        String datanodeUuid();
    }

    private record Key(String bpid, long blockId) {
    }

    private final TiersConf conf;
    private final Dataset dataset;
    private final BurstBufferClient client;
    /** Stores writers' full chunks into the cache off their threads, within bb.maxInFlight.bytes. */
    private final BurstBufferStores stores;
    private final ConcurrentHashMap<Key, BurstBufferPending> pending = new ConcurrentHashMap<>();
    private final ScheduledThreadPoolExecutor flusher;
    private final String datanodeName;
    private long pendingBytes; // guarded by this
    private boolean warnedFull; // guarded by this
    private volatile long unavailableUntilNs = System.nanoTime();
    private volatile boolean closed;
    /** This DataNode's metrics source (JMX {@code Hadoop:service=DataNode,name=SlipstreamBurstBuffer-<port>}). */
    private final String metricsName;

    private final AtomicLong replicasBuffered = new AtomicLong();
    private final AtomicLong replicasWrittenThrough = new AtomicLong();
    private final AtomicLong replicasFlushed = new AtomicLong();
    private final AtomicLong bytesFlushed = new AtomicLong();
    private final AtomicLong replicasLost = new AtomicLong();
    private final AtomicLong writeFailures = new AtomicLong();
    private final AtomicLong readsFromBuffer = new AtomicLong();
    private final AtomicLong replicasRecovered = new AtomicLong();
    private final AtomicLong replicasDiscarded = new AtomicLong();
    private final AtomicLong chunksDiscarded = new AtomicLong();
    /**
     * Replicas whose chunks a restart could not delete (the cache unreachable), by block: deleted when HDFS deletes
     * the replica. At most one entry per replica HDFS loaded at the start, and only after a restart that could not
     * reach the cache.
     */
    private final ConcurrentHashMap<Key, BurstBufferRecovery.Leftover> leftovers = new ConcurrentHashMap<>();
    /** The checksum this DataNode's writers use by default: most replicas are told consistent by their lengths. */
    private final DataChecksum configuredChecksum;

    /** The DataNode's burst buffer in mode hhh-l-bb, else null; a clear error when it cannot be configured. */
    public static BurstBuffer start(Configuration conf, Dataset dataset, String datanodeName) {
        TiersConf tiers = new TiersConf(conf);
        if (tiers.mode != TierMode.HHH_L_BB) {
            return null;
        }
        if (tiers.bbServers.isEmpty()) {
            throw new IllegalArgumentException(TiersConf.MODE.key() + "=hhh-l-bb needs the burst buffer's servers in "
                    + TiersConf.BB_SERVERS.key() + " (host:port,...)");
        }
        DataChecksum checksum = DataChecksum.newDataChecksum(
                DataChecksum.Type.valueOf(conf.get(HdfsClientConfigKeys.DFS_CHECKSUM_TYPE_KEY,
                        HdfsClientConfigKeys.DFS_CHECKSUM_TYPE_DEFAULT)),
                conf.getInt(HdfsClientConfigKeys.DFS_BYTES_PER_CHECKSUM_KEY,
                        HdfsClientConfigKeys.DFS_BYTES_PER_CHECKSUM_DEFAULT));
        return new BurstBuffer(tiers, TiersConf.bbPassword(conf), dataset, datanodeName, checksum);
    }

    /**
     * The client of {@code bb.transport}. Over the fabric it needs the fabric's classes (the HDFS plugin's jar)
     * on the DataNode's class path: without them, a clear error. Nothing here names a fabric class (only
     * {@link BurstBufferFabricClient} does, loaded when first called), so a DataNode without the fabric's jar
     * loads and runs this class with the TCP transport.
     */
    private static BurstBufferClient client(TiersConf conf, String password) {
        if (!conf.bbOverFabric) {
            return new BurstBufferTextClient(conf.bbServers, conf.bbConnections, conf.bbTimeoutMs, conf.bbChunkBytes,
                    conf.bbUser, password);
        }
        try {
            return BurstBufferFabricClient.open(conf, password);
        } catch (NoClassDefFoundError e) {
            throw new IllegalArgumentException(TiersConf.BB_TRANSPORT.key() + "=fabric needs the fabric on the DataNode's "
                    + "class path (the HDFS plugin's slipstream-hdfs.jar): " + e.getMessage(), e);
        }
    }

    private BurstBuffer(TiersConf conf, String password, Dataset dataset, String datanodeName,
            DataChecksum configuredChecksum) {
        this.conf = conf;
        this.configuredChecksum = configuredChecksum;
        this.dataset = dataset;
        this.datanodeName = datanodeName;
        // A chunk's item plus its key and header fits in the servers' item limit (-I): bb.chunk.bytes says so.
        this.client = client(conf, password);
        this.stores = new BurstBufferStores(conf.bbServers.size() * conf.bbConnections, conf.bbMaxInFlightBytes,
                datanodeName);
        this.flusher = new ScheduledThreadPoolExecutor(1, runnable -> {
            Thread thread = new Thread(runnable, "Triple-H burst buffer flusher " + datanodeName);
            thread.setDaemon(true);
            return thread;
        });
        flusher.setRemoveOnCancelPolicy(true);
        // One per DataNode, also when a test runs several in one JVM: the name carries its transfer port.
        metricsName = "SlipstreamBurstBuffer-" + datanodeName.replaceAll("[^0-9A-Za-z.-]", "_");
        org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.instance().register(metricsName,
                "Triple-H hhh-l-bb burst buffer", this);
        LOG.info("Triple-H hhh-l-bb: DataNode {} writes its parallel file system replicas through the burst buffer {} "
                + "over {} ({} bytes per chunk, at most {} bytes pending, {} chunks per replica and {} bytes in flight, "
                + "flush after {} ms)", datanodeName, conf.bbServers, conf.bbOverFabric ? "the fabric" : "TCP",
                conf.bbChunkBytes, conf.bbMaxPendingBytes,
                conf.bbMaxInFlightChunks, conf.bbMaxInFlightBytes, conf.bbFlushDelayMs);
    }

    /**
     * A new replica of a write pipeline, as HDFS created it: the handler to give its writer. A replica on the
     * parallel file system is taken into the burst buffer when there is room and the cache answered lately;
     * any other replica, or one past the limits, is HDFS's handler unchanged.
     */
    public ReplicaHandler admit(ReplicaHandler hdfs, ExtendedBlock block, long estimateBytes) {
        if (closed || hdfs.getReplica().getVolume().getStorageType() != StorageType.ARCHIVE) {
            return hdfs;
        }
        if (System.nanoTime() - unavailableUntilNs < 0) {
            replicasWrittenThrough.incrementAndGet();
            return hdfs;
        }
        long reserve = Math.max(estimateBytes, block.getNumBytes());
        synchronized (this) {
            if (pendingBytes + reserve > conf.bbMaxPendingBytes) {
                replicasWrittenThrough.incrementAndGet();
                if (!warnedFull) {
                    warnedFull = true;
                    LOG.warn("Triple-H hhh-l-bb: {} holds {} bytes not yet flushed, {} allows {}: new parallel file "
                            + "system replicas are written straight to it until flushes catch up", datanodeName,
                            pendingBytes, TiersConf.BB_MAX_PENDING_BYTES.key(), conf.bbMaxPendingBytes);
                }
                return hdfs;
            }
            pendingBytes += reserve;
            warnedFull = false;
        }
        String keyBase = BurstBufferRecovery.keyBase(dataset.datanodeUuid(), block.getBlockPoolId(), block.getBlockId(),
                block.getGenerationStamp());
        BurstBufferPending replica = new BurstBufferPending(keyBase, block.getBlockPoolId(), block.getBlockId(),
                block.getGenerationStamp(), conf.bbChunkBytes, conf.bbMaxInFlightChunks, client, stores, reserve,
                this::writeFailed);
        BurstBufferPending before = pending.put(new Key(block.getBlockPoolId(), block.getBlockId()), replica);
        if (before != null) {
            drop(before, "replaced by a new replica of the same block");
        }
        replicasBuffered.incrementAndGet();
        return BurstBufferedReplica.handler(hdfs, replica);
    }

    /** The cache refused a chunk while a replica was written; the next replicas go direct for a while. */
    private void writeFailed(BurstBufferPending replica, IOException cause, boolean toFile) {
        unavailableUntilNs = System.nanoTime() + UNAVAILABLE_BACKOFF_NS;
        writeFailures.incrementAndGet();
        LOG.warn("Triple-H hhh-l-bb: writing {} into the burst buffer failed ({}); {}; new parallel file system "
                + "replicas go straight to it for {} s", replica, cause.getMessage(), toFile
                        ? "nothing of it was stored yet, so it goes on straight to the parallel file system"
                        : "chunks of it were stored, so its write fails (HDFS's pipeline recovery goes on without it)",
                TimeUnit.NANOSECONDS.toSeconds(UNAVAILABLE_BACKOFF_NS));
        // The replica ended itself (DROPPED) before telling, once none of its stores could still put a chunk in
        // the cache: deleting its keys now deletes every one it may have stored.
        if (pending.remove(key(replica), replica)) {
            release(replica);
            deleteLater(replica);
        }
    }

    /** HDFS finalized the block: a replica of ours is flushed after {@code bb.flushDelay.ms}. */
    public void finalized(ExtendedBlock block) {
        BurstBufferPending replica = pending.get(new Key(block.getBlockPoolId(), block.getBlockId()));
        if (replica == null || replica.state() != BurstBufferPending.State.SEALED) {
            return;
        }
        synchronized (this) {
            long length = replica.length();
            pendingBytes -= replica.reservedBytes - length;
            replica.reservedBytes = length;
        }
        schedule(replica, conf.bbFlushDelayMs, 0);
    }

    private void schedule(BurstBufferPending replica, long delayMs, int attempt) {
        if (closed) {
            return;
        }
        flusher.schedule(() -> flushInBackground(replica, attempt), delayMs, TimeUnit.MILLISECONDS);
    }

    private void flushInBackground(BurstBufferPending replica, int attempt) {
        try {
            flush(replica, null);
        } catch (ReplicaChecksumCheck.LostCopyException e) {
            lost(replica, e);
        } catch (IOException e) {
            if (attempt < RETRY_DELAYS_MS.length && !closed) {
                LOG.warn("Triple-H hhh-l-bb: flushing {} failed ({}); trying again in {} ms", replica, e.getMessage(),
                        RETRY_DELAYS_MS[attempt]);
                schedule(replica, RETRY_DELAYS_MS[attempt], attempt + 1);
            } else {
                lost(replica, e);
            }
        } catch (RuntimeException e) {
            LOG.error("Triple-H hhh-l-bb: flushing {} failed", replica, e);
            lost(replica, new IOException(e));
        }
    }

    /** The copy in the cache is gone: HDFS is told the replica is bad and re-replicates the block. */
    private void lost(BurstBufferPending replica, IOException cause) {
        if (!leave(replica, BurstBufferPending.State.DROPPED)) {
            return;
        }
        replicasLost.incrementAndGet();
        LOG.warn("Triple-H hhh-l-bb: {} could not be flushed to the parallel file system ({}); reporting the replica as "
                + "bad so that HDFS re-replicates the block from its other replicas", replica, cause.getMessage());
        try {
            dataset.reportBad(replica.bpid, replica.blockId);
        } catch (IOException e) {
            LOG.warn("Triple-H hhh-l-bb: reporting {} as bad failed", replica, e);
        }
        deleteLater(replica);
    }

    /**
     * Before HDFS hands the block file of this replica to anything (a recovery, an append, a move): the replica
     * leaves the burst buffer now, its data written to the block file. A replica still being written is taken
     * from its writer first. An IOException if its copy in the cache is lost.
     */
    public void flushNow(String bpid, long blockId, String why) throws IOException {
        BurstBufferPending replica = pending.get(new Key(bpid, blockId));
        if (replica == null) {
            return;
        }
        LOG.info("Triple-H hhh-l-bb: flushing {} now: {}", replica, why);
        byte[] unstored = replica.stop();
        try {
            flush(replica, unstored);
        } catch (IOException e) {
            lost(replica, e);
            throw new IOException("blk_" + blockId + ": its parallel file system replica was lost from the burst "
                    + "buffer: " + e.getMessage(), e);
        }
    }

    /**
     * Copies the replica's chunks (and {@code unstored}, the bytes its stopped writer had not stored) into its
     * block file, synced, then deletes them from the cache. A sealed replica's bytes are checked against HDFS's
     * checksum file first.
     */
    private void flush(BurstBufferPending replica, byte[] unstored) throws IOException {
        synchronized (replica.flushLock) {
            BurstBufferPending.State state = replica.state();
            if (state == BurstBufferPending.State.FLUSHED || state == BurstBufferPending.State.DROPPED
                    || state == BurstBufferPending.State.WRITING) {
                return;
            }
            long startNs = System.nanoTime();
            File[] files = dataset.files(replica.bpid, replica.blockId);
            if (files == null) {
                drop(replica, "no longer on this DataNode");
                return;
            }
            int chunks = replica.chunksStored();
            long written = 0;
            // WRITE without CREATE: a block file deleted meanwhile stays deleted.
            try (FileChannel out = FileChannel.open(files[0].toPath(), StandardOpenOption.WRITE);
                    ReplicaChecksumCheck check = unstored == null ? ReplicaChecksumCheck.open(files[1], conf.bbChunkBytes) : null) {
                for (int chunk = 0; chunk < chunks; chunk++) {
                    byte[] bytes = client.get(replica.key(chunk));
                    if (bytes == null) {
                        throw new ReplicaChecksumCheck.LostCopyException("chunk " + chunk + " is missing from the burst buffer", null);
                    }
                    if (chunk < chunks - 1 && bytes.length != conf.bbChunkBytes) {
                        throw new ReplicaChecksumCheck.LostCopyException("chunk " + chunk + " has " + bytes.length + " bytes, not "
                                + conf.bbChunkBytes, null);
                    }
                    if (check != null) {
                        check.verify(bytes, files[0].getName());
                    }
                    written += writeFully(out, ByteBuffer.wrap(bytes), written);
                }
                if (check != null) {
                    check.finish(files[0].getName());
                }
                if (unstored != null) {
                    written += writeFully(out, ByteBuffer.wrap(unstored), written);
                }
                if (written != replica.length()) {
                    throw new ReplicaChecksumCheck.LostCopyException("the burst buffer holds " + written + " of its " + replica.length()
                            + " bytes", null);
                }
                out.truncate(written);
                out.force(true);
            } catch (java.nio.file.NoSuchFileException e) {
                drop(replica, "its block file was deleted");
                return;
            }
            if (!leave(replica, BurstBufferPending.State.FLUSHED)) {
                return; // dropped meanwhile (the block deleted): its keys are deleted by the drop
            }
            replicasFlushed.incrementAndGet();
            bytesFlushed.addAndGet(written);
            LOG.info("Triple-H hhh-l-bb: flushed {} ({} bytes) to the parallel file system in {} ms; {} replicas "
                    + "pending", replica, written, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs),
                    pending.size());
            // Beyond `chunks`: a stopped replica's chunks stored after one that failed (their bytes were in memory).
            deleteKeys(replica, replica.chunksHandedOver());
        }
    }

    /** Writes all of {@code bytes} at {@code position}; the count written. */
    static long writeFully(FileChannel out, ByteBuffer bytes, long position) throws IOException {
        long done = 0;
        while (bytes.hasRemaining()) {
            done += out.write(bytes, position + done);
        }
        return done;
    }

    /**
     * At the DataNode's start, before it registers: takes back from the cache the data of the finalized parallel
     * file system replicas that its last run left there (killed before a flush), and deletes the chunks of those it
     * cannot use (replicas being written when it died, copies lost), see {@link BurstBufferRecovery}. Each finalized
     * replica looked at has its length set to what its block file now holds.
     */
    public void recoverAfterRestart(String bpid, List<BurstBufferRecovery.OnDisk> replicas) {
        long startNs = System.nanoTime();
        BurstBufferRecovery.Outcome outcome = new BurstBufferRecovery(client, conf.bbChunkBytes,
                conf.bbMaxInFlightChunks, configuredChecksum, dataset.datanodeUuid()).recover(replicas);
        replicasRecovered.addAndGet(outcome.recovered());
        replicasLost.addAndGet(outcome.lost());
        replicasDiscarded.addAndGet(outcome.discarded());
        chunksDiscarded.addAndGet(outcome.chunksDiscarded());
        for (BurstBufferRecovery.Leftover leftover : outcome.leftovers()) {
            leftovers.put(new Key(leftover.bpid(), leftover.blockId()), leftover);
        }
        if (outcome.recovered() + outcome.lost() + outcome.discarded() + outcome.left() > 0) {
            LOG.info("Triple-H hhh-l-bb: block pool {} on {}: the last run left parallel file system replicas in the "
                    + "burst buffer: {} finalized recovered ({} bytes), {} lost, {} being written discarded ({} chunks "
                    + "deleted in all), {} left to HDFS (cache unreachable); {} replicas looked at in {} ms", bpid,
                    datanodeName, outcome.recovered(), outcome.bytesRecovered(), outcome.lost(), outcome.discarded(),
                    outcome.chunksDiscarded(), outcome.left(), replicas.size(),
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs));
        }
    }

    /** The block was deleted (HDFS invalidated the replica): its copy in the cache goes too. */
    public void deleted(String bpid, long blockId) {
        BurstBufferPending replica = pending.get(new Key(bpid, blockId));
        if (replica != null) {
            drop(replica, "deleted");
        }
        // Whatever its generation stamp now (a block recovery may have changed it): once HDFS deletes the replica,
        // nothing reads the chunks a restart left.
        BurstBufferRecovery.Leftover leftover = leftovers.remove(new Key(bpid, blockId));
        if (leftover != null && !closed) {
            flusher.execute(() -> deleteLeftover(leftover));
        }
    }

    /** Best effort, as {@link #deleteKeys}; the flusher's thread, not HDFS's (a delete per chunk). */
    private void deleteLeftover(BurstBufferRecovery.Leftover leftover) {
        try {
            long deleted = BurstBufferRecovery.deleteChunks(client, leftover);
            chunksDiscarded.addAndGet(deleted);
            LOG.debug("Triple-H hhh-l-bb: blk_{} deleted: {} chunks a restart left in the burst buffer deleted too",
                    leftover.blockId(), deleted);
        } catch (IOException e) {
            LOG.warn("Triple-H hhh-l-bb: blk_{} deleted, but its chunks cannot be deleted from the burst buffer ({}); "
                    + "the cache's eviction takes them back", leftover.blockId(), e.getMessage());
        }
    }

    private void drop(BurstBufferPending replica, String why) {
        if (leave(replica, BurstBufferPending.State.DROPPED)) {
            LOG.debug("Triple-H hhh-l-bb: {} leaves the burst buffer unflushed: {}", replica, why);
            deleteLater(replica);
        }
    }

    /**
     * The replica leaves the burst buffer in state {@code end} (flushed, or dropped): out of the map, its
     * reservation given back. False if it had left already (only the first of racing callers goes on).
     */
    private boolean leave(BurstBufferPending replica, BurstBufferPending.State end) {
        pending.remove(key(replica), replica);
        if (!replica.end(end)) {
            return false;
        }
        release(replica);
        return true;
    }

    private synchronized void release(BurstBufferPending replica) {
        pendingBytes -= replica.reservedBytes;
        replica.reservedBytes = 0;
    }

    private static Key key(BurstBufferPending replica) {
        return new Key(replica.bpid, replica.blockId);
    }

    private void deleteLater(BurstBufferPending replica) {
        if (!closed) {
            // A chunk whose store ends after this reads the count deletes itself (BurstBufferPending.ended).
            flusher.execute(() -> deleteKeys(replica, replica.chunksHandedOver()));
        }
    }

    /** Best effort: a key left behind is only space, which the cache's eviction takes back. */
    private void deleteKeys(BurstBufferPending replica, int chunks) {
        for (int chunk = 0; chunk < chunks; chunk++) {
            try {
                client.delete(replica.key(chunk));
            } catch (IOException e) {
                LOG.debug("Triple-H hhh-l-bb: deleting {} from the burst buffer failed", replica.key(chunk), e);
                return;
            }
        }
    }

    /**
     * A stream over a replica's data from {@code offset}: from the burst buffer while the replica is there, from
     * HDFS's block file once flushed; null when the replica is not in the burst buffer.
     */
    public InputStream open(String bpid, long blockId, long offset) {
        BurstBufferPending replica = pending.get(new Key(bpid, blockId));
        if (replica == null) {
            return null;
        }
        readsFromBuffer.incrementAndGet();
        return new BurstBufferInputStream(replica, conf.bbChunkBytes, offset,
                position -> dataset.fileStream(bpid, blockId, position));
    }

    /** The replica's length while in the burst buffer (its block file is shorter), or -1. */
    public long length(String bpid, long blockId) {
        BurstBufferPending replica = pending.get(new Key(bpid, blockId));
        return replica == null ? -1 : replica.length();
    }

    /** Whether the DataNode holds this replica's data in the burst buffer now. */
    public boolean holds(String bpid, long blockId) {
        return pending.containsKey(new Key(bpid, blockId));
    }

    /** Flushes every finished replica now (tests, and {@link #close}); false if some are left after the wait. */
    public boolean flushAll(long waitMs) throws InterruptedException {
        return flushBlockPool(null, waitMs);
    }

    /**
     * Flushes the finished replicas of block pool {@code bpid} (every pool: null) now: HDFS forgets a pool's
     * replicas when the DataNode stops serving it, before the dataset shuts down. False if some are left.
     */
    public boolean flushBlockPool(String bpid, long waitMs) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        List<BurstBufferPending> sealed = new ArrayList<>();
        for (BurstBufferPending replica : pending.values()) {
            if (replica.state() == BurstBufferPending.State.SEALED && (bpid == null || bpid.equals(replica.bpid))) {
                sealed.add(replica);
            }
        }
        for (BurstBufferPending replica : sealed) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            flushInBackground(replica, RETRY_DELAYS_MS.length);
        }
        return pending.values().stream().noneMatch(r -> r.state() == BurstBufferPending.State.SEALED
                && (bpid == null || bpid.equals(r.bpid)));
    }

    /** Replicas taken into the burst buffer. */
    public long replicasBuffered() {
        return replicasBuffered.get();
    }

    /** Parallel file system replicas written straight to it (past {@code bb.maxPending.bytes}, or cache down). */
    public long replicasWrittenThrough() {
        return replicasWrittenThrough.get();
    }

    /** Replicas flushed to the parallel file system, and their bytes. */
    public long replicasFlushed() {
        return replicasFlushed.get();
    }

    public long bytesFlushed() {
        return bytesFlushed.get();
    }

    /** Replicas whose copy in the cache was lost or corrupt (reported bad to the NameNode). */
    public long replicasLost() {
        return replicasLost.get();
    }

    /** Replicas a killed DataNode left in the burst buffer and its restart took back (see recoverAfterRestart). */
    public long replicasRecovered() {
        return replicasRecovered.get();
    }

    /** Replicas being written when the DataNode was killed whose chunks its restart deleted. */
    public long replicasDiscarded() {
        return replicasDiscarded.get();
    }

    /** Chunks deleted unused after a restart (replicas being written at the kill, lost ones, those left). */
    public long chunksDiscarded() {
        return chunksDiscarded.get();
    }

    /** Stores into the cache that failed while a replica was written. */
    public long writeFailures() {
        return writeFailures.get();
    }

    /** Reads served from the burst buffer (replicas not yet flushed). */
    public long readsFromBuffer() {
        return readsFromBuffer.get();
    }

    /** Replicas held not yet flushed. */
    public int pendingReplicas() {
        return pending.size();
    }

    @Override
    public void getMetrics(org.apache.hadoop.metrics2.MetricsCollector collector, boolean all) {
        long bytes;
        synchronized (this) {
            bytes = pendingBytes;
        }
        collector.addRecord(metricsName).setContext("dfs")
                .addCounter(info("ReplicasBuffered", "replicas taken into the burst buffer"), replicasBuffered.get())
                .addCounter(info("ReplicasWrittenThrough", "parallel file system replicas written straight to it"),
                        replicasWrittenThrough.get())
                .addCounter(info("ReplicasFlushed", "replicas flushed to the parallel file system"), replicasFlushed.get())
                .addCounter(info("BytesFlushed", "bytes flushed to the parallel file system"), bytesFlushed.get())
                .addCounter(info("ReplicasLost", "replicas whose copy in the cache was lost or corrupt"),
                        replicasLost.get())
                .addCounter(info("ReplicasRecovered", "replicas a killed DataNode left in the cache, recovered at "
                        + "its restart"), replicasRecovered.get())
                .addCounter(info("ReplicasDiscarded", "replicas being written when a killed DataNode died, whose "
                        + "chunks its restart deleted from the cache (HDFS recovers them from their block files)"),
                        replicasDiscarded.get())
                .addCounter(info("ChunksDiscarded", "chunks deleted from the cache unused after a restart"),
                        chunksDiscarded.get())
                .addCounter(info("WriteFailures", "stores into the cache that failed"), writeFailures.get())
                .addCounter(info("ReadsFromBuffer", "reads served from the burst buffer"), readsFromBuffer.get())
                .addCounter(info("WriterWaits", "times a writer waited for its chunks in flight to be stored"),
                        stores.writerWaits())
                .addCounter(info("WriterWaitMs", "time writers waited for their chunks in flight to be stored"),
                        stores.writerWaitMs())
                .addGauge(info("ChunksInFlight", "chunks on their way to the cache"), stores.chunksInFlight())
                .addGauge(info("BytesInFlight", "chunk bytes on their way to the cache"), stores.bytesInFlight())
                .addGauge(info("PendingReplicas", "replicas held not yet flushed"), pending.size())
                .addGauge(info("PendingBytes", "bytes reserved by replicas not yet flushed"), bytes);
    }

    private static org.apache.hadoop.metrics2.MetricsInfo info(String name, String description) {
        return org.apache.hadoop.metrics2.lib.Interns.info(name, description);
    }

    /** Counters, for the log and the tests. */
    public String counters() {
        long bytes;
        synchronized (this) {
            bytes = pendingBytes;
        }
        return "buffered=" + replicasBuffered + " writtenThrough=" + replicasWrittenThrough + " flushed="
                + replicasFlushed + " flushedBytes=" + bytesFlushed + " lost=" + replicasLost + " recovered="
                + replicasRecovered + " discarded=" + replicasDiscarded + " chunksDiscarded=" + chunksDiscarded
                + " writeFailures="
                + writeFailures + " readsFromBuffer="
                + readsFromBuffer + " writerWaits=" + stores.writerWaits() + " chunksInFlight=" + stores.chunksInFlight()
                + " pending=" + pending.size() + " pendingBytes=" + bytes;
    }

    /** The DataNode stops: finished replicas are flushed (bounded wait); any left are lost as described. */
    @Override
    public void close() {
        try {
            if (!flushAll(DRAIN_MS)) {
                LOG.warn("Triple-H hhh-l-bb: {} stops with replicas not flushed ({}); its restart takes them back "
                        + "from the cache (HDFS re-replicates any the cache lost)", datanodeName, counters());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        closed = true;
        org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.instance().unregisterSource(metricsName);
        flusher.shutdownNow();
        stores.close();
        client.close();
        LOG.info("Triple-H hhh-l-bb: {} burst buffer closed: {}", datanodeName, counters());
    }
}
