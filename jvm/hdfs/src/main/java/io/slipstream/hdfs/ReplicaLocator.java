package io.slipstream.hdfs;

import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DFSClient;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlocks;
import org.apache.hadoop.security.UserGroupInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a block's replicas are. HDFS tells a {@code ReplicaAccessorBuilder} the file, block and
 * token but not which DataNode it chose. Files opened through {@link SlipstreamDistributedFileSystem}
 * are known from HDFS's own open ({@link #learn}); for others the plugin asks the NameNode itself:
 * one {@code getBlockLocations} per file (all its blocks, in the NameNode's order for this client,
 * nearest first). Either is kept for {@link #TTL_NANOS} and dropped when a read of the file fails.
 * Corrupt replicas are reported to the NameNode here, naming the DataNode that served them.
 */
final class ReplicaLocator {
    private static final Logger LOG = LoggerFactory.getLogger(ReplicaLocator.class);
    static final long TTL_NANOS = 10_000_000_000L;
    static final int FILES_MAX = 1024;
    static final int CLIENTS_MAX = 16;

    private record Located(LocatedBlocks blocks, long expiresNanos) {
    }

    private static final Map<String, DFSClient> CLIENTS = new HashMap<>();
    private static final Map<String, Located> FILES = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Located> eldest) {
            return size() > FILES_MAX;
        }
    };

    private ReplicaLocator() {
    }

    /** The located block {@code blockId} of {@code file}, or null when the file has no such block (any more). */
    static LocatedBlock locate(Configuration conf, String file, long blockId) throws IOException {
        DFSClient client = client(conf);
        String key = key(conf, file);
        for (int attempt = 0; attempt < 2; attempt++) {
            Located located;
            synchronized (FILES) {
                located = FILES.get(key);
            }
            if (located == null || located.expiresNanos - System.nanoTime() < 0 || attempt == 1) {
                SlipstreamHdfsCounters.NAMENODE_LOOKUPS.incrementAndGet();
                located = new Located(client.getLocatedBlocks(file, 0, Long.MAX_VALUE), System.nanoTime() + TTL_NANOS);
                synchronized (FILES) {
                    FILES.put(key, located);
                }
            }
            for (LocatedBlock block : located.blocks.getLocatedBlocks()) {
                if (block.getBlock().getBlockId() == blockId) {
                    return located.blocks.isUnderConstruction() && block == located.blocks.getLastLocatedBlock() ? null : block;
                }
            }
            // Not there: the file changed since it was located (appended, or the cache is old); ask again once.
        }
        return null;
    }

    /**
     * What HDFS's own open of {@code file} located (through the default file system, as
     * {@link #locate} asks), kept as if asked here: the fabric reader of a file just opened then makes
     * no second {@code getBlockLocations} (in {@code ohb hdfs srl}, 1 MiB files, a file's first read
     * took 1.0-1.7 ms longer with it: docs/benchmarks.md, session 35). Only the blocks HDFS located at open, its prefetch range: a block beyond it is
     * not found there and {@link #locate} asks the NameNode for all. A copy of the list, since
     * HDFS's stream inserts into its own as it reads on.
     */
    static void learn(Configuration conf, String file, LocatedBlocks blocks) {
        LocatedBlocks copy = new LocatedBlocks(blocks.getFileLength(), blocks.isUnderConstruction(), new ArrayList<>(blocks.getLocatedBlocks()),
                blocks.getLastLocatedBlock(), blocks.isLastBlockComplete(), blocks.getFileEncryptionInfo(), blocks.getErasureCodingPolicy());
        synchronized (FILES) {
            FILES.put(key(conf, file), new Located(copy, System.nanoTime() + TTL_NANOS));
        }
    }

    /** Forgets what is known of {@code file}, after a failed read of it. */
    static void forget(Configuration conf, String file) {
        synchronized (FILES) {
            FILES.remove(key(conf, file));
        }
    }

    /** Tells the NameNode that {@code dataNode}'s replica of {@code block} failed its checksums. */
    static void reportCorrupt(Configuration conf, LocatedBlock block, DatanodeInfo dataNode) {
        try {
            client(conf).reportBadBlocks(new LocatedBlock[] {new LocatedBlock(block.getBlock(), new DatanodeInfo[] {dataNode})});
            LOG.warn("slipstream: reported the corrupt replica of {} on {} to the NameNode", block.getBlock(), dataNode);
        } catch (IOException e) {
            LOG.warn("slipstream: could not report the corrupt replica of {} on {}: {}", block.getBlock(), dataNode, e.toString());
        }
    }

    private static String key(Configuration conf, String file) {
        return FileSystem.getDefaultUri(conf) + file;
    }

    /** One NameNode client per default file system and user, as HDFS's FileSystem cache keeps one. */
    private static DFSClient client(Configuration conf) throws IOException {
        URI uri = FileSystem.getDefaultUri(conf);
        if (!"hdfs".equals(uri.getScheme())) {
            throw new IOException("the default file system " + uri + " is not HDFS; the fabric path locates replicas through it");
        }
        String key = uri + "#" + UserGroupInformation.getCurrentUser().getUserName();
        synchronized (CLIENTS) {
            DFSClient client = CLIENTS.get(key);
            if (client == null) {
                if (CLIENTS.size() >= CLIENTS_MAX) {
                    throw new IOException(CLIENTS_MAX + " NameNode clients open already; " + key + " is read with HDFS's own readers");
                }
                client = new DFSClient(uri, conf);
                CLIENTS.put(key, client);
            }
            return client;
        }
    }
}
