package io.slipstream.spark.it;

import java.util.SplittableRandom;

/**
 * The scenarios' data, generated from (seed, record index) alone so that every executor, every retry and the tests'
 * reference computations produce the same records; and the 64-bit hashes that results are digested with.
 * No Spark here: the tests use this class to compute the expected results without a shuffle.
 */
public final class Records {

    private Records() {
    }

    /** SplitMix64's finalizer: a bijection on longs (distinct inputs, distinct outputs) that mixes every bit. */
    public static long mix(long x) {
        x = (x ^ (x >>> 30)) * 0xbf58476d1ce4e5b9L;
        x = (x ^ (x >>> 27)) * 0x94d049bb133111ebL;
        return x ^ (x >>> 31);
    }

    /** An order-sensitive combination: hash(a, b) != hash(b, a). For a fixed {@code a}, a bijection of {@code b}. */
    public static long hash(long a, long b) {
        return mix(mix(a) + b);
    }

    public static long hash(long a, long b, long c) {
        return hash(hash(a, b), c);
    }

    public static long hash(long a, long b, long c, long d) {
        return hash(hash(a, b, c), d);
    }

    /** FNV-1a over every byte, then the length: a value's identity whatever its size. */
    public static long hash(byte[] bytes) {
        long h = 0xcbf29ce484222325L;
        for (byte b : bytes) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return hash(h, bytes.length);
    }

    /** Record {@code index}'s key among {@code keyCount} keys (0 to keyCount - 1), spread uniformly. */
    public static long key(long seed, long index, int keyCount) {
        return Math.floorMod(hash(seed, index), keyCount);
    }

    /** A key that is unique per index (a bijection of the index): data for sorts, where ties would be unordered. */
    public static long uniqueKey(long seed, long index) {
        return hash(seed, index);
    }

    /** Key 0 for {@code skewPercent} % of the records, the others spread over keys 1 to keyCount - 1. */
    public static long skewedKey(long seed, long index, int keyCount, int skewPercent) {
        long h = hash(seed, index);
        return Math.floorMod(h, 100) < skewPercent ? 0 : 1 + Math.floorMod(mix(h), keyCount - 1);
    }

    /** Record {@code index}'s value: {@code length} pseudo-random (incompressible) bytes. */
    public static byte[] value(long seed, long index, int length) {
        byte[] bytes = new byte[length];
        new SplittableRandom(hash(~seed, index)).nextBytes(bytes);
        return bytes;
    }
}
