package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static io.slipstream.fabric.Fixtures.OP_FAIL;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Asynchronous requests: completion by the node's completer thread, failures, limits, close. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AsyncTest {
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

    @Test
    void aThousandRequestsInFlightComplete() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        List<CompletableFuture<FabricBuffer>> futures = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            futures.add(endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8).putLong(0, i)));
        }
        for (int i = 0; i < futures.size(); i++) {
            try (FabricBuffer response = futures.get(i).get(30, TimeUnit.SECONDS)) {
                assertEquals(i, response.byteBuffer().getLong(0));
            }
        }
    }

    @Test
    void completionsRunOnTheCompleterThread() throws Exception {
        // The answer is held until the stage is attached: a stage attached to an already completed
        // future runs on the caller's thread, which would make this test depend on timing.
        java.util.concurrent.CountDownLatch attached = new java.util.concurrent.CountDownLatch(1);
        try (FabricNode gated = Fixtures.serverConfig().start()) {
            gated.serve(request -> {
                try {
                    if (!attached.await(10, TimeUnit.SECONDS)) {
                        request.fail("the test never attached its stage");
                        return;
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                request.respond(request.payload());
            }, 1);
            FabricEndpoint endpoint = client.endpoint(gated.localAddress());
            CompletableFuture<String> thread = endpoint.requestAsync(OP_ECHO, new byte[1])
                    .thenApply(response -> {
                        response.close();
                        return Thread.currentThread().getName();
                    });
            attached.countDown();
            assertEquals(client.threadName("completer"), thread.get(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void remoteFailureCompletesExceptionally() {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        CompletableFuture<FabricBuffer> future = endpoint.requestAsync(OP_FAIL, "gone".getBytes(StandardCharsets.UTF_8));
        ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
        FabricException cause = assertInstanceOf(FabricException.class, e.getCause());
        assertEquals(FabricException.Kind.REMOTE, cause.kind());
        assertTrue(cause.getMessage().contains("gone"));
    }

    @Test
    void aPeerThatDoesNotListenFailsTheRequest() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort(); // free once closed: nobody listens there
        }
        try (FabricNode node = Fixtures.clientConfig().requestTimeout(Duration.ofSeconds(3)).start()) {
            InetSocketAddress nowhere = new InetSocketAddress("127.0.0.1", port);
            long start = System.nanoTime();
            Throwable failure;
            try {
                CompletableFuture<FabricBuffer> future = node.endpoint(nowhere).requestAsync(OP_ECHO, new byte[1]);
                failure = assertThrows(ExecutionException.class, () -> future.get(20, TimeUnit.SECONDS)).getCause();
            } catch (FabricException connectFailed) {
                failure = connectFailed; // endpoint() may already fail to connect
            }
            FabricException cause = assertInstanceOf(FabricException.class, failure);
            assertTrue(cause.kind() == FabricException.Kind.PEER_FAILED || cause.kind() == FabricException.Kind.TIMEOUT
                    || cause.kind() == FabricException.Kind.UCX, cause.toString());
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(15));
        }
    }

    @Test
    void closingTheNodeFailsWhatIsInFlight() throws Exception {
        FabricNode puller = Fixtures.serverConfig().start(); // never answers: nobody pulls
        FabricNode node = Fixtures.clientConfig().start();
        try {
            FabricEndpoint endpoint = node.endpoint(puller.localAddress());
            List<CompletableFuture<FabricBuffer>> futures = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                futures.add(endpoint.requestAsync(OP_ECHO, new byte[16]));
            }
            node.close();
            for (CompletableFuture<FabricBuffer> future : futures) {
                ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
                FabricException cause = assertInstanceOf(FabricException.class, e.getCause());
                assertEquals(FabricException.Kind.CLOSED, cause.kind());
            }
            CompletableFuture<FabricBuffer> late = endpoint.requestAsync(OP_ECHO, new byte[1]);
            ExecutionException e = assertThrows(ExecutionException.class, () -> late.get(1, TimeUnit.SECONDS));
            assertEquals(FabricException.Kind.CLOSED, ((FabricException) e.getCause()).kind());
        } finally {
            node.close();
            puller.close();
        }
    }

    @Test
    void theCompletionQueueBoundMakesCallersWaitThenRefuses() throws Exception {
        FabricNode puller = Fixtures.serverConfig().start(); // never answers
        try (FabricNode node = Fixtures.clientConfig().completionQueueDepth(4).requestTimeout(Duration.ofMillis(1500)).start()) {
            FabricEndpoint endpoint = node.endpoint(puller.localAddress());
            List<CompletableFuture<FabricBuffer>> admitted = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                admitted.add(endpoint.requestAsync(OP_ECHO, new byte[1]));
            }
            long start = System.nanoTime();
            CompletableFuture<FabricBuffer> fifth = endpoint.requestAsync(OP_ECHO, new byte[1]);
            long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            // Either the fifth waited for a permit that a timeout freed, or it was refused after waiting.
            assertTrue(waitedMs >= 500, "waited " + waitedMs + " ms");
            for (CompletableFuture<FabricBuffer> future : admitted) {
                ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
                assertEquals(FabricException.Kind.TIMEOUT, ((FabricException) e.getCause()).kind());
            }
            ExecutionException e = assertThrows(ExecutionException.class, () -> fifth.get(10, TimeUnit.SECONDS));
            FabricException.Kind kind = ((FabricException) e.getCause()).kind();
            assertTrue(kind == FabricException.Kind.OVERLOADED || kind == FabricException.Kind.TIMEOUT, kind.toString());
        } finally {
            puller.close();
        }
    }
}
