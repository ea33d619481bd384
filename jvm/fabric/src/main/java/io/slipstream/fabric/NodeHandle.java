package io.slipstream.fabric;

import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The lifetime of one native node handle, shared by every object that uses it.
 *
 * <p>A reference count plus a closed bit. The node's owner ({@link FabricNode}) holds one reference
 * until {@link FabricNode#close()}; each native call holds one for its duration ({@link #enter()} /
 * {@link #exit()}); and each object that keeps native memory of the node reachable from Java holds one
 * until it is garbage ({@link #retain()}, released by a {@link Cleaner} action): the direct view of
 * every buffer, live requests, the completer thread. The native node (with its buffer pool, so all
 * registered memory) is freed when the count reaches zero after close, so a direct {@link
 * java.nio.ByteBuffer} view can never outlive the memory it points to.
 *
 * <p>Architecture invariant: no native call runs with a freed handle, and none starts after close.
 */
final class NodeHandle {
    /** Runs the release actions of buffers and requests that became garbage. One daemon thread for the library. */
    static final Cleaner CLEANER = Cleaner.create(runnable -> {
        Thread thread = new Thread(runnable, "slipstream-fabric-cleaner");
        thread.setDaemon(true);
        return thread;
    });

    private static final long CLOSED = 1L << 62;

    final long ptr;
    private final AtomicLong state = new AtomicLong(1);
    private final List<Long> endpoints = new ArrayList<>();
    private boolean freed;

    NodeHandle(long ptr) {
        assert ptr != 0;
        this.ptr = ptr;
    }

    /** Before a native call: fails if the node is closed. Pair with {@link #exit()} in a finally block. */
    void enter() {
        while (true) {
            long s = state.get();
            if ((s & CLOSED) != 0) {
                throw FabricException.closed();
            }
            assert (s & ~CLOSED) > 0 : "entering a freed node";
            if (state.compareAndSet(s, s + 1)) {
                return;
            }
        }
    }

    /** One more reference, taken while holding one (inside {@link #enter()}), so it always succeeds. */
    void retain() {
        long before = state.getAndIncrement();
        assert (before & ~CLOSED) > 0 : "retain without a reference held";
    }

    /** Drops a reference; the last one after close frees the native node. */
    void exit() {
        long after = state.decrementAndGet();
        assert (after & ~CLOSED) >= 0 : "reference count below zero";
        if (after == CLOSED) {
            free();
        }
    }

    boolean isClosed() {
        return (state.get() & CLOSED) != 0;
    }

    /** Sets the closed bit: no call enters from now on. True for the one caller that closed it. */
    boolean markClosed() {
        while (true) {
            long s = state.get();
            if ((s & CLOSED) != 0) {
                return false;
            }
            if (state.compareAndSet(s, s | CLOSED)) {
                return true;
            }
        }
    }

    /** True once the native node was freed (for tests). */
    synchronized boolean isFreed() {
        return freed;
    }

    /** Endpoint handles are freed with the node (the endpoint objects are cached for its lifetime). */
    synchronized void addEndpoint(long endpoint) {
        assert !freed;
        endpoints.add(endpoint);
    }

    private void free() {
        List<Long> toFree;
        synchronized (this) {
            assert !freed : "node freed twice";
            freed = true;
            toFree = new ArrayList<>(endpoints);
            endpoints.clear();
        }
        for (long endpoint : toFree) {
            FabricNative.endpointFree(endpoint);
        }
        FabricNative.nodeFree(ptr);
    }
}
