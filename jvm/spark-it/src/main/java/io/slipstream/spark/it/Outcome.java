package io.slipstream.spark.it;

import java.util.Objects;

/**
 * A scenario's result in two numbers: how many records, and a 64-bit digest of all of them. Unordered digests add
 * the records' hashes (any order, any partitioning gives the same sum); ordered ones are polynomial hashes, so a
 * record out of place changes them.
 */
public final class Outcome {

    /** The polynomial's base (odd, so powers never vanish modulo 2^64). */
    static final long ORDER_BASE = 0x9e3779b97f4a7c15L;

    public final long count;
    public final long digest;

    public Outcome(long count, long digest) {
        this.count = count;
        this.digest = digest;
    }

    public static final Outcome EMPTY = new Outcome(0, 0);

    /** Adds one record to an unordered digest. */
    public Outcome plusUnordered(long recordHash) {
        return new Outcome(count + 1, digest + recordHash);
    }

    public Outcome combineUnordered(Outcome other) {
        return new Outcome(count + other.count, digest + other.digest);
    }

    /** Appends one record to an ordered digest. */
    public Outcome plusOrdered(long recordHash) {
        return new Outcome(count + 1, digest * ORDER_BASE + recordHash);
    }

    /** The ordered digest of this sequence followed by {@code next}. */
    public Outcome concatOrdered(Outcome next) {
        return new Outcome(count + next.count, digest * power(ORDER_BASE, next.count) + next.digest);
    }

    private static long power(long base, long exponent) {
        long result = 1;
        while (exponent > 0) {
            if ((exponent & 1) != 0) {
                result *= base;
            }
            base *= base;
            exponent >>= 1;
        }
        return result;
    }

    /** The form of RESULT lines: digest in hex, then the count. */
    @Override
    public String toString() {
        return String.format("%016x %d", digest, count);
    }

    public static Outcome parse(String digestHex, String count) {
        return new Outcome(Long.parseLong(count), Long.parseUnsignedLong(digestHex, 16));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Outcome other && other.count == count && other.digest == digest;
    }

    @Override
    public int hashCode() {
        return Objects.hash(count, digest);
    }
}
