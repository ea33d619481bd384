package io.slipstream.hbase.rpc;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.NetDevices;
import io.slipstream.fabric.session.FrameAuth;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.security.SaslUtil;
import org.apache.hadoop.hbase.security.SecurityConstants;
import org.apache.hadoop.hbase.security.User;

/**
 * The settings of the HBase RPC client and server, all under {@code slipstream.hbase.rpc.*}, read from
 * the server's configuration on its side and from the client's on the other. The README lists them.
 */
final class HBaseRpcConf {
    static final String PREFIX = "slipstream.hbase.rpc.";
    /** {@code auto}: HBase's socket path (one warning) when the fabric cannot carry calls; {@code never}: fail. */
    static final String FALLBACK = PREFIX + "fallback";
    /** {@code auto} (UCX picks: shared memory in a host, verbs on clusters, TCP otherwise) or {@code tcp}. */
    static final String TRANSPORT = PREFIX + "transport";
    /** The server's fabric port; 0 (default) picks a free one, which clients learn by discovery. */
    static final String PORT = PREFIX + "port";
    /** Network devices for UCX ({@code UCX_NET_DEVICES} syntax); empty: the device of the bind address. */
    static final String NET_DEVICES = PREFIX + "netDevices";
    /** Fabric sessions a server holds at once; beyond, a new one first evicts one idle past the timeout. */
    static final String SESSIONS_MAX = PREFIX + "sessions.max";
    /** A session unused this long may be evicted to make room for a new one. */
    static final String SESSION_IDLE_MS = PREFIX + "session.idle.ms";
    /** Registered memory per process for the fabric (a hard cap). */
    static final String BUFFER_CAP = PREFIX + "buffer.cap";
    /** Threads taking fabric frames off the wire into the server's RpcScheduler (its handlers run the calls). */
    static final String RECEIVER_THREADS = PREFIX + "receiver.threads";
    /**
     * With {@link FabricCallQueue}: the most idle handlers pulling fabric calls at once (instead of receiver
     * threads). One: a second puller waits on the fabric's dispatch queue, so the calls it gets come through the
     * progress thread, one hand-off more (docs/hadoop-rpc.md, "Latency").
     */
    static final String HANDLER_PULLERS = PREFIX + "handler.pullers";
    /** With {@link FabricCallQueue}: longest a handler waits on the fabric at a time (a stop of HBase's handlers waits as long). */
    static final String HANDLER_PULL_MS = PREFIX + "handler.pull.ms";
    /** The fabric's own backstop for a call; HBase's RPC timeout (hbase.rpc.timeout) is the one callers see. */
    static final String REQUEST_TIMEOUT_MS = PREFIX + "requestTimeout.ms";
    /**
     * What the MACs of a session's frames and answers cover: {@code header} (default: the session, sequence number
     * and the body's length, what an authenticated socket connection without SASL wrapping proves) or {@code full}
     * (every byte). A session takes {@code full} when its client or its server says so (docs/hbase-rpc.md,
     * "Security").
     */
    static final String FRAME_MAC = PREFIX + "frameMac";
    /** Bytes a server's fabric takes above hbase.ipc.max.request.size, so that it answers those with HBase's error. */
    static final int TOO_BIG_SLACK_BYTES = 64 << 10;
    /** HBase's SASL quality of protection (its RpcServer and clients read this key; a list, default authentication). */
    static final String RPC_PROTECTION = "hbase.rpc.protection";

    enum Fallback {
        AUTO,
        NEVER
    }

    final Fallback fallback;
    final FabricTransport transport;
    final int port;
    final String netDevices;
    final int sessionsMax;
    final long sessionIdleMs;
    final long bufferCapBytes;
    final int receiverThreads;
    final int handlerPullers;
    final long handlerPullMs;
    final long requestTimeoutMs;
    final FrameAuth.Coverage frameMac;
    /** {@code hbase.ipc.max.request.size} (the server's limit on one request). */
    final int maxRequestBytes;
    /** Why the fabric must not carry calls under this configuration (security), or null. */
    final String securityRefusal;
    /** {@code hbase.security.authentication=kerberos}: socket connections, OpenSession's too, authenticate by SASL. */
    final boolean saslAuthenticated;
    /**
     * Under SASL, the server principal keys this configuration sets (the HMaster's, the RegionServers'): the
     * principals a client's discovery connection may authenticate the server as.
     */
    final List<String> serverPrincipalKeys;

    HBaseRpcConf(Configuration conf) {
        fallback = parseEnum(Fallback.class, conf.getTrimmed(FALLBACK, "auto"), FALLBACK);
        transport = parseEnum(FabricTransport.class, conf.getTrimmed(TRANSPORT, "auto"), TRANSPORT);
        port = conf.getInt(PORT, 0);
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("slipstream: " + PORT + "=" + port + " is not a port");
        }
        netDevices = conf.getTrimmed(NET_DEVICES, "");
        sessionsMax = conf.getInt(SESSIONS_MAX, 4096);
        if (sessionsMax < 1 || sessionsMax > 1_000_000) {
            throw new IllegalArgumentException("slipstream: " + SESSIONS_MAX + "=" + sessionsMax + " must be 1 to 1000000");
        }
        sessionIdleMs = conf.getLong(SESSION_IDLE_MS, 600_000);
        bufferCapBytes = conf.getLongBytes(BUFFER_CAP, 256L << 20);
        if (bufferCapBytes < (1 << 20)) {
            throw new IllegalArgumentException("slipstream: " + BUFFER_CAP + "=" + bufferCapBytes + " is below 1 MiB");
        }
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
        maxRequestBytes = conf.getInt(RpcServer.MAX_REQUEST_SIZE, RpcServer.DEFAULT_MAX_REQUEST_SIZE);
        if (maxRequestBytes < 1) {
            throw new IllegalArgumentException("slipstream: " + RpcServer.MAX_REQUEST_SIZE + "=" + maxRequestBytes);
        }
        saslAuthenticated = User.isHBaseSecurityEnabled(conf);
        serverPrincipalKeys = new ArrayList<>(2);
        for (String key : new String[] {SecurityConstants.REGIONSERVER_KRB_PRINCIPAL, SecurityConstants.MASTER_KRB_PRINCIPAL}) {
            if (conf.get(key) != null) {
                serverPrincipalKeys.add(key);
            }
        }
        securityRefusal = securityRefusal(conf);
    }

    /**
     * Why the fabric must not carry calls here, or null. A session is opened over an authenticated socket
     * connection and bound to its user, and its frames are authenticated (docs/hbase-rpc.md, "Security"), but
     * calls and answers travel unencrypted: SASL with QOP {@code authentication} (which protects nothing after
     * the handshake either) is carried; integrity or privacy, and TLS, keep calls on HBase's socket path.
     */
    private static String securityRefusal(Configuration conf) {
        if (User.isHBaseSecurityEnabled(conf)) {
            String protection = conf.get(RPC_PROTECTION, SaslUtil.QualityOfProtection.AUTHENTICATION.name()
                    .toLowerCase(Locale.ROOT));
            for (String qop : protection.split(",")) {
                boolean authenticationOnly;
                try {
                    authenticationOnly = SaslUtil.getQop(qop.trim()) == SaslUtil.QualityOfProtection.AUTHENTICATION;
                } catch (IllegalArgumentException e) {
                    authenticationOnly = false;
                }
                if (!authenticationOnly) {
                    return "hbase.security.authentication=" + conf.get(User.HBASE_SECURITY_CONF_KEY) + " and "
                            + RPC_PROTECTION + "=" + protection + " (the fabric gives calls neither SASL's integrity nor"
                            + " its privacy)";
                }
            }
        }
        for (String tls : new String[] {"hbase.server.netty.tls.enabled", "hbase.client.netty.tls.enabled"}) {
            if (conf.getBoolean(tls, false)) {
                return tls + "=true (the fabric carries calls without encryption)";
            }
        }
        return null;
    }

    /**
     * The largest frame a server's fabric node takes: HBase's limit, its slack and the session prefix, at
     * most the largest message the registered memory holds (a power of two within the buffer cap).
     */
    int serverFrameBytesMax() {
        return (int) Math.min(messageBytesCap(), (long) maxRequestBytes + TOO_BIG_SLACK_BYTES + Frames.PREFIX_BYTES);
    }

    /** The largest message the fabric's pool holds: it rounds a message up to a power of two. */
    long messageBytesCap() {
        return Math.min(FabricConfig.MAX_MESSAGE_BYTES_LIMIT, Long.highestOneBit(bufferCapBytes));
    }

    /** The fabric node of a server listening on {@code bindHost}, or of a client (null). */
    FabricConfig.Builder nodeBuilder(String bindHost) {
        FabricConfig.Builder b = FabricConfig.builder().transport(transport).poolCapBytes(bufferCapBytes);
        if (bindHost != null) {
            b.maxMessageBytes(serverFrameBytesMax())
                    .listen(bindHost, port)
                    .netDevices(netDevices.isEmpty() ? NetDevices.forAddress(bindHost, NET_DEVICES) : netDevices);
        } else {
            // A client's responses are as large as the server makes them (HBase sets no limit on them): as
            // large as the registered memory allows.
            b.maxMessageBytes((int) messageBytesCap());
            if (!netDevices.isEmpty()) {
                b.netDevices(netDevices);
            }
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
