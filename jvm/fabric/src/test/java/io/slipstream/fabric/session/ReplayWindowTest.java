package io.slipstream.fabric.session;

import static io.slipstream.fabric.session.ReplayWindow.Verdict.ACCEPTED;
import static io.slipstream.fabric.session.ReplayWindow.Verdict.REPLAYED;
import static io.slipstream.fabric.session.ReplayWindow.Verdict.TOO_OLD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.session.ReplayWindow.Verdict;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ReplayWindowTest {
    private static final int SIZE = ReplayWindow.SIZE;
    private static final int MISSED_MAX = ReplayWindow.MISSED_MAX;

    @Test
    void eachNumberIsAcceptedOnceInOrderOrNot() {
        ReplayWindow window = new ReplayWindow();
        assertEquals(ACCEPTED, window.check(0));
        assertEquals(REPLAYED, window.check(0));
        assertEquals(ACCEPTED, window.check(2));
        assertEquals(ACCEPTED, window.check(1));
        assertEquals(REPLAYED, window.check(1));
        assertEquals(REPLAYED, window.check(2));
        assertEquals(TOO_OLD, window.check(-1));
        assertEquals(TOO_OLD, window.check(Long.MIN_VALUE));
    }

    @Test
    void theWindowsEdgeIsExact() {
        ReplayWindow window = new ReplayWindow();
        for (long n = 0; n <= 10_000; n++) {
            assertEquals(ACCEPTED, window.check(n));
        }
        assertEquals(REPLAYED, window.check(10_000 - SIZE), "just behind the window, seen");
        assertEquals(REPLAYED, window.check(10_000 - SIZE + 1), "its oldest slot, seen");
        assertEquals(REPLAYED, window.check(0), "long gone, but nothing was ever missed: seen");
        // Sliding by one pushes the oldest number out; a jump past the whole window clears it.
        assertEquals(ACCEPTED, window.check(10_001));
        assertEquals(ACCEPTED, window.check(10_001 + 5 * SIZE));
        // The jump left more numbers unseen behind it than are remembered: below those, the window cannot tell.
        assertEquals(TOO_OLD, window.check(10_001));
        assertEquals(ACCEPTED, window.check(10_001 + 5 * SIZE - 1));
        assertEquals(ACCEPTED, window.check(Long.MAX_VALUE));
        assertEquals(REPLAYED, window.check(Long.MAX_VALUE));
    }

    /** A frame overtaken by more than SIZE others (a large one, or a thread held up) is taken when it comes, once. */
    @Test
    void aNumberThatLeftTheWindowUnseenIsAcceptedOnceLater() {
        ReplayWindow window = new ReplayWindow();
        long late = 5;
        for (long n = 0; n <= late + 3 * SIZE; n++) {
            if (n != late) {
                assertEquals(ACCEPTED, window.check(n));
            }
        }
        assertEquals(ACCEPTED, window.check(late), "missed, remembered: taken now");
        assertEquals(REPLAYED, window.check(late), "and only once");
        assertEquals(REPLAYED, window.check(late + 1), "its neighbour was taken in its time");
    }

    /** Beyond MISSED_MAX missed numbers the lowest are forgotten: for those the window can only say it cannot tell. */
    @Test
    void theLowestMissedNumbersAreForgottenAndThenTooOld() {
        ReplayWindow window = new ReplayWindow();
        // Numbers 0 .. 2 * MISSED_MAX - 1 never come: a jump to the top leaves them all behind at once.
        long top = 2 * MISSED_MAX + SIZE + 10;
        assertEquals(ACCEPTED, window.check(top));
        long missedHigh = top - SIZE;
        long forgottenHigh = missedHigh - MISSED_MAX;
        for (long n = forgottenHigh + 1; n <= missedHigh; n++) {
            assertEquals(ACCEPTED, window.check(n), "remembered: " + n);
        }
        for (long n = 0; n <= forgottenHigh; n++) {
            assertEquals(TOO_OLD, window.check(n), "forgotten: " + n);
        }
        // The remembered ones, now taken, are replays; a jump past everything is bounded work.
        assertEquals(REPLAYED, window.check(missedHigh));
        assertEquals(ACCEPTED, window.check(Long.MAX_VALUE - 1));
        assertEquals(ACCEPTED, window.check(Long.MAX_VALUE - 1 - SIZE), "just missed by the jump: remembered");
        assertEquals(TOO_OLD, window.check(Long.MAX_VALUE - 1 - SIZE - MISSED_MAX), "one too many to remember");
        assertEquals(TOO_OLD, window.check(top), "seen long ago, but below a forgotten number: cannot tell");
    }

    /**
     * Against the obvious model over 200,000 reordered, repeated numbers: every number ever accepted in a set, and
     * the numbers that left the window unaccepted in a queue of MISSED_MAX (the oldest dropped first, and remembered
     * as the highest forgotten). ACCEPTED exactly once per number, REPLAYED only for a number accepted before.
     */
    @Test
    void agreesWithAModelOfEverythingAcceptedOverRandomTraffic() {
        Random random = new Random(14);
        ReplayWindow window = new ReplayWindow();
        Set<Long> accepted = new HashSet<>();
        ArrayDeque<Long> missed = new ArrayDeque<>();
        long forgotten = -1;
        long highest = -1;
        long next = 0;
        int[] counts = new int[Verdict.values().length];
        for (int i = 0; i < 200_000; i++) {
            long n;
            int kind = random.nextInt(20);
            if (kind == 0 && random.nextBoolean()) {
                next += 1 + random.nextInt(MISSED_MAX); // numbers never sent (a frame made and then not sent)
                n = next++;
            } else if (kind < 12) {
                n = next++; // in order
            } else if (kind < 16) {
                n = Math.max(0, next - 1 - random.nextInt(2 * SIZE)); // late, or a replay
            } else if (kind < 17) {
                n = Math.max(0, next - 1 - random.nextInt(8 * SIZE)); // very late
            } else if (kind < 19) {
                n = next + random.nextInt(SIZE); // early
            } else {
                n = random.nextInt(20) - 10 + next; // around the front, some negative at the start
            }
            Verdict expected;
            if (n < 0) {
                expected = TOO_OLD;
            } else if (accepted.contains(n)) {
                expected = n > highest - SIZE || n > forgotten ? REPLAYED : TOO_OLD;
            } else if (n > highest - SIZE || missed.contains(n)) {
                expected = ACCEPTED;
            } else {
                assertTrue(n <= forgotten, "a number below the window, never accepted, is missed or forgotten: " + n);
                expected = TOO_OLD;
            }
            assertEquals(expected, window.check(n), "number " + n + " after highest " + highest);
            counts[expected.ordinal()]++;
            if (expected == ACCEPTED) {
                accepted.add(n);
                missed.remove(n);
                if (n > highest) {
                    for (long leaving = Math.max(0, highest - SIZE + 1); leaving <= n - SIZE; leaving++) {
                        if (!accepted.contains(leaving)) {
                            missed.addLast(leaving);
                            if (missed.size() > MISSED_MAX) {
                                forgotten = Math.max(forgotten, missed.removeFirst());
                            }
                        }
                    }
                    highest = n;
                }
            }
        }
        // The traffic exercised every answer (a model that agrees on nothing but refusals proves little).
        assertTrue(counts[ACCEPTED.ordinal()] > 100_000, "accepted " + counts[ACCEPTED.ordinal()]);
        assertTrue(counts[REPLAYED.ordinal()] > 10_000, "replayed " + counts[REPLAYED.ordinal()]);
        assertTrue(counts[TOO_OLD.ordinal()] > 1_000, "too old " + counts[TOO_OLD.ordinal()]);
    }
}
