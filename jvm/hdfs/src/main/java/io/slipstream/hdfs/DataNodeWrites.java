package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricRequest;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.apache.hadoop.hdfs.server.datanode.ReplicaInPipeline;
import org.apache.hadoop.hdfs.server.datanode.SlipstreamDataNodeBridge;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.ReplicaOutputStreams;
import org.apache.hadoop.io.IOUtils;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Serves one DataNode's block writes over the fabric, as its own write path ({@code DataXceiver.writeBlock},
 * {@code BlockReceiver}) does for a client's pipeline: checks the block token (WRITE), creates the
 * replica being written with {@code FsDatasetSpi.createRbw}, announces it ("receiving"), writes the
 * meta file's header (or, recovering a pipeline, takes the replica over with {@code recoverRbw} and
 * a new generation stamp), opens the rest of the pipeline downstream, then takes packets
 * ({@link WriteSession}); after the last packet is acknowledged by every DataNode downstream it
 * finalizes the replica ({@code finalizeBlock}) and reports it received ({@code DataNode.closeBlock},
 * through the one bridge class). Writes per DataNode are bounded by {@code server.maxWrites}.
 */
final class DataNodeWrites {
    private static final Logger LOG = LoggerFactory.getLogger(DataNodeWrites.class);
    /** Every write failure names the first DataNode that failed, so a writer knows which to exclude. */
    static final String FAILED_NODE_PREFIX = "pipeline node ";
    /** The meta file's header: a 2-byte version, then DataChecksum's header (type, bytes per checksum). */
    private static final int META_HEADER_BYTES = 2 + DataChecksum.getChecksumHeaderSize();

    private final DataNode dataNode;
    private final HdfsConf conf;
    private final boolean blockTokens;
    private final Map<Long, WriteSession> sessions = new ConcurrentHashMap<>();
    private volatile DataNodeFabric fabric;
    final AtomicLong bytesWritten = new AtomicLong();
    final AtomicLong blocksFinalized = new AtomicLong();
    final AtomicLong writesFailed = new AtomicLong();

    DataNodeWrites(DataNode dataNode, HdfsConf conf) {
        this.dataNode = dataNode;
        this.conf = conf;
        this.blockTokens = dataNode.getConf().getBoolean(org.apache.hadoop.hdfs.DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY,
                org.apache.hadoop.hdfs.DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_DEFAULT);
    }

    /** This DataNode as a pipeline names it: {@code ip:xferPort} as registered with the NameNode (the writer's DatanodeInfo). */
    String self() {
        var id = dataNode.getDatanodeId();
        return id != null ? id.getXferAddr() : dataNode.getXferAddress().getAddress().getHostAddress() + ":" + dataNode.getXferPort();
    }

    void attach(DataNodeFabric fabric) {
        this.fabric = fabric;
    }

    Executor finisher() {
        return fabric.finisher;
    }

    /**
     * OPEN: opens the pipeline downstream and, meanwhile, creates the replica here; answers once the
     * whole pipeline is open.
     */
    void open(FabricRequest request, BlockWriteProtocol.Open open) throws IOException {
        ExtendedBlock block = new ExtendedBlock(open.poolId(), open.blockId(), 0, open.generationStamp());
        if (blockTokens) {
            DataNodeReads.checkToken(dataNode, open.token(), block, BlockTokenIdentifier.AccessMode.WRITE);
        }
        if (open.checksumType() != DataChecksum.Type.CRC32.id && open.checksumType() != DataChecksum.Type.CRC32C.id) {
            throw new BlockReadProtocol.MalformedException("checksum type " + open.checksumType() + " (the fabric path writes CRC32 and CRC32C)");
        }
        if (open.stage() == BlockWriteProtocol.STAGE_RECOVERY && open.newGenerationStamp() <= open.generationStamp()) {
            throw new BlockReadProtocol.MalformedException("recovery to generation stamp " + open.newGenerationStamp() + " from "
                    + open.generationStamp());
        }
        if (sessions.size() >= conf.serverMaxWrites) {
            throw new IllegalStateException("busy: " + sessions.size() + " writes open on this DataNode (" + HdfsConf.SERVER_MAX_WRITES.key() + ")");
        }
        if (sessions.containsKey(open.writeId())) {
            throw new BlockReadProtocol.MalformedException("write id " + open.writeId() + " in use");
        }
        BlockWriteProtocol.Target next = open.downstream().isEmpty() ? null : open.downstream().get(0);
        // Forwarded before this DataNode creates its replica, so that the pipeline's DataNodes create
        // theirs at once: creating one is a few file-system operations (about 1.8 ms per DataNode in
        // ohb hdfs swl, profiled), paid one after the other down the pipeline before.
        CompletableFuture<FabricBuffer> downstreamOpen = next == null ? null
                : fabric.node.endpoint(next.host(), conf.port).requestAsync(BlockWriteProtocol.OP_OPEN, open.forward().encode());
        try {
            openHere(request, open, block, next, downstreamOpen);
        } catch (IOException | RuntimeException e) {
            if (downstreamOpen != null) {
                // The DataNodes below may have opened the write: without packets their sessions end at
                // the idle timeout, as a write whose writer went away.
                downstreamOpen.thenAccept(FabricBuffer::close);
            }
            throw e;
        }
    }

    /** OPEN's own part: the replica here and its write session; answers when {@code downstreamOpen} (if any) did. */
    private void openHere(FabricRequest request, BlockWriteProtocol.Open open, ExtendedBlock block, BlockWriteProtocol.Target next,
            CompletableFuture<FabricBuffer> downstreamOpen) throws IOException {
        DataChecksum checksum = DataChecksum.newDataChecksum(DataChecksum.Type.valueOf(open.checksumType()), open.bytesPerChecksum());
        String storageId = open.storageId().isEmpty() ? null : open.storageId();
        boolean recovery = open.stage() == BlockWriteProtocol.STAGE_RECOVERY;
        ReplicaHandler handler;
        if (recovery) {
            // As BlockReceiver for PIPELINE_SETUP_STREAMING_RECOVERY: an older write of the block here is stopped first.
            for (WriteSession older : List.copyOf(sessions.values())) {
                if (older.block.getBlockId() == open.blockId()) {
                    older.fail(self() + ": superseded by the recovery of its pipeline");
                }
            }
            handler = dataNode.getFSDataset().recoverRbw(block, open.newGenerationStamp(), open.minBytes(), open.maxBytes());
            block.setGenerationStamp(open.newGenerationStamp());
        } else {
            handler = dataNode.getFSDataset().createRbw(open.storageType(), storageId, block, false);
        }
        ReplicaOutputStreams streams = null;
        WriteSession session;
        try {
            ReplicaInPipeline replica = handler.getReplica();
            // createRbw/recoverRbw made this handler thread the replica's writer; a later recovery would interrupt
            // it and wait for it to end (a fabric handler thread never does). A write session has no thread of its own.
            replica.setWriter(null);
            streams = replica.createStreams(!recovery, checksum);
            if (!recovery) {
                SlipstreamDataNodeBridge.receivingBlock(dataNode, block, replica.getStorageUuid());
                DataOutputStream meta = new DataOutputStream(streams.getChecksumOut());
                BlockMetadataHeader.writeHeader(meta, checksum);
                meta.flush();
            }
            FabricEndpoint downstream = null;
            if (next != null) {
                downstream = fabric.node.endpoint(next.host(), conf.port);
            }
            session = new WriteSession(this, open.writeId(), block, handler, streams, checksum, META_HEADER_BYTES, replica.getBytesOnDisk(),
                    downstream, next == null ? 0 : next.xferPort(), next == null ? null : next.host() + ":" + next.xferPort(),
                    conf.writePacketsInFlight);
            if (sessions.putIfAbsent(open.writeId(), session) != null) {
                throw new BlockReadProtocol.MalformedException("write id " + open.writeId() + " in use");
            }
        } catch (IOException | RuntimeException e) {
            IOUtils.closeStream(streams);
            IOUtils.closeStream(handler);
            throw e;
        }
        if (next == null) {
            request.respond(new byte[] {BlockReadProtocol.VERSION});
            return;
        }
        String nextName = next.host() + ":" + next.xferPort();
        downstreamOpen.whenComplete((answer, err) -> {
            if (answer != null) {
                answer.close();
            }
            if (err == null) {
                request.respond(new byte[] {BlockReadProtocol.VERSION});
                return;
            }
            String failure = pipelineFailure(err, nextName);
            session.fail(failure);
            request.fail(failure);
        });
    }

    /** PACKET: hands it to its write's session (a packet of an unknown write fails alone). */
    void packet(FabricRequest request, BlockWriteProtocol.PacketHeader header) {
        WriteSession session = sessions.get(header.writeId());
        if (session == null) {
            throw new IllegalStateException("no open write " + header.writeId() + " on DataNode " + self());
        }
        session.offer(request, header);
    }

    /** After the last packet was acknowledged downstream: closes the streams, finalizes and reports the replica. */
    void finalizeReplica(WriteSession session, ReplicaHandler handler, ReplicaOutputStreams streams) throws IOException {
        try {
            streams.close();
            ReplicaInPipeline replica = handler.getReplica();
            ExtendedBlock block = new ExtendedBlock(session.block);
            block.setNumBytes(replica.getNumBytes());
            dataNode.getFSDataset().finalizeBlock(block, false);
            SlipstreamDataNodeBridge.closeBlock(dataNode, block, replica.getStorageUuid(), replica.isOnTransientStorage());
            blocksFinalized.incrementAndGet();
        } finally {
            IOUtils.closeStream(handler);
            ended(session, true);
        }
    }

    /** A session ended: finished, or failed (then counted). */
    void ended(WriteSession session, boolean finished) {
        if (sessions.remove(session.writeId, session) && !finished) {
            writesFailed.incrementAndGet();
            LOG.info("slipstream: write of {} failed: {}", session.block, session.failure());
        }
    }

    /** Fails the write {@code writeId} if it is open here (after a malformed packet of it). */
    void fail(long writeId, String reason) {
        WriteSession session = sessions.get(writeId);
        if (session != null) {
            session.fail(self() + ": " + reason);
        }
    }

    /** Fails writes idle longer than {@code idleNanos} (a writer that went away); called periodically. */
    void failIdle(long idleNanos) {
        long now = System.nanoTime();
        for (WriteSession session : List.copyOf(sessions.values())) {
            if (now - session.lastActiveNanos > idleNanos) {
                session.fail(self() + ": no packet for " + (idleNanos / 1_000_000) + " ms");
            }
        }
    }

    /** The DataNode stops: every open write fails (its replica stays for recovery). */
    void failAll(String reason) {
        for (WriteSession session : List.copyOf(sessions.values())) {
            session.fail(self() + ": " + reason);
        }
    }

    int openWrites() {
        return sessions.size();
    }

    /**
     * The failure to report upstream when a request to the next DataNode ({@code nextName}) failed:
     * the first failed node's own words when one answered, else the next DataNode (unreachable, timed out).
     */
    static String pipelineFailure(Throwable err, String nextName) {
        Throwable cause = err.getCause() != null && !(err instanceof FabricException) ? err.getCause() : err;
        String message = String.valueOf(cause.getMessage());
        int named = message.indexOf(FAILED_NODE_PREFIX);
        if (cause instanceof FabricException f && f.kind() == FabricException.Kind.REMOTE && named >= 0) {
            return message.substring(named);
        }
        return FAILED_NODE_PREFIX + nextName + " failed: " + message;
    }
}
