package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Many Java threads sending through one endpoint at once; every byte of every response is checked. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ConcurrencyTest {
    private static final int THREADS = 16;
    private static final int REQUESTS_PER_THREAD = 150;
    private static final int SIZE_MAX = 64 << 10;

    private static FabricNode server;
    private static FabricNode client;

    @BeforeAll
    static void start() throws FabricUnavailableException {
        server = Fixtures.startServer(4);
        client = Fixtures.clientConfig().start();
    }

    @AfterAll
    static void stop() {
        client.close();
        server.close();
    }

    @Test
    void sixteenThreadsSendConcurrentlyWithIntactPayloads() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        long servedBefore = server.stats().requestsServed();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicLong bytes = new AtomicLong();
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int thread = t;
            threads.add(new Thread(() -> {
                Random random = new Random(thread);
                try {
                    go.await();
                    for (int i = 0; i < REQUESTS_PER_THREAD && errors.isEmpty(); i++) {
                        long seed = thread * 1_000_003L + i;
                        int size = i % 10 == 0 ? 0 : random.nextInt(SIZE_MAX);
                        byte[] payload = Fixtures.pattern(seed, size);
                        // Mix the three ways of sending.
                        FabricBuffer response;
                        switch (i % 3) {
                            case 0 -> response = endpoint.request(OP_ECHO, payload);
                            case 1 -> response = endpoint.request(OP_ECHO, java.nio.ByteBuffer.allocateDirect(size).put(payload).flip());
                            default -> {
                                FabricBuffer buffer = client.allocate(size);
                                buffer.byteBuffer().put(payload);
                                response = endpoint.request(OP_ECHO, buffer);
                            }
                        }
                        try (response) {
                            int bad = Fixtures.mismatch(seed, size, response.byteBuffer());
                            if (bad >= 0) {
                                errors.add("thread " + thread + " request " + i + " size " + size + ": byte " + bad + " differs");
                            }
                            bytes.addAndGet(size);
                        }
                    }
                } catch (Throwable e) {
                    errors.add("thread " + thread + ": " + e);
                }
            }, "sender-" + t));
        }
        threads.forEach(Thread::start);
        go.countDown();
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(80));
        }
        assertTrue(errors.isEmpty(), () -> errors.size() + " errors, first: " + errors.peek());
        assertEquals(THREADS * REQUESTS_PER_THREAD, server.stats().requestsServed() - servedBefore);
        assertTrue(bytes.get() > 0);
    }

    @Test
    void manyThreadsSendAsynchronously() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            int thread = t;
            threads.add(new Thread(() -> {
                List<CompletableFuture<Void>> checks = new ArrayList<>();
                for (int i = 0; i < 100; i++) {
                    long seed = 77_000_000L + thread * 1000L + i;
                    int size = (i * 997) % 20_000;
                    checks.add(endpoint.requestAsync(OP_ECHO, Fixtures.pattern(seed, size)).thenAccept(response -> {
                        try (response) {
                            int bad = Fixtures.mismatch(seed, size, response.byteBuffer());
                            if (bad >= 0) {
                                errors.add("async " + seed + ": byte " + bad + " differs");
                            }
                        }
                    }));
                }
                try {
                    CompletableFuture.allOf(checks.toArray(new CompletableFuture<?>[0])).get(60, TimeUnit.SECONDS);
                } catch (Exception e) {
                    errors.add("thread " + thread + ": " + e);
                }
            }));
        }
        threads.forEach(Thread::start);
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(80));
        }
        assertTrue(errors.isEmpty(), () -> errors.size() + " errors, first: " + errors.peek());
    }

    @Test
    void closingANodeWhileThreadsUseItEndsThemCleanly() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        FabricEndpoint endpoint = node.endpoint(server.localAddress());
        ConcurrentLinkedQueue<String> unexpected = new ConcurrentLinkedQueue<>();
        AtomicLong completed = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            int thread = t;
            threads.add(new Thread(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                try {
                    while (System.nanoTime() < deadline) {
                        switch (thread % 4) {
                            case 0 -> endpoint.request(OP_ECHO, new byte[1000]).close();
                            case 1 -> endpoint.requestAsync(OP_ECHO, new byte[100]).get(20, TimeUnit.SECONDS).close();
                            case 2 -> {
                                FabricBuffer buffer = node.allocate(5000);
                                endpoint.request(OP_ECHO, buffer).byteBuffer().get(0);
                            }
                            default -> node.stats();
                        }
                        completed.incrementAndGet();
                    }
                    unexpected.add("thread " + thread + " never saw the close");
                } catch (FabricException e) {
                    if (e.kind() != FabricException.Kind.CLOSED) {
                        unexpected.add("thread " + thread + ": " + e);
                    }
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof FabricException f) || f.kind() != FabricException.Kind.CLOSED) {
                        unexpected.add("thread " + thread + ": " + e.getCause());
                    }
                } catch (Throwable e) {
                    unexpected.add("thread " + thread + ": " + e);
                }
            }, "closer-victim-" + t));
        }
        threads.forEach(Thread::start);
        Thread.sleep(300);
        node.close();
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(30));
            assertTrue(!thread.isAlive(), thread.getName() + " still running");
        }
        assertTrue(unexpected.isEmpty(), () -> unexpected.size() + " unexpected, first: " + unexpected.peek());
        assertTrue(completed.get() > 0);
        assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(20), System::gc, node::isNativeFreed),
                "the closed node is freed once its buffers are garbage");
    }
}
