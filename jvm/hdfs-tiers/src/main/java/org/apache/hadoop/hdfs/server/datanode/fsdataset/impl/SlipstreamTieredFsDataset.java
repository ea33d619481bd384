package org.apache.hadoop.hdfs.server.datanode.fsdataset.impl;

import io.slipstream.hdfs.tiers.BurstBuffer;
import io.slipstream.hdfs.tiers.BurstBufferRecovery;
import io.slipstream.hdfs.tiers.TieredFsDatasetFactory;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.Block;
import org.apache.hadoop.hdfs.protocol.BlockLocalPathInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.hdfs.server.datanode.DataStorage;
import org.apache.hadoop.hdfs.server.datanode.LocalReplica;
import org.apache.hadoop.hdfs.server.datanode.Replica;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.apache.hadoop.hdfs.server.datanode.ReplicaInfo;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.protocol.BlockRecoveryCommand.RecoveringBlock;
import org.apache.hadoop.hdfs.server.protocol.ReplicaRecoveryInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The tiers module's one class in HDFS's dataset package: HDFS's own dataset (whose class and constructor
 * are package-private; its lazy writer casts the DataNode's dataset to that class, so a wrapper will not
 * do), with the volume of a new replica chosen by {@link TieredFsDatasetFactory#newReplicaTarget} and a
 * RAM evictor started and stopped with it. In mode hhh-l-bb, a {@link BurstBuffer} holds the data of parallel
 * file system replicas until it has flushed them: reads and lengths of those come from it, and every operation
 * that hands a replica's block file to something else flushes the replica first. Nothing else is changed.
 */
public class SlipstreamTieredFsDataset extends FsDatasetImpl {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamTieredFsDataset.class);

    public static FsDatasetImpl create(DataNode datanode, DataStorage storage, Configuration conf) throws IOException {
        return new SlipstreamTieredFsDataset(datanode, storage, conf);
    }

    /** Keeps the RAM tier below its high-water mark; null when the check is turned off. */
    private final AutoCloseable ramEvictor;
    /** hhh-l-bb's burst buffer; null in the other modes. */
    private final BurstBuffer burstBuffer;

    SlipstreamTieredFsDataset(DataNode datanode, DataStorage storage, Configuration conf) throws IOException {
        super(datanode, storage, conf);
        ramEvictor = TieredFsDatasetFactory.startRamEvictor(conf, this::getCacheUsed, this::getCacheCapacity,
                this::evictLazyPersistBlocks, String.valueOf(datanode.getDisplayName()));
        burstBuffer = BurstBuffer.start(conf, new BurstBufferDataset(datanode), String.valueOf(datanode.getDisplayName()));
    }

    /** hhh-l-bb's burst buffer on this DataNode (tests read its counters); null in the other modes. */
    public BurstBuffer burstBuffer() {
        return burstBuffer;
    }

    /** What the burst buffer needs of this dataset. */
    private final class BurstBufferDataset implements BurstBuffer.Dataset {
        private final DataNode datanode;

        BurstBufferDataset(DataNode datanode) {
            this.datanode = datanode;
        }

        @Override
        public File[] files(String bpid, long blockId) {
            ReplicaInfo replica = volumeMap.get(bpid, blockId);
            if (!(replica instanceof LocalReplica local)) {
                return null;
            }
            return new File[] {local.getBlockFile(), local.getMetaFile()};
        }

        @Override
        public void reportBad(String bpid, long blockId) throws IOException {
            ReplicaInfo replica = volumeMap.get(bpid, blockId);
            if (replica != null) {
                datanode.reportBadBlocks(new ExtendedBlock(bpid, replica), replica.getVolume());
            }
        }

        @Override
        public InputStream fileStream(String bpid, long blockId, long offset) throws IOException {
            ReplicaInfo replica = getReplicaInfo(bpid, blockId);
            return SlipstreamTieredFsDataset.super.getBlockInputStream(new ExtendedBlock(bpid, replica), offset);
        }

        @Override
        public String datanodeUuid() {
            return datanode.getDatanodeUuid();
        }
    }

    @Override
    public void shutdown() {
        if (burstBuffer != null) {
            burstBuffer.close();
        }
        if (ramEvictor != null) {
            try {
                ramEvictor.close();
            } catch (Exception e) {
                throw new IllegalStateException("stopping the RAM evictor", e);
            }
        }
        super.shutdown();
    }

    /** Every new replica of a write pipeline comes here (the four-argument form calls this one). */
    @Override
    public ReplicaHandler createRbw(StorageType storageType, String storageId, ExtendedBlock block,
            boolean allowLazyPersist, long estimateBlockLen) throws IOException {
        TieredFsDatasetFactory.NewReplicaTarget target =
                TieredFsDatasetFactory.newReplicaTarget(storageType, storageId, block.getNumBytes(), this);
        ReplicaHandler handler =
                super.createRbw(target.type(), target.storageId(), block, target.lazyPersist(), estimateBlockLen);
        StorageType landed = handler.getReplica().getVolume().getStorageType();
        if (landed != storageType) {
            LOG.info("Triple-H: replica of {} planned on {} spilled to {} (locked memory used {} of {} bytes)", block,
                    storageType, landed, getCacheUsed(), getCacheCapacity());
        }
        return burstBuffer == null ? handler : burstBuffer.admit(handler, block, estimateBlockLen);
    }

    // hhh-l-bb: a replica in the burst buffer has an empty block file until flushed.

    /**
     * HDFS loads the block pool's replicas from disk; before the DataNode registers (and sends its first block
     * report), the finalized parallel file system replicas that a killed run left in the burst buffer get their
     * data back from it, and the chunks of those being written when it died (HDFS loads them from the rbw directory
     * as replicas waiting to be recovered, from their block files) are deleted from it.
     */
    @Override
    public void addBlockPool(String bpid, Configuration conf) throws IOException {
        super.addBlockPool(bpid, conf);
        if (burstBuffer == null) {
            return;
        }
        List<BurstBufferRecovery.OnDisk> onDisk = new ArrayList<>();
        volumeMap.replicas(bpid, replicas -> replicas.forEachRemaining(replica -> {
            if (replica instanceof LocalReplica local && replica.getVolume().getStorageType() == StorageType.ARCHIVE) {
                onDisk.add(new BurstBufferRecovery.OnDisk(bpid, replica.getBlockId(), replica.getGenerationStamp(),
                        replica.getState() == ReplicaState.FINALIZED, local.getBlockFile(), local.getMetaFile(),
                        replica::setNumBytes));
            }
        }));
        burstBuffer.recoverAfterRestart(bpid, onDisk);
    }

    @Override
    public void shutdownBlockPool(String bpid) {
        if (burstBuffer != null) {
            try {
                if (!burstBuffer.flushBlockPool(bpid, BurstBuffer.DRAIN_MS)) {
                    LOG.warn("Triple-H hhh-l-bb: block pool {} stops with replicas not flushed ({}); the DataNode's "
                            + "restart takes them back from the cache (HDFS re-replicates any the cache lost)", bpid, burstBuffer.counters());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        super.shutdownBlockPool(bpid);
    }

    @Override
    public void finalizeBlock(ExtendedBlock b, boolean fsyncDir) throws IOException {
        super.finalizeBlock(b, fsyncDir);
        if (burstBuffer != null) {
            burstBuffer.finalized(b);
        }
    }

    @Override
    public InputStream getBlockInputStream(ExtendedBlock b, long seekOffset) throws IOException {
        InputStream buffered = burstBuffer == null ? null : burstBuffer.open(b.getBlockPoolId(), b.getBlockId(), seekOffset);
        return buffered != null ? buffered : super.getBlockInputStream(b, seekOffset);
    }

    @Override
    public long getLength(ExtendedBlock b) throws IOException {
        long buffered = burstBuffer == null ? -1 : burstBuffer.length(b.getBlockPoolId(), b.getBlockId());
        return buffered >= 0 ? buffered : super.getLength(b);
    }

    @Override
    public void invalidate(String bpid, Block[] invalidBlks) throws IOException {
        if (burstBuffer != null) {
            for (Block block : invalidBlks) {
                burstBuffer.deleted(bpid, block.getBlockId());
            }
        }
        super.invalidate(bpid, invalidBlks);
    }

    /**
     * HDFS's directory scanner would take a replica in the burst buffer for one whose block file shrank and set
     * its length to the file's (empty): such a replica is left for the scanner's next round.
     */
    @Override
    public void checkAndUpdate(String bpid, FsVolumeSpi.ScanInfo scanInfo) throws IOException {
        if (burstBuffer != null && burstBuffer.holds(bpid, scanInfo.getBlockId())) {
            return;
        }
        super.checkAndUpdate(bpid, scanInfo);
    }

    private void flushFirst(ExtendedBlock b, String why) throws IOException {
        if (burstBuffer != null) {
            burstBuffer.flushNow(b.getBlockPoolId(), b.getBlockId(), why);
        }
    }

    @Override
    public ReplicaHandler recoverRbw(ExtendedBlock b, long newGS, long minBytesRcvd, long maxBytesRcvd)
            throws IOException {
        flushFirst(b, "pipeline recovery");
        return super.recoverRbw(b, newGS, minBytesRcvd, maxBytesRcvd);
    }

    @Override
    public ReplicaHandler append(ExtendedBlock b, long newGS, long expectedBlockLen) throws IOException {
        flushFirst(b, "append");
        return super.append(b, newGS, expectedBlockLen);
    }

    @Override
    public ReplicaHandler recoverAppend(ExtendedBlock b, long newGS, long expectedBlockLen) throws IOException {
        flushFirst(b, "append recovery");
        return super.recoverAppend(b, newGS, expectedBlockLen);
    }

    @Override
    public Replica recoverClose(ExtendedBlock b, long newGS, long expectedBlockLen) throws IOException {
        flushFirst(b, "close recovery");
        return super.recoverClose(b, newGS, expectedBlockLen);
    }

    @Override
    public ReplicaRecoveryInfo initReplicaRecovery(RecoveringBlock rBlock) throws IOException {
        flushFirst(rBlock.getBlock(), "block recovery");
        return super.initReplicaRecovery(rBlock);
    }

    @Override
    public ReplicaInfo moveBlockAcrossStorage(ExtendedBlock block, StorageType targetStorageType, String targetStorageId)
            throws IOException {
        flushFirst(block, "move to " + targetStorageType);
        return super.moveBlockAcrossStorage(block, targetStorageType, targetStorageId);
    }

    @Override
    public ReplicaInfo moveBlockAcrossVolumes(ExtendedBlock block, FsVolumeSpi destination) throws IOException {
        flushFirst(block, "move to another volume");
        return super.moveBlockAcrossVolumes(block, destination);
    }

    @Override
    public BlockLocalPathInfo getBlockLocalPathInfo(ExtendedBlock block) throws IOException {
        flushFirst(block, "legacy short-circuit read");
        return super.getBlockLocalPathInfo(block);
    }

    @Override
    public void cache(String bpid, long[] blockIds) {
        if (burstBuffer != null) {
            for (long blockId : blockIds) {
                try {
                    burstBuffer.flushNow(bpid, blockId, "HDFS caching");
                } catch (IOException e) {
                    LOG.warn("Triple-H hhh-l-bb: blk_{} cannot be cached: {}", blockId, e.getMessage());
                }
            }
        }
        super.cache(bpid, blockIds);
    }
}
