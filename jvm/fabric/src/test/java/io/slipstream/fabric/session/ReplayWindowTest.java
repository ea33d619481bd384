package io.slipstream.fabric.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ReplayWindowTest {
    @Test
    void eachNumberIsAcceptedOnceInOrderOrNot() {
        ReplayWindow window = new ReplayWindow();
        assertTrue(window.accept(0));
        assertFalse(window.accept(0));
        assertTrue(window.accept(2));
        assertTrue(window.accept(1));
        assertFalse(window.accept(1));
        assertFalse(window.accept(2));
        assertFalse(window.accept(-1));
        assertFalse(window.accept(Long.MIN_VALUE));
    }

    @Test
    void numbersBehindTheWindowAreRefusedAndItsEdgeIsExact() {
        ReplayWindow window = new ReplayWindow();
        assertTrue(window.accept(10_000));
        assertFalse(window.accept(10_000 - ReplayWindow.SIZE), "just behind the window");
        assertTrue(window.accept(10_000 - ReplayWindow.SIZE + 1), "its oldest slot");
        assertFalse(window.accept(10_000 - ReplayWindow.SIZE + 1));
        // Sliding by one pushes that oldest number out; a jump past the whole window clears it.
        assertTrue(window.accept(10_001));
        assertFalse(window.accept(10_000 - ReplayWindow.SIZE + 1));
        assertTrue(window.accept(10_001 + 5 * ReplayWindow.SIZE));
        assertFalse(window.accept(10_001));
        assertTrue(window.accept(10_001 + 5 * ReplayWindow.SIZE - 1));
        assertTrue(window.accept(Long.MAX_VALUE));
        assertFalse(window.accept(Long.MAX_VALUE));
    }

    /** Against the obvious model (every number ever accepted, in a set) over 200,000 reordered, repeated numbers. */
    @Test
    void agreesWithASetOfEverythingAcceptedOverRandomTraffic() {
        Random random = new Random(14);
        ReplayWindow window = new ReplayWindow();
        Set<Long> accepted = new HashSet<>();
        long highest = -1;
        long next = 0;
        int accepts = 0;
        for (int i = 0; i < 200_000; i++) {
            long n;
            int kind = random.nextInt(10);
            if (kind < 6) {
                n = next++; // in order
            } else if (kind < 8) {
                n = Math.max(0, next - 1 - random.nextInt(2 * ReplayWindow.SIZE)); // late, or a replay
            } else if (kind < 9) {
                n = next + random.nextInt(ReplayWindow.SIZE); // early
            } else {
                n = random.nextInt(20) - 10 + next; // around the front, some negative at the start
            }
            boolean expected = n >= 0 && !accepted.contains(n) && n > highest - ReplayWindow.SIZE;
            assertEquals(expected, window.accept(n), "number " + n + " after highest " + highest);
            if (expected) {
                accepted.add(n);
                highest = Math.max(highest, n);
                accepts++;
            }
        }
        // The traffic exercised both answers (a model that agrees on nothing but refusals proves little).
        assertTrue(accepts > 50_000 && accepts < 150_000, "accepted " + accepts);
    }
}
