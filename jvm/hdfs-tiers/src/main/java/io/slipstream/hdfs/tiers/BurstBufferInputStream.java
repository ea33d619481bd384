package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.io.InputStream;

/**
 * A replica's data for HDFS's BlockSender while the replica is in the burst buffer: chunk by chunk from the
 * cache (or the writer's chunk in memory), and from the block file once the flush has moved it there, also in
 * the middle of a read.
 */
final class BurstBufferInputStream extends InputStream {
    /** HDFS's stream over the block file from a position. */
    interface FileAt {
        InputStream open(long position) throws IOException;
    }

    private final BurstBufferPending replica;
    private final int chunkBytes;
    private final FileAt fileAt;
    private long position;
    private byte[] chunk = new byte[0];
    private int chunkOffset;
    private InputStream file;

    BurstBufferInputStream(BurstBufferPending replica, int chunkBytes, long position, FileAt fileAt) {
        this.replica = replica;
        this.chunkBytes = chunkBytes;
        this.position = position;
        this.fileAt = fileAt;
    }

    @Override
    public int read() throws IOException {
        byte[] one = new byte[1];
        return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        if (file != null) {
            return readFile(b, off, len);
        }
        if (chunkOffset == chunk.length) {
            int index = (int) (position / chunkBytes);
            byte[] next = replica.chunkForRead(index);
            if (next == null) {
                // Flushed: the block file holds every byte now.
                file = fileAt.open(position);
                return readFile(b, off, len);
            }
            int offset = (int) (position - (long) index * chunkBytes);
            if (offset >= next.length) {
                return -1; // past what was written
            }
            chunk = next;
            chunkOffset = offset;
        }
        int n = Math.min(len, chunk.length - chunkOffset);
        System.arraycopy(chunk, chunkOffset, b, off, n);
        chunkOffset += n;
        position += n;
        return n;
    }

    private int readFile(byte[] b, int off, int len) throws IOException {
        int n = file.read(b, off, len);
        if (n > 0) {
            position += n;
        }
        return n;
    }

    @Override
    public long skip(long n) throws IOException {
        if (n <= 0) {
            return 0;
        }
        if (file != null) {
            long skipped = file.skip(n);
            position += skipped;
            return skipped;
        }
        long inChunk = Math.min(n, chunk.length - chunkOffset);
        chunkOffset += (int) inChunk;
        position += inChunk;
        if (inChunk < n) {
            // Past the chunk held: the next read fetches the chunk at the new position.
            position += n - inChunk;
            chunk = new byte[0];
            chunkOffset = 0;
        }
        return n;
    }

    @Override
    public void close() throws IOException {
        if (file != null) {
            file.close();
        }
    }
}
