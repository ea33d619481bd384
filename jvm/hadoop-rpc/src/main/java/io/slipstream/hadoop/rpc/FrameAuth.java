package io.slipstream.hadoop.rpc;

import java.nio.ByteBuffer;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The authenticator of a version-2 call frame (docs/hadoop-rpc.md, message 3): HMAC-SHA256 with the
 * session's key ({@link SessionKeys#macKey}) over the frame's version, session id and sequence number and
 * its body, truncated to {@link #MAC_BYTES} (a forgery still takes 2^128 tries, each one a refused request).
 * The MAC field itself is left out of the input. Verification compares in constant time.
 */
final class FrameAuth {
    static final int MAC_BYTES = 16;
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

    FrameAuth(byte[] macKey) {
        if (macKey.length != SessionKeys.MAC_KEY_BYTES) {
            throw new IllegalArgumentException("a frame key has " + SessionKeys.MAC_KEY_BYTES + " bytes, not " + macKey.length);
        }
        this.key = new SecretKeySpec(macKey, HMAC);
    }

    /** Writes the authenticator of {@code frame} (version, session, sequence and body already written) into its MAC field. */
    void sign(byte[] frame) {
        if (frame.length < Frames.PREFIX_BYTES) {
            throw new IllegalArgumentException("a frame of " + frame.length + " bytes");
        }
        Mac mac = mac();
        mac.update(frame, 0, Frames.MAC_OFFSET);
        mac.update(frame, Frames.PREFIX_BYTES, frame.length - Frames.PREFIX_BYTES);
        System.arraycopy(mac.doFinal(), 0, frame, Frames.MAC_OFFSET, MAC_BYTES);
    }

    /**
     * Whether the frame from {@code frame}'s position to its limit carries the authenticator of this key;
     * the buffer's position and limit are left as they were. The caller checked it holds a whole prefix.
     */
    boolean verify(ByteBuffer frame) {
        int start = frame.position();
        int end = frame.limit();
        if (end - start < Frames.PREFIX_BYTES) {
            return false;
        }
        Mac mac = mac();
        ByteBuffer view = frame.duplicate();
        view.limit(start + Frames.MAC_OFFSET);
        mac.update(view);
        view.limit(end).position(start + Frames.PREFIX_BYTES);
        mac.update(view);
        byte[] expected = mac.doFinal();
        byte[] carried = new byte[MAC_BYTES];
        frame.get(start + Frames.MAC_OFFSET, carried);
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
