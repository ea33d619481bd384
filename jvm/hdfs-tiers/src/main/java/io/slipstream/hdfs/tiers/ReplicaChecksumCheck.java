package io.slipstream.hdfs.tiers;

import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.hadoop.fs.ChecksumException;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.util.DataChecksum;

/**
 * Checks a replica's bytes, chunk after chunk, against HDFS's checksum file. A burst buffer chunk need not
 * be a whole number of checksum chunks: the bytes past the last whole one wait for the next chunk.
 */
final class ReplicaChecksumCheck implements AutoCloseable {
    /** A replica the cache lost: what it was missing, or the checksum it failed. Not retried. */
    static final class LostCopyException extends IOException {
        private static final long serialVersionUID = 1L;

        LostCopyException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private final DataInputStream meta;
    private final DataChecksum checksum;
    private final int bytesPerChecksum;
    private final byte[] sums;
    /** Bytes of the checksum chunk that the previous burst buffer chunk ended in. */
    private final byte[] carry;
    private int carryLength;
    /** Replica bytes checked so far (the position in an error). */
    private long checked;

    private ReplicaChecksumCheck(DataInputStream meta, DataChecksum checksum, int chunkBytes) {
        this.meta = meta;
        this.checksum = checksum;
        this.bytesPerChecksum = checksum.getBytesPerChecksum();
        this.sums = new byte[(chunkBytes / bytesPerChecksum + 2) * checksum.getChecksumSize()];
        this.carry = new byte[bytesPerChecksum];
    }

    /** Null for a replica written without checksums (type NULL): nothing to check against. */
    static ReplicaChecksumCheck open(File metaFile, int chunkBytes) throws IOException {
        DataInputStream meta = new DataInputStream(new java.io.BufferedInputStream(new FileInputStream(metaFile)));
        try {
            DataChecksum checksum = BlockMetadataHeader.readHeader(meta).getChecksum();
            if (checksum.getChecksumSize() == 0) {
                meta.close();
                return null;
            }
            return new ReplicaChecksumCheck(meta, checksum, chunkBytes);
        } catch (IOException | RuntimeException e) {
            meta.close();
            throw e;
        }
    }

    /** The next bytes of the replica, in order. */
    void verify(byte[] data, String file) throws IOException {
        int offset = 0;
        if (carryLength > 0) {
            int taken = Math.min(data.length, bytesPerChecksum - carryLength);
            System.arraycopy(data, 0, carry, carryLength, taken);
            carryLength += taken;
            offset = taken;
            if (carryLength < bytesPerChecksum) {
                return;
            }
            check(carry, 0, bytesPerChecksum, file);
            carryLength = 0;
        }
        int whole = (data.length - offset) / bytesPerChecksum * bytesPerChecksum;
        if (whole > 0) {
            check(data, offset, whole, file);
        }
        carryLength = data.length - offset - whole;
        System.arraycopy(data, offset + whole, carry, 0, carryLength);
    }

    /** The replica's last, partial checksum chunk. */
    void finish(String file) throws IOException {
        if (carryLength > 0) {
            check(carry, 0, carryLength, file);
            carryLength = 0;
        }
    }

    private void check(byte[] data, int offset, int length, String file) throws IOException {
        int sumBytes = (length + bytesPerChecksum - 1) / bytesPerChecksum * checksum.getChecksumSize();
        meta.readFully(sums, 0, sumBytes);
        try {
            checksum.verifyChunkedSums(ByteBuffer.wrap(data, offset, length), ByteBuffer.wrap(sums, 0, sumBytes),
                    file, checked);
        } catch (ChecksumException e) {
            throw new LostCopyException("its copy in the burst buffer fails HDFS's checksum at byte " + e.getPos(), e);
        }
        checked += length;
    }

    @Override
    public void close() throws IOException {
        meta.close();
    }
}
