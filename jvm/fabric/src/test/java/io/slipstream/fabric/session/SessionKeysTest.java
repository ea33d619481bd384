package io.slipstream.fabric.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.security.InvalidKeyException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

class SessionKeysTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final String PURPOSE = "slipstream test frame v2 hmac-sha256";

    /** A "random" source that hands out one fixed 32-byte private key: the JDK's XDH generator draws exactly that. */
    private static SecureRandom fixed(String privateKeyHex) {
        byte[] key = HEX.parseHex(privateKeyHex);
        return new SecureRandom() {
            private static final long serialVersionUID = 1L;

            @Override
            public void nextBytes(byte[] bytes) {
                assertEquals(key.length, bytes.length);
                System.arraycopy(key, 0, bytes, 0, key.length);
            }
        };
    }

    @Test
    void rfc7748sTestVectorsRoundTripThroughOurEncoding() throws Exception {
        // RFC 7748, section 6.1.
        SessionKeys alice = SessionKeys.generate(fixed("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
        SessionKeys bob = SessionKeys.generate(fixed("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
        assertEquals("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", HEX.formatHex(alice.publicKey()));
        assertEquals("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", HEX.formatHex(bob.publicKey()));
        String shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
        assertEquals(shared, HEX.formatHex(alice.agree(bob.publicKey())));
        assertEquals(shared, HEX.formatHex(bob.agree(alice.publicKey())));
    }

    @Test
    void bothSidesDeriveOneKeyBoundToTheSessionAndBothPublicKeys() throws Exception {
        SessionKeys client = SessionKeys.generate();
        SessionKeys server = SessionKeys.generate();
        byte[] c = client.publicKey();
        byte[] s = server.publicKey();
        byte[] clientKey = SessionKeys.macKey(client.agree(s), 42, c, s, PURPOSE);
        byte[] serverKey = SessionKeys.macKey(server.agree(c), 42, c, s, PURPOSE);
        assertEquals(SessionKeys.MAC_KEY_BYTES, clientKey.length);
        assertArrayEquals(clientKey, serverKey);
        assertFalse(Arrays.equals(clientKey, SessionKeys.macKey(client.agree(s), 43, c, s, PURPOSE)), "another session id");
        assertFalse(Arrays.equals(clientKey, SessionKeys.macKey(client.agree(s), 42, s, c, PURPOSE)), "the keys' roles swapped");
        assertFalse(Arrays.equals(clientKey, SessionKeys.macKey(client.agree(s), 42, c, s, "slipstream other frame v2")),
                "another purpose (engine or version)");
        SessionKeys third = SessionKeys.generate();
        assertFalse(Arrays.equals(clientKey, SessionKeys.macKey(third.agree(s), 42, third.publicKey(), s, PURPOSE)), "another client");
    }

    @Test
    void theSharedSecretIsWipedOnceUsed() throws Exception {
        SessionKeys client = SessionKeys.generate();
        SessionKeys server = SessionKeys.generate();
        byte[] secret = client.agree(server.publicKey());
        SessionKeys.macKey(secret, 1, client.publicKey(), server.publicKey(), PURPOSE);
        assertArrayEquals(new byte[secret.length], secret);
    }

    /**
     * The derivation pinned to RFC 5869 computed independently (Python's hmac module: extract with the
     * session id as salt, one expand block over purpose, client key, server key, 0x01): a change of salt,
     * input order or purpose encoding would change every engine's keys, so it must fail here first.
     */
    @Test
    void theKeyIsHkdfSha256AsRfc5869ComputesIt() {
        byte[] secret = new byte[32];
        byte[] clientKey = new byte[32];
        byte[] serverKey = new byte[32];
        for (int i = 0; i < 32; i++) {
            secret[i] = (byte) i;
            clientKey[i] = (byte) (0x40 + i);
            serverKey[i] = (byte) (0x80 + i);
        }
        assertEquals("dd6c184570be25eb44bf8a69b316564eda63b0fa8279619cdf22be5d76d9e09b",
                HEX.formatHex(SessionKeys.macKey(secret.clone(), 0x1122334455667788L, clientKey, serverKey, PURPOSE)));
        assertEquals("a2462fed164130ecb2ac14b3df8229010c95217949bb4b4a1209d9fd3ab1c9c1", HEX.formatHex(SessionKeys.macKey(
                secret.clone(), 0x1122334455667788L, clientKey, serverKey, "slipstream other frame v2 hmac-sha256")));
    }

    @Test
    void purposesAreShortPrintableAsciiAndTheSecretIsWipedEvenWhenRefused() {
        byte[] c = SessionKeys.generate().publicKey();
        byte[] s = SessionKeys.generate().publicKey();
        for (String bad : new String[] {null, "", "x".repeat(SessionKeys.PURPOSE_CHARS_MAX + 1), "tab\there", "caf\u00e9"}) {
            byte[] secret = new byte[] {1, 2, 3};
            assertThrows(IllegalArgumentException.class, () -> SessionKeys.macKey(secret, 1, c, s, bad), String.valueOf(bad));
            assertArrayEquals(new byte[3], secret, "wiped after refusing " + bad);
        }
        assertEquals(SessionKeys.MAC_KEY_BYTES,
                SessionKeys.macKey(new byte[32], 1, c, s, "x".repeat(SessionKeys.PURPOSE_CHARS_MAX)).length);
    }

    @Test
    void publicKeysOfTheWrongLengthOrOfSmallOrderAreRefused() {
        SessionKeys keys = SessionKeys.generate();
        assertThrows(InvalidKeyException.class, () -> keys.agree(null));
        assertThrows(InvalidKeyException.class, () -> keys.agree(new byte[31]));
        assertThrows(InvalidKeyException.class, () -> keys.agree(new byte[33]));
        // u = 0 and u = 1 are points of small order: the secret would be all zeros, whoever the peer.
        assertThrows(InvalidKeyException.class, () -> keys.agree(new byte[32]));
        byte[] one = new byte[32];
        one[0] = 1;
        assertThrows(InvalidKeyException.class, () -> keys.agree(one));
    }
}
