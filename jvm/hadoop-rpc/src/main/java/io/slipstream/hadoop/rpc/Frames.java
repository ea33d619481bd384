package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.session.FrameAuth;
import java.nio.ByteBuffer;

/**
 * The fabric wire format of one call (docs/hadoop-rpc.md, messages 4-6): a request with op {@link #OP_CALL}
 * whose payload is
 * {@code [u8 FRAME_VERSION][i64 session id][i64 sequence][16-byte MAC][RpcRequestHeaderProto][RequestHeaderProto][request]}
 * (integers big-endian; the protobufs length-delimited, exactly as Hadoop's socket path frames them after
 * its 4-byte length; the MAC is {@link FrameAuth}'s over everything but itself: the session prefix is
 * jvm/fabric's {@code io.slipstream.fabric.session}, shared with jvm/hbase-rpc); the response is
 * {@code [16-byte MAC][RpcResponseHeaderProto][response]}, Hadoop's own framing after the server's
 * {@link FrameAuth#signResponse} MAC, which binds it to the session and to the sequence number of the request
 * it answers (so neither an altered answer nor another call's verifies). Every session, SIMPLE ones too, uses
 * this version: versions 1 (no sequence, no MAC) and 2 (answers not signed) are refused like any unknown
 * version. A request the server cannot take is failed with a message starting with one of the prefixes below
 * (those refusals are the fabric's, not signed: they carry no call result).
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    /** 3: answers signed; the discovery answer names it too (FabricDiscovery version 3). */
    static final byte FRAME_VERSION = 3;
    static final int SESSION_OFFSET = FrameAuth.SESSION_OFFSET;
    static final int SEQUENCE_OFFSET = FrameAuth.SEQUENCE_OFFSET;
    static final int MAC_OFFSET = FrameAuth.MAC_OFFSET;
    /** Bytes before Hadoop's own framing in a request: version, session id, sequence number, MAC. */
    static final int PREFIX_BYTES = FrameAuth.PREFIX_BYTES;
    /** Bytes before Hadoop's own framing in a response: the server's MAC. */
    static final int RESPONSE_PREFIX_BYTES = FrameAuth.RESPONSE_PREFIX_BYTES;
    /**
     * HKDF's "info" for this engine's session keys (SessionKeys.macKey): names the engine, the frame version
     * and the MAC, so that a key can never be taken for one of another engine or version (a version-2 peer,
     * whose answers are not signed, derives another key).
     */
    static final String KEY_PURPOSE = "slipstream hadoop-rpc frame v3 hmac-sha256";

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

    /**
     * Writes the MAC of {@code response} ({@link #RESPONSE_PREFIX_BYTES} free bytes, then Hadoop's framing) into
     * its first bytes: the answer to frame {@code sequence} of session {@code sessionId}.
     */
    static void signResponse(byte[] response, long sessionId, long sequence, FrameAuth auth) {
        auth.signResponse(response, FRAME_VERSION, sessionId, sequence);
    }

    /**
     * Whether {@code response} (position to limit, left as they were) is the server's answer to frame
     * {@code sequence} of session {@code sessionId}: nothing of a response is read before this holds.
     */
    static boolean verifyResponse(ByteBuffer response, long sessionId, long sequence, FrameAuth auth) {
        return auth.verifyResponse(response, FRAME_VERSION, sessionId, sequence);
    }
}
