package io.slipstream.spark;

import io.slipstream.fabric.FabricTransport;
import java.time.Duration;
import java.util.Locale;
import org.apache.spark.SparkConf;

/**
 * The plugin's settings, all under {@code spark.slipstream.*} (defaults in the README), plus the
 * Spark settings it honours. Read once per process.
 */
final class SlipstreamConf {
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

    SlipstreamConf(SparkConf conf) {
        fallback = parseEnum(Fallback.class, conf.get("spark.slipstream.fallback", "auto"), "spark.slipstream.fallback");
        transport = parseEnum(FabricTransport.class, conf.get("spark.slipstream.transport", "auto"), "spark.slipstream.transport");
        bindAddress = conf.get("spark.slipstream.bindAddress", "");
        netDevices = conf.get("spark.slipstream.netDevices", "");
        bufferCapBytes = conf.getSizeAsBytes("spark.slipstream.buffer.cap", "256m");
        cacheBytes = conf.getSizeAsBytes("spark.slipstream.cache.size", "64m");
        serverThreads = conf.getInt("spark.slipstream.server.threads", 2);
        requestTimeout = Duration.ofMillis(conf.getTimeAsMs("spark.slipstream.requestTimeout", "60s"));
        // Spark reads an unsuffixed maxSizeInFlight as MiB.
        maxBytesInFlight = conf.getSizeAsMb("spark.reducer.maxSizeInFlight", "48m") * 1024 * 1024;
        maxRequestsInFlight = conf.getInt("spark.reducer.maxReqsInFlight", Integer.MAX_VALUE);
        requestBytesMax = requestBytesMax(maxBytesInFlight);
        authenticate = conf.getBoolean("spark.authenticate", false);
        networkCrypto = conf.getBoolean("spark.network.crypto.enabled", false);
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

    /**
     * The network devices UCX may use (UCX_NET_DEVICES syntax): as set, else the loopback device
     * when the node listens on a loopback address, else all (Spark was told to listen beyond this
     * host, and the fabric follows it there).
     */
    String netDevicesFor(String host) {
        if (!netDevices.isEmpty()) {
            return netDevices;
        }
        try {
            return java.net.InetAddress.getByName(host).isLoopbackAddress() ? "lo" : "all";
        } catch (java.net.UnknownHostException e) {
            return "all";
        }
    }

    /** Room for a response's header (12 bytes per entry) inside its buffer's size class. */
    static final int RESPONSE_HEADROOM_BYTES = 64 << 10;

    /**
     * As Spark's fetcher, a request asks for at most a fifth of what may be in flight, so several
     * go at once. Rounded down to a power of two less the header's room, because the fabric's pool
     * hands out power-of-two buffers: a 9.6 MiB response would take a 16 MiB buffer on each side.
     * Between 64 KiB and 64 MiB.
     */
    static int requestBytesMax(long maxBytesInFlight) {
        long fifth = Math.max(maxBytesInFlight / 5, 128 << 10);
        long power = Math.min(Long.highestOneBit(fifth), 64L << 20);
        return (int) (power - RESPONSE_HEADROOM_BYTES);
    }

    /** Largest fabric message: a full response plus its header. */
    int maxMessageBytes() {
        return requestBytesMax + (1 << 20);
    }

    private static <E extends Enum<E>> E parseEnum(Class<E> type, String value, String key) {
        try {
            return Enum.valueOf(type, value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(key + "=" + value + ": expected one of "
                    + java.util.Arrays.toString(type.getEnumConstants()).toLowerCase(Locale.ROOT), e);
        }
    }
}
