package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One DataNode's stores of replica chunks into the cache, off its writers' threads (HDFS's BlockReceiver would
 * otherwise wait for every {@code set}, about half a millisecond per 511 KiB chunk over loopback, before taking
 * its next packet). Each replica bounds its own chunks in flight ({@code bb.maxInFlight.chunks}, see
 * {@link BurstBufferPending}); this class bounds the bytes of all of them ({@code bb.maxInFlight.bytes}): a
 * writer past it waits until stores end. Those are the only bounds: the executor's queue holds at most what
 * they let in.
 */
final class BurstBufferStores implements AutoCloseable {
    /** A chunk's store: run by the executor, or told it will never run because the DataNode is stopping. */
    interface Store extends Runnable {
        void abandon(IOException why);
    }

    private final ThreadPoolExecutor executor;
    private final long maxBytes;
    // Guarded by this.
    private long bytesInFlight;
    private int chunksInFlight;
    private boolean closed;

    private final AtomicLong writerWaits = new AtomicLong();
    private final AtomicLong writerWaitNanos = new AtomicLong();

    /**
     * {@code threads}: the client's connections in all (servers times {@code bb.connections}); a thread more
     * would only wait for a connection, and time out if it waited {@code bb.timeout.ms}.
     */
    BurstBufferStores(int threads, long maxBytes, String datanodeName) {
        this.maxBytes = maxBytes;
        AtomicInteger count = new AtomicInteger();
        // Unbounded queue: what waits in it was admitted by reserve(), so it is bounded by maxBytes.
        executor = new ThreadPoolExecutor(threads, threads, 60, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                runnable -> {
                    Thread thread = new Thread(runnable, "Triple-H burst buffer store " + count.incrementAndGet() + " "
                            + datanodeName);
                    thread.setDaemon(true);
                    return thread;
                });
        // An idle DataNode (or a mini cluster's several) keeps no threads.
        executor.allowCoreThreadTimeOut(true);
    }

    /**
     * Takes {@code bytes} of the DataNode's bound for one chunk, waiting while other chunks hold it (one chunk
     * alone always goes, so a bound below a chunk cannot stall a writer forever).
     */
    void reserve(int bytes) throws IOException {
        synchronized (this) {
            long waitStartNs = mustWait(bytes) ? System.nanoTime() : 0;
            // An interrupt does not end the wait (stores end within the client's timeouts), as for the writer's
            // other waits (BurstBufferPending.waitKeepingInterrupt): it is set again for the caller afterwards.
            boolean interrupted = false;
            while (mustWait(bytes)) {
                try {
                    wait();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (waitStartNs != 0) {
                countWait(System.nanoTime() - waitStartNs);
            }
            if (closed) {
                throw new IOException("the DataNode's burst buffer is closed");
            }
            bytesInFlight += bytes;
            chunksInFlight++;
        }
    }

    private boolean mustWait(int bytes) {
        return !closed && bytesInFlight > 0 && bytesInFlight + bytes > maxBytes;
    }

    /** Gives back what {@link #reserve} took (a store ended, or its chunk was not handed over after all). */
    synchronized void release(int bytes) {
        bytesInFlight -= bytes;
        chunksInFlight--;
        notifyAll();
    }

    /** Runs {@code store} on a store thread; an IOException if the DataNode's burst buffer is closed. */
    void execute(Store store) throws IOException {
        try {
            executor.execute(store);
        } catch (RejectedExecutionException e) {
            throw new IOException("the DataNode's burst buffer is closed", e);
        }
    }

    /** A writer waited (for its replica's chunks in flight or for the DataNode's) this long. */
    void countWait(long nanos) {
        writerWaits.incrementAndGet();
        writerWaitNanos.addAndGet(nanos);
    }

    synchronized long bytesInFlight() {
        return bytesInFlight;
    }

    synchronized int chunksInFlight() {
        return chunksInFlight;
    }

    /** Times a writer waited for chunks in flight to be stored (its replica's, or the DataNode's bound). */
    long writerWaits() {
        return writerWaits.get();
    }

    long writerWaitMs() {
        return TimeUnit.NANOSECONDS.toMillis(writerWaitNanos.get());
    }

    /**
     * The DataNode stops: stores not started never will be (their replicas' writers are told so and fail, as
     * their writes would on a stopping DataNode); running ones end within {@code bb.timeout.ms}.
     */
    @Override
    public void close() {
        synchronized (this) {
            closed = true;
            notifyAll();
        }
        List<Runnable> neverRun = executor.shutdownNow();
        IOException closing = new IOException("the DataNode's burst buffer closed before this chunk was stored");
        for (Runnable store : neverRun) {
            ((Store) store).abandon(closing);
        }
    }
}
