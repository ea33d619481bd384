package io.slipstream.hbase.rpc;

import io.slipstream.fabric.session.FrameAuth;

/**
 * The fabric wire format of one HBase call (docs/hbase-rpc.md, messages 4-6): a request with op
 * {@link #OP_CALL} whose payload is
 * {@code [u8 FRAME_VERSION][i64 session id][i64 sequence][16-byte MAC]} (integers big-endian; the session
 * prefix of jvm/fabric's {@code io.slipstream.fabric.session}, shared with jvm/hadoop-rpc) then HBase's
 * request exactly as its socket path frames it after the 4-byte length (RequestHeader, the parameter, the
 * cell block); the response is {@code [16-byte MAC]} then HBase's response with its 4-byte length, the MAC
 * bound to the request's session and sequence number. A frame the server will not take is failed with a text
 * starting with one of the prefixes below, signed ({@code FrameAuth.signRefusal}, bound the same way) whenever
 * the server verified the frame's MAC: all but {@link #UNKNOWN_SESSION}, {@link #NOT_AUTHENTIC} and a
 * {@link #MALFORMED} frame that names no session. Every session uses this version, SIMPLE ones too: versions 1
 * (no sequence, no MAC), 2 (refusals not signed) and 3 (every MAC over the whole body) are refused like any
 * unknown version. What the MACs of frames and answers cover (the whole body, or its length:
 * {@link FrameAuth.Coverage}, {@code slipstream.hbase.rpc.frameMac}) is the session's, agreed when it opens
 * (message 2) and bound into its key ({@link #keyPurpose}).
 */
final class Frames {
    private Frames() {
    }

    static final int OP_CALL = 1;
    /**
     * 4: MAC coverage agreed per session (3: refusals signed; 2: answers signed; 1: nothing). The discovery
     * speaks the same version.
     */
    static final byte FRAME_VERSION = 4;
    /** Bytes before HBase's own request framing: version, session id, sequence number, MAC. */
    static final int PREFIX_BYTES = FrameAuth.PREFIX_BYTES;
    /** Bytes before HBase's own response framing: the response's MAC. */
    static final int RESPONSE_PREFIX_BYTES = FrameAuth.RESPONSE_PREFIX_BYTES;
    /**
     * HKDF's "info" for this engine's session keys: names the engine, the frame version, the MAC and its coverage,
     * so that a key can never be taken for one of another engine (jvm/hadoop-rpc's), version or coverage (a
     * session whose MACs cover only the bodies' lengths derives another key than one whose MACs cover the bytes).
     */
    static String keyPurpose(FrameAuth.Coverage coverage) {
        return "slipstream hbase-rpc frame v" + FRAME_VERSION + " hmac-sha256 " + coverage.word();
    }

    /** What every refusal's text starts with. */
    static final String REFUSAL_PREFIX = "slipstream-hbase-rpc: ";
    /**
     * The session is not (or no longer) known: the client forgets it and fails the call as a closed connection
     * (HBase's retry decides, and opens a new one). Not signed: the server has no key for it.
     */
    static final String UNKNOWN_SESSION = REFUSAL_PREFIX + "unknown session";
    /** The frame could not be read: the server closed the session. Signed (unless the frame named no session). */
    static final String MALFORMED = REFUSAL_PREFIX + "malformed frame, session closed";
    /**
     * The MAC does not verify with the session's key: not sent by the session's client, or altered. Not signed, on
     * purpose: the server signs nothing about a frame it could not authenticate.
     */
    static final String NOT_AUTHENTIC = REFUSAL_PREFIX + "frame not authentic";
    /** The sequence number was accepted before (ReplayWindow's REPLAYED): a copy of this frame was taken. Signed. */
    static final String REPLAYED = REFUSAL_PREFIX + "replayed sequence number (a copy of this frame was taken)";
    /** Below the replay window and not remembered (ReplayWindow's TOO_OLD): taken or not, unknown. Signed. */
    static final String TOO_OLD = REFUSAL_PREFIX + "sequence number too old to tell whether it was taken";
    /** The server stopped while the frame was handed on. Signed. */
    static final String STOPPING = REFUSAL_PREFIX + "the server is stopping";

    /** Writes the prefix of {@code frame} (HBase's request already at {@link #PREFIX_BYTES}), then its MAC. */
    static void seal(byte[] frame, long sessionId, long sequence, FrameAuth auth) {
        auth.seal(frame, FRAME_VERSION, sessionId, sequence);
    }

    /** The text of a refusal of frame {@code sequence} of session {@code sessionId}: {@code reason} and its MAC. */
    static String signRefusal(String reason, long sessionId, long sequence, FrameAuth auth) {
        return auth.signRefusal(reason, FRAME_VERSION, sessionId, sequence);
    }

    /** The refusal text in a fabric failure's message (from this engine's prefix on), or null when there is none. */
    static String refusalText(String failure) {
        int at = failure == null ? -1 : failure.indexOf(REFUSAL_PREFIX);
        return at < 0 ? null : failure.substring(at);
    }

    /** The reason of {@code refusal} when the server signed it for frame {@code sequence} of the session, else null. */
    static String verifyRefusal(String refusal, long sessionId, long sequence, FrameAuth auth) {
        return auth.verifyRefusal(refusal, FRAME_VERSION, sessionId, sequence);
    }
}
