package org.apache.hadoop.hdfs;

import org.apache.hadoop.hdfs.protocol.LocatedBlocks;

/**
 * The client side's one split-package bridge (issue 15): what an open {@code DFSInputStream}
 * located, which HDFS 3.4 keeps protected. {@code SlipstreamDistributedFileSystem.open} hands it to
 * the plugin's replica locator, so that the fabric reader does not ask the NameNode a second time
 * for what HDFS's own open has just asked (a {@code ReplicaAccessorBuilder} is not told the
 * DataNodes). Nothing else lives here.
 */
public final class SlipstreamClientBridge {
    private SlipstreamClientBridge() {
    }

    /** The client the stream belongs to. */
    public static DFSClient client(DFSInputStream in) {
        return in.getDFSClient();
    }

    /** The path the stream reads, as HDFS hands it to a {@code ReplicaAccessorBuilder}'s {@code setFileName}. */
    public static String path(DFSInputStream in) {
        return in.getSrc();
    }

    /** The blocks the stream's open located (nearest replicas first), as HDFS keeps them: not a copy. */
    public static LocatedBlocks locatedBlocks(DFSInputStream in) {
        return in.getLocatedBlocks();
    }
}
