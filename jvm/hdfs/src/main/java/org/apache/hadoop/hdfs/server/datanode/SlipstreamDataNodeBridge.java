package org.apache.hadoop.hdfs.server.datanode;

import org.apache.hadoop.hdfs.protocol.ExtendedBlock;

/**
 * The DataNode side's one split-package bridge (issue 15): the two calls of the DataNode's own
 * write path that are not public in HDFS 3.4, so a replica written over the fabric is announced
 * and reported to the NameNode exactly as {@code BlockReceiver} does it. Nothing else lives here.
 */
public final class SlipstreamDataNodeBridge {
    private SlipstreamDataNodeBridge() {
    }

    /** As {@code BlockReceiver}'s constructor after {@code createRbw}: an incremental "receiving" report. */
    public static void receivingBlock(DataNode dataNode, ExtendedBlock block, String storageUuid) {
        dataNode.notifyNamenodeReceivingBlock(block, storageUuid);
    }

    /** As {@code BlockReceiver.PacketResponder.finalizeBlock}: counts the block written and reports it received. */
    public static void closeBlock(DataNode dataNode, ExtendedBlock block, String storageUuid, boolean onTransientStorage) {
        dataNode.closeBlock(block, null, storageUuid, onTransientStorage);
    }
}
