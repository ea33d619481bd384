package io.slipstream.hdfs.tiers;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.hdfs.server.datanode.ChunkChecksum;
import org.apache.hadoop.hdfs.server.datanode.FileIoProvider;
import org.apache.hadoop.hdfs.server.datanode.ReplicaHandler;
import org.apache.hadoop.hdfs.server.datanode.ReplicaInPipeline;
import org.apache.hadoop.hdfs.server.datanode.ReplicaInfo;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.ReplicaOutputStreams;
import org.apache.hadoop.util.DataChecksum;

/**
 * The replica HHH-L-BB hands HDFS's BlockReceiver for a parallel file system replica taken into the burst
 * buffer: HDFS's own replica in every respect (state, lengths, writer, checksum file) except where its data
 * bytes go: into {@link BurstBufferPending}'s chunks in the cache instead of the block file, which stays empty
 * until the flush. The checksum (meta) file is written by HDFS as always.
 */
final class BurstBufferedReplica implements ReplicaInPipeline {
    private final ReplicaInPipeline replica;
    private final BurstBufferPending pending;

    BurstBufferedReplica(ReplicaInPipeline replica, BurstBufferPending pending) {
        this.replica = replica;
        this.pending = pending;
    }

    /** The handler BlockReceiver gets: this replica, and HDFS's handler closed with it (its volume reference). */
    static ReplicaHandler handler(ReplicaHandler hdfs, BurstBufferPending pending) {
        return new ReplicaHandler(new BurstBufferedReplica(hdfs.getReplica(), pending), null) {
            @Override
            public void close() throws IOException {
                hdfs.close();
            }
        };
    }

    @Override
    public ReplicaOutputStreams createStreams(boolean isCreate, DataChecksum requestedChecksum) throws IOException {
        ReplicaOutputStreams files = replica.createStreams(isCreate, requestedChecksum);
        // The block file was created (empty) and stays so unless the cache fails before its first chunk is
        // stored; the checksum file is HDFS's, header written.
        return streams(pending, files.getDataOut(), files.getChecksumOut(), files.getChecksum(), replica.getVolume(),
                replica.getReplicaInfo().getFileIoProvider());
    }

    /**
     * HDFS's streams with the data stream into the burst buffer. BlockReceiver flushes the data stream after
     * every packet (that must not wait for the chunks in flight) and calls {@code syncDataOut} for hsync and
     * {@code dfs.datanode.synconclose}, which HDFS's own class does only for a file stream: here it waits until
     * the chunks handed over are in the cache (or, the replica having gone to its block file, syncs that).
     */
    static ReplicaOutputStreams streams(BurstBufferPending pending, OutputStream blockFile, OutputStream checksumFile,
            DataChecksum checksum, FsVolumeSpi volume, FileIoProvider fileIo) {
        DataOut data = new DataOut(pending, blockFile, volume, fileIo);
        return new ReplicaOutputStreams(data, checksumFile, checksum, volume, fileIo) {
            @Override
            public void syncDataOut() throws IOException {
                data.sync();
            }
        };
    }

    /**
     * The data bytes of a replica, into the burst buffer; close seals it (its last, partial chunk stored). If
     * the cache fails before any chunk of the replica is stored, every byte is still in memory: they go to
     * the block file, and so does the rest of the replica (the write does not fail).
     */
    private static final class DataOut extends OutputStream {
        private final BurstBufferPending pending;
        private final OutputStream file;
        private final FsVolumeSpi volume;
        private final FileIoProvider fileIo;
        private boolean toFile;

        DataOut(BurstBufferPending pending, OutputStream file, FsVolumeSpi volume, FileIoProvider fileIo) {
            this.pending = pending;
            this.file = file;
            this.volume = volume;
            this.fileIo = fileIo;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            if (toFile) {
                file.write(b, off, len);
                return;
            }
            byte[] held = pending.write(b, off, len);
            if (held != null) {
                toFile = true;
                file.write(held);
            }
        }

        @Override
        public void flush() throws IOException {
            if (toFile) {
                file.flush();
            }
        }

        /** hsync: the chunks handed over are in the cache when it returns, or the block file is synced. */
        void sync() throws IOException {
            if (!toFile) {
                byte[] held = pending.awaitStored();
                if (held != null) {
                    toFile = true;
                    file.write(held);
                }
            }
            if (toFile && file instanceof FileOutputStream blockFile) {
                file.flush();
                fileIo.sync(volume, blockFile);
            }
        }

        @Override
        public void close() throws IOException {
            try {
                if (!toFile) {
                    byte[] held = pending.seal();
                    if (held != null) {
                        toFile = true;
                        file.write(held);
                    }
                }
            } finally {
                file.close();
            }
        }
    }

    // Everything else is HDFS's replica.

    @Override
    public void setNumBytes(long bytesReceived) {
        replica.setNumBytes(bytesReceived);
    }

    @Override
    public long getBytesAcked() {
        return replica.getBytesAcked();
    }

    @Override
    public void setBytesAcked(long bytesAcked) {
        replica.setBytesAcked(bytesAcked);
    }

    @Override
    public void releaseAllBytesReserved() {
        replica.releaseAllBytesReserved();
    }

    @Override
    public void releaseReplicaInfoBytesReserved() {
        replica.releaseReplicaInfoBytesReserved();
    }

    @Override
    public void setLastChecksumAndDataLen(long dataLength, byte[] lastChecksum) {
        replica.setLastChecksumAndDataLen(dataLength, lastChecksum);
    }

    @Override
    public ChunkChecksum getLastChecksumAndDataLen() {
        return replica.getLastChecksumAndDataLen();
    }

    @Override
    public OutputStream createRestartMetaStream() throws IOException {
        return replica.createRestartMetaStream();
    }

    @Override
    public ReplicaInfo getReplicaInfo() {
        return replica.getReplicaInfo();
    }

    @Override
    public void setWriter(Thread writer) {
        replica.setWriter(writer);
    }

    @Override
    public void interruptThread() {
        replica.interruptThread();
    }

    @Override
    public boolean attemptToSetWriter(Thread prevWriter, Thread newWriter) {
        return replica.attemptToSetWriter(prevWriter, newWriter);
    }

    @Override
    public void stopWriter(long xceiverStopTimeout) throws IOException {
        replica.stopWriter(xceiverStopTimeout);
    }

    @Override
    public void waitForMinLength(long minLength, long time, TimeUnit unit) throws IOException {
        replica.waitForMinLength(minLength, time, unit);
    }

    @Override
    public long getBlockId() {
        return replica.getBlockId();
    }

    @Override
    public long getGenerationStamp() {
        return replica.getGenerationStamp();
    }

    @Override
    public ReplicaState getState() {
        return replica.getState();
    }

    @Override
    public long getNumBytes() {
        return replica.getNumBytes();
    }

    @Override
    public long getBytesOnDisk() {
        return replica.getBytesOnDisk();
    }

    @Override
    public long getVisibleLength() {
        return replica.getVisibleLength();
    }

    @Override
    public String getStorageUuid() {
        return replica.getStorageUuid();
    }

    @Override
    public boolean isOnTransientStorage() {
        return replica.isOnTransientStorage();
    }

    @Override
    public FsVolumeSpi getVolume() {
        return replica.getVolume();
    }

    @Override
    public String toString() {
        return replica + " (data in the burst buffer)";
    }
}
