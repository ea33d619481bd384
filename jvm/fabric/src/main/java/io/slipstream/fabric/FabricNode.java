package io.slipstream.fabric;

import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fabric node in this JVM: a UCX context and worker with its progress thread, a pool of registered
 * buffers, cached connections to peers and, if it listens, a listener. Thread-safe.
 *
 * <p>Threads: the fabric's native progress thread never runs Java code. Requests to this node are
 * pulled by Java threads ({@link #nextRequest}, or the handler threads of {@link #serve}); responses
 * to asynchronous requests are completed by one Java completer thread per node, started on the first
 * {@link FabricEndpoint#requestAsync}.
 *
 * <p>Close it: {@link #close()} stops the listener, fails what is in flight, and ends this node's
 * threads. The registered memory stays mapped until every buffer view of the node is garbage (see
 * {@link FabricBuffer}).
 */
public final class FabricNode implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(FabricNode.class.getName());
    /** Handler threads wake this often to notice close (the fabric's next_request does not return early on close). */
    private static final Duration SERVE_POLL = Duration.ofMillis(200);
    /** How long close waits for handler threads still running a handler. */
    private static final Duration CLOSE_WAIT = Duration.ofSeconds(5);
    /** At most this many handler threads per node, over all {@link #serve} calls. */
    public static final int SERVE_THREADS_MAX = 256;

    private static final AtomicInteger NODE_NUMBERS = new AtomicInteger();

    /** Names this node's threads: {@code slipstream-fabric-<number>-handler-<n>}, {@code ...-completer}. */
    private final int number = NODE_NUMBERS.incrementAndGet();
    private final FabricConfig config;
    private final NodeHandle handle;
    private final Completer completer;
    private final InetSocketAddress localAddress;
    private final ConcurrentHashMap<InetSocketAddress, FabricEndpoint> endpoints = new ConcurrentHashMap<>();
    private final List<Thread> servers = new ArrayList<>();
    private final AtomicInteger serverNumbers = new AtomicInteger();
    /** Takes turns among the handler threads of {@link #serve}: one pulls at a time. */
    private final ServeTurns pulling = new ServeTurns();
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    private FabricNode(FabricConfig config, NodeHandle handle, InetSocketAddress localAddress) {
        this.config = config;
        this.handle = handle;
        this.localAddress = localAddress;
        this.completer = new Completer(handle, config.completionQueueDepth(), config.requestTimeout().toMillis(),
                threadName("completer"), localAddress == null);
        this.cleanable = NodeHandle.CLEANER.register(this, new Closer(handle, completer, servers, pulling));
    }

    public static FabricConfig.Builder builder() {
        return FabricConfig.builder();
    }

    /**
     * Starts a node, loading the native library first if needed.
     *
     * @throws FabricUnavailableException the fabric cannot run in this JVM (see {@link NativeLoader})
     * @throws FabricException the node cannot start (e.g. {@code CONFIG}, or {@code UCX} when the listen address is taken)
     */
    public static FabricNode start(FabricConfig config) throws FabricUnavailableException {
        Objects.requireNonNull(config, "config");
        NativeLoader.load();
        InetSocketAddress listen = config.listen();
        long ptr = FabricNative.nodeStart(
                listen == null ? null : listen.getAddress().getHostAddress(),
                listen == null ? 0 : listen.getPort(),
                config.nativeSettings(),
                config.completionQueueDepth());
        NodeHandle handle = new NodeHandle(ptr);
        InetSocketAddress local;
        try {
            local = parseAddress(FabricNative.nodeLocalAddress(ptr));
        } catch (RuntimeException e) {
            handle.markClosed();
            FabricNative.nodeClose(ptr);
            handle.exit();
            throw e;
        }
        return new FabricNode(config, handle, local);
    }

    /** Prefix of this node's thread names. */
    String threadName(String role) {
        return "slipstream-fabric-" + number + "-" + role;
    }

    public FabricConfig config() {
        return config;
    }

    /** The address peers connect to (the actual port if the config said 0); null for a client-only node. */
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    /** The endpoint for {@code peer} (an IP address and port), created on first use and cached. */
    public FabricEndpoint endpoint(InetSocketAddress peer) {
        Objects.requireNonNull(peer, "peer");
        if (peer.isUnresolved()) {
            throw new IllegalArgumentException("peer address is unresolved: " + peer);
        }
        FabricEndpoint cached = endpoints.get(peer);
        if (cached != null) {
            return cached;
        }
        handle.enter();
        try {
            return endpoints.computeIfAbsent(peer, p -> {
                long ptr = FabricNative.nodeEndpoint(handle.ptr, p.getAddress().getHostAddress(), p.getPort());
                handle.addEndpoint(ptr);
                return new FabricEndpoint(this, handle, completer, ptr, p);
            });
        } finally {
            handle.exit();
        }
    }

    /** Shorthand for {@code endpoint(new InetSocketAddress(host, port))}. */
    public FabricEndpoint endpoint(String host, int port) {
        return endpoint(new InetSocketAddress(host, port));
    }

    /**
     * A registered buffer of {@code length} valid bytes (contents unspecified), waiting up to the
     * request timeout while the pool is at its cap.
     */
    public FabricBuffer allocate(int length) {
        return alloc(length, true);
    }

    /** Like {@link #allocate} but fails at once with {@code POOL_EXHAUSTED} at the cap. */
    public FabricBuffer tryAllocate(int length) {
        return alloc(length, false);
    }

    private FabricBuffer alloc(int length, boolean wait) {
        if (length < 0) {
            throw new IllegalArgumentException("length must not be negative: " + length);
        }
        long[] out = new long[3];
        handle.enter();
        try {
            ByteBuffer view = FabricNative.nodeAlloc(handle.ptr, length, wait, out);
            return FabricBuffer.adopt(handle, view, out[0], out[1], out[2]);
        } finally {
            handle.exit();
        }
    }

    /**
     * The next request to this node, waiting up to {@code timeout}; null if none came. For callers
     * that run their own handler threads; {@link #serve} does this for you.
     */
    public FabricRequest nextRequest(Duration timeout) {
        return nextRequest(timeout, true);
    }

    /**
     * {@link #nextRequest(Duration)}; with {@code spin} false the thread that waits on the fabric's
     * event fd sleeps there at once instead of spinning first (about 100 us): for a puller taking
     * over from one that left with a call, whose spin would take the core that call runs on.
     */
    public FabricRequest nextRequest(Duration timeout, boolean spin) {
        long timeoutMs = Math.max(0, timeout.toMillis());
        long[] out = new long[5];
        handle.enter();
        try {
            ByteBuffer view = FabricNative.nodeNextRequest(handle.ptr, timeoutMs, spin, out);
            if (view == null) {
                return null;
            }
            FabricBuffer payload = FabricBuffer.adopt(handle, view, out[1], out[2], out[4]);
            return FabricRequest.adopt(handle, out[0], (int) out[3], payload);
        } finally {
            handle.exit();
        }
    }

    /**
     * Makes one {@link #nextRequest} return null at once (unless a request came): one under way, or
     * else the next one. For threads that pull requests and also serve work from elsewhere: whoever
     * queues such work interrupts a pull, so that a puller looks at it, even one about to pull.
     * Interrupts do not add up (one pending at most). Does nothing on a closed node.
     */
    public void interruptPull() {
        try {
            handle.enter();
        } catch (FabricException closed) {
            return; // its pulls returned at the close
        }
        try {
            FabricNative.nodeInterruptPull(handle.ptr);
        } finally {
            handle.exit();
        }
    }

    /**
     * Starts {@code threads} daemon threads that pull requests and run {@code handler} on them until
     * the node is closed. May be called more than once (e.g. with different handlers: each request
     * goes to whichever thread pulls it), up to {@value #SERVE_THREADS_MAX} threads in all.
     */
    public void serve(FabricHandler handler, int threads) {
        Objects.requireNonNull(handler, "handler");
        if (threads <= 0) {
            throw new IllegalArgumentException("threads must be positive: " + threads);
        }
        synchronized (servers) {
            if (handle.isClosed()) {
                throw FabricException.closed();
            }
            if (servers.size() + threads > SERVE_THREADS_MAX) {
                throw new IllegalArgumentException("at most " + SERVE_THREADS_MAX + " handler threads per node");
            }
            for (int i = 0; i < threads; i++) {
                Thread thread = new Thread(() -> serveLoop(handler),
                        threadName("handler-" + serverNumbers.incrementAndGet()));
                thread.setDaemon(true);
                servers.add(thread);
                thread.start();
            }
        }
    }

    private void serveLoop(FabricHandler handler) {
        Thread me = Thread.currentThread();
        try {
            while (!handle.isClosed()) {
                if (!pulling.takeTurn(me)) {
                    continue; // another thread pulls: this one waited as standby or follower
                }
                FabricRequest request = null;
                FabricException failure = null;
                try {
                    request = nextRequest(SERVE_POLL);
                } catch (FabricException e) {
                    failure = e;
                } finally {
                    // Before the handler runs: the standby takes over pulling if the handler takes long.
                    pulling.endTurn(request != null);
                }
                if (failure != null && failure.kind() != FabricException.Kind.CLOSED) {
                    LOG.log(Level.ERROR, "pulling requests failed", failure);
                    pause(SERVE_POLL); // no busy loop on a persistent failure
                }
                if (request == null) {
                    continue;
                }
                if (!handleOne(handler, request)) {
                    return;
                }
            }
        } finally {
            pulling.leave(me);
        }
    }

    /** Runs the handler on one request; false if the thread must stop (a VirtualMachineError). */
    private static boolean handleOne(FabricHandler handler, FabricRequest request) {
        try {
            handler.handle(request);
        } catch (Throwable t) {
            if (!request.isAnswered()) {
                try {
                    request.fail(String.valueOf(t));
                } catch (RuntimeException e) {
                    LOG.log(Level.WARNING, "failing a request after its handler threw failed too", e);
                }
            } else {
                LOG.log(Level.WARNING, "handler threw after answering request op " + request.op(), t);
            }
            if (t instanceof VirtualMachineError) {
                LOG.log(Level.ERROR, "handler thread stops after " + t);
                return false;
            }
        }
        return true;
    }

    private static void pause(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public FabricStats stats() {
        handle.enter();
        try {
            return FabricStats.of(FabricNative.nodeStats(handle.ptr));
        } finally {
            handle.exit();
        }
    }

    /** For tests: the lifetime of the native node, observable without keeping this node reachable. */
    NodeHandle handle() {
        return handle;
    }

    /** True once the native node and its pool are freed: after close, when no buffer view is left (for tests). */
    boolean isNativeFreed() {
        return handle.isFreed();
    }

    /** Threads spinning in {@code get}/{@code join} to complete this node's futures now (tests). */
    int helpersSpinning() {
        return completer.spinning();
    }

    /** How long the next waiting thread spins before it parks (tests). */
    long helperSpinBudgetNanos() {
        return completer.spinBudgetNanos();
    }

    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Closes the node: no new calls, requests in flight fail with {@code CLOSED}, the listener and
     * connections close, handler and completer threads end (waiting a bounded time for handlers that
     * are still running). Idempotent. A node that becomes garbage unclosed (no reference to it or to
     * its endpoints, no handler threads) is closed by a cleaner, so its native threads do not leak.
     */
    @Override
    public void close() {
        cleanable.clean();
    }

    /** The close sequence; also the {@link java.lang.ref.Cleaner} action, so it references no {@code FabricNode}. */
    private static final class Closer implements Runnable {
        private final NodeHandle handle;
        private final Completer completer;
        private final List<Thread> servers;

        private final ServeTurns pulling;

        Closer(NodeHandle handle, Completer completer, List<Thread> servers, ServeTurns pulling) {
            this.pulling = pulling;
            this.handle = handle;
            this.completer = completer;
            this.servers = servers;
        }

        @Override
        public void run() {
            if (!handle.markClosed()) {
                return;
            }
            try {
                FabricNative.nodeClose(handle.ptr);
            } catch (FabricException e) {
                LOG.log(Level.ERROR, "closing the native node failed", e);
            }
            List<Thread> toJoin;
            synchronized (servers) {
                toJoin = new ArrayList<>(servers);
            }
            pulling.wakeAll();
            long deadline = System.nanoTime() + CLOSE_WAIT.toNanos();
            for (Thread thread : toJoin) {
                if (thread == Thread.currentThread()) {
                    continue; // closed from a handler
                }
                try {
                    thread.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
                if (thread.isAlive()) {
                    LOG.log(Level.WARNING, thread.getName() + " is still in its handler after close");
                }
            }
            completer.close();
            handle.exit();
        }
    }

    @Override
    public String toString() {
        return "FabricNode{number=" + number + ", local=" + localAddress + ", closed=" + isClosed() + "}";
    }

    /** Parses Rust's {@code SocketAddr} text: {@code 1.2.3.4:5} or {@code [::1]:5}; null stays null. */
    static InetSocketAddress parseAddress(String text) {
        if (text == null) {
            return null;
        }
        int colon = text.lastIndexOf(':');
        if (colon <= 0) {
            throw new FabricException(FabricException.Kind.INTERNAL, "bad socket address from native: " + text);
        }
        String host = text.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int percent = host.indexOf('%');
        if (percent >= 0) {
            host = host.substring(0, percent);
        }
        try {
            return new InetSocketAddress(InetAddress.getByName(host), Integer.parseInt(text.substring(colon + 1)));
        } catch (UnknownHostException | NumberFormatException e) {
            throw new FabricException(FabricException.Kind.INTERNAL, "bad socket address from native: " + text, e);
        }
    }
}
