package io.slipstream.hdfs.tiers;

import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;

/**
 * The tiers module's settings, all under {@code slipstream.hdfs.tiers.*}, each declared once below
 * ({@link #SETTINGS}), read from the NameNode's configuration for placement and from the DataNodes' for
 * RAM eviction (the DataNodes otherwise follow the storage types the NameNode chose). docs/configuration.md's table is generated from
 * {@link #SETTINGS}; TiersConfTest fails when they disagree.
 */
public final class TiersConf {
    static final String PREFIX = "slipstream.hdfs.tiers.";
    static final TierSetting MODE = new TierSetting(PREFIX + "mode", "hhh",
            "Triple-H mode: `hhh` (first replica of each new block in RAM, persisted in the background, the others on "
            + "SSD up to its high-water mark, then DISK) or `hhh-m` (as `hhh`, and files with storage policy LAZY_PERSIST keep every replica "
            + "in RAM within `hhhm.budget.bytes`) or `hhh-l` (one replica of each new block on the DataNodes' ARCHIVE "
            + "storage, a directory on a parallel file system, the others placed as `hhh`) or `hhh-l-bb` (as `hhh-l`, "
            + "and the DataNode writes the parallel file system's replica into the burst buffer `bb.servers` first and "
            + "flushes it there in the background)");
    static final TierSetting RAM_HIGH_WATER = new TierSetting(PREFIX + "ram.highWater", "0.9",
            "fraction of the cluster's RAM_DISK capacity above which a new block gets no RAM replica (it goes to the "
            + "next tier instead, the write does not fail); 0 < x <= 1");
    static final TierSetting RAM_LOW_WATER = new TierSetting(PREFIX + "ram.lowWater", "0.75",
            "DataNode: when one more block would take its RAM replicas past `ram.highWater` of its locked memory, "
            + "persisted ones are evicted (HDFS's LRU eviction) down to this fraction; below `ram.highWater`");
    static final TierSetting RAM_EVICT_CHECK_MS = new TierSetting(PREFIX + "ram.evictCheck.ms", "1000",
            "DataNode: how often it checks its RAM use against `ram.highWater`; 0 turns the check off (HDFS then evicts "
            + "only when a new RAM write finds no room)");
    static final TierSetting SSD_HIGH_WATER = new TierSetting(PREFIX + "ssd.highWater", "0.9",
            "fraction of the cluster's SSD capacity above which persistent replicas go to DISK instead; 0 < x <= 1");
    static final TierSetting PFS_HIGH_WATER = new TierSetting(PREFIX + "pfs.highWater", "0.95",
            "`hhh-l`: fraction of the cluster's ARCHIVE (parallel file system) capacity above which new blocks keep "
            + "every replica local (with a warning); 0 < x <= 1");
    static final TierSetting RAM_MIN_REPLICATION = new TierSetting(PREFIX + "hhh.ramMinReplication", "2",
            "a file without a storage policy of its own gets a RAM replica only when its replication is at least this, "
            + "so that a closed file always has a replica on a persistent tier, as under HDFS's default policy; 1 puts "
            + "single-replica files in RAM too (what LAZY_PERSIST promises, not what HOT does)");
    static final TierSetting HHHM_BUDGET_BYTES = new TierSetting(PREFIX + "hhhm.budget.bytes", "",
            "`hhh-m`: bytes the cluster's RAM_DISK storages may hold (every replica counted) before a new all-RAM block "
            + "is refused with TierBudgetExceededException; empty: 70% of the RAM_DISK capacity the DataNodes report");
    static final TierSetting TIERING_INTERVAL_MS = new TierSetting(PREFIX + "tiering.interval.ms", "10000",
            "tiering service (NameNode plugin `TieringService`): time between two decisions (one move batch at most "
            + "each); 100 to 3600000");
    static final TierSetting TIERING_WINDOW_MS = new TierSetting(PREFIX + "tiering.window.ms", "600000",
            "tiering service: reads of a file are counted over this sliding window (in ten buckets); 1000 to 86400000");
    static final TierSetting TIERING_HOT_READS = new TierSetting(PREFIX + "tiering.hotReads", "3",
            "tiering service: a file opened at least this often within the window is hot: promoted to SSD "
            + "(storage policy `tiering.promotePolicy`) and never evicted; 1 to 1000000");
    static final TierSetting TIERING_PROMOTE_POLICY = new TierSetting(PREFIX + "tiering.promotePolicy", "ALL_SSD",
            "tiering service: the storage policy a hot file is given: ALL_SSD (every movable replica on SSD) or ONE_SSD "
            + "(one replica of each block on SSD, the others on DISK: SSD holds the hot set of three times as many "
            + "files, but HDFS sends a reader on a DataNode to its local replica first, on whatever tier; for clusters "
            + "whose readers are not on the DataNodes, with `dfs.namenode.read.considerStorageType`)");
    static final TierSetting TIERING_MAX_TRACKED_FILES = new TierSetting(PREFIX + "tiering.maxTrackedFiles", "100000",
            "tiering service: files whose reads are counted at once; past it the file read least recently is "
            + "forgotten; 1 to 10000000");
    static final TierSetting TIERING_SSD_HIGH_WATER = new TierSetting(PREFIX + "tiering.ssd.highWater", "0.8",
            "tiering service: when the cluster's SSD use passes this fraction of its capacity, the coldest files "
            + "with SSD replicas are evicted (storage policy HOT: their SSD replicas move to DISK); promotions stop "
            + "at it; 0 < x <= 1");
    static final TierSetting TIERING_SSD_LOW_WATER = new TierSetting(PREFIX + "tiering.ssd.lowWater", "0.6",
            "tiering service: eviction goes on, batch after batch, until SSD use is at or below this fraction; below "
            + "`tiering.ssd.highWater`");
    static final TierSetting TIERING_BATCH_MAX_FILES = new TierSetting(PREFIX + "tiering.batch.maxFiles", "100",
            "tiering service: files promoted plus evicted in one batch, at most; 1 to 100000");
    static final TierSetting TIERING_BATCH_MAX_BYTES = new TierSetting(PREFIX + "tiering.batch.maxBytes", "10g",
            "tiering service: replica bytes one batch may ask HDFS to move, at most (a single larger file still "
            + "moves, alone in its batch); a size such as 512m");
    static final TierSetting TIERING_PATHS = new TierSetting(PREFIX + "tiering.paths", "/",
            "tiering service: comma-separated directories whose files it may move (it scans them for files with SSD "
            + "replicas); files elsewhere are left alone");
    static final TierSetting TIERING_SCAN_MAX_FILES = new TierSetting(PREFIX + "tiering.scan.maxFiles", "100000",
            "tiering service: files it looks at per decision, at most (the scan of `tiering.paths` stops there, "
            + "with a warning); 1 to 10000000");
    static final TierSetting BB_SERVERS = new TierSetting(PREFIX + "bb.servers", "",
            "`hhh-l-bb`, DataNode: the burst buffer, slipstream-cache (or memcached) servers as `host:port,...`; each "
            + "chunk of a replica goes to one of them by its key's hash. Required in `hhh-l-bb`");
    static final TierSetting BB_TRANSPORT = new TierSetting(PREFIX + "bb.transport", "tcp",
            "`hhh-l-bb`, DataNode: how it reaches the burst buffer: `tcp` (memcached's text protocol, any memcached; "
            + "`bb.servers` are the servers' TCP addresses) or `fabric` (slipstream-cache's binary protocol over the "
            + "fabric: shared memory in a host, verbs on clusters; `bb.servers` are their fabric addresses, `-l` and "
            + "`--fabric-port`; needs the fabric on the DataNode's class path, e.g. the HDFS plugin's jar)");
    static final TierSetting BB_CHUNK_BYTES = new TierSetting(PREFIX + "bb.chunk.bytes", "511k",
            "`hhh-l-bb`: bytes of a replica per burst buffer item; at most the servers' item size (`-I`, 1m by "
            + "default) less 1k. The default lets two items (value, key, header) share one of slipstream-cache's "
            + "1 MiB segments: 512k would take a segment each, half of it empty; 4k to 64m");
    static final TierSetting BB_MAX_PENDING_BYTES = new TierSetting(PREFIX + "bb.maxPending.bytes", "2g",
            "`hhh-l-bb`, DataNode: replica bytes it may hold in the burst buffer not yet flushed (a replica being "
            + "written counts as a whole block); a new replica past it is written straight to the parallel file "
            + "system. Keep the DataNodes' sum well below the servers' memory (plus SSD in hybrid mode)");
    static final TierSetting BB_MAX_IN_FLIGHT_CHUNKS = new TierSetting(PREFIX + "bb.maxInFlight.chunks", "4",
            "`hhh-l-bb`, DataNode: full chunks of one replica on their way to the cache at once; the writer goes on "
            + "filling the next chunk meanwhile and waits only when this many are still being stored. They are in the "
            + "DataNode's memory only until stored (a DataNode killed loses them); 1 to 64");
    static final TierSetting BB_MAX_IN_FLIGHT_BYTES = new TierSetting(PREFIX + "bb.maxInFlight.bytes", "64m",
            "`hhh-l-bb`, DataNode: chunk bytes of all its replicas on their way to the cache at once (memory); a "
            + "writer past it waits for stores to end. At least `bb.chunk.bytes`");
    static final TierSetting BB_FLUSH_DELAY_MS = new TierSetting(PREFIX + "bb.flushDelay.ms", "0",
            "`hhh-l-bb`, DataNode: how long a finished replica stays in the burst buffer before its flush to the "
            + "parallel file system starts (lets a burst of writes end first); 0 to 3600000");
    static final TierSetting BB_CONNECTIONS = new TierSetting(PREFIX + "bb.connections", "4",
            "`hhh-l-bb`, DataNode: connections per burst buffer server, at most (over TCP; over the fabric one "
            + "endpoint per server carries every request at once); 1 to 64");
    static final TierSetting BB_TIMEOUT_MS = new TierSetting(PREFIX + "bb.timeout.ms", "10000",
            "`hhh-l-bb`, DataNode: connect and reply timeout of a burst buffer request; 100 to 600000");
    static final TierSetting BB_USER = new TierSetting(PREFIX + "bb.user", "",
            "`hhh-l-bb`, DataNode: user name for servers started with `-Y` (empty: no login)");
    static final TierSetting BB_PASSWORD = new TierSetting(PREFIX + "bb.password", "",
            "`hhh-l-bb`, DataNode: the password of `bb.user`, read with Configuration.getPassword (a Hadoop "
            + "credential provider, else this setting)");
    /** Every user setting, in the order the documentation lists them. */
    static final List<TierSetting> SETTINGS =
            List.of(MODE, RAM_HIGH_WATER, RAM_LOW_WATER, RAM_EVICT_CHECK_MS, SSD_HIGH_WATER, PFS_HIGH_WATER, RAM_MIN_REPLICATION,
                    HHHM_BUDGET_BYTES, TIERING_INTERVAL_MS, TIERING_WINDOW_MS, TIERING_HOT_READS, TIERING_PROMOTE_POLICY,
                    TIERING_MAX_TRACKED_FILES,
                    TIERING_SSD_HIGH_WATER, TIERING_SSD_LOW_WATER, TIERING_BATCH_MAX_FILES, TIERING_BATCH_MAX_BYTES,
                    TIERING_PATHS, TIERING_SCAN_MAX_FILES, BB_SERVERS, BB_TRANSPORT, BB_CHUNK_BYTES, BB_MAX_PENDING_BYTES,
                    BB_MAX_IN_FLIGHT_CHUNKS, BB_MAX_IN_FLIGHT_BYTES, BB_FLUSH_DELAY_MS, BB_CONNECTIONS, BB_TIMEOUT_MS,
                    BB_USER, BB_PASSWORD);

    /** The share of the RAM_DISK capacity HHH-M may fill when no budget is set (OSU's runs used 70 % of the RAM disk). */
    static final double DEFAULT_BUDGET_FRACTION = 0.7;

    public final TierMode mode;
    public final double ramHighWater;
    public final double ramLowWater;
    public final long ramEvictCheckMs;
    public final double ssdHighWater;
    public final double pfsHighWater;
    public final int ramMinReplication;
    /** Negative: {@link #DEFAULT_BUDGET_FRACTION} of the reported RAM_DISK capacity. */
    public final long hhhmBudgetBytes;
    public final long tieringIntervalMs;
    public final long tieringWindowMs;
    public final long tieringHotReads;
    /** HDFS's id of the storage policy a promoted file is given: ONE_SSD or ALL_SSD. */
    public final byte tieringPromotePolicy;
    public final int tieringMaxTrackedFiles;
    public final double tieringSsdHighWater;
    public final double tieringSsdLowWater;
    public final int tieringBatchMaxFiles;
    public final long tieringBatchMaxBytes;
    public final List<String> tieringPaths;
    public final int tieringScanMaxFiles;
    public final List<java.net.InetSocketAddress> bbServers;
    /** {@code bb.transport} is {@code fabric}: the burst buffer is reached over the fabric, else over TCP. */
    public final boolean bbOverFabric;
    public final int bbChunkBytes;
    public final long bbMaxPendingBytes;
    public final int bbMaxInFlightChunks;
    public final long bbMaxInFlightBytes;
    public final long bbFlushDelayMs;
    public final int bbConnections;
    public final int bbTimeoutMs;
    public final String bbUser;

    public TiersConf(Configuration conf) {
        mode = TierMode.parse(conf.get(MODE.key(), MODE.defaultValue()), MODE.key());
        ramHighWater = fraction(conf, RAM_HIGH_WATER);
        ramLowWater = fraction(conf, RAM_LOW_WATER);
        if (ramLowWater >= ramHighWater) {
            throw new IllegalArgumentException(RAM_LOW_WATER.key() + "=" + ramLowWater + ": must be below "
                    + RAM_HIGH_WATER.key() + "=" + ramHighWater);
        }
        String check = conf.getTrimmed(RAM_EVICT_CHECK_MS.key(), RAM_EVICT_CHECK_MS.defaultValue());
        try {
            ramEvictCheckMs = Long.parseLong(check);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(RAM_EVICT_CHECK_MS.key() + "=" + check + ": not a number", e);
        }
        if (ramEvictCheckMs < 0 || ramEvictCheckMs > 3_600_000) {
            throw new IllegalArgumentException(RAM_EVICT_CHECK_MS.key() + "=" + check + ": expected 0 to 3600000");
        }
        ssdHighWater = fraction(conf, SSD_HIGH_WATER);
        pfsHighWater = fraction(conf, PFS_HIGH_WATER);
        String minReplication = conf.getTrimmed(RAM_MIN_REPLICATION.key(), RAM_MIN_REPLICATION.defaultValue());
        try {
            ramMinReplication = Integer.parseInt(minReplication);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(RAM_MIN_REPLICATION.key() + "=" + minReplication + ": not a number", e);
        }
        if (ramMinReplication < 1 || ramMinReplication > Short.MAX_VALUE) {
            throw new IllegalArgumentException(RAM_MIN_REPLICATION.key() + "=" + ramMinReplication
                    + ": expected 1 to " + Short.MAX_VALUE);
        }
        String budget = conf.getTrimmed(HHHM_BUDGET_BYTES.key(), "");
        if (budget.isEmpty()) {
            hhhmBudgetBytes = -1;
        } else {
            try {
                hhhmBudgetBytes = conf.getLongBytes(HHHM_BUDGET_BYTES.key(), -1);
            } catch (IllegalArgumentException e) { // NumberFormatException, or a bad size suffix
                throw new IllegalArgumentException(HHHM_BUDGET_BYTES.key() + "=" + budget
                        + ": expected a size such as 512m or 8g", e);
            }
            if (hhhmBudgetBytes < 0) {
                throw new IllegalArgumentException(HHHM_BUDGET_BYTES.key() + "=" + budget + ": must not be negative");
            }
        }
        tieringIntervalMs = ranged(conf, TIERING_INTERVAL_MS, 100, 3_600_000);
        tieringWindowMs = ranged(conf, TIERING_WINDOW_MS, 1000, 86_400_000);
        tieringHotReads = ranged(conf, TIERING_HOT_READS, 1, 1_000_000);
        String promote = conf.getTrimmed(TIERING_PROMOTE_POLICY.key(), TIERING_PROMOTE_POLICY.defaultValue());
        tieringPromotePolicy = switch (promote.toUpperCase(java.util.Locale.ROOT)) {
            case HdfsConstants.ONESSD_STORAGE_POLICY_NAME -> HdfsConstants.ONESSD_STORAGE_POLICY_ID;
            case HdfsConstants.ALLSSD_STORAGE_POLICY_NAME -> HdfsConstants.ALLSSD_STORAGE_POLICY_ID;
            default -> throw new IllegalArgumentException(TIERING_PROMOTE_POLICY.key() + "=" + promote
                    + ": expected ONE_SSD or ALL_SSD");
        };
        tieringMaxTrackedFiles = (int) ranged(conf, TIERING_MAX_TRACKED_FILES, 1, 10_000_000);
        tieringSsdHighWater = fraction(conf, TIERING_SSD_HIGH_WATER);
        tieringSsdLowWater = fraction(conf, TIERING_SSD_LOW_WATER);
        if (tieringSsdLowWater >= tieringSsdHighWater) {
            throw new IllegalArgumentException(TIERING_SSD_LOW_WATER.key() + "=" + tieringSsdLowWater + ": must be below "
                    + TIERING_SSD_HIGH_WATER.key() + "=" + tieringSsdHighWater);
        }
        tieringBatchMaxFiles = (int) ranged(conf, TIERING_BATCH_MAX_FILES, 1, 100_000);
        tieringBatchMaxBytes = size(conf, TIERING_BATCH_MAX_BYTES, 1, Long.MAX_VALUE);
        List<String> paths = new java.util.ArrayList<>();
        for (String path : conf.getTrimmedStringCollection(TIERING_PATHS.key())) {
            if (!path.startsWith("/")) {
                throw new IllegalArgumentException(TIERING_PATHS.key() + ": " + path + " is not an absolute path");
            }
            paths.add(path);
        }
        if (conf.get(TIERING_PATHS.key()) == null) {
            paths.add(TIERING_PATHS.defaultValue());
        }
        if (paths.isEmpty()) {
            throw new IllegalArgumentException(TIERING_PATHS.key() + " is empty: name at least one directory");
        }
        tieringPaths = List.copyOf(paths);
        tieringScanMaxFiles = (int) ranged(conf, TIERING_SCAN_MAX_FILES, 1, 10_000_000);
        List<java.net.InetSocketAddress> servers = new java.util.ArrayList<>();
        for (String server : conf.getTrimmedStringCollection(BB_SERVERS.key())) {
            try {
                servers.add(org.apache.hadoop.net.NetUtils.createSocketAddr(server, -1, BB_SERVERS.key()));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(BB_SERVERS.key() + ": " + server + " is not host:port", e);
            }
        }
        bbServers = List.copyOf(servers);
        String transport = conf.getTrimmed(BB_TRANSPORT.key(), BB_TRANSPORT.defaultValue()).toLowerCase(java.util.Locale.ROOT);
        if (!transport.equals("tcp") && !transport.equals("fabric")) {
            throw new IllegalArgumentException(BB_TRANSPORT.key() + "=" + transport + ": expected tcp or fabric");
        }
        bbOverFabric = transport.equals("fabric");
        bbChunkBytes = (int) size(conf, BB_CHUNK_BYTES, 4L << 10, 64L << 20);
        bbMaxPendingBytes = size(conf, BB_MAX_PENDING_BYTES, 0, Long.MAX_VALUE);
        bbMaxInFlightChunks = (int) ranged(conf, BB_MAX_IN_FLIGHT_CHUNKS, 1, 64);
        // Below one chunk no writer could ever hand a chunk over.
        bbMaxInFlightBytes = size(conf, BB_MAX_IN_FLIGHT_BYTES, bbChunkBytes, Long.MAX_VALUE);
        bbFlushDelayMs = ranged(conf, BB_FLUSH_DELAY_MS, 0, 3_600_000);
        bbConnections = (int) ranged(conf, BB_CONNECTIONS, 1, 64);
        bbTimeoutMs = (int) ranged(conf, BB_TIMEOUT_MS, 100, 600_000);
        bbUser = conf.getTrimmed(BB_USER.key(), "");
    }

    /** The burst buffer's password ({@code bb.password}, through Hadoop's credential providers); empty if none. */
    static String bbPassword(Configuration conf) {
        try {
            char[] password = conf.getPassword(BB_PASSWORD.key());
            return password == null ? "" : new String(password);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException(BB_PASSWORD.key() + ": cannot be read: " + e.getMessage(), e);
        }
    }

    private static long size(Configuration conf, TierSetting setting, long min, long max) {
        String text = conf.getTrimmed(setting.key(), setting.defaultValue());
        long value;
        try {
            value = org.apache.hadoop.util.StringUtils.TraditionalBinaryPrefix.string2long(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": expected a size such as 512k or 2g", e);
        }
        if (value < min || value > max) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": expected " + min + " to " + max + " bytes");
        }
        return value;
    }

    private static long ranged(Configuration conf, TierSetting setting, long min, long max) {
        String text = conf.getTrimmed(setting.key(), setting.defaultValue());
        long value;
        try {
            value = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": not a number", e);
        }
        if (value < min || value > max) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": expected " + min + " to " + max);
        }
        return value;
    }

    private static double fraction(Configuration conf, TierSetting setting) {
        String text = conf.getTrimmed(setting.key(), setting.defaultValue());
        double value;
        try {
            value = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": not a number", e);
        }
        if (!(value > 0 && value <= 1)) {
            throw new IllegalArgumentException(setting.key() + "=" + text + ": expected a fraction, 0 < x <= 1");
        }
        return value;
    }

    /** The HHH-M budget in bytes for a cluster whose RAM_DISK storages report {@code ramCapacityBytes} in all. */
    long budgetBytes(long ramCapacityBytes) {
        return hhhmBudgetBytes >= 0 ? hhhmBudgetBytes : (long) (ramCapacityBytes * DEFAULT_BUDGET_FRACTION);
    }

    @Override
    public String toString() {
        return "mode=" + mode.setting + " ram.highWater=" + ramHighWater + " ram.lowWater=" + ramLowWater
                + " ram.evictCheck.ms=" + ramEvictCheckMs + " ssd.highWater=" + ssdHighWater + " pfs.highWater=" + pfsHighWater
                + " hhh.ramMinReplication=" + ramMinReplication + " hhhm.budget.bytes="
                + (hhhmBudgetBytes < 0 ? "(70% of RAM_DISK)" : hhhmBudgetBytes)
                + (mode == TierMode.HHH_L_BB ? " bb.servers=" + bbServers + " bb.chunk.bytes=" + bbChunkBytes
                        + " bb.maxPending.bytes=" + bbMaxPendingBytes + " bb.maxInFlight.chunks=" + bbMaxInFlightChunks
                        + " bb.maxInFlight.bytes=" + bbMaxInFlightBytes + " bb.flushDelay.ms=" + bbFlushDelayMs : "");
    }
}
