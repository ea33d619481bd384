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
 * operation code, the flags when they ask for a header-only response MAC (flag 4, below), the scope
 * and the body under the secret. A
 * server with a secret refuses requests without a valid tag; a server without one refuses tagged
 * requests too (the two sides disagree about the configuration: better said than ignored).
 *
 * <p>Responses are authenticated too: when on, a response payload starts with a 32-byte
 * HMAC-SHA256 bound to the request's tag, so a response cannot be forged or moved to another
 * request (the request's tag names it). What else the tag covers is the {@link ResponseMac} the
 * request asks for (flag 4 in its header, covered by its own tag): {@link ResponseMac#FULL} (the
 * default, Spark's), an HMAC of {@code "R"}, the operation code, the request's tag and every byte
 * of the body; or {@link ResponseMac#HEADER} (Hadoop MapReduce's default), an HMAC of {@code "H"},
 * the operation code, the request's tag, the body's length and the parts of the body its protocol
 * names ({@link Coverage}: a FETCH response's header and small blocks, {@link
 * ShuffleProtocol#fetchResponseCoverage}; not the bulk of the data,
 * whose integrity is then the engine's own checksum, as in Hadoop's HTTP shuffle). The two domains
 * ("R", "H") never verify each other's tags, so a reader and a server that disagree on the mode fail
 * instead of accepting bytes nobody checked.
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
    /** The request asks for {@link ResponseMac#HEADER}; set only on authenticated requests. */
    private static final byte FLAG_HEADER_MAC = 4;
    public static final int TAG_BYTES = 32;
    private static final String ALGORITHM = "HmacSHA256";

    private final boolean enabled;
    private final String scope;
    private final byte[] scopeBytes;
    private final Supplier<String> secretSupplier;
    private volatile byte[] secret;
    private final ThreadLocal<Mac> macs;
    private final ResponseMac responseMac;

    /**
     * What a response's tag covers besides the request's tag. On a reader: what its requests ask
     * for. On a server: the least it answers with ({@code FULL} refuses requests asking for
     * {@code HEADER}; {@code HEADER} answers each request in the mode it asks for). Without
     * authentication there is no tag and the mode means nothing.
     */
    public enum ResponseMac {
        /** Every byte of the response: a byte altered on the way fails the response's check. */
        FULL,
        /**
         * What says what the bytes are (for FETCH: each block's length and the bytes returned, the
         * request naming blocks and offsets) and the small blocks, not the bulk of the data: a byte of
         * it altered on the way passes this check and is left to the engine's checksum (Hadoop:
         * every IFile's CRC32, which its {@code MapOutput.shuffle} verifies).
         */
        HEADER
    }

    /**
     * The parts of a response body a {@link ResponseMac#HEADER} tag covers, as ascending,
     * non-overlapping (offset, length) pairs relative to the body's position: a protocol's answer,
     * computed alike by the server from the body it built and by the reader from the body it
     * received (the parts must include whatever the computation read, so that a body that was
     * altered there fails the check). A body that cannot say is a {@link ShuffleProtocol.ProtocolException}.
     */
    @FunctionalInterface
    public interface Coverage {
        int[] ranges(ByteBuffer body);
    }

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
        return scoped(scope, secret, ResponseMac.FULL);
    }

    /** A scoped authenticator whose responses' tags cover what {@code responseMac} says. */
    public static RequestAuthenticator scoped(String scope, String secret, ResponseMac responseMac) {
        if (scope == null) {
            throw new IllegalArgumentException("null scope");
        }
        return new RequestAuthenticator(scope, secret != null, () -> secret, responseMac);
    }

    private RequestAuthenticator(String scope, boolean enabled, Supplier<String> secretSupplier) {
        this(scope, enabled, secretSupplier, ResponseMac.FULL);
    }

    private RequestAuthenticator(String scope, boolean enabled, Supplier<String> secretSupplier, ResponseMac responseMac) {
        this.scope = scope;
        this.scopeBytes = scope == null ? null : scope.getBytes(StandardCharsets.UTF_8);
        if (scopeBytes != null && scopeBytes.length > ShuffleProtocol.STRING_BYTES_MAX) {
            throw new IllegalArgumentException("scope longer than " + ShuffleProtocol.STRING_BYTES_MAX + " bytes");
        }
        this.enabled = enabled;
        this.secretSupplier = secretSupplier;
        this.macs = ThreadLocal.withInitial(this::newMac);
        this.responseMac = java.util.Objects.requireNonNull(responseMac);
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

    /** What this side's requests ask a response's tag to cover (a server: the least it answers with). */
    public ResponseMac responseMac() {
        return responseMac;
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
        byte flags = (byte) ((enabled() ? FLAG_TAGGED : 0) | (scope != null ? FLAG_SCOPED : 0)
                | (enabled() && responseMac == ResponseMac.HEADER ? FLAG_HEADER_MAC : 0));
        payload.put(VERSION).put(flags);
        if (scope != null) {
            payload.putShort((short) scopeBytes.length).put(scopeBytes);
        }
        if (enabled()) {
            payload.put(tag(op, flags, body.duplicate()));
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
        boolean headerMac = (flags & FLAG_HEADER_MAC) != 0;
        if (!tagged) {
            if (headerMac) {
                throw new AuthenticationException("a response MAC over the header asked for without authentication");
            }
            return in.slice();
        }
        if (in.remaining() < TAG_BYTES) {
            throw new AuthenticationException("truncated authentication tag");
        }
        byte[] received = new byte[TAG_BYTES];
        in.get(received);
        ByteBuffer body = in.slice();
        if (!MessageDigest.isEqual(received, tag(op, flags, body.duplicate()))) {
            throw new AuthenticationException("authentication failed: wrong secret");
        }
        // After the tag: the mode is the requester's (a forger flipping the flag fails the tag above).
        if (headerMac && responseMac == ResponseMac.FULL) {
            throw new AuthenticationException("the request asks for response MACs over the header only, but this server "
                    + "MACs every byte of its responses (the two sides' configurations differ)");
        }
        return body;
    }

    /**
     * The {@link ResponseMac} a request payload asks for; call after {@link #open} accepted it (a
     * server answers in that mode, which the requester checks).
     */
    public ResponseMac responseMacOf(ByteBuffer payload) {
        if (!enabled || payload.remaining() < 2) {
            return ResponseMac.FULL;
        }
        return (payload.get(payload.position() + 1) & FLAG_HEADER_MAC) != 0 ? ResponseMac.HEADER : ResponseMac.FULL;
    }

    /**
     * The request's tag: the operation code, the flags when they ask for a header-only response MAC
     * (so that the mode cannot be changed on the way; requests without that flag are tagged as
     * before it existed, byte for byte), the scope and the body.
     */
    private byte[] tag(int op, byte flags, ByteBuffer body) {
        Mac mac = macs.get();
        mac.update((byte) (op >>> 8));
        mac.update((byte) op);
        if ((flags & FLAG_HEADER_MAC) != 0) {
            mac.update(flags);
        }
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
     * {@link #responseHeaderBytes()} to its limit, at its start (no-op when off): over every byte.
     */
    public void signResponse(int op, byte[] requestTag, ByteBuffer response) {
        signResponse(op, requestTag, ResponseMac.FULL, response, null);
    }

    /**
     * Writes the tag of the response whose body fills {@code response} from
     * {@link #responseHeaderBytes()} to its limit, at its start, in the mode the request asked for
     * ({@link #responseMacOf}): {@code HEADER} covers the parts {@code coverage} names (no-op when off).
     */
    public void signResponse(int op, byte[] requestTag, ResponseMac mode, ByteBuffer response, Coverage coverage) {
        if (!enabled) {
            return;
        }
        ByteBuffer body = response.slice(TAG_BYTES, response.limit() - TAG_BYTES);
        response.put(0, mode == ResponseMac.HEADER ? headerTag(op, requestTag, body, coverage) : responseTag(op, requestTag, body));
    }

    /** A response payload for {@code body}: its tag (over every byte), then the body. */
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
     * Checks a response's tag, over every byte, against the request it answers and returns the
     * body (a view). A response that fails is an {@link AuthenticationException}.
     */
    public ByteBuffer openResponse(int op, byte[] requestTag, ByteBuffer response) {
        return openResponse(op, requestTag, response, null, ResponseMac.FULL);
    }

    /**
     * Checks a response's tag in this side's {@link #responseMac()} mode ({@code HEADER}: over what
     * {@code coverage} names) against the request it answers and returns the body (a view). A
     * response that fails is an {@link AuthenticationException}; one whose body {@code coverage}
     * cannot read, a {@link ShuffleProtocol.ProtocolException}.
     */
    public ByteBuffer openResponse(int op, byte[] requestTag, ByteBuffer response, Coverage coverage) {
        return openResponse(op, requestTag, response, coverage, responseMac);
    }

    private ByteBuffer openResponse(int op, byte[] requestTag, ByteBuffer response, Coverage coverage, ResponseMac mode) {
        if (!enabled) {
            return response.duplicate();
        }
        if (response.remaining() < TAG_BYTES) {
            throw new AuthenticationException("response without an authentication tag");
        }
        byte[] received = new byte[TAG_BYTES];
        response.get(response.position(), received);
        ByteBuffer body = response.slice(response.position() + TAG_BYTES, response.remaining() - TAG_BYTES);
        byte[] expected = mode == ResponseMac.HEADER ? headerTag(op, requestTag, body, coverage)
                : responseTag(op, requestTag, body.duplicate());
        if (!MessageDigest.isEqual(received, expected)) {
            throw new AuthenticationException("response authentication failed (altered, forged, wrong secret, or the "
                    + "server answered in another response MAC mode than " + mode + ")");
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

    /**
     * A {@link ResponseMac#HEADER} tag: "H" (never a FULL tag's "R"), the operation code, the
     * request's tag, the body's length (nothing appended or cut off passes), then each covered
     * part's offset, length and bytes.
     */
    private byte[] headerTag(int op, byte[] requestTag, ByteBuffer body, Coverage coverage) {
        int[] ranges = coverage == null ? new int[] {0, body.remaining()} : coverage.ranges(body.duplicate());
        if ((ranges.length & 1) != 0) {
            throw new AuthenticationException("response coverage of " + ranges.length + " numbers, not pairs");
        }
        Mac mac = macs.get();
        mac.update((byte) 'H');
        mac.update((byte) (op >>> 8));
        mac.update((byte) op);
        mac.update(requestTag);
        mac.update(ByteBuffer.allocate(4).putInt(0, body.remaining()));
        int end = 0;
        for (int i = 0; i < ranges.length; i += 2) {
            int offset = ranges[i];
            int length = ranges[i + 1];
            if (offset < end || length < 0 || length > body.remaining() - offset) {
                mac.reset();
                throw new AuthenticationException("response coverage out of order or out of bounds");
            }
            mac.update(ByteBuffer.allocate(8).putInt(0, offset).putInt(4, length));
            mac.update(body.slice(body.position() + offset, length));
            end = offset + length;
        }
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
