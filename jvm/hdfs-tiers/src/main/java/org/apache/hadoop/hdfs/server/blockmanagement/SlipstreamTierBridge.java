package org.apache.hadoop.hdfs.server.blockmanagement;

import org.apache.hadoop.hdfs.server.protocol.DatanodeStorage;

/**
 * The tiers module's one class in HDFS's package: a storage's capacity, use and free space as its DataNode
 * last reported them, which the NameNode keeps package-private. Read-only; BlockPlacementPolicyDefault
 * reads the same fields the same way (without a lock) when it checks a target's room.
 */
public final class SlipstreamTierBridge {
    private SlipstreamTierBridge() {
    }

    public static long capacityBytes(DatanodeStorageInfo storage) {
        return storage.getCapacity();
    }

    public static long dfsUsedBytes(DatanodeStorageInfo storage) {
        return storage.getDfsUsed();
    }

    public static long remainingBytes(DatanodeStorageInfo storage) {
        return storage.getRemaining();
    }

    /** False for a failed or read-only storage: it takes no new replicas and its space does not count. */
    public static boolean isWritable(DatanodeStorageInfo storage) {
        return storage.getState() == DatanodeStorage.State.NORMAL;
    }
}
