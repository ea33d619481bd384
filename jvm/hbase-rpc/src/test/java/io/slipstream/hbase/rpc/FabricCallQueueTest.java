package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.junit.jupiter.api.Test;

/**
 * {@link FabricCallQueue}'s queue ({@link HandlerQueue}): what HBase's executor and handlers ask of
 * {@code LinkedBlockingQueue} (bounded FIFO, offer, take, drain), and its pulls against a source the test drives,
 * with the several queues of one executor. The real source, a server's fabric node, is tested in
 * {@link HandlerPullTest}.
 */
class FabricCallQueueTest {
    private static final long WAIT_MS = 10_000;

    @Test
    void aBoundedFifo() {
        HandlerQueue<String> q = new HandlerQueue<>(2);
        assertTrue(q.offer("a"));
        assertTrue(q.offer("b"));
        assertFalse(q.offer("c"), "full");
        assertThrows(IllegalStateException.class, () -> q.add("c"));
        assertEquals(2, q.size());
        assertEquals(0, q.remainingCapacity());
        assertEquals("a", q.peek());
        assertEquals("a", q.poll());
        assertEquals("b", q.poll());
        assertNull(q.poll());
        assertEquals(2, q.remainingCapacity());
        assertThrows(NullPointerException.class, () -> q.offer(null));
        assertThrows(IllegalArgumentException.class, () -> new HandlerQueue<String>(0));
    }

    @Test
    void hbaseMakesItWithItsConstructor() {
        FabricCallQueue q = new FabricCallQueue(300, null, HBaseConfiguration.create());
        assertEquals(300, q.remainingCapacity());
        assertTrue(q.isEmpty());
        assertNull(q.poll());
    }

    @Test
    void putWaitsForRoomAndTimedOperationsTimeOut() throws Exception {
        HandlerQueue<String> q = new HandlerQueue<>(1);
        q.put("a");
        assertFalse(q.offer("b", 50, TimeUnit.MILLISECONDS));
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
        put.get(WAIT_MS, TimeUnit.MILLISECONDS);
        assertEquals("b", q.poll(1, TimeUnit.SECONDS));
        long start = System.nanoTime();
        assertNull(q.poll(50, TimeUnit.MILLISECONDS));
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50));
    }

    @Test
    void drainRemoveAndIterationKeepTheCount() {
        HandlerQueue<String> q = new HandlerQueue<>(8);
        for (String s : new String[] {"a", "b", "c", "d"}) {
            q.add(s);
        }
        assertTrue(q.remove("b"));
        assertFalse(q.remove("z"));
        Iterator<String> it = q.iterator();
        assertEquals("a", it.next());
        assertThrows(UnsupportedOperationException.class, it::remove, "removal only through remove(Object)");
        List<String> out = new ArrayList<>();
        assertEquals(2, q.drainTo(out, 2));
        assertEquals(List.of("a", "c"), out);
        assertEquals(1, q.drainTo(out));
        assertEquals(0, q.size());
        assertEquals(8, q.remainingCapacity());
    }

    /**
     * A source of "fabric calls" driven by the test: {@link #send} is a request on the wire, with where the
     * scheduler puts its call (the balancer's queue); a pull takes one and offers its call there, as the server's
     * receive does, or waits until its timeout or an interrupt.
     */
    private static final class Wire implements HandlerQueue.Source {
        private final LinkedBlockingQueue<String> requests = new LinkedBlockingQueue<>();
        private final Semaphore interrupts = new Semaphore(0);
        private final AtomicInteger callsPulled = new AtomicInteger();
        private volatile Function<String, HandlerQueue<String>> balancer;
        private volatile List<HandlerQueue<String>> queues;
        /** Which queue held the last call pulled right after the scheduler's offer returned (-1: already taken). */
        private volatile int lastQueueIndex;
        /** Whether the pull that took the last call might spin first. */
        private volatile boolean lastCallSpun;

        void send(String call) {
            requests.add(call);
            interrupts.release(); // wakes a pull under way, as the fabric's message does
        }

        @Override
        public void pull(long timeoutMs, boolean spin) {
            try {
                if (interrupts.tryAcquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                    String call = requests.poll();
                    if (call != null) {
                        callsPulled.incrementAndGet();
                        lastCallSpun = spin;
                        assertTrue(balancer.apply(call).offer(call));
                        lastQueueIndex = -1;
                        for (int i = 0; i < queues.size(); i++) {
                            if (queues.get(i).contains(call)) {
                                lastQueueIndex = i;
                            }
                        }
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

    /** An executor's {@code queueCount} queues that {@code pullers} idle handlers pull from {@code wire} into, a minute at a time. */
    private static HandlerQueue.Pulls<String> executor(Wire wire, int queueCount, int pullers) {
        List<HandlerQueue<String>> queues = new ArrayList<>();
        for (int i = 0; i < queueCount; i++) {
            queues.add(new HandlerQueue<>(8));
        }
        wire.balancer = call -> queues.get(queues.size() - 1); // the last queue, whoever pulled
        wire.queues = queues;
        return HandlerQueue.attach(queues, wire, pullers, 60_000);
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + WAIT_MS + " ms: " + what);
            }
            Thread.sleep(1);
        }
    }

    /** A handler waiting on {@code q} (a minute), once it pulls. */
    private static CompletableFuture<String> pullingHandler(HandlerQueue.Pulls<String> p, HandlerQueue<String> q)
            throws InterruptedException {
        int before = p.pullingHandlers();
        CompletableFuture<String> handler = handler(q);
        await("the handler pulling", () -> p.pullingHandlers() > before);
        return handler;
    }

    private static CompletableFuture<String> handler(HandlerQueue<String> q) {
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
        HandlerQueue.Pulls<String> p = executor(wire, 1, 1);
        CompletableFuture<String> handler = pullingHandler(p, p.queues.get(0));
        wire.send("fabric call");
        assertEquals("fabric call", handler.get(WAIT_MS, TimeUnit.MILLISECONDS));
        assertEquals(0, p.queues.get(0).size());
    }

    /**
     * The balancer puts the pulled call on the other queue, whose handler is parked: the call goes on the
     * puller's own queue and the puller runs it; the parked handler is woken only to pull in its place.
     */
    @Test
    void theCallAHandlerPulledGoesOnItsOwnQueue() throws Exception {
        Wire wire = new Wire();
        HandlerQueue.Pulls<String> p = executor(wire, 2, 1);
        HandlerQueue<String> own = p.queues.get(0);
        HandlerQueue<String> other = p.queues.get(1);
        CompletableFuture<String> puller = pullingHandler(p, own);
        CompletableFuture<String> parked = handler(other);
        Thread.sleep(200); // it parks: the pullers are at their maximum
        wire.send("pulled");
        assertEquals("pulled", puller.get(WAIT_MS, TimeUnit.MILLISECONDS), "the puller runs the call it pulled");
        assertEquals(0, wire.lastQueueIndex, "the balancer's choice was the other queue; the call went on the puller's");
        await("the parked handler pulling in its place", () -> p.pullingHandlers() == 1);
        assertFalse(parked.isDone());
        wire.send("next");
        assertEquals("next", parked.get(WAIT_MS, TimeUnit.MILLISECONDS));
        assertEquals(0, own.size() + other.size());
    }

    /**
     * A socket call on a queue none of whose handlers waits (all busy): the pull (a minute long) of another queue's
     * handler is interrupted, and that handler takes it.
     */
    @Test
    void aCallQueuedElsewhereInterruptsAPullAndThePullerTakesIt() throws Exception {
        HandlerQueue.Pulls<String> p = executor(new Wire(), 2, 1);
        CompletableFuture<String> puller = pullingHandler(p, p.queues.get(0));
        p.queues.get(0).offer("socket call 1");
        assertEquals("socket call 1", puller.get(WAIT_MS, TimeUnit.MILLISECONDS));
        puller = pullingHandler(p, p.queues.get(0));
        p.queues.get(1).offer("socket call 2");
        assertEquals("socket call 2", puller.get(WAIT_MS, TimeUnit.MILLISECONDS));
    }

    /**
     * One puller, two handlers of one queue: the puller leaves with a call (and keeps it, a long call); the parked
     * handler, whose own wait would last a minute, is woken to pull the next call, without spinning first (the
     * call under way would share a core with its spin). The first handler came straight to pull: it may spin.
     */
    @Test
    void theLastPullerLeavingWakesAParkedHandlerToPull() throws Exception {
        Wire wire = new Wire();
        HandlerQueue.Pulls<String> p = executor(wire, 1, 1);
        CompletableFuture<String> first = pullingHandler(p, p.queues.get(0));
        CompletableFuture<String> second = handler(p.queues.get(0));
        Thread.sleep(200);
        assertEquals(1, p.pullingHandlers());
        wire.send("call 1");
        assertEquals("call 1", first.get(WAIT_MS, TimeUnit.MILLISECONDS));
        assertTrue(wire.lastCallSpun, "a handler coming to pull from elsewhere than a park spins");
        wire.send("call 2");
        assertEquals("call 2", second.get(WAIT_MS, TimeUnit.MILLISECONDS));
        assertFalse(wire.lastCallSpun, "the handler woken to pull in the leaving puller's place does not spin");
    }

    /**
     * Every handler busy (none waits on the queues): the standby pulls, so calls reach the scheduler (and its
     * other executors) and wait on the queues; a handler that comes back pulls, and the standby yields.
     */
    @Test
    void theStandbyPullsWhileEveryHandlerIsBusyAndYieldsToAHandler() throws Exception {
        Wire wire = new Wire();
        HandlerQueue.Pulls<String> p = executor(wire, 2, 1);
        Thread standby = new Thread(p::runStandby, "standby");
        standby.setDaemon(true);
        standby.start();
        try {
            wire.send("while busy");
            await("the standby queued the call", () -> p.queues.get(1).size() == 1);
            assertFalse(wire.lastCallSpun, "the standby pulls without spinning: every handler runs a call");
            assertEquals(0, p.pullingHandlers());
            assertEquals("while busy", p.queues.get(1).poll());
            CompletableFuture<String> handler = pullingHandler(p, p.queues.get(0));
            await("the standby yielding", () -> !p.standbyPulling());
            wire.send("idle again");
            assertEquals("idle again", handler.get(WAIT_MS, TimeUnit.MILLISECONDS));
        } finally {
            p.detach();
            standby.join(WAIT_MS);
        }
        assertFalse(standby.isAlive(), "the standby returns at the detach");
    }

    @Test
    void detachEndsThePulls() throws Exception {
        HandlerQueue.Pulls<String> p = executor(new Wire(), 1, 2);
        CompletableFuture<String> handler = pullingHandler(p, p.queues.get(0));
        p.detach();
        await("pulls end at the detach", () -> p.pullingHandlers() == 0);
        p.queues.get(0).offer("after");
        assertEquals("after", handler.get(WAIT_MS, TimeUnit.MILLISECONDS), "the handler waits on the queue alone");
    }
}
