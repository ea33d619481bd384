package io.slipstream.hdfs.tiers;

/**
 * One storage tier's totals over the cluster's live, writable storages, as the NameNode last heard them
 * (DataNode heartbeats), plus the bytes of blocks it has sent there and not yet heard back about.
 */
record TierSpace(long capacityBytes, long dfsUsedBytes, long remainingBytes, long scheduledBytes) {
    static final TierSpace ABSENT = new TierSpace(0, 0, 0, 0);

    boolean present() {
        return capacityBytes > 0;
    }

    /** The share of the capacity in use (by anything) once {@code extraBytes} more are written; 1 when absent. */
    double fillAfter(long extraBytes) {
        if (!present()) {
            return 1.0;
        }
        long used = capacityBytes - remainingBytes + scheduledBytes + extraBytes;
        return (double) used / capacityBytes;
    }

    /** Bytes of replicas the tier holds or is being sent (HHH-M's budget counts these). */
    long heldBytes() {
        return dfsUsedBytes + scheduledBytes;
    }

    TierSpace plus(long capacity, long dfsUsed, long remaining, long scheduled) {
        return new TierSpace(capacityBytes + capacity, dfsUsedBytes + dfsUsed, remainingBytes + remaining,
                scheduledBytes + scheduled);
    }

    /** This tier after one more block of {@code bytes} was assigned to it (for the next replica's choice). */
    TierSpace withScheduled(long bytes) {
        return new TierSpace(capacityBytes, dfsUsedBytes, remainingBytes, scheduledBytes + bytes);
    }
}
