package io.slipstream.shuffle;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.function.Supplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Authenticates requests with the application's shared secret (Spark: {@code spark.authenticate}).
 *
 * <p>Each request payload starts with a header: {@code u8 version, u8 flags} and, when
 * authenticated, a 32-byte HMAC-SHA256 of the operation code and the body under the secret. A
 * server with a secret refuses requests without a valid tag; a server without one refuses tagged
 * requests too (the two sides disagree about the configuration: better said than ignored).
 *
 * <p>What this does not do: it does not encrypt (shuffle bytes travel in clear; the Spark adapter
 * refuses to run when Spark's network encryption is on), and it does not stop the replay of a
 * captured request, which only fetches the same bytes again.
 */
public final class RequestAuthenticator {
    public static final byte VERSION = 1;
    private static final byte FLAG_TAGGED = 1;
    public static final int TAG_BYTES = 32;
    private static final String ALGORITHM = "HmacSHA256";

    private final boolean enabled;
    private final Supplier<String> secretSupplier;
    private volatile byte[] secret;
    private final ThreadLocal<Mac> macs;

    /** {@code secret} null: requests are not authenticated. */
    public RequestAuthenticator(String secret) {
        this(secret != null, () -> secret);
    }

    /**
     * Authentication on or off now, the secret asked for at first use (an engine may hand it out
     * only once it is running). The supplier must not return null when {@code enabled}.
     */
    public RequestAuthenticator(boolean enabled, Supplier<String> secretSupplier) {
        this.enabled = enabled;
        this.secretSupplier = secretSupplier;
        this.macs = ThreadLocal.withInitial(this::newMac);
    }

    public static RequestAuthenticator none() {
        return new RequestAuthenticator(null);
    }

    public boolean enabled() {
        return enabled;
    }

    /** Bytes the header takes in front of a body. */
    public int headerBytes() {
        return 2 + (enabled() ? TAG_BYTES : 0);
    }

    /** A payload: the header, then {@code body}'s remaining bytes (body's position is not changed). */
    public ByteBuffer seal(int op, ByteBuffer body) {
        ByteBuffer payload = ByteBuffer.allocate(headerBytes() + body.remaining());
        payload.put(VERSION).put(enabled() ? FLAG_TAGGED : 0);
        if (enabled()) {
            payload.put(tag(op, body.duplicate()));
        }
        payload.put(body.duplicate());
        return payload.flip();
    }

    /**
     * Checks {@code payload}'s header and returns the body (a view). A request that fails the
     * check is an {@link AuthenticationException}.
     */
    public ByteBuffer open(int op, ByteBuffer payload) {
        ByteBuffer in = payload.duplicate();
        if (in.remaining() < 2) {
            throw new AuthenticationException("request without a header");
        }
        byte version = in.get();
        byte flags = in.get();
        if (version != VERSION) {
            throw new AuthenticationException("unknown protocol version " + version);
        }
        boolean tagged = (flags & FLAG_TAGGED) != 0;
        if (tagged != enabled()) {
            throw new AuthenticationException(enabled()
                    ? "unauthenticated request refused (authentication is on)"
                    : "authenticated request but authentication is off here (configurations differ)");
        }
        if (!tagged) {
            return in.slice();
        }
        if (in.remaining() < TAG_BYTES) {
            throw new AuthenticationException("truncated authentication tag");
        }
        byte[] received = new byte[TAG_BYTES];
        in.get(received);
        ByteBuffer body = in.slice();
        if (!MessageDigest.isEqual(received, tag(op, body.duplicate()))) {
            throw new AuthenticationException("authentication failed: wrong secret");
        }
        return body;
    }

    private byte[] tag(int op, ByteBuffer body) {
        Mac mac = macs.get();
        mac.update((byte) (op >>> 8));
        mac.update((byte) op);
        mac.update(body);
        return mac.doFinal();
    }

    private Mac newMac() {
        if (!enabled) {
            return null;
        }
        byte[] key = secret;
        if (key == null) {
            String text = secretSupplier.get();
            if (text == null || text.isEmpty()) {
                throw new IllegalStateException("authentication is on but there is no secret");
            }
            key = text.getBytes(StandardCharsets.UTF_8);
            secret = key;
        }
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(new SecretKeySpec(key, ALGORITHM));
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HMAC-SHA256 unavailable", e);
        }
    }

    /** A request failed authentication. */
    public static final class AuthenticationException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public AuthenticationException(String message) {
            super(message);
        }
    }
}
