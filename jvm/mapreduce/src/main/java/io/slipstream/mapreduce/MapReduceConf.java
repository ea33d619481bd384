package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricTransport;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;

/**
 * The plugin's settings, all under {@code slipstream.mapreduce.*} (defaults in the README), read
 * from the NodeManager's configuration on its side and from the job's on the reducer's. The
 * NodeManager's fabric port must be the same in both (as {@code mapreduce.shuffle.port} is for
 * the HTTP shuffle): a reducer reaches a NodeManager at the host of its map completion events and
 * this port.
 */
final class MapReduceConf {
    static final String PREFIX = "slipstream.mapreduce.";
    static final String FALLBACK = PREFIX + "fallback";
    static final String TRANSPORT = PREFIX + "transport";
    static final String PORT = PREFIX + "port";
    static final String BIND_ADDRESS = PREFIX + "bindAddress";
    static final String NET_DEVICES = PREFIX + "netDevices";
    static final String BUFFER_CAP = PREFIX + "buffer.cap";
    static final String SERVER_THREADS = PREFIX + "server.threads";
    static final String REQUEST_TIMEOUT_MS = PREFIX + "requestTimeout.ms";
    static final String MAX_BYTES_IN_FLIGHT = PREFIX + "maxBytesInFlight";
    static final String MAX_REQUESTS_IN_FLIGHT = PREFIX + "maxRequestsInFlight";

    /** Not Hadoop's 13562 (the HTTP shuffle's), next to it. */
    static final int DEFAULT_PORT = 13564;

    enum Fallback {
        /** The fabric when it can run; otherwise Hadoop's HTTP shuffle, with one warning. */
        AUTO,
        /** Fail (the NodeManager's service, or the reduce task) when the fabric cannot run. */
        NEVER
    }

    final Fallback fallback;
    final FabricTransport transport;
    final int port;
    final String bindAddress;
    final String netDevices;
    final long bufferCapBytes;
    final int serverThreads;
    final Duration requestTimeout;
    final long maxBytesInFlight;
    final int maxRequestsInFlight;
    final int requestBytesMax;

    MapReduceConf(Configuration conf) {
        fallback = parseEnum(Fallback.class, conf.get(FALLBACK, "auto"), FALLBACK);
        transport = parseEnum(FabricTransport.class, conf.get(TRANSPORT, "auto"), TRANSPORT);
        port = conf.getInt(PORT, DEFAULT_PORT);
        bindAddress = conf.get(BIND_ADDRESS, "127.0.0.1").trim();
        netDevices = conf.get(NET_DEVICES, "").trim();
        bufferCapBytes = conf.getLongBytes(BUFFER_CAP, 256L << 20);
        serverThreads = conf.getInt(SERVER_THREADS, 2);
        requestTimeout = Duration.ofMillis(conf.getLong(REQUEST_TIMEOUT_MS, 60_000));
        maxBytesInFlight = conf.getLongBytes(MAX_BYTES_IN_FLIGHT, 48L << 20);
        maxRequestsInFlight = conf.getInt(MAX_REQUESTS_IN_FLIGHT, 64);
        if (port <= 0 || port > 0xffff) {
            throw new IllegalArgumentException(PORT + "=" + port + ": a fixed TCP port (1 to 65535) is needed");
        }
        if (serverThreads < 1 || serverThreads > 64) {
            throw new IllegalArgumentException(SERVER_THREADS + " must be 1 to 64");
        }
        if (maxBytesInFlight < (1 << 20) || maxBytesInFlight > bufferCapBytes / 2) {
            throw new IllegalArgumentException(MAX_BYTES_IN_FLIGHT + " (" + maxBytesInFlight + ") must be between 1 MiB and half of "
                    + BUFFER_CAP + " (" + bufferCapBytes + ")");
        }
        if (maxRequestsInFlight < 1 || requestTimeout.isNegative() || requestTimeout.isZero()) {
            throw new IllegalArgumentException(MAX_REQUESTS_IN_FLIGHT + " and " + REQUEST_TIMEOUT_MS + " must be positive");
        }
        requestBytesMax = io.slipstream.shuffle.BlockFetcher.Limits.requestBytesFor(maxBytesInFlight);
    }



    /** Largest fabric message: a full response plus its header. */
    int maxMessageBytes() {
        return io.slipstream.shuffle.BlockFetcher.Limits.maxMessageBytesFor(requestBytesMax);
    }

    /** A fabric node with these settings (the NodeManager's adds where it listens). */
    io.slipstream.fabric.FabricConfig.Builder nodeBuilder() {
        return io.slipstream.fabric.FabricNode.builder()
                .netDevices(netDevicesFor(bindAddress))
                .transport(transport)
                .poolCapBytes(bufferCapBytes)
                .maxMessageBytes(maxMessageBytes())
                .requestTimeout(requestTimeout);
    }

    /** UCX's devices: as set, else the loopback device for a loopback address, else all. */
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

    private static <E extends Enum<E>> E parseEnum(Class<E> type, String value, String key) {
        try {
            return Enum.valueOf(type, value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(key + "=" + value + ": expected one of "
                    + Arrays.toString(type.getEnumConstants()).toLowerCase(Locale.ROOT), e);
        }
    }
}
