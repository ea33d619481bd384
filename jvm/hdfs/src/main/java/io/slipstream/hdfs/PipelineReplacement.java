package io.slipstream.hdfs;

import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSClient;
import org.apache.hadoop.hdfs.client.HdfsClientConfigKeys.BlockWrite;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.protocol.datatransfer.IOStreamPair;
import org.apache.hadoop.hdfs.protocol.datatransfer.ReplaceDatanodeOnFailure;
import org.apache.hadoop.hdfs.protocol.datatransfer.Sender;
import org.apache.hadoop.hdfs.protocol.proto.DataTransferProtos.BlockOpResponseProto;
import org.apache.hadoop.hdfs.protocol.proto.DataTransferProtos.Status;
import org.apache.hadoop.hdfs.protocolPB.PBHelperClient;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.net.NetUtils;
import org.apache.hadoop.security.token.Token;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HDFS's replace-datanode-on-failure for a pipeline the fabric's writer recovers, as HDFS's
 * {@code DataStreamer} does it ({@code handleDatanodeReplacement}, {@code addDatanode2ExistingPipeline}):
 * when the client's policy ({@code dfs.client.block.write.replace-datanode-on-failure.*}) asks for it, the
 * NameNode names an additional DataNode ({@code getAdditionalDatanode}), a surviving DataNode copies the
 * replica's acknowledged bytes to it over HDFS's data transfer protocol ({@code transferBlock}, the same
 * request, SASL and block token as HDFS's client), and the pipeline goes on with it. Up to 3 new DataNodes
 * are tried, each excluded after its transfer failed. When none can be added, {@code best-effort} or
 * {@code min-replication} let the write go on with the survivors; otherwise it fails with HDFS's words.
 *
 * <p>The copy goes DataNode to DataNode over HDFS's socket path: it happens once per failure, and the
 * receiving DataNode creates the replica as HDFS's transfer does (temporary, then RBW at the copied length),
 * which the fabric's recovery OPEN then takes over on every DataNode of the new pipeline.
 */
final class PipelineReplacement {
    private static final Logger LOG = LoggerFactory.getLogger(PipelineReplacement.class);
    /** New DataNodes tried per failure (HDFS's DataStreamer: 3). */
    static final int TRIES = 3;

    /** DataNodes of a pipeline with their storages, in pipeline order. */
    record Pipeline(DatanodeInfo[] nodes, String[] storageIds, StorageType[] storageTypes) {
    }

    private final DFSClient client;
    private final javax.net.SocketFactory socketFactory;
    private final ReplaceDatanodeOnFailure policy;
    /** Survivors enough to go on when no DataNode can be added ({@code min-replication}, 0: never). */
    private final int minReplication;

    /** One per file system: the client's policy keys are read once, as DFSClient reads them. */
    PipelineReplacement(DFSClient client, Configuration conf) {
        this.client = client;
        this.socketFactory = NetUtils.getDefaultSocketFactory(conf);
        this.policy = ReplaceDatanodeOnFailure.get(conf);
        this.minReplication = conf.getInt(BlockWrite.ReplaceDatanodeOnFailure.MIN_REPLICATION,
                BlockWrite.ReplaceDatanodeOnFailure.MIN_REPLICATION_DEFAULT);
    }

    /** The file a pipeline writes: its path and id for the NameNode, its replication for the policy. */
    record WrittenFile(String src, long fileId, short replication) {
    }

    /**
     * The pipeline to recover with: {@code survivors}, or them and one DataNode more holding a copy of the
     * replica's first {@code block.getNumBytes()} bytes (as the NameNode orders them), when the policy asks.
     * {@code failed}: every DataNode this stream has lost, not to be chosen again.
     */
    Pipeline complete(WrittenFile file, ExtendedBlock block, Pipeline survivors, List<DatanodeInfo> failed, boolean hflushed)
            throws IOException {
        if (!policy.satisfy(file.replication(), survivors.nodes(), false, hflushed)) {
            return survivors;
        }
        try {
            Pipeline added = add(file, block, survivors, failed);
            if (added != null) {
                return added;
            }
            SlipstreamHdfsCounters.PIPELINE_REPLACEMENTS_MISSED.incrementAndGet();
            return survivors;
        } catch (IOException e) {
            if (!policy.isBestEffort()) {
                throw e;
            }
            SlipstreamHdfsCounters.PIPELINE_REPLACEMENTS_MISSED.incrementAndGet();
            LOG.warn("slipstream: failed to replace a DataNode of the pipeline of {}; going on with the remaining {} since "
                    + "{} is true", block, survivors.nodes().length, BlockWrite.ReplaceDatanodeOnFailure.BEST_EFFORT_KEY, e);
            return survivors;
        }
    }

    /** The pipeline with a new DataNode, null when none can be had and min-replication allows going on. */
    private Pipeline add(WrittenFile file, ExtendedBlock block, Pipeline survivors, List<DatanodeInfo> failed) throws IOException {
        List<DatanodeInfo> excluded = new ArrayList<>(failed);
        IOException lastTransferFailure = null;
        for (int tried = 0; tried < TRIES; tried++) {
            LocatedBlock offered = client.getNamenode().getAdditionalDatanode(file.src(), file.fileId(), block, survivors.nodes(),
                    survivors.storageIds(), excluded.toArray(new DatanodeInfo[0]), 1, client.getClientName());
            DatanodeInfo[] nodes = offered.getLocations();
            int added = newIndex(nodes, survivors.nodes());
            if (added < 0) {
                if (minReplication > 0 && survivors.nodes().length >= minReplication) {
                    LOG.warn("slipstream: no new DataNode for the pipeline of {}; going on with {} since that is no less "
                            + "than {} ({})", block, survivors.nodes().length, minReplication,
                            BlockWrite.ReplaceDatanodeOnFailure.MIN_REPLICATION);
                    return null;
                }
                throw new IOException("Failed to replace a bad datanode on the existing pipeline due to no more good "
                        + "datanodes being available to try. (Nodes: current=" + Arrays.asList(nodes) + ", original="
                        + Arrays.asList(survivors.nodes()) + "). The current failed datanode replacement policy is "
                        + policy + ", and a client may configure this via '"
                        + BlockWrite.ReplaceDatanodeOnFailure.POLICY_KEY + "' in its configuration.");
            }
            DatanodeInfo source = survivors.nodes()[tried % survivors.nodes().length];
            try {
                transfer(source, block, nodes[added], offered.getStorageTypes()[added], offered.getStorageIDs()[added],
                        offered.getBlockToken());
            } catch (IOException e) {
                LOG.warn("slipstream: copying {} from {} to {} for the pipeline failed: {}", block, source, nodes[added],
                        e.getMessage());
                lastTransferFailure = e;
                excluded.add(nodes[added]);
                continue;
            }
            SlipstreamHdfsCounters.PIPELINE_REPLACEMENTS.incrementAndGet();
            LOG.info("slipstream: {} replaces a failed DataNode in the pipeline of {} ({} bytes copied from {})",
                    nodes[added], block, block.getNumBytes(), source);
            return new Pipeline(nodes, offered.getStorageIDs(), offered.getStorageTypes());
        }
        throw lastTransferFailure;
    }

    /** The position of the one DataNode of {@code nodes} not in {@code original}, or -1. */
    static int newIndex(DatanodeInfo[] nodes, DatanodeInfo[] original) {
        if (nodes.length != original.length + 1) {
            return -1;
        }
        for (int i = 0; i < nodes.length; i++) {
            if (!Arrays.asList(original).contains(nodes[i])) {
                return i;
            }
        }
        return -1;
    }

    /** HDFS's TRANSFER_BLOCK to {@code source}: it copies its replica of {@code block} to {@code target}. */
    private void transfer(DatanodeInfo source, ExtendedBlock block, DatanodeInfo target, StorageType targetType,
            String targetStorageId, Token<BlockTokenIdentifier> token) throws IOException {
        int connectTimeoutMs = client.getConf().getSocketTimeout();
        // HDFS's timeouts for a transfer: two DataNodes' worth, and longer for a longer copy.
        int writeTimeoutMs = client.getConf().getDatanodeSocketWriteTimeout() * 2;
        int readTimeoutMs = client.getConf().getSocketTimeout() * (2 + (int) (block.getNumBytes() / (12800L << 10)));
        InetSocketAddress address = NetUtils.createSocketAddr(source.getXferAddr(client.getConf().isConnectToDnViaHostname()));
        try (Socket socket = socketFactory.createSocket()) {
            NetUtils.connect(socket, address, connectTimeoutMs);
            socket.setTcpNoDelay(client.getConf().getDataTransferTcpNoDelay());
            socket.setSoTimeout(readTimeoutMs);
            OutputStream rawOut = NetUtils.getOutputStream(socket, writeTimeoutMs);
            InputStream rawIn = NetUtils.getInputStream(socket, readTimeoutMs);
            IOStreamPair streams = client.getSaslDataTransferClient().socketSend(socket, rawOut, rawIn, client, token,
                    source);
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(streams.out));
            DataInputStream in = new DataInputStream(streams.in);
            new Sender(out).transferBlock(block, token, client.getClientName(), new DatanodeInfo[] {target},
                    new StorageType[] {targetType}, new String[] {targetStorageId});
            out.flush();
            BlockOpResponseProto response = BlockOpResponseProto.parseFrom(PBHelperClient.vintPrefixed(in));
            if (response.getStatus() != Status.SUCCESS) {
                throw new IOException("Failed to add a datanode. Response status: " + response.getStatus()
                        + (response.hasMessage() ? " (" + response.getMessage() + ")" : ""));
            }
        }
    }
}
