package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Start, configuration, close. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NodeLifecycleTest {

    /**
     * Every {@code fabric::Config} setting is reachable from Java (a builder method of its camelCase
     * name) with the same default, as the native declarations say (so a setting added in Rust fails
     * here until FabricConfig carries it).
     */
    @Test
    void javaReachesEveryRustSettingWithTheSameDefault() throws Exception {
        NativeLoader.load();
        Map<String, String> rust = pairs(FabricNative.configSettings());
        Map<String, String> java = pairs(FabricConfig.defaults().nativeSettings());
        assertTrue(rust.size() >= 20, "parsed " + rust);
        for (Map.Entry<String, String> setting : rust.entrySet()) {
            String name = setting.getKey();
            if (name.equals("listen") || name.equals("handler_mode")) {
                continue; // passed apart / always Pull
            }
            assertEquals(setting.getValue(), java.get(name), "default of " + name + " (Java " + camelCase(name) + ")");
            boolean hasSetter = Arrays.stream(FabricConfig.Builder.class.getMethods())
                    .anyMatch(m -> m.getName().equals(camelCase(name)) && m.getParameterCount() == 1);
            assertTrue(hasSetter, "FabricConfig.Builder lacks " + camelCase(name) + " for fabric::Config::" + name);
        }
        assertTrue(rust.keySet().containsAll(java.keySet()), "Java passes settings Rust does not know: " + java.keySet());
        assertEquals(null, FabricConfig.defaults().listen());
        assertEquals(FabricTransport.AUTO, FabricConfig.defaults().transport());
    }

    @Test
    void durationsAreWrittenAsTheNativeSideWritesThem() {
        assertEquals("2min", FabricConfig.durationText(Duration.ofSeconds(120)));
        assertEquals("30s", FabricConfig.durationText(Duration.ofSeconds(30)));
        assertEquals("1500ms", FabricConfig.durationText(Duration.ofMillis(1500)));
        assertEquals("50us", FabricConfig.durationText(Duration.ofNanos(50_000)));
    }

    /** Settings added for the reassembly limits reach the node: one the native side refuses fails the start. */
    @Test
    void newLimitsReachTheNativeNode() throws FabricUnavailableException {
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().maxReassemblyMessages(0));
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().reassemblyTimeout(Duration.ZERO));
        try (FabricNode node = FabricConfig.builder().listen("127.0.0.1", 0).maxReassemblyMessagesPerConnection(2)
                .maxReassemblyBytesPerConnection(1 << 20).reassemblyTimeout(Duration.ofSeconds(5))
                .incomingIdleTimeout(Duration.ofSeconds(7)).start()) {
            assertEquals(2, node.config().maxReassemblyMessagesPerConnection());
        }
    }

    private static Map<String, String> pairs(String[] flat) {
        assertEquals(0, flat.length % 2, "name-value pairs");
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i < flat.length; i += 2) {
            assertEquals(null, map.put(flat[i], flat[i + 1]), "repeated " + flat[i]);
        }
        return map;
    }

    static String camelCase(String snake) {
        StringBuilder out = new StringBuilder();
        boolean upper = false;
        for (char c : snake.toCharArray()) {
            if (c == '_') {
                upper = true;
            } else {
                out.append(upper ? Character.toUpperCase(c) : c);
                upper = false;
            }
        }
        return out.toString();
    }

    @Test
    void badConfigurationIsAFabricExceptionOfKindConfig() {
        FabricException e = assertThrows(FabricException.class,
                () -> FabricConfig.builder().chunkSizeBytes(100).start());
        assertEquals(FabricException.Kind.CONFIG, e.kind());
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().maxMessageBytes(0));
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().requestTimeout(Duration.ZERO));
    }

    @Test
    void boundsOfTheJavaSide() throws FabricUnavailableException {
        assertThrows(IllegalArgumentException.class,
                () -> FabricConfig.builder().maxMessageBytes(FabricConfig.MAX_MESSAGE_BYTES_LIMIT + 1));
        FabricConfig.builder().maxMessageBytes(FabricConfig.MAX_MESSAGE_BYTES_LIMIT);
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().completionQueueDepth(0));
        try (FabricNode node = Fixtures.serverConfig().start()) {
            assertThrows(IllegalArgumentException.class, () -> node.serve(Fixtures.HANDLER, FabricNode.SERVE_THREADS_MAX + 1));
            assertThrows(IllegalArgumentException.class, () -> node.serve(Fixtures.HANDLER, 0));
            node.serve(Fixtures.HANDLER, FabricNode.SERVE_THREADS_MAX - 1);
            node.serve(Fixtures.HANDLER, 1);
            assertThrows(IllegalArgumentException.class, () -> node.serve(Fixtures.HANDLER, 1));
        }
    }

    @Test
    void connectionsBeyondMaxConnectionsAreRefused() throws FabricUnavailableException {
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().maxConnections(0));
        assertThrows(IllegalArgumentException.class, () -> FabricConfig.builder().netDevices(" "));
        try (FabricNode server = Fixtures.serverConfig().maxConnections(1).start();
             FabricNode first = Fixtures.clientConfig().start();
             FabricNode second = Fixtures.clientConfig().requestTimeout(Duration.ofSeconds(5)).start()) {
            server.serve(Fixtures.HANDLER, 1);
            try (FabricBuffer reply = first.endpoint(server.localAddress()).request(Fixtures.OP_ECHO, new byte[] {1})) {
                assertEquals(1, reply.length());
            }
            assertThrows(FabricException.class,
                    () -> second.endpoint(server.localAddress()).request(Fixtures.OP_ECHO, new byte[] {2}).close());
            try (FabricBuffer reply = first.endpoint(server.localAddress()).request(Fixtures.OP_ECHO, new byte[] {3})) {
                assertEquals(1, reply.length(), "the accepted client keeps being served");
            }
        }
    }

    @Test
    void aTakenPortFailsToStart() throws FabricUnavailableException {
        try (FabricNode first = Fixtures.serverConfig().start()) {
            InetSocketAddress taken = first.localAddress();
            FabricException e = assertThrows(FabricException.class,
                    () -> Fixtures.serverConfig().listen(taken).start());
            assertEquals(FabricException.Kind.UCX, e.kind());
        }
    }

    @Test
    void anInterruptEndsOnePullUnderWayOrTheNext() throws Exception {
        try (FabricNode node = Fixtures.serverConfig().start()) {
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
            try {
                java.util.concurrent.CompletionService<FabricRequest> pulls =
                        new java.util.concurrent.ExecutorCompletionService<>(pool);
                for (int i = 0; i < 2; i++) {
                    pulls.submit(() -> node.nextRequest(Duration.ofSeconds(30)));
                }
                Thread.sleep(300); // both past their spin: one asleep on the event fd, one on the queue
                node.interruptPull();
                assertEquals(null, pulls.poll(5, TimeUnit.SECONDS).get(), "one pull ended, without a request");
                assertEquals(null, pulls.poll(300, TimeUnit.MILLISECONDS), "the other still waits");
                node.interruptPull();
                assertEquals(null, pulls.poll(5, TimeUnit.SECONDS).get());
            } finally {
                pool.shutdownNow();
            }
            node.interruptPull();
            long start = System.nanoTime();
            assertEquals(null, node.nextRequest(Duration.ofSeconds(5)));
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(1), "the pending interrupt ends the next pull");
            start = System.nanoTime();
            assertEquals(null, node.nextRequest(Duration.ofMillis(50)));
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50), "and only that one");
        }
        FabricNode closed = Fixtures.serverConfig().start();
        closed.close();
        closed.interruptPull(); // nothing to interrupt: no exception
    }

    /** A pull that sleeps at once, without a spin first, still gets its request, and an interrupt ends it. */
    @Test
    void aPullWithoutSpinGetsItsRequestAndEndsAtAnInterrupt() throws Exception {
        try (FabricNode node = Fixtures.serverConfig().start(); FabricNode client = Fixtures.clientConfig().start()) {
            java.util.concurrent.CompletableFuture<FabricBuffer> answer =
                    client.endpoint(node.localAddress()).requestAsync(7, new byte[] {1, 2, 3});
            FabricRequest request = node.nextRequest(Duration.ofSeconds(10), false);
            assertTrue(request != null, "a request within 10 s");
            assertEquals(3, request.payload().length());
            request.respond(new byte[] {9});
            try (FabricBuffer response = answer.get(10, TimeUnit.SECONDS)) {
                assertEquals(9, response.byteBuffer().get(0));
            }
            node.interruptPull();
            long start = System.nanoTime();
            assertEquals(null, node.nextRequest(Duration.ofSeconds(5), false));
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(1), "the pending interrupt ends it");
        }
    }

    @Test
    void closeIsIdempotentAndLaterCallsFailClosed() throws Exception {
        FabricNode server = Fixtures.startServer(3);
        FabricNode client = Fixtures.clientConfig().start();
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        endpoint.request(OP_ECHO, new byte[1]).close();
        long start = System.nanoTime();
        server.close();
        server.close();
        assertTrue(server.isClosed());
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "close waits for handler threads, boundedly");
        String handlers = server.threadName("handler-");
        assertFalse(Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().startsWith(handlers) && t.isAlive()), "handler threads end");
        assertEquals(FabricException.Kind.CLOSED, assertThrows(FabricException.class, server::stats).kind());
        assertEquals(FabricException.Kind.CLOSED, assertThrows(FabricException.class, () -> server.allocate(1)).kind());
        assertEquals(FabricException.Kind.CLOSED,
                assertThrows(FabricException.class, () -> server.nextRequest(Duration.ofMillis(1))).kind());
        assertThrows(FabricException.class, () -> server.serve(Fixtures.HANDLER, 1));

        // The client notices: its next request to the closed server fails instead of hanging.
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(OP_ECHO, new byte[1]).close());
        assertTrue(e.kind() == FabricException.Kind.PEER_FAILED || e.kind() == FabricException.Kind.TIMEOUT
                || e.kind() == FabricException.Kind.UCX, e.toString());
        client.close();
        assertEquals(FabricException.Kind.CLOSED,
                assertThrows(FabricException.class, () -> endpoint.request(OP_ECHO, new byte[1])).kind());
    }

    @Test
    void closedNodesAreFreedOnceNothingReferencesThem() throws Exception {
        FabricNode node = Fixtures.serverConfig().start();
        node.allocate(100).release();
        node.close();
        assertTrue(Fixtures.eventually(Duration.ofSeconds(20), System::gc, node::isNativeFreed));
    }

    @Test
    void aLeakedNodeIsClosedAndFreedByTheCleaner() throws Exception {
        FabricNode server = Fixtures.startServer(1);
        try {
            NodeHandle leaked = leakAClient(server);
            assertTrue(Fixtures.eventually(Duration.ofSeconds(20), System::gc, leaked::isFreed),
                    "an unreachable node is closed and freed");
        } finally {
            server.close();
        }
    }

    private static NodeHandle leakAClient(FabricNode server) throws FabricUnavailableException {
        FabricNode client = Fixtures.clientConfig().start();
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        endpoint.request(OP_ECHO, new byte[10]).close();
        return client.handle(); // neither the node nor its endpoint escapes
    }

    @Test
    void forcedTcpWorks() throws Exception {
        try (FabricNode server = Fixtures.serverConfig().transport(FabricTransport.TCP).start();
                FabricNode client = Fixtures.clientConfig().transport(FabricTransport.TCP).start()) {
            server.serve(Fixtures.HANDLER, 1);
            try (FabricBuffer response = client.endpoint(server.localAddress()).request(OP_ECHO, Fixtures.pattern(5, 100_000))) {
                assertEquals(-1, Fixtures.mismatch(5, 100_000, response.byteBuffer()));
            }
        }
    }

    /**
     * Forced to TCP, requests in flight together are corked into bundles, and so are the answers of the
     * pulling handler threads while other requests of their connection are in service (docs/fabric.md,
     * "Corked requests and answers"); every answer arrives intact. With corkOverTcp off, nothing is corked.
     */
    @Test
    void forcedTcpCorksRequestsAndAnswersInFlightTogether() throws Exception {
        for (boolean cork : new boolean[] {true, false}) {
            try (FabricNode server = Fixtures.serverConfig().transport(FabricTransport.TCP).corkOverTcp(cork).start();
                    FabricNode client = Fixtures.clientConfig().transport(FabricTransport.TCP).corkOverTcp(cork).start()) {
                server.serve(Fixtures.HANDLER, 2);
                FabricEndpoint endpoint = client.endpoint(server.localAddress());
                for (int burst = 0; burst < 50; burst++) {
                    List<CompletableFuture<FabricBuffer>> answers = new ArrayList<>();
                    for (int i = 0; i < 64; i++) {
                        answers.add(endpoint.requestAsync(OP_ECHO, ByteBuffer.allocate(8).putLong(0, burst * 64L + i)));
                    }
                    for (int i = 0; i < answers.size(); i++) {
                        try (FabricBuffer answer = answers.get(i).get(30, TimeUnit.SECONDS)) {
                            assertEquals(burst * 64L + i, answer.byteBuffer().getLong(0), "answer " + i + " of burst " + burst);
                        }
                    }
                    if (cork && client.stats().requestsBundled() > 0 && server.stats().corked() > 0) {
                        break;
                    }
                }
                FabricStats clientStats = client.stats();
                FabricStats serverStats = server.stats();
                if (cork) {
                    assertTrue(clientStats.requestsBundled() > 0 && clientStats.corked() > 0, clientStats.toString());
                    assertTrue(serverStats.corked() > 0, serverStats.toString());
                } else {
                    assertEquals(0, clientStats.corked() + serverStats.corked(), clientStats + " " + serverStats);
                }
                assertEquals(0, clientStats.protocolErrors() + serverStats.protocolErrors());
            }
        }
    }
}
