package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link FabricEndpoint#requestAsync(int, List)}: many requests in one native call, at its limits. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BatchTest {
    private static FabricNode server;
    private static FabricNode client;

    @BeforeAll
    static void start() throws FabricUnavailableException {
        server = Fixtures.startServer(2);
        client = Fixtures.clientConfig().start();
    }

    @AfterAll
    static void stop() {
        client.close();
        server.close();
    }

    /** A buffer of {@code client}'s pool holding pattern {@code seed}. */
    private static FabricBuffer patterned(FabricNode node, long seed, int length) {
        FabricBuffer buffer = node.allocate(length);
        buffer.byteBuffer().put(Fixtures.pattern(seed, length));
        return buffer;
    }

    @Test
    void aFullBatchComesBackInOrderEveryByteChecked() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        List<FabricBuffer> payloads = new ArrayList<>();
        for (int i = 0; i < FabricEndpoint.BATCH_MAX; i++) {
            payloads.add(patterned(client, i, 1 + (i * 37) % 3000));
        }
        List<CompletableFuture<FabricBuffer>> futures = endpoint.requestAsync(OP_ECHO, payloads);
        assertEquals(FabricEndpoint.BATCH_MAX, futures.size());
        payloads.forEach(payload -> assertTrue(payload.isReleased(), "a batch consumes its payloads"));
        for (int i = 0; i < futures.size(); i++) {
            try (FabricBuffer response = futures.get(i).get(30, TimeUnit.SECONDS)) {
                assertEquals(-1, Fixtures.mismatch(i, 1 + (i * 37) % 3000, response.byteBuffer()), "response " + i);
            }
        }
    }

    @Test
    void aBatchAboveTheLimitIsRefusedAndConsumesNothing() {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        List<FabricBuffer> payloads = new ArrayList<>();
        for (int i = 0; i <= FabricEndpoint.BATCH_MAX; i++) {
            payloads.add(client.allocate(8));
        }
        assertThrows(IllegalArgumentException.class, () -> endpoint.requestAsync(OP_ECHO, payloads));
        payloads.forEach(payload -> assertFalse(payload.isReleased()));
        payloads.forEach(FabricBuffer::close);
        assertTrue(endpoint.requestAsync(OP_ECHO, List.of()).isEmpty());
    }

    @Test
    void aReleasedPayloadRefusesTheBatchAndReleasesTheOthers() {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        FabricBuffer released = client.allocate(8);
        released.release();
        List<FabricBuffer> payloads = List.of(client.allocate(8), released, client.allocate(8));
        assertThrows(IllegalStateException.class, () -> endpoint.requestAsync(OP_ECHO, payloads));
        payloads.forEach(payload -> assertTrue(payload.isReleased()));
        FabricBuffer twice = client.allocate(8);
        assertThrows(IllegalStateException.class, () -> endpoint.requestAsync(OP_ECHO, List.of(twice, twice)));
        assertTrue(twice.isReleased());
    }

    @Test
    void requestsBeyondTheCompletionQueueBoundAreRefusedOthersComplete() throws Exception {
        FabricNode puller = Fixtures.serverConfig().start(); // answers only when asked below
        try (FabricNode node = Fixtures.clientConfig().completionQueueDepth(8).requestTimeout(Duration.ofMillis(1500)).start()) {
            FabricEndpoint endpoint = node.endpoint(puller.localAddress());
            List<FabricBuffer> payloads = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                payloads.add(patterned(node, i, 64));
            }
            long start = System.nanoTime();
            List<CompletableFuture<FabricBuffer>> futures = endpoint.requestAsync(OP_ECHO, payloads);
            long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(waitedMs >= 500, "waited " + waitedMs + " ms for room");
            payloads.forEach(payload -> assertTrue(payload.isReleased()));
            // The first 8 were sent and time out unanswered. The 9th waited for room: it was refused,
            // or (a race with the timeouts, as for single requests) admitted with those after it
            // until one was refused; once one is refused, so is every later one.
            boolean refused = false;
            for (int i = 0; i < 20; i++) {
                int index = i;
                ExecutionException e = assertThrows(ExecutionException.class, () -> futures.get(index).get(10, TimeUnit.SECONDS));
                FabricException.Kind kind = assertInstanceOf(FabricException.class, e.getCause()).kind();
                if (i < 8 || !refused && kind == FabricException.Kind.TIMEOUT) {
                    assertEquals(FabricException.Kind.TIMEOUT, kind, "request " + i);
                } else {
                    refused = true;
                    assertEquals(FabricException.Kind.OVERLOADED, kind, "request " + i);
                }
            }
            assertTrue(Fixtures.eventually(Duration.ofSeconds(10), () -> { }, () -> node.stats().poolBytesInUse() == 0),
                    () -> "pool in use: " + node.stats().poolBytesInUse());
        } finally {
            puller.close();
        }
    }

    @Test
    void aBatchOnAClosedNodeFailsEveryRequestAndReleasesThePayloads() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        FabricEndpoint endpoint = node.endpoint(server.localAddress());
        List<FabricBuffer> payloads = List.of(node.allocate(8), node.allocate(8), node.allocate(8));
        node.close();
        List<CompletableFuture<FabricBuffer>> futures = endpoint.requestAsync(OP_ECHO, payloads);
        assertEquals(3, futures.size());
        for (CompletableFuture<FabricBuffer> future : futures) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
            assertEquals(FabricException.Kind.CLOSED, assertInstanceOf(FabricException.class, e.getCause()).kind());
        }
        payloads.forEach(payload -> assertTrue(payload.isReleased()));
    }

    @Test
    void closingTheNodeDuringBatchesCompletesEveryFuture() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        FabricEndpoint endpoint = node.endpoint(server.localAddress());
        AtomicReference<Throwable> unexpected = new AtomicReference<>();
        List<CompletableFuture<FabricBuffer>> all = new ArrayList<>();
        Thread sender = new Thread(() -> {
            try {
                for (int round = 0; round < 10_000 && !node.isClosed(); round++) {
                    List<FabricBuffer> payloads = new ArrayList<>();
                    for (int i = 0; i < 32; i++) {
                        payloads.add(node.allocate(256));
                    }
                    List<CompletableFuture<FabricBuffer>> futures = endpoint.requestAsync(OP_ECHO, payloads);
                    synchronized (all) {
                        all.addAll(futures);
                    }
                }
            } catch (FabricException closed) {
                // allocate on a closed node: the end of the loop
            } catch (Throwable t) {
                unexpected.set(t);
            }
        });
        sender.start();
        // Close once some batch was answered (not after a fixed time: wire-up is slow on a loaded machine).
        assertTrue(Fixtures.eventually(Duration.ofSeconds(20), () -> { }, () -> {
            synchronized (all) {
                return all.stream().anyMatch(future -> future.isDone() && !future.isCompletedExceptionally());
            }
        }), "no batch was answered within 20 s");
        node.close();
        sender.join(20_000);
        assertFalse(sender.isAlive());
        if (unexpected.get() != null) {
            throw new AssertionError("the sender failed", unexpected.get());
        }
        List<CompletableFuture<FabricBuffer>> futures;
        synchronized (all) {
            futures = new ArrayList<>(all);
        }
        assertFalse(futures.isEmpty());
        int completed = 0;
        for (CompletableFuture<FabricBuffer> future : futures) {
            try (FabricBuffer response = future.get(15, TimeUnit.SECONDS)) {
                completed++;
            } catch (ExecutionException e) {
                assertInstanceOf(FabricException.class, e.getCause());
            }
        }
        assertTrue(completed > 0, "some batches were answered before the close");
    }

    @Test
    void batchesUnderPoolPressureGiveEveryBufferBack() throws Exception {
        try (FabricNode node = Fixtures.clientConfig().poolCapBytes(2L << 20).maxMessageBytes(1 << 20).start()) {
            FabricEndpoint endpoint = node.endpoint(server.localAddress());
            for (int round = 0; round < 40; round++) {
                int size = round % 2 == 0 ? 64 << 10 : 3000;
                List<FabricBuffer> payloads = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    payloads.add(patterned(node, round * 8L + i, size));
                }
                List<CompletableFuture<FabricBuffer>> futures = endpoint.requestAsync(OP_ECHO, payloads);
                for (int i = 0; i < futures.size(); i++) {
                    FabricBuffer response = futures.get(i).get(30, TimeUnit.SECONDS);
                    var view = response.byteBuffer();
                    assertEquals(-1, Fixtures.mismatch(round * 8L + i, size, view));
                    response.release();
                    view.get(0); // a stale view of a released response never faults
                }
            }
            assertTrue(Fixtures.eventually(Duration.ofSeconds(10), System::gc, () -> node.stats().poolBytesInUse() == 0),
                    () -> "pool in use: " + node.stats().poolBytesInUse());
        }
    }
}
