package io.slipstream.hdfs.tiers;

import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a DataNode that was killed (not stopped) left in the burst buffer, dealt with at its next start, before it
 * registers. A parallel file system replica whose block file is shorter than its checksum file says had its data in
 * the cache when the DataNode died (or died while flushing it):
 * <ul>
 * <li>finalized: the chunks are read back, checked against the checksum file, written into the block file, synced
 * and deleted from the cache; the replica then has its whole length in the first block report and nothing needs
 * re-replicating. A replica whose copy is gone or fails the checksums keeps its block file's length, so that the
 * NameNode's size check marks it corrupt and re-replicates the block (as without this class); its chunks left in
 * the cache are deleted, since nothing will read them.
 * <li>not finalized (being written when the DataNode died; HDFS loads it from the rbw directory as a replica
 * waiting to be recovered, with the length of its block file): its chunks are deleted. HDFS's recoveries decide
 * that replica's fate from its block file, as for any replica of a killed DataNode, and nothing reads the chunks
 * (docs/hdfs-tiers.md, "Durability", says why they are not copied back).
 * </ul>
 * If the cache cannot be reached, the remaining replicas are left as HDFS loaded them and their chunks are deleted
 * when HDFS deletes the replica ({@link Leftover}).
 *
 * <p>Finding the candidates costs two {@code stat}s per parallel file system replica (block and checksum file
 * lengths against the DataNode's configured checksum); only a mismatch opens the checksum file's header.
 */
public final class BurstBufferRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(BurstBufferRecovery.class);

    /**
     * A parallel file system replica as HDFS loaded it at the DataNode's start, finalized or not; {@code setLength}
     * sets a finalized one's length in HDFS's replica map once its block file is what it is.
     */
    public record OnDisk(String bpid, long blockId, long generationStamp, boolean finalized, File blockFile,
            File metaFile, LongConsumer setLength) {
    }

    /**
     * A replica whose chunks may still be in the cache after the restart (the cache could not be reached, or a
     * delete failed): keys {@code keyBase} 0 to {@code below - 1}, then on while keys are found until {@code tail}
     * misses in a row (see {@link #deleteChunks}). Its chunks are deleted when HDFS deletes the replica.
     */
    record Leftover(String bpid, long blockId, String keyBase, int below, int tail) {
    }

    /**
     * Finalized replicas recovered (and their bytes), lost, and left (the cache unreachable); replicas being written
     * whose chunks were deleted; chunks deleted unused (theirs and lost replicas'); replicas whose chunks may remain.
     */
    record Outcome(int recovered, long bytesRecovered, int lost, int left, int discarded, long chunksDiscarded,
            List<Leftover> leftovers) {
    }

    private final BurstBufferClient client;
    private final int chunkBytes;
    /** The DataNode's checksum, to tell a consistent replica from its two file lengths alone. */
    private final int bytesPerChecksum;
    private final int checksumBytes;
    private final String datanodeUuid;
    /**
     * Past the chunks a replica's checksum file covers, how many keys in a row must be missing before no later one
     * can be there: {@code bb.maxInFlight.chunks}, the most of a replica's chunks stored out of order.
     */
    private final int maxInFlight;

    BurstBufferRecovery(BurstBufferClient client, int chunkBytes, int maxInFlight, DataChecksum configured,
            String datanodeUuid) {
        this.client = client;
        this.chunkBytes = chunkBytes;
        this.maxInFlight = maxInFlight;
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
        int discarded = 0;
        long bytes = 0;
        long chunksDiscarded = 0;
        List<Leftover> leftovers = new ArrayList<>();
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
            String keyBase = keyBase(datanodeUuid, replica.bpid(), replica.blockId(), replica.generationStamp());
            if (!replica.finalized()) {
                // A block file holding what its checksum file covers was written straight to the parallel file
                // system (or flushed): nothing of it is in the cache. An empty one with no checksums yet may have
                // chunks all the same: a packet's data reaches its chunk before its checksums reach their file.
                if (range == null && fileBytes > 0) {
                    continue;
                }
                // Past the chunks its checksums cover: those the packet being received completed, and (a node
                // crash, not a process kill) any whose checksums the node lost; stored in order but for at most
                // bb.maxInFlight.chunks in flight, so that many missing in a row end them.
                Leftover chunks = new Leftover(replica.bpid(), replica.blockId(), keyBase,
                        range == null ? 0 : chunksBelow(range[1]), maxInFlight);
                if (cacheUnreachable) {
                    left++;
                    leftovers.add(chunks);
                    continue;
                }
                try {
                    long deleted = deleteChunks(client, chunks);
                    if (deleted > 0) {
                        discarded++;
                        chunksDiscarded += deleted;
                        LOG.info("Triple-H hhh-l-bb: blk_{}_{} was being written when the DataNode's last run ended; "
                                + "HDFS recovers it from its block file ({} bytes), and its {} chunks were deleted from "
                                + "the burst buffer", replica.blockId(), replica.generationStamp(), fileBytes, deleted);
                    }
                } catch (IOException e) {
                    left++;
                    leftovers.add(chunks);
                    cacheUnreachable = true;
                    warnUnreachable(e);
                }
                continue;
            }
            if (range == null) {
                continue;
            }
            // A finalized replica's chunks were all stored before HDFS finalized it (its writer's close waits for
            // them): none past those its checksum file covers.
            Leftover chunks = new Leftover(replica.bpid(), replica.blockId(), keyBase, chunksBelow(range[1]), 0);
            if (cacheUnreachable) {
                replica.setLength().accept(fileBytes);
                left++;
                leftovers.add(chunks);
                continue;
            }
            long startNs = System.nanoTime();
            Copied copied;
            try {
                copied = copyBack(replica, keyBase, range[0], range[1]);
            } catch (ReplicaChecksumCheck.LostCopyException e) {
                restore(replica, fileBytes);
                replica.setLength().accept(fileBytes);
                lost++;
                LOG.warn("Triple-H hhh-l-bb: blk_{}_{} was left in the burst buffer by the DataNode's last run and "
                        + "cannot be recovered ({}); its block file keeps {} bytes, so the NameNode marks the replica "
                        + "corrupt and re-replicates the block; what the cache holds of it is deleted",
                        replica.blockId(), replica.generationStamp(), e.getMessage(), fileBytes);
                copied = null;
            } catch (IOException e) {
                restore(replica, fileBytes);
                replica.setLength().accept(fileBytes);
                left++;
                leftovers.add(chunks);
                cacheUnreachable = true;
                warnUnreachable(e);
                continue;
            }
            if (copied != null) {
                replica.setLength().accept(copied.length());
                recovered++;
                bytes += copied.length();
                LOG.info("Triple-H hhh-l-bb: blk_{}_{} was left in the burst buffer by the DataNode's last run; "
                        + "recovered {} bytes into its block file in {} ms", replica.blockId(),
                        replica.generationStamp(), copied.length(),
                        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs));
                // Exactly the chunks read: the replica's every chunk.
                chunks = new Leftover(replica.bpid(), replica.blockId(), keyBase, copied.chunks(), 0);
            }
            try {
                long deleted = deleteChunks(client, chunks);
                if (copied == null) {
                    chunksDiscarded += deleted;
                }
            } catch (IOException e) {
                leftovers.add(chunks);
                cacheUnreachable = true;
                warnUnreachable(e);
            }
        }
        return new Outcome(recovered, bytes, lost, left, discarded, chunksDiscarded, leftovers);
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

    /** What {@link #copyBack} wrote: the replica's length, and the chunks it took that from. */
    private record Copied(long length, int chunks) {
    }

    /**
     * Reads the replica's chunks in order, checking them against its checksum file, into its block file from
     * the start. Lost when a chunk is missing before {@code lowest} bytes, the bytes pass {@code highest}, or a
     * checksum fails.
     */
    private Copied copyBack(OnDisk replica, String keyBase, long lowest, long highest) throws IOException {
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
        return new Copied(written, chunks);
    }

    /** How many chunks {@code bytes} of a replica take. */
    private int chunksBelow(long bytes) {
        return (int) ((bytes + chunkBytes - 1) / chunkBytes);
    }

    /**
     * Deletes a replica's chunks from the cache: keys 0 to {@code below - 1} whether or not each is there (stores
     * end out of order, and the cache may have evicted some), then the next ones while they are found, until
     * {@code tail} are missing in a row. The number that were there; an IOException when the cache fails.
     */
    static long deleteChunks(BurstBufferClient client, Leftover chunks) throws IOException {
        long found = 0;
        int missing = 0;
        // Ends: past `below`, each key is either found (the cache holds finitely many) or counts towards `tail`.
        for (int chunk = 0; chunk < chunks.below() || missing < chunks.tail(); chunk++) {
            if (client.delete(chunks.keyBase() + chunk)) {
                found++;
                missing = 0;
            } else if (chunk >= chunks.below()) {
                missing++;
            }
        }
        return found;
    }

    private static void warnUnreachable(IOException e) {
        LOG.warn("Triple-H hhh-l-bb: the burst buffer cannot be reached ({}): replicas the DataNode's last run left in "
                + "it keep their short block files (HDFS re-replicates them), and their chunks are deleted when HDFS "
                + "deletes the replicas", e.getMessage());
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
