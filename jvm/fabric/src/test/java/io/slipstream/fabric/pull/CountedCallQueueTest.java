package io.slipstream.fabric.pull;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class CountedCallQueueTest {
    /** The simplest subclass: an offer wakes a parked taker; a taker never pulls, it parks. */
    static final class Plain<E> extends CountedCallQueue<E> {
        Plain(int capacity) {
            super(capacity);
        }

        @Override
        public boolean offer(E e) {
            if (!enqueue(e)) {
                return false;
            }
            if (takersParked.get() > 0) {
                signal(notEmpty);
            }
            return true;
        }

        @Override
        protected E pullWhileIdle(long deadline, boolean afterPark) {
            return null;
        }

        @Override
        protected boolean mayPull() {
            return false;
        }
    }

    @Test
    void aBoundedFifoWhoseCountFollowsEveryChange() throws Exception {
        Plain<String> q = new Plain<>(3);
        assertThrows(IllegalArgumentException.class, () -> new Plain<String>(0));
        assertTrue(q.offer("a") && q.offer("b") && q.offer("c"));
        assertFalse(q.offer("d"), "full");
        assertFalse(q.offer("d", 10, TimeUnit.MILLISECONDS), "still full after the wait");
        assertEquals(3, q.size());
        assertEquals(0, q.remainingCapacity());
        assertEquals("a", q.peek());
        assertTrue(q.remove("b"));
        assertFalse(q.remove("b"));
        assertEquals(2, q.size());
        Iterator<String> it = q.iterator();
        assertEquals("a", it.next());
        assertThrows(UnsupportedOperationException.class, it::remove, "removal only through remove(), which counts");
        List<String> drained = new ArrayList<>();
        assertEquals(2, q.drainTo(drained));
        assertEquals(List.of("a", "c"), drained);
        assertThrows(IllegalArgumentException.class, () -> q.drainTo(q));
        assertNull(q.poll());
        assertNull(q.poll(5, TimeUnit.MILLISECONDS));
        assertEquals(0, q.size());
        assertThrows(NullPointerException.class, () -> q.offer(null));
    }

    /** A put on a full queue waits for room, and a take on an empty one for an item; neither wake is lost. */
    @Test
    void parkedPuttersAndTakersAreWoken() throws Exception {
        Plain<Integer> q = new Plain<>(1);
        int items = 20_000;
        CompletableFuture<Long> taker = CompletableFuture.supplyAsync(() -> {
            long sum = 0;
            try {
                for (int i = 0; i < items; i++) {
                    Integer e = q.poll(30, TimeUnit.SECONDS);
                    assertEquals(i, e, "in order, none missed");
                    sum += e;
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            return sum;
        });
        long started = System.nanoTime();
        for (int i = 0; i < items; i++) {
            q.put(i);
        }
        assertEquals((long) items * (items - 1) / 2, taker.get(60, TimeUnit.SECONDS));
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(20), "no wake waited out a timeout");
        assertEquals(0, q.size());
    }
}
