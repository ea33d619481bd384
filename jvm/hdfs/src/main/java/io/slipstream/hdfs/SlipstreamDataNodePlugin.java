package io.slipstream.hdfs;

import io.slipstream.fabric.FabricUnavailableException;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.util.ServicePlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The DataNode side, loaded by {@code dfs.datanode.plugins=io.slipstream.hdfs.SlipstreamDataNodePlugin}:
 * registers this DataNode with its process's fabric node ({@link DataNodeFabric}), which serves its
 * block reads and block writes (with pipeline replication to the next DataNodes). HDFS's own
 * data-transfer server keeps running beside it, for clients without the plugin, HDFS's own writes,
 * re-replication and the balancer.
 */
public final class SlipstreamDataNodePlugin implements ServicePlugin {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamDataNodePlugin.class);
    private DataNodeFabric fabric;
    private int xferPort;

    @Override
    public void start(Object service) {
        if (!(service instanceof DataNode dataNode)) {
            throw new IllegalArgumentException("SlipstreamDataNodePlugin is a DataNode plugin (dfs.datanode.plugins), not for " + service);
        }
        if (dataNode.getConf().getBoolean(DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_KEY, DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_DEFAULT)) {
            // The fabric does not encrypt; clients find no fabric here and read through HDFS.
            LOG.warn("slipstream: {} is on; block reads stay on HDFS's encrypted data transfer", DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_KEY);
            return;
        }
        HdfsConf conf = new HdfsConf(dataNode.getConf());
        xferPort = dataNode.getXferPort();
        try {
            fabric = DataNodeFabric.acquire(conf, xferPort, new DataNodeReads(dataNode), new DataNodeWrites(dataNode, conf));
        } catch (FabricUnavailableException e) {
            if (conf.fallback == HdfsConf.Fallback.NEVER) {
                // HDFS's plugin loader logs a failing plugin and starts the DataNode anyway; clients
                // with fallback=never then fail their reads of it.
                throw new IllegalStateException("slipstream: the fabric cannot start on this DataNode and "
                        + HdfsConf.FALLBACK.key() + "=never", e);
            }
            LOG.warn("slipstream: the fabric cannot start on this DataNode ({}); clients read it with HDFS's own readers", e.getMessage());
        }
    }

    @Override
    public void stop() {
        DataNodeFabric running = fabric;
        fabric = null;
        if (running != null) {
            running.release(xferPort);
        }
    }

    @Override
    public void close() {
        stop();
    }
}
