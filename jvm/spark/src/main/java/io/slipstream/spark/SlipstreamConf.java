package io.slipstream.spark;

import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.NetDevices;
import io.slipstream.shuffle.Setting;
import java.time.Duration;
import java.util.List;
import org.apache.spark.SparkConf;

/**
 * The plugin's settings, all under {@code spark.slipstream.*}, plus the Spark settings it honours.
 * Read once per process. Each setting is declared once below ({@link #SETTINGS}: key, default,
 * meaning); the constructor reads them and docs/configuration.md is generated from them
 * (SlipstreamConfTest fails when the document and the declarations disagree).
 */
final class SlipstreamConf {
    static final Setting FALLBACK = new Setting("spark.slipstream.fallback", "auto",
            "when the fabric cannot serve (cannot start, network encryption on, a peer without fabric): `auto` uses "
            + "Spark's transfer service with one warning, `never` fails fast, `always` never uses the fabric");
    static final Setting TRANSPORT = new Setting("spark.slipstream.transport", "auto",
            "`auto`: UCX picks (shared memory on one host, RDMA verbs on clusters, TCP otherwise; `UCX_TLS` respected); "
            + "`tcp`: TCP only");
    static final Setting BIND_ADDRESS = new Setting("spark.slipstream.bindAddress", "",
            "address the fabric listens on; empty: the executor's block-manager host, the driver's "
            + "`spark.driver.bindAddress`/`host`");
    static final Setting NET_DEVICES = new Setting("spark.slipstream.netDevices", "",
            "network devices UCX may use (`UCX_NET_DEVICES` syntax, e.g. `mlx5_0:1`); empty: the device carrying the "
            + "address the fabric listens on (`lo` for a loopback address) and the RDMA ports behind it; `all` only for "
            + "the wildcard address");
    static final Setting BUFFER_CAP = new Setting("spark.slipstream.buffer.cap", "256m",
            "registered memory per process (off-heap; responses in flight and the cache), a hard cap");
    static final Setting CACHE_SIZE = new Setting("spark.slipstream.cache.size", "64m",
            "map-output prefetch cache per executor, inside the buffer cap (at most half); `0` disables; an output "
            + "above a quarter of it is not cached");
    static final Setting SERVER_THREADS = new Setting("spark.slipstream.server.threads", "2",
            "threads serving fetch requests per executor (1 to 64)");
    static final Setting REQUEST_TIMEOUT = new Setting("spark.slipstream.requestTimeout", "60s",
            "a fetch without an answer by then fails (and becomes a fetch failure)");
    /** Every user setting, in the order the documentation lists them. */
    static final List<Setting> SETTINGS =
            List.of(FALLBACK, TRANSPORT, BIND_ADDRESS, NET_DEVICES, BUFFER_CAP, CACHE_SIZE, SERVER_THREADS, REQUEST_TIMEOUT);

    /** Set by the driver's manager for the executors: where the peer directory listens. */
    static final String DIRECTORY_ADDRESS = "spark.slipstream.directory.address";

    enum Fallback {
        /** Use the fabric when it can run; otherwise Spark's own transfer service, with one warning. */
        AUTO,
        /** Always Spark's own transfer service (the plugin only writes, as the sort shuffle does). */
        ALWAYS,
        /** Never fall back: fail fast when the fabric cannot run. */
        NEVER
    }

    final Fallback fallback;
    final FabricTransport transport;
    final String bindAddress;
    final String netDevices;
    final long bufferCapBytes;
    final long cacheBytes;
    final int serverThreads;
    final Duration requestTimeout;
    final long maxBytesInFlight;
    final int maxRequestsInFlight;
    final int requestBytesMax;
    final boolean authenticate;
    final boolean networkCrypto;
    /** {@code spark.shuffle.service.enabled}: blocks of lost executors are fetched from the external shuffle service. */
    final boolean externalShuffleService;
    /** Spark's corrupt-block handling (see CorruptBlocks). */
    final boolean detectCorrupt;
    final boolean detectCorruptUseExtraMemory;
    final boolean checksumEnabled;
    final String checksumAlgorithm;
    /** Spark's MapStatus: above this many partitions, small blocks' sizes are an average (HighlyCompressedMapStatus). */
    final int highlyCompressedPartitionsMin;
    /** ...and blocks above this are recorded (nearly) exactly. */
    final long accurateBlockThresholdBytes;

    SlipstreamConf(SparkConf conf) {
        fallback = Setting.parseEnum(Fallback.class, conf.get(FALLBACK.key(), FALLBACK.defaultValue()), FALLBACK.key());
        transport = Setting.parseEnum(FabricTransport.class, conf.get(TRANSPORT.key(), TRANSPORT.defaultValue()), TRANSPORT.key());
        bindAddress = conf.get(BIND_ADDRESS.key(), BIND_ADDRESS.defaultValue());
        netDevices = conf.get(NET_DEVICES.key(), NET_DEVICES.defaultValue());
        bufferCapBytes = conf.getSizeAsBytes(BUFFER_CAP.key(), BUFFER_CAP.defaultValue());
        cacheBytes = conf.getSizeAsBytes(CACHE_SIZE.key(), CACHE_SIZE.defaultValue());
        serverThreads = conf.getInt(SERVER_THREADS.key(), Integer.parseInt(SERVER_THREADS.defaultValue()));
        requestTimeout = Duration.ofMillis(conf.getTimeAsMs(REQUEST_TIMEOUT.key(), REQUEST_TIMEOUT.defaultValue()));
        // Spark reads an unsuffixed maxSizeInFlight as MiB.
        maxBytesInFlight = conf.getSizeAsMb("spark.reducer.maxSizeInFlight", "48m") * 1024 * 1024;
        maxRequestsInFlight = conf.getInt("spark.reducer.maxReqsInFlight", Integer.MAX_VALUE);
        requestBytesMax = io.slipstream.shuffle.BlockFetcher.Limits.requestBytesFor(maxBytesInFlight);
        authenticate = conf.getBoolean("spark.authenticate", false);
        networkCrypto = conf.getBoolean("spark.network.crypto.enabled", false);
        externalShuffleService = conf.getBoolean("spark.shuffle.service.enabled", false);
        detectCorrupt = conf.getBoolean("spark.shuffle.detectCorrupt", true);
        detectCorruptUseExtraMemory = conf.getBoolean("spark.shuffle.detectCorrupt.useExtraMemory", false);
        checksumEnabled = conf.getBoolean("spark.shuffle.checksum.enabled", true);
        checksumAlgorithm = conf.get("spark.shuffle.checksum.algorithm", "ADLER32");
        highlyCompressedPartitionsMin = conf.getInt("spark.shuffle.minNumPartitionsToHighlyCompress", 2000);
        accurateBlockThresholdBytes = conf.getSizeAsBytes("spark.shuffle.accurateBlockThreshold", "100m");
        if (cacheBytes < 0 || cacheBytes > bufferCapBytes / 2) {
            throw new IllegalArgumentException("spark.slipstream.cache.size (" + cacheBytes
                    + ") must be between 0 and half of spark.slipstream.buffer.cap (" + bufferCapBytes + ")");
        }
        if (serverThreads < 1 || serverThreads > 64) {
            throw new IllegalArgumentException("spark.slipstream.server.threads must be 1 to 64");
        }
        if (maxBytesInFlight <= 0 || maxRequestsInFlight <= 0) {
            throw new IllegalArgumentException("spark.reducer.maxSizeInFlight and maxReqsInFlight must be positive");
        }
    }

    /** The network devices UCX may use: as set, else those of the address the node listens on ({@link NetDevices}). */
    String netDevicesFor(String host) {
        return netDevices.isEmpty() ? NetDevices.forAddress(host, NET_DEVICES.key()) : netDevices;
    }

    /**
     * The most bytes a block Spark's map status says has {@code expectedBytes} can really have, so
     * that no peer makes a reader allocate more: CompressedMapStatus rounds sizes up (at most 10 %
     * above; an eighth and 64 KiB of slack here), HighlyCompressedMapStatus (more than
     * {@code minNumPartitionsToHighlyCompress} partitions) reports an average for blocks under
     * {@code accurateBlockThreshold}, which may each be up to that threshold.
     */
    long blockBytesBound(long expectedBytes, int partitions) {
        long bound = expectedBytes + expectedBytes / 8 + (64 << 10);
        if (partitions > highlyCompressedPartitionsMin) {
            bound = Math.max(bound, accurateBlockThresholdBytes);
        }
        return Math.min(bound, io.slipstream.shuffle.BlockFetcher.BLOCK_BYTES_MAX);
    }



    /** Largest fabric message: a full response plus its header. */
    int maxMessageBytes() {
        return io.slipstream.shuffle.BlockFetcher.Limits.maxMessageBytesFor(requestBytesMax);
    }

}
