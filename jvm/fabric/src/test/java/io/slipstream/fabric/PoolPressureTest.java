package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Views of released buffers under pool pressure: at its cap the pool unmaps free buffers of other
 * sizes, and before views were pinned it unmapped memory that a released buffer's view still pointed
 * at, so a touch of that view killed the JVM (SIGSEGV). Here every touch of a released buffer's
 * methods throws and every touch of a stale view stays inside mapped memory.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PoolPressureTest {
    private static final Duration GC_PATIENCE = Duration.ofSeconds(20);
    private static final int CAP = 2 << 20;
    private static final int[] SIZES = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20};

    private static FabricNode smallPool(boolean listen) throws FabricUnavailableException {
        FabricConfig.Builder builder = FabricConfig.builder().poolCapBytes(CAP).maxMessageBytes(1 << 20)
                .requestTimeout(Duration.ofSeconds(20));
        if (listen) {
            builder.listen("127.0.0.1", 0);
        }
        return builder.start();
    }

    private static void assertReleased(FabricBuffer buffer) {
        assertTrue(buffer.isReleased());
        assertThrows(IllegalStateException.class, buffer::length);
        assertThrows(IllegalStateException.class, buffer::byteBuffer);
        assertThrows(IllegalStateException.class, buffer::release);
    }

    /**
     * Writes and reads every page of a view (stale or not): must not fault. The bytes read are not
     * checked: another buffer may own a stale view's memory now, which is what a stale view means.
     */
    private static long touch(ByteBuffer view, byte value) {
        long sum = 0;
        for (int i = 0; i < view.capacity(); i += 4096) {
            view.put(i, value);
            sum += view.get(i);
        }
        return sum;
    }

    private static boolean exhausted(FabricException e) {
        return e.kind() == FabricException.Kind.POOL_EXHAUSTED;
    }

    @Test
    void staleViewsKeepTheirMemoryMappedWhenThePoolReclaimsOtherSizes() throws Exception {
        FabricNode node = smallPool(false);
        try {
            List<FabricBuffer> buffers = new ArrayList<>();
            List<ByteBuffer> views = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                FabricBuffer buffer = node.tryAllocate(256 << 10);
                buffers.add(buffer);
                views.add(buffer.byteBuffer());
            }
            assertEquals(CAP, node.stats().poolBytesMapped());
            buffers.forEach(FabricBuffer::release);
            buffers.forEach(PoolPressureTest::assertReleased);
            // A 1 MiB buffer needs four free 256 KiB ones given up, all with live views: they lose
            // their registration and pages but stay mapped, so the big buffer fits...
            FabricBuffer big = node.tryAllocate(1 << 20);
            assertTrue(node.stats().poolBytesMapped() <= CAP);
            // ...and every stale view can still be touched.
            views.forEach(view -> touch(view, (byte) 7));
            big.release();
        } finally {
            node.close();
        }
    }

    @Test
    void smallPinnedBuffersComeBackOnceTheirViewsAreGarbage() throws Exception {
        FabricNode node = smallPool(false);
        try {
            List<ByteBuffer> views = new ArrayList<>();
            List<FabricBuffer> buffers = new ArrayList<>();
            for (int i = 0; i < CAP / (32 << 10); i++) {
                FabricBuffer buffer = node.tryAllocate(32 << 10);
                views.add(buffer.byteBuffer());
                buffers.add(buffer);
            }
            assertEquals(CAP, node.stats().poolBytesMapped());
            buffers.forEach(FabricBuffer::release);
            buffers.forEach(PoolPressureTest::assertReleased);
            buffers = null;
            // Heap-backed small buffers cannot be given up while views point into them.
            FabricException e = assertThrows(FabricException.class, () -> node.tryAllocate(1 << 20));
            assertTrue(exhausted(e), e::toString);
            views.forEach(view -> touch(view, (byte) 9));
            views = null;
            assertTrue(Fixtures.eventually(GC_PATIENCE, System::gc, () -> {
                try {
                    node.tryAllocate(1 << 20).release();
                    return true;
                } catch (FabricException exhausted) {
                    return false;
                }
            }), "unpinned memory is reclaimed at the cap");
            assertTrue(node.stats().poolBytesMapped() <= CAP);
        } finally {
            node.close();
        }
    }

    @Test
    void concurrentAllocationsReleasesAndStaleTouchesNeverCrash() throws Exception {
        FabricNode server = smallPool(true);
        FabricNode client = smallPool(false);
        // The server's handler keeps views of released payloads and touches them on later requests.
        ConcurrentLinkedDeque<ByteBuffer> serverStale = new ConcurrentLinkedDeque<>();
        server.serve(request -> {
            FabricBuffer payload = request.payload();
            ByteBuffer view = payload.byteBuffer();
            request.respond(payload); // consumes (releases) the payload
            assertReleased(payload);
            serverStale.addLast(view);
            while (serverStale.size() > 8) {
                serverStale.pollFirst();
            }
            for (ByteBuffer stale : serverStale) {
                touch(stale, (byte) 3);
            }
        }, 2);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong allocated = new AtomicLong();
        AtomicLong refused = new AtomicLong();
        AtomicLong responses = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        try {
            FabricEndpoint endpoint = client.endpoint(server.localAddress());
            for (int t = 0; t < 4; t++) {
                final boolean requester = t == 0;
                threads.add(new Thread(() -> {
                    ArrayDeque<ByteBuffer> stale = new ArrayDeque<>();
                    ThreadLocalRandom random = ThreadLocalRandom.current();
                    try {
                        for (int i = 0; i < 300; i++) {
                            int size = SIZES[random.nextInt(SIZES.length)];
                            FabricBuffer buffer;
                            try {
                                buffer = requester
                                        ? endpoint.request(OP_ECHO, new byte[Math.min(size, 256 << 10)])
                                        : client.tryAllocate(size);
                            } catch (FabricException e) {
                                if (!exhausted(e) && !(requester && e.kind() == FabricException.Kind.REMOTE)) {
                                    throw e;
                                }
                                refused.incrementAndGet();
                                stale.clear(); // let views go, so their memory can be reclaimed
                                continue;
                            }
                            (requester ? responses : allocated).incrementAndGet();
                            ByteBuffer view = buffer.byteBuffer();
                            touch(view, (byte) i);
                            buffer.release();
                            assertReleased(buffer);
                            stale.addLast(view);
                            if (stale.size() > 4) {
                                stale.pollFirst();
                            }
                            for (ByteBuffer old : stale) {
                                touch(old, (byte) -i);
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "pool-pressure-" + t));
            }
            threads.forEach(Thread::start);
            for (Thread thread : threads) {
                thread.join(TimeUnit.SECONDS.toMillis(90));
                assertTrue(!thread.isAlive(), thread.getName() + " finished");
            }
            if (failure.get() != null) {
                throw new AssertionError("a thread failed", failure.get());
            }
            assertTrue(allocated.get() > 0 && responses.get() > 0,
                    "allocated " + allocated + ", responses " + responses + ", refused " + refused);
            assertTrue(client.stats().poolBytesMapped() <= CAP + (1 << 20), "cap (plus the small reserve) held");
            serverStale.clear();
            // The JVM is alive and the pool still works: once the views are garbage, any size fits again.
            assertTrue(Fixtures.eventually(GC_PATIENCE, System::gc, () -> {
                try {
                    client.tryAllocate(1 << 20).release();
                    return true;
                } catch (FabricException exhausted) {
                    return false;
                }
            }), "the pool recovers once stale views are garbage");
        } finally {
            client.close();
            server.close();
        }
    }
}
