package io.slipstream.hadoop.rpc;

/**
 * The fabric wire format of one call (docs/hadoop-rpc.md, message 3): a request with op {@link #OP_CALL}
 * whose payload is {@code [u8 FRAME_VERSION][i64 session id][RpcRequestHeaderProto][RequestHeaderProto][request]}
 * (the protobufs length-delimited, exactly as Hadoop's socket path frames them after its 4-byte length);
 * the response is {@code [RpcResponseHeaderProto][response]}, again Hadoop's own framing. A request the
 * server cannot take at all (unknown session, malformed frame, over the length limit) is failed with a
 * message starting with one of the prefixes below.
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    static final byte FRAME_VERSION = 1;
    /** Bytes before Hadoop's own framing: version and session id. */
    static final int PREFIX_BYTES = 1 + 8;

    /** The session is not (or no longer) known: the client opens a new one and sends the call again. */
    static final String UNKNOWN_SESSION = "slipstream-rpc: unknown session";
    /** The frame could not be read: the server closed the session. */
    static final String MALFORMED = "slipstream-rpc: malformed frame, session closed";
    /** Over {@code ipc.maximum.data.length}: the message is Hadoop's. */
    static final String TOO_LONG = "slipstream-rpc: ";
}
