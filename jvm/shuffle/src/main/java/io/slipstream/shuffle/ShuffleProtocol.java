package io.slipstream.shuffle;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The wire format between reducers, map-output servers and the peer directory (all big-endian).
 * Every request payload starts with the authenticator's header (see {@link RequestAuthenticator}).
 *
 * <pre>
 * FETCH request body:  i32 responseBytesMax, i32 count, count x (i32 shuffle, i64 map, i32 partition, i64 offset, i64 maxBytes)
 * FETCH response:      i32 count, count x (i64 blockBytes, i32 returnedBytes), then the returned bytes in entry order
 * REGISTER body:       str peerId, str host, i32 port            response: empty
 * LOOKUP body:         str peerId                                response: u8 status (0 unknown, 1 found, 2 gone) [, str host, i32 port]
 * DIAGNOSE body:       i32 shuffle, i64 map, i32 partition, i64 checksumByReader, str algorithm   response: str cause ("" unknown)
 * str:                 u16 length, UTF-8 bytes
 * </pre>
 *
 * A FETCH response returns, for each entry in order, {@code min(maxBytes, blockBytes - offset)}
 * bytes while the response has room ({@code responseBytesMax} in all): the reducer asks again for
 * what did not fit. So a response never exceeds what the reducer reserved for it, and a block of
 * any size travels in pieces.
 */
public final class ShuffleProtocol {
    /** Operation codes (the fabric's u16 op). */
    public static final int OP_FETCH = 0x5301;
    public static final int OP_REGISTER = 0x5302;
    public static final int OP_LOOKUP = 0x5303;
    /** Why a block a reader received was corrupt (the serving engine's diagnosis). */
    public static final int OP_DIAGNOSE = 0x5304;

    public static final int FETCH_HEADER_BYTES = 8;
    public static final int FETCH_ENTRY_BYTES = 4 + 8 + 4 + 8 + 8;
    public static final int RESPONSE_HEADER_BYTES = 4;
    public static final int RESPONSE_ENTRY_BYTES = 8 + 4;
    /** Entries in one FETCH request: bounds the server's work per request and the header size. */
    public static final int FETCH_ENTRIES_MAX = 4096;
    public static final int STRING_BYTES_MAX = 1024;
    /**
     * A FETCH response's header-only MAC ({@link RequestAuthenticator.ResponseMac#HEADER}) covers
     * the bytes of every block of at most this size: an engine's metadata, such as Hadoop's 24-byte
     * index records, which say how large the data that follows is once decompressed (nothing else
     * checks that), at no measurable cost; the bulk is left to the engine's checksums.
     */
    public static final int MACED_BLOCK_BYTES_MAX = 64;

    private ShuffleProtocol() {}

    public static void putString(ByteBuffer out, String value) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > STRING_BYTES_MAX) {
            throw new IllegalArgumentException("string longer than " + STRING_BYTES_MAX + " bytes");
        }
        out.putShort((short) bytes.length);
        out.put(bytes);
    }

    public static int stringBytes(String value) {
        return 2 + value.getBytes(StandardCharsets.UTF_8).length;
    }

    /** Reads a string written by {@link #putString}; a malformed one is a {@link ProtocolException}. */
    public static String getString(ByteBuffer in) {
        need(in, 2);
        int length = Short.toUnsignedInt(in.getShort());
        if (length > STRING_BYTES_MAX) {
            throw new ProtocolException("string of " + length + " bytes");
        }
        need(in, length);
        byte[] bytes = new byte[length];
        in.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** Throws unless {@code in} has {@code bytes} more bytes. */
    public static void need(ByteBuffer in, int bytes) {
        if (in.remaining() < bytes) {
            throw new ProtocolException("truncated message: " + bytes + " bytes needed, " + in.remaining() + " left");
        }
    }

    /**
     * What a header-only MAC covers of a FETCH response body of {@code count} entries (the count
     * the request asked for, not the body's word): the header (count, then each entry's block
     * length and bytes returned) and the returned bytes of each block of at most
     * {@link #MACED_BLOCK_BYTES_MAX}. Both sides compute it alike: the server from the body it
     * built, the reader from the body it received, whose header the MAC then covers (a header
     * altered to move the covered parts fails the check). Entries that do not add up within the
     * body are a {@link ProtocolException}.
     */
    public static RequestAuthenticator.Coverage fetchResponseCoverage(int count) {
        return body -> {
            if (count < 0 || count > FETCH_ENTRIES_MAX) {
                throw new ProtocolException("bad entry count " + count);
            }
            int base = body.position();
            int length = body.remaining();
            int headerBytes = RESPONSE_HEADER_BYTES + count * RESPONSE_ENTRY_BYTES;
            if (length < headerBytes) {
                throw new ProtocolException("truncated message: a response header of " + headerBytes + " bytes needed, " + length + " left");
            }
            int[] ranges = new int[2 + 2 * count];
            int used = 2;
            ranges[1] = headerBytes;
            long position = headerBytes;
            for (int i = 0; i < count; i++) {
                int entry = base + RESPONSE_HEADER_BYTES + i * RESPONSE_ENTRY_BYTES;
                long blockBytes = body.getLong(entry);
                int returned = body.getInt(entry + 8);
                if (returned < 0 || position + returned > length) {
                    throw new ProtocolException("entry " + i + ": " + returned + " bytes returned, beyond the response's " + length);
                }
                if (returned > 0 && blockBytes >= 0 && blockBytes <= MACED_BLOCK_BYTES_MAX) {
                    if (ranges[used - 2] + ranges[used - 1] == position) {
                        ranges[used - 1] += returned;
                    } else {
                        ranges[used++] = (int) position;
                        ranges[used++] = returned;
                    }
                }
                position += returned;
            }
            return java.util.Arrays.copyOf(ranges, used);
        };
    }

    /** A peer broke the wire format: the request fails, the server goes on. */
    public static final class ProtocolException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public ProtocolException(String message) {
            super(message);
        }
    }
}
