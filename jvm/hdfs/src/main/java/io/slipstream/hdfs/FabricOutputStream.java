package io.slipstream.hdfs;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.fs.Syncable;
import org.apache.hadoop.hdfs.protocol.ClientProtocol;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.util.DataChecksum;

/**
 * A file being written over the fabric (docs/hdfs.md, "Writes", and "The client's writes"): the
 * NameNode calls of HDFS's {@code DFSOutputStream}/{@code DataStreamer} ({@code addBlock} with the
 * previous block and excluded DataNodes, {@code abandonBlock} for a pipeline that fails to open,
 * {@code fsync} after a new block is flushed, {@code complete}, pipeline recovery), the blocks
 * written through {@link FabricBlockWriter}. The file's lease is renewed by {@link SlipstreamDistributedFileSystem}
 * while the stream is open. With {@code fallback=auto}, a first block whose DataNodes offer no
 * fabric sends the whole file through HDFS's own stream instead ({@link Fallback}). Not
 * thread-safe beyond what {@code DFSOutputStream} promises (one writer).
 */
final class FabricOutputStream extends OutputStream implements Syncable, StreamCapabilities {
    /** Pipelines that fail to open per block before the write fails (HDFS: {@code dfs.client.block.write.retries}, 3). */
    static final int OPEN_ATTEMPTS = 3;
    /** Pipeline recoveries per stream before it fails (HDFS's DataStreamer gives up after 5 per block). */
    static final int RECOVERIES_MAX = 5;
    private static final long COMPLETE_WAIT_NANOS = 30_000_000_000L;

    /** Opens HDFS's own stream for the file when the fabric cannot be used for it. */
    interface Fallback {
        org.apache.hadoop.fs.FSDataOutputStream open() throws IOException;
    }

    private final ClientProtocol nameNode;
    private final String clientName;
    private final String src;
    private final long fileId;
    private final long blockBytes;
    private final ClientFabric fabric;
    private final HdfsConf conf;
    private final DataChecksum checksum;
    private final Fallback fallback;
    private final Runnable onClose;
    private final PipelineReplacement replacement;
    private final PipelineReplacement.WrittenFile file;
    /** DataNodes this stream lost (HDFS's DataStreamer: {@code failed}): never chosen again as replacements. */
    private final List<DatanodeInfo> failedNodes = new ArrayList<>();
    /** hflush or hsync was called (HDFS's {@code isHflushed}): the DEFAULT policy then replaces a lost DataNode. */
    private boolean hflushed;
    private FabricBlockWriter block;
    private LocatedBlock located;
    private ExtendedBlock previous;
    private long blockStart;
    private long written;
    /** A block was added since the last flush: the NameNode learns of it at the next one, as HDFS's persistBlocks. */
    private boolean newBlockSinceSync;
    private OutputStream delegate;
    private int recoveries;
    /** When the current block last sent or was opened (heartbeats go after a third of the idle timeout). */
    private long lastSentNanos = System.nanoTime();
    private IOException failure;
    private boolean closed;

    FabricOutputStream(ClientProtocol nameNode, String clientName, String src, long fileId, long blockBytes, ClientFabric fabric, HdfsConf conf,
            DataChecksum checksum, Fallback fallback, PipelineReplacement replacement, short replication, Runnable onClose) {
        this.nameNode = nameNode;
        this.clientName = clientName;
        this.src = src;
        this.fileId = fileId;
        this.blockBytes = blockBytes;
        this.fabric = fabric;
        this.conf = conf;
        this.checksum = checksum;
        this.fallback = fallback;
        this.onClose = onClose;
        this.replacement = replacement;
        this.file = new PipelineReplacement.WrittenFile(src, fileId, replication);
    }

    /**
     * Called periodically by the file system: sends a heartbeat through the pipeline when nothing
     * was sent for a third of {@code write.idleTimeout.ms}, so the DataNodes keep the write open.
     */
    synchronized void keepAlive() {
        if (closed || failure != null || delegate != null || block == null
                || System.nanoTime() - lastSentNanos < conf.writeIdleTimeout.toNanos() / 3) {
            return;
        }
        try {
            blockOp(FabricBlockWriter::heartbeat);
            lastSentNanos = System.nanoTime();
        } catch (IOException e) {
            fail(e);
        }
    }

    @Override
    public void write(int b) throws IOException {
        write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) throws IOException {
        java.util.Objects.checkFromIndexSize(off, len, b.length);
        check();
        if (delegate != null) {
            delegate.write(b, off, len);
            return;
        }
        try {
            while (len > 0) {
                if (block == null || written - blockStart == blockBytes) {
                    startBlock();
                    if (delegate != null) {
                        delegate.write(b, off, len);
                        return;
                    }
                }
                int n = (int) Math.min(len, blockBytes - (written - blockStart));
                blockWrite(b, off, n);
                written += n;
                off += n;
                len -= n;
            }
        } catch (IOException e) {
            throw fail(e);
        }
    }

    @Override
    public synchronized void flush() throws IOException {
        // As DFSOutputStream: flush() does not send a partial packet; hflush() does.
        check();
        if (delegate != null) {
            delegate.flush();
        }
    }

    @Override
    public void hflush() throws IOException {
        sync(false);
    }

    @Override
    public void hsync() throws IOException {
        sync(true);
    }

    private synchronized void sync(boolean toDisk) throws IOException {
        check();
        hflushed = true;
        if (delegate instanceof Syncable s) {
            if (toDisk) {
                s.hsync();
            } else {
                s.hflush();
            }
            return;
        }
        if (block == null) {
            return;
        }
        try {
            if (toDisk) {
                blockOp(FabricBlockWriter::hsync);
            } else {
                blockOp(FabricBlockWriter::hflush);
            }
            if (newBlockSinceSync) {
                nameNode.fsync(src, fileId, clientName, block.bytesAcked());
                newBlockSinceSync = false;
            }
        } catch (IOException e) {
            throw fail(e);
        }
    }

    @Override
    public boolean hasCapability(String capability) {
        String c = capability.toLowerCase(Locale.ROOT);
        return c.equals(StreamCapabilities.HFLUSH) || c.equals(StreamCapabilities.HSYNC);
    }

    /** Finishes the current block and adds the next; on a pipeline that fails to open, abandons it and excludes the failed DataNode. */
    private void startBlock() throws IOException {
        finishBlock();
        List<DatanodeInfo> excluded = new ArrayList<>();
        for (int attempt = 1;; attempt++) {
            LocatedBlock next = addBlock(excluded.toArray(new DatanodeInfo[0]));
            try {
                block = new FabricBlockWriter(fabric.node, conf, next, checksum);
                located = next;
                blockStart = written;
                newBlockSinceSync = true;
                return;
            } catch (IOException e) {
                nameNode.abandonBlock(next.getBlock(), fileId, src, clientName);
                if (previous == null && written == 0 && conf.fallback == HdfsConf.Fallback.AUTO && noneOffersFabric(next)) {
                    // The first block's DataNodes have no fabric: HDFS's own stream writes the whole file.
                    SlipstreamHdfsCounters.WRITES_DECLINED.incrementAndGet();
                    delegate = fallback.open();
                    return;
                }
                String failed = FabricBlockWriter.failedNode(e);
                DatanodeInfo bad = Arrays.stream(next.getLocations()).filter(d -> d.getXferAddr().equals(failed)).findFirst().orElse(null);
                if (bad == null || attempt >= OPEN_ATTEMPTS) {
                    throw e;
                }
                excluded.add(bad);
            }
        }
    }

    /**
     * {@code addBlock}, retried as {@code DataStreamer.locateFollowingBlock} does while the NameNode
     * answers {@code NotReplicatedYetException} (the previous block's replicas not reported yet).
     */
    private LocatedBlock addBlock(DatanodeInfo[] excluded) throws IOException {
        long deadline = System.nanoTime() + COMPLETE_WAIT_NANOS;
        long sleepMs = 50;
        while (true) {
            try {
                return nameNode.addBlock(src, clientName, previous, excluded, fileId, null, null);
            } catch (org.apache.hadoop.ipc.RemoteException e) {
                if (!e.getClassName().equals(org.apache.hadoop.hdfs.server.namenode.NotReplicatedYetException.class.getName())
                        || System.nanoTime() - deadline > 0) {
                    throw e.unwrapRemoteException();
                }
            }
            SlipstreamHdfsCounters.ADD_BLOCK_RETRIES.incrementAndGet();
            sleep(sleepMs);
            sleepMs = Math.min(sleepMs * 2, 800);
        }
    }

    private void sleep(long ms) throws InterruptedIOException {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted writing " + src);
        }
    }

    private boolean noneOffersFabric(LocatedBlock next) {
        for (DatanodeInfo d : next.getLocations()) {
            if (fabric.offersFabric(d, conf.port)) {
                return false;
            }
        }
        return true;
    }

    private void finishBlock() throws IOException {
        if (block != null) {
            long[] finished = new long[1];
            blockOp(w -> finished[0] = w.finish());
            long length = finished[0];
            block.close();
            block = null;
            previous = new ExtendedBlock(located.getBlock());
            previous.setNumBytes(length);
        }
    }

    private interface BlockOp {
        void run(FabricBlockWriter writer) throws IOException;
    }

    /** Runs {@code op} on the current block, again on the recovered pipeline after a failure. */
    private void blockOp(BlockOp op) throws IOException {
        while (true) {
            try {
                op.run(block);
                lastSentNanos = System.nanoTime();
                return;
            } catch (IOException e) {
                recover(e);
            }
        }
    }

    /** Writes into the current block in pieces the writer takes whole, so after a failure every byte is in what is sent again. */
    private void blockWrite(byte[] b, int off, int len) throws IOException {
        while (len > 0) {
            int n = Math.min(len, block.room());
            try {
                block.write(b, off, n);
            } catch (IOException e) {
                recover(e);
            }
            lastSentNanos = System.nanoTime();
            off += n;
            len -= n;
        }
    }

    /**
     * Pipeline recovery as HDFS's {@code DataStreamer} does it for a DataNode failed mid-block
     * (docs/hdfs.md, "Pipeline recovery"): the DataNode the failure names is dropped; when the client's
     * replace-datanode-on-failure policy asks, a new DataNode gets a copy of the replica from a survivor
     * ({@link PipelineReplacement}); the NameNode gives a new generation stamp
     * ({@code updateBlockForPipeline}); the DataNodes take their replicas over ({@code recoverRbw}, OPEN in
     * the recovery stage); the NameNode learns the new pipeline ({@code updatePipeline}); what was not
     * acknowledged is sent again.
     */
    private void recover(IOException failure) throws IOException {
        long acked = block.bytesAcked();
        long sent = block.bytesSent();
        long resendOffset = block.unacknowledgedOffset();
        byte[] again = block.unacknowledged();
        IOException current = failure;
        while (true) {
            String failed = FabricBlockWriter.failedNode(current);
            DatanodeInfo[] nodes = located.getLocations();
            int bad = -1;
            for (int i = 0; i < nodes.length; i++) {
                if (nodes[i].getXferAddr().equals(failed)) {
                    bad = i;
                }
            }
            if (bad < 0 || nodes.length == 1 || ++recoveries > RECOVERIES_MAX) {
                throw current;
            }
            block.close();
            failedNodes.add(nodes[bad]);
            DatanodeInfo[] survivors = new DatanodeInfo[nodes.length - 1];
            String[] ids = new String[survivors.length];
            org.apache.hadoop.fs.StorageType[] types = new org.apache.hadoop.fs.StorageType[survivors.length];
            for (int i = 0, j = 0; i < nodes.length; i++) {
                if (i != bad) {
                    survivors[j] = nodes[i];
                    ids[j] = pick(located.getStorageIDs(), i);
                    types[j] = located.getStorageTypes() != null && i < located.getStorageTypes().length
                            ? located.getStorageTypes()[i] : org.apache.hadoop.fs.StorageType.DEFAULT;
                    j++;
                }
            }
            ExtendedBlock old = located.getBlock();
            // Before the new generation stamp, as HDFS: the survivors' replicas still have the old one.
            PipelineReplacement.Pipeline next = replacement.complete(file,
                    new ExtendedBlock(old.getBlockPoolId(), old.getBlockId(), acked, old.getGenerationStamp()),
                    new PipelineReplacement.Pipeline(survivors, ids, types), failedNodes, hflushed);
            LocatedBlock updated = nameNode.updateBlockForPipeline(old, clientName);
            long newGenerationStamp = updated.getBlock().getGenerationStamp();
            LocatedBlock pipeline = new LocatedBlock(new ExtendedBlock(old), next.nodes(), next.storageIds(), next.storageTypes());
            pipeline.setBlockToken(updated.getBlockToken());
            try {
                block = new FabricBlockWriter(fabric.node, conf, pipeline, checksum,
                        new FabricBlockWriter.Recovery(newGenerationStamp, acked, sent, resendOffset));
            } catch (IOException e) {
                // A DataNode of the new pipeline failed as it opened (a replacement that never got its copy: a
                // DataNode's transfer to a dead one still answers success; or another survivor lost). As in
                // HDFS's recovery loop, that one is dropped in turn, on the NameNode's old generation stamp.
                located = pipeline;
                current = e;
                continue;
            }
            ExtendedBlock recovered = new ExtendedBlock(old.getBlockPoolId(), old.getBlockId(), acked, newGenerationStamp);
            nameNode.updatePipeline(clientName, old, recovered, next.nodes(), next.storageIds());
            located = new LocatedBlock(recovered, next.nodes(), next.storageIds(), next.storageTypes());
            located.setBlockToken(updated.getBlockToken());
            SlipstreamHdfsCounters.PIPELINE_RECOVERIES.incrementAndGet();
            break;
        }
        blockWrite(again, 0, again.length);
    }

    private static String pick(String[] ids, int i) {
        return ids != null && i < ids.length ? ids[i] : null;
    }

    /** The DataNodes of the block being written (for tests), or an empty array. */
    DatanodeInfo[] pipeline() {
        return located == null || block == null ? new DatanodeInfo[0] : located.getLocations();
    }

    /** True when this file went to HDFS's own stream ({@code fallback=auto}, no fabric on its DataNodes). */
    boolean fellBack() {
        return delegate != null;
    }

    /** Finishes the last block and completes the file, retrying while the NameNode waits for the replicas' reports. */
    @Override
    public synchronized void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (failure != null) {
                // A new exception: try-with-resources adds it to the write's own, which cannot suppress itself.
                throw new IOException(src + " was not completed: " + failure.getMessage(), failure);
            }
            if (delegate != null) {
                delegate.close();
                return;
            }
            try {
                finishBlock();
                complete();
            } catch (IOException e) {
                throw fail(e);
            }
        } finally {
            if (block != null) {
                block.close();
            }
            onClose.run();
        }
    }

    private void complete() throws IOException {
        long deadline = System.nanoTime() + COMPLETE_WAIT_NANOS;
        long sleepMs = 50;
        while (!nameNode.complete(src, clientName, previous, fileId)) {
            SlipstreamHdfsCounters.COMPLETE_RETRIES.incrementAndGet();
            if (System.nanoTime() - deadline > 0) {
                throw new IOException("the NameNode did not complete " + src + " within " + COMPLETE_WAIT_NANOS / 1_000_000_000L + " s");
            }
            sleep(sleepMs);
            sleepMs = Math.min(sleepMs * 2, 800);
        }
    }

    private IOException fail(IOException e) {
        if (failure == null) {
            failure = e;
        }
        return failure;
    }

    private void check() throws IOException {
        if (closed) {
            throw new IOException(src + " is closed");
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public String toString() {
        return "FabricOutputStream[" + src + ", " + written + " bytes]";
    }
}
