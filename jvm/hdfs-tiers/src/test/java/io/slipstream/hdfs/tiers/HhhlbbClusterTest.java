package io.slipstream.hdfs.tiers;

import static io.slipstream.hdfs.tiers.TierClusters.BLOCK_BYTES;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.SlipstreamTieredFsDataset;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * HHH-L-BB on a real mini cluster with a real slipstream-cache (hybrid mode) as the burst buffer, reached over
 * the fabric ({@code bb.transport=fabric}; {@link HhhlbbKilledDataNodeTest} reaches it over TCP): the parallel
 * file system's replica of each block is written into the cache, read from it until flushed, flushed to its
 * block file in the background, and deleted from the cache. A cache that lost its copy (killed before the
 * flush) makes HDFS re-replicate the block; a cache that is down when a block is written costs no data.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HhhlbbClusterTest {
    /** Flushes start this long after a block is finished: long enough to look at a replica still pending. */
    private static final long FLUSH_DELAY_MS = 20_000;
    private static CacheServer cache;
    private static MiniDFSCluster cluster;
    private static DistributedFileSystem fs;
    private static byte[] small;
    private static byte[] large;

    @BeforeAll
    static void start() throws Exception {
        cache = new CacheServer(true, null);
        Configuration conf = TierClusters.conf("hhh-l-bb");
        conf.set(TiersConf.BB_TRANSPORT.key(), "fabric");
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
        conf.setLong(TiersConf.RAM_EVICT_CHECK_MS.key(), 0);
        conf.set(TiersConf.BB_SERVERS.key(), cache.fabricAddress());
        // Several chunks per block, the last one partial, and chunks that end inside a checksum chunk (300000
        // is not a multiple of 512): the flush's check carries those bytes over to the next chunk.
        conf.set(TiersConf.BB_CHUNK_BYTES.key(), "300000");
        conf.setLong(TiersConf.BB_FLUSH_DELAY_MS.key(), FLUSH_DELAY_MS);
        conf.setLong(TiersConf.BB_TIMEOUT_MS.key(), 2000);
        // A replica reported bad is replaced within seconds, not at the next block report.
        conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1);
        cluster = TierClusters.startWithPfs(conf, "hhhlbb");
        fs = cluster.getFileSystem();
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.shutdown();
        }
        if (cache != null) {
            cache.close();
        }
    }

    private static SlipstreamTieredFsDataset dataset(DataNode dn) {
        return (SlipstreamTieredFsDataset) dn.getFSDataset();
    }

    /** Each block's ARCHIVE (parallel file system) replica: the DataNode holding it and the block. */
    private record PfsReplica(DataNode datanode, ExtendedBlock block) {
        BurstBuffer burstBuffer() {
            return dataset(datanode).burstBuffer();
        }

        boolean pending() {
            return burstBuffer().holds(block.getBlockPoolId(), block.getBlockId());
        }

        File blockFile() throws Exception {
            return new File(dataset(datanode).getBlockLocalPathInfo(block).getBlockPath());
        }
    }

    /**
     * Writes {@code path} (one block) so that its parallel file system replica is in the burst buffer. Right after
     * the cache was restarted (the test before), a DataNode's first store may find its old connection broken:
     * that replica then goes straight to the parallel file system, as {@link #aCacheDownAtWriteTimeLosesNothing}
     * expects of a cache that is down. Such a file is deleted and written again, three writes at most (seen once
     * in CI: "chunk 0's store failed ... Broken pipe").
     */
    private static byte[] writeIntoTheBurstBuffer(Path path, long seed) throws Exception {
        for (int attempt = 1; ; attempt++) {
            byte[] data = TierClusters.write(fs, path, BLOCK_BYTES, seed);
            PfsReplica replica = pfsReplicas(path).get(0);
            if (replica.pending()) {
                return data;
            }
            assertTrue(attempt < 3, attempt + " writes in a row went past the burst buffer: " + replica.burstBuffer().counters());
            assertTrue(fs.delete(path, false));
        }
    }

    /** HDFS has replaced the replica reported bad: the file's block at 3 replicas and fsck healthy. */
    private static void awaitReReplicated(Path path, PfsReplica replica) throws InterruptedException {
        TierClusters.await("the block back at 3 good replicas", 90, () -> {
            try {
                return TierClusters.fsck(cluster, path.toString()).contains("is HEALTHY")
                        && TierClusters.replicas(fs, path).get(0).size() == 3;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, () -> replica.burstBuffer().counters());
    }

    private static List<PfsReplica> pfsReplicas(Path path) throws Exception {
        List<PfsReplica> found = new ArrayList<>();
        for (List<TierClusters.Replica> block : TierClusters.awaitReplicas(fs, path, 3)) {
            List<StorageType> types = new ArrayList<>();
            for (TierClusters.Replica replica : block) {
                types.add(replica.type());
                if (replica.type() == StorageType.ARCHIVE) {
                    found.add(new PfsReplica(TierClusters.datanode(cluster, replica.datanode()), replica.block().getBlock()));
                }
            }
            assertEquals(1, types.stream().filter(t -> t == StorageType.ARCHIVE).count(), "one PFS replica: " + types);
        }
        return found;
    }

    /** Placement is HHH-L's; the PFS replica's data waits in the cache, its block file still empty. */
    @Test
    @Order(1)
    void theParallelFileSystemReplicaIsWrittenIntoTheBurstBuffer() throws Exception {
        long itemsBefore = cache.stat("curr_items");
        long fabricRequestsBefore = cache.stat("fabric_requests");
        small = TierClusters.write(fs, new Path("/bb/small"), BLOCK_BYTES - 1000, 11);
        large = TierClusters.write(fs, new Path("/bb/large"), 2 * BLOCK_BYTES, 12);
        List<PfsReplica> replicas = new ArrayList<>(pfsReplicas(new Path("/bb/small")));
        replicas.addAll(pfsReplicas(new Path("/bb/large")));
        assertEquals(3, replicas.size());
        for (PfsReplica replica : replicas) {
            assertTrue(replica.pending(), replica + " is in the burst buffer: " + replica.burstBuffer().counters());
            // HDFS's directory scanner sees an empty block file: it must not shrink the replica to it.
            new org.apache.hadoop.hdfs.server.datanode.DirectoryScanner(replica.datanode().getFSDataset(),
                    cluster.getConfiguration(0)).reconcile();
            assertEquals(replica.block().getNumBytes(),
                    replica.datanode().getFSDataset().getReplicaVisibleLength(replica.block()),
                    "length of " + replica + " after a directory scan");
        }
        // Not through getBlockLocalPathInfo (it flushes): the file is the one HDFS created, empty until the flush.
        // The cache holds 4 + 4 + 4 chunks of 300000 B (each block's last one partial).
        assertEquals(12, cache.stat("curr_items") - itemsBefore, "chunks in the cache");
        assertTrue(cache.stat("fabric_requests") - fabricRequestsBefore >= 12, "chunks stored over the fabric");
        TierClusters.assertReadsBack(fs, new Path("/bb/small"), small);
        TierClusters.assertReadsBack(fs, new Path("/bb/large"), large);
        // Each DataNode's counters are a Hadoop metrics source, in JMX (and the DataNode's /jmx page).
        java.util.Set<javax.management.ObjectName> beans = java.lang.management.ManagementFactory.getPlatformMBeanServer()
                .queryNames(new javax.management.ObjectName("Hadoop:service=*,name=SlipstreamBurstBuffer-*"), null);
        assertEquals(3, beans.size(), "one metrics source per DataNode: " + beans);
    }

    /** With the local replicas' DataNodes down, a reader gets the PFS replica's data from the burst buffer. */
    @Test
    @Order(3)
    void aReplicaNotYetFlushedIsReadFromTheBurstBuffer() throws Exception {
        PfsReplica replica = pfsReplicas(new Path("/bb/small")).get(0);
        assertTrue(replica.pending(), "still in the burst buffer");
        long readsBefore = replica.burstBuffer().readsFromBuffer();
        List<MiniDFSCluster.DataNodeProperties> stopped = new ArrayList<>();
        for (DataNode dn : new ArrayList<>(cluster.getDataNodes())) {
            if (dn != replica.datanode()) {
                stopped.add(cluster.stopDataNode(dn.getDatanodeId().getXferAddr()));
            }
        }
        try {
            TierClusters.assertReadsBack(fs, new Path("/bb/small"), small);
        } finally {
            for (MiniDFSCluster.DataNodeProperties dn : stopped) {
                cluster.restartDataNode(dn, true);
            }
            cluster.waitActive();
        }
        assertTrue(replica.burstBuffer().readsFromBuffer() > readsBefore, replica.burstBuffer().counters());
    }

    /**
     * A reader after {@code hflush}, while the block is still being written: the whole chunks come from the cache
     * and the rest from the writer's chunk in memory, through the DataNode's dataset (HDFS's BlockSender reads
     * that way, so that the read goes to the PFS replica whichever replica a client would pick).
     */
    @Test
    @Order(2)
    void aReaderAfterHflushGetsTheBytesStillInTheWritersChunk() throws Exception {
        Path path = new Path("/bb/hflush");
        // Two chunks of 300000 B stored in the cache, 100000 B in the writer's chunk.
        byte[] data = new byte[700_000];
        new java.util.Random(16).nextBytes(data);
        try (FSDataOutputStream out = fs.create(path, (short) 3)) {
            out.write(data);
            out.hflush();
            LocatedBlock located = fs.getClient().getLocatedBlocks(path.toString(), 0).getLocatedBlocks().get(0);
            int archive = java.util.Arrays.asList(located.getStorageTypes()).indexOf(StorageType.ARCHIVE);
            assertTrue(archive >= 0, "a PFS replica in the pipeline: " + located);
            DataNode dn = TierClusters.datanode(cluster, located.getLocations()[archive]);
            ExtendedBlock block = located.getBlock();
            assertTrue(dataset(dn).burstBuffer().holds(block.getBlockPoolId(), block.getBlockId()),
                    dataset(dn).burstBuffer().counters());
            for (int from : new int[] {0, 299_000, 650_000}) {
                byte[] read = new byte[data.length - from];
                try (java.io.InputStream in = dn.getFSDataset().getBlockInputStream(block, from)) {
                    org.apache.hadoop.io.IOUtils.readFully(in, read, 0, read.length);
                    assertEquals(-1, in.read(), "nothing past the bytes written");
                }
                assertArrayEquals(java.util.Arrays.copyOfRange(data, from, data.length), read, "from byte " + from);
            }
            // A client reader: HDFS's visible length after hflush, from whichever replica it picks.
            TierClusters.assertReadsBack(fs, path, data);
            // hsync reaches the replica's syncDataOut: its full chunks, stored off the writer's thread, are in the
            // cache when it returns (the 100000 B being written stay in memory).
            out.hsync();
            String keys = BurstBufferRecovery.keyBase(dn.getDatanodeUuid(), block.getBlockPoolId(), block.getBlockId(),
                    block.getGenerationStamp());
            for (int chunk = 0; chunk < 2; chunk++) {
                assertArrayEquals(java.util.Arrays.copyOfRange(data, chunk * 300_000, (chunk + 1) * 300_000),
                        cache.get(keys + chunk), "chunk " + chunk + " in the cache after hsync");
            }
            out.write(data);
        }
        byte[] twice = new byte[2 * data.length];
        System.arraycopy(data, 0, twice, 0, data.length);
        System.arraycopy(data, 0, twice, data.length, data.length);
        TierClusters.assertReadsBack(fs, path, twice);
        // Out of the way of the next tests' counts of pending replicas and cached chunks.
        assertTrue(fs.delete(path, false));
    }

    /** A DataNode stopping flushes the replicas it holds in the burst buffer before HDFS forgets them. */
    @Test
    @Order(4)
    void aDataNodeStoppingFlushesItsReplicasFirst() throws Exception {
        // The DataNodes restarted above flushed theirs; the one that served the read still holds the small file's.
        List<PfsReplica> candidates = new ArrayList<>(pfsReplicas(new Path("/bb/small")));
        candidates.addAll(pfsReplicas(new Path("/bb/large")));
        PfsReplica replica = candidates.stream().filter(PfsReplica::pending).findFirst().orElseThrow(
                () -> new AssertionError("no replica left in the burst buffer: " + candidates));
        String name = replica.datanode().getDatanodeId().getXferAddr();
        cluster.restartDataNode(cluster.stopDataNode(name), true);
        cluster.waitActive();
        DataNode restarted = cluster.getDataNodes().stream()
                .filter(dn -> dn.getDatanodeId().getXferAddr().equals(name)).findFirst().orElseThrow();
        PfsReplica after = new PfsReplica(restarted, replica.block());
        assertEquals(replica.block().getNumBytes(), after.blockFile().length(), "flushed before the DataNode stopped");
        TierClusters.assertReadsBack(fs, new Path("/bb/small"), small);
        TierClusters.assertReadsBack(fs, new Path("/bb/large"), large);
    }

    /** After the flush delay the flusher writes each replica to its block file and deletes it from the cache. */
    @Test
    @Order(5)
    void theFlusherMovesReplicasToTheParallelFileSystemAndEmptiesTheCache() throws Exception {
        // Replicas the restarts above did not flush, and one written now: the flusher's, after the delay.
        byte[] later = TierClusters.write(fs, new Path("/bb/later"), BLOCK_BYTES, 15);
        PfsReplica fresh = pfsReplicas(new Path("/bb/later")).get(0);
        assertTrue(fresh.pending(), "in the burst buffer until the flush delay has passed");
        List<PfsReplica> replicas = new ArrayList<>(pfsReplicas(new Path("/bb/small")));
        replicas.addAll(pfsReplicas(new Path("/bb/large")));
        replicas.add(fresh);
        for (PfsReplica replica : replicas) {
            TierClusters.await(replica + " flushed", 90, () -> !replica.pending(), () -> replica.burstBuffer().counters());
        }
        assertTrue(fresh.burstBuffer().replicasFlushed() >= 1, fresh.burstBuffer().counters());
        for (PfsReplica replica : replicas) {
            assertEquals(replica.block().getNumBytes(), replica.blockFile().length(), "block file of " + replica);
        }
        TierClusters.await("the cache emptied of flushed chunks", 30, () -> {
            try {
                return cache.stat("curr_items") == 0;
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        TierClusters.assertReadsBack(fs, new Path("/bb/small"), small);
        TierClusters.assertReadsBack(fs, new Path("/bb/large"), large);
        TierClusters.assertReadsBack(fs, new Path("/bb/later"), later);
        TierClusters.assertFsckHealthy(cluster);
    }

    /** A file deleted before its replicas are flushed: they leave the burst buffer, and the cache is emptied. */
    @Test
    @Order(6)
    void aDeletedFilesReplicasLeaveTheBurstBuffer() throws Exception {
        Path path = new Path("/bb/deleted");
        TierClusters.write(fs, path, BLOCK_BYTES, 17);
        PfsReplica replica = pfsReplicas(path).get(0);
        assertTrue(replica.pending());
        assertTrue(cache.stat("curr_items") > 0);
        assertTrue(fs.delete(path, false));
        TierClusters.await("the deleted replica out of the burst buffer", 60, () -> !replica.pending(),
                () -> replica.burstBuffer().counters());
        TierClusters.await("its chunks deleted from the cache", 30, () -> {
            try {
                return cache.stat("curr_items") == 0;
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        assertEquals(0, replica.burstBuffer().replicasLost(), replica.burstBuffer().counters());
    }

    /**
     * The cache killed (and restarted empty) before a replica was flushed: the flush finds its chunks gone,
     * the DataNode reports the replica bad, and HDFS re-replicates the block from its local replicas.
     */
    @Test
    @Order(7)
    void aCopyLostFromTheCacheIsReReplicatedByHdfs() throws Exception {
        Path path = new Path("/bb/lost");
        byte[] data = TierClusters.write(fs, path, BLOCK_BYTES, 13);
        PfsReplica replica = pfsReplicas(path).get(0);
        assertTrue(replica.pending());
        long lostBefore = replica.burstBuffer().replicasLost();
        cache.kill();
        cache.start();
        replica.burstBuffer().flushAll(60_000);
        assertEquals(lostBefore + 1, replica.burstBuffer().replicasLost(), replica.burstBuffer().counters());
        awaitReReplicated(path, replica);
        TierClusters.assertReadsBack(fs, path, data);
    }

    /**
     * One byte of a chunk changed in the cache before the flush: the flush checks every chunk against HDFS's
     * checksum file, so the corrupt copy never reaches the parallel file system; HDFS re-replicates the block.
     */
    @Test
    @Order(8)
    void aCorruptChunkInTheCacheIsCaughtByTheFlush() throws Exception {
        Path path = new Path("/bb/corrupt");
        byte[] data = writeIntoTheBurstBuffer(path, 16);
        PfsReplica replica = pfsReplicas(path).get(0);
        long lostBefore = replica.burstBuffer().replicasLost();
        String key = "ssbb:" + replica.datanode().getDatanodeUuid() + ":" + replica.block().getBlockPoolId() + ":"
                + replica.block().getBlockId() + "_" + replica.block().getGenerationStamp() + ":2";
        byte[] chunk = cache.get(key);
        assertNotNull(chunk, "chunk 2 of the replica is in the cache under " + key);
        chunk[1000] ^= 0x40;
        cache.set(key, chunk);
        replica.burstBuffer().flushAll(60_000);
        assertEquals(lostBefore + 1, replica.burstBuffer().replicasLost(), replica.burstBuffer().counters());
        awaitReReplicated(path, replica);
        TierClusters.assertReadsBack(fs, path, data);
    }

    /** The cache down while a block is written: the write succeeds and HDFS keeps three good replicas. */
    @Test
    @Order(9)
    void aCacheDownAtWriteTimeLosesNothing() throws Exception {
        cache.kill();
        try {
            Path path = new Path("/bb/down");
            byte[] data = TierClusters.write(fs, path, 2 * BLOCK_BYTES, 14);
            TierClusters.assertReadsBack(fs, path, data);
            TierClusters.await("every block at 3 replicas", 90, () -> {
                try {
                    return TierClusters.replicas(fs, path).stream().allMatch(b -> b.size() == 3);
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            long failures = 0;
            for (DataNode dn : cluster.getDataNodes()) {
                BurstBuffer bb = dataset(dn).burstBuffer();
                assertNotNull(bb);
                failures += bb.writeFailures();
            }
            assertTrue(failures >= 1, "a PFS replica's write into the burst buffer failed");
            TierClusters.assertReadsBack(fs, path, data);
            TierClusters.await("fsck healthy", 60, () -> {
                try {
                    return TierClusters.fsck(cluster, "/").contains("is HEALTHY");
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
        } finally {
            cache.start();
        }
    }
}
