package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.session.FrameAuth;
import java.nio.ByteBuffer;

/**
 * The fabric wire format of one call (docs/hadoop-rpc.md, messages 4-7): a request with op {@link #OP_CALL}
 * whose payload is
 * {@code [u8 FRAME_VERSION][i64 session id][i64 sequence][16-byte MAC][RpcRequestHeaderProto][RequestHeaderProto][request]}
 * (integers big-endian; the protobufs length-delimited, exactly as Hadoop's socket path frames them after
 * its 4-byte length; the MAC is {@link FrameAuth}'s over everything but itself: the session prefix is
 * jvm/fabric's {@code io.slipstream.fabric.session}, shared with jvm/hbase-rpc); the response is
 * {@code [16-byte MAC][RpcResponseHeaderProto][response]}, Hadoop's own framing after the server's
 * {@link FrameAuth#signResponse} MAC, which binds it to the session and to the sequence number of the request
 * it answers (so neither an altered answer nor another call's verifies). A request the server does not take is
 * failed with a text starting with one of the prefixes below; the server signs it ({@link FrameAuth#signRefusal},
 * bound the same way) whenever it verified the frame's MAC, so all but {@link #UNKNOWN_SESSION},
 * {@link #NOT_AUTHENTIC} and a {@link #MALFORMED} frame that names no session. Every session, SIMPLE ones too,
 * uses this version: versions 1 (no sequence, no MAC), 2 (answers not signed), 3 (refusals not signed) and 4
 * (every MAC over the whole body) are refused like any unknown version. What the MACs of frames and answers
 * cover (the whole body, or its length: {@link FrameAuth.Coverage}, {@code slipstream.rpc.frameMac}) is the
 * session's, agreed when it opens (message 2) and bound into its key ({@link #keyPurpose}).
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    /**
     * 5: answers and refusals signed, MAC coverage agreed per session; the discovery answer names it too
     * (FabricDiscovery version 5).
     */
    static final byte FRAME_VERSION = 5;
    static final int SESSION_OFFSET = FrameAuth.SESSION_OFFSET;
    static final int SEQUENCE_OFFSET = FrameAuth.SEQUENCE_OFFSET;
    static final int MAC_OFFSET = FrameAuth.MAC_OFFSET;
    /** Bytes before Hadoop's own framing in a request: version, session id, sequence number, MAC. */
    static final int PREFIX_BYTES = FrameAuth.PREFIX_BYTES;
    /** Bytes before Hadoop's own framing in a response: the server's MAC. */
    static final int RESPONSE_PREFIX_BYTES = FrameAuth.RESPONSE_PREFIX_BYTES;
    /**
     * HKDF's "info" for this engine's session keys (SessionKeys.macKey): names the engine, the frame version,
     * the MAC and its coverage, so that a key can never be taken for one of another engine, version or coverage
     * (a version-3 peer, whose refusals are not signed, derives another key; so does a session whose MACs cover
     * only the bodies' lengths).
     */
    static String keyPurpose(FrameAuth.Coverage coverage) {
        return "slipstream hadoop-rpc frame v" + FRAME_VERSION + " hmac-sha256 " + coverage.word();
    }

    /** What every refusal's text starts with. */
    static final String REFUSAL_PREFIX = "slipstream-rpc: ";
    /**
     * The session is not (or no longer) known. Not signed: the server has no key for it. The client sends the call
     * again only when the server, asked over the socket path, says the session is gone (message 7).
     */
    static final String UNKNOWN_SESSION = REFUSAL_PREFIX + "unknown session";
    /** The frame could not be read: the server closed the session. Signed (unless the frame named no session). */
    static final String MALFORMED = REFUSAL_PREFIX + "malformed frame, session closed";
    /**
     * The MAC does not verify with the session's key: the frame was not sent by the session's client, or altered.
     * Not signed, on purpose: the server signs nothing about a frame it could not authenticate (whoever names a
     * session and a sequence number would get a signed refusal for them).
     */
    static final String NOT_AUTHENTIC = REFUSAL_PREFIX + "frame not authentic";
    /** The sequence number was accepted before (ReplayWindow's REPLAYED): a copy of this frame was taken. Signed. */
    static final String REPLAYED = REFUSAL_PREFIX + "replayed sequence number (a copy of this frame was taken)";
    /** Below the replay window and not remembered (ReplayWindow's TOO_OLD): taken or not, unknown. Signed. */
    static final String TOO_OLD = REFUSAL_PREFIX + "sequence number too old to tell whether it was taken";
    /** The call names a protocol other than the one the session was opened (and authorised) for. Signed. */
    static final String WRONG_PROTOCOL = REFUSAL_PREFIX + "session not opened for protocol ";
    /** Over {@code ipc.maximum.data.length}: the rest of the message is Hadoop's. Signed. */
    static final String TOO_LONG = REFUSAL_PREFIX + "over the length limit: ";

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

    /** The text of a refusal of frame {@code sequence} of session {@code sessionId}: {@code reason} and its MAC. */
    static String signRefusal(String reason, long sessionId, long sequence, FrameAuth auth) {
        return auth.signRefusal(reason, FRAME_VERSION, sessionId, sequence);
    }

    /**
     * The refusal text in a fabric failure's message: from this engine's prefix on (the fabric puts its own words
     * before it), or null when there is none.
     */
    static String refusalText(String failure) {
        int at = failure == null ? -1 : failure.indexOf(REFUSAL_PREFIX);
        return at < 0 ? null : failure.substring(at);
    }

    /**
     * The reason of {@code refusal} (a {@link #refusalText}) when the server signed it for frame {@code sequence} of
     * session {@code sessionId}, else null.
     */
    static String verifyRefusal(String refusal, long sessionId, long sequence, FrameAuth auth) {
        return auth.verifyRefusal(refusal, FRAME_VERSION, sessionId, sequence);
    }
}
