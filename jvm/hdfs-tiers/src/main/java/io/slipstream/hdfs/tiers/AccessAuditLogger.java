package io.slipstream.hdfs.tiers;

import java.net.InetAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.hdfs.server.namenode.AuditLogger;

/**
 * The tiering service's access tracking, on the NameNode: an HDFS audit logger
 * ({@code dfs.namenode.audit.loggers = default,io.slipstream.hdfs.tiers.AccessAuditLogger}) that counts each
 * successful {@code open} (a client asking for a file's block locations to read it) per path, and follows
 * deletes and renames. It sees what the NameNode sees: not reads by clients that reuse block locations they
 * already hold (a long-open stream reading again, a cached location), nor reads inside the NameNode (HDFS calls
 * audit loggers only for client calls, RPC and WebHDFS); and it counts any {@code getBlockLocations}, read or not
 * (MapReduce's split computation asks for locations too).
 */
public final class AccessAuditLogger implements AuditLogger {
    private volatile AccessTracker tracker;

    @Override
    public void initialize(Configuration conf) {
        TiersConf tiers = new TiersConf(conf);
        tracker = new AccessTracker(tiers.tieringWindowMs, tiers.tieringMaxTrackedFiles);
    }

    @Override
    public void logAuditEvent(boolean succeeded, String userName, InetAddress addr, String cmd, String src,
            String dst, FileStatus stat) {
        AccessTracker counts = tracker;
        if (!succeeded || counts == null || cmd == null || src == null) {
            return;
        }
        switch (cmd) {
            case "open" -> counts.recordRead(src, System.currentTimeMillis());
            case "delete" -> counts.remove(src);
            case "rename" -> {
                if (dst != null) {
                    counts.rename(src, dst);
                }
            }
            default -> {
            }
        }
    }

    /** The counts, for the tiering service in the same NameNode; null before {@link #initialize}. */
    AccessTracker tracker() {
        return tracker;
    }
}
