package io.slipstream.ohb.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import scala.Tuple2;

class ChecksumsTest {
    private static List<Tuple2<Integer, byte[]>> generate(int mappers, int pairs, int valueBytes) {
        List<Tuple2<Integer, byte[]>> all = new ArrayList<>();
        PairGenerator generator = new PairGenerator(pairs, valueBytes, 42);
        for (int m = 0; m < mappers; m++) {
            generator.call(m).forEachRemaining(all::add);
        }
        return all;
    }

    /** What groupByKey with a hash partitioner gives, with each group's values in the given order. */
    private static List<long[]> grouped(List<Tuple2<Integer, byte[]>> records, int reducers) {
        List<long[]> summaries = new ArrayList<>();
        for (int p = 0; p < reducers; p++) {
            Map<Integer, List<byte[]>> groups = new LinkedHashMap<>();
            for (Tuple2<Integer, byte[]> r : records) {
                if (Math.floorMod(r._1().hashCode(), reducers) == p) {
                    groups.computeIfAbsent(r._1(), k -> new ArrayList<>()).add(r._2());
                }
            }
            List<Tuple2<Integer, Iterable<byte[]>>> list = new ArrayList<>();
            groups.forEach((k, v) -> list.add(new Tuple2<>(k, v)));
            summaries.add(Checksums.groupPartition(p, list.iterator()));
        }
        return summaries;
    }

    /** A sort into {@code bounds.length + 1} ranges, equal keys in the given order. */
    private static List<long[]> sorted(List<Tuple2<Integer, byte[]>> records, int... bounds) {
        List<Tuple2<Integer, byte[]>> copy = new ArrayList<>(records);
        copy.sort(Comparator.comparing(Tuple2::_1));
        List<long[]> summaries = new ArrayList<>();
        int start = 0;
        for (int p = 0; p <= bounds.length; p++) {
            int end = start;
            while (end < copy.size() && (p == bounds.length || copy.get(end)._1() <= bounds[p])) {
                end++;
            }
            summaries.add(Checksums.sortPartition(copy.subList(start, end).iterator()));
            start = end;
        }
        return summaries;
    }

    @Test
    void generatorIsDeterministicAndSeeded() {
        List<Tuple2<Integer, byte[]>> a = generate(2, 100, 37);
        List<Tuple2<Integer, byte[]>> b = generate(2, 100, 37);
        assertEquals(200, a.size());
        for (int i = 0; i < a.size(); i++) {
            assertEquals(a.get(i)._1(), b.get(i)._1());
            assertArrayEquals(a.get(i)._2(), b.get(i)._2());
            assertEquals(37, a.get(i)._2().length);
            assertEquals(true, a.get(i)._1() >= 0);
        }
        Iterator<Tuple2<Integer, byte[]>> other = new PairGenerator(100, 37, 43).call(0);
        assertNotEquals(a.get(0)._1(), other.next()._1());
        assertNotEquals(PairGenerator.mapperSeed(42, 0), PairGenerator.mapperSeed(42, 1));
    }

    @Test
    void groupChecksumIgnoresOrderButNotContentOrPlacement() {
        List<Tuple2<Integer, byte[]>> records = generate(3, 500, 20);
        // Duplicate keys so that groups have several values.
        records.add(new Tuple2<>(records.get(0)._1(), new byte[] {1, 2, 3}));
        records.add(new Tuple2<>(records.get(1)._1(), new byte[] {4}));
        Checksums.GroupTotals base = Checksums.groupTotals(grouped(records, 4));
        assertEquals(1502, base.records());
        assertEquals(1500 * 20 + 4, base.valueBytes());

        List<Tuple2<Integer, byte[]>> shuffled = new ArrayList<>(records);
        Collections.shuffle(shuffled, new java.util.Random(7));
        assertEquals(base, Checksums.groupTotals(grouped(shuffled, 4)));

        List<Tuple2<Integer, byte[]>> corrupted = new ArrayList<>(records);
        byte[] value = corrupted.get(10)._2().clone();
        value[19] ^= 1; // the last byte, past the first eight
        corrupted.set(10, new Tuple2<>(corrupted.get(10)._1(), value));
        assertNotEquals(base.checksum(), Checksums.groupTotals(grouped(corrupted, 4)).checksum());

        // The same records, each reaching another reducer than before.
        assertNotEquals(base.checksum(), Checksums.groupTotals(grouped(records, 5)).checksum());
        assertThrows(IllegalStateException.class, () -> Checksums.groupTotals(List.of(new long[3])));
    }

    @Test
    void sortChecksumIsIndependentOfPartitionBoundaries() {
        List<Tuple2<Integer, byte[]>> records = generate(2, 1000, 16);
        Checksums.SortTotals one = Checksums.sortTotals(sorted(records));
        Checksums.SortTotals three = Checksums.sortTotals(sorted(records, 1 << 29, 1 << 30));
        Checksums.SortTotals withEmpty = Checksums.sortTotals(sorted(records, -5, 1 << 30, Integer.MAX_VALUE));
        assertEquals(0, one.inversions());
        assertEquals(one, three);
        assertEquals(one, withEmpty);
        assertEquals(2000, one.records());
    }

    @Test
    void sortChecksumSeesDisorder() {
        List<Tuple2<Integer, byte[]>> records = generate(1, 200, 8);
        List<long[]> good = sorted(records, 1 << 30);
        long checksum = Checksums.sortTotals(good).checksum();

        List<Tuple2<Integer, byte[]>> copy = new ArrayList<>(records);
        copy.sort(Comparator.comparing(Tuple2::_1));
        Collections.swap(copy, 5, 6);
        Checksums.SortTotals swapped = Checksums.sortTotals(List.of(Checksums.sortPartition(copy.iterator())));
        assertEquals(1, swapped.inversions());
        assertNotEquals(checksum, swapped.checksum());

        // Partitions in the wrong order: each sorted, the whole not.
        List<long[]> reversed = new ArrayList<>(good);
        Collections.reverse(reversed);
        assertEquals(1, Checksums.sortTotals(reversed).inversions());
    }

    @Test
    void rollPowerComposes() {
        assertEquals(1, Checksums.rollPower(0));
        assertEquals(Checksums.ROLL, Checksums.rollPower(1));
        assertEquals(Checksums.ROLL * Checksums.ROLL * Checksums.ROLL, Checksums.rollPower(3));
        assertEquals(Checksums.rollPower(1000) * Checksums.rollPower(24), Checksums.rollPower(1024));
    }

    @Test
    void valueHashCoversEveryByteAndTheLength() {
        byte[] v = new byte[13];
        long h = Checksums.valueHash(v);
        for (int i = 0; i < v.length; i++) {
            byte[] w = v.clone();
            w[i] = 1;
            assertNotEquals(h, Checksums.valueHash(w), "byte " + i);
        }
        assertNotEquals(Checksums.valueHash(new byte[0]), Checksums.valueHash(new byte[1]));
        assertEquals("00000000000000ff", Checksums.hex(255));
    }
}
