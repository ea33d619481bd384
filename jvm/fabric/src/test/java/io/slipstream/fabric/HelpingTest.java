package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Threads that wait for futures help completing them (and, on a client-only node, drive progress),
 * completions are taken in batches, and handler threads take turns pulling requests.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HelpingTest {
    private static final int OP_BLOCK = 10;
    private static final int OP_SLOW = 11;

    private static FabricNode server;
    private static FabricNode client;
    private static final CountDownLatch RELEASE = new CountDownLatch(1);
    private static final Set<String> BLOCKED_ON = ConcurrentHashMap.newKeySet();

    @BeforeAll
    static void start() throws FabricUnavailableException {
        server = Fixtures.serverConfig().start();
        server.serve(request -> {
            if (request.op() == OP_BLOCK) {
                BLOCKED_ON.add(Thread.currentThread().getName());
                try {
                    RELEASE.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                request.respond(new byte[] {1});
            } else if (request.op() == OP_SLOW) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                request.respond(new byte[] {2});
            } else {
                Fixtures.HANDLER.handle(request);
            }
        }, 3);
        client = Fixtures.clientConfig().start();
    }

    @AfterAll
    static void stop() {
        RELEASE.countDown();
        client.close();
        server.close();
    }

    /** The bench's pattern: a window of requests in flight, the oldest awaited, every response checked. */
    private static void window(FabricNode from, int count, int window) throws Exception {
        FabricEndpoint endpoint = from.endpoint(server.localAddress());
        ArrayDeque<CompletableFuture<FabricBuffer>> inFlight = new ArrayDeque<>();
        long next = 0;
        long expected = 0;
        while (expected < count) {
            while (next < count && inFlight.size() < window) {
                inFlight.add(endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8).putLong(0, next++)));
            }
            try (FabricBuffer response = inFlight.poll().get(30, TimeUnit.SECONDS)) {
                assertEquals(expected++, response.byteBuffer().getLong(0));
            }
        }
    }

    @Test
    void aWindowOfRequestsFromAClientOnlyNode() throws Exception {
        window(client, 20_000, 64);
        assertEquals(0, client.stats().poolBytesInUse(), "every response was released");
    }

    @Test
    void aWindowOfRequestsFromAListeningNode() throws Exception {
        // A node that serves requests never drives progress from waiting threads (it could take a request).
        try (FabricNode listening = Fixtures.startServer(1)) {
            window(listening, 5_000, 64);
        }
    }

    @Test
    void manyThreadsWaitingOnOneNode() throws Exception {
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < 4; t++) {
            Thread thread = new Thread(() -> {
                try {
                    window(client, 2_000, 16);
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join(30_000);
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void aDependentActionThatWaitsForAnotherFuture() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        for (int i = 0; i < 200; i++) {
            CompletableFuture<FabricBuffer> first = endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8).putLong(0, 1));
            CompletableFuture<FabricBuffer> second = endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8).putLong(0, 2));
            // Runs on whichever thread completes `first`, possibly this one while it helps: waiting
            // there for `second` must neither deadlock nor disturb the batch being completed.
            CompletableFuture<Long> both = first.thenApply(response -> {
                try (response; FabricBuffer other = second.get(30, TimeUnit.SECONDS)) {
                    return response.byteBuffer().getLong(0) * 10 + other.byteBuffer().getLong(0);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            assertEquals(12L, both.get(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void failuresReachWaitingThreads() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        List<CompletableFuture<FabricBuffer>> futures = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            futures.add(endpoint.requestAsync(i % 2 == 0 ? OP_ECHO : Fixtures.OP_FAIL, new byte[] {'x'}));
        }
        for (int i = 0; i < futures.size(); i++) {
            if (i % 2 == 0) {
                futures.get(i).get(30, TimeUnit.SECONDS).close();
            } else {
                int index = i;
                ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                        () -> futures.get(index).get(30, TimeUnit.SECONDS));
                assertEquals(FabricException.Kind.REMOTE, assertInstanceOf(FabricException.class, e.getCause()).kind());
            }
        }
    }

    /** Handler threads take turns pulling; one blocked in its handler does not stop the others. */
    @Test
    void blockedHandlersDoNotStopTheOthers() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        CompletableFuture<FabricBuffer> blocked1 = endpoint.requestAsync(OP_BLOCK, new byte[1]);
        CompletableFuture<FabricBuffer> blocked2 = endpoint.requestAsync(OP_BLOCK, new byte[1]);
        assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { }, () -> BLOCKED_ON.size() == 2),
                "two handler threads run blocked handlers at once: " + BLOCKED_ON);
        // The third thread still pulls and answers.
        for (int i = 0; i < 100; i++) {
            try (FabricBuffer echo = endpoint.request(OP_ECHO, new byte[] {7})) {
                assertEquals(7, echo.byteBuffer().get(0));
            }
        }
        RELEASE.countDown();
        blocked1.get(30, TimeUnit.SECONDS).close();
        blocked2.get(30, TimeUnit.SECONDS).close();
    }

    @Test
    void turnsGoToOneThreadAtATime() throws Exception {
        ServeTurns turns = new ServeTurns();
        Thread me = Thread.currentThread();
        assertTrue(turns.takeTurn(me));
        assertEquals(me, turns.puller());
        // Another thread becomes the standby and, once the turn is free, takes it.
        CountDownLatch took = new CountDownLatch(1);
        Thread other = new Thread(() -> {
            while (!turns.takeTurn(Thread.currentThread())) {
                // waited as standby
            }
            took.countDown();
        });
        other.start();
        assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { }, () -> turns.standby() == other));
        assertEquals(1, took.getCount(), "no second puller while the turn is held");
        turns.endTurn(true);
        assertTrue(took.await(10, TimeUnit.SECONDS), "the standby took the free turn");
        assertEquals(other, turns.puller());
        other.join(10_000);
        turns.leave(other);
        assertNull(turns.puller());
    }

    /**
     * Many threads waiting at once: at most {@link Completer#SPINNERS_MAX} of them spin (one core is left
     * for the others), the rest park and are completed by the spinner or the completer thread.
     */
    @Test
    void atMostSpinnersMaxWaitingThreadsSpinAtOnce() throws Exception {
        int threads = 8;
        java.util.concurrent.atomic.AtomicInteger maxSpinning = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean running = new java.util.concurrent.atomic.AtomicBoolean(true);
        Thread sampler = new Thread(() -> {
            while (running.get()) {
                maxSpinning.accumulateAndGet(client.helpersSpinning(), Math::max);
                Thread.onSpinWait();
            }
        });
        sampler.start();
        List<CompletableFuture<Void>> waiters = new ArrayList<>();
        try {
            for (int t = 0; t < threads; t++) {
                waiters.add(CompletableFuture.runAsync(() -> {
                    try {
                        window(client, 2_000, 2);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }, command -> new Thread(command).start()));
            }
            CompletableFuture.allOf(waiters.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
        } finally {
            running.set(false);
            sampler.join();
        }
        assertTrue(maxSpinning.get() >= 1, "the waiting threads helped");
        assertTrue(maxSpinning.get() <= Completer.SPINNERS_MAX,
                maxSpinning.get() + " threads spun at once, at most " + Completer.SPINNERS_MAX + " may");
        assertEquals(0, client.helpersSpinning());
    }

    /**
     * A wait whose response takes longer than the spin (a slow handler) shortens the next waits'
     * spin to the minimum; once responses come within the spin again (the probe wait spins in full),
     * the spin is whole again.
     */
    @Test
    void waitsSpinShortWhileResponsesAreSlowAndInFullOnceTheyAreFastAgain() throws Exception {
        // The engines' way: a future, awaited (a blocking request() waits in native code instead).
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8)).get(30, TimeUnit.SECONDS).close();
        for (int i = 0; i < 20; i++) {
            try (FabricBuffer response = endpoint.requestAsync(OP_SLOW, ByteBuffer.allocate(8)).get(30, TimeUnit.SECONDS)) {
                assertEquals(2, response.byteBuffer().get(0));
            }
        }
        assertEquals(Completer.HELP_SPIN_MIN_NANOS, client.helperSpinBudgetNanos(), "1 ms answers: the spin shrank to the minimum");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (client.helperSpinBudgetNanos() != Completer.HELP_SPIN_NANOS) {
            assertTrue(System.nanoTime() < deadline, "the spin never grew back with fast answers");
            endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8)).get(30, TimeUnit.SECONDS).close();
        }
    }
}
