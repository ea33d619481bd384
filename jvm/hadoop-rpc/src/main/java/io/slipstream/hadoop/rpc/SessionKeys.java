package io.slipstream.hadoop.rpc;

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
 * The key a fabric session's frames are authenticated with (docs/hadoop-rpc.md, "Security"), agreed over
 * the socket connection that opened the session without ever being sent on it: each side makes an
 * ephemeral X25519 key pair (RFC 7748), the public keys ride in the discovery call and its answer, and both
 * derive the key with HKDF-SHA256 (RFC 5869) from the shared secret, salted with the session id and bound
 * to both public keys. Someone who only watches the socket connection (it is not encrypted under
 * {@code hadoop.rpc.protection=authentication}) sees two public keys and the session id, not the key.
 *
 * <p>Public keys travel raw: 32 bytes, the little-endian u-coordinate, as RFC 7748 writes them.
 */
final class SessionKeys {
    static final int PUBLIC_KEY_BYTES = 32;
    static final int MAC_KEY_BYTES = 32;
    /** HKDF's "info": what the key is for, so it can never be mistaken for a key of another use or version. */
    private static final byte[] INFO = "slipstream hadoop-rpc frame v2 hmac-sha256".getBytes(StandardCharsets.US_ASCII);

    private final KeyPair pair;
    private final byte[] publicKey;

    private SessionKeys(KeyPair pair) {
        this.pair = pair;
        this.publicKey = encode(((XECPublicKey) pair.getPublic()).getU());
    }

    /** A fresh ephemeral key pair (one per session opened, on each side). */
    static SessionKeys generate() {
        return generate(null);
    }

    /** The same from {@code random} (null: the JDK's default {@code SecureRandom}); tests pass RFC 7748's keys. */
    static SessionKeys generate(SecureRandom random) {
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
    byte[] publicKey() {
        return publicKey.clone();
    }

    /**
     * The X25519 shared secret with the peer's raw public key. Refuses a key of the wrong length and a
     * peer key of small order (the JDK's check: the secret would be all zeros, known to anyone).
     */
    byte[] agree(byte[] peerPublicKey) throws InvalidKeyException {
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
     * salt, expand one block with {@link #INFO}, the client's and the server's public keys. Both sides call
     * it with the keys in that order. The shared secret is wiped.
     */
    static byte[] macKey(byte[] sharedSecret, long sessionId, byte[] clientPublicKey, byte[] serverPublicKey) {
        if (clientPublicKey.length != PUBLIC_KEY_BYTES || serverPublicKey.length != PUBLIC_KEY_BYTES) {
            throw new IllegalArgumentException("public keys of " + clientPublicKey.length + " and " + serverPublicKey.length
                    + " bytes");
        }
        try {
            Mac hmac = Mac.getInstance("HmacSHA256");
            hmac.init(new SecretKeySpec(ByteBuffer.allocate(8).putLong(sessionId).array(), "HmacSHA256"));
            byte[] prk = hmac.doFinal(sharedSecret);
            hmac.init(new SecretKeySpec(prk, "HmacSHA256"));
            hmac.update(INFO);
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
