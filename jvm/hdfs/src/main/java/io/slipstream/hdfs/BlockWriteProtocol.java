package io.slipstream.hdfs;

import io.slipstream.hdfs.BlockReadProtocol.MalformedException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.StorageType;

/**
 * The block-write messages between a writer and a DataNode process's fabric node, and between the
 * DataNodes of a pipeline (docs/hdfs.md, "Writes", has the numbered sequence). Big-endian,
 * versioned like {@link BlockReadProtocol}, every length bounded before anything is sized from it.
 * One write id names the write on every node of its pipeline (the writer picks it); a DataNode
 * forwarding a packet only puts the next DataNode's data-transfer port into the header.
 *
 * <pre>
 * OPEN request   : u8 version, i32 xferPort, i64 write id, u16 n, n bytes pool id, i64 block id,
 *                  i64 generation stamp, u8 checksum type, i32 bytes per checksum, u8 storage type,
 *                  u16 s, s bytes storage id, u16 t, t bytes token (Token.write form),
 *                  u8 stage (0 create, 1 recovery), i64 new generation stamp, i64 min bytes, i64 max bytes
 *                  (recovery: the replica's acknowledged and sent lengths, as HDFS's writeBlock),
 *                  u8 d downstream targets, each: u16 h, h bytes IP address, i32 xferPort, u8 storage type,
 *                  u16 s, s bytes storage id                           -> response: u8 version
 * PACKET request : u8 version, i32 xferPort, i64 write id, i64 seqno, i64 offset in block (a chunk
 *                  boundary), u8 flags (1 last packet, 2 sync), i32 data length, i32 checksum length,
 *                  checksums, data                                     -> response: u8 version, i64 seqno
 * </pre>
 */
final class BlockWriteProtocol {
    static final int OP_OPEN = 3;
    static final int OP_PACKET = 4;
    static final int FLAG_LAST = 1;
    static final int FLAG_SYNC = 2;
    /** DataNodes downstream of the first, at most (HDFS's replication is usually 3). */
    static final int DOWNSTREAM_MAX = 15;
    static final int HOST_BYTES_MAX = 255;
    static final int STORAGE_ID_BYTES_MAX = 255;
    static final int PACKET_HEADER_BYTES = 1 + 4 + 8 + 8 + 8 + 1 + 4 + 4;
    /** Offset of the xferPort in a packet header: a forwarding DataNode rewrites it in place. */
    static final int PACKET_XFER_PORT_OFFSET = 1;
    static final int ACK_BYTES = 1 + 8;
    static final int STAGE_CREATE = 0;
    /** Pipeline recovery: the replica being written is taken over with {@code recoverRbw} and a new generation stamp. */
    static final int STAGE_RECOVERY = 1;

    private BlockWriteProtocol() {
    }

    /** The largest PACKET message carrying {@code dataBytes} (checksums at the smallest chunk size). */
    static int packetBytesMax(int dataBytes) {
        long checksums = ((long) dataBytes / BlockReadProtocol.BYTES_PER_CHECKSUM_MIN + 1) * BlockReadProtocol.CHECKSUM_BYTES_MAX;
        return Math.toIntExact(PACKET_HEADER_BYTES + dataBytes + checksums);
    }

    /** A DataNode of the pipeline after the one an OPEN goes to. */
    record Target(String host, int xferPort, StorageType storageType, String storageId) {
    }

    record Open(int xferPort, long writeId, String poolId, long blockId, long generationStamp, int checksumType, int bytesPerChecksum,
            StorageType storageType, String storageId, byte[] token, int stage, long newGenerationStamp, long minBytes, long maxBytes,
            List<Target> downstream) {
        /** A create-stage OPEN. */
        Open(int xferPort, long writeId, String poolId, long blockId, long generationStamp, int checksumType, int bytesPerChecksum,
                StorageType storageType, String storageId, byte[] token, List<Target> downstream) {
            this(xferPort, writeId, poolId, blockId, generationStamp, checksumType, bytesPerChecksum, storageType, storageId, token, STAGE_CREATE,
                    generationStamp, 0, 0, downstream);
        }

        ByteBuffer encode() {
            if (downstream.size() > DOWNSTREAM_MAX || token.length > BlockReadProtocol.TOKEN_BYTES_MAX) {
                throw new IllegalArgumentException("too many targets or too long a token");
            }
            ByteBuffer out = ByteBuffer.allocate(encodedBytesMax());
            out.put(BlockReadProtocol.VERSION).putInt(xferPort).putLong(writeId);
            putString(out, poolId, BlockReadProtocol.POOL_ID_BYTES_MAX);
            out.putLong(blockId).putLong(generationStamp).put((byte) checksumType).putInt(bytesPerChecksum)
                    .put((byte) storageType.ordinal());
            putString(out, storageId, STORAGE_ID_BYTES_MAX);
            out.putShort((short) token.length).put(token).put((byte) stage).putLong(newGenerationStamp).putLong(minBytes).putLong(maxBytes)
                    .put((byte) downstream.size());
            for (Target t : downstream) {
                putString(out, t.host(), HOST_BYTES_MAX);
                out.putInt(t.xferPort()).put((byte) t.storageType().ordinal());
                putString(out, t.storageId(), STORAGE_ID_BYTES_MAX);
            }
            return out.flip();
        }

        /** The OPEN the first of {@code downstream} gets from this DataNode. */
        Open forward() {
            Target next = downstream.get(0);
            return new Open(next.xferPort(), writeId, poolId, blockId, generationStamp, checksumType, bytesPerChecksum, next.storageType(),
                    next.storageId(), token, stage, newGenerationStamp, minBytes, maxBytes, downstream.subList(1, downstream.size()));
        }

        private int encodedBytesMax() {
            return 1 + 4 + 8 + 2 + BlockReadProtocol.POOL_ID_BYTES_MAX + 8 + 8 + 1 + 4 + 1 + 2 + STORAGE_ID_BYTES_MAX + 2 + token.length + 1 + 24 + 1
                    + downstream.size() * (2 + HOST_BYTES_MAX + 4 + 1 + 2 + STORAGE_ID_BYTES_MAX);
        }

        static Open decode(ByteBuffer in) {
            try {
                ByteBuffer b = in.duplicate();
                checkVersion(b.get());
                int xferPort = b.getInt();
                long writeId = b.getLong();
                String pool = getString(b, BlockReadProtocol.POOL_ID_BYTES_MAX, "pool id");
                if (pool.isEmpty()) {
                    throw new MalformedException("empty pool id");
                }
                long blockId = b.getLong();
                long generationStamp = b.getLong();
                int checksumType = Byte.toUnsignedInt(b.get());
                int bytesPerChecksum = b.getInt();
                if (bytesPerChecksum < BlockReadProtocol.BYTES_PER_CHECKSUM_MIN || bytesPerChecksum > BlockReadProtocol.BYTES_PER_CHECKSUM_MAX) {
                    throw new MalformedException("bytes per checksum " + bytesPerChecksum);
                }
                StorageType storageType = decodeStorageType(b.get());
                String storageId = getString(b, STORAGE_ID_BYTES_MAX, "storage id");
                int tokenLength = Short.toUnsignedInt(b.getShort());
                if (tokenLength > BlockReadProtocol.TOKEN_BYTES_MAX) {
                    throw new MalformedException("token of " + tokenLength + " bytes");
                }
                byte[] token = new byte[tokenLength];
                b.get(token);
                int stage = Byte.toUnsignedInt(b.get());
                long newGenerationStamp = b.getLong();
                long minBytes = b.getLong();
                long maxBytes = b.getLong();
                if (stage > STAGE_RECOVERY || minBytes < 0 || maxBytes < minBytes) {
                    throw new MalformedException("stage " + stage + " with lengths " + minBytes + " to " + maxBytes);
                }
                int targets = Byte.toUnsignedInt(b.get());
                if (targets > DOWNSTREAM_MAX) {
                    throw new MalformedException(targets + " downstream targets (at most " + DOWNSTREAM_MAX + ")");
                }
                List<Target> downstream = new ArrayList<>(targets);
                for (int i = 0; i < targets; i++) {
                    String host = getString(b, HOST_BYTES_MAX, "host");
                    int port = b.getInt();
                    if (host.isEmpty() || port <= 0 || port > 0xffff) {
                        throw new MalformedException("downstream target " + host + ":" + port);
                    }
                    downstream.add(new Target(host, port, decodeStorageType(b.get()), getString(b, STORAGE_ID_BYTES_MAX, "storage id")));
                }
                if (b.hasRemaining()) {
                    throw new MalformedException(b.remaining() + " bytes after the open");
                }
                return new Open(xferPort, writeId, pool, blockId, generationStamp, checksumType, bytesPerChecksum, storageType, storageId, token,
                        stage, newGenerationStamp, minBytes, maxBytes, List.copyOf(downstream));
            } catch (BufferUnderflowException e) {
                throw new MalformedException("truncated open");
            }
        }
    }

    /** A PACKET's header; its checksums and data follow it in the same message. */
    record PacketHeader(int xferPort, long writeId, long seqno, long offset, int flags, int dataLength, int checksumLength) {
        boolean last() {
            return (flags & FLAG_LAST) != 0;
        }

        boolean sync() {
            return (flags & FLAG_SYNC) != 0;
        }

        void encode(ByteBuffer out) {
            out.put(BlockReadProtocol.VERSION).putInt(xferPort).putLong(writeId).putLong(seqno).putLong(offset).put((byte) flags)
                    .putInt(dataLength).putInt(checksumLength);
        }

        /** Reads and checks a packet header against its message of {@code messageBytes} and the receiver's {@code dataBytesMax}. */
        static PacketHeader decode(ByteBuffer in, int messageBytes, int dataBytesMax) {
            if (messageBytes < PACKET_HEADER_BYTES) {
                throw new MalformedException("packet of " + messageBytes + " bytes");
            }
            ByteBuffer b = in.duplicate();
            checkVersion(b.get());
            PacketHeader h = new PacketHeader(b.getInt(), b.getLong(), b.getLong(), b.getLong(), Byte.toUnsignedInt(b.get()), b.getInt(),
                    b.getInt());
            if (h.seqno < 0 || h.offset < 0 || (h.flags & ~(FLAG_LAST | FLAG_SYNC)) != 0 || h.dataLength < 0 || h.dataLength > dataBytesMax
                    || h.checksumLength < 0 || (long) PACKET_HEADER_BYTES + h.dataLength + h.checksumLength != messageBytes) {
                throw new MalformedException("inconsistent packet header " + h + " in " + messageBytes + " bytes (data at most "
                        + dataBytesMax + ")");
            }
            return h;
        }
    }

    static ByteBuffer encodeAck(long seqno) {
        return ByteBuffer.allocate(ACK_BYTES).put(BlockReadProtocol.VERSION).putLong(seqno).flip();
    }

    /** The seqno an ACK names. */
    static long decodeAck(ByteBuffer in) {
        try {
            ByteBuffer b = in.duplicate();
            checkVersion(b.get());
            long seqno = b.getLong();
            if (b.hasRemaining()) {
                throw new MalformedException(b.remaining() + " bytes after the ack");
            }
            return seqno;
        } catch (BufferUnderflowException e) {
            throw new MalformedException("truncated ack");
        }
    }

    private static StorageType decodeStorageType(byte ordinal) {
        StorageType[] types = StorageType.values();
        int i = Byte.toUnsignedInt(ordinal);
        if (i >= types.length) {
            throw new MalformedException("storage type " + i);
        }
        return types[i];
    }

    private static void putString(ByteBuffer out, String s, int max) {
        byte[] bytes = s == null ? new byte[0] : s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > max) {
            throw new IllegalArgumentException("'" + s + "' longer than " + max + " bytes");
        }
        out.putShort((short) bytes.length).put(bytes);
    }

    private static String getString(ByteBuffer b, int max, String what) {
        int length = Short.toUnsignedInt(b.getShort());
        if (length > max) {
            throw new MalformedException(what + " of " + length + " bytes");
        }
        byte[] bytes = new byte[length];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void checkVersion(byte version) {
        if (version != BlockReadProtocol.VERSION) {
            throw new MalformedException("version " + version + " (this side speaks " + BlockReadProtocol.VERSION + ")");
        }
    }
}
