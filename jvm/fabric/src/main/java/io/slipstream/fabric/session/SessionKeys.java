package io.slipstream.fabric.session;

import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.InvalidKeyException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.interfaces.XECPublicKey;
import java.security.spec.NamedParameterSpec;
import java.security.spec.XECPublicKeySpec;
import java.util.Arrays;
import javax.crypto.KeyAgreement;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The key a fabric session's frames are authenticated with (docs/hadoop-rpc.md and docs/hbase-rpc.md,
 * "Security"), agreed over the socket connection that opened the session without ever being sent on it:
 * each side makes an ephemeral X25519 key pair (RFC 7748), the public keys ride in the engine's discovery
 * call and its answer, and both derive the key with HKDF-SHA256 (RFC 5869) from the shared secret, salted
 * with the session id and bound to both public keys and to the engine's purpose string. Someone who only
 * watches the socket connection (not encrypted under SASL QOP {@code authentication}) sees two public keys
 * and the session id, not the key.
 *
 * <p>Public keys travel raw: 32 bytes, the little-endian u-coordinate, as RFC 7748 writes them.
 */
public final class SessionKeys {
    public static final int PUBLIC_KEY_BYTES = 32;
    public static final int MAC_KEY_BYTES = 32;
    /** Longest purpose string: HKDF's info is one HMAC block's input, and a purpose is a short name. */
    public static final int PURPOSE_CHARS_MAX = 200;

    private final KeyPair pair;
    private final byte[] publicKey;

    private SessionKeys(KeyPair pair) {
        this.pair = pair;
        this.publicKey = encode(((XECPublicKey) pair.getPublic()).getU());
    }

    /** A fresh ephemeral key pair (one per session opened, on each side). */
    public static SessionKeys generate() {
        return generate(null);
    }

    /** The same from {@code random} (null: the JDK's default {@code SecureRandom}); tests pass RFC 7748's keys. */
    public static SessionKeys generate(SecureRandom random) {
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("XDH");
            if (random == null) {
                generator.initialize(NamedParameterSpec.X25519);
            } else {
                generator.initialize(NamedParameterSpec.X25519, random);
            }
            return new SessionKeys(generator.generateKeyPair());
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK cannot make X25519 keys", e);
        }
    }

    /** This side's public key, raw (32 bytes). */
    public byte[] publicKey() {
        return publicKey.clone();
    }

    /**
     * The X25519 shared secret with the peer's raw public key. Refuses a key of the wrong length and a
     * peer key of small order (the JDK's check: the secret would be all zeros, known to anyone).
     */
    public byte[] agree(byte[] peerPublicKey) throws InvalidKeyException {
        if (peerPublicKey == null || peerPublicKey.length != PUBLIC_KEY_BYTES) {
            throw new InvalidKeyException("an X25519 public key has " + PUBLIC_KEY_BYTES + " bytes, not "
                    + (peerPublicKey == null ? "none" : peerPublicKey.length));
        }
        try {
            PublicKey peer = KeyFactory.getInstance("XDH")
                    .generatePublic(new XECPublicKeySpec(NamedParameterSpec.X25519, decode(peerPublicKey)));
            KeyAgreement agreement = KeyAgreement.getInstance("XDH");
            agreement.init(pair.getPrivate());
            agreement.doPhase(peer, true);
            byte[] secret = agreement.generateSecret();
            if (isZero(secret)) {
                throw new InvalidKeyException("X25519 peer key of small order");
            }
            return secret;
        } catch (InvalidKeyException e) {
            throw e;
        } catch (GeneralSecurityException e) {
            throw new InvalidKeyException("X25519 key agreement failed: " + e.getMessage(), e);
        }
    }

    /**
     * HKDF-SHA256 (RFC 5869) of the shared secret: extract with the session id (8 bytes, big-endian) as the
     * salt, expand one block with HKDF's "info" = {@code purpose} (US-ASCII), the client's and the server's
     * public keys. Both sides call it with the keys in that order. The shared secret is wiped.
     *
     * <p>{@code purpose} names the engine, the frame version and the MAC (e.g.
     * {@code "slipstream hadoop-rpc frame v3 hmac-sha256"}), so that a key can never be taken for a key of
     * another engine, use or version: each engine passes its own, fixed string.
     */
    public static byte[] macKey(byte[] sharedSecret, long sessionId, byte[] clientPublicKey, byte[] serverPublicKey,
            String purpose) {
        // Inside the try: the secret is wiped whatever is refused.
        try {
            if (clientPublicKey.length != PUBLIC_KEY_BYTES || serverPublicKey.length != PUBLIC_KEY_BYTES) {
                throw new IllegalArgumentException("public keys of " + clientPublicKey.length + " and "
                        + serverPublicKey.length + " bytes");
            }
            byte[] info = purposeBytes(purpose);
            Mac hmac = Mac.getInstance("HmacSHA256");
            hmac.init(new SecretKeySpec(ByteBuffer.allocate(8).putLong(sessionId).array(), "HmacSHA256"));
            byte[] prk = hmac.doFinal(sharedSecret);
            hmac.init(new SecretKeySpec(prk, "HmacSHA256"));
            hmac.update(info);
            hmac.update(clientPublicKey);
            hmac.update(serverPublicKey);
            hmac.update((byte) 1);
            byte[] okm = hmac.doFinal();
            Arrays.fill(prk, (byte) 0);
            return okm; // SHA-256: exactly MAC_KEY_BYTES
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK has no HmacSHA256", e);
        } finally {
            Arrays.fill(sharedSecret, (byte) 0);
        }
    }

    /** A purpose string as HKDF's info: 1 to {@link #PURPOSE_CHARS_MAX} printable ASCII characters. */
    private static byte[] purposeBytes(String purpose) {
        if (purpose == null || purpose.isEmpty() || purpose.length() > PURPOSE_CHARS_MAX
                || !purpose.chars().allMatch(c -> c >= 0x20 && c < 0x7f)) {
            throw new IllegalArgumentException("a key purpose is 1 to " + PURPOSE_CHARS_MAX
                    + " printable ASCII characters: " + purpose);
        }
        return purpose.getBytes(StandardCharsets.US_ASCII);
    }

    /** RFC 7748: 32 bytes, little-endian. */
    static byte[] encode(BigInteger u) {
        byte[] bigEndian = u.toByteArray();
        byte[] out = new byte[PUBLIC_KEY_BYTES];
        for (int i = 0; i < out.length && i < bigEndian.length; i++) {
            out[i] = bigEndian[bigEndian.length - 1 - i];
        }
        return out;
    }

    /** RFC 7748's decoding: little-endian, the top bit masked. */
    static BigInteger decode(byte[] raw) {
        byte[] bigEndian = new byte[raw.length];
        for (int i = 0; i < raw.length; i++) {
            bigEndian[i] = raw[raw.length - 1 - i];
        }
        bigEndian[0] &= 0x7f;
        return new BigInteger(1, bigEndian);
    }

    private static boolean isZero(byte[] bytes) {
        int or = 0;
        for (byte b : bytes) {
            or |= b;
        }
        return or == 0;
    }
}
