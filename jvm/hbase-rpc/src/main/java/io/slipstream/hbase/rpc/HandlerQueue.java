package io.slipstream.hbase.rpc;

import io.slipstream.fabric.pull.CountedCallQueue;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

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
 * <p>While the pullers are at their maximum, other idle handlers park; the last puller leaving with a call wakes
 * one to pull in its place, or, when none is parked (every handler busy), the standby ({@link Pulls#runStandby}),
 * a thread that pulls only then, so that calls for the other executors (an admin call while every general handler
 * is busy) still reach them. Neither spins before it sleeps on the fabric: the call just taken needs the cores.
 */
final class HandlerQueue<E> extends CountedCallQueue<E> {
    /** The queue each thread is pulling for, if any: the call it pulls goes there and needs no wake of another handler. */
    private static final ThreadLocal<HandlerQueue<?>> PULLING_FOR = new ThreadLocal<>();

    /** Where idle handlers pull fabric calls from: the server. */
    interface Source {
        /**
         * Waits up to {@code timeoutMs} for one fabric request and dispatches its call through the scheduler (or
         * answers it: a refusal, a full queue), or until {@link #interrupt()}. {@code spin}: whether it may spin
         * briefly before it sleeps (the fabric's {@code nextRequest(timeout, spin)}).
         */
        void pull(long timeoutMs, boolean spin);

        /** Ends one {@link #pull} under way, or else the next one, at once. */
        void interrupt();
    }

    /** The queues of one executor, whose idle handlers pull from one source, with its standby. */
    static final class Pulls<E> {
        /** Longest the standby waits on the fabric at a time: it yields to a handler within this. */
        static final long STANDBY_SLICE_MS = 20;

        final Source source;
        final int pullersMax;
        final long pullSliceMs;
        final List<HandlerQueue<E>> queues;
        private final AtomicInteger pulling = new AtomicInteger();
        private final ReentrantLock standbyLock = new ReentrantLock();
        private final Condition standbyWanted = standbyLock.newCondition();
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

        /** Whether the standby is pulling now. */
        boolean standbyPulling() {
            return standbyPulling;
        }

        /** Stops the pulls: pulling handlers go back to their queues alone, and the standby returns. */
        void detach() {
            attached = false;
            for (HandlerQueue<E> q : queues) {
                q.pulls = null;
            }
            for (int i = pulling.get() + (standbyPulling ? 1 : 0); i > 0; i--) {
                source.interrupt();
            }
            signalStandby();
        }

        /**
         * The standby's loop, on a thread of the server's, until {@link #detach()}: pulls only while no handler
         * can (none pulling, none parked: every handler runs a call), so that the scheduler's other executors get
         * their calls, and the general ones wait in its queues as with receiver threads.
         */
        void runStandby() {
            while (attached) {
                standbyLock.lock();
                try {
                    while (attached && !handlersBusy()) {
                        // Woken by the last puller leaving with no handler parked; the timeout only bounds a miss.
                        standbyWanted.await(pullSliceMs, TimeUnit.MILLISECONDS);
                    }
                } catch (InterruptedException e) {
                    return;
                } finally {
                    standbyLock.unlock();
                }
                standbyPulling = true;
                try {
                    // Checked again after saying so: a handler that starts pulling sees standbyPulling (and
                    // interrupts this pull) or this sees it pulling.
                    if (attached && handlersBusy()) {
                        // No spin: every handler runs a call, and on a small machine a spin takes a core from one.
                        source.pull(Math.min(pullSliceMs, STANDBY_SLICE_MS), false);
                    }
                } finally {
                    standbyPulling = false;
                }
            }
        }

        private boolean handlersBusy() {
            if (pulling.get() > 0) {
                return false;
            }
            for (HandlerQueue<E> q : queues) {
                if (q.takersParked.get() > 0) {
                    return false;
                }
            }
            return true;
        }

        /** The last puller left: a parked handler pulls in its place, else the standby. */
        private void replaceLastPuller() {
            for (HandlerQueue<E> q : queues) {
                if (q.takersParked.get() > 0) {
                    q.signal(q.notEmpty);
                    return;
                }
            }
            signalStandby();
        }

        private void signalStandby() {
            standbyLock.lock();
            try {
                standbyWanted.signal();
            } finally {
                standbyLock.unlock();
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
        // A parked handler is woken, else a pulling one is interrupted (it takes this, its queue's or not). No
        // wake is lost: a handler counts itself parked (or pulling) before it looks at the items (again), and
        // this thread added the item before it reads those counts; an interrupt made before a pull begins ends
        // that pull.
        if (takersParked.get() > 0) {
            signal(notEmpty);
        } else if (p != null && p.pulling.get() > 0) {
            p.source.interrupt();
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
     * A handler leaves with a call it did not pull. If no handler pulls (this one may have been woken to pull in
     * the last puller's place, then found a call queued), another parked one pulls, or else the standby: some
     * thread keeps taking fabric calls while this one runs its call.
     */
    @Override
    protected E took(E e) {
        Pulls<E> p = pulls;
        if (p != null && p.pulling.get() == 0 && p.attached) {
            p.replaceLastPuller();
        }
        return e;
    }

    /**
     * Pulls fabric calls on this handler until one is on this queue (or another of the executor's), {@code deadline}
     * passes, or the pulls are detached; null when it did not pull (pullers at their maximum) or nothing came.
     *
     * <p>A handler woken to pull ({@code afterPark}: in the place of a puller that left with a call, most often)
     * does not spin first: the call that puller runs would share a core with its spin on a small machine (a get
     * took some 70 us longer so, docs/hbase-rpc.md). A handler coming straight from a call spins as usual.
     */
    @Override
    protected E pullWhileIdle(long deadline, boolean afterPark) throws InterruptedException {
        Pulls<E> p = pulls;
        if (p == null) {
            return null;
        }
        if (p.pulling.incrementAndGet() > p.pullersMax) {
            p.pulling.decrementAndGet();
            return null;
        }
        if (p.standbyPulling) {
            p.source.interrupt(); // the standby yields to a handler
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
                p.source.pull(Math.min(leftMs, p.pullSliceMs), !afterPark);
            }
            return null;
        } finally {
            PULLING_FOR.remove();
            if (p.pulling.decrementAndGet() == 0 && p.attached) {
                p.replaceLastPuller();
            }
        }
    }
}
