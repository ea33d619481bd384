package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_DESCRIBE;
import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static io.slipstream.fabric.Fixtures.OP_FAIL;
import static io.slipstream.fabric.Fixtures.OP_THROW;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Request/response between two nodes in this JVM, through every payload kind. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EchoTest {
    private static FabricNode server;
    private static FabricNode client;
    private static FabricEndpoint endpoint;

    @BeforeAll
    static void start() throws FabricUnavailableException {
        server = Fixtures.startServer(2);
        client = Fixtures.clientConfig().start();
        endpoint = client.endpoint(server.localAddress());
    }

    @AfterAll
    static void stop() {
        client.close();
        server.close();
    }

    @Test
    void addresses() {
        assertNotNull(server.localAddress());
        assertEquals("127.0.0.1", server.localAddress().getAddress().getHostAddress());
        assertTrue(server.localAddress().getPort() > 0);
        assertNull(client.localAddress(), "a client-only node has no address");
        assertSame(endpoint, client.endpoint(server.localAddress()), "endpoints are cached per peer");
        assertEquals(server.localAddress(), endpoint.peer());
    }

    @Test
    void echoByteArray() {
        byte[] payload = Fixtures.pattern(1, 1000);
        try (FabricBuffer response = endpoint.request(OP_ECHO, payload)) {
            assertEquals(1000, response.length());
            assertEquals(-1, Fixtures.mismatch(1, 1000, response.byteBuffer()));
        }
    }

    @Test
    void echoHeapAndDirectByteBuffersRespectPositionAndLimit() {
        byte[] bytes = Fixtures.pattern(2, 5000);
        ByteBuffer heap = ByteBuffer.wrap(new byte[6000], 500, 5000).slice().put(bytes).flip();
        heap.position(100);
        ByteBuffer direct = ByteBuffer.allocateDirect(6000);
        direct.position(7).put(bytes).flip().position(107);
        for (ByteBuffer payload : new ByteBuffer[] {heap, direct, heap.asReadOnlyBuffer()}) {
            int before = payload.position();
            try (FabricBuffer response = endpoint.request(OP_ECHO, payload)) {
                assertEquals(4900, response.length());
                ByteBuffer view = response.byteBuffer();
                for (int i = 0; i < 4900; i++) {
                    assertEquals(bytes[100 + i], view.get(i), "byte " + i);
                }
            }
            assertEquals(before, payload.position(), "the payload's position is left alone");
        }
    }

    @Test
    void echoRegisteredBufferWithoutCopies() {
        FabricBuffer payload = client.allocate(3000);
        assertTrue(payload.capacity() >= 3000);
        payload.byteBuffer().put(Fixtures.pattern(3, 3000));
        payload.setLength(2500);
        try (FabricBuffer response = endpoint.request(OP_ECHO, payload)) {
            assertTrue(payload.isReleased(), "sending consumes the buffer");
            assertEquals(2500, response.length());
            assertEquals(-1, Fixtures.mismatch(3, 2500, response.byteBuffer()));
        }
    }

    @Test
    void bufferOfAnotherNodeIsCopied() {
        FabricBuffer foreign = server.allocate(100);
        foreign.byteBuffer().put(Fixtures.pattern(4, 100));
        try (FabricBuffer response = endpoint.request(OP_ECHO, foreign)) {
            assertTrue(foreign.isReleased());
            assertEquals(-1, Fixtures.mismatch(4, 100, response.byteBuffer()));
        }
    }

    @Test
    void emptyPayloadAndOpCodes() {
        try (FabricBuffer response = endpoint.request(OP_ECHO, new byte[0])) {
            assertEquals(0, response.length());
        }
        try (FabricBuffer response = endpoint.request(OP_DESCRIBE, new byte[77])) {
            assertEquals(OP_DESCRIBE, response.byteBuffer().getInt(0));
            assertEquals(77, response.byteBuffer().getInt(4));
        }
        assertThrows(IllegalArgumentException.class, () -> endpoint.request(65536, new byte[1]));
        assertThrows(IllegalArgumentException.class, () -> endpoint.request(-1, new byte[1]));
    }

    @Test
    void remoteFailuresCarryTheHandlersMessage() {
        FabricException failed = assertThrows(FabricException.class,
                () -> endpoint.request(OP_FAIL, "no such shuffle block".getBytes(StandardCharsets.UTF_8)));
        assertEquals(FabricException.Kind.REMOTE, failed.kind());
        assertTrue(failed.getMessage().contains("no such shuffle block"), failed.getMessage());

        FabricException threw = assertThrows(FabricException.class, () -> endpoint.request(OP_THROW, new byte[1]));
        assertEquals(FabricException.Kind.REMOTE, threw.kind());
        assertTrue(threw.getMessage().contains("handler refuses"), threw.getMessage());

        // The connection survives failures.
        try (FabricBuffer response = endpoint.request(OP_ECHO, new byte[] {42})) {
            assertEquals(42, response.byteBuffer().get(0));
        }
    }

    @Test
    void tooLargeIsRefusedBeforeSending() {
        FabricException e = assertThrows(FabricException.class, () -> endpoint.request(OP_ECHO, new byte[(16 << 20) + 1]));
        assertEquals(FabricException.Kind.TOO_LARGE, e.kind());
    }

    @Test
    void statsCount() {
        long sent = client.stats().requestsSent();
        long served = server.stats().requestsServed();
        try (FabricBuffer response = endpoint.request(OP_ECHO, new byte[8])) {
            assertEquals(8, response.length());
        }
        FabricStats clientStats = client.stats();
        assertTrue(clientStats.requestsSent() >= sent + 1);
        assertTrue(clientStats.connectionsOpen() >= 1);
        assertEquals(64L << 20, clientStats.poolCapBytes());
        assertTrue(server.stats().requestsServed() >= served + 1);
    }

    @Test
    void echoArrayRoundTripKeepsBytes() {
        byte[] payload = "hello, fabric".getBytes(StandardCharsets.UTF_8);
        try (FabricBuffer response = endpoint.request(OP_ECHO, payload)) {
            byte[] copy = new byte[response.length()];
            response.byteBuffer().get(copy);
            assertArrayEquals(payload, copy);
        }
    }

    /**
     * Answering frees the request's payload in the same native call, after the answer's data was
     * copied: a handler may answer with a copy of a view of its own payload (or fail with its text),
     * and the payloads go back to the pool.
     */
    @Test
    void answersCopyTheirOwnPayloadBeforeItIsFreed() throws Exception {
        FabricNode own = Fixtures.serverConfig().start();
        try {
            java.util.List<FabricRequest> answered = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
            own.serve(request -> {
                // Listed before answering: the client may check the list as soon as its answer arrives.
                answered.add(request);
                if (request.op() == OP_FAIL) {
                    request.fail(StandardCharsets.UTF_8.decode(request.payloadBuffer()).toString());
                } else {
                    request.respond(request.payloadBuffer()); // a copy of the payload's own view
                }
            }, 1);
            FabricEndpoint toOwn = client.endpoint(own.localAddress());
            long baseline = own.stats().poolBytesInUse();
            for (int i = 0; i < 50; i++) {
                int size = 1 + i * 97;
                try (FabricBuffer response = toOwn.request(OP_ECHO, Fixtures.pattern(i, size))) {
                    assertEquals(-1, Fixtures.mismatch(i, size, response.byteBuffer()), "echo " + i);
                }
            }
            FabricException failed = assertThrows(FabricException.class,
                    () -> toOwn.request(OP_FAIL, "its own words".getBytes(StandardCharsets.UTF_8)));
            assertTrue(failed.getMessage().contains("its own words"), failed.getMessage());
            assertEquals(51, answered.size());
            // The handler thread may still be returning from its last answer.
            assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { },
                    () -> answered.stream().allMatch(r -> r.isAnswered() && r.payload().isReleased())), "every request answered");
            for (FabricRequest request : answered) {
                assertTrue(request.payload().isReleased(), "answering released the payload");
            }
            assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { },
                    () -> own.stats().poolBytesInUse() == baseline),
                    () -> "server pool in use " + own.stats().poolBytesInUse() + ", baseline " + baseline);
        } finally {
            own.close();
        }
    }

    /**
     * {@code failAndClose} and {@code respondAndClose}: the caller gets the answer, the server drops
     * that connection (its count of open connections falls back to 0), and the caller's next
     * request is served on a new connection.
     */
    @Test
    void answersThatCloseTheConnectionArriveThenTheConnectionCloses() throws Exception {
        FabricNode own = Fixtures.serverConfig().start();
        try {
            own.serve(request -> {
                byte[] bytes = new byte[request.payload().length()];
                request.payloadBuffer().get(bytes);
                switch (request.op()) {
                    case OP_FAIL -> request.failAndClose("malformed frame: " + bytes.length + " bytes");
                    case OP_DESCRIBE -> request.respondAndClose(bytes, 1, bytes.length - 1);
                    default -> request.respond(bytes);
                }
            }, 1);
            FabricEndpoint toOwn = client.endpoint(own.localAddress());
            echoEventually(toOwn, (byte) 1);
            assertEquals(1, own.stats().connectionsOpen());
            FabricException failed = assertThrows(FabricException.class, () -> toOwn.request(OP_FAIL, new byte[3]));
            assertEquals(FabricException.Kind.REMOTE, failed.kind());
            assertTrue(failed.getMessage().contains("malformed frame: 3 bytes"), failed.getMessage());
            assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { },
                    () -> own.stats().connectionsOpen() == 0), "the server closed the connection: " + own.stats());
            echoEventually(toOwn, (byte) 7);
            assertEquals(1, own.stats().connectionsOpen(), "served on a new connection");
            try (FabricBuffer response = toOwn.request(OP_DESCRIBE, new byte[] {5, 6, 7})) {
                assertEquals(2, response.length());
                assertEquals(6, response.byteBuffer().get(0));
            }
            assertTrue(Fixtures.eventually(java.time.Duration.ofSeconds(10), () -> { },
                    () -> own.stats().connectionsOpen() == 0), "closed after the answer: " + own.stats());
            echoEventually(toOwn, (byte) 9);
        } finally {
            own.close();
        }
    }

    /** An echo of {@code b}; a request that went on a connection the server had just closed is asked again. */
    private static void echoEventually(FabricEndpoint to, byte b) {
        long deadline = System.nanoTime() + java.time.Duration.ofSeconds(10).toNanos();
        while (true) {
            try (FabricBuffer response = to.request(OP_ECHO, new byte[] {b})) {
                assertEquals(b, response.byteBuffer().get(0));
                return;
            } catch (FabricException e) {
                if (e.kind() != FabricException.Kind.PEER_FAILED || System.nanoTime() > deadline) {
                    throw e;
                }
            }
        }
    }
}
