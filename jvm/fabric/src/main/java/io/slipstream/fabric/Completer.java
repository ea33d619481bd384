package io.slipstream.fabric;

import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Completes the futures of a node's asynchronous requests, on one Java thread per node.
 *
 * <p>Why a thread: the fabric runs a request's completion callback on its progress thread, a native
 * thread. Calling into the JVM from there would mean attaching native threads and running Java code
 * on the fabric's hot path. Instead the callback only pushes {@code (tag, result)} into the node's
 * native completion queue, and this thread drains it through a blocking native call
 * ({@link FabricNative#nodePollCompletion}), so no native thread ever enters the JVM.
 *
 * <p>Limits: at most {@link FabricConfig#completionQueueDepth()} requests await completion (a
 * {@link Semaphore}; callers wait up to the request timeout, then get {@code OVERLOADED}), which also
 * bounds the native queue. Futures complete on this thread: dependent actions that block delay every
 * other completion of the node, so use the {@code *Async} variants for heavy work.
 */
final class Completer implements Runnable {
    private static final System.Logger LOG = System.getLogger(Completer.class.getName());
    /** A blocked poll wakes this often to check for close; close itself wakes it at once. */
    private static final long POLL_TIMEOUT_MS = 200;
    /** After close, requests still awaiting completion get this long before they fail with CLOSED. */
    private static final long CLOSE_GRACE_MS = 2_000;

    /** Sends one asynchronous request with the given tag; may throw {@link FabricException}. */
    interface Send {
        void send(long tag);
    }

    private final NodeHandle node;
    private final Semaphore permits;
    private final int depth;
    private final long waitMs;
    private final Map<Long, CompletableFuture<FabricBuffer>> pending = new ConcurrentHashMap<>();
    private final AtomicLong tags = new AtomicLong();
    private Thread thread;
    private volatile long closeDeadlineNanos;
    private volatile boolean closing;
    private volatile boolean exited;

    private final String threadName;

    Completer(NodeHandle node, int depth, long waitMs, String threadName) {
        this.node = node;
        this.threadName = threadName;
        this.depth = depth;
        this.permits = new Semaphore(depth);
        this.waitMs = waitMs;
    }

    /** Called inside {@code node.enter()}. Never throws {@link FabricException}: failures complete the future. */
    CompletableFuture<FabricBuffer> submit(Send send) {
        CompletableFuture<FabricBuffer> future = new CompletableFuture<>();
        try {
            if (!permits.tryAcquire(waitMs, TimeUnit.MILLISECONDS)) {
                future.completeExceptionally(new FabricException(FabricException.Kind.OVERLOADED,
                        depth + " asynchronous requests await completion (completionQueueDepth); waited " + waitMs + " ms"));
                return future;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            future.completeExceptionally(new FabricException(FabricException.Kind.CLOSED, "interrupted while waiting to send"));
            return future;
        }
        long tag = tags.incrementAndGet();
        pending.put(tag, future);
        if (!startIfNeeded()) {
            abandon(tag, FabricException.closed());
            return future;
        }
        try {
            send.send(tag);
        } catch (RuntimeException e) {
            abandon(tag, e);
        }
        // The thread sets `exited` before its last sweep of `pending`: one of the two sees the other.
        if (exited) {
            abandon(tag, FabricException.closed());
        }
        return future;
    }

    private void abandon(long tag, Throwable failure) {
        CompletableFuture<FabricBuffer> future = pending.remove(tag);
        if (future != null) {
            permits.release();
            future.completeExceptionally(failure);
        }
    }

    /** False once closing began before the thread was ever started (then nothing would complete the future). */
    private synchronized boolean startIfNeeded() {
        if (thread == null) {
            if (closing) {
                return false;
            }
            node.retain();
            thread = new Thread(this, threadName);
            thread.setDaemon(true);
            thread.start();
        }
        return true;
    }

    @Override
    public void run() {
        long[] out = new long[3];
        try {
            while (true) {
                if (closing && (pending.isEmpty() || System.nanoTime() - closeDeadlineNanos > 0)) {
                    break;
                }
                Object result;
                try {
                    result = FabricNative.nodePollCompletion(node.ptr, POLL_TIMEOUT_MS, out);
                } catch (FabricException e) {
                    LOG.log(Level.ERROR, "polling completions failed", e);
                    continue;
                }
                if (result != null) {
                    complete(out[0], result, out);
                }
            }
        } finally {
            exited = true;
            FabricException closed = FabricException.closed();
            for (Long tag : pending.keySet()) {
                abandon(tag, closed);
            }
            node.exit();
        }
    }

    private void complete(long tag, Object result, long[] out) {
        CompletableFuture<FabricBuffer> future = pending.remove(tag);
        if (future != null) {
            permits.release();
        }
        try {
            if (result instanceof ByteBuffer view) {
                FabricBuffer buffer = FabricBuffer.adopt(node, view, out[1], out[2]);
                if (future == null || !future.complete(buffer)) {
                    buffer.close(); // nobody will see it: cancelled, or failed at close
                }
            } else if (future != null) {
                future.completeExceptionally((Throwable) result);
            }
        } catch (RuntimeException | Error e) {
            LOG.log(Level.ERROR, "completing request " + tag + " failed", e);
        }
    }

    /** After the node was closed natively (which fails what is in flight): lets the thread drain, then ends it. */
    void close() {
        Thread running;
        synchronized (this) {
            closeDeadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_GRACE_MS);
            closing = true;
            running = thread;
        }
        if (running != null && running != Thread.currentThread()) { // closed from a completion callback: no self-join
            try {
                running.join(CLOSE_GRACE_MS + 2 * POLL_TIMEOUT_MS + 1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    int awaiting() {
        return pending.size();
    }
}
