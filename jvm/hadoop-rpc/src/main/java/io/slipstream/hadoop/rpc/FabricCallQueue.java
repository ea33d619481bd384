package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.pull.CountedCallQueue;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Hadoop's default call queue (a bounded FIFO, as {@code LinkedBlockingQueue}) for a server of the fabric
 * engine ({@code ipc.<port>.callqueue.impl}), whose idle handlers take fabric calls off the wire
 * themselves: a handler that finds the queue empty pulls the next fabric request (at most
 * {@code slipstream.rpc.handler.pullers} handlers at a time, default one), puts its call on this queue through
 * {@code Server.queueCall} like any call, and takes the queue's head, its own call when nothing waited
 * before it. Without this queue the engine's receiver threads pull and a parked handler is woken for each
 * call.
 *
 * <p>Why: the hand-off from the thread that queues a call to a parked handler (a futex wake onto the
 * other core) was the largest step left in a fabric call's median: running the call on the thread that
 * received it took the 1 B echo's p50 from 54-97 us to 28-39 us (docs/hadoop-rpc.md, "Latency"). The
 * handlers and the queue stay Hadoop's: calls run on the server's handler threads in the queue's order,
 * with the same bound, overflow and back-off, and the socket path's calls share the queue.
 *
 * <p>Socket calls: a call queued by the socket path wakes a parked handler, as in Hadoop's queue, or when
 * none is parked interrupts a pulling one ({@code FabricNode.interruptPull}), which then takes it.
 *
 * <p>Concurrency: only {@code slipstream.rpc.handler.pullers} handlers pull at once; when the last of
 * them leaves with a call, it wakes a parked handler to pull in its place, so that fabric calls reach the
 * queue while every puller is busy (the wake the receiver threads' hand-off paid on every call, paid
 * here only when the pullers run out).
 */
public final class FabricCallQueue<E> extends CountedCallQueue<E> {
    /** The queue each thread is pulling for, if any: its own call needs no wake of another handler. */
    private static final ThreadLocal<FabricCallQueue<?>> PULLING_FOR = new ThreadLocal<>();
    /** The queue made on this thread since {@link #beginConstruction()}: how a server finds the one Hadoop made. */
    private static final ThreadLocal<FabricCallQueue<?>> CONSTRUCTED = new ThreadLocal<>();

    /** Where idle handlers pull fabric calls from: the server. */
    interface Source {
        /**
         * Waits up to {@code timeoutMs} for one fabric request and puts its call on the server's call queue
         * (or answers it: a refusal, a full queue), or until {@link #interrupt()}.
         */
        void pull(long timeoutMs);

        /** Ends one {@link #pull} under way, or else the next one, at once. */
        void interrupt();
    }

    private final AtomicInteger pulling = new AtomicInteger();
    private volatile Source source;
    private volatile int pullersMax;
    /**
     * Longest a pulling handler waits on the fabric at a time; what it must see sooner (a socket call, a
     * detach) interrupts it. Bounds a stop of the server, whose interrupt of its handlers the fabric
     * does not see.
     */
    private volatile long pullSliceMs;

    /** The constructor Hadoop's {@code CallQueueManager} (3.4) tries for {@code LinkedBlockingQueue}'s place. */
    public FabricCallQueue(int capacity) {
        super(capacity);
        CONSTRUCTED.set(this);
    }

    /** Forgets any queue made earlier on this thread; call before Hadoop makes a server's call queue. */
    static void beginConstruction() {
        CONSTRUCTED.remove();
    }

    /** The queue Hadoop made on this thread since {@link #beginConstruction()}, or null if it made another kind. */
    static FabricCallQueue<?> endConstruction() {
        FabricCallQueue<?> q = CONSTRUCTED.get();
        CONSTRUCTED.remove();
        return q;
    }

    /** Lets up to {@code pullersMax} idle handlers pull from {@code source}, {@code pullSliceMs} at a time. */
    void attach(Source source, int pullersMax, long pullSliceMs) {
        if (pullersMax < 1 || pullSliceMs < 1) {
            throw new IllegalArgumentException("pullers and slice must be positive: " + pullersMax + ", " + pullSliceMs);
        }
        this.pullersMax = pullersMax;
        this.pullSliceMs = pullSliceMs;
        this.source = Objects.requireNonNull(source, "source");
    }

    /** Stops the pulls: each pulling handler goes back to waiting on the queue alone. */
    void detach() {
        Source s = source;
        source = null;
        if (s != null) {
            for (int i = pulling.get(); i > 0; i--) {
                s.interrupt();
            }
        }
    }

    /** Handlers pulling from the fabric now. */
    int pullingHandlers() {
        return pulling.get();
    }

    @Override
    public boolean offer(E e) {
        if (!enqueue(e)) {
            return false;
        }
        // A handler that queued its own pulled call into an empty queue takes it next: no one else to wake.
        if (PULLING_FOR.get() == this && size() <= 1) {
            return true;
        }
        // A parked handler is woken, else a pulling one is interrupted. No wake is lost: a handler
        // counts itself parked (or pulling) before it looks at the items (again), and this thread added
        // the item before it reads those counts; an interrupt made before a pull begins ends that pull.
        if (takersParked.get() > 0) {
            signal(notEmpty);
        } else if (pulling.get() > 0) {
            Source s = source;
            if (s != null) {
                s.interrupt();
            }
        }
        return true;
    }

    /** Hadoop's {@code CallQueueManager.take} waits a second at a time in {@link #poll(long, TimeUnit)}. */
    @Override
    protected boolean mayPull() {
        return source != null && pulling.get() < pullersMax;
    }

    /**
     * Pulls fabric calls on this handler until one is on the queue, {@code deadline} passes, or no source
     * is attached; null when it did not pull (pullers at their maximum) or nothing came.
     */
    @Override
    protected E pullWhileIdle(long deadline, boolean afterPark) throws InterruptedException {
        Source s = source;
        if (s == null) {
            return null;
        }
        if (pulling.incrementAndGet() > pullersMax) {
            pulling.decrementAndGet();
            return null;
        }
        PULLING_FOR.set(this);
        try {
            while (source == s) {
                if (Thread.interrupted()) {
                    throw new InterruptedException(); // the server stops its handlers so
                }
                long leftNanos = deadline - System.nanoTime();
                if (leftNanos <= 0) {
                    return null;
                }
                long leftMs = Math.max(1, TimeUnit.NANOSECONDS.toMillis(leftNanos));
                s.pull(Math.min(leftMs, pullSliceMs));
                E e = poll();
                if (e != null) {
                    return e;
                }
            }
            return null;
        } finally {
            PULLING_FOR.remove();
            // The last puller leaving: a parked handler pulls in its place (see the class comment).
            if (pulling.decrementAndGet() == 0 && source == s && takersParked.get() > 0) {
                signal(notEmpty);
            }
        }
    }
}
