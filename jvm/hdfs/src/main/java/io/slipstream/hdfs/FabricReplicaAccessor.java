package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumException;
import org.apache.hadoop.hdfs.ReplicaAccessor;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one block over the fabric from the DataNodes holding it, nearest first. Each request asks
 * for up to {@code request.bytes}; the response is kept as a window that later reads are served
 * from, and while a sequential reader consumes it the next windows (up to {@code read.windowsAhead})
 * are already requested, so that the DataNode's file reads, the transfer and this side's checksum
 * verification overlap. Checksums
 * are verified per response; a replica that fails them is reported to the NameNode and the read
 * goes on from the next replica, as does a read whose DataNode fails or refuses. HDFS learns
 * nothing of either unless every replica fails: then a {@link ChecksumException} (all corrupt) or
 * an IOException reaches it and it goes on with its own readers' retry logic.
 */
final class FabricReplicaAccessor extends ReplicaAccessor {
    private static final Logger LOG = LoggerFactory.getLogger(FabricReplicaAccessor.class);

    private final ClientFabric fabric;
    private final HdfsConf settings;
    private final Configuration conf;
    private final String fileName;
    private final LocatedBlock block;
    private final long generationStamp;
    private final List<DatanodeInfo> replicas;
    private final byte[] token;
    private final long visibleLength;
    private final boolean verifyChecksum;
    private int replica;

    /** The current window: a verified response and where its data starts in the block. */
    private FabricBuffer window;
    private ByteBuffer windowData;
    private long windowStart;
    /** A window requested ahead: {@code length} bytes from {@code start}, of replica {@code replica}. */
    private record Ahead(long start, int length, int replica, CompletableFuture<FabricBuffer> response) {
    }

    /** The next windows, requested ahead in block order (at most {@code read.windowsAhead}). */
    private final ArrayDeque<Ahead> ahead = new ArrayDeque<>();
    /**
     * Bytes the next request asks for. HDFS opens a stream's block reader for the rest of the block
     * also when the reader then reads 4 KiB and seeks, so a small read's window starts at what it
     * wants (at least {@link #READ_AHEAD_MIN}) and grows fourfold, up to {@code request.bytes}, with
     * every window read to its end; a read of {@link #SEQUENTIAL_READ_BYTES} or more starts at
     * {@code request.bytes}. The next windows are requested ahead once reads are sequential.
     */
    private int readAhead;
    private boolean sequential;
    static final int READ_AHEAD_MIN = 4 << 10;
    static final int SEQUENTIAL_READ_BYTES = 64 << 10;

    FabricReplicaAccessor(ClientFabric fabric, HdfsConf settings, Configuration conf, String fileName, LocatedBlock block, long generationStamp,
            List<DatanodeInfo> replicas,
            byte[] token, long visibleLength, boolean verifyChecksum) {
        this.fabric = fabric;
        this.settings = settings;
        this.conf = conf;
        this.fileName = fileName;
        this.block = block;
        this.generationStamp = generationStamp;
        this.replicas = new ArrayList<>(replicas);
        this.token = token;
        this.visibleLength = visibleLength;
        this.verifyChecksum = verifyChecksum;
    }

    @Override
    public int read(long pos, byte[] buf, int off, int len) throws IOException {
        return read(pos, ByteBuffer.wrap(buf, off, len));
    }

    @Override
    public synchronized int read(long pos, ByteBuffer buf) throws IOException {
        if (pos < 0) {
            throw new IllegalArgumentException("negative position " + pos);
        }
        if (pos >= visibleLength) {
            return buf.hasRemaining() ? -1 : 0;
        }
        int copied = 0;
        while (buf.hasRemaining() && pos < visibleLength) {
            if (window == null || pos < windowStart || pos >= windowStart + windowData.limit()) {
                fill(pos, buf.remaining());
            }
            int from = (int) (pos - windowStart);
            int n = (int) Math.min(Math.min(buf.remaining(), windowData.limit() - from), visibleLength - pos);
            buf.put(buf.position(), windowData, from, n);
            buf.position(buf.position() + n);
            pos += n;
            copied += n;
        }
        SlipstreamHdfsCounters.BYTES_READ.addAndGet(copied);
        return copied;
    }

    /** Makes the window cover {@code pos}: the prefetched one if it does, else a new request; then prefetches. */
    private void fill(long pos, int wanted) throws IOException {
        sequential = window != null && pos == windowStart + windowData.limit();
        boolean prefetched = !ahead.isEmpty() && ahead.peekFirst().start() == pos;
        if (!sequential) {
            // A read of 64 KiB or more (HDFS's stream reads fill its buffer) is taken as sequential
            // from the start: one request for as much as allowed. A small read after a seek starts small.
            readAhead = wanted >= SEQUENTIAL_READ_BYTES ? settings.requestBytes
                    : Math.min(Math.max(wanted, READ_AHEAD_MIN), settings.requestBytes);
        } else if (!prefetched) {
            readAhead = (int) Math.min(4L * readAhead, settings.requestBytes);
        }
        dropWindow();
        FabricBuffer response = null;
        if (prefetched) {
            Ahead pending = ahead.pollFirst();
            fabric.releaseAhead(pending.length());
            try {
                response = pending.response().join();
                replica = pending.replica();
                if (!accept(response, pos)) {
                    response = null;
                }
            } catch (CompletionException e) {
                failed(pending.replica(), e.getCause());
            } catch (BlockReadProtocol.MalformedException e) {
                response = null;
                failed(replica, e);
            } catch (ChecksumException e) {
                response = null;
                corrupt(replica);
                replica++;
                SlipstreamHdfsCounters.FAILOVERS.incrementAndGet();
            }
            if (response == null) {
                // The windows behind it were asked of the same replica: asked again, of the one fetch() settles on.
                cancelAhead();
            }
        } else {
            cancelAhead();
        }
        if (response == null) {
            fetch(pos);
        }
        long after = windowStart + windowData.limit();
        if (sequential && after > pos) {
            requestAhead(after);
        }
    }

    /**
     * Tops the windows requested ahead up to {@code read.windowsAhead}, continuing from the last one asked (or
     * from {@code after}, the current window's end), each of the current replica and {@link #readAhead} bytes
     * (which grows fourfold per window up to {@code request.bytes}).
     */
    private void requestAhead(long after) {
        long end = ahead.isEmpty() ? after : ahead.peekLast().start() + ahead.peekLast().length();
        while (ahead.size() < settings.readWindowsAhead && end < visibleLength) {
            int grown = (int) Math.min(4L * readAhead, settings.requestBytes);
            int length = (int) Math.min(grown, visibleLength - end);
            if (!fabric.reserveAhead(length)) {
                return;
            }
            readAhead = grown;
            ahead.addLast(new Ahead(end, length, replica, request(replica, end, length)));
            end += length;
        }
    }

    /** Reads the window at {@code pos} from the current replica or, failing that, the following ones. */
    private void fetch(long pos) throws IOException {
        IOException failure = null;
        boolean allCorrupt = true;
        while (replica < replicas.size()) {
            try {
                FabricBuffer response = request(replica, pos, (int) Math.min(readAhead, visibleLength - pos)).join();
                if (accept(response, pos)) {
                    return;
                }
                allCorrupt = false;
                failure = new IOException("replica on " + replicas.get(replica) + " does not cover position " + pos);
            } catch (CompletionException | BlockReadProtocol.MalformedException e) {
                // A failed request, or a response that makes no sense: this DataNode is skipped.
                Throwable cause = e instanceof CompletionException ? e.getCause() : e;
                allCorrupt = false;
                failure = new IOException("reading " + block.getBlock() + " from " + replicas.get(replica) + ": " + cause.getMessage(), cause);
                failed(replica, cause);
            } catch (ChecksumException e) {
                failure = e;
                corrupt(replica);
            }
            replica++;
            if (replica < replicas.size()) {
                SlipstreamHdfsCounters.FAILOVERS.incrementAndGet();
            }
        }
        ReplicaLocator.forget(conf, fileName);
        if (failure instanceof ChecksumException && allCorrupt) {
            throw failure;
        }
        throw failure != null ? failure : new IOException("no replica of " + block.getBlock() + " left to read over the fabric");
    }

    private CompletableFuture<FabricBuffer> request(int index, long pos, int length) {
        DatanodeInfo dataNode = replicas.get(index);
        BlockReadProtocol.ReadRequest request = new BlockReadProtocol.ReadRequest(dataNode.getXferPort(), block.getBlock().getBlockPoolId(),
                block.getBlock().getBlockId(), generationStamp, pos, length, token);
        SlipstreamHdfsCounters.REQUESTS.incrementAndGet();
        try {
            return fabric.endpoint(dataNode, settings.port).requestAsync(BlockReadProtocol.OP_READ, request.encode());
        } catch (FabricException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Checks a response and makes it the window; false (response released) when it does not cover
     * {@code pos}. Throws {@link ChecksumException} (response released) when its data is corrupt.
     */
    private boolean accept(FabricBuffer response, long pos) throws ChecksumException {
        try {
            ByteBuffer all = response.byteBuffer();
            BlockReadProtocol.ReadHeader header = BlockReadProtocol.ReadHeader.decode(all, response.length());
            ByteBuffer sums = all.slice(BlockReadProtocol.RESPONSE_HEADER_BYTES, header.checksumLength());
            ByteBuffer data = all.slice(BlockReadProtocol.RESPONSE_HEADER_BYTES + header.checksumLength(), header.dataLength());
            if (pos < header.dataOffset() || pos >= header.dataOffset() + header.dataLength()) {
                response.release();
                return false;
            }
            if (verifyChecksum) {
                DataChecksum checksum = DataChecksum.newDataChecksum(DataChecksum.Type.valueOf(header.checksumType()), header.bytesPerChecksum());
                if (header.checksumLength() != (header.dataLength() + header.bytesPerChecksum() - 1) / header.bytesPerChecksum()
                        * checksum.getChecksumSize()) {
                    throw new BlockReadProtocol.MalformedException("checksum bytes " + header.checksumLength() + " for " + header.dataLength()
                            + " data bytes");
                }
                checksum.verifyChunkedSums(data.duplicate(), sums.duplicate(), fileName + " (" + block.getBlock() + " on "
                        + replicas.get(replica) + ")", header.dataOffset());
            }
            window = response;
            windowData = data;
            windowStart = header.dataOffset();
            return true;
        } catch (ChecksumException e) {
            response.release();
            throw e;
        } catch (RuntimeException e) {
            response.release();
            throw e instanceof BlockReadProtocol.MalformedException m ? m : new BlockReadProtocol.MalformedException("response: " + e);
        }
    }

    private void corrupt(int index) {
        SlipstreamHdfsCounters.CORRUPT_REPLICAS.incrementAndGet();
        ReplicaLocator.reportCorrupt(conf, block, replicas.get(index));
    }

    private void failed(int index, Throwable cause) {
        DatanodeInfo dataNode = replicas.get(index);
        LOG.info("slipstream: reading {} from {} over the fabric failed ({}); trying the next replica", block.getBlock(), dataNode,
                cause.getMessage());
        fabric.forget(dataNode, settings.port);
    }

    private void dropWindow() {
        if (window != null) {
            window.release();
            window = null;
            windowData = null;
        }
    }

    /** Drops the windows requested ahead: each response is released when (if) it comes. */
    private void cancelAhead() {
        for (Ahead a; (a = ahead.pollFirst()) != null;) {
            fabric.releaseAhead(a.length());
            a.response().thenAccept(FabricBuffer::release);
        }
    }

    @Override
    public synchronized void close() {
        dropWindow();
        cancelAhead();
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
