package io.slipstream.hbase.rpc;

/**
 * The fabric wire format of one HBase call (docs/hbase-rpc.md, message 3): a request with op
 * {@link #OP_CALL} whose payload is {@code [u8 FRAME_VERSION][i64 session id, big-endian]} then HBase's
 * request exactly as its socket path frames it after the 4-byte length (RequestHeader, the parameter,
 * the cell block); the response is HBase's response with its 4-byte length. A frame the server cannot
 * take at all is failed with a message starting with one of the prefixes below.
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    static final byte FRAME_VERSION = 1;
    /** Bytes before HBase's own framing: version and session id. */
    static final int PREFIX_BYTES = 1 + 8;

    /** The session is not (or no longer) known: the client forgets it and HBase's retry opens a new one. */
    static final String UNKNOWN_SESSION = "slipstream-hbase-rpc: unknown session";
    /** The frame could not be read: the server closed the session. */
    static final String MALFORMED = "slipstream-hbase-rpc: malformed frame, session closed";
}
