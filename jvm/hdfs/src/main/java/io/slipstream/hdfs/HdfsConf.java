package io.slipstream.hdfs;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.NetDevices;
import io.slipstream.shuffle.Setting;
import java.time.Duration;
import java.util.List;
import org.apache.hadoop.conf.Configuration;

/**
 * The plugin's settings, all under {@code slipstream.hdfs.*}, each declared once below ({@link #SETTINGS}),
 * read from the DataNode's configuration on its side and from the client's on the reader's. The
 * fabric port must be the same in both (as {@code dfs.datanode.address}'s port is for HDFS's own
 * reads): a client reaches a DataNode at the DataNode's IP address and this port (docs/hdfs.md).
 */
final class HdfsConf {
    static final String PREFIX = "slipstream.hdfs.";
    static final Setting FALLBACK = new Setting(PREFIX + "fallback", "auto",
            "when a DataNode offers no fabric or the client's fabric cannot start: `auto` lets HDFS read with its "
            + "own readers, `never` fails the read; on a DataNode, `never` fails the plugin's start (HDFS logs it and "
            + "runs the DataNode without the plugin)");
    static final Setting TRANSPORT = new Setting(PREFIX + "transport", "auto",
            "`auto`: UCX picks (shared memory on one host, RDMA verbs on clusters, TCP otherwise); `tcp`: TCP only");
    static final Setting PORT = new Setting(PREFIX + "port", "9876",
            "the DataNodes' fabric port (fixed: clients connect to it); one per DataNode process");
    static final Setting BIND_ADDRESS = new Setting(PREFIX + "bindAddress", "127.0.0.1",
            "address the DataNode's fabric node listens on (loopback unless configured: set the DataNode's address "
            + "or `0.0.0.0` on a cluster)");
    static final Setting NET_DEVICES = new Setting(PREFIX + "netDevices", "",
            "network devices UCX may use (`UCX_NET_DEVICES` syntax); empty: the device carrying `bindAddress`");
    static final Setting BUFFER_CAP = new Setting(PREFIX + "buffer.cap", "128m",
            "registered memory per process (DataNode, or client), a hard cap");
    static final Setting SERVER_THREADS = new Setting(PREFIX + "server.threads", "4",
            "threads serving block reads per DataNode process (1 to 64)");
    static final Setting SERVER_MAX_BYTES_IN_FLIGHT = new Setting(PREFIX + "server.maxBytesInFlight", "64m",
            "response bytes a DataNode process prepares at once (at least `request.bytes`, at most half of `buffer.cap`); "
            + "a request finding no room within 5 s is refused as busy");
    static final Setting REQUEST_BYTES = new Setting(PREFIX + "request.bytes", "4m",
            "block bytes per fabric request at most (64 KiB to 64 MiB): a client read of 64 KiB or more asks for this much; a "
            + "smaller one starts at what it wants (at least 4 KiB) and grows 4x per sequential window; the DataNode refuses "
            + "larger requests than its own setting");
    static final Setting READ_WINDOWS_AHEAD = new Setting(PREFIX + "read.windowsAhead", "2",
            "windows (requests of up to `request.bytes`) a sequential reader asks for ahead of the one it reads (0 to 16); "
            + "what all readers of a client process ask ahead is held within half of `buffer.cap` (beyond, they read on demand)");
    static final Setting SERVER_MAX_WRITES = new Setting(PREFIX + "server.maxWrites", "16",
            "block writes open at once per DataNode (1 to 1024); an open beyond is refused as busy");
    // 256 KiB: ohb hdfs swt (2 writers x 256 MiB, replication 3) gave 222-370 MB/s against 159-177 MB/s
    // with 1 MiB packets in four alternating rounds (docs/benchmarks.md, session 35): smaller packets
    // overlap the pipeline's hops; 1 MiB files' write latency measured the same.
    static final Setting WRITE_PACKET_BYTES = new Setting(PREFIX + "write.packet.bytes", "256k",
            "block bytes per write packet (4 KiB to 64 MiB; a writer sends at most `request.bytes`, which is also what a DataNode "
            + "accepts)");
    static final Setting WRITE_PACKETS_IN_FLIGHT = new Setting(PREFIX + "write.packetsInFlight", "8",
            "packets a writer sends ahead of their acknowledgements (1 to 256); a DataNode fails a write with more unacknowledged "
            + "or out of order than its own setting");
    static final Setting WRITE_IDLE_TIMEOUT_MS = new Setting(PREFIX + "write.idleTimeout.ms", "120000",
            "a DataNode fails a write without a packet for this long (a writer that went away); writers send an empty packet "
            + "after a third of it without data (HDFS's heartbeat packets)");
    static final Setting REQUEST_TIMEOUT_MS = new Setting(PREFIX + "requestTimeout.ms", "30000",
            "a block read request without an answer by then fails over to another replica");
    /** Every user setting, in the order the documentation lists them. */
    static final List<Setting> SETTINGS = List.of(FALLBACK, TRANSPORT, PORT, BIND_ADDRESS, NET_DEVICES, BUFFER_CAP,
            SERVER_THREADS, SERVER_MAX_BYTES_IN_FLIGHT, REQUEST_BYTES, READ_WINDOWS_AHEAD, SERVER_MAX_WRITES, WRITE_PACKET_BYTES, WRITE_PACKETS_IN_FLIGHT,
            WRITE_IDLE_TIMEOUT_MS, REQUEST_TIMEOUT_MS);

    static final int REQUEST_BYTES_MIN = 64 << 10;
    static final int REQUEST_BYTES_MAX = 64 << 20;

    enum Fallback {
        /** The fabric when a DataNode offers it; otherwise HDFS's own readers. */
        AUTO,
        /** Fail when the fabric cannot be used. */
        NEVER
    }

    final Fallback fallback;
    final FabricTransport transport;
    final int port;
    final String bindAddress;
    final String netDevices;
    final long bufferCapBytes;
    final int serverThreads;
    final long serverMaxBytesInFlight;
    final int requestBytes;
    final int readWindowsAhead;
    final Duration requestTimeout;
    final int serverMaxWrites;
    /** Data bytes per packet a writer sends: {@code write.packet.bytes}, at most {@code request.bytes}. */
    final int writePacketBytes;
    final int writePacketsInFlight;
    final Duration writeIdleTimeout;

    HdfsConf(Configuration conf) {
        fallback = Setting.parseEnum(Fallback.class, get(conf, FALLBACK), FALLBACK.key());
        transport = Setting.parseEnum(FabricTransport.class, get(conf, TRANSPORT), TRANSPORT.key());
        port = conf.getInt(PORT.key(), Integer.parseInt(PORT.defaultValue()));
        bindAddress = get(conf, BIND_ADDRESS);
        netDevices = get(conf, NET_DEVICES);
        bufferCapBytes = conf.getLongBytes(BUFFER_CAP.key(), bytes(BUFFER_CAP));
        serverThreads = conf.getInt(SERVER_THREADS.key(), Integer.parseInt(SERVER_THREADS.defaultValue()));
        serverMaxBytesInFlight = conf.getLongBytes(SERVER_MAX_BYTES_IN_FLIGHT.key(), bytes(SERVER_MAX_BYTES_IN_FLIGHT));
        long request = conf.getLongBytes(REQUEST_BYTES.key(), bytes(REQUEST_BYTES));
        readWindowsAhead = conf.getInt(READ_WINDOWS_AHEAD.key(), Integer.parseInt(READ_WINDOWS_AHEAD.defaultValue()));
        if (readWindowsAhead < 0 || readWindowsAhead > 16) {
            throw new IllegalArgumentException(READ_WINDOWS_AHEAD.key() + "=" + readWindowsAhead + ": must be 0 to 16");
        }
        requestTimeout = Duration.ofMillis(conf.getLong(REQUEST_TIMEOUT_MS.key(), Long.parseLong(REQUEST_TIMEOUT_MS.defaultValue())));
        serverMaxWrites = conf.getInt(SERVER_MAX_WRITES.key(), Integer.parseInt(SERVER_MAX_WRITES.defaultValue()));
        long packet = conf.getLongBytes(WRITE_PACKET_BYTES.key(), bytes(WRITE_PACKET_BYTES));
        writePacketsInFlight = conf.getInt(WRITE_PACKETS_IN_FLIGHT.key(), Integer.parseInt(WRITE_PACKETS_IN_FLIGHT.defaultValue()));
        writeIdleTimeout = Duration.ofMillis(conf.getLong(WRITE_IDLE_TIMEOUT_MS.key(), Long.parseLong(WRITE_IDLE_TIMEOUT_MS.defaultValue())));
        if (writeIdleTimeout.toMillis() < 1000) {
            throw new IllegalArgumentException(WRITE_IDLE_TIMEOUT_MS.key() + "=" + writeIdleTimeout.toMillis() + ": must be at least 1000");
        }
        if (serverMaxWrites < 1 || serverMaxWrites > 1024) {
            throw new IllegalArgumentException(SERVER_MAX_WRITES.key() + "=" + serverMaxWrites + ": must be 1 to 1024");
        }
        if (packet < 4 << 10 || packet > REQUEST_BYTES_MAX) {
            throw new IllegalArgumentException(WRITE_PACKET_BYTES.key() + "=" + packet + ": must be 4 KiB to 64 MiB");
        }
        if (writePacketsInFlight < 1 || writePacketsInFlight > 256) {
            throw new IllegalArgumentException(WRITE_PACKETS_IN_FLIGHT.key() + "=" + writePacketsInFlight + ": must be 1 to 256");
        }
        if (port <= 0 || port > 0xffff) {
            throw new IllegalArgumentException(PORT.key() + "=" + port + ": a fixed TCP port (1 to 65535) is needed");
        }
        if (serverThreads < 1 || serverThreads > 64) {
            throw new IllegalArgumentException(SERVER_THREADS.key() + "=" + serverThreads + ": must be 1 to 64");
        }
        if (request < REQUEST_BYTES_MIN || request > REQUEST_BYTES_MAX) {
            throw new IllegalArgumentException(REQUEST_BYTES.key() + "=" + request + ": must be 64 KiB to 64 MiB");
        }
        requestBytes = (int) request;
        writePacketBytes = (int) Math.min(packet, requestBytes);
        if (serverMaxBytesInFlight < BlockReadProtocol.responseBytesMax(requestBytes) || serverMaxBytesInFlight > bufferCapBytes / 2) {
            throw new IllegalArgumentException(SERVER_MAX_BYTES_IN_FLIGHT.key() + "=" + serverMaxBytesInFlight
                    + ": must hold one full response (" + BlockReadProtocol.responseBytesMax(requestBytes) + " bytes) and be at most half of "
                    + BUFFER_CAP.key() + " (" + bufferCapBytes + ")");
        }
        if (requestTimeout.isNegative() || requestTimeout.isZero()) {
            throw new IllegalArgumentException(REQUEST_TIMEOUT_MS.key() + " must be positive");
        }
    }

    /** A fabric node with these settings (the DataNode's adds where it listens). */
    FabricConfig.Builder nodeBuilder() {
        return FabricNode.builder()
                .netDevices(netDevices.isEmpty() ? NetDevices.forAddress(bindAddress, NET_DEVICES.key()) : netDevices)
                .transport(transport)
                .poolCapBytes(bufferCapBytes)
                .maxMessageBytes(BlockReadProtocol.responseBytesMax(requestBytes))
                .requestTimeout(requestTimeout);
    }

    private static String get(Configuration conf, Setting setting) {
        return conf.get(setting.key(), setting.defaultValue()).trim();
    }

    /** A declared size default ({@code 4m}) in bytes, parsed as Hadoop parses the setting. */
    private static long bytes(Setting setting) {
        Configuration parse = new Configuration(false);
        parse.set(setting.key(), setting.defaultValue());
        return parse.getLongBytes(setting.key(), -1);
    }

}
