package io.slipstream.hbase.rpc;

import io.slipstream.fabric.pull.CountedCallQueue;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One call queue of HBase's general RPC executor (a bounded FIFO, as the {@code LinkedBlockingQueue} HBase makes
 * by default), whose idle handlers take fabric calls off the wire themselves; {@link FabricCallQueue} is this
 * queue in HBase's types. It knows nothing of HBase or the fabric: the server {@linkplain #attach attaches} the
 * queues of its executor to a {@link Source}.
 *
 * <p>Why: the hand-off from the thread that dispatches a call to a parked handler (a futex wake onto the other
 * core) is most of a small fabric call's median. A handler that finds its queue empty pulls the next fabric
 * request itself (at most {@code pullersMax} handlers of the executor at once), dispatches its call through
 * HBase's scheduler like any call, and takes its queue's head: its own call, when nothing waited before it.
 *
 * <p>The executor has several queues (HBase makes one per ten handlers), each served by its own handlers, and its
 * balancer picks a queue for each call. So that the call a handler pulled is the one it runs:
 * <ul>
 *   <li>a call offered to one of the executor's queues on a pulling handler's thread (the one it pulled, which the
 *       scheduler put in this executor) goes on the puller's own queue instead, unless that holds more calls than
 *       the one the balancer chose (so it never waits longer, nor passes the limit the balancer checked);
 *   <li>a pulling handler whose queue is empty also takes the head of another queue of the executor: a call queued
 *       there (the socket path's) whose own handlers are all busy interrupts a pull, and whichever handler's pull
 *       ends takes it (the fabric's interrupt ends some pull, not a chosen one).
 * </ul>
 * Calls the scheduler puts in its other executors (priority, replication, meta, bulk load: HBase's own queues)
 * go there, as from any thread.
 *
 * <p>While the pullers are at their maximum, other idle handlers park. A puller leaving with its call wakes nobody:
 * the standby ({@link Pulls#runStandby}), a thread of the server's, is told by the fabric when a request arrives
 * while no thread pulls ({@link Source#awaitUnpulled}), takes it and dispatches it as a receiver thread would (its
 * call wakes a parked handler, or waits in the queue while every handler is busy, and calls for the scheduler's
 * other executors, an admin call, reach them). A handler back from its call pulls again. Why: waking a parked
 * handler to pull in the last puller's place on every call cost about 70 us of a call's median on two cores (the
 * woken handler took the core from the one about to run the call; docs/hbase-rpc.md), and with one caller, or
 * calls that come one after another, nothing arrives while the call runs. (Waking one only while calls overlap
 * was measured too, and lost the gain: docs/benchmarks.md, "Session 36".)
 */
final class HandlerQueue<E> extends CountedCallQueue<E> {
    /** The queue each thread is pulling for, if any: the call it pulls goes there and needs no wake of another handler. */
    private static final ThreadLocal<HandlerQueue<?>> PULLING_FOR = new ThreadLocal<>();

    /** Where idle handlers pull fabric calls from: the server. */
    interface Source {
        /**
         * Waits up to {@code timeoutMs} for one fabric request and dispatches its call through the scheduler (or
         * answers it: a refusal, a full queue), or until {@link #interrupt()}.
         */
        void pull(long timeoutMs);

        /** Ends one {@link #pull} under way, or else the next one, at once. */
        void interrupt();

        /**
         * Waits up to {@code timeoutMs} until a request waits while no thread is in {@link #pull}: true then, false
         * at the timeout or the close.
         */
        boolean awaitUnpulled(long timeoutMs);
    }

    /** The queues of one executor, whose idle handlers pull from one source, with its standby. */
    static final class Pulls<E> {
        /** Longest the standby watches at a time: it sees a detach within this. */
        static final long STANDBY_SLICE_MS = 100;

        final Source source;
        final int pullersMax;
        final long pullSliceMs;
        final List<HandlerQueue<E>> queues;
        private final AtomicInteger pulling = new AtomicInteger();
        private volatile boolean standbyPulling;
        private volatile boolean attached = true;

        private Pulls(List<HandlerQueue<E>> queues, Source source, int pullersMax, long pullSliceMs) {
            this.queues = List.copyOf(queues);
            this.source = source;
            this.pullersMax = pullersMax;
            this.pullSliceMs = pullSliceMs;
        }

        /** Handlers pulling now. */
        int pullingHandlers() {
            return pulling.get();
        }

        /** Whether the standby is taking a request now. */
        boolean standbyPulling() {
            return standbyPulling;
        }

        /** Stops the pulls: pulling handlers go back to their queues alone, and the standby returns. */
        void detach() {
            attached = false;
            for (HandlerQueue<E> q : queues) {
                q.pulls = null;
            }
            for (int i = pulling.get(); i > 0; i--) {
                source.interrupt();
            }
        }

        /**
         * The standby's loop, on a thread of the server's, until {@link #detach()}: takes each request that arrives
         * while no handler pulls (all busy, or parked while the one that pulled runs its call) and dispatches it, so
         * that it runs on a parked handler, or waits in the queues as with receiver threads.
         */
        void runStandby() {
            while (attached) {
                if (!source.awaitUnpulled(Math.min(pullSliceMs, STANDBY_SLICE_MS)) || !attached) {
                    continue;
                }
                standbyPulling = true;
                try {
                    source.pull(0); // takes what is there, if a handler did not come back for it first
                } finally {
                    standbyPulling = false;
                }
            }
        }

        /**
         * Wakes a handler parked on a queue other than {@code full} (whose handlers are busy, and none pulls): it
         * pulls, and takes {@code full}'s head first. One that parks meanwhile sees no puller, so pulls instead.
         */
        private void wakeParkedElsewhere(HandlerQueue<E> full) {
            for (HandlerQueue<E> q : queues) {
                if (q != full && q.takersParked.get() > 0) {
                    q.signal(q.notEmpty);
                    return;
                }
            }
        }

        /** The head of a queue of this executor other than {@code own}, or null. */
        private E pollOthers(HandlerQueue<E> own) {
            for (HandlerQueue<E> q : queues) {
                if (q != own) {
                    E e = q.poll();
                    if (e != null) {
                        return e;
                    }
                }
            }
            return null;
        }
    }

    private volatile Pulls<E> pulls;

    HandlerQueue(int capacity) {
        super(capacity);
    }

    /**
     * Lets up to {@code pullersMax} idle handlers of {@code queues} (one executor's) pull from {@code source},
     * {@code pullSliceMs} at a time; the caller runs the standby ({@link Pulls#runStandby}) on a thread of its own.
     */
    static <E> Pulls<E> attach(List<HandlerQueue<E>> queues, Source source, int pullersMax, long pullSliceMs) {
        if (queues.isEmpty() || pullersMax < 1 || pullSliceMs < 1) {
            throw new IllegalArgumentException("queues, pullers and slice: " + queues.size() + ", " + pullersMax + ", "
                    + pullSliceMs);
        }
        Pulls<E> p = new Pulls<>(queues, Objects.requireNonNull(source, "source"), pullersMax, pullSliceMs);
        for (HandlerQueue<E> q : p.queues) {
            if (q.pulls != null) {
                throw new IllegalStateException("a call queue pulled for twice");
            }
            q.pulls = p;
        }
        return p;
    }

    @Override
    public boolean offer(E e) {
        Objects.requireNonNull(e, "call");
        HandlerQueue<?> puller = PULLING_FOR.get();
        Pulls<E> p = pulls;
        if (puller != null && puller != this && p != null && puller.pulls == p && puller.size() <= size()) {
            // The call this thread pulled, put here by the balancer: on the puller's queue it is taken next.
            @SuppressWarnings("unchecked")
            HandlerQueue<E> own = (HandlerQueue<E>) puller;
            if (own.offer(e)) {
                return true;
            }
        }
        if (!enqueue(e)) {
            return false;
        }
        // A handler that queued its own pulled call into an empty queue takes it next: no one else to wake.
        if (puller == this && size() <= 1) {
            return true;
        }
        // A parked handler is woken, else a pulling one is interrupted (it takes this, its queue's or not), else a
        // handler parked on another queue, which pulls (nobody does) and so takes this first. No wake is lost: a
        // handler counts itself parked (or pulling) before it looks at the items (again), and this thread added the
        // item before it reads those counts; an interrupt made before a pull begins ends that pull.
        if (takersParked.get() > 0) {
            signal(notEmpty);
        } else if (p != null && p.pulling.get() > 0) {
            p.source.interrupt();
        } else if (p != null) {
            p.wakeParkedElsewhere(this);
        }
        return true;
    }

    /** HBase's handlers wait in {@link #take()}, without a timeout. */
    @Override
    protected boolean mayPull() {
        Pulls<E> p = pulls;
        return p != null && p.pulling.get() < p.pullersMax;
    }

    /**
     * Pulls fabric calls on this handler until one is on this queue (or another of the executor's), {@code deadline}
     * passes, or the pulls are detached; null when it did not pull (pullers at their maximum) or nothing came.
     */
    @Override
    protected E pullWhileIdle(long deadline) throws InterruptedException {
        Pulls<E> p = pulls;
        if (p == null) {
            return null;
        }
        if (p.pulling.incrementAndGet() > p.pullersMax) {
            p.pulling.decrementAndGet();
            return null;
        }
        PULLING_FOR.set(this);
        try {
            while (pulls == p) {
                if (Thread.interrupted()) {
                    throw new InterruptedException(); // HBase stops its handlers so
                }
                // Looked at after counting itself pulling (see offer), then after each pull.
                E e = poll();
                if (e == null) {
                    e = p.pollOthers(this);
                }
                if (e != null) {
                    return e;
                }
                long leftNanos = deadline - System.nanoTime();
                if (leftNanos <= 0) {
                    return null;
                }
                long leftMs = Math.max(1, TimeUnit.NANOSECONDS.toMillis(leftNanos));
                p.source.pull(Math.min(leftMs, p.pullSliceMs));
            }
            return null;
        } finally {
            PULLING_FOR.remove();
            p.pulling.decrementAndGet(); // what comes next while no handler pulls is the standby's (class comment)
        }
    }
}
