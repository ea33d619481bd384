package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
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

/** Registered buffers: explicit release, use after release, consumption by sends, garbage collection. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BufferLifetimeTest {
    private static final Duration GC_PATIENCE = Duration.ofSeconds(20);

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
    void everyMethodThrowsAfterRelease() {
        FabricBuffer buffer = client.allocate(100);
        ByteBuffer view = buffer.byteBuffer();
        assertEquals(100, view.remaining());
        assertTrue(view.isDirect());
        buffer.release();
        assertTrue(buffer.isReleased());
        assertThrows(IllegalStateException.class, buffer::length);
        assertThrows(IllegalStateException.class, buffer::capacity);
        assertThrows(IllegalStateException.class, buffer::byteBuffer);
        assertThrows(IllegalStateException.class, () -> buffer.setLength(1));
        assertThrows(IllegalStateException.class, buffer::release);
        buffer.close(); // idempotent, for try-with-resources
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        assertThrows(IllegalStateException.class, () -> endpoint.request(OP_ECHO, buffer));
        assertThrows(IllegalStateException.class, () -> endpoint.requestAsync(OP_ECHO, buffer));
    }

    @Test
    void sendingConsumesTheBuffer() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        FabricBuffer sync = client.allocate(10);
        endpoint.request(OP_ECHO, sync).close();
        assertThrows(IllegalStateException.class, sync::byteBuffer);

        FabricBuffer async = client.allocate(10);
        endpoint.requestAsync(OP_ECHO, async).get(10, TimeUnit.SECONDS).close();
        assertThrows(IllegalStateException.class, async::length);
    }

    @Test
    void lengthIsCheckedAgainstCapacity() {
        try (FabricBuffer buffer = client.allocate(1000)) {
            assertTrue(buffer.capacity() >= 1000);
            assertThrows(IllegalArgumentException.class, () -> buffer.setLength(buffer.capacity() + 1));
            assertThrows(IllegalArgumentException.class, () -> buffer.setLength(-1));
            buffer.setLength(buffer.capacity());
            assertEquals(buffer.capacity(), buffer.byteBuffer().remaining());
        }
        assertThrows(IllegalArgumentException.class, () -> client.allocate(-1));
    }

    @Test
    void aStaleViewReadsStaleBytesButNeverCrashes() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        FabricBuffer buffer = node.allocate(64 << 10); // above 4 KiB: pinned, not kept
        ByteBuffer stale = buffer.byteBuffer();
        buffer.release();
        buffer = null; // the buffer keeps its root view reachable; only `stale` should
        stale.putLong(0, 42L); // memory is back in the pool, still mapped
        assertEquals(42L, stale.getLong(0));
        node.close();
        stale.putLong(8, 43L); // the node is closed; its pool lives while this view does
        assertEquals(43L, stale.getLong(8));
        assertFalse(node.isNativeFreed(), "a reachable view keeps the pool alive");
        stale = null;
        assertTrue(Fixtures.eventually(GC_PATIENCE, System::gc, node::isNativeFreed),
                "once no view is left, the closed node's native side is freed");
    }

    /**
     * Small buffers are kept (their memory never freed), so a released one needs nothing from the
     * collector: a closed node is freed at once although a stale view of it is still reachable, and
     * the view still reads and writes memory that stays allocated.
     */
    @Test
    void aStaleViewOfAKeptBufferNeedsNeitherPinNorPool() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        FabricBuffer small = node.allocate(4096);
        ByteBuffer stale = small.byteBuffer();
        small.release();
        FabricBuffer response = node.allocate(100);
        ByteBuffer staleToo = response.byteBuffer();
        response.close();
        node.close();
        assertTrue(node.isNativeFreed(), "released kept buffers hold no reference of the node, without a collection");
        stale.putLong(0, 44L);
        assertEquals(44L, stale.getLong(0));
        staleToo.putLong(8, 45L);
        assertEquals(45L, staleToo.getLong(8));
        // A later node may take the same memory; a stale view then sees its bytes, never a fault.
        FabricNode later = Fixtures.clientConfig().start();
        try {
            for (int i = 0; i < 16; i++) {
                try (FabricBuffer again = later.allocate(4096)) {
                    again.byteBuffer().putLong(16, i);
                }
            }
            stale.putLong(24, 46L);
            assertEquals(46L, stale.getLong(24));
        } finally {
            later.close();
        }
    }

    @Test
    void leakedBuffersReturnToThePoolAfterGarbageCollection() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        try {
            long baseline = node.stats().poolBytesInUse();
            allocateAndDrop(node, 200, 64 << 10);
            long leaked = node.stats().poolBytesInUse();
            assertTrue(leaked >= baseline + 200L * (64 << 10), "in use: " + leaked);
            assertCollectedBackTo(node, baseline);
        } finally {
            node.close();
        }
    }

    /**
     * A small buffer's root view is its memory's for good (the native side holds it and hands it out again
     * with the memory), so its leak guard watches the buffer, not the root: leaked small buffers and
     * responses still go back to the pool. (With the guard on the shared root, they never would.)
     */
    @Test
    void leakedSmallBuffersReturnToThePoolAfterGarbageCollectionToo() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        try {
            FabricEndpoint endpoint = node.endpoint(server.localAddress());
            for (int i = 0; i < 20; i++) {
                node.allocate(100).release(); // memory seen once: its root view is made and held natively
                endpoint.request(OP_ECHO, new byte[100]).release();
            }
            long baseline = node.stats().poolBytesInUse();
            allocateAndDrop(node, 200, 100);
            leakResponses(endpoint, 1000);
            assertTrue(node.stats().poolBytesInUse() > baseline);
            assertCollectedBackTo(node, baseline);
        } finally {
            node.close();
        }
    }

    /** Kept memory's root view is made once: the next buffer of the same memory comes with the same one. */
    @Test
    void aKeptBuffersRootViewIsMadeOnceAndSharedByLaterBuffersOfItsMemory() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        try {
            FabricBuffer first = node.allocate(100);
            ByteBuffer root = first.rootView();
            first.byteBuffer().put(0, (byte) 7).limit(1).position(1); // a duplicate: the root does not move
            first.release();
            try (FabricBuffer again = node.allocate(200)) {
                assertSame(root, again.rootView(), "the same memory (the free list's last) and its one root view");
                assertEquals(0, again.byteBuffer().position());
                assertEquals(200, again.byteBuffer().limit());
                assertEquals(root.capacity(), again.capacity());
            }
            try (FabricBuffer large = node.allocate(64 << 10)) {
                assertNotSame(root, large.rootView());
            }
        } finally {
            node.close();
        }
    }

    @Test
    void leakedResponsesReturnToThePoolToo() throws Exception {
        FabricNode node = Fixtures.clientConfig().start();
        try {
            FabricEndpoint endpoint = node.endpoint(server.localAddress());
            long baseline = node.stats().poolBytesInUse();
            leakResponses(endpoint, 10_000);
            assertTrue(node.stats().poolBytesInUse() > baseline);
            assertCollectedBackTo(node, baseline);
        } finally {
            node.close();
        }
    }

    @Test
    void releasedBuffersAreReused() {
        long mapped;
        try (FabricBuffer first = client.allocate(1 << 16)) {
            assertEquals(1 << 16, first.capacity());
            mapped = client.stats().poolBytesMapped();
        }
        for (int i = 0; i < 100; i++) {
            client.allocate(1 << 16).release();
        }
        assertEquals(mapped, client.stats().poolBytesMapped(), "released memory is reused, not mapped again");
    }

    @Test
    void tryAllocateFailsAtTheCap() {
        FabricNode node;
        try {
            node = FabricConfig.builder().poolCapBytes(2 << 20).maxMessageBytes(1 << 20).start();
        } catch (FabricUnavailableException e) {
            throw new AssertionError(e);
        }
        try (node) {
            List<FabricBuffer> held = new ArrayList<>();
            held.add(node.tryAllocate(1 << 20));
            held.add(node.tryAllocate(1 << 20));
            FabricException e = assertThrows(FabricException.class, () -> node.tryAllocate(1 << 20));
            assertEquals(FabricException.Kind.POOL_EXHAUSTED, e.kind());
            held.forEach(FabricBuffer::release);
            node.tryAllocate(1 << 20).release();
        }
    }

    @Test
    void aRequestAnsweredTwiceThrowsAndADroppedOneFailsTheRequester() throws Exception {
        FabricNode puller = Fixtures.serverConfig().start(); // no serve(): this test pulls by hand
        try {
            FabricEndpoint endpoint = client.endpoint(puller.localAddress());
            CompletableFuture<FabricBuffer> first = endpoint.requestAsync(7, new byte[] {1, 2, 3});
            FabricRequest request = pull(puller);
            assertEquals(7, request.op());
            assertEquals(3, request.payload().length());
            request.respond(new byte[] {9});
            assertTrue(request.isAnswered());
            assertTrue(request.payload().isReleased(), "answering releases the payload");
            assertThrows(IllegalStateException.class, () -> request.respond(new byte[] {9}));
            assertThrows(IllegalStateException.class, () -> request.fail("again"));
            try (FabricBuffer response = first.get(10, TimeUnit.SECONDS)) {
                assertEquals(9, response.byteBuffer().get(0));
            }

            CompletableFuture<FabricBuffer> second = endpoint.requestAsync(8, new byte[] {4});
            assertNotNull(pull(puller)); // dropped unanswered: the cleaner answers it
            ExecutionException dropped = assertThrows(ExecutionException.class, () -> {
                while (true) {
                    System.gc();
                    try {
                        second.get(100, TimeUnit.MILLISECONDS).close();
                        return;
                    } catch (java.util.concurrent.TimeoutException stillWaiting) {
                        // collect again
                    }
                }
            });
            FabricException cause = (FabricException) dropped.getCause();
            assertEquals(FabricException.Kind.REMOTE, cause.kind());
            assertTrue(cause.getMessage().contains("handler dropped the request"), cause.getMessage());
        } finally {
            puller.close();
        }
    }

    private static FabricRequest pull(FabricNode node) {
        for (int i = 0; i < 50; i++) {
            FabricRequest request = node.nextRequest(Duration.ofMillis(200));
            if (request != null) {
                return request;
            }
        }
        throw new AssertionError("no request arrived");
    }

    /** 50 echoes of {@code size} bytes whose responses are never closed. */
    private static void leakResponses(FabricEndpoint endpoint, int size) throws Exception {
        for (int i = 0; i < 50; i++) {
            assertNotNull(endpoint.request(OP_ECHO, new byte[size]));
        }
    }

    /** The collector's cleaners bring the node's pool back to {@code baseline} bytes in use. */
    private static void assertCollectedBackTo(FabricNode node, long baseline) throws InterruptedException {
        assertTrue(Fixtures.eventually(GC_PATIENCE, System::gc, () -> node.stats().poolBytesInUse() == baseline),
                () -> "pool in use after GC: " + node.stats().poolBytesInUse() + ", baseline " + baseline);
    }

    private static void allocateAndDrop(FabricNode node, int count, int size) {
        for (int i = 0; i < count; i++) {
            FabricBuffer buffer = node.allocate(size);
            buffer.byteBuffer().put(0, (byte) i);
        }
    }
}
