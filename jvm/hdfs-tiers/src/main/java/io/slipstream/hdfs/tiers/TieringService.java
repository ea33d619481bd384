package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.protocol.DirectoryListing;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.protocol.HdfsFileStatus;
import org.apache.hadoop.hdfs.protocol.HdfsLocatedFileStatus;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlocks;
import org.apache.hadoop.hdfs.server.namenode.AuditLogger;
import org.apache.hadoop.hdfs.server.namenode.NameNode;
import org.apache.hadoop.hdfs.server.protocol.DatanodeStorageReport;
import org.apache.hadoop.hdfs.server.protocol.StorageReport;
import org.apache.hadoop.metrics2.lib.DefaultMetricsSystem;
import org.apache.hadoop.util.ServicePlugin;
import org.apache.hadoop.util.Time;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triple-H's tiering service, inside the NameNode ({@code dfs.namenode.plugins}): every
 * {@code tiering.interval.ms} it evicts the coldest files from SSD when the SSD tier passes its high-water mark
 * and promotes files read often (counted by {@link AccessAuditLogger}) to SSD, only through HDFS's own
 * mechanisms: it sets the file's storage policy (HOT to evict, {@code tiering.promotePolicy}, ONE_SSD or ALL_SSD,
 * to promote) and asks HDFS's
 * StoragePolicySatisfier to satisfy it ({@code satisfyStoragePolicy}); the satisfier (HDFS's external SPS
 * daemon, {@code hdfs --daemon start sps}) moves the replicas through the DataNodes. A plugin of the NameNode
 * rather than a daemon of its own because its input, the access counts, lives in the NameNode's audit path and
 * an operator already runs the NameNode; it acts only while its NameNode is active.
 */
public final class TieringService implements ServicePlugin {
    private static final Logger LOG = LoggerFactory.getLogger(TieringService.class);
    static final String METRICS_NAME = "SlipstreamTiering";
    /** Batches kept for the status command. */
    static final int LAST_BATCHES = 10;
    /** Hot files listed by the status command. */
    static final int STATUS_HOT_FILES = 20;

    private NameNode namenode;
    private TiersConf tiers;
    private AccessTracker tracker;
    private TieringPlanner planner;
    private DistributedFileSystem fs;
    private ScheduledExecutorService timer;
    private TieringMetrics metrics;
    private UnreportedMoves unreported;
    /** A DataNode without a heartbeat for this long is not waited for (HDFS's stale DataNode interval). */
    private long staleDataNodeMs;
    /** The last decision's {@link TieringPlanner.Batch#evicting()}. */
    private boolean evicting;
    private final ArrayDeque<String> lastBatches = new ArrayDeque<>();

    @Override
    public void start(Object service) {
        if (!(service instanceof NameNode nn)) {
            throw new IllegalArgumentException("TieringService is a NameNode plugin (dfs.namenode.plugins), given "
                    + service);
        }
        namenode = nn;
        Configuration conf = nn.getConf();
        tiers = new TiersConf(conf);
        if (tiers.mode.usesParallelFileSystem()) {
            throw new IllegalStateException("TieringService: modes hhh-l and hhh-l-bb are not supported (policies HOT "
                    + "and ONE_SSD/ALL_SSD would move the parallel file system's replica to local tiers); remove it from "
                    + DFSConfigKeys.DFS_NAMENODE_PLUGINS_KEY);
        }
        String sps = conf.getTrimmed(DFSConfigKeys.DFS_STORAGE_POLICY_SATISFIER_MODE_KEY, "none");
        if (!"external".equalsIgnoreCase(sps)) {
            throw new IllegalStateException("TieringService needs HDFS's StoragePolicySatisfier: set "
                    + DFSConfigKeys.DFS_STORAGE_POLICY_SATISFIER_MODE_KEY + "=external (now " + sps
                    + ") and run it (hdfs --daemon start sps)");
        }
        for (AuditLogger logger : nn.getNamesystem().getAuditLoggers()) {
            if (logger instanceof AccessAuditLogger access) {
                tracker = access.tracker();
            }
        }
        if (tracker == null) {
            throw new IllegalStateException("TieringService needs the access counts: add "
                    + AccessAuditLogger.class.getName() + " to " + DFSConfigKeys.DFS_NAMENODE_AUDIT_LOGGERS_KEY
                    + " (after 'default' to keep HDFS's audit log)");
        }
        planner = new TieringPlanner(tiers);
        if (tiers.tieringPromotePolicy == TieringPlanner.ONE_SSD
                && !conf.getBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY,
                        DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_DEFAULT)) {
            LOG.warn("Triple-H tiering: {}=ONE_SSD but {} is false: a promoted file's reads go to any of its replicas, "
                    + "not first to the one on SSD; set it to true on the NameNode", TiersConf.TIERING_PROMOTE_POLICY.key(),
                    DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY);
        }
        unreported = new UnreportedMoves(UnreportedMoves.BATCHES_REMEMBERED * tiers.tieringBatchMaxFiles);
        staleDataNodeMs = conf.getLong(DFSConfigKeys.DFS_NAMENODE_STALE_DATANODE_INTERVAL_KEY,
                DFSConfigKeys.DFS_NAMENODE_STALE_DATANODE_INTERVAL_DEFAULT);
        InetSocketAddress address = nn.getNameNodeAddress();
        try {
            fs = (DistributedFileSystem) FileSystem.newInstance(
                    URI.create("hdfs://" + address.getHostString() + ":" + address.getPort()), conf);
        } catch (IOException e) {
            throw new IllegalStateException("TieringService: no client to " + address, e);
        }
        metrics = new TieringMetrics(this);
        DefaultMetricsSystem.instance().register(METRICS_NAME, "Triple-H tiering service", metrics);
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread thread = new Thread(r, "slipstream-tiering");
            thread.setDaemon(true);
            return thread;
        });
        timer.scheduleWithFixedDelay(this::runQuietly, tiers.tieringIntervalMs, tiers.tieringIntervalMs,
                TimeUnit.MILLISECONDS);
        LOG.info("Triple-H tiering service started: every {} ms, hot at {} reads in {} ms (promoted to {}), SSD "
                + "high-water {} low-water {}, batches of at most {} files and {} bytes, paths {}", tiers.tieringIntervalMs,
                tiers.tieringHotReads, tiers.tieringWindowMs, TieringPlanner.policyName(tiers.tieringPromotePolicy),
                tiers.tieringSsdHighWater, tiers.tieringSsdLowWater,
                tiers.tieringBatchMaxFiles, tiers.tieringBatchMaxBytes, tiers.tieringPaths);
    }

    @Override
    public void stop() {
        if (timer != null) {
            timer.shutdownNow();
            try {
                timer.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (metrics != null) {
            DefaultMetricsSystem.instance().unregisterSource(METRICS_NAME);
        }
        if (fs != null) {
            try {
                fs.close();
            } catch (IOException e) {
                LOG.warn("Triple-H tiering service: closing its client", e);
            }
        }
    }

    @Override
    public void close() {
        stop();
    }

    private void runQuietly() {
        try {
            if (namenode.isActiveState()) {
                runOnce();
            }
        } catch (Throwable t) { // the next round tries again; one failure must not end the timer
            metrics.failures.incrementAndGet();
            LOG.warn("Triple-H tiering: decision failed, next in {} ms", tiers.tieringIntervalMs, t);
        }
    }

    /** One decision and its batch (package-private for tests). */
    TieringPlanner.Batch runOnce() throws IOException {
        long nowMs = System.currentTimeMillis();
        long capacity = 0;
        long used = 0;
        // The storage reports' age: the oldest last heartbeat among the DataNodes with SSD (the NameNode's
        // monotonic clock, the one this plugin in the NameNode's JVM reads too), leaving out stale ones, whose
        // figures are old anyway and which may be about to be declared dead.
        long reportsSinceMs = Long.MAX_VALUE;
        long monotonicNowMs = Time.monotonicNow();
        for (DatanodeStorageReport datanode :
                fs.getClient().getDatanodeStorageReport(HdfsConstants.DatanodeReportType.LIVE)) {
            boolean hasSsd = false;
            for (StorageReport storage : datanode.getStorageReports()) {
                if (storage.getStorage().getStorageType() == StorageType.SSD && !storage.isFailed()) {
                    capacity += storage.getCapacity();
                    used += storage.getCapacity() - storage.getRemaining();
                    hasSsd = true;
                }
            }
            long lastHeartbeatMs = datanode.getDatanodeInfo().getLastUpdateMonotonic();
            if (hasSsd && monotonicNowMs - lastHeartbeatMs <= staleDataNodeMs) {
                reportsSinceMs = Math.min(reportsSinceMs, lastHeartbeatMs);
            }
        }
        if (reportsSinceMs == Long.MAX_VALUE) {
            reportsSinceMs = Long.MIN_VALUE; // no fresh report: nothing counts as caught up
        }
        List<TieringPlanner.FileTiers> files = scan(nowMs);
        Map<String, TieringPlanner.FileTiers> byPath = new HashMap<>();
        for (TieringPlanner.FileTiers file : files) {
            byPath.put(file.path(), file);
        }
        long forgottenBefore = unreported.forgottenEarly();
        UnreportedMoves.Bytes unreportedBytes = unreported.update(byPath, reportsSinceMs, Time.monotonicNow());
        TieringPlanner.Batch batch = planner.plan(capacity, used, unreportedBytes, files, evicting);
        evicting = batch.evicting();
        metrics.ssdUsedBytes = used;
        metrics.ssdUnreportedOffBytes = unreportedBytes.offSsdBytes();
        metrics.ssdUnreportedOnBytes = unreportedBytes.onSsdBytes();
        metrics.ssdCapacityBytes = capacity;
        metrics.filesScanned = files.size();
        metrics.movesRemembered = unreported.size();
        if (!unreportedBytes.isZero()) {
            metrics.unreportedDecisions.incrementAndGet();
        }
        if (batch.isEmpty()) {
            return batch;
        }
        int evicted = apply(batch.evictions(), TieringPlanner.HOT, byPath);
        int promoted = apply(batch.promotions(), tiers.tieringPromotePolicy, byPath);
        if (unreported.forgottenEarly() > forgottenBefore) {
            LOG.warn("Triple-H tiering: forgot {} moved files before the storage reports showed them (more than {} "
                    + "remembered); a decision may evict more than the low-water mark needs until the reports "
                    + "catch up", unreported.forgottenEarly() - forgottenBefore,
                    UnreportedMoves.BATCHES_REMEMBERED * tiers.tieringBatchMaxFiles);
        }
        long evictedBytes = batch.evictions().stream().mapToLong(TieringPlanner.Move::bytes).sum();
        long promotedBytes = batch.promotions().stream().mapToLong(TieringPlanner.Move::bytes).sum();
        metrics.evictions.addAndGet(evicted);
        metrics.promotions.addAndGet(promoted);
        metrics.evictedBytes.addAndGet(evictedBytes);
        metrics.promotedBytes.addAndGet(promotedBytes);
        long number = metrics.batches.incrementAndGet();
        String line = String.format(Locale.ROOT, "batch %d: evicted %d files (%d bytes of SSD replicas) %s, "
                + "promoted %d files (%d bytes) %s; SSD %d of %d bytes in use (%.1f %%), %d moved off and %d onto "
                + "it maybe not reported yet, %d once moved",
                number, evicted, evictedBytes, paths(batch.evictions()), promoted, promotedBytes,
                paths(batch.promotions()), used, capacity, 100.0 * used / Math.max(capacity, 1),
                batch.unreported().offSsdBytes(), batch.unreported().onSsdBytes(), batch.ssdProjectedBytes());
        LOG.info("Triple-H tiering {}", line);
        synchronized (lastBatches) {
            if (lastBatches.size() == LAST_BATCHES) {
                lastBatches.removeFirst();
            }
            lastBatches.addLast(line);
        }
        return batch;
    }

    /**
     * Sets {@code policy} on each file and asks the satisfier to move it, remembering the file's SSD bytes until
     * the storage reports show its move; returns how many were asked.
     */
    private int apply(List<TieringPlanner.Move> moves, byte policyId, Map<String, TieringPlanner.FileTiers> byPath) {
        String policy = TieringPlanner.policyName(policyId);
        int done = 0;
        for (TieringPlanner.Move move : moves) {
            Path path = new Path(move.path());
            try {
                fs.setStoragePolicy(path, policy);
                unreported.asked(move.path(), policyId, byPath.get(move.path()).ssdBytes());
                fs.satisfyStoragePolicy(path);
                done++;
            } catch (IOException e) { // deleted meanwhile, or the satisfier refused: the rest still move
                metrics.failures.incrementAndGet();
                LOG.warn("Triple-H tiering: {} -> {} failed: {}", move.path(), policy, e.toString());
            }
        }
        return done;
    }

    private static String paths(List<TieringPlanner.Move> moves) {
        return moves.stream().map(TieringPlanner.Move::path).collect(Collectors.joining(",", "[", "]"));
    }

    /** The closed files under {@code tiering.paths}, at most {@code tiering.scan.maxFiles}, breadth first. */
    private List<TieringPlanner.FileTiers> scan(long nowMs) throws IOException {
        List<TieringPlanner.FileTiers> files = new ArrayList<>();
        ArrayDeque<String> dirs = new ArrayDeque<>(tiers.tieringPaths);
        while (!dirs.isEmpty()) {
            String dir = dirs.removeFirst();
            byte[] after = HdfsFileStatus.EMPTY_NAME;
            DirectoryListing listing;
            do {
                listing = fs.getClient().listPaths(dir, after, true);
                if (listing == null) {
                    break; // removed meanwhile
                }
                for (HdfsFileStatus status : listing.getPartialListing()) {
                    String path = status.getFullName(dir);
                    if (status.isDirectory()) {
                        dirs.addLast(path);
                    } else if (status instanceof HdfsLocatedFileStatus located) {
                        if (files.size() == tiers.tieringScanMaxFiles) {
                            metrics.scanTruncated.incrementAndGet();
                            LOG.warn("Triple-H tiering: stopped the scan at {} files ({}); files beyond are not moved",
                                    files.size(), TiersConf.TIERING_SCAN_MAX_FILES.key());
                            return files;
                        }
                        TieringPlanner.FileTiers file = tiersOf(path, located, nowMs);
                        if (file != null) {
                            files.add(file);
                        }
                    }
                }
                after = listing.getLastName();
            } while (listing.hasMore());
        }
        return files;
    }

    private TieringPlanner.FileTiers tiersOf(String path, HdfsLocatedFileStatus status, long nowMs) {
        LocatedBlocks blocks = status.getLocatedBlocks();
        if (blocks == null || blocks.isUnderConstruction()) {
            return null; // a file being written is placed by the placement policy, not moved
        }
        long ssd = 0;
        long offSsd = 0;
        // Under ONE_SSD a block moves only when no replica is on SSD or RAM: HDFS's satisfier leaves a block with
        // a RAM replica as it is (RAM is not movable, and the policy's DISK replicas are there), and the NameNode
        // sends its reads to the RAM replica, faster still.
        long withoutFastReplica = 0;
        for (LocatedBlock block : blocks.getLocatedBlocks()) {
            boolean fast = false;
            boolean movable = false;
            for (StorageType type : block.getStorageTypes()) {
                if (type == StorageType.SSD) {
                    ssd += block.getBlockSize();
                    fast = true;
                } else if (type.isMovable()) {
                    offSsd += block.getBlockSize();
                    movable = true;
                } else if (type == StorageType.RAM_DISK) {
                    fast = true;
                }
            }
            if (!fast && movable) {
                withoutFastReplica += block.getBlockSize();
            }
        }
        long promote = tiers.tieringPromotePolicy == TieringPlanner.ONE_SSD ? withoutFastReplica : offSsd;
        return new TieringPlanner.FileTiers(path, ssd, offSsd, promote, status.getStoragePolicy(),
                tracker.reads(path, nowMs), status.getModificationTime());
    }

    /** The hot files now, most read first, for the status command. */
    List<Map.Entry<String, Long>> hotFiles() {
        return tracker.hottest(tiers.tieringHotReads, STATUS_HOT_FILES, System.currentTimeMillis());
    }

    long trackedFiles() {
        return tracker.size();
    }

    List<String> lastBatches() {
        synchronized (lastBatches) {
            return new ArrayList<>(lastBatches);
        }
    }
}
