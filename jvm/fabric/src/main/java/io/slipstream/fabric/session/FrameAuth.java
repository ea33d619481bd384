package io.slipstream.fabric.session;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The authenticator of one fabric session's frames, with the session's key ({@link SessionKeys#macKey}):
 * HMAC-SHA256 truncated to {@link #MAC_BYTES} (a forgery still takes 2^128 tries, each one a refused
 * request). Verification compares in constant time.
 *
 * <p>A request frame starts with a {@link #PREFIX_BYTES}-byte prefix, integers big-endian:
 * {@code [u8 version][i64 session id][i64 sequence][16-byte MAC]}, then the engine's body. Its MAC covers
 * the version, session id and sequence (bytes 0 to {@link #MAC_OFFSET}) and the body; the MAC field itself
 * is left out. The version is the engine's frame version, 1 to {@link #VERSION_MAX}.
 *
 * <p>With {@link Coverage#HEADER} (a session's choice, agreed when it opens, and part of its key's derivation
 * so that the two kinds of key never meet), "the body" in every MAC input here is replaced by its length as an
 * i64: the MAC then proves who sent the frame, in which session and as which sequence number, and how long
 * it is, not its bytes. That is what an authenticated socket connection proves of the bytes on it when SASL
 * wraps nothing (QOP {@code authentication}): one who can alter bytes in flight can alter either. It saves
 * the HMAC passes over the bodies, four per call (each request and each response signed once and verified
 * once), about 36 us each at 64 KiB on the 2-core machine (HmacSHA256 at 1.8 GB/s, SHA-NI).
 *
 * <p>A response (used by engines that authenticate responses) is {@code [16-byte MAC][body]}; its MAC covers
 * {@code [u8 0x80 | version][i64 session id][i64 sequence of the request it answers]} and the body. The
 * top bit sets a response's input apart from every request's (whose first byte is the version, below 0x80):
 * a request's MAC can never pass as a response's or the other way round; the request's sequence number binds
 * the response to that one request, so neither another call's response nor an old one verifies.
 *
 * <p>A refusal (the server's reason for not taking a frame, carried as the text of a fabric failure) is
 * {@code <reason> mac=<32 hex digits>}; its MAC covers {@code [u8 0xC0 | version][i64 session id][i64 sequence
 * of the refused request]} and the reason's bytes (printable ASCII). The top two bits keep the three kinds of
 * input apart (requests 00: the version itself, responses 10, refusals 11), which is why versions stop at
 * {@link #VERSION_MAX}.
 * A server signs a refusal only for a frame whose MAC it verified: signing a refusal of a frame it could not
 * authenticate would hand anyone a signed refusal for any session and sequence number they name.
 */
public final class FrameAuth {
    /** What a frame's and a response's MAC covers besides the session prefix. */
    public enum Coverage {
        /** Every byte of the body. */
        FULL,
        /** The body's length, not its bytes (see the class comment). */
        HEADER;

        /** The setting's word for this coverage. */
        public String word() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }

        /** The coverage a setting names ({@code full} or {@code header}, any case), or null for another word. */
        public static Coverage ofWord(String word) {
            for (Coverage c : values()) {
                if (c.word().equalsIgnoreCase(word == null ? "" : word.trim())) {
                    return c;
                }
            }
            return null;
        }
    }

    public static final int MAC_BYTES = 16;
    public static final int SESSION_OFFSET = 1;
    public static final int SEQUENCE_OFFSET = SESSION_OFFSET + 8;
    public static final int MAC_OFFSET = SEQUENCE_OFFSET + 8;
    /** Bytes before a request's body: version, session id, sequence number, MAC. */
    public static final int PREFIX_BYTES = MAC_OFFSET + MAC_BYTES;
    /** Bytes before a response's body: its MAC. */
    public static final int RESPONSE_PREFIX_BYTES = MAC_BYTES;
    /** Highest frame version: the top two bits of the first MAC input byte mark responses (10) and refusals (11). */
    public static final int VERSION_MAX = 0x3f;
    private static final int RESPONSE_TAG = 0x80;
    private static final int REFUSAL_TAG = 0xC0;
    /** What separates a refusal's reason from its MAC, in hex, at the end of the signed text. */
    public static final String REFUSAL_MAC_MARK = " mac=";
    /** Characters a signed refusal adds to its reason. */
    public static final int REFUSAL_MAC_CHARS = REFUSAL_MAC_MARK.length() + 2 * MAC_BYTES;
    private static final HexFormat HEX = HexFormat.of();
    private static final String HMAC = "HmacSHA256";
    /** One Mac per thread, keyed per use: Mac.getInstance costs more than the MAC of a small call. */
    private static final ThreadLocal<Mac> MACS = ThreadLocal.withInitial(() -> {
        try {
            return Mac.getInstance(HMAC);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no " + HMAC, e);
        }
    });

    private final SecretKeySpec key;
    private final Coverage coverage;

    /** An authenticator whose MACs cover every byte ({@link Coverage#FULL}). */
    public FrameAuth(byte[] macKey) {
        this(macKey, Coverage.FULL);
    }

    public FrameAuth(byte[] macKey, Coverage coverage) {
        if (macKey.length != SessionKeys.MAC_KEY_BYTES) {
            throw new IllegalArgumentException("a frame key has " + SessionKeys.MAC_KEY_BYTES + " bytes, not " + macKey.length);
        }
        this.key = new SecretKeySpec(macKey, HMAC);
        this.coverage = java.util.Objects.requireNonNull(coverage, "coverage");
    }

    public Coverage coverage() {
        return coverage;
    }

    /** Writes the prefix of {@code frame} (its body already at {@link #PREFIX_BYTES}), then its MAC. */
    public void seal(byte[] frame, byte version, long sessionId, long sequence) {
        checkVersion(version);
        if (frame.length < PREFIX_BYTES) {
            throw new IllegalArgumentException("a frame of " + frame.length + " bytes");
        }
        ByteBuffer.wrap(frame).put(version).putLong(sessionId).putLong(sequence);
        sign(frame);
    }

    /** Writes the authenticator of {@code frame} (version, session, sequence and body already written) into its MAC field. */
    public void sign(byte[] frame) {
        if (frame.length < PREFIX_BYTES) {
            throw new IllegalArgumentException("a frame of " + frame.length + " bytes");
        }
        Mac mac = mac();
        mac.update(frame, 0, MAC_OFFSET);
        updateBody(mac, ByteBuffer.wrap(frame, PREFIX_BYTES, frame.length - PREFIX_BYTES));
        System.arraycopy(mac.doFinal(), 0, frame, MAC_OFFSET, MAC_BYTES);
    }

    /**
     * Whether the frame from {@code frame}'s position to its limit carries the authenticator of this key;
     * the buffer's position and limit are left as they were. A frame shorter than the prefix never does.
     */
    public boolean verify(ByteBuffer frame) {
        int start = frame.position();
        int end = frame.limit();
        if (end - start < PREFIX_BYTES) {
            return false;
        }
        Mac mac = mac();
        ByteBuffer view = frame.duplicate();
        view.limit(start + MAC_OFFSET);
        mac.update(view);
        view.limit(end).position(start + PREFIX_BYTES);
        updateBody(mac, view);
        return macEquals(mac.doFinal(), frame, start + MAC_OFFSET);
    }

    /**
     * Writes the authenticator of {@code response} ({@link #RESPONSE_PREFIX_BYTES} free bytes, then its body)
     * into its first bytes: the answer to the request {@code sequence} of session {@code sessionId}.
     */
    public void signResponse(byte[] response, byte version, long sessionId, long sequence) {
        if (response.length < RESPONSE_PREFIX_BYTES) {
            throw new IllegalArgumentException("a response of " + response.length + " bytes");
        }
        Mac mac = mac();
        mac.update(responseHeader(version, sessionId, sequence));
        updateBody(mac, ByteBuffer.wrap(response, RESPONSE_PREFIX_BYTES, response.length - RESPONSE_PREFIX_BYTES));
        System.arraycopy(mac.doFinal(), 0, response, 0, MAC_BYTES);
    }

    /**
     * Whether the response from {@code response}'s position to its limit is the authentic answer to request
     * {@code sequence} of session {@code sessionId}; the buffer's position and limit are left as they were.
     */
    public boolean verifyResponse(ByteBuffer response, byte version, long sessionId, long sequence) {
        int start = response.position();
        if (response.limit() - start < RESPONSE_PREFIX_BYTES) {
            return false;
        }
        Mac mac = mac();
        mac.update(responseHeader(version, sessionId, sequence));
        ByteBuffer body = response.duplicate();
        body.position(start + RESPONSE_PREFIX_BYTES);
        updateBody(mac, body);
        return macEquals(mac.doFinal(), response, start);
    }

    /** The body's part of a MAC input: its bytes (position to limit), or with {@link Coverage#HEADER} its length. */
    private void updateBody(Mac mac, ByteBuffer body) {
        if (coverage == Coverage.FULL) {
            mac.update(body);
            return;
        }
        long length = body.remaining();
        for (int shift = 56; shift >= 0; shift -= 8) {
            mac.update((byte) (length >>> shift));
        }
    }

    private static byte[] responseHeader(byte version, long sessionId, long sequence) {
        return header(RESPONSE_TAG, version, sessionId, sequence);
    }

    private static byte[] header(int tag, byte version, long sessionId, long sequence) {
        checkVersion(version);
        return ByteBuffer.allocate(MAC_OFFSET).put((byte) (tag | version)).putLong(sessionId).putLong(sequence).array();
    }

    /**
     * The text of a refusal of request {@code sequence} of session {@code sessionId}: {@code reason} (its characters
     * outside printable ASCII replaced by '?', so that the text reaches the client byte for byte) followed by
     * {@link #REFUSAL_MAC_MARK} and its MAC in hex. Only for a request whose MAC verified with this key.
     */
    public String signRefusal(String reason, byte version, long sessionId, long sequence) {
        String ascii = printableAscii(reason);
        return ascii + REFUSAL_MAC_MARK + HEX.formatHex(refusalMac(ascii, version, sessionId, sequence), 0, MAC_BYTES);
    }

    /**
     * The reason of {@code signed} when it is this key's refusal of request {@code sequence} of session
     * {@code sessionId} ({@link #signRefusal}'s text, exactly), else null: unsigned, signed for another request,
     * session, version or key, or altered. The MAC is compared in constant time.
     */
    public String verifyRefusal(String signed, byte version, long sessionId, long sequence) {
        if (signed == null || signed.length() < REFUSAL_MAC_CHARS) {
            return null;
        }
        int mark = signed.length() - REFUSAL_MAC_CHARS;
        if (!signed.startsWith(REFUSAL_MAC_MARK, mark)) {
            return null;
        }
        String reason = signed.substring(0, mark);
        byte[] carried;
        try {
            carried = HEX.parseHex(signed, mark + REFUSAL_MAC_MARK.length(), signed.length());
        } catch (IllegalArgumentException e) {
            return null;
        }
        if (!reason.equals(printableAscii(reason))) {
            return null;
        }
        byte[] expected = Arrays.copyOf(refusalMac(reason, version, sessionId, sequence), MAC_BYTES);
        return MessageDigest.isEqual(expected, carried) ? reason : null;
    }

    private byte[] refusalMac(String asciiReason, byte version, long sessionId, long sequence) {
        Mac mac = mac();
        mac.update(header(REFUSAL_TAG, version, sessionId, sequence));
        mac.update(asciiReason.getBytes(StandardCharsets.US_ASCII));
        return mac.doFinal();
    }

    private static String printableAscii(String s) {
        StringBuilder out = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c > 0x7e) {
                if (out == null) {
                    out = new StringBuilder(s);
                }
                out.setCharAt(i, '?');
            }
        }
        return out == null ? s : out.toString();
    }

    private static void checkVersion(byte version) {
        if (version < 1 || version > VERSION_MAX) {
            throw new IllegalArgumentException("frame version " + version + " is not 1 to " + VERSION_MAX);
        }
    }

    /** The truncated {@code expected} against the {@link #MAC_BYTES} at {@code at} in {@code carrier}, in constant time. */
    private static boolean macEquals(byte[] expected, ByteBuffer carrier, int at) {
        byte[] carried = new byte[MAC_BYTES];
        carrier.get(at, carried);
        byte[] truncated = new byte[MAC_BYTES];
        System.arraycopy(expected, 0, truncated, 0, MAC_BYTES);
        return MessageDigest.isEqual(truncated, carried);
    }

    private Mac mac() {
        Mac mac = MACS.get();
        try {
            mac.init(key);
        } catch (InvalidKeyException e) {
            throw new IllegalStateException("HmacSHA256 refused a 32-byte key", e);
        }
        return mac;
    }
}
