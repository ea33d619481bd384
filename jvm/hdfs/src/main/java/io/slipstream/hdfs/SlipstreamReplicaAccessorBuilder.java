package io.slipstream.hdfs;

import io.slipstream.fabric.FabricUnavailableException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.ReplicaAccessor;
import org.apache.hadoop.hdfs.ReplicaAccessorBuilder;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side, named by {@code dfs.client.replica.accessor.builder.classes}. HDFS builds one
 * per block it opens, before its short-circuit and TCP readers; this one returns a
 * {@link FabricReplicaAccessor} when some DataNode holding the block serves it over the fabric,
 * and null (HDFS then reads as it always does) when none does, the block is still being written,
 * or the fabric cannot start, with {@code slipstream.hdfs.fallback=auto}. With {@code never} it
 * returns an accessor whose reads fail, since HDFS treats an exception from {@code build()} as a
 * decline.
 */
public final class SlipstreamReplicaAccessorBuilder extends ReplicaAccessorBuilder {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamReplicaAccessorBuilder.class);

    private String fileName;
    private long blockId;
    private String blockPoolId;
    private long generationStamp;
    private boolean verifyChecksum = true;
    private long visibleLength;
    private Configuration conf;
    private byte[] token = new byte[0];

    @Override
    public ReplicaAccessorBuilder setFileName(String fileName) {
        this.fileName = fileName;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setBlock(long blockId, String blockPoolId) {
        this.blockId = blockId;
        this.blockPoolId = blockPoolId;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setGenerationStamp(long generationStamp) {
        this.generationStamp = generationStamp;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setVerifyChecksum(boolean verifyChecksum) {
        this.verifyChecksum = verifyChecksum;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setClientName(String clientName) {
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setAllowShortCircuitReads(boolean allowShortCircuit) {
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setVisibleLength(long visibleLength) {
        this.visibleLength = visibleLength;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setConfiguration(Configuration conf) {
        this.conf = conf;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setBlockAccessToken(byte[] token) {
        this.token = token == null ? new byte[0] : token;
        return this;
    }

    @Override
    public ReplicaAccessor build() {
        if (conf.getBoolean(DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_KEY, DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_DEFAULT)) {
            // The fabric does not encrypt: encrypted data transfer stays HDFS's, whatever the fallback.
            SlipstreamHdfsCounters.DECLINED.incrementAndGet();
            return null;
        }
        HdfsConf settings = new HdfsConf(conf);
        if (token.length > BlockReadProtocol.TOKEN_BYTES_MAX) {
            return decline(settings, "a block token of " + token.length + " bytes (the fabric path carries up to "
                    + BlockReadProtocol.TOKEN_BYTES_MAX + ")");
        }
        ClientFabric fabric;
        try {
            fabric = ClientFabric.get(settings);
        } catch (FabricUnavailableException e) {
            return decline(settings, "the fabric cannot start in this client: " + e.getMessage());
        }
        LocatedBlock block;
        try {
            block = ReplicaLocator.locate(conf, fileName, blockId);
        } catch (IOException e) {
            return decline(settings, "cannot locate " + fileName + ": " + e.getMessage());
        }
        if (block == null || !block.getBlock().getBlockPoolId().equals(blockPoolId) || block.isStriped()) {
            // Under construction, striped, or gone: not a block this path serves; HDFS reads it.
            SlipstreamHdfsCounters.DECLINED.incrementAndGet();
            LOG.trace("slipstream: block {} of {} left to HDFS's readers (under construction, striped or moved)", blockId, fileName);
            return null;
        }
        List<DatanodeInfo> replicas = new ArrayList<>();
        for (DatanodeInfo dataNode : block.getLocations()) {
            if (fabric.offersFabric(dataNode, settings.port)) {
                replicas.add(dataNode);
            }
        }
        if (replicas.isEmpty()) {
            return decline(settings, "no DataNode holding " + block.getBlock() + " offers a fabric");
        }
        SlipstreamHdfsCounters.ACCESSORS.incrementAndGet();
        return new FabricReplicaAccessor(fabric, settings, conf, fileName, block, generationStamp, replicas, token, visibleLength, verifyChecksum);
    }

    private ReplicaAccessor decline(HdfsConf settings, String why) {
        if (settings.fallback == HdfsConf.Fallback.NEVER) {
            return new Refused(why + " (" + HdfsConf.FALLBACK.key() + "=never)");
        }
        SlipstreamHdfsCounters.DECLINED.incrementAndGet();
        LOG.debug("slipstream: {}; HDFS reads {} with its own readers", why, fileName);
        return null;
    }

    /** fallback=never: every read fails with the reason the fabric could not be used. */
    private static final class Refused extends ReplicaAccessor {
        private final String why;

        Refused(String why) {
            this.why = why;
        }

        @Override
        public int read(long pos, byte[] buf, int off, int len) throws IOException {
            throw new IOException(why);
        }

        @Override
        public int read(long pos, ByteBuffer buf) throws IOException {
            throw new IOException(why);
        }

        @Override
        public void close() {
        }

        @Override
        public boolean isLocal() {
            return false;
        }

        @Override
        public boolean isShortCircuit() {
            return false;
        }
    }
}
