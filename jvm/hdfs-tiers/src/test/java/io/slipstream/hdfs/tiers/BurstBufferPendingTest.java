package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.hadoop.hdfs.server.datanode.FileIoProvider;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.ReplicaOutputStreams;
import org.apache.hadoop.util.DataChecksum;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * One replica's chunks stored asynchronously, against real slipstream-cache servers; a {@link CacheRelay} in front
 * of one holds its requests (a slow cache) or cuts them (a cache gone) so that chunks are in flight when the test
 * says. Chunks of 100000 bytes.
 */
class BurstBufferPendingTest {
    private static final int CHUNK = 100_000;
    /** Long enough to tell a writer that waits from one that goes on, on a loaded machine too. */
    private static final long BLOCKED_MS = 500;
    private static CacheServer cacheA;
    private static CacheServer cacheB;
    private static int replicas;
    private final List<AutoCloseable> closeAfter = new ArrayList<>();
    private final ExecutorService background = Executors.newCachedThreadPool();
    /** What the replicas' WriteFailed callback was told: "toFile" or "fails", per call. */
    private final List<String> failures = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        cacheA = new CacheServer();
        cacheB = new CacheServer();
    }

    @AfterAll
    static void stop() {
        cacheA.close();
        cacheB.close();
    }

    @AfterEach
    void closeAll() throws Exception {
        background.shutdownNow();
        for (AutoCloseable closeable : closeAfter) {
            closeable.close();
        }
    }

    private BurstBufferStores stores(int maxChunksInFlight) {
        BurstBufferStores stores = new BurstBufferStores(4, (long) maxChunksInFlight * CHUNK, "test");
        closeAfter.add(stores);
        return stores;
    }

    private BurstBufferClient client(String... addresses) {
        List<InetSocketAddress> servers = new ArrayList<>();
        for (String address : addresses) {
            String[] hostPort = address.split(":");
            servers.add(new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1])));
        }
        BurstBufferClient client = new BurstBufferTextClient(servers, 4, 10_000, CHUNK, "", "");
        closeAfter.add(client);
        return client;
    }

    private CacheRelay relay(CacheServer cache) throws IOException {
        CacheRelay relay = new CacheRelay(cache);
        closeAfter.add(relay);
        return relay;
    }

    /** A new replica whose chunk {@code i} goes to server {@code servers[i]} of a two-server client (0 or 1). */
    private BurstBufferPending replica(BurstBufferClient client, BurstBufferStores stores, int maxInFlight,
            int... servers) {
        for (int attempt = 0; ; attempt++) {
            String keyBase = "test:" + (++replicas) + ":" + attempt + ":";
            boolean fits = true;
            for (int chunk = 0; chunk < servers.length; chunk++) {
                fits &= Math.floorMod((keyBase + chunk).hashCode(), 2) == servers[chunk];
            }
            if (fits) {
                return new BurstBufferPending(keyBase, "bp", replicas, 1, CHUNK, maxInFlight, client, stores, 1 << 30,
                        (replica, cause, toFile) -> {
                            synchronized (failures) {
                                failures.add(toFile ? "toFile" : "fails");
                            }
                        });
            }
        }
    }

    private static byte[] data(int length, int seed) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    private static byte[] chunk(byte[] data, int chunk) {
        return Arrays.copyOfRange(data, chunk * CHUNK, Math.min(data.length, (chunk + 1) * CHUNK));
    }

    /** Runs {@code call} in the background; fails unless it is still running after {@link #BLOCKED_MS}. */
    private <T> Future<T> blocked(String what, Callable<T> call) throws Exception {
        Future<T> future = background.submit(call);
        assertThrows(TimeoutException.class, () -> future.get(BLOCKED_MS, TimeUnit.MILLISECONDS),
                what + " should wait for the chunks in flight");
        return future;
    }

    /** Runs {@code call} in the background and returns its result; fails if it waits for long. */
    private <T> T returns(String what, Callable<T> call) throws Exception {
        try {
            return background.submit(call).get(5, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new AssertionError(what + " waited for the cache", e);
        }
    }

    @Test
    void writeGoesOnWhileChunksAreStoredAndWaitsAtTheReplicasBound() throws Exception {
        CacheRelay slow = relay(cacheA);
        BurstBufferStores stores = stores(64);
        BurstBufferPending replica = replica(client(slow.address()), stores, 2);
        byte[] data = data(3 * CHUNK + 10, 1);
        slow.hold();
        assertNull(returns("writing two chunks", () -> replica.write(data, 0, 2 * CHUNK)));
        assertEquals(2, replica.chunksInFlight());
        assertEquals(2, stores.chunksInFlight());
        assertEquals(0, replica.chunksStored());
        // In flight, the chunks are read from memory, in order; the next one is empty so far.
        assertArrayEquals(chunk(data, 0), replica.chunkForRead(0));
        assertArrayEquals(chunk(data, 1), replica.chunkForRead(1));
        assertEquals(0, replica.chunkForRead(2).length);

        // A third full chunk: the writer waits, two chunks in flight at most; the chunk it filled is readable.
        long waitsBefore = stores.writerWaits();
        Future<byte[]> third = blocked("a third chunk", () -> replica.write(data, 2 * CHUNK, CHUNK + 10));
        assertEquals(2, replica.chunksInFlight());
        assertEquals(2 * CHUNK, stores.bytesInFlight());
        assertArrayEquals(chunk(data, 2), replica.chunkForRead(2));
        slow.release();
        assertNull(third.get(10, TimeUnit.SECONDS));
        assertTrue(stores.writerWaits() > waitsBefore);
        assertNull(replica.seal());
        assertEquals(BurstBufferPending.State.SEALED, replica.state());
        assertEquals(4, replica.chunksStored());
        assertEquals(0, replica.chunksInFlight());
        // The DataNode's count drops just after the replica's (a store's last step).
        TierClusters.await("the DataNode's chunks in flight back to 0", 10, () -> stores.chunksInFlight() == 0);
        for (int chunk = 0; chunk < 4; chunk++) {
            assertArrayEquals(chunk(data, chunk), cacheA.get(replica.key(chunk)), "chunk " + chunk);
            assertArrayEquals(chunk(data, chunk), replica.chunkForRead(chunk), "chunk " + chunk + " read");
        }
        assertEquals(0, replica.chunkForRead(4).length, "past the end");
        assertTrue(failures.isEmpty());
    }

    @Test
    void chunkBuffersAreReusedNotAllocatedPerChunk() throws Exception {
        BurstBufferPending replica = replica(client(cacheA.address()), stores(64), 4);
        byte[] data = data(40 * CHUNK + 7, 2);
        for (int off = 0; off < data.length; off += 64 << 10) {
            assertNull(replica.write(data, off, Math.min(64 << 10, data.length - off)));
        }
        assertNull(replica.seal());
        assertTrue(replica.buffersAllocated() <= 5, replica.buffersAllocated() + " buffers for 41 chunks");
        assertEquals(41, replica.chunksStored());
        assertArrayEquals(chunk(data, 40), cacheA.get(replica.key(40)));
    }

    /** bb.maxInFlight.bytes at three chunks: two replicas, each allowed four, share it. */
    @Test
    void theDataNodesBoundHoldsTheWritersOfAllReplicas() throws Exception {
        CacheRelay slow = relay(cacheA);
        BurstBufferStores stores = stores(3);
        BurstBufferClient client = client(slow.address());
        BurstBufferPending first = replica(client, stores, 4);
        BurstBufferPending second = replica(client, stores, 4);
        byte[] data = data(2 * CHUNK, 3);
        slow.hold();
        assertNull(returns("first replica", () -> first.write(data, 0, 2 * CHUNK)));
        assertNull(returns("second replica", () -> second.write(data, 0, CHUNK)));
        assertEquals(3 * CHUNK, stores.bytesInFlight(), "at the limit");
        Future<byte[]> over = blocked("a chunk past the DataNode's bound", () -> second.write(data, CHUNK, CHUNK));
        assertEquals(3, stores.chunksInFlight());
        assertEquals(1, second.chunksInFlight());
        assertArrayEquals(chunk(data, 1), second.chunkForRead(1), "the chunk waiting is readable");
        slow.release();
        assertNull(over.get(10, TimeUnit.SECONDS));
        assertNull(first.seal());
        assertNull(second.seal());
        assertEquals(2, first.chunksStored());
        assertEquals(2, second.chunksStored());
        TierClusters.await("the DataNode's bytes in flight back to 0", 10, () -> stores.bytesInFlight() == 0);
    }

    @Test
    void sealStopAndHsyncWaitForTheChunksInFlight() throws Exception {
        CacheRelay slow = relay(cacheA);
        BurstBufferStores stores = stores(64);
        BurstBufferClient client = client(slow.address());
        byte[] data = data(5 * CHUNK / 2, 4);

        BurstBufferPending sealed = replica(client, stores, 4);
        slow.hold();
        assertNull(returns("writing", () -> sealed.write(data, 0, data.length)));
        Future<byte[]> seal = blocked("seal", sealed::seal);
        slow.release();
        assertNull(seal.get(10, TimeUnit.SECONDS));
        assertEquals(BurstBufferPending.State.SEALED, sealed.state());
        assertEquals(3, sealed.chunksStored());
        assertArrayEquals(chunk(data, 2), cacheA.get(sealed.key(2)));

        // stop() (a recovery) waits too, then returns what is not in the cache: the half chunk being written.
        BurstBufferPending stopped = replica(client, stores, 4);
        slow.hold();
        assertNull(returns("writing", () -> stopped.write(data, 0, data.length)));
        Future<byte[]> stop = blocked("stop", stopped::stop);
        slow.release();
        assertArrayEquals(chunk(data, 2), stop.get(10, TimeUnit.SECONDS));
        assertEquals(2, stopped.chunksStored());
        assertThrows(IOException.class, () -> stopped.write(data, 0, 1), "no byte more after stop");

        // hsync: HDFS's syncDataOut on the streams BlockReceiver gets; its flush after each packet does not wait.
        BurstBufferPending synced = replica(client, stores, 4);
        ReplicaOutputStreams streams = BurstBufferedReplica.streams(synced, new ByteArrayOutputStream(),
                new ByteArrayOutputStream(), DataChecksum.newDataChecksum(DataChecksum.Type.CRC32C, 512), null,
                new FileIoProvider(null, null));
        slow.hold();
        returns("writing and flushing", () -> {
            streams.getDataOut().write(data, 0, 3 * CHUNK / 2);
            streams.flushDataOut();
            return null;
        });
        Future<Object> sync = blocked("hsync", () -> {
            streams.syncDataOut();
            return null;
        });
        slow.release();
        sync.get(10, TimeUnit.SECONDS);
        assertEquals(1, synced.chunksStored());
        assertArrayEquals(chunk(data, 0), cacheA.get(synced.key(0)));
        streams.close();
        assertEquals(BurstBufferPending.State.SEALED, synced.state());
    }

    /**
     * HDFS's PacketResponder interrupts a BlockReceiver whose downstream failed, and the receiver then closes its
     * streams: the close still waits for the stores and seals the replica (as its blocking set did before), and
     * leaves the interrupt for the receiver's next interruptible call.
     */
    @Test
    void anInterruptedWriterStillSealsItsReplica() throws Exception {
        CacheRelay slow = relay(cacheA);
        BurstBufferPending replica = replica(client(slow.address()), stores(64), 4);
        byte[] data = data(3 * CHUNK / 2, 8);
        slow.hold();
        assertNull(returns("writing", () -> replica.write(data, 0, data.length)));
        Future<Boolean> seal = blocked("an interrupted writer's seal", () -> {
            Thread.currentThread().interrupt();
            assertNull(replica.seal());
            return Thread.interrupted();
        });
        slow.release();
        assertTrue(seal.get(10, TimeUnit.SECONDS), "the interrupt is kept");
        assertEquals(BurstBufferPending.State.SEALED, replica.state());
        assertArrayEquals(chunk(data, 1), cacheA.get(replica.key(1)));
    }

    /** Chunks 0 and 2 on cache A, chunk 1 behind a relay to cache B: B fails while 2 is stored. */
    private record LaterFailure(BurstBufferPending replica, byte[] data) {
    }

    private LaterFailure chunkOneFailsAfterChunkTwoIsStored() throws Exception {
        CacheRelay toB = relay(cacheB);
        BurstBufferStores stores = stores(64);
        BurstBufferPending replica = replica(client(cacheA.address(), toB.address()), stores, 4, 0, 1, 0);
        byte[] data = data(3 * CHUNK + 100, 5);
        toB.hold();
        assertNull(returns("writing", () -> replica.write(data, 0, data.length)));
        TierClusters.await("chunks 0 and 2 stored, chunk 1 held", 10, () -> stores.chunksInFlight() == 1);
        assertArrayEquals(chunk(data, 2), cacheA.get(replica.key(2)));
        assertEquals(1, replica.chunksStored(), "chunk 2 is stored, but not counted while chunk 1 is not");
        assertEquals(2, replica.chunksInFlight());
        assertArrayEquals(chunk(data, 1), replica.chunkForRead(1));
        assertArrayEquals(chunk(data, 2), replica.chunkForRead(2), "from memory still");
        toB.cut();
        TierClusters.await("chunk 1's store failed", 10, () -> stores.chunksInFlight() == 0);
        assertTrue(failures.isEmpty(), "acted on by the writer, not by the store");
        return new LaterFailure(replica, data);
    }

    @Test
    void aLaterChunkFailingFailsTheWriteAndTheDropCoversChunksStoredAfterIt() throws Exception {
        LaterFailure failed = chunkOneFailsAfterChunkTwoIsStored();
        BurstBufferPending replica = failed.replica();
        IOException e = assertThrows(IOException.class, () -> replica.write(failed.data(), 0, 1));
        assertTrue(e.getMessage().contains("chunk 1"), e.getMessage());
        assertEquals(BurstBufferPending.State.DROPPED, replica.state());
        assertEquals(List.of("fails"), failures);
        assertEquals(1, replica.chunksStored());
        assertEquals(3, replica.chunksHandedOver(), "the drop deletes chunk 2's key too");
        assertNull(replica.chunkForRead(0), "dropped: readers go to the block file");
    }

    @Test
    void aRecoveryAfterALaterChunkFailedGetsEveryByteNotStoredInOrder() throws Exception {
        LaterFailure failed = chunkOneFailsAfterChunkTwoIsStored();
        BurstBufferPending replica = failed.replica();
        byte[] data = failed.data();
        byte[] unstored = replica.stop();
        assertArrayEquals(Arrays.copyOfRange(data, CHUNK, data.length), unstored);
        assertEquals(1, replica.chunksStored());
        assertEquals(3, replica.chunksHandedOver());
        assertArrayEquals(chunk(data, 2), replica.chunkForRead(2), "readable from memory until flushed");
        assertTrue(failures.isEmpty(), "the recovery has every byte: the write itself does not fail");
    }

    @Test
    void theFirstChunkFailingWhileTheNextIsStoredSendsEveryByteToTheBlockFile() throws Exception {
        CacheRelay toB = relay(cacheB);
        BurstBufferStores stores = stores(64);
        BurstBufferPending replica = replica(client(cacheA.address(), toB.address()), stores, 4, 1, 0);
        byte[] data = data(2 * CHUNK + 50, 6);
        toB.hold();
        assertNull(returns("writing", () -> replica.write(data, 0, 2 * CHUNK + 40)));
        TierClusters.await("chunk 1 stored, chunk 0 held", 10, () -> stores.chunksInFlight() == 1);
        assertArrayEquals(chunk(data, 1), cacheA.get(replica.key(1)));
        assertEquals(0, replica.chunksStored());
        toB.cut();
        TierClusters.await("chunk 0's store failed", 10, () -> stores.chunksInFlight() == 0);
        byte[] held = replica.write(data, 2 * CHUNK + 40, 10);
        assertArrayEquals(data, held, "every byte, in order, for the block file");
        assertEquals(BurstBufferPending.State.DROPPED, replica.state());
        assertEquals(List.of("toFile"), failures);
        assertEquals(2, replica.chunksHandedOver(), "the drop deletes chunk 1's key");
    }

    @Test
    void aChunkStoredAfterTheReplicaWasDroppedDeletesItself() throws Exception {
        CacheRelay slow = relay(cacheA);
        BurstBufferStores stores = stores(64);
        BurstBufferPending replica = replica(client(slow.address()), stores, 4);
        byte[] data = data(CHUNK, 7);
        slow.hold();
        assertNull(returns("writing", () -> replica.write(data, 0, CHUNK)));
        assertTrue(replica.end(BurstBufferPending.State.DROPPED), "the block deleted while written");
        slow.release();
        // A chunk leaves the DataNode's count in flight once its store, and the delete after it, are done.
        TierClusters.await("the store ended", 10, () -> stores.chunksInFlight() == 0);
        assertTrue(cacheA.get(replica.key(0)) == null, "stored after the drop, then deleted by its store");
    }
}
