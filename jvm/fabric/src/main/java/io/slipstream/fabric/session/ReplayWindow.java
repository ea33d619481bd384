package io.slipstream.fabric.session;

import java.util.Arrays;

/**
 * The sequence numbers a session's server has accepted, so that a frame seen once (e.g. copied off the
 * wire) is refused when sent again, and so that the server can say which of two things a refused number is.
 *
 * <p>A client numbers its frames 0, 1, 2, ... but its threads may send them out of order, and a large frame
 * arrives after many small ones sent after it; so this is a sliding window as IPsec's (RFC 4303, 3.4.3): the
 * highest number accepted, and a bitmap of the {@link #SIZE} numbers up to it. A number above the highest is
 * new and slides the window; one within it is accepted once. The numbers that leave the window without having
 * been seen are remembered, the {@link #MISSED_MAX} highest of them, and each is accepted once when its frame
 * comes at last: a frame overtaken by more than {@code SIZE} others is taken, not refused.
 *
 * <p>Every refusal is therefore one of two {@link Verdict}s, and neither means "this frame's call never ran":
 * {@link Verdict#REPLAYED}, the number was accepted before (a copy of this frame was taken: its call ran or
 * runs), or {@link Verdict#TOO_OLD}, the number is below the window and not remembered, so the window cannot
 * tell whether it was taken. An engine's client must not send the call again on either (docs/hadoop-rpc.md,
 * "Security"). Memory per session: {@code SIZE / 8} bytes, and {@code MISSED_MAX * 8} more once a number was
 * missed.
 */
public final class ReplayWindow {
    public static final int SIZE = 1024;
    /** Numbers that left the window unseen, remembered at most (the highest ones). */
    public static final int MISSED_MAX = 64;

    /** What {@link #check} says of a sequence number. */
    public enum Verdict {
        /** New: accepted now, and remembered. */
        ACCEPTED,
        /** Accepted before: this is a copy of a frame already taken. */
        REPLAYED,
        /** Below the window and not remembered as missed: whether it was taken cannot be told (or it is negative). */
        TOO_OLD
    }

    /** Bit {@code n % SIZE} set: number n accepted, for n in (highest - SIZE, highest]. */
    private final long[] seen = new long[SIZE / 64];
    private long highest = -1;
    /** Numbers at most highest - SIZE never accepted, ascending, the first {@code missedCount} slots; null until one is. */
    private long[] missed;
    private int missedCount;
    /** The highest number that left the window unseen and is not in {@link #missed}: up to it, a verdict is TOO_OLD. */
    private long forgottenUpTo = -1;

    /** The verdict on {@code sequence}; an accepted number is remembered, so a second check of it says REPLAYED. */
    public synchronized Verdict check(long sequence) {
        if (sequence < 0) {
            return Verdict.TOO_OLD;
        }
        if (sequence > highest) {
            slide(sequence);
            highest = sequence;
            set(sequence);
            return Verdict.ACCEPTED;
        }
        if (highest - sequence < SIZE) {
            if (isSet(sequence)) {
                return Verdict.REPLAYED;
            }
            set(sequence);
            return Verdict.ACCEPTED;
        }
        int at = missedIndex(sequence);
        if (at >= 0) {
            System.arraycopy(missed, at + 1, missed, at, missedCount - at - 1);
            missedCount--;
            return Verdict.ACCEPTED;
        }
        // Every number that left the window unseen is in `missed` or at most forgottenUpTo: above it, this one was
        // accepted (in the window, or late from `missed`).
        return sequence <= forgottenUpTo ? Verdict.TOO_OLD : Verdict.REPLAYED;
    }

    /**
     * Moves the window's top to {@code top}: the numbers that leave it unseen (those at most {@code top - SIZE}
     * not accepted, the ones never in it included) go to {@link #missed} in ascending order, so that it keeps the
     * highest {@link #MISSED_MAX} of them; then the slots of the numbers coming in are cleared. Bounded work: at
     * most {@code SIZE + MISSED_MAX + 1} numbers looked at, however far the window moves.
     */
    private void slide(long top) {
        long advance = top - highest;
        if (advance < SIZE) {
            // The usual case, one number at a time: each number coming in takes the slot of the one leaving.
            for (long n = highest + 1; n <= top; n++) {
                long leaving = n - SIZE;
                if (leaving >= 0 && !isSet(n)) {
                    addMissed(leaving);
                }
                clear(n);
            }
            return;
        }
        // A jump past the whole window: the numbers in it and those skipped leave at once. Down from the highest
        // leaving number until MISSED_MAX unseen ones are found; the next unseen one below them (if any) is the
        // highest forgotten.
        long leavingHigh = top - SIZE;
        long leavingLow = Math.max(highest - SIZE + 1, 0);
        long n = leavingHigh;
        int found = 0;
        for (; n >= leavingLow; n--) {
            if (unseen(n)) {
                if (found == MISSED_MAX) {
                    forgottenUpTo = Math.max(forgottenUpTo, n);
                    break;
                }
                found++;
            }
        }
        for (long k = n + 1; k <= leavingHigh; k++) {
            if (unseen(k)) {
                addMissed(k);
            }
        }
        Arrays.fill(seen, 0L);
    }

    /** Whether {@code n} (a number leaving the window) was never accepted: above the highest, or its bit clear. */
    private boolean unseen(long n) {
        return n > highest || !isSet(n);
    }

    /** Appends {@code n}, above every number in {@link #missed}; when full, the lowest is forgotten. */
    private void addMissed(long n) {
        if (missed == null) {
            missed = new long[MISSED_MAX];
        }
        assert missedCount == 0 || missed[missedCount - 1] < n;
        if (missedCount == MISSED_MAX) {
            forgottenUpTo = Math.max(forgottenUpTo, missed[0]);
            System.arraycopy(missed, 1, missed, 0, MISSED_MAX - 1);
            missedCount--;
        }
        missed[missedCount++] = n;
    }

    private int missedIndex(long n) {
        return missed == null ? -1 : Math.max(-1, Arrays.binarySearch(missed, 0, missedCount, n));
    }

    private void set(long n) {
        int slot = (int) (n % SIZE);
        seen[slot >>> 6] |= 1L << (slot & 63);
    }

    private void clear(long n) {
        int slot = (int) (n % SIZE);
        seen[slot >>> 6] &= ~(1L << (slot & 63));
    }

    private boolean isSet(long n) {
        int slot = (int) (n % SIZE);
        return (seen[slot >>> 6] & (1L << (slot & 63))) != 0;
    }
}
