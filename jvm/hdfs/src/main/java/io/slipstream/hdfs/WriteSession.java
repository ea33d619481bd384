package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricRequest;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.apache.hadoop.hdfs.server.datanode.ReplicaInPipeline;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.ReplicaOutputStreams;
import org.apache.hadoop.io.IOUtils;
import org.apache.hadoop.util.DataChecksum;

/**
 * One block being written on one DataNode over the fabric: the replica created by
 * {@code FsDatasetSpi.createRbw}, its {@code ReplicaOutputStreams}, and the next DataNode of the
 * pipeline if there is one. Packets are taken in seqno order whatever thread pulled them (one
 * thread at a time drains the packets that are next, so handler threads never wait for each other);
 * each is forwarded downstream first, then verified (on the last DataNode only), written and
 * flushed here, and acknowledged upstream once this DataNode wrote it and every DataNode
 * downstream acknowledged it. Acknowledgements are chained, so they go out in order and a failure
 * fails every later packet. A failed session closes its streams and leaves the replica being
 * written for HDFS's recovery.
 */
final class WriteSession {
    /** A packet waiting for its turn: the request (holding its payload) and its decoded header. */
    private record Pending(FabricRequest request, BlockWriteProtocol.PacketHeader header) {
    }

    final long writeId;
    final ExtendedBlock block;
    private final DataNodeWrites writes;
    private final ReplicaHandler handler;
    private final ReplicaInPipeline replica;
    private final ReplicaOutputStreams streams;
    private final DataChecksum checksum;
    private final int metaHeaderBytes;
    /** The next DataNode, or null on the last one; its data-transfer port goes into forwarded headers. */
    private final FabricEndpoint downstream;
    private final int downstreamXferPort;
    private final String downstreamName;
    private final int packetsInFlightMax;

    private final TreeMap<Long, Pending> pending = new TreeMap<>();
    private boolean draining;
    private long nextSeqno;
    private long bytesReceived;
    private int unacked;
    private CompletableFuture<Void> lastAck = CompletableFuture.completedFuture(null);
    private volatile String failure;
    volatile long lastActiveNanos = System.nanoTime();

    WriteSession(DataNodeWrites writes, long writeId, ExtendedBlock block, ReplicaHandler handler, ReplicaOutputStreams streams,
            DataChecksum checksum, int metaHeaderBytes, long bytesOnDisk, FabricEndpoint downstream, int downstreamXferPort, String downstreamName,
            int packetsInFlightMax) {
        this.writes = writes;
        this.writeId = writeId;
        this.block = block;
        this.handler = handler;
        this.replica = handler.getReplica();
        this.streams = streams;
        this.checksum = checksum;
        this.metaHeaderBytes = metaHeaderBytes;
        this.bytesReceived = bytesOnDisk;
        this.downstream = downstream;
        this.downstreamXferPort = downstreamXferPort;
        this.downstreamName = downstreamName;
        this.packetsInFlightMax = packetsInFlightMax;
    }

    /** Takes a packet; it is processed now if it is next, else when the packets before it came. */
    void offer(FabricRequest request, BlockWriteProtocol.PacketHeader header) {
        lastActiveNanos = System.nanoTime();
        synchronized (this) {
            if (failure != null) {
                request.fail(failure);
                return;
            }
            if (header.seqno() < nextSeqno || pending.containsKey(header.seqno())) {
                fail(writes.self() + ": packet " + header.seqno() + " of " + block + " came twice");
                request.fail(failure);
                return;
            }
            if (pending.size() >= packetsInFlightMax) {
                fail(writes.self() + ": more than " + packetsInFlightMax + " packets of " + block + " out of order ("
                        + HdfsConf.WRITE_PACKETS_IN_FLIGHT.key() + ")");
                request.fail(failure);
                return;
            }
            pending.put(header.seqno(), new Pending(request, header));
            if (draining) {
                return;
            }
            draining = true;
        }
        while (true) {
            Pending next;
            synchronized (this) {
                next = pending.remove(nextSeqno);
                if (next == null) {
                    draining = false;
                    return;
                }
                nextSeqno++;
            }
            process(next);
        }
    }

    private void process(Pending p) {
        FabricRequest request = p.request();
        BlockWriteProtocol.PacketHeader h = p.header();
        String failed = failure;
        if (failed != null) {
            request.fail(failed);
            return;
        }
        CompletableFuture<FabricBuffer> forwarded = null;
        try {
            check(h);
            ByteBuffer message = request.payloadBuffer();
            if (downstream != null) {
                // Forward first (the fabric copies it before returning), so the next DataNode works while this one writes.
                message.putInt(BlockWriteProtocol.PACKET_XFER_PORT_OFFSET, downstreamXferPort);
                forwarded = downstream.requestAsync(BlockWriteProtocol.OP_PACKET, message);
            }
            ByteBuffer sums = message.slice(BlockWriteProtocol.PACKET_HEADER_BYTES, h.checksumLength());
            ByteBuffer data = message.slice(BlockWriteProtocol.PACKET_HEADER_BYTES + h.checksumLength(), h.dataLength());
            if (downstream == null && h.dataLength() > 0) {
                // The last DataNode verifies, as BlockReceiver does: it saw the bytes after every hop.
                checksum.verifyChunkedSums(data.duplicate(), sums.duplicate(), block.toString(), h.offset());
            }
            write(h, data, sums);
            request.payload().release();
            writes.bytesWritten.addAndGet(h.dataLength());
        } catch (Exception e) {
            if (forwarded != null) {
                forwarded.whenComplete((b, err) -> {
                    if (b != null) {
                        b.close();
                    }
                });
            }
            fail(writes.self() + ": " + e.getMessage());
            request.fail(failure);
            return;
        }
        CompletableFuture<Void> downstreamAck = forwarded == null ? CompletableFuture.completedFuture(null)
                : forwarded.handle((answer, err) -> downstreamAcked(answer, err, h.seqno()));
        CompletableFuture<Void> ack;
        synchronized (this) {
            unacked++;
            ack = lastAck.thenCombine(downstreamAck, (a, b) -> null);
            lastAck = ack;
        }
        long end = h.offset() + h.dataLength();
        ack.whenComplete((ok, err) -> acked(request, h, end, err));
    }

    private void check(BlockWriteProtocol.PacketHeader h) {
        int bytesPerChecksum = checksum.getBytesPerChecksum();
        int chunks = (h.dataLength() + bytesPerChecksum - 1) / bytesPerChecksum;
        if (h.checksumLength() != chunks * checksum.getChecksumSize()) {
            throw new BlockReadProtocol.MalformedException("packet " + h.seqno() + " has " + h.checksumLength() + " checksum bytes for "
                    + h.dataLength() + " data bytes");
        }
        // Bytes received may be sent again (a partial chunk after an hflush; after a pipeline recovery, what was
        // not acknowledged): from a chunk boundary, reaching at least to what is here, rewritten in place.
        if (h.offset() % bytesPerChecksum != 0 || h.offset() > bytesReceived || h.offset() + h.dataLength() < bytesReceived) {
            throw new BlockReadProtocol.MalformedException("packet " + h.seqno() + " at offset " + h.offset() + " of " + h.dataLength()
                    + " bytes after " + bytesReceived + " bytes received");
        }
        if (unackedNow() >= packetsInFlightMax) {
            throw new IllegalStateException("more than " + packetsInFlightMax + " packets unacknowledged (" + HdfsConf.WRITE_PACKETS_IN_FLIGHT.key()
                    + ")");
        }
    }

    private synchronized int unackedNow() {
        return unacked;
    }

    /** Writes data and checksums at the packet's offset, straight from the message into the replica's files. */
    private void write(BlockWriteProtocol.PacketHeader h, ByteBuffer data, ByteBuffer sums) throws IOException {
        if (h.dataLength() > 0) {
            long checksumOffset = metaHeaderBytes + h.offset() / checksum.getBytesPerChecksum() * checksum.getChecksumSize();
            writeAt(streams.getDataOut(), h.offset(), data);
            writeAt(streams.getChecksumOut(), checksumOffset, sums);
            bytesReceived = h.offset() + h.dataLength();
            byte[] lastChecksum = new byte[checksum.getChecksumSize()];
            sums.get(sums.limit() - lastChecksum.length, lastChecksum);
            if (replica.getNumBytes() < bytesReceived) {
                replica.setNumBytes(bytesReceived);
            }
            // What HDFS's readers of a block being written use for the last partial chunk.
            replica.setLastChecksumAndDataLen(bytesReceived, lastChecksum);
        }
        streams.flushDataOut();
        streams.flushChecksumOut();
        if (h.sync()) {
            streams.syncDataOut();
            streams.syncChecksumOut();
        }
    }

    /** Writes at {@code position} (always set: a stream opened for recovery starts where FsDataset left it). */
    private static void writeAt(OutputStream out, long position, ByteBuffer from) throws IOException {
        if (out instanceof FileOutputStream file) {
            var channel = file.getChannel();
            if (channel.position() != position) {
                channel.position(position);
            }
            ByteBuffer b = from.duplicate();
            while (b.hasRemaining()) {
                channel.write(b);
            }
            return;
        }
        // FsDatasetImpl's streams are file streams; another FsDatasetSpi would need its own positioning.
        throw new IOException("cannot write at a position through " + out.getClass().getName() + " (not a file)");
    }

    private Void downstreamAcked(FabricBuffer answer, Throwable err, long seqno) {
        if (err != null) {
            throw new CompletionException(new IOException(DataNodeWrites.pipelineFailure(err, downstreamName)));
        }
        try (answer) {
            long acked = BlockWriteProtocol.decodeAck(answer.byteBuffer());
            if (acked != seqno) {
                throw new CompletionException(new IOException("pipeline node " + downstreamName + " failed: acknowledged packet " + acked
                        + " for " + seqno));
            }
            return null;
        } catch (RuntimeException e) {
            throw e instanceof CompletionException c ? c : new CompletionException(new IOException("pipeline node " + downstreamName
                    + " failed: " + e.getMessage()));
        }
    }

    private void acked(FabricRequest request, BlockWriteProtocol.PacketHeader h, long end, Throwable err) {
        if (err != null) {
            Throwable cause = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
            fail(cause.getMessage());
            request.fail(failure);
            return;
        }
        synchronized (this) {
            unacked--;
        }
        if (end > replica.getBytesAcked()) {
            replica.setBytesAcked(end);
        }
        if (!h.last()) {
            request.respond(BlockWriteProtocol.encodeAck(h.seqno()));
            return;
        }
        Executor finisher = writes.finisher();
        finisher.execute(() -> {
            try {
                writes.finalizeReplica(this, handler, streams);
                request.respond(BlockWriteProtocol.encodeAck(h.seqno()));
            } catch (Exception e) {
                fail(writes.self() + ": finalizing " + block + " failed: " + e);
                request.fail(failure);
            }
        });
    }

    long bytesReceived() {
        synchronized (this) {
            return bytesReceived;
        }
    }

    /**
     * Fails the write (idempotent): later and waiting packets get {@code reason}, the streams close,
     * the replica stays as it is (being written) for HDFS's recovery.
     */
    void fail(String reason) {
        List<Pending> dropped;
        synchronized (this) {
            if (failure != null) {
                return;
            }
            failure = reason.startsWith(DataNodeWrites.FAILED_NODE_PREFIX) ? reason
                    : DataNodeWrites.FAILED_NODE_PREFIX + reason.replaceFirst(": ", " failed: ");
            dropped = new ArrayList<>(pending.values());
            pending.clear();
        }
        writes.ended(this, false);
        IOUtils.closeStream(streams);
        IOUtils.closeStream(handler);
        for (Pending p : dropped) {
            p.request().fail(failure);
        }
    }

    String failure() {
        return failure;
    }
}
