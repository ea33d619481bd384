package io.slipstream.hdfs;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The block-read messages between a client and a DataNode process's fabric node (docs/hdfs.md has
 * the numbered sequence). Big-endian, versioned, every length bounded before anything is sized
 * from it. A request names the DataNode by its data-transfer port because one fabric node serves
 * every DataNode of its process (a mini cluster runs three in one JVM).
 *
 * <pre>
 * PROBE request : u8 version, i32 xferPort                      -> response: u8 version
 * READ request  : u8 version, i32 xferPort, u16 n, n bytes pool id, i64 block id, i64 generation stamp,
 *                 i64 offset, i32 length, u16 t, t bytes token (Hadoop's Token.write form)
 * READ response : u8 version, u8 checksum type, u16 0, i32 bytes per checksum, i64 replica length,
 *                 i64 data offset (a chunk boundary), i32 data length, i32 checksum length,
 *                 checksums, data
 * </pre>
 */
final class BlockReadProtocol {
    static final int OP_READ = 1;
    static final int OP_PROBE = 2;
    static final byte VERSION = 1;
    static final int POOL_ID_BYTES_MAX = 256;
    static final int TOKEN_BYTES_MAX = 8192;
    static final int REQUEST_BYTES_MAX = 1 + 4 + 2 + POOL_ID_BYTES_MAX + 8 * 3 + 4 + 2 + TOKEN_BYTES_MAX;
    static final int RESPONSE_HEADER_BYTES = 32;
    /** Checksum chunk sizes the fabric path serves; replicas outside are read by HDFS's own readers. */
    static final int BYTES_PER_CHECKSUM_MIN = 64;
    static final int BYTES_PER_CHECKSUM_MAX = 64 << 10;
    /** Checksum bytes per chunk at most (CRC32 and CRC32C: 4). */
    static final int CHECKSUM_BYTES_MAX = 4;

    private BlockReadProtocol() {
    }

    /** The largest READ response for a request of {@code requestBytes}: chunk alignment on both ends, checksums. */
    static int responseBytesMax(int requestBytes) {
        long data = (long) requestBytes + 2L * BYTES_PER_CHECKSUM_MAX;
        long checksums = (data / BYTES_PER_CHECKSUM_MIN + 1) * CHECKSUM_BYTES_MAX;
        return Math.toIntExact(RESPONSE_HEADER_BYTES + data + checksums);
    }

    /** A malformed message: the peer gets a clear error, the server goes on serving others. */
    static final class MalformedException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        MalformedException(String message) {
            super("malformed block message: " + message);
        }
    }

    record ReadRequest(int xferPort, String poolId, long blockId, long generationStamp, long offset, int length, byte[] token) {
        ByteBuffer encode() {
            byte[] pool = poolId.getBytes(StandardCharsets.UTF_8);
            if (pool.length > POOL_ID_BYTES_MAX || token.length > TOKEN_BYTES_MAX) {
                throw new IllegalArgumentException("pool id or token too long");
            }
            ByteBuffer out = ByteBuffer.allocate(1 + 4 + 2 + pool.length + 28 + 2 + token.length);
            out.put(VERSION).putInt(xferPort).putShort((short) pool.length).put(pool)
                    .putLong(blockId).putLong(generationStamp).putLong(offset).putInt(length)
                    .putShort((short) token.length).put(token);
            return out.flip();
        }

        static ReadRequest decode(ByteBuffer in, int requestBytesMax) {
            try {
                ByteBuffer b = in.duplicate();
                checkVersion(b.get());
                int xferPort = b.getInt();
                int poolLength = Short.toUnsignedInt(b.getShort());
                if (poolLength == 0 || poolLength > POOL_ID_BYTES_MAX) {
                    throw new MalformedException("pool id of " + poolLength + " bytes");
                }
                byte[] pool = new byte[poolLength];
                b.get(pool);
                long blockId = b.getLong();
                long generationStamp = b.getLong();
                long offset = b.getLong();
                int length = b.getInt();
                int tokenLength = Short.toUnsignedInt(b.getShort());
                if (tokenLength > TOKEN_BYTES_MAX) {
                    throw new MalformedException("token of " + tokenLength + " bytes");
                }
                byte[] token = new byte[tokenLength];
                b.get(token);
                if (b.hasRemaining()) {
                    throw new MalformedException(b.remaining() + " bytes after the request");
                }
                if (offset < 0 || length <= 0 || length > requestBytesMax) {
                    throw new MalformedException("range offset " + offset + " length " + length + " (at most " + requestBytesMax + ")");
                }
                return new ReadRequest(xferPort, new String(pool, StandardCharsets.UTF_8), blockId, generationStamp, offset, length, token);
            } catch (BufferUnderflowException e) {
                throw new MalformedException("truncated");
            }
        }
    }

    static ByteBuffer encodeProbe(int xferPort) {
        return ByteBuffer.allocate(5).put(VERSION).putInt(xferPort).flip();
    }

    /** The data-transfer port a PROBE names. */
    static int decodeProbe(ByteBuffer in) {
        try {
            ByteBuffer b = in.duplicate();
            checkVersion(b.get());
            int xferPort = b.getInt();
            if (b.hasRemaining()) {
                throw new MalformedException(b.remaining() + " bytes after the probe");
            }
            return xferPort;
        } catch (BufferUnderflowException e) {
            throw new MalformedException("truncated probe");
        }
    }

    /** A READ response's header; the checksums and data follow it in the same message. */
    record ReadHeader(int checksumType, int bytesPerChecksum, long replicaLength, long dataOffset, int dataLength, int checksumLength) {
        void encode(ByteBuffer out) {
            out.put(VERSION).put((byte) checksumType).putShort((short) 0).putInt(bytesPerChecksum).putLong(replicaLength)
                    .putLong(dataOffset).putInt(dataLength).putInt(checksumLength);
        }

        /** Reads and checks the header of a response of {@code messageBytes}; the buffer is left after it. */
        static ReadHeader decode(ByteBuffer b, int messageBytes) {
            if (messageBytes < RESPONSE_HEADER_BYTES) {
                throw new MalformedException("response of " + messageBytes + " bytes");
            }
            checkVersion(b.get());
            int type = Byte.toUnsignedInt(b.get());
            b.getShort();
            ReadHeader h = new ReadHeader(type, b.getInt(), b.getLong(), b.getLong(), b.getInt(), b.getInt());
            if (h.bytesPerChecksum < BYTES_PER_CHECKSUM_MIN || h.bytesPerChecksum > BYTES_PER_CHECKSUM_MAX
                    || h.dataOffset < 0 || h.dataLength < 0 || h.checksumLength < 0 || h.dataOffset % h.bytesPerChecksum != 0
                    || (long) RESPONSE_HEADER_BYTES + h.dataLength + h.checksumLength != messageBytes
                    || h.dataOffset + h.dataLength > h.replicaLength) {
                throw new MalformedException("inconsistent response header " + h);
            }
            return h;
        }
    }

    private static void checkVersion(byte version) {
        if (version != VERSION) {
            throw new MalformedException("version " + version + " (this side speaks " + VERSION + ")");
        }
    }
}
