package io.slipstream.fabric.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
}
