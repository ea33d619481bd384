package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.NetDevices;
import io.slipstream.fabric.session.FrameAuth;
import java.time.Duration;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeys;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;

/**
 * The engine's settings, all under {@code slipstream.rpc.*}, read from the server's configuration on its
 * side and from the client's on the other. The README lists them with their defaults.
 */
final class RpcConf {
    static final String PREFIX = "slipstream.rpc.";
    /** {@code auto}: socket path (one warning) when the fabric cannot carry calls; {@code never}: fail the call. */
    static final String FALLBACK = PREFIX + "fallback";
    /** {@code auto} (UCX picks: shared memory in a host, verbs on clusters, TCP otherwise) or {@code tcp}. */
    static final String TRANSPORT = PREFIX + "transport";
    /**
     * The server's fabric port; 0 (default) picks a free one, which clients learn by discovery. A server whose
     * RPC listener is on port P reads {@code ipc.P.slipstream.rpc.port} first (Hadoop's per-server key form, as
     * {@code ipc.P.callqueue.impl}): several servers of one configuration on a host (a NameNode and a
     * DataNode, or a mini cluster's in one JVM) each need a port of their own.
     */
    static final String PORT = PREFIX + "port";
    /** Network devices for UCX ({@code UCX_NET_DEVICES} syntax); empty: the device of the bind address. */
    static final String NET_DEVICES = PREFIX + "netDevices";
    /** Fabric sessions a server holds at once; beyond, a new session first evicts one idle past the timeout. */
    static final String SESSIONS_MAX = PREFIX + "sessions.max";
    /** A session unused this long may be evicted to make room for a new one. */
    static final String SESSION_IDLE_MS = PREFIX + "session.idle.ms";
    /** Registered memory per process for the fabric (a hard cap). */
    static final String BUFFER_CAP = PREFIX + "buffer.cap";
    /** Threads taking fabric calls off the wire into the server's call queue (the handlers run them). */
    static final String RECEIVER_THREADS = PREFIX + "receiver.threads";
    /**
     * With {@link FabricCallQueue}: the most idle handlers pulling fabric calls at once (instead of receiver
     * threads). One: a second puller waits on the fabric's dispatch queue, so the calls it gets come
     * through the progress thread, one hand-off more (docs/hadoop-rpc.md, "Latency").
     */
    static final String HANDLER_PULLERS = PREFIX + "handler.pullers";
    /** With {@link FabricCallQueue}: longest a handler waits on the fabric at a time (a server stop waits as long). */
    static final String HANDLER_PULL_MS = PREFIX + "handler.pull.ms";
    /**
     * What the MACs of a session's frames and answers cover: {@code header} (default: the session, sequence
     * number and length, as much as an authenticated socket connection without SASL wrapping proves) or
     * {@code full} (every byte too). A session takes {@code full} when its client's or its server's setting says so.
     */
    static final String FRAME_MAC = PREFIX + "frameMac";
    /** The client's backstop for a fabric call without an RPC timeout ({@code ipc.client.rpc-timeout.ms} 0). */
    static final String REQUEST_TIMEOUT_MS = PREFIX + "requestTimeout.ms";

    enum Fallback {
        AUTO,
        NEVER
    }

    final Fallback fallback;
    final FabricTransport transport;
    final String netDevices;
    final int sessionsMax;
    final Duration sessionIdle;
    final long bufferCapBytes;
    final int receiverThreads;
    final long handlerPullMs;
    final int handlerPullers;
    final long requestTimeoutMs;
    final FrameAuth.Coverage frameMac;
    /** {@code ipc.maximum.data.length} (requests on the server) and {@code ipc.maximum.response.length}. */
    final int maxDataLength;
    final int maxResponseLength;
    /** Why the fabric must not carry calls under this configuration (security), or null. */
    final String securityRefusal;

    RpcConf(Configuration conf) {
        fallback = parseEnum(Fallback.class, conf.getTrimmed(FALLBACK, "auto"), FALLBACK);
        transport = parseEnum(FabricTransport.class, conf.getTrimmed(TRANSPORT, "auto"), TRANSPORT);
        int port = conf.getInt(PORT, 0);
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("slipstream: " + PORT + "=" + port + " is not a port");
        }
        netDevices = conf.getTrimmed(NET_DEVICES, "");
        sessionsMax = conf.getInt(SESSIONS_MAX, 4096);
        if (sessionsMax < 1 || sessionsMax > 1_000_000) {
            throw new IllegalArgumentException("slipstream: " + SESSIONS_MAX + "=" + sessionsMax + " must be 1 to 1000000");
        }
        sessionIdle = Duration.ofMillis(conf.getLong(SESSION_IDLE_MS, 600_000));
        bufferCapBytes = conf.getLongBytes(BUFFER_CAP, 256L << 20);
        receiverThreads = conf.getInt(RECEIVER_THREADS, 2);
        if (receiverThreads < 1 || receiverThreads > 64) {
            throw new IllegalArgumentException("slipstream: " + RECEIVER_THREADS + "=" + receiverThreads + " must be 1 to 64");
        }
        handlerPullers = conf.getInt(HANDLER_PULLERS, 1);
        if (handlerPullers < 1 || handlerPullers > 64) {
            throw new IllegalArgumentException("slipstream: " + HANDLER_PULLERS + "=" + handlerPullers + " must be 1 to 64");
        }
        handlerPullMs = conf.getLong(HANDLER_PULL_MS, 100);
        if (handlerPullMs < 1 || handlerPullMs > 600_000) {
            throw new IllegalArgumentException("slipstream: " + HANDLER_PULL_MS + "=" + handlerPullMs + " must be 1 to 600000");
        }
        requestTimeoutMs = conf.getLong(REQUEST_TIMEOUT_MS, 600_000);
        if (requestTimeoutMs < 1) {
            throw new IllegalArgumentException("slipstream: " + REQUEST_TIMEOUT_MS + "=" + requestTimeoutMs + " must be positive");
        }
        frameMac = FrameAuth.Coverage.ofWord(conf.getTrimmed(FRAME_MAC, "header"));
        if (frameMac == null) {
            throw new IllegalArgumentException("slipstream: " + FRAME_MAC + "=" + conf.getTrimmed(FRAME_MAC)
                    + " must be header or full");
        }
        maxDataLength = conf.getInt(CommonConfigurationKeys.IPC_MAXIMUM_DATA_LENGTH,
                CommonConfigurationKeys.IPC_MAXIMUM_DATA_LENGTH_DEFAULT);
        maxResponseLength = conf.getInt(CommonConfigurationKeys.IPC_MAXIMUM_RESPONSE_LENGTH,
                CommonConfigurationKeys.IPC_MAXIMUM_RESPONSE_LENGTH_DEFAULT);
        securityRefusal = securityRefusal(conf);
    }

    /**
     * The fabric binds a session to the identity its socket connection authenticated (SIMPLE, Kerberos,
     * or a delegation token on either) and authenticates every frame with a key agreed over that
     * connection (docs/hadoop-rpc.md, "Security"); service-level authorization is checked for the protocol
     * of each session when it opens. It does not encrypt calls nor protect responses, so
     * {@code hadoop.rpc.protection} integrity or privacy keeps calls on the socket path (SASL's
     * wrapping), and an authentication method it does not know keeps them there too.
     */
    private static String securityRefusal(Configuration conf) {
        String auth = conf.getTrimmed(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHENTICATION, "simple");
        if (!"simple".equalsIgnoreCase(auth) && !"kerberos".equalsIgnoreCase(auth)) {
            return CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHENTICATION + "=" + auth
                    + " (the fabric binds sessions to simple, Kerberos and token identities only)";
        }
        for (String protection : conf.getTrimmedStrings(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION)) {
            if (!"authentication".equalsIgnoreCase(protection)) {
                return CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION + "=" + protection
                        + " (the fabric does not give calls that SASL protection: its frames and answers carry a"
                        + " session's MAC, its refusals none, and nothing is encrypted)";
            }
        }
        return null;
    }

    /** The fabric port of the server whose RPC listener is on {@code listenerPort} ({@link #PORT}). */
    static int serverPort(Configuration conf, int listenerPort) {
        String key = "ipc." + listenerPort + "." + PORT;
        int port = conf.getInt(key, conf.getInt(PORT, 0));
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("slipstream: " + (conf.get(key) != null ? key : PORT) + "=" + port
                    + " is not a port");
        }
        return port;
    }

    /** The fabric node for a client (no listener). */
    FabricConfig.Builder nodeBuilder() {
        return nodeBuilder(null, 0);
    }

    /** The fabric node for a server listening on {@code bindHost} at fabric port {@code fabricPort}, or a client (null). */
    FabricConfig.Builder nodeBuilder(String bindHost, int fabricPort) {
        FabricConfig.Builder b = FabricConfig.builder()
                .transport(transport)
                .poolCapBytes(bufferCapBytes)
                // Room for the largest request or response Hadoop allows, plus our 33-byte frame prefix.
                .maxMessageBytes((int) Math.min(FabricConfig.MAX_MESSAGE_BYTES_LIMIT,
                        (long) Math.max(maxDataLength, maxResponseLength) + 64));
        if (bindHost != null) {
            b.listen(bindHost, fabricPort).netDevices(netDevices.isEmpty() ? NetDevices.forAddress(bindHost, NET_DEVICES) : netDevices);
        } else if (!netDevices.isEmpty()) {
            b.netDevices(netDevices);
        }
        return b;
    }

    static <E extends Enum<E>> E parseEnum(Class<E> type, String value, String key) {
        try {
            return Enum.valueOf(type, value.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            StringBuilder allowed = new StringBuilder();
            for (E constant : type.getEnumConstants()) {
                allowed.append(allowed.length() == 0 ? "" : "|").append(constant.name().toLowerCase(Locale.ROOT));
            }
            throw new IllegalArgumentException("slipstream: " + key + "=" + value + ": expected " + allowed, e);
        }
    }
}
