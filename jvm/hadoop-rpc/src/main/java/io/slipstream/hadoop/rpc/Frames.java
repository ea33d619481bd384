package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.session.FrameAuth;

/**
 * The fabric wire format of one call (docs/hadoop-rpc.md, message 3): a request with op {@link #OP_CALL}
 * whose payload is
 * {@code [u8 FRAME_VERSION][i64 session id][i64 sequence][16-byte MAC][RpcRequestHeaderProto][RequestHeaderProto][request]}
 * (integers big-endian; the protobufs length-delimited, exactly as Hadoop's socket path frames them after
 * its 4-byte length; the MAC is {@link FrameAuth}'s over everything but itself: the session prefix is
 * jvm/fabric's {@code io.slipstream.fabric.session}, shared with jvm/hbase-rpc); the response is
 * {@code [RpcResponseHeaderProto][response]}, again Hadoop's own framing. Every session, SIMPLE ones too,
 * uses this version: version 1 (no sequence, no MAC) is refused like any unknown version. A request the
 * server cannot take is failed with a message starting with one of the prefixes below.
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    static final byte FRAME_VERSION = 2;
    static final int SESSION_OFFSET = FrameAuth.SESSION_OFFSET;
    static final int SEQUENCE_OFFSET = FrameAuth.SEQUENCE_OFFSET;
    static final int MAC_OFFSET = FrameAuth.MAC_OFFSET;
    /** Bytes before Hadoop's own framing: version, session id, sequence number, MAC. */
    static final int PREFIX_BYTES = FrameAuth.PREFIX_BYTES;
    /**
     * HKDF's "info" for this engine's session keys (SessionKeys.macKey): names the engine, the frame version
     * and the MAC, so that a key can never be taken for one of another engine or version.
     */
    static final String KEY_PURPOSE = "slipstream hadoop-rpc frame v2 hmac-sha256";

    /** The session is not (or no longer) known: the client opens a new one and sends the call again. */
    static final String UNKNOWN_SESSION = "slipstream-rpc: unknown session";
    /** The frame could not be read: the server closed the session. */
    static final String MALFORMED = "slipstream-rpc: malformed frame, session closed";
    /** The MAC does not verify with the session's key: the frame was not sent by the session's client, or altered. */
    static final String NOT_AUTHENTIC = "slipstream-rpc: frame not authentic";
    /** The sequence number was seen before or is older than the window: a replay (or a very late call, sent again). */
    static final String REPLAYED = "slipstream-rpc: replayed or too old sequence number";
    /** The call names a protocol other than the one the session was opened (and authorised) for. */
    static final String WRONG_PROTOCOL = "slipstream-rpc: session not opened for protocol ";
    /** Over {@code ipc.maximum.data.length}: the rest of the message is Hadoop's. */
    static final String TOO_LONG = "slipstream-rpc: over the length limit: ";

    /** Writes the prefix of {@code frame} (its body already at {@link #PREFIX_BYTES}), then its MAC. */
    static void seal(byte[] frame, long sessionId, long sequence, FrameAuth auth) {
        auth.seal(frame, FRAME_VERSION, sessionId, sequence);
    }
}
