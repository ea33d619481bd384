package io.slipstream.fabric;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * The handler threads of one node ({@link FabricNode#serve}) take turns pulling requests, leader and
 * followers: one thread at a time (the <em>puller</em>) waits in the native {@code nextRequest}, where
 * it spins briefly driving the fabric's progress itself, so a request that arrives then is received,
 * handled and answered on that one thread with no hand-off. Before it runs the handler it gives up
 * its turn.
 *
 * <p>Why: with every handler thread in the native call, each request woke a second thread blocked on
 * the native dispatch queue, and on a machine with few cores the threads ran each other off the CPU
 * (two handler threads served a third of the requests one thread did).
 *
 * <p>Concurrency is kept for handlers that take long: one other thread is the <em>standby</em>. It
 * checks every {@link #STANDBY_CHECK_NANOS}, and takes the next turn when nobody is pulling, i.e.
 * when the last puller is still in its handler. So a handler that blocks delays the next request by
 * at most about that long, and at most {@code threads} handlers run at once, as before. When no
 * request came for {@link #STANDBY_IDLE_CHECKS} checks in a row the standby sleeps until the next
 * request (or {@link #LONG_PARK_NANOS}), so an idle node does not wake a thousand times a second. The
 * other threads (<em>followers</em>) sleep until the standby leaves its post, which wakes one of them.
 * Every wait is bounded by {@link #LONG_PARK_NANOS}, so closing the node is noticed.
 */
final class ServeTurns {
    /** How often the standby checks whether the puller is stuck in a handler. */
    static final long STANDBY_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** Checks without a request before the standby sleeps until the next one. */
    static final int STANDBY_IDLE_CHECKS = 200;
    /** The longest any wait here lasts. */
    static final long LONG_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(200);

    private final AtomicReference<Thread> puller = new AtomicReference<>();
    private final AtomicReference<Thread> standby = new AtomicReference<>();
    private volatile boolean standbyAsleep;
    /** Requests taken, so the standby can tell traffic from idleness. */
    private final AtomicLong taken = new AtomicLong();
    private final ConcurrentLinkedQueue<Thread> followers = new ConcurrentLinkedQueue<>();
    /** Checks in a row without a request; kept across standby posts (only the standby touches it). */
    private int idleChecks;

    /**
     * True: the caller holds the turn, pulls once and then calls {@link #endTurn}. False: another
     * thread holds it and the caller waited (as standby or follower, bounded); call again.
     */
    boolean takeTurn(Thread me) {
        if (puller.get() == null && puller.compareAndSet(null, me)) {
            return true;
        }
        if (standby.get() == null && standby.compareAndSet(null, me)) {
            try {
                standBy();
            } finally {
                standby.set(null);
                Thread next = followers.poll();
                if (next != null) {
                    LockSupport.unpark(next);
                }
            }
            return false;
        }
        followers.add(me);
        try {
            if (standby.get() != null) { // else the post came free before this thread queued: take it
                LockSupport.parkNanos(this, LONG_PARK_NANOS);
            }
        } finally {
            followers.remove(me);
        }
        return false;
    }

    /** The puller got {@code request} (or none): the turn is free again, before the handler runs. */
    void endTurn(boolean gotRequest) {
        puller.set(null);
        if (gotRequest) {
            taken.incrementAndGet();
            if (standbyAsleep) {
                Thread waiting = standby.get();
                if (waiting != null) {
                    LockSupport.unpark(waiting);
                }
            }
        }
    }

    /** A handler thread ends: gives up whatever role it held. */
    void leave(Thread me) {
        puller.compareAndSet(me, null);
        standby.compareAndSet(me, null);
        followers.remove(me);
    }

    /** Wakes every waiting thread (close). */
    void wakeAll() {
        Thread waiting = standby.get();
        if (waiting != null) {
            LockSupport.unpark(waiting);
        }
        for (Thread follower : followers) {
            LockSupport.unpark(follower);
        }
    }

    /** The standby's watch: returns once nobody holds the turn (or after a long sleep, to notice close). */
    private void standBy() {
        while (puller.get() != null) {
            long seen = taken.get();
            if (idleChecks < STANDBY_IDLE_CHECKS) {
                LockSupport.parkNanos(this, STANDBY_CHECK_NANOS);
            } else {
                standbyAsleep = true;
                try {
                    if (taken.get() == seen) { // a request taken since is a reason to stay awake
                        LockSupport.parkNanos(this, LONG_PARK_NANOS);
                    }
                } finally {
                    standbyAsleep = false;
                }
                if (taken.get() == seen) {
                    return; // still idle: back to the loop, which checks for close
                }
                idleChecks = 0;
            }
            idleChecks = taken.get() == seen ? idleChecks + 1 : 0;
        }
    }

    /** For tests: the thread pulling now, or null. */
    Thread puller() {
        return puller.get();
    }

    /** For tests: the standby, or null. */
    Thread standby() {
        return standby.get();
    }
}
