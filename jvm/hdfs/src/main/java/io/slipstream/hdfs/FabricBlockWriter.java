package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.util.DataChecksum;

/**
 * Writes one block through a fabric pipeline (docs/hdfs.md, "Writes"): OPEN to the first DataNode
 * of the NameNode's {@code LocatedBlock}, which opens the rest; then packets of
 * {@code write.packet.bytes} with their CRCs, up to {@code write.packetsInFlight} of them ahead of
 * their acknowledgements; {@link #hflush} waits until every DataNode acknowledged what was written
 * (HDFS readers then see it), {@link #hsync} also has it forced to disk; {@link #finish} sends the
 * last packet and waits for the replicas to be finalized. The NameNode calls around a block
 * ({@code addBlock}, {@code complete}, recovery) are the caller's. A failure names the first
 * DataNode of the pipeline that failed ({@link #failedNode}). Not thread-safe, like an output stream.
 */
final class FabricBlockWriter implements AutoCloseable {
    private static final SecureRandom IDS = new SecureRandom();

    /**
     * A packet sent and not acknowledged yet, with its data ({@code length} bytes of {@code data}, the
     * array the packet was buffered in) to send again after a pipeline recovery.
     */
    private record InFlight(long seqno, long offset, byte[] data, int length, CompletableFuture<FabricBuffer> ack) {
        long end() {
            return offset + length;
        }
    }

    /**
     * Spare packet arrays, shared by the process's writers. A packet's data is kept until every
     * DataNode acknowledged it, to be sent again after a pipeline recovery: the array it was buffered
     * in goes into the packet's {@link InFlight}, the writer takes a spare one to buffer the next, and
     * an acknowledged packet's array comes back here, so that a steady write allocates nothing. Before,
     * each packet's data was copied into a new array (1 MiB by default, a humongous allocation for G1):
     * with the page faults of the fresh arrays, 4% of the CPU of {@code ohb hdfs swt} (profiled).
     * At most {@link #SPARE_BYTES_MAX} are kept; arrays of another length (another packet size) are dropped.
     */
    static final class PacketArrays {
        static final long SPARE_BYTES_MAX = 64L << 20;
        private static final ConcurrentLinkedQueue<byte[]> SPARE = new ConcurrentLinkedQueue<>();
        private static final AtomicLong SPARE_BYTES = new AtomicLong();

        private PacketArrays() {
        }

        /** A spare array of {@code length} bytes (old contents: only what a writer put in it since is read), or a new one. */
        static byte[] take(int length) {
            for (byte[] spare; (spare = SPARE.poll()) != null;) {
                SPARE_BYTES.addAndGet(-spare.length);
                if (spare.length == length) {
                    return spare;
                }
            }
            return new byte[length];
        }

        /** Keeps {@code array} for a later {@link #take}, unless {@link #SPARE_BYTES_MAX} are kept already. The caller drops its references. */
        static void give(byte[] array) {
            if (SPARE_BYTES.addAndGet(array.length) > SPARE_BYTES_MAX) {
                SPARE_BYTES.addAndGet(-array.length);
                return;
            }
            SPARE.add(array);
        }

        static long spareBytes() {
            return SPARE_BYTES.get();
        }
    }

    /**
     * Taking over a block whose pipeline failed (HDFS's PIPELINE_SETUP_STREAMING_RECOVERY): the new
     * generation stamp from {@code updateBlockForPipeline}, the lengths acknowledged and sent before,
     * and where the data sent again starts (a chunk boundary at or below the acknowledged length).
     */
    record Recovery(long newGenerationStamp, long bytesAcked, long bytesSent, long resendOffset) {
    }

    private final FabricNode node;
    private final HdfsConf conf;
    private final LocatedBlock located;
    private final DataChecksum checksum;
    private final int bytesPerChecksum;
    private final long writeId = IDS.nextLong();
    private final FabricEndpoint first;
    /** Data not sent yet, starting at {@link #bufferOffset} in the block (a chunk boundary); a {@link PacketArrays} array. */
    private byte[] buffer;
    private int buffered;
    private long bufferOffset;
    private long seqno;
    private long bytesAcked;
    /** End of the last packet this writer sent. */
    private long sentEnd;
    /** End of the data counted as written over the fabric (bytes sent again are counted once; after a recovery, what the failed pipeline got). */
    private long countedEnd;
    private final ArrayDeque<InFlight> inFlight = new ArrayDeque<>();
    private IOException failure;
    private boolean finished;

    /** Opens the pipeline of {@code located} (its DataNodes in order); throws when any DataNode refuses. */
    FabricBlockWriter(FabricNode node, HdfsConf conf, LocatedBlock located, DataChecksum checksum) throws IOException {
        this(node, conf, located, checksum, null);
    }

    /**
     * Opens the pipeline of {@code located}, or with {@code recovery} takes over its replicas being
     * written (the caller then writes again what was not acknowledged, from {@code resendOffset}).
     */
    FabricBlockWriter(FabricNode node, HdfsConf conf, LocatedBlock located, DataChecksum checksum, Recovery recovery) throws IOException {
        this.node = node;
        this.conf = conf;
        this.located = located;
        this.checksum = checksum;
        this.bytesPerChecksum = checksum.getBytesPerChecksum();
        int packet = Math.max(bytesPerChecksum, conf.writePacketBytes / bytesPerChecksum * bytesPerChecksum);
        this.buffer = PacketArrays.take(packet);
        DatanodeInfo[] targets = located.getLocations();
        if (targets.length == 0 || targets.length > BlockWriteProtocol.DOWNSTREAM_MAX + 1) {
            throw new IOException("block " + located.getBlock() + " has " + targets.length + " DataNodes to write to");
        }
        first = node.endpoint(targets[0].getIpAddr(), conf.port);
        if (recovery != null) {
            if (recovery.resendOffset() % bytesPerChecksum != 0 || recovery.resendOffset() > recovery.bytesAcked()) {
                throw new IllegalArgumentException("resending from " + recovery.resendOffset() + " for " + recovery);
            }
            bufferOffset = recovery.resendOffset();
            bytesAcked = recovery.bytesAcked();
            sentEnd = recovery.resendOffset();
            countedEnd = recovery.bytesSent();
        }
        try (FabricBuffer answer = first.request(BlockWriteProtocol.OP_OPEN, open(recovery).encode())) {
            if (answer.length() != 1 || answer.byteBuffer().get(0) != BlockReadProtocol.VERSION) {
                throw new IOException("unexpected answer to opening " + located.getBlock() + " on " + targets[0]);
            }
        } catch (FabricException e) {
            throw failed(e);
        }
    }

    private BlockWriteProtocol.Open open(Recovery recovery) throws IOException {
        ExtendedBlock block = located.getBlock();
        DatanodeInfo[] targets = located.getLocations();
        StorageType[] types = located.getStorageTypes();
        String[] ids = located.getStorageIDs();
        List<BlockWriteProtocol.Target> downstream = new ArrayList<>();
        for (int i = 1; i < targets.length; i++) {
            downstream.add(new BlockWriteProtocol.Target(targets[i].getIpAddr(), targets[i].getXferPort(), type(types, i), id(ids, i)));
        }
        ByteArrayOutputStream token = new ByteArrayOutputStream();
        located.getBlockToken().write(new DataOutputStream(token));
        return new BlockWriteProtocol.Open(targets[0].getXferPort(), writeId, block.getBlockPoolId(), block.getBlockId(),
                block.getGenerationStamp(), checksum.getChecksumType().id, bytesPerChecksum, type(types, 0), id(ids, 0), token.toByteArray(),
                recovery == null ? BlockWriteProtocol.STAGE_CREATE : BlockWriteProtocol.STAGE_RECOVERY,
                recovery == null ? block.getGenerationStamp() : recovery.newGenerationStamp(), recovery == null ? 0 : recovery.bytesAcked(),
                recovery == null ? 0 : recovery.bytesSent(), downstream);
    }

    private static StorageType type(StorageType[] types, int i) {
        return types != null && i < types.length && types[i] != null ? types[i] : StorageType.DEFAULT;
    }

    private static String id(String[] ids, int i) {
        return ids != null && i < ids.length && ids[i] != null ? ids[i] : "";
    }

    /** Bytes {@link #write} takes before it sends a packet: a write of at most this many is all taken even if the send fails. */
    int room() {
        return buffer.length - buffered;
    }

    /**
     * Buffers {@code b[off, off + len)}, sending full packets. A send fails only after the bytes
     * before it were taken, so a caller writing at most {@link #room()} bytes knows they were taken.
     */
    void write(byte[] b, int off, int len) throws IOException {
        check();
        while (len > 0) {
            int n = Math.min(len, buffer.length - buffered);
            System.arraycopy(b, off, buffer, buffered, n);
            buffered += n;
            off += n;
            len -= n;
            if (buffered == buffer.length) {
                send(0);
            }
        }
    }

    /** Bytes of the block given to {@link #write} so far. */
    long bytesWritten() {
        return bufferOffset + buffered;
    }

    /** Bytes every DataNode of the pipeline acknowledged. */
    long bytesAcked() {
        return bytesAcked;
    }

    /** Sends what is buffered and waits until every DataNode acknowledged it: new readers see it. */
    void hflush() throws IOException {
        check();
        if (bytesWritten() > sentEnd) {
            send(0);
        }
        awaitAll();
    }

    /** Like {@link #hflush}, and every DataNode forced the replica's files to disk first. */
    void hsync() throws IOException {
        check();
        send(BlockWriteProtocol.FLAG_SYNC);
        awaitAll();
    }

    /**
     * A heartbeat (HDFS's, for an idle pipeline): an empty packet, or the buffered partial chunk
     * sent again, through every DataNode and back, so none fails the write as idle.
     */
    void heartbeat() throws IOException {
        check();
        send(0);
        awaitAll();
    }

    /** Sends the last packet and waits until every DataNode finalized its replica; returns the block's length. */
    long finish() throws IOException {
        check();
        send(BlockWriteProtocol.FLAG_LAST);
        awaitAll();
        finished = true;
        SlipstreamHdfsCounters.BLOCKS_WRITTEN.incrementAndGet();
        return bytesAcked;
    }

    /** The DataNode ({@code ip:xferPort}) a failure named as the first that failed, or null. */
    static String failedNode(IOException failure) {
        String message = String.valueOf(failure.getMessage());
        int at = message.indexOf(DataNodeWrites.FAILED_NODE_PREFIX);
        if (at < 0) {
            return null;
        }
        int start = at + DataNodeWrites.FAILED_NODE_PREFIX.length();
        int end = message.indexOf(' ', start);
        return end < 0 ? null : message.substring(start, end);
    }

    /** Sends the buffered bytes as one packet; keeps a partial last chunk to send again with what follows. */
    private void send(int flags) throws IOException {
        while (inFlight.size() >= conf.writePacketsInFlight) {
            awaitOldest();
        }
        int chunks = (buffered + bytesPerChecksum - 1) / bytesPerChecksum;
        int checksumLength = chunks * checksum.getChecksumSize();
        FabricBuffer message = node.allocate(BlockWriteProtocol.PACKET_HEADER_BYTES + checksumLength + buffered);
        try {
            ByteBuffer out = message.byteBuffer();
            new BlockWriteProtocol.PacketHeader(located.getLocations()[0].getXferPort(), writeId, seqno, bufferOffset, flags, buffered,
                    checksumLength).encode(out);
            ByteBuffer sums = out.slice(out.position(), checksumLength);
            checksum.calculateChunkedSums(ByteBuffer.wrap(buffer, 0, buffered), sums);
            out.position(out.position() + checksumLength);
            out.put(buffer, 0, buffered);
        } catch (RuntimeException e) {
            message.release();
            throw e;
        }
        long end = bufferOffset + buffered;
        // The packet keeps the array it was buffered in; the next packet is buffered in a spare one,
        // starting with the partial last chunk (sent again with what follows).
        byte[] sent = buffer;
        inFlight.add(new InFlight(seqno++, bufferOffset, sent, buffered, first.requestAsync(BlockWriteProtocol.OP_PACKET, message)));
        SlipstreamHdfsCounters.BYTES_WRITTEN.addAndGet(Math.max(0, end - Math.max(bufferOffset, countedEnd)));
        countedEnd = Math.max(countedEnd, end);
        sentEnd = end;
        int full = buffered - buffered % bytesPerChecksum;
        buffer = PacketArrays.take(sent.length);
        System.arraycopy(sent, full, buffer, 0, buffered - full);
        bufferOffset += full;
        buffered -= full;
    }

    private void awaitAll() throws IOException {
        while (!inFlight.isEmpty()) {
            awaitOldest();
        }
    }

    private void awaitOldest() throws IOException {
        InFlight oldest = inFlight.peek();
        try (FabricBuffer answer = oldest.ack().get(conf.requestTimeout.toMillis() * 2, TimeUnit.MILLISECONDS)) {
            long acked = BlockWriteProtocol.decodeAck(answer.byteBuffer());
            if (acked != oldest.seqno()) {
                throw new IOException("packet " + oldest.seqno() + " of " + located.getBlock() + " acknowledged as " + acked);
            }
            inFlight.poll();
            PacketArrays.give(oldest.data());
            bytesAcked = Math.max(bytesAcked, oldest.end());
        } catch (ExecutionException e) {
            throw failed(e.getCause());
        } catch (TimeoutException e) {
            throw failed(new IOException("no acknowledgement of packet " + oldest.seqno() + " of " + located.getBlock() + " in "
                    + conf.requestTimeout.toMillis() * 2 + " ms"));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw failed(new java.io.InterruptedIOException("interrupted writing " + located.getBlock()));
        } catch (RuntimeException e) {
            throw failed(e);
        }
    }

    private IOException failed(Throwable cause) {
        if (failure == null) {
            String message = String.valueOf(cause.getMessage());
            if (!message.contains(DataNodeWrites.FAILED_NODE_PREFIX) && cause instanceof FabricException) {
                // The first DataNode did not answer, or its process has no such DataNode any more.
                message = DataNodeWrites.FAILED_NODE_PREFIX + located.getLocations()[0].getXferAddr() + " failed: " + message;
            }
            failure = new IOException("writing " + located.getBlock() + " over the fabric: " + message, cause);
        }
        return failure;
    }

    private void check() throws IOException {
        if (failure != null) {
            throw failure;
        }
        if (finished) {
            throw new IOException("block " + located.getBlock() + " is finished");
        }
    }

    /** Bytes sent to the pipeline so far (the most any DataNode can have). */
    long bytesSent() {
        return Math.max(sentEnd, countedEnd);
    }

    /** Where the bytes not acknowledged start: the first unacknowledged packet's offset, or what is buffered. */
    long unacknowledgedOffset() {
        return inFlight.isEmpty() ? bufferOffset : Math.min(inFlight.peek().offset(), bufferOffset);
    }

    /** The bytes from {@link #unacknowledgedOffset()} to {@link #bytesWritten()}: packets not acknowledged, then the buffer. */
    byte[] unacknowledged() {
        long start = unacknowledgedOffset();
        byte[] out = new byte[Math.toIntExact(bytesWritten() - start)];
        for (InFlight f : inFlight) {
            System.arraycopy(f.data(), 0, out, Math.toIntExact(f.offset() - start), f.length());
        }
        System.arraycopy(buffer, 0, out, Math.toIntExact(bufferOffset - start), buffered);
        return out;
    }

    /**
     * Drops what is in flight (their answers are released as they come; their arrays are spare
     * again: the fabric sent copies). A finished writer's buffer is spare too; an unfinished one's is
     * left to the collector, in case its caller still reads what was not acknowledged.
     */
    @Override
    public void close() {
        for (InFlight f : inFlight) {
            f.ack().whenComplete((b, e) -> {
                if (b != null) {
                    b.close();
                }
            });
            PacketArrays.give(f.data());
        }
        inFlight.clear();
        if (finished && buffer != null) {
            PacketArrays.give(buffer);
            buffer = null;
        }
    }
}
