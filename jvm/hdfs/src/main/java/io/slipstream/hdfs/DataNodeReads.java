package io.slipstream.hdfs;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricNode;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.Replica;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.io.IOUtils;
import org.apache.hadoop.security.token.SecretManager.InvalidToken;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.util.DataChecksum;

/**
 * Serves one DataNode's block reads: checks the block token as the DataNode's own reader does
 * ({@code DataXceiver.checkAccess}: only with {@code dfs.block.access.token.enable}), finds the
 * finalized replica, and answers the requested range widened to checksum-chunk boundaries with the
 * chunks' checksums as stored in the replica's meta file, so the client verifies end to end what
 * is on disk. Reads only: {@link DataNodeWrites} writes.
 */
final class DataNodeReads {
    /** Meta file header: a 2-byte version, then DataChecksum's 5-byte header (type, bytes per checksum). */
    private static final int META_HEADER_BYTES = 2 + DataChecksum.getChecksumHeaderSize();

    private final DataNode dataNode;
    private final boolean blockTokens;
    /** Response bytes this DataNode served (tests find the DataNode a read uses by it). */
    final java.util.concurrent.atomic.AtomicLong bytesServed = new java.util.concurrent.atomic.AtomicLong();

    DataNodeReads(DataNode dataNode) {
        this.dataNode = dataNode;
        this.blockTokens = dataNode.getConf().getBoolean(DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY,
                DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_DEFAULT);
    }

    /** Refused access: a missing, malformed, expired or foreign token. */
    static final class AccessDeniedException extends IOException {
        private static final long serialVersionUID = 1L;

        AccessDeniedException(String message) {
            super(message);
        }
    }

    /** True while the DataNode runs (a stopped DataNode's requests are refused, so clients fail over). */
    boolean isUp() {
        return dataNode.isDatanodeUp();
    }

    /**
     * The response to {@code request}, in registered memory of {@code node} (the caller sends it).
     * Throws for anything that cannot be served; the message goes back to the client.
     */
    FabricBuffer read(BlockReadProtocol.ReadRequest request, FabricNode node) throws IOException {
        ExtendedBlock block = new ExtendedBlock(request.poolId(), request.blockId(), 0, request.generationStamp());
        if (blockTokens) {
            checkToken(dataNode, request.token(), block, BlockTokenIdentifier.AccessMode.READ);
        }
        FsDatasetSpi<?> dataset = dataNode.getFSDataset();
        Replica replica = dataset.getReplica(request.poolId(), request.blockId());
        if (replica == null) {
            throw new IOException("no replica of " + block + " on this DataNode");
        }
        if (replica.getState() != ReplicaState.FINALIZED) {
            throw new IOException("replica of " + block + " is " + replica.getState() + ", not finalized");
        }
        if (replica.getGenerationStamp() < request.generationStamp()) {
            throw new IOException("replica of " + block + " has the older generation stamp " + replica.getGenerationStamp());
        }
        block.setGenerationStamp(replica.getGenerationStamp());
        long replicaLength = replica.getNumBytes();
        if (request.offset() > replicaLength) {
            throw new IOException("offset " + request.offset() + " beyond the replica's " + replicaLength + " bytes");
        }
        try (DataInputStream meta = new DataInputStream(dataset.getMetaDataInputStream(block))) {
            meta.readShort();
            DataChecksum checksum = DataChecksum.newDataChecksum(meta);
            int bytesPerChecksum = checksum.getBytesPerChecksum();
            int checksumSize = checksum.getChecksumSize();
            if (bytesPerChecksum < BlockReadProtocol.BYTES_PER_CHECKSUM_MIN || bytesPerChecksum > BlockReadProtocol.BYTES_PER_CHECKSUM_MAX
                    || checksumSize > BlockReadProtocol.CHECKSUM_BYTES_MAX) {
                throw new IOException("replica of " + block + " has " + bytesPerChecksum + " bytes per checksum of " + checksumSize
                        + " bytes; the fabric path serves " + BlockReadProtocol.BYTES_PER_CHECKSUM_MIN + " to "
                        + BlockReadProtocol.BYTES_PER_CHECKSUM_MAX);
            }
            long start = request.offset() - request.offset() % bytesPerChecksum;
            long end = Math.min(request.offset() + request.length(), replicaLength);
            long alignedEnd = Math.min((end + bytesPerChecksum - 1) / bytesPerChecksum * bytesPerChecksum, replicaLength);
            int dataLength = (int) Math.max(0, alignedEnd - start);
            int chunks = (dataLength + bytesPerChecksum - 1) / bytesPerChecksum;
            int checksumLength = chunks * checksumSize;
            FabricBuffer response = node.allocate(BlockReadProtocol.RESPONSE_HEADER_BYTES + checksumLength + dataLength);
            try {
                ByteBuffer out = response.byteBuffer();
                new BlockReadProtocol.ReadHeader(checksum.getChecksumType().id, bytesPerChecksum, replicaLength, start, dataLength,
                        checksumLength).encode(out);
                IOUtils.skipFully(meta, (start / bytesPerChecksum) * checksumSize);
                byte[] sums = new byte[checksumLength];
                meta.readFully(sums);
                out.put(sums);
                if (dataLength > 0) {
                    try (InputStream data = dataset.getBlockInputStream(block, start)) {
                        readFully(data, out.slice(out.position(), dataLength));
                    }
                }
                return response;
            } catch (IOException | RuntimeException e) {
                response.release();
                throw e;
            }
        }
    }

    /** Checks a block token as {@code DataXceiver.checkAccess} does, for reads here and for writes in {@link DataNodeWrites}. */
    static void checkToken(DataNode dataNode, byte[] encoded, ExtendedBlock block, BlockTokenIdentifier.AccessMode mode)
            throws AccessDeniedException {
        if (encoded.length == 0) {
            throw new AccessDeniedException("block access token required for " + block);
        }
        Token<BlockTokenIdentifier> token = new Token<>();
        try {
            token.readFields(new DataInputStream(new ByteArrayInputStream(encoded)));
            dataNode.getBlockPoolTokenSecretManager().checkAccess(token, null, block, mode);
        } catch (InvalidToken e) {
            throw new AccessDeniedException("block access token refused for " + block + ": " + e.getMessage());
        } catch (IOException | RuntimeException e) {
            throw new AccessDeniedException("unreadable block access token for " + block + ": " + e);
        }
    }

    /** Fills {@code into} from {@code data}: straight from the file into registered memory when it is a file. */
    private static void readFully(InputStream data, ByteBuffer into) throws IOException {
        if (data instanceof FileInputStream file) {
            FileChannel channel = file.getChannel();
            while (into.hasRemaining()) {
                if (channel.read(into) < 0) {
                    throw new IOException("replica ended " + into.remaining() + " bytes early");
                }
            }
            return;
        }
        byte[] copy = new byte[Math.min(into.remaining(), 64 << 10)];
        while (into.hasRemaining()) {
            int n = data.read(copy, 0, Math.min(copy.length, into.remaining()));
            if (n < 0) {
                throw new IOException("replica ended " + into.remaining() + " bytes early");
            }
            into.put(copy, 0, n);
        }
    }
}
