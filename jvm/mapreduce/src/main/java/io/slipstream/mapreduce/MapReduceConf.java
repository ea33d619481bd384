package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.NetDevices;
import io.slipstream.shuffle.RequestAuthenticator;
import io.slipstream.shuffle.Setting;
import java.time.Duration;
import java.util.List;
import org.apache.hadoop.conf.Configuration;

/**
 * The plugin's settings, all under {@code slipstream.mapreduce.*}, each declared once below
 * ({@link #SETTINGS}: key, default, meaning; docs/configuration.md is generated from them), read
 * from the NodeManager's configuration on its side and from the job's on the reducer's. The
 * NodeManager's fabric port must be the same in both (as {@code mapreduce.shuffle.port} is for
 * the HTTP shuffle): a reducer reaches a NodeManager at the host of its map completion events and
 * this port.
 */
final class MapReduceConf {
    static final String PREFIX = "slipstream.mapreduce.";
    static final Setting FALLBACK = new Setting(PREFIX + "fallback", "auto",
            "when the fabric cannot start (in a reduce task, or on a NodeManager): `auto` uses Hadoop's HTTP shuffle "
            + "with one warning, `never` fails the task (or the NodeManager's service); when nothing answers on one "
            + "NodeManager's fabric port (no plugin there, or its fabric did not start): `auto` fetches that NodeManager's "
            + "outputs over HTTP (one warning per reduce task and NodeManager), `never` reports a failed fetch as Hadoop does");
    static final Setting TRANSPORT = new Setting(PREFIX + "transport", "auto",
            "`auto`: UCX picks (shared memory on one host, RDMA verbs on clusters, TCP otherwise); `tcp`: TCP only");
    static final Setting PORT = new Setting(PREFIX + "port", "13564",
            "the NodeManagers' fabric port (fixed: reducers connect to it; next to the HTTP shuffle's 13562); one per "
            + "NodeManager process");
    static final Setting BIND_ADDRESS = new Setting(PREFIX + "bindAddress", "127.0.0.1",
            "address the NodeManager's fabric node listens on (loopback unless configured: set the host's address or "
            + "`0.0.0.0` on a cluster)");
    static final Setting NET_DEVICES = new Setting(PREFIX + "netDevices", "",
            "network devices UCX may use (`UCX_NET_DEVICES` syntax, e.g. `mlx5_0:1`); empty: the device carrying "
            + "`bindAddress` (`lo` for a loopback address) and the RDMA ports behind it; `all` only for the wildcard address");
    static final Setting BUFFER_CAP = new Setting(PREFIX + "buffer.cap", "256m",
            "registered memory per process (NodeManager, or reduce task), a hard cap");
    static final Setting SERVER_THREADS = new Setting(PREFIX + "server.threads", "2",
            "threads serving fetch requests per NodeManager process (1 to 64)");
    static final Setting REQUEST_TIMEOUT_MS = new Setting(PREFIX + "requestTimeout.ms", "60000",
            "a fetch without an answer by then fails (a fetch failure)");
    static final Setting MAX_BYTES_IN_FLIGHT = new Setting(PREFIX + "maxBytesInFlight", "48m",
            "bytes reserved for responses in flight per reduce task (shared by its copiers; 1 MiB to half the buffer "
            + "cap); a request asks for at most a fifth of a copier's share");
    static final Setting MAX_REQUESTS_IN_FLIGHT = new Setting(PREFIX + "maxRequestsInFlight", "64",
            "requests in flight per reduce task (shared by its copiers)");
    static final Setting RESPONSE_MAC = new Setting(PREFIX + "responseMac", "header",
            "what the HMAC of each fabric response covers (requests are always authenticated with the job's secret, and "
            + "another job's outputs refused): `header`, as Hadoop's HTTP shuffle, the response's header and index records "
            + "bound to the request, not the data, whose integrity is the IFile CRC32 Hadoop checks (a forger on the path can "
            + "alter data unnoticed by the MAC, as over HTTP without SSL; a corrupt byte fails the CRC, a failed fetch); "
            + "`full`, every byte (altered data fails the MAC; HMAC-SHA256 over all shuffle bytes on both sides). In a job: what "
            + "its reducers ask for; on a NodeManager: `full` refuses reducers asking for `header`");
    /** Every user setting, in the order the documentation lists them. */
    static final List<Setting> SETTINGS = List.of(FALLBACK, TRANSPORT, PORT, BIND_ADDRESS, NET_DEVICES, BUFFER_CAP,
            SERVER_THREADS, REQUEST_TIMEOUT_MS, MAX_BYTES_IN_FLIGHT, MAX_REQUESTS_IN_FLIGHT, RESPONSE_MAC);

    enum Fallback {
        /** The fabric when it can run; otherwise Hadoop's HTTP shuffle (per process, or per NodeManager), with one warning. */
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
    /** A reducer: what its requests ask a response's MAC to cover; a NodeManager: the least it answers with. */
    final RequestAuthenticator.ResponseMac responseMac;

    MapReduceConf(Configuration conf) {
        fallback = Setting.parseEnum(Fallback.class, get(conf, FALLBACK), FALLBACK.key());
        transport = Setting.parseEnum(FabricTransport.class, get(conf, TRANSPORT), TRANSPORT.key());
        port = conf.getInt(PORT.key(), Integer.parseInt(PORT.defaultValue()));
        bindAddress = get(conf, BIND_ADDRESS);
        netDevices = get(conf, NET_DEVICES);
        bufferCapBytes = conf.getLongBytes(BUFFER_CAP.key(), bytes(BUFFER_CAP));
        serverThreads = conf.getInt(SERVER_THREADS.key(), Integer.parseInt(SERVER_THREADS.defaultValue()));
        requestTimeout = Duration.ofMillis(conf.getLong(REQUEST_TIMEOUT_MS.key(), Long.parseLong(REQUEST_TIMEOUT_MS.defaultValue())));
        maxBytesInFlight = conf.getLongBytes(MAX_BYTES_IN_FLIGHT.key(), bytes(MAX_BYTES_IN_FLIGHT));
        maxRequestsInFlight = conf.getInt(MAX_REQUESTS_IN_FLIGHT.key(), Integer.parseInt(MAX_REQUESTS_IN_FLIGHT.defaultValue()));
        responseMac = Setting.parseEnum(RequestAuthenticator.ResponseMac.class, get(conf, RESPONSE_MAC), RESPONSE_MAC.key());
        if (port <= 0 || port > 0xffff) {
            throw new IllegalArgumentException(PORT.key() + "=" + port + ": a fixed TCP port (1 to 65535) is needed");
        }
        if (serverThreads < 1 || serverThreads > 64) {
            throw new IllegalArgumentException(SERVER_THREADS.key() + " must be 1 to 64");
        }
        if (maxBytesInFlight < (1 << 20) || maxBytesInFlight > bufferCapBytes / 2) {
            throw new IllegalArgumentException(MAX_BYTES_IN_FLIGHT.key() + " (" + maxBytesInFlight + ") must be between 1 MiB and half of "
                    + BUFFER_CAP.key() + " (" + bufferCapBytes + ")");
        }
        if (maxRequestsInFlight < 1 || requestTimeout.isNegative() || requestTimeout.isZero()) {
            throw new IllegalArgumentException(MAX_REQUESTS_IN_FLIGHT.key() + " and " + REQUEST_TIMEOUT_MS.key() + " must be positive");
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

    /** The network devices UCX may use: as set, else those of the address the node listens on ({@link NetDevices}). */
    String netDevicesFor(String host) {
        return netDevices.isEmpty() ? NetDevices.forAddress(host, NET_DEVICES.key()) : netDevices;
    }

    private static String get(Configuration conf, Setting setting) {
        return conf.get(setting.key(), setting.defaultValue()).trim();
    }

    /** A declared size default ({@code 48m}) in bytes, parsed as Hadoop parses the setting. */
    private static long bytes(Setting setting) {
        Configuration parse = new Configuration(false);
        parse.set(setting.key(), setting.defaultValue());
        return parse.getLongBytes(setting.key(), -1);
    }

}
