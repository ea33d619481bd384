package io.slipstream.fabric.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;

class FrameAuthTest {
    private static final byte VERSION = 2;
    private static final long SESSION = 0x1122334455667788L;

    private static byte[] key(int seed) {
        byte[] key = new byte[SessionKeys.MAC_KEY_BYTES];
        new Random(seed).nextBytes(key);
        return key;
    }

    private static byte[] sealed(FrameAuth auth, String body) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        byte[] frame = new byte[FrameAuth.PREFIX_BYTES + bytes.length];
        System.arraycopy(bytes, 0, frame, FrameAuth.PREFIX_BYTES, bytes.length);
        auth.seal(frame, VERSION, SESSION, 7);
        return frame;
    }

    private static byte[] signedResponse(FrameAuth auth, String body, long sequence) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        byte[] response = new byte[FrameAuth.RESPONSE_PREFIX_BYTES + bytes.length];
        System.arraycopy(bytes, 0, response, FrameAuth.RESPONSE_PREFIX_BYTES, bytes.length);
        auth.signResponse(response, VERSION, SESSION, sequence);
        return response;
    }

    @Test
    void aSignedFrameVerifiesAndNoSingleBitOfItCanChange() {
        FrameAuth auth = new FrameAuth(key(1));
        byte[] frame = sealed(auth, "a call's body");
        assertEquals(VERSION, frame[0]);
        assertEquals(SESSION, ByteBuffer.wrap(frame).getLong(FrameAuth.SESSION_OFFSET));
        assertEquals(7, ByteBuffer.wrap(frame).getLong(FrameAuth.SEQUENCE_OFFSET));
        assertTrue(auth.verify(ByteBuffer.wrap(frame)));
        for (int i = 0; i < frame.length; i++) {
            for (int bit = 0; bit < 8; bit++) {
                byte[] altered = frame.clone();
                altered[i] ^= (byte) (1 << bit);
                assertFalse(auth.verify(ByteBuffer.wrap(altered)), "byte " + i + " bit " + bit);
            }
        }
    }

    /**
     * The MAC's input pinned to HMAC-SHA256 computed independently (Python's hmac module) over
     * {@code [version][session][sequence]} and the body, and for a response over
     * {@code [0x80 | version][session][sequence]} and the body: the wire format both engines rely on.
     */
    @Test
    void theMacIsTruncatedHmacSha256OverThePrefixAndBody() {
        byte[] key = new byte[32];
        for (int i = 0; i < key.length; i++) {
            key[i] = (byte) (100 + i);
        }
        FrameAuth auth = new FrameAuth(key);
        byte[] frame = sealed(auth, "a call's body");
        assertEquals("f08389143d52bc6a44a277d0ee4af159",
                HexFormat.of().formatHex(frame, FrameAuth.MAC_OFFSET, FrameAuth.PREFIX_BYTES));
        byte[] response = signedResponse(auth, "a response", 7);
        assertEquals("1b6b83e0abc7cb2a0be8a91a2c9b80b6", HexFormat.of().formatHex(response, 0, FrameAuth.MAC_BYTES));
        // A refusal: over [0xC0 | version][session][sequence] and the reason, in hex after " mac=".
        assertEquals("slipstream-rpc: replayed sequence number mac=945a79500a2cc7a41cead14cb6f5ef71",
                auth.signRefusal("slipstream-rpc: replayed sequence number", VERSION, SESSION, 7));
    }

    @Test
    void anotherKeyDoesNotVerifyAndShortFramesNeverDo() {
        byte[] frame = sealed(new FrameAuth(key(1)), "body");
        assertFalse(new FrameAuth(key(2)).verify(ByteBuffer.wrap(frame)));
        assertFalse(new FrameAuth(key(1)).verify(ByteBuffer.wrap(frame, 0, FrameAuth.PREFIX_BYTES - 1)));
        assertThrows(IllegalArgumentException.class, () -> new FrameAuth(new byte[16]));
        assertThrows(IllegalArgumentException.class, () -> new FrameAuth(key(1)).sign(new byte[FrameAuth.PREFIX_BYTES - 1]));
        assertThrows(IllegalArgumentException.class,
                () -> new FrameAuth(key(1)).seal(new byte[FrameAuth.PREFIX_BYTES], (byte) 0x80, SESSION, 0));
        assertThrows(IllegalArgumentException.class,
                () -> new FrameAuth(key(1)).seal(new byte[FrameAuth.PREFIX_BYTES], (byte) 0, SESSION, 0));
        // 0x40 and up would put a request's first byte where responses' (0x80) and refusals' (0xC0) tags are.
        assertThrows(IllegalArgumentException.class,
                () -> new FrameAuth(key(1)).seal(new byte[FrameAuth.PREFIX_BYTES], (byte) 0x40, SESSION, 0));
        new FrameAuth(key(1)).seal(new byte[FrameAuth.PREFIX_BYTES], (byte) FrameAuth.VERSION_MAX, SESSION, 0);
    }

    @Test
    void verifiesInPlaceInADirectBufferAndLeavesItsPositionAndLimit() {
        FrameAuth auth = new FrameAuth(key(3));
        byte[] frame = sealed(auth, "");
        // As the server receives it: a frame in the middle of a direct (registered) buffer.
        ByteBuffer buffer = ByteBuffer.allocateDirect(frame.length + 20);
        buffer.position(10);
        buffer.put(frame);
        buffer.limit(10 + frame.length).position(10);
        assertTrue(auth.verify(buffer));
        assertEquals(10, buffer.position());
        assertEquals(10 + frame.length, buffer.limit());
    }

    @Test
    void aResponseVerifiesForItsOwnRequestOnlyAndNoSingleBitOfItCanChange() {
        FrameAuth auth = new FrameAuth(key(4));
        byte[] response = signedResponse(auth, "the answer", 41);
        assertTrue(auth.verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION, 41));
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION, 42), "another call's response");
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION + 1, 41), "another session's");
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(response), (byte) 1, SESSION, 41), "another version's");
        assertFalse(new FrameAuth(key(5)).verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION, 41), "another key");
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(response, 0, FrameAuth.RESPONSE_PREFIX_BYTES - 1), VERSION, SESSION,
                41));
        for (int i = 0; i < response.length; i++) {
            byte[] altered = response.clone();
            altered[i] ^= 0x10;
            assertFalse(auth.verifyResponse(ByteBuffer.wrap(altered), VERSION, SESSION, 41), "byte " + i);
        }
        ByteBuffer direct = ByteBuffer.allocateDirect(response.length + 8);
        direct.position(8);
        direct.put(response).position(8);
        assertTrue(auth.verifyResponse(direct, VERSION, SESSION, 41));
        assertEquals(8, direct.position());
    }

    /** A request's MAC never passes for a response's (the 0x80 tag), even where the bytes line up. */
    @Test
    void aRequestsMacIsNoResponsesMac() {
        FrameAuth auth = new FrameAuth(key(6));
        byte[] frame = sealed(auth, "same body");
        byte[] asResponse = new byte[FrameAuth.RESPONSE_PREFIX_BYTES + frame.length - FrameAuth.PREFIX_BYTES];
        System.arraycopy(frame, FrameAuth.MAC_OFFSET, asResponse, 0, FrameAuth.MAC_BYTES);
        System.arraycopy(frame, FrameAuth.PREFIX_BYTES, asResponse, FrameAuth.RESPONSE_PREFIX_BYTES,
                frame.length - FrameAuth.PREFIX_BYTES);
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(asResponse), VERSION, SESSION, 7));
    }

    @Test
    void aRefusalVerifiesForItsOwnRequestOnlyAndNoCharacterOfItCanChange() {
        FrameAuth auth = new FrameAuth(key(7));
        String reason = "slipstream-rpc: session not opened for protocol P";
        String signed = auth.signRefusal(reason, VERSION, SESSION, 41);
        assertEquals(reason.length() + FrameAuth.REFUSAL_MAC_CHARS, signed.length());
        assertEquals(reason, auth.verifyRefusal(signed, VERSION, SESSION, 41));
        assertNull(auth.verifyRefusal(signed, VERSION, SESSION, 42), "another call's refusal");
        assertNull(auth.verifyRefusal(signed, VERSION, SESSION + 1, 41), "another session's");
        assertNull(auth.verifyRefusal(signed, (byte) 1, SESSION, 41), "another version's");
        assertNull(new FrameAuth(key(8)).verifyRefusal(signed, VERSION, SESSION, 41), "another key");
        for (int i = 0; i < signed.length(); i++) {
            char[] altered = signed.toCharArray();
            altered[i] = altered[i] == 'a' ? 'b' : 'a';
            assertNull(auth.verifyRefusal(new String(altered), VERSION, SESSION, 41), "character " + i);
        }
        assertNull(auth.verifyRefusal(reason, VERSION, SESSION, 41), "unsigned");
        assertNull(auth.verifyRefusal(signed.substring(1), VERSION, SESSION, 41), "cut");
        assertNull(auth.verifyRefusal(signed + " ", VERSION, SESSION, 41), "lengthened");
        assertNull(auth.verifyRefusal(signed.toUpperCase(java.util.Locale.ROOT), VERSION, SESSION, 41), "upper case");
        assertNull(auth.verifyRefusal(null, VERSION, SESSION, 41));
        assertNull(auth.verifyRefusal(signed.substring(signed.length() - FrameAuth.REFUSAL_MAC_CHARS + 1), VERSION,
                SESSION, 41), "a MAC alone, cut");
    }

    /** A reason outside printable ASCII is signed as it will reach the client: each such character a '?'. */
    @Test
    void aRefusalsReasonIsSignedAsPrintableAscii() {
        FrameAuth auth = new FrameAuth(key(9));
        String signed = auth.signRefusal("protocol caf\u00e9\n\ud83d\ude00", VERSION, SESSION, 3);
        assertEquals("protocol caf????", auth.verifyRefusal(signed, VERSION, SESSION, 3));
        String smuggled = "protocol caf\u00e9" + signed.substring(signed.length() - FrameAuth.REFUSAL_MAC_CHARS);
        assertNull(auth.verifyRefusal(smuggled, VERSION, SESSION, 3), "only the text as signed verifies");
    }

    /** Requests, responses and refusals never pass for one another, even over the same bytes. */
    @Test
    void aRefusalsMacIsNoResponsesMac() {
        FrameAuth auth = new FrameAuth(key(10));
        String reason = "slipstream-rpc: replayed sequence number";
        byte[] response = signedResponse(auth, reason, 7);
        String asRefusal = reason + FrameAuth.REFUSAL_MAC_MARK + HexFormat.of().formatHex(response, 0, FrameAuth.MAC_BYTES);
        assertNull(auth.verifyRefusal(asRefusal, VERSION, SESSION, 7));
        String signed = auth.signRefusal(reason, VERSION, SESSION, 7);
        byte[] asResponse = new byte[response.length];
        byte[] refusalMac = HexFormat.of().parseHex(signed, signed.length() - 2 * FrameAuth.MAC_BYTES, signed.length());
        System.arraycopy(refusalMac, 0, asResponse, 0, FrameAuth.MAC_BYTES);
        System.arraycopy(response, FrameAuth.RESPONSE_PREFIX_BYTES, asResponse, FrameAuth.RESPONSE_PREFIX_BYTES,
                response.length - FrameAuth.RESPONSE_PREFIX_BYTES);
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(asResponse), VERSION, SESSION, 7));
    }

    /**
     * With header coverage the MAC holds the prefix and the body's length, not its bytes: a body of the same
     * length altered in flight still verifies (as on a socket connection SASL does not wrap), while the
     * session, sequence number, version and length are still bound, and the MAC itself cannot change.
     */
    @Test
    void headerCoverageBindsThePrefixAndTheLengthNotTheBytes() {
        FrameAuth auth = new FrameAuth(key(11), FrameAuth.Coverage.HEADER);
        byte[] frame = sealed(auth, "a call's body");
        assertTrue(auth.verify(ByteBuffer.wrap(frame)));
        for (int i = 0; i < FrameAuth.PREFIX_BYTES; i++) {
            byte[] altered = frame.clone();
            altered[i] ^= 1;
            assertFalse(auth.verify(ByteBuffer.wrap(altered)), "prefix byte " + i);
        }
        byte[] sameLength = frame.clone();
        sameLength[FrameAuth.PREFIX_BYTES] ^= 1;
        assertTrue(auth.verify(ByteBuffer.wrap(sameLength)), "the body's bytes are not covered");
        byte[] longer = java.util.Arrays.copyOf(frame, frame.length + 1);
        assertFalse(auth.verify(ByteBuffer.wrap(longer)), "the length is");
        assertFalse(auth.verify(ByteBuffer.wrap(frame, 0, frame.length - 1)), "a cut body changes the length");

        byte[] response = signedResponse(auth, "an answer", 7);
        assertTrue(auth.verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION, 7));
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(response), VERSION, SESSION, 8), "bound to its request");
        assertFalse(auth.verifyResponse(ByteBuffer.wrap(java.util.Arrays.copyOf(response, response.length + 1)),
                VERSION, SESSION, 7), "and to its length");
    }

    /** The two coverages never take each other's MACs, even with the same key (engines also derive distinct keys). */
    @Test
    void fullAndHeaderMacsDiffer() {
        FrameAuth full = new FrameAuth(key(12));
        FrameAuth header = new FrameAuth(key(12), FrameAuth.Coverage.HEADER);
        assertEquals(FrameAuth.Coverage.FULL, full.coverage());
        assertFalse(header.verify(ByteBuffer.wrap(sealed(full, "a call's body"))));
        assertFalse(full.verify(ByteBuffer.wrap(sealed(header, "a call's body"))));
        assertEquals(FrameAuth.Coverage.HEADER, FrameAuth.Coverage.ofWord(" Header "));
        assertNull(FrameAuth.Coverage.ofWord("none"));
    }
}
