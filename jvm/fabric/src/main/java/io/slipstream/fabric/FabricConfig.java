package io.slipstream.fabric;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

/**
 * Configuration of a {@link FabricNode}; mirrors the Rust {@code fabric::Config} setting by setting
 * (camelCase names, same defaults: a test checks both against the native declarations, and
 * docs/configuration.md is generated from them), plus {@link #completionQueueDepth()}, which only the
 * JVM bridge has. The handler mode is always {@code Pull}: Java threads run the handlers
 * (see {@link FabricNode#serve}).
 *
 * <p>Immutable; build with {@link #builder()}.
 */
public final class FabricConfig {
    /** Largest {@link #maxMessageBytes()}: a message must fit one {@link java.nio.ByteBuffer} (its pool class is the next power of two). */
    public static final int MAX_MESSAGE_BYTES_LIMIT = 1 << 30;

    private final InetSocketAddress listen;
    private final FabricTransport transport;
    private final int chunkSizeBytes;
    private final long poolCapBytes;
    private final int maxMessageBytes;
    private final int maxRequestsInFlight;
    private final int dispatchQueueDepth;
    private final Duration idleTimeout;
    private final Duration requestTimeout;
    private final long spinUs;
    private final boolean shmWithPeerErrors;
    private final int maxConnections;
    private final String netDevices;
    private final boolean sameHostEager;
    private final int completionQueueDepth;
    private final Duration wedgeTimeout;
    private final boolean corkOverTcp;
    private final boolean sameHostPull;
    private final int sameHostPullMinBytes;
    private final Duration incomingIdleTimeout;
    private final int maxReassemblyMessagesPerConnection;
    private final int maxReassemblyMessages;
    private final long maxReassemblyBytesPerConnection;
    private final Duration reassemblyTimeout;

    private FabricConfig(Builder b) {
        this.listen = b.listen;
        this.transport = b.transport;
        this.chunkSizeBytes = b.chunkSizeBytes;
        this.poolCapBytes = b.poolCapBytes;
        this.maxMessageBytes = b.maxMessageBytes;
        this.maxRequestsInFlight = b.maxRequestsInFlight;
        this.dispatchQueueDepth = b.dispatchQueueDepth;
        this.idleTimeout = b.idleTimeout;
        this.requestTimeout = b.requestTimeout;
        this.spinUs = b.spinUs;
        this.shmWithPeerErrors = b.shmWithPeerErrors;
        this.maxConnections = b.maxConnections;
        this.netDevices = b.netDevices;
        this.sameHostEager = b.sameHostEager;
        this.completionQueueDepth = b.completionQueueDepth;
        this.wedgeTimeout = b.wedgeTimeout;
        this.corkOverTcp = b.corkOverTcp;
        this.sameHostPull = b.sameHostPull;
        this.sameHostPullMinBytes = b.sameHostPullMinBytes;
        this.incomingIdleTimeout = b.incomingIdleTimeout;
        this.maxReassemblyMessagesPerConnection = b.maxReassemblyMessagesPerConnection;
        this.maxReassemblyMessages = b.maxReassemblyMessages;
        this.maxReassemblyBytesPerConnection = b.maxReassemblyBytesPerConnection;
        this.reassemblyTimeout = b.reassemblyTimeout;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The defaults: a client-only node. */
    public static FabricConfig defaults() {
        return builder().build();
    }

    /** Address to listen on; {@code null} makes a client-only node. Port 0 picks a free port. */
    public InetSocketAddress listen() { return listen; }
    public FabricTransport transport() { return transport; }
    /** Payloads above this travel as several chunks. Default 1 MiB. */
    public int chunkSizeBytes() { return chunkSizeBytes; }
    /** Hard cap on registered buffer memory of the node. Default 256 MiB. */
    public long poolCapBytes() { return poolCapBytes; }
    /** Largest request or response accepted, sent or received. Default 128 MiB. */
    public int maxMessageBytes() { return maxMessageBytes; }
    /** Requests awaiting a response; a caller above it waits, up to the request timeout. Default 4096. */
    public int maxRequestsInFlight() { return maxRequestsInFlight; }
    /** Depth of the queue between receiving and handling (the handlers' backlog). Default 1024. */
    public int dispatchQueueDepth() { return dispatchQueueDepth; }
    /** Cached outgoing connections unused this long are closed. Default 60 s. */
    public Duration idleTimeout() { return idleTimeout; }
    /** A request without a response after this fails with {@link FabricException.Kind#TIMEOUT}. Default 30 s. */
    public Duration requestTimeout() { return requestTimeout; }
    /** The progress thread spins this long before sleeping on the worker's event fd. Default 50 us. */
    public long spinUs() { return spinUs; }
    /** Keep shared memory between processes with peer error handling ({@code UCX_MM_ERROR_HANDLING=y}). Default true. */
    public boolean shmWithPeerErrors() { return shmWithPeerErrors; }
    /** Connections a listening node accepts at once. */
    public int maxConnections() { return maxConnections; }
    /** Network devices UCX may use ({@code UCX_NET_DEVICES} syntax); {@code UCX_NET_DEVICES} in the environment wins. */
    public String netDevices() { return netDevices; }
    /** Same-host peers are sent to eagerly through shared memory (see docs/fabric.md for the risk). */
    public boolean sameHostEager() { return sameHostEager; }
    /**
     * JVM bridge only: asynchronous requests awaiting completion by this node's completer thread
     * (the bound of its native completion queue). {@link FabricEndpoint#requestAsync} waits above it,
     * up to the request timeout. Default 4096.
     */
    public int completionQueueDepth() { return completionQueueDepth; }

    /** Accepted connections on which nothing was received or sent this long, with no request being served, are closed. Default 120 s. */
    public Duration incomingIdleTimeout() { return incomingIdleTimeout; }
    /** Multi-chunk requests one connection may have in reassembly; one more closes that connection. Default 256. */
    public int maxReassemblyMessagesPerConnection() { return maxReassemblyMessagesPerConnection; }
    /** Multi-chunk requests in reassembly over all connections. Default 4096. */
    public int maxReassemblyMessages() { return maxReassemblyMessages; }
    /** Buffer bytes one connection's requests may hold in reassembly; beyond it a request is answered pool-exhausted. Default 128 MiB. */
    public long maxReassemblyBytesPerConnection() { return maxReassemblyBytesPerConnection; }
    /** A message whose chunks stop arriving this long is dropped with its buffer. Default 30 s. */
    public Duration reassemblyTimeout() { return reassemblyTimeout; }

    /** Between processes on one host, the receiver pulls large messages from the sender's buffer with process_vm_readv (one copy) instead of UCX moving them; refused peers keep UCX. Default true. */
    public boolean sameHostPull() { return sameHostPull; }
    /** Smallest message that takes the same-host pull path. Default 16 KiB. */
    public int sameHostPullMinBytes() { return sameHostPullMinBytes; }

    /**
     * After a peer failed, a worker that then receives nothing while a later request waits this long
     * is renewed (UCX 1.13's shared-memory FIFO hazard; see docs/fabric.md); zero turns the check off.
     * Default 5 s.
     */
    public Duration wedgeTimeout() { return wedgeTimeout; }

    /**
     * On connections over TCP only, a small request (or answer) posted while others of its connection are
     * in flight (or in service) waits for the next progress round, which sends those gathered by then as
     * one message; a lone one goes at once (docs/fabric.md, "Corked requests and answers"). Default true.
     */
    public boolean corkOverTcp() { return corkOverTcp; }

    /**
     * Every setting but the listen address as {@code fabric::Config} names and text values
     * ({@code [name, value, ...]}), the form the native side parses ({@code Config::set}).
     */
    String[] nativeSettings() {
        return new String[] {
            "transport", transport == FabricTransport.TCP ? "tcp" : "auto",
            "chunk_size_bytes", Integer.toString(chunkSizeBytes),
            "pool_cap_bytes", Long.toString(poolCapBytes),
            "max_message_bytes", Integer.toString(maxMessageBytes),
            "max_requests_in_flight", Integer.toString(maxRequestsInFlight),
            "max_connections", Integer.toString(maxConnections),
            "dispatch_queue_depth", Integer.toString(dispatchQueueDepth),
            "idle_timeout", durationText(idleTimeout),
            "incoming_idle_timeout", durationText(incomingIdleTimeout),
            "max_reassembly_messages_per_connection", Integer.toString(maxReassemblyMessagesPerConnection),
            "max_reassembly_messages", Integer.toString(maxReassemblyMessages),
            "max_reassembly_bytes_per_connection", Long.toString(maxReassemblyBytesPerConnection),
            "reassembly_timeout", durationText(reassemblyTimeout),
            "request_timeout", durationText(requestTimeout),
            "spin_us", Long.toString(spinUs),
            "shm_with_peer_errors", Boolean.toString(shmWithPeerErrors),
            "net_devices", netDevices,
            "same_host_eager", Boolean.toString(sameHostEager),
            "same_host_pull", Boolean.toString(sameHostPull),
            "same_host_pull_min_bytes", Integer.toString(sameHostPullMinBytes),
            "wedge_timeout", durationText(wedgeTimeout),
            "cork_over_tcp", Boolean.toString(corkOverTcp),
        };
    }

    /** A duration as the native side writes it: the largest exact unit of min, s, ms, us. */
    static String durationText(Duration d) {
        long us = d.toNanos() / 1000;
        if (us > 0 && us % 60_000_000 == 0) {
            return us / 60_000_000 + "min";
        } else if (us % 1_000_000 == 0) {
            return us / 1_000_000 + "s";
        } else if (us % 1000 == 0) {
            return us / 1000 + "ms";
        }
        return us + "us";
    }

    @Override
    public String toString() {
        return "FabricConfig{listen=" + listen + ", transport=" + transport + ", chunkSizeBytes=" + chunkSizeBytes
                + ", poolCapBytes=" + poolCapBytes + ", maxMessageBytes=" + maxMessageBytes
                + ", maxRequestsInFlight=" + maxRequestsInFlight + ", dispatchQueueDepth=" + dispatchQueueDepth
                + ", idleTimeout=" + idleTimeout + ", requestTimeout=" + requestTimeout + ", spinUs=" + spinUs
                + ", shmWithPeerErrors=" + shmWithPeerErrors + ", completionQueueDepth=" + completionQueueDepth
                + ", maxConnections=" + maxConnections + ", netDevices=" + netDevices + ", sameHostEager=" + sameHostEager
                + ", incomingIdleTimeout=" + incomingIdleTimeout + ", maxReassemblyMessagesPerConnection=" + maxReassemblyMessagesPerConnection
                + ", maxReassemblyMessages=" + maxReassemblyMessages + ", maxReassemblyBytesPerConnection=" + maxReassemblyBytesPerConnection
                + ", reassemblyTimeout=" + reassemblyTimeout + ", sameHostPull=" + sameHostPull
                + ", sameHostPullMinBytes=" + sameHostPullMinBytes + ", wedgeTimeout=" + wedgeTimeout
                + ", corkOverTcp=" + corkOverTcp + "}";
    }

    /** Builder; every setter checks its own range, the native side checks the combination. */
    public static final class Builder {
        private InetSocketAddress listen;
        private FabricTransport transport = FabricTransport.AUTO;
        private int chunkSizeBytes = 1 << 20;
        private long poolCapBytes = 256L << 20;
        private int maxMessageBytes = 128 << 20;
        private int maxRequestsInFlight = 4096;
        private int dispatchQueueDepth = 1024;
        private Duration idleTimeout = Duration.ofSeconds(60);
        private Duration requestTimeout = Duration.ofSeconds(30);
        private long spinUs = 50;
        private boolean shmWithPeerErrors = true;
        private int maxConnections = 1024;
        private String netDevices = "lo";
        private boolean sameHostEager = false;
        private int completionQueueDepth = 4096;
        private Duration wedgeTimeout = Duration.ofSeconds(5);
        /**
         * Engines build their FabricConfig from their own settings, which do not name this one: the system
         * property {@code slipstream.fabric.corkOverTcp=false} turns corking off for every node of a JVM (an
         * escape hatch, and the A/B switch of docs/fabric.md's measurements).
         */
        private boolean corkOverTcp = Boolean.parseBoolean(System.getProperty("slipstream.fabric.corkOverTcp", "true"));
        private boolean sameHostPull = true;
        private int sameHostPullMinBytes = 8 << 10;
        private Duration incomingIdleTimeout = Duration.ofSeconds(120);
        private int maxReassemblyMessagesPerConnection = 256;
        private int maxReassemblyMessages = 4096;
        private long maxReassemblyBytesPerConnection = 128L << 20;
        private Duration reassemblyTimeout = Duration.ofSeconds(30);

        private Builder() {
        }

        /** Listen on {@code address} (an IP literal or a resolvable name; port 0 picks one). */
        public Builder listen(InetSocketAddress address) {
            if (address != null && address.isUnresolved()) {
                throw new IllegalArgumentException("listen address is unresolved: " + address);
            }
            this.listen = address;
            return this;
        }

        /** Listen on {@code host:port}; port 0 picks one. */
        public Builder listen(String host, int port) {
            return listen(new InetSocketAddress(host, port));
        }

        public Builder transport(FabricTransport transport) {
            this.transport = Objects.requireNonNull(transport, "transport");
            return this;
        }

        public Builder chunkSizeBytes(int bytes) {
            this.chunkSizeBytes = positive("chunkSizeBytes", bytes);
            return this;
        }

        public Builder poolCapBytes(long bytes) {
            if (bytes <= 0) {
                throw new IllegalArgumentException("poolCapBytes must be positive: " + bytes);
            }
            this.poolCapBytes = bytes;
            return this;
        }

        public Builder maxMessageBytes(int bytes) {
            if (bytes <= 0 || bytes > MAX_MESSAGE_BYTES_LIMIT) {
                throw new IllegalArgumentException("maxMessageBytes must be in 1.." + MAX_MESSAGE_BYTES_LIMIT + ": " + bytes);
            }
            this.maxMessageBytes = bytes;
            return this;
        }

        public Builder maxRequestsInFlight(int requests) {
            this.maxRequestsInFlight = positive("maxRequestsInFlight", requests);
            return this;
        }

        public Builder dispatchQueueDepth(int depth) {
            this.dispatchQueueDepth = positive("dispatchQueueDepth", depth);
            return this;
        }

        public Builder idleTimeout(Duration timeout) {
            this.idleTimeout = positive("idleTimeout", timeout);
            return this;
        }

        public Builder requestTimeout(Duration timeout) {
            this.requestTimeout = positive("requestTimeout", timeout);
            return this;
        }

        public Builder spinUs(long us) {
            if (us < 0) {
                throw new IllegalArgumentException("spinUs must not be negative: " + us);
            }
            this.spinUs = us;
            return this;
        }

        public Builder shmWithPeerErrors(boolean enabled) {
            this.shmWithPeerErrors = enabled;
            return this;
        }

        public Builder maxConnections(int connections) {
            this.maxConnections = positive("maxConnections", connections);
            return this;
        }

        /** Network devices UCX may use, e.g. {@code "mlx5_0:1"} on a cluster; the default keeps to loopback. */
        public Builder netDevices(String devices) {
            Objects.requireNonNull(devices, "devices");
            if (devices.isBlank()) {
                throw new IllegalArgumentException("netDevices must name at least one device");
            }
            this.netDevices = devices;
            return this;
        }

        public Builder sameHostEager(boolean enabled) {
            this.sameHostEager = enabled;
            return this;
        }

        public Builder completionQueueDepth(int depth) {
            this.completionQueueDepth = positive("completionQueueDepth", depth);
            return this;
        }

        public Builder incomingIdleTimeout(Duration timeout) {
            this.incomingIdleTimeout = positive("incomingIdleTimeout", timeout);
            return this;
        }

        public Builder maxReassemblyMessagesPerConnection(int value) {
            this.maxReassemblyMessagesPerConnection = positive("maxReassemblyMessagesPerConnection", value);
            return this;
        }

        public Builder maxReassemblyMessages(int value) {
            this.maxReassemblyMessages = positive("maxReassemblyMessages", value);
            return this;
        }

        public Builder maxReassemblyBytesPerConnection(long bytes) {
            if (bytes <= 0) {
                throw new IllegalArgumentException("maxReassemblyBytesPerConnection must be positive: " + bytes);
            }
            this.maxReassemblyBytesPerConnection = bytes;
            return this;
        }

        public Builder reassemblyTimeout(Duration timeout) {
            this.reassemblyTimeout = positive("reassemblyTimeout", timeout);
            return this;
        }

        public Builder sameHostPull(boolean enabled) {
            this.sameHostPull = enabled;
            return this;
        }

        public Builder sameHostPullMinBytes(int bytes) {
            this.sameHostPullMinBytes = positive("sameHostPullMinBytes", bytes);
            return this;
        }

        /** Zero turns the wedge check off. */
        public Builder wedgeTimeout(Duration timeout) {
            Objects.requireNonNull(timeout, "wedgeTimeout");
            if (timeout.isNegative()) {
                throw new IllegalArgumentException("wedgeTimeout must not be negative: " + timeout);
            }
            this.wedgeTimeout = timeout;
            return this;
        }

        public Builder corkOverTcp(boolean enabled) {
            this.corkOverTcp = enabled;
            return this;
        }

        public FabricConfig build() {
            return new FabricConfig(this);
        }

        /** Shorthand for {@code FabricNode.start(build())}. */
        public FabricNode start() throws FabricUnavailableException {
            return FabricNode.start(build());
        }

        private static int positive(String name, int value) {
            if (value <= 0) {
                throw new IllegalArgumentException(name + " must be positive: " + value);
            }
            return value;
        }

        private static Duration positive(String name, Duration value) {
            Objects.requireNonNull(value, name);
            if (value.isNegative() || value.isZero() || value.toMillis() <= 0) {
                throw new IllegalArgumentException(name + " must be at least 1 ms: " + value);
            }
            return value;
        }
    }
}
