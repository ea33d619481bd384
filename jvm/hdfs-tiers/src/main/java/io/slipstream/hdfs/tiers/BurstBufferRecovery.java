package io.slipstream.hdfs.tiers;

import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a DataNode that was killed (not stopped) left in the burst buffer, taken back at its next start: a
 * finalized parallel file system replica whose block file is shorter than its checksum file says had its data
 * in the cache when the DataNode died (or died while flushing it). Before the DataNode registers, the chunks are
 * read back, checked against the checksum file, written into the block file, synced and deleted from the cache;
 * the replica then has its whole length in the first block report and nothing needs re-replicating. A replica
 * whose copy is gone or fails the checksums keeps its block file's length, so that the NameNode's size check
 * marks it corrupt and re-replicates the block (as without this class).
 *
 * <p>Finding the candidates costs two {@code stat}s per parallel file system replica (block and checksum file
 * lengths against the DataNode's configured checksum); only a mismatch opens the checksum file's header.
 */
public final class BurstBufferRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(BurstBufferRecovery.class);

    /**
     * A finalized parallel file system replica as HDFS loaded it at the DataNode's start; {@code setLength} sets its
     * length in HDFS's replica map once its block file is what it is.
     */
    public record OnDisk(String bpid, long blockId, long generationStamp, File blockFile, File metaFile,
            LongConsumer setLength) {
    }

    /** How many replicas were recovered, lost, and left (the cache unreachable). */
    record Outcome(int recovered, long bytesRecovered, int lost, int left) {
    }

    private final BurstBufferClient client;
    private final int chunkBytes;
    /** The DataNode's checksum, to tell a consistent replica from its two file lengths alone. */
    private final int bytesPerChecksum;
    private final int checksumBytes;
    private final String datanodeUuid;

    BurstBufferRecovery(BurstBufferClient client, int chunkBytes, DataChecksum configured, String datanodeUuid) {
        this.client = client;
        this.chunkBytes = chunkBytes;
        this.bytesPerChecksum = configured.getBytesPerChecksum();
        this.checksumBytes = configured.getChecksumSize();
        this.datanodeUuid = datanodeUuid;
    }

    /** The cache keys of a replica's chunks: this prefix and the chunk's number (BurstBuffer's write path too). */
    static String keyBase(String datanodeUuid, String bpid, long blockId, long generationStamp) {
        return "ssbb:" + datanodeUuid + ":" + bpid + ":" + blockId + "_" + generationStamp + ":";
    }

    Outcome recover(List<OnDisk> replicas) {
        int recovered = 0;
        int lost = 0;
        int left = 0;
        long bytes = 0;
        boolean cacheUnreachable = false;
        for (OnDisk replica : replicas) {
            long fileBytes = replica.blockFile().length();
            long[] range;
            try {
                range = lengthRangeIfShort(replica, fileBytes);
            } catch (IOException e) {
                LOG.warn("Triple-H hhh-l-bb: cannot read the checksum file of blk_{}: {}; left to HDFS",
                        replica.blockId(), e.getMessage());
                continue;
            }
            if (range == null) {
                continue;
            }
            if (cacheUnreachable) {
                replica.setLength().accept(fileBytes);
                left++;
                continue;
            }
            long startNs = System.nanoTime();
            try {
                long length = copyBack(replica, range[0], range[1]);
                replica.setLength().accept(length);
                recovered++;
                bytes += length;
                LOG.info("Triple-H hhh-l-bb: blk_{}_{} was left in the burst buffer by the DataNode's last run; "
                        + "recovered {} bytes into its block file in {} ms", replica.blockId(),
                        replica.generationStamp(), length, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs));
            } catch (ReplicaChecksumCheck.LostCopyException e) {
                restore(replica, fileBytes);
                replica.setLength().accept(fileBytes);
                lost++;
                LOG.warn("Triple-H hhh-l-bb: blk_{}_{} was left in the burst buffer by the DataNode's last run and "
                        + "cannot be recovered ({}); its block file keeps {} bytes, so the NameNode marks the replica "
                        + "corrupt and re-replicates the block", replica.blockId(), replica.generationStamp(),
                        e.getMessage(), fileBytes);
            } catch (IOException e) {
                restore(replica, fileBytes);
                replica.setLength().accept(fileBytes);
                left++;
                cacheUnreachable = true;
                LOG.warn("Triple-H hhh-l-bb: the burst buffer cannot be read ({}): replicas the DataNode's last run "
                        + "left in it keep their short block files, and HDFS re-replicates them", e.getMessage());
            }
        }
        return new Outcome(recovered, bytes, lost, left);
    }

    /**
     * The range of lengths the replica's checksum file covers, when its block file is shorter than that; null
     * when the two agree (almost every replica: decided from the lengths when the replica has the DataNode's
     * checksum) or the replica has no checksums.
     */
    private long[] lengthRangeIfShort(OnDisk replica, long fileBytes) throws IOException {
        long metaBytes = replica.metaFile().length();
        int header = BlockMetadataHeader.getHeaderSize();
        if (metaBytes == header + checksumBytes * ((fileBytes + bytesPerChecksum - 1) / bytesPerChecksum)) {
            return null;
        }
        DataChecksum checksum;
        try (DataInputStream in = new DataInputStream(new FileInputStream(replica.metaFile()))) {
            checksum = BlockMetadataHeader.readHeader(in).getChecksum();
        }
        if (checksum.getChecksumSize() == 0) {
            return null;
        }
        long sums = (metaBytes - header) / checksum.getChecksumSize();
        long lowest = (sums - 1) * checksum.getBytesPerChecksum() + 1;
        if (sums == 0 || fileBytes >= lowest) {
            return null;
        }
        return new long[] {lowest, sums * checksum.getBytesPerChecksum()};
    }

    /**
     * Reads the replica's chunks in order, checking them against its checksum file, into its block file from
     * the start; returns the length. Lost when a chunk is missing before {@code lowest} bytes, the bytes pass
     * {@code highest}, or a checksum fails. The chunks are deleted from the cache afterwards.
     */
    private long copyBack(OnDisk replica, long lowest, long highest) throws IOException {
        String keyBase = keyBase(datanodeUuid, replica.bpid(), replica.blockId(), replica.generationStamp());
        long written = 0;
        int chunks = 0;
        // WRITE without CREATE, as the flush: nothing here brings back a block file that is not there.
        try (FileChannel out = FileChannel.open(replica.blockFile().toPath(), StandardOpenOption.WRITE);
                ReplicaChecksumCheck check = ReplicaChecksumCheck.open(replica.metaFile(), chunkBytes)) {
            while (written < highest) {
                byte[] bytes = client.get(keyBase + chunks);
                if (bytes == null) {
                    break;
                }
                if (bytes.length > chunkBytes || written + bytes.length > highest) {
                    throw new ReplicaChecksumCheck.LostCopyException("chunk " + chunks + " has " + bytes.length
                            + " bytes, more than the chunk size or the checksum file covers", null);
                }
                check.verify(bytes, replica.blockFile().getName());
                written += BurstBuffer.writeFully(out, ByteBuffer.wrap(bytes), written);
                chunks++;
                if (bytes.length < chunkBytes) {
                    break;
                }
            }
            if (written < lowest) {
                throw new ReplicaChecksumCheck.LostCopyException("the burst buffer holds " + written + " bytes of "
                        + "it in " + chunks + " chunks; its checksum file covers " + lowest + " to " + highest, null);
            }
            check.finish(replica.blockFile().getName());
            out.truncate(written);
            out.force(true);
        }
        for (int chunk = 0; chunk < chunks; chunk++) {
            try {
                client.delete(keyBase + chunk);
            } catch (IOException e) {
                LOG.debug("Triple-H hhh-l-bb: deleting {} from the burst buffer failed", keyBase + chunk, e);
                break; // only space, which the cache's eviction takes back
            }
        }
        return written;
    }

    /** A recovery that failed half way leaves the block file as HDFS found it. */
    private static void restore(OnDisk replica, long fileBytes) {
        try (FileChannel out = FileChannel.open(replica.blockFile().toPath(), StandardOpenOption.WRITE)) {
            if (out.size() > fileBytes) {
                out.truncate(fileBytes);
            }
        } catch (IOException e) {
            LOG.warn("Triple-H hhh-l-bb: cannot truncate {} back to {} bytes", replica.blockFile(), fileBytes, e);
        }
    }
}
