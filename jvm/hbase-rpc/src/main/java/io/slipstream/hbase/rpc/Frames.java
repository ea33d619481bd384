package io.slipstream.hbase.rpc;

import io.slipstream.fabric.session.FrameAuth;

/**
 * The fabric wire format of one HBase call (docs/hbase-rpc.md, messages 4-6): a request with op
 * {@link #OP_CALL} whose payload is
 * {@code [u8 FRAME_VERSION][i64 session id][i64 sequence][16-byte MAC]} (integers big-endian; the session
 * prefix of jvm/fabric's {@code io.slipstream.fabric.session}, shared with jvm/hadoop-rpc) then HBase's
 * request exactly as its socket path frames it after the 4-byte length (RequestHeader, the parameter, the
 * cell block); the response is {@code [16-byte MAC]} then HBase's response with its 4-byte length, the MAC
 * bound to the request's session and sequence number. Every session uses this version, SIMPLE ones too:
 * version 1 (no sequence, no MAC) is refused like any unknown version. A frame the server will not take is
 * failed with a message starting with one of the prefixes below.
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    static final byte FRAME_VERSION = 2;
    /** Bytes before HBase's own request framing: version, session id, sequence number, MAC. */
    static final int PREFIX_BYTES = FrameAuth.PREFIX_BYTES;
    /** Bytes before HBase's own response framing: the response's MAC. */
    static final int RESPONSE_PREFIX_BYTES = FrameAuth.RESPONSE_PREFIX_BYTES;
    /**
     * HKDF's "info" for this engine's session keys: names the engine, the frame version and the MAC, so that a
     * key can never be taken for one of another engine (jvm/hadoop-rpc's) or version.
     */
    static final String KEY_PURPOSE = "slipstream hbase-rpc frame v2 hmac-sha256";

    /** The session is not (or no longer) known: the client forgets it and HBase's retry opens a new one. */
    static final String UNKNOWN_SESSION = "slipstream-hbase-rpc: unknown session";
    /** The frame could not be read: the server closed the session. */
    static final String MALFORMED = "slipstream-hbase-rpc: malformed frame, session closed";
    /** The MAC does not verify with the session's key: not sent by the session's client, or altered. */
    static final String NOT_AUTHENTIC = "slipstream-hbase-rpc: frame not authentic";
    /** The sequence number was seen before or is older than the window: a replay (or a very late frame). */
    static final String REPLAYED = "slipstream-hbase-rpc: replayed or too old sequence number";

    /** Writes the prefix of {@code frame} (HBase's request already at {@link #PREFIX_BYTES}), then its MAC. */
    static void seal(byte[] frame, long sessionId, long sequence, FrameAuth auth) {
        auth.seal(frame, FRAME_VERSION, sessionId, sequence);
    }
}
