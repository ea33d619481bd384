package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

class FrameAuthTest {
    private static byte[] key(int seed) {
        byte[] key = new byte[SessionKeys.MAC_KEY_BYTES];
        new Random(seed).nextBytes(key);
        return key;
    }

    private static byte[] sealed(FrameAuth auth, String body) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        byte[] frame = new byte[Frames.PREFIX_BYTES + bytes.length];
        System.arraycopy(bytes, 0, frame, Frames.PREFIX_BYTES, bytes.length);
        Frames.seal(frame, 0x1122334455667788L, 7, auth);
        return frame;
    }

    @Test
    void aSignedFrameVerifiesAndNoSingleBitOfItCanChange() {
        FrameAuth auth = new FrameAuth(key(1));
        byte[] frame = sealed(auth, "a call's body");
        assertEquals(Frames.FRAME_VERSION, frame[0]);
        assertEquals(0x1122334455667788L, ByteBuffer.wrap(frame).getLong(Frames.SESSION_OFFSET));
        assertEquals(7, ByteBuffer.wrap(frame).getLong(Frames.SEQUENCE_OFFSET));
        assertTrue(auth.verify(ByteBuffer.wrap(frame)));
        for (int i = 0; i < frame.length; i++) {
            for (int bit = 0; bit < 8; bit++) {
                byte[] altered = frame.clone();
                altered[i] ^= (byte) (1 << bit);
                assertFalse(auth.verify(ByteBuffer.wrap(altered)), "byte " + i + " bit " + bit);
            }
        }
    }

    @Test
    void anotherKeyDoesNotVerifyAndShortFramesNeverDo() {
        byte[] frame = sealed(new FrameAuth(key(1)), "body");
        assertFalse(new FrameAuth(key(2)).verify(ByteBuffer.wrap(frame)));
        assertFalse(new FrameAuth(key(1)).verify(ByteBuffer.wrap(frame, 0, Frames.PREFIX_BYTES - 1)));
        assertThrows(IllegalArgumentException.class, () -> new FrameAuth(new byte[16]));
        assertThrows(IllegalArgumentException.class, () -> new FrameAuth(key(1)).sign(new byte[Frames.PREFIX_BYTES - 1]));
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
}
