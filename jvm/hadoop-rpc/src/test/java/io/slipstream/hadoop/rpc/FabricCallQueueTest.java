package io.slipstream.hadoop.rpc;

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

/**
 * {@link FabricCallQueue} as a queue, with no fabric attached: what Hadoop's {@code CallQueueManager} and
 * handlers ask of {@code LinkedBlockingQueue} (bounded FIFO, blocking put, timed poll, drain). Its pulls
 * are tested against a real server in {@link HandlerPullTest}.
 */
class FabricCallQueueTest {
    @Test
    void aBoundedFifo() {
        FabricCallQueue<String> q = new FabricCallQueue<>(2);
        assertTrue(q.offer("a"));
        assertTrue(q.offer("b"));
        assertFalse(q.offer("c"), "full");
        assertThrows(IllegalStateException.class, () -> q.add("c"), "add on a full queue, as Hadoop's overflow expects");
        assertEquals(2, q.size());
        assertEquals(0, q.remainingCapacity());
        assertEquals("a", q.peek());
        assertEquals("a", q.poll());
        assertEquals("b", q.poll());
        assertNull(q.poll());
        assertEquals(0, q.size());
        assertEquals(2, q.remainingCapacity());
        assertThrows(NullPointerException.class, () -> q.offer(null));
        assertThrows(IllegalArgumentException.class, () -> new FabricCallQueue<String>(0));
    }

    @Test
    void putWaitsForRoomAndTimedOperationsTimeOut() throws Exception {
        FabricCallQueue<String> q = new FabricCallQueue<>(1);
        q.put("a");
        long start = System.nanoTime();
        assertFalse(q.offer("b", 50, TimeUnit.MILLISECONDS));
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50));
        CompletableFuture<Void> put = CompletableFuture.runAsync(() -> {
            try {
                q.put("b");
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        Thread.sleep(100);
        assertFalse(put.isDone(), "put waits while the queue is full");
        assertEquals("a", q.take());
        put.get(10, TimeUnit.SECONDS);
        assertEquals("b", q.poll(1, TimeUnit.SECONDS));
        start = System.nanoTime();
        assertNull(q.poll(50, TimeUnit.MILLISECONDS));
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50));
    }

    @Test
    void aParkedTakerIsWokenByAnOffer() throws Exception {
        FabricCallQueue<String> q = new FabricCallQueue<>(4);
        CompletableFuture<String> taken = CompletableFuture.supplyAsync(() -> {
            try {
                return q.poll(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        Thread.sleep(100);
        long start = System.nanoTime();
        q.offer("x");
        assertEquals("x", taken.get(10, TimeUnit.SECONDS));
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10));
    }

    @Test
    void drainRemoveAndIterationKeepTheCount() {
        FabricCallQueue<String> q = new FabricCallQueue<>(8);
        for (String s : new String[] {"a", "b", "c", "d"}) {
            q.add(s);
        }
        assertTrue(q.remove("b"));
        assertFalse(q.remove("z"));
        assertEquals(3, q.size());
        Iterator<String> it = q.iterator();
        assertEquals("a", it.next());
        assertThrows(UnsupportedOperationException.class, it::remove, "removal only through remove(Object)");
        List<String> out = new ArrayList<>();
        assertEquals(2, q.drainTo(out, 2));
        assertEquals(List.of("a", "c"), out);
        assertEquals(1, q.drainTo(out));
        assertEquals(0, q.size());
        assertEquals(8, q.remainingCapacity());
        assertThrows(IllegalArgumentException.class, () -> q.drainTo(q));
    }

    /**
     * A source of "fabric calls" for the queue's pulls, driven by the test: {@link #send} is a request on
     * the wire; a pull takes one and queues its call as the server's receive does, or waits until its
     * timeout or an interrupt. (The real source, a server's fabric node, is tested in HandlerPullTest.)
     */
    private static final class Wire implements FabricCallQueue.Source {
        private final java.util.concurrent.LinkedBlockingQueue<String> requests = new java.util.concurrent.LinkedBlockingQueue<>();
        private final java.util.concurrent.Semaphore interrupts = new java.util.concurrent.Semaphore(0);
        private final java.util.concurrent.atomic.AtomicInteger pulls = new java.util.concurrent.atomic.AtomicInteger();
        private FabricCallQueue<String> queue;

        void send(String call) {
            requests.add(call);
            interrupts.release(); // wakes a pull under way, as the fabric's message does
        }

        @Override
        public void pull(long timeoutMs) {
            pulls.incrementAndGet();
            try {
                if (interrupts.tryAcquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                    String call = requests.poll();
                    if (call != null) {
                        queue.put(call);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        @Override
        public void interrupt() {
            if (interrupts.availablePermits() == 0) {
                interrupts.release(); // at most one pending, as FabricNode.interruptPull
            }
        }
    }

    /** A queue that {@code pullers} idle handlers pull from {@code wire} into, a minute at a time. */
    private static FabricCallQueue<String> pulledFrom(Wire wire, int pullers) {
        FabricCallQueue<String> q = new FabricCallQueue<>(8);
        wire.queue = q;
        q.attach(wire, pullers, 60_000);
        return q;
    }

    /** A handler waiting on {@code q} (a minute), once it pulls. */
    private static CompletableFuture<String> pullingHandler(FabricCallQueue<String> q) throws InterruptedException {
        int before = q.pullingHandlers();
        CompletableFuture<String> handler = handler(q);
        while (q.pullingHandlers() == before) {
            Thread.sleep(1);
        }
        return handler;
    }

    private static CompletableFuture<String> handler(FabricCallQueue<String> q) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return q.poll(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    @Test
    void anIdleHandlerPullsAndTakesTheCallItQueued() throws Exception {
        Wire wire = new Wire();
        FabricCallQueue<String> q = pulledFrom(wire, 1);
        CompletableFuture<String> handler = pullingHandler(q);
        wire.send("fabric call");
        assertEquals("fabric call", handler.get(10, TimeUnit.SECONDS));
        assertEquals(0, q.size());
    }

    /** The pull would last a minute: only the interrupt of the offer gets the socket call taken soon. */
    @Test
    void aCallQueuedElsewhereInterruptsAPullWhenNoHandlerIsParked() throws Exception {
        FabricCallQueue<String> q = pulledFrom(new Wire(), 1);
        CompletableFuture<String> handler = pullingHandler(q);
        q.offer("socket call");
        assertEquals("socket call", handler.get(10, TimeUnit.SECONDS));
    }

    /**
     * One puller, two handlers: the puller leaves with a call (and keeps it, a long call); the parked
     * handler, whose own wait would last a minute, is woken to pull the next call.
     */
    @Test
    void theLastPullerLeavingWakesAParkedHandlerToPull() throws Exception {
        Wire wire = new Wire();
        FabricCallQueue<String> q = pulledFrom(wire, 1);
        CompletableFuture<String> first = pullingHandler(q);
        CompletableFuture<String> second = handler(q);
        Thread.sleep(200); // the second parks: the pullers are at their maximum
        assertEquals(1, q.pullingHandlers());
        wire.send("call 1");
        assertEquals("call 1", first.get(10, TimeUnit.SECONDS));
        wire.send("call 2");
        assertEquals("call 2", second.get(10, TimeUnit.SECONDS));
    }

    @Test
    void detachEndsThePulls() throws Exception {
        FabricCallQueue<String> q = pulledFrom(new Wire(), 2);
        CompletableFuture<String> handler = pullingHandler(q);
        q.detach();
        long start = System.nanoTime();
        while (q.pullingHandlers() > 0) {
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "pulls end at the detach");
            Thread.sleep(1);
        }
        q.offer("after");
        assertEquals("after", handler.get(10, TimeUnit.SECONDS), "the handler waits on the queue alone");
    }

    @Test
    void aServerFindsTheQueueHadoopMadeOnItsThreadOnly() throws Exception {
        FabricCallQueue.beginConstruction();
        assertNull(FabricCallQueue.endConstruction(), "none made");
        FabricCallQueue<String> mine = new FabricCallQueue<>(1);
        assertEquals(mine, FabricCallQueue.endConstruction());
        assertNull(FabricCallQueue.endConstruction(), "taken once");
        new FabricCallQueue<String>(1);
        FabricCallQueue.beginConstruction();
        assertNull(FabricCallQueue.endConstruction(), "one made before the construction began is not this server's");
        CompletableFuture.runAsync(() -> new FabricCallQueue<String>(1)).get();
        assertNull(FabricCallQueue.endConstruction(), "nor one made on another thread");
    }
}
