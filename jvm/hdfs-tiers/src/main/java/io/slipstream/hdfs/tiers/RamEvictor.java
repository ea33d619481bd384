package io.slipstream.hdfs.tiers;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps one DataNode's RAM tier below its high-water mark by asking HDFS to evict persisted RAM replicas
 * (LRU, HDFS's own eviction: the replica moves to its lazy-persisted copy and the NameNode is told) down
 * to the low-water mark. Vanilla HDFS evicts only when a new RAM write finds no locked memory left; the
 * NameNode sees persisted replicas as RAM in use meanwhile, so without this HHH would stop planning RAM
 * once the tier fills. Never evicts an unpersisted replica (HDFS's tracker offers only persisted ones).
 */
final class RamEvictor implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RamEvictor.class);

    private final LongSupplier usedBytes;
    private final LongSupplier capacityBytes;
    private final LongConsumer evictUntilFreeBytes;
    private final long blockBytes;
    private final double highWater;
    private final double lowWater;
    private final ScheduledExecutorService timer;
    private final AtomicLong evictedBytes = new AtomicLong();

    /**
     * @param usedBytes RAM (locked memory) held by replicas now
     * @param capacityBytes the RAM replicas may hold in all
     * @param evictUntilFreeBytes HDFS's eviction: evicts persisted replicas until that much is free (a few per call)
     * @param blockBytes the DataNode's block size: the evictor acts once one more block would pass the high-water
     *     mark, the point at which the NameNode's placement stops planning RAM (TierPlanner's rule)
     */
    RamEvictor(LongSupplier usedBytes, LongSupplier capacityBytes, LongConsumer evictUntilFreeBytes, double highWater,
            double lowWater, long blockBytes, long checkIntervalMs, String name) {
        this.blockBytes = blockBytes;
        this.usedBytes = usedBytes;
        this.capacityBytes = capacityBytes;
        this.evictUntilFreeBytes = evictUntilFreeBytes;
        this.highWater = highWater;
        this.lowWater = lowWater;
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread thread = new Thread(r, "slipstream-ram-evictor " + name);
            thread.setDaemon(true);
            return thread;
        });
        timer.scheduleWithFixedDelay(this::checkQuietly, checkIntervalMs, checkIntervalMs, TimeUnit.MILLISECONDS);
    }

    /** One check: when one more block would pass the high-water mark, evict down to the low-water mark. */
    long check() {
        long capacity = capacityBytes.getAsLong();
        long before = usedBytes.getAsLong();
        if (capacity <= 0 || before + blockBytes <= highWater * capacity) {
            return 0;
        }
        long wantFree = capacity - (long) (lowWater * capacity);
        // HDFS evicts a few replicas per call; stop when a call frees nothing (the rest is unpersisted).
        long used = before;
        while (used > lowWater * capacity) {
            evictUntilFreeBytes.accept(wantFree);
            long now = usedBytes.getAsLong();
            if (now >= used) {
                break;
            }
            used = now;
        }
        long freed = Math.max(0, before - used);
        evictedBytes.addAndGet(freed);
        if (freed == 0) {
            // Nothing persisted yet (HDFS's lazy writer has not got there): the next check tries again.
            LOG.debug("Triple-H RAM eviction: nothing persisted to evict at RAM use {} of {} bytes", before, capacity);
            return 0;
        }
        LOG.info("Triple-H RAM eviction: {} bytes of persisted replicas evicted, RAM use {} -> {} of {} bytes "
                + "(high-water {}, low-water {}); {} bytes evicted so far", freed, before, used, capacity, highWater,
                lowWater, evictedBytes.get());
        return freed;
    }

    private void checkQuietly() {
        try {
            check();
        } catch (RuntimeException e) {
            LOG.warn("Triple-H RAM eviction check failed; trying again at the next one", e);
        }
    }

    long evictedBytes() {
        return evictedBytes.get();
    }

    @Override
    public void close() {
        timer.shutdownNow();
    }
}
