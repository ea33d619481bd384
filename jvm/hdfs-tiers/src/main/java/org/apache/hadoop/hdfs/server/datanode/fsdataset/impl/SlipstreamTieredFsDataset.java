package org.apache.hadoop.hdfs.server.datanode.fsdataset.impl;

import io.slipstream.hdfs.tiers.TieredFsDatasetFactory;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.DataStorage;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The tiers module's one class in HDFS's dataset package: HDFS's own dataset (whose class and constructor
 * are package-private; its lazy writer casts the DataNode's dataset to that class, so a wrapper will not
 * do), with the volume of a new replica chosen by {@link TieredFsDatasetFactory#newReplicaTarget} and a
 * RAM evictor started and stopped with it. Nothing else is changed.
 */
public class SlipstreamTieredFsDataset extends FsDatasetImpl {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamTieredFsDataset.class);

    public static FsDatasetImpl create(DataNode datanode, DataStorage storage, Configuration conf) throws IOException {
        return new SlipstreamTieredFsDataset(datanode, storage, conf);
    }

    /** Keeps the RAM tier below its high-water mark; null when the check is turned off. */
    private final AutoCloseable ramEvictor;

    SlipstreamTieredFsDataset(DataNode datanode, DataStorage storage, Configuration conf) throws IOException {
        super(datanode, storage, conf);
        ramEvictor = TieredFsDatasetFactory.startRamEvictor(conf, this::getCacheUsed, this::getCacheCapacity,
                this::evictLazyPersistBlocks, String.valueOf(datanode.getDisplayName()));
    }

    @Override
    public void shutdown() {
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
        return handler;
    }
}
