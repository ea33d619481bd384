package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.hdfs.FabricBlockWriter.PacketArrays;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The writers' spare packet arrays: reused, of the length asked, and bounded. */
class PacketArraysTest {
    /** A packet size no writer in these tests uses. */
    private static final int LENGTH = 12_345;

    @Test
    void aSpareArrayIsTakenAgainOnlyForItsLengthAndTheSparesStayBounded() {
        byte[] first = PacketArrays.take(LENGTH);
        assertEquals(LENGTH, first.length);
        PacketArrays.give(first);
        assertSame(first, PacketArrays.take(LENGTH), "a spare array is reused");

        PacketArrays.give(new byte[LENGTH + 1]);
        byte[] fresh = PacketArrays.take(LENGTH);
        assertEquals(LENGTH, fresh.length, "an array of another length is never handed out");

        List<byte[]> many = new ArrayList<>();
        for (long bytes = 0; bytes < PacketArrays.SPARE_BYTES_MAX + 10L * LENGTH; bytes += LENGTH) {
            many.add(new byte[LENGTH]);
        }
        many.forEach(PacketArrays::give);
        assertTrue(PacketArrays.spareBytes() <= PacketArrays.SPARE_BYTES_MAX, PacketArrays.spareBytes() + " spare bytes");
        // Drain what this test gave, so that the bound is back for the others.
        for (byte[] taken = PacketArrays.take(LENGTH); PacketArrays.spareBytes() > 0; taken = PacketArrays.take(LENGTH)) {
            assertEquals(LENGTH, taken.length);
        }
        assertNotSame(first, fresh);
    }
}
