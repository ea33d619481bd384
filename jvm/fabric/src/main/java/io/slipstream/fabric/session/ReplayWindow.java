package io.slipstream.fabric.session;

import java.util.Arrays;

/**
 * The sequence numbers a session's server has accepted, so that a frame seen once (e.g. copied off the
 * wire) is refused when sent again. A client numbers its calls 0, 1, 2, ... but its threads may send them
 * out of order, so this is a sliding window as IPsec's (RFC 4303, 3.4.3): the highest number accepted, and
 * a bitmap of the {@link #SIZE} numbers up to it. A number above the highest is new and slides the window;
 * one within it is accepted once; one below it is refused as too old (the engine's client sends that call
 * again under a new number: a refused frame was never queued). Memory per session: {@code SIZE / 8} bytes.
 */
public final class ReplayWindow {
    public static final int SIZE = 1024;

    /** Bit {@code n % SIZE} set: number n accepted, for n in (highest - SIZE, highest]. */
    private final long[] seen = new long[SIZE / 64];
    private long highest = -1;

    /** Whether {@code sequence} is accepted now (it is then remembered); negative numbers never are. */
    public synchronized boolean accept(long sequence) {
        if (sequence < 0) {
            return false;
        }
        if (sequence > highest) {
            long advance = sequence - highest;
            if (advance >= SIZE) {
                Arrays.fill(seen, 0L);
            } else {
                // Forget the numbers that leave the window: their slots now stand for highest+1 .. sequence.
                for (long n = highest + 1; n <= sequence; n++) {
                    clear(n);
                }
            }
            highest = sequence;
            set(sequence);
            return true;
        }
        if (highest - sequence >= SIZE || isSet(sequence)) {
            return false;
        }
        set(sequence);
        return true;
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
