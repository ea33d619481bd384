package io.slipstream.fabric.pull;

import java.util.AbstractQueue;
import java.util.Collection;
import java.util.Iterator;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What the RPC engines' call queues share (Hadoop's {@code io.slipstream.hadoop.rpc.FabricCallQueue}, HBase's
 * {@code io.slipstream.hbase.rpc.HandlerQueue}), whose idle handlers pull fabric calls themselves: a bounded
 * FIFO, as the {@code LinkedBlockingQueue} each engine makes by default, whose size and parked threads are
 * counted in atomics, so that an offer or a poll wakes a parked thread only when one is parked, and a
 * subclass can tell whether a handler is parked before it interrupts a pulling one.
 *
 * <p>A handler's wait ({@link #poll(long, TimeUnit)}) is here too: take the head, else pull while a puller's
 * place is free ({@link #pullWhileIdle}), else park on {@link #notEmpty} counted in {@link #takersParked}.
 * A subclass decides whom an offer wakes ({@link #offer(Object)}, built on {@link #enqueue}), how a handler
 * pulls, and what a handler leaving with a queued call does ({@link #took}). Knows no engine and no fabric.
 */
public abstract class CountedCallQueue<E> extends AbstractQueue<E> implements BlockingQueue<E> {
    private final int capacity;
    private final ConcurrentLinkedQueue<E> items = new ConcurrentLinkedQueue<>();
    /** Items held, counted before an item is added and after it is taken: never above {@link #capacity}. */
    private final AtomicInteger count = new AtomicInteger();
    protected final ReentrantLock lock = new ReentrantLock();
    protected final Condition notEmpty = lock.newCondition();
    private final Condition notFull = lock.newCondition();
    /** Threads waiting on {@link #notEmpty} / on room; changed under {@link #lock}, read without it. */
    protected final AtomicInteger takersParked = new AtomicInteger();
    private final AtomicInteger puttersParked = new AtomicInteger();

    protected CountedCallQueue(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("call queue capacity must be positive: " + capacity);
        }
        this.capacity = capacity;
    }

    /**
     * Adds {@code e} at the tail unless the queue is full (then false); wakes nobody: the subclass's
     * {@link #offer(Object)} decides whom, after this returned (a thread that parks or pulls counts itself
     * before it looks at the items, so a wake decided after the add is never lost).
     */
    protected final boolean enqueue(E e) {
        Objects.requireNonNull(e, "call");
        for (int c = count.get(); ; c = count.get()) {
            if (c >= capacity) {
                return false;
            }
            if (count.compareAndSet(c, c + 1)) {
                break;
            }
        }
        items.add(e);
        return true;
    }

    /** Wakes one thread waiting on {@code condition} (of {@link #lock}). */
    protected final void signal(Condition condition) {
        lock.lock();
        try {
            condition.signal();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Pulls fabric calls on the calling handler until one is on the queue or {@code deadline} (nanoTime)
     * passes; null when it did not pull (no source, or the pullers at their maximum) or nothing came.
     * {@code afterPark}: the handler parked in this wait before (it was woken, for example to pull in the place
     * of a puller that left with a call), rather than coming straight from a call it ran.
     */
    protected abstract E pullWhileIdle(long deadline, boolean afterPark) throws InterruptedException;

    /** Whether a parked handler should pull instead of park: a puller's place is free. Asked under {@link #lock}. */
    protected abstract boolean mayPull();

    /** A handler leaves with {@code e}, a call it took from the queue rather than pulled; returns it. */
    protected E took(E e) {
        return e;
    }

    /** A handler's wait: the head, else a pull, else parked until a call is queued or a puller's place frees. */
    @Override
    public final E poll(long timeout, TimeUnit unit) throws InterruptedException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        boolean parked = false;
        while (true) {
            E e = poll();
            if (e != null) {
                return took(e);
            }
            e = pullWhileIdle(deadline, parked);
            if (e != null) {
                return e;
            }
            long nanos = deadline - System.nanoTime();
            if (nanos <= 0) {
                return null;
            }
            lock.lockInterruptibly();
            takersParked.incrementAndGet();
            try {
                e = poll();
                if (e != null) {
                    return took(e);
                }
                // Parks unless a puller's place is free (then it pulls): woken by a call queued, or by the
                // last puller leaving, which looks for parked handlers after it left, so neither is missed.
                if (!mayPull()) {
                    notEmpty.awaitNanos(nanos);
                    parked = true;
                }
            } finally {
                takersParked.decrementAndGet();
                lock.unlock();
            }
        }
    }

    @Override
    public final boolean offer(E e, long timeout, TimeUnit unit) throws InterruptedException {
        if (offer(e)) {
            return true;
        }
        long nanos = unit.toNanos(timeout);
        lock.lockInterruptibly();
        puttersParked.incrementAndGet();
        try {
            while (!offer(e)) {
                if (nanos <= 0) {
                    return false;
                }
                nanos = notFull.awaitNanos(nanos);
            }
            return true;
        } finally {
            puttersParked.decrementAndGet();
            lock.unlock();
        }
    }

    @Override
    public final void put(E e) throws InterruptedException {
        offer(e, Long.MAX_VALUE, TimeUnit.NANOSECONDS);
    }

    @Override
    public final E poll() {
        E e = items.poll();
        if (e != null) {
            count.decrementAndGet();
            if (puttersParked.get() > 0) {
                signal(notFull);
            }
        }
        return e;
    }

    @Override
    public final E take() throws InterruptedException {
        return poll(Long.MAX_VALUE / 2, TimeUnit.NANOSECONDS);
    }

    @Override
    public final E peek() {
        return items.peek();
    }

    @Override
    public final int size() {
        return count.get();
    }

    @Override
    public final int remainingCapacity() {
        return capacity - count.get();
    }

    @Override
    public final boolean remove(Object o) {
        if (o != null && items.remove(o)) {
            count.decrementAndGet();
            if (puttersParked.get() > 0) {
                signal(notFull);
            }
            return true;
        }
        return false;
    }

    /** A view that cannot remove (removal goes through {@link #remove(Object)}, which keeps the count). */
    @Override
    public final Iterator<E> iterator() {
        Iterator<E> it = items.iterator();
        return new Iterator<E>() {
            @Override
            public boolean hasNext() {
                return it.hasNext();
            }

            @Override
            public E next() {
                return it.next();
            }
        };
    }

    @Override
    public final int drainTo(Collection<? super E> c) {
        return drainTo(c, Integer.MAX_VALUE);
    }

    @Override
    public final int drainTo(Collection<? super E> c, int maxElements) {
        if (c == this) {
            throw new IllegalArgumentException("draining a queue into itself");
        }
        int n = 0;
        for (E e; n < maxElements && (e = poll()) != null; n++) {
            c.add(e);
        }
        return n;
    }
}
