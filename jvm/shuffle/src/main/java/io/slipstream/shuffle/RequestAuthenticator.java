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
 * <p>Each request payload starts with a header: {@code u8 version, u8 flags}, when scoped a
 * {@code str scope} (flag 2: which secret and which map outputs, for a server shared by several
 * applications, e.g. Hadoop's jobs), and, when authenticated, a 32-byte HMAC-SHA256 of the
 * operation code, the scope and the body under the secret. A
 * server with a secret refuses requests without a valid tag; a server without one refuses tagged
 * requests too (the two sides disagree about the configuration: better said than ignored).
 *
 * <p>Responses are authenticated too: when on, a response payload starts with a 32-byte
 * HMAC-SHA256 of {@code "R"}, the operation code, the request's tag and the response body, so a
 * response cannot be forged, altered, or moved to another request (the request's tag names it).
 *
 * <p>What this does not do: it does not encrypt (shuffle bytes travel in clear; the Spark adapter
 * refuses to run when Spark's network encryption is on), and it does not stop the replay of a
 * captured request, which only fetches the same bytes again (or the replay of a captured
 * response to the identical request).
 */
public final class RequestAuthenticator {
    /** 2: responses carry a tag too, and LOOKUP answers a status (unknown, found, gone). */
    public static final byte VERSION = 2;
    private static final byte FLAG_TAGGED = 1;
    private static final byte FLAG_SCOPED = 2;
    public static final int TAG_BYTES = 32;
    private static final String ALGORITHM = "HmacSHA256";

    private final boolean enabled;
    private final String scope;
    private final byte[] scopeBytes;
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
        this(null, enabled, secretSupplier);
    }

    /**
     * A scoped authenticator: its requests name {@code scope} (at most
     * {@link ShuffleProtocol#STRING_BYTES_MAX} bytes of UTF-8), covered by the tag, and it opens
     * only requests naming the same scope. {@code secret} null: not authenticated.
     */
    public static RequestAuthenticator scoped(String scope, String secret) {
        if (scope == null) {
            throw new IllegalArgumentException("null scope");
        }
        return new RequestAuthenticator(scope, secret != null, () -> secret);
    }

    private RequestAuthenticator(String scope, boolean enabled, Supplier<String> secretSupplier) {
        this.scope = scope;
        this.scopeBytes = scope == null ? null : scope.getBytes(StandardCharsets.UTF_8);
        if (scopeBytes != null && scopeBytes.length > ShuffleProtocol.STRING_BYTES_MAX) {
            throw new IllegalArgumentException("scope longer than " + ShuffleProtocol.STRING_BYTES_MAX + " bytes");
        }
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
        return 2 + (scope != null ? 2 + scopeBytes.length : 0) + (enabled() ? TAG_BYTES : 0);
    }

    /** The scope this authenticator's requests name, or null. */
    public String scope() {
        return scope;
    }

    /**
     * The scope a request payload names, or null if unscoped: a server shared by several scopes
     * reads it first to choose the authenticator that then {@link #open}s the payload. A malformed
     * header is an {@link AuthenticationException}.
     */
    public static String scopeOf(ByteBuffer payload) {
        ByteBuffer in = payload.duplicate();
        if (in.remaining() < 2) {
            throw new AuthenticationException("request without a header");
        }
        in.get();
        if ((in.get() & FLAG_SCOPED) == 0) {
            return null;
        }
        try {
            return ShuffleProtocol.getString(in);
        } catch (ShuffleProtocol.ProtocolException e) {
            throw new AuthenticationException("malformed scope: " + e.getMessage());
        }
    }

    /** A payload: the header, then {@code body}'s remaining bytes (body's position is not changed). */
    public ByteBuffer seal(int op, ByteBuffer body) {
        ByteBuffer payload = ByteBuffer.allocate(headerBytes() + body.remaining());
        payload.put(VERSION).put((byte) ((enabled() ? FLAG_TAGGED : 0) | (scope != null ? FLAG_SCOPED : 0)));
        if (scope != null) {
            payload.putShort((short) scopeBytes.length).put(scopeBytes);
        }
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
        if (((flags & FLAG_SCOPED) != 0) != (scope != null)) {
            throw new AuthenticationException(scope != null ? "request without a scope refused" : "scoped request refused here");
        }
        if (scope != null) {
            byte[] named;
            try {
                named = ShuffleProtocol.getString(in).getBytes(StandardCharsets.UTF_8);
            } catch (ShuffleProtocol.ProtocolException e) {
                throw new AuthenticationException("malformed scope: " + e.getMessage());
            }
            if (!MessageDigest.isEqual(named, scopeBytes)) {
                throw new AuthenticationException("request for another scope refused");
            }
        }
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
        if (scopeBytes != null) {
            mac.update((byte) (scopeBytes.length >>> 8));
            mac.update((byte) scopeBytes.length);
            mac.update(scopeBytes);
        }
        mac.update(body);
        return mac.doFinal();
    }

    /** The request's tag (empty when authentication is off): what a response's tag is bound to. */
    public byte[] requestTag(ByteBuffer payload) {
        // The tag ends the header, after the version, the flags and (when scoped) the scope.
        int tagOffset = headerBytes() - TAG_BYTES;
        if (!enabled || payload.remaining() < headerBytes()) {
            return new byte[0];
        }
        byte[] tag = new byte[TAG_BYTES];
        payload.get(payload.position() + tagOffset, tag);
        return tag;
    }

    /** Bytes a response's tag takes in front of its body. */
    public int responseHeaderBytes() {
        return enabled ? TAG_BYTES : 0;
    }

    /**
     * Writes the tag of the response whose body fills {@code response} from
     * {@link #responseHeaderBytes()} to its limit, at its start (no-op when off).
     */
    public void signResponse(int op, byte[] requestTag, ByteBuffer response) {
        if (!enabled) {
            return;
        }
        byte[] tag = responseTag(op, requestTag, response.slice(TAG_BYTES, response.limit() - TAG_BYTES));
        response.put(0, tag);
    }

    /** A response payload for {@code body}: its tag, then the body. */
    public ByteBuffer sealResponse(int op, byte[] requestTag, ByteBuffer body) {
        if (!enabled) {
            return body;
        }
        ByteBuffer out = ByteBuffer.allocate(TAG_BYTES + body.remaining());
        out.position(TAG_BYTES);
        out.put(body.duplicate());
        out.flip();
        signResponse(op, requestTag, out);
        return out;
    }

    /**
     * Checks a response's tag against the request it answers and returns the body (a view).
     * A response that fails is an {@link AuthenticationException}.
     */
    public ByteBuffer openResponse(int op, byte[] requestTag, ByteBuffer response) {
        if (!enabled) {
            return response.duplicate();
        }
        if (response.remaining() < TAG_BYTES) {
            throw new AuthenticationException("response without an authentication tag");
        }
        byte[] received = new byte[TAG_BYTES];
        response.get(response.position(), received);
        ByteBuffer body = response.slice(response.position() + TAG_BYTES, response.remaining() - TAG_BYTES);
        if (!MessageDigest.isEqual(received, responseTag(op, requestTag, body.duplicate()))) {
            throw new AuthenticationException("response authentication failed (altered, forged or wrong secret)");
        }
        return body;
    }

    private byte[] responseTag(int op, byte[] requestTag, ByteBuffer body) {
        Mac mac = macs.get();
        mac.update((byte) 'R');
        mac.update((byte) (op >>> 8));
        mac.update((byte) op);
        mac.update(requestTag);
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
