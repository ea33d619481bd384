package io.slipstream.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTesting;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The server, cache, fetcher and directory over a real fabric between two nodes of this JVM. */
class ShuffleTransferTest {
    @TempDir
    Path dir;

    private final List<AutoCloseable> closeLater = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = closeLater.size() - 1; i >= 0; i--) {
            closeLater.get(i).close();
        }
    }

    /** Map outputs written as the sort shuffle does: one data file per map, partitions back to back. */
    private class FileOutputs implements MapOutputSource {
        final Map<Long, MapOutputFile> outputs = new HashMap<>();
        final Map<MapOutputBlock, byte[]> contents = new LinkedHashMap<>();

        void write(int shuffleId, long mapId, int[] partitionBytes, long seed) throws IOException {
            Random random = new Random(seed);
            long[] offsets = new long[partitionBytes.length + 1];
            ByteBuffer all = ByteBuffer.allocate(java.util.Arrays.stream(partitionBytes).sum());
            for (int p = 0; p < partitionBytes.length; p++) {
                byte[] bytes = new byte[partitionBytes[p]];
                random.nextBytes(bytes);
                contents.put(new MapOutputBlock(shuffleId, mapId, p), bytes);
                all.put(bytes);
                offsets[p + 1] = offsets[p] + bytes.length;
            }
            Path file = dir.resolve("shuffle_" + shuffleId + "_" + mapId + ".data");
            Files.write(file, all.array());
            outputs.put(mapId, new MapOutputFile(file, offsets));
        }

        @Override
        public Segment locate(MapOutputBlock block) throws IOException {
            MapOutputFile output = outputs.get(block.mapId());
            if (output == null || block.partition() + 1 >= output.partitionOffsets().length) {
                throw new IOException(block + " unknown");
            }
            long start = output.partitionOffsets()[block.partition()];
            return new Segment(output.dataFile(), start, output.partitionOffsets()[block.partition() + 1] - start);
        }

        @Override
        public MapOutputFile mapOutput(int shuffleId, long mapId) {
            return outputs.get(mapId);
        }
    }

    private FabricNode node(boolean listen) throws Exception {
        var builder = FabricNode.builder().poolCapBytes(64L << 20).maxMessageBytes(8 << 20).requestTimeout(Duration.ofSeconds(10));
        if (listen) {
            builder.listen("127.0.0.1", 0);
        }
        FabricNode node = builder.start();
        closeLater.add(node);
        return node;
    }

    private static BlockFetcher.Limits limits(long bytesInFlight, int requests, int requestBytes) {
        return new BlockFetcher.Limits(bytesInFlight, requests, requestBytes, 64, Duration.ofSeconds(30));
    }

    private static Map<MapOutputBlock, byte[]> fetchAll(BlockFetcher fetcher) throws IOException {
        Map<MapOutputBlock, byte[]> got = new HashMap<>();
        fetcher.start();
        while (fetcher.hasNext()) {
            FetchedBlock block = fetcher.next();
            try (InputStream in = block.stream()) {
                assertNull(got.put(block.block(), in.readAllBytes()), "delivered twice: " + block.block());
            }
        }
        return got;
    }

    private static void assertNull(Object value, String message) {
        assertTrue(value == null, message);
    }

    private static Map<InetSocketAddress, List<BlockFetcher.Wanted>> want(InetSocketAddress peer, FileOutputs outputs,
            long expectedBytes) {
        List<BlockFetcher.Wanted> wanted = new ArrayList<>();
        for (MapOutputBlock block : outputs.contents.keySet()) {
            wanted.add(new BlockFetcher.Wanted(block, expectedBytes >= 0 ? expectedBytes : outputs.contents.get(block).length, block));
        }
        return Map.of(peer, wanted);
    }

    @Test
    void every_block_arrives_intact_within_the_bounds_including_empty_and_multi_piece_ones() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 7, new int[] {1000, 0, 300_000, 5, 0, 70_000}, 1);
        outputs.write(0, 9, new int[] {3 << 20, 12, 0, 200_000, 1, 999_999}, 2); // 3 MiB: many pieces
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(2);
        FabricNode client = node(false);
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 3, 256 << 10),
                want(server.localAddress(), outputs, -1))) {
            Map<MapOutputBlock, byte[]> got = fetchAll(fetcher);
            assertEquals(outputs.contents.keySet(), got.keySet());
            outputs.contents.forEach((block, bytes) -> assertArrayEquals(bytes, got.get(block), block.toString()));
            assertTrue(fetcher.peakBytesInFlight() <= 1 << 20, "bytes in flight " + fetcher.peakBytesInFlight());
            assertTrue(fetcher.peakRequestsInFlight() <= 3, "requests in flight " + fetcher.peakRequestsInFlight());
            assertTrue(fetcher.requestsSent() >= 12 + 1, "3 MiB in 256 KiB pieces: " + fetcher.requestsSent());
            assertEquals(outputs.contents.values().stream().mapToLong(b -> b.length).sum(), fetcher.remoteBytes());
        }
    }

    /**
     * Heap arrays for assembled blocks cost the Spark plugin's executors 1 s of GC in `ohb spark groupby` (session 26):
     * a block in pieces goes to the pool when it fits a message (3 MiB here), else to direct memory (9 MiB, above the
     * node's 8 MiB maxMessageBytes).
     */
    @Test
    void a_block_in_pieces_is_put_together_off_the_heap_and_pool_memory_goes_back() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 11, new int[] {3 << 20, 9 << 20}, 3);
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(2);
        FabricNode client = node(false);
        long inUseBefore = client.stats().poolBytesInUse();
        int seen = 0;
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 3, 256 << 10),
                want(server.localAddress(), outputs, -1))) {
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                assertTrue(block.data().isDirect(), block.block() + " assembled on the heap");
                if (block.bytes() == 3 << 20) {
                    assertTrue(client.stats().poolBytesInUse() - inUseBefore >= 3 << 20,
                            "pool bytes in use while the block is held: " + (client.stats().poolBytesInUse() - inUseBefore));
                }
                byte[] got = new byte[block.data().remaining()];
                block.data().get(got);
                assertArrayEquals(outputs.contents.get(block.block()), got, block.block().toString());
                block.release();
                seen++;
            }
            assertTrue(fetcher.requestsSent() >= 48, "12 MiB in 256 KiB pieces: " + fetcher.requestsSent());
        }
        assertEquals(2, seen);
        assertEquals(inUseBefore, client.stats().poolBytesInUse(), "the pool's assembly buffer went back");
        assertTrue(AssemblyBuffers.cachedBytes() >= 9 << 20, "the direct buffer is kept for the next block: "
                + AssemblyBuffers.cachedBytes());
        assertTrue(AssemblyBuffers.cachedBytes() <= AssemblyBuffers.CACHED_BYTES_MAX);
    }

    private static Map<InetSocketAddress, List<BlockFetcher.Wanted>> wantStreamed(InetSocketAddress peer, FileOutputs outputs) {
        List<BlockFetcher.Wanted> wanted = new ArrayList<>();
        for (MapOutputBlock block : outputs.contents.keySet()) {
            wanted.add(new BlockFetcher.Wanted(block, 1 << 20, BlockFetcher.BLOCK_BYTES_MAX, block, true));
        }
        return Map.of(peer, wanted);
    }

    /**
     * MapReduce's skewed 1 GB job handed its reducer map outputs of 134 MiB, each put together off the heap before
     * Hadoop read it as a stream: +533 MiB of reducer RSS over vanilla (session 30). Streamed, a block of any size
     * costs what may be in flight: 9 MiB and 5 MiB blocks read through 1 MiB in flight, in order, intact; small
     * blocks still come whole; the pool and the assembly cache are untouched.
     */
    @Test
    void a_streamed_block_is_read_piece_by_piece_within_the_bytes_in_flight() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 21, new int[] {9 << 20, 1000, 5 << 20, 0, 300_001}, 4);
        outputs.write(0, 22, new int[] {7 << 20, 2 << 20}, 5);
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(2);
        FabricNode client = node(false);
        long cachedBefore = AssemblyBuffers.cachedBytes();
        long inUseBefore = client.stats().poolBytesInUse();
        Map<MapOutputBlock, byte[]> got = new HashMap<>();
        int streamedSeen = 0;
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 3, 128 << 10),
                wantStreamed(server.localAddress(), outputs))) {
            fetcher.start();
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                if (block.bytes() > 128 << 10) {
                    assertTrue(block.streamed(), block.block() + " of " + block.bytes() + " bytes not streamed");
                    assertThrows(IllegalStateException.class, block::data);
                    streamedSeen++;
                }
                byte[] bytes = new byte[block.bytes()];
                try (InputStream in = block.stream()) {
                    int at = 0;
                    while (at < bytes.length) {
                        // Odd read sizes, so reads cross the pieces' edges.
                        int n = in.read(bytes, at, Math.min(bytes.length - at, 77_777));
                        assertTrue(n > 0, "end of " + block.block() + " at " + at + " of " + bytes.length);
                        at += n;
                        assertTrue(fetcher.peakBytesInFlight() <= 1 << 20, "bytes in flight " + fetcher.peakBytesInFlight());
                    }
                    assertEquals(-1, in.read(), "bytes beyond the block's length");
                }
                assertNull(got.put(block.block(), bytes), "delivered twice: " + block.block());
            }
            assertTrue(fetcher.requestsSent() >= (23 << 20) / (128 << 10), "23 MiB in 128 KiB pieces: " + fetcher.requestsSent());
        }
        assertEquals(5, streamedSeen, "9, 5, 7 and 2 MiB and 300 001 bytes, against 128 KiB responses");
        assertEquals(outputs.contents.keySet(), got.keySet());
        outputs.contents.forEach((block, bytes) -> assertArrayEquals(bytes, got.get(block), block.toString()));
        assertEquals(inUseBefore, client.stats().poolBytesInUse(), "every response buffer went back");
        assertEquals(cachedBefore, AssemblyBuffers.cachedBytes(), "nothing was put together");
    }

    /** A reader that lets go of a streamed block half read, and one whose peer dies in the middle of one. */
    @Test
    void a_streamed_block_let_go_half_read_gives_its_pieces_back_and_a_peer_lost_mid_block_fails_the_read() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 31, new int[] {6 << 20, 4 << 20, 3000}, 6);
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(2);
        FabricNode client = node(false);
        long inUseBefore = client.stats().poolBytesInUse();
        Map<MapOutputBlock, byte[]> got = new HashMap<>();
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 3, 128 << 10),
                wantStreamed(server.localAddress(), outputs))) {
            fetcher.start();
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                InputStream in = block.stream();
                if (block.bytes() == 6 << 20) {
                    assertEquals(1 << 20, in.readNBytes(1 << 20).length);
                    in.close(); // half read: its queued pieces are not asked for, its held ones go back
                    assertThrows(IllegalStateException.class, block::stream);
                    continue;
                }
                try (in) {
                    got.put(block.block(), in.readAllBytes());
                }
            }
            assertTrue(fetcher.requestsSent() < (10 << 20) / (128 << 10),
                    "the let-go block's remaining pieces were asked for: " + fetcher.requestsSent() + " requests");
        }
        assertEquals(2, got.size());
        assertArrayEquals(outputs.contents.get(new MapOutputBlock(0, 31, 1)), got.get(new MapOutputBlock(0, 31, 1)));
        assertArrayEquals(outputs.contents.get(new MapOutputBlock(0, 31, 2)), got.get(new MapOutputBlock(0, 31, 2)));
        // The let-go block's pieces already asked for may still be on their way when the fetcher closes:
        // each goes back as it arrives (BlockFetcher.completed), so the pool returns to where it was soon after.
        FabricTesting.awaitPoolBytesInUse(client, inUseBefore, "every response buffer went back");

        FabricNode dying = FabricNode.builder().listen("127.0.0.1", 0).poolCapBytes(64L << 20).maxMessageBytes(8 << 20).start();
        new ShuffleServer(dying, outputs, null, null, RequestAuthenticator.none()).start(1);
        assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
            try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 1, 128 << 10),
                    wantStreamed(dying.localAddress(), outputs))) {
                fetcher.start();
                FetchedBlock block = fetcher.next();
                assertTrue(block.streamed(), block.block() + " not streamed");
                try (InputStream in = block.stream()) {
                    in.readNBytes(256 << 10);
                    dying.close();
                    BlockFetchException failure = assertThrows(BlockFetchException.class, in::readAllBytes);
                    assertNotNull(failure.wanted());
                }
            }
        });
        FabricTesting.awaitPoolBytesInUse(client, inUseBefore, "the failed fetch's buffers went back");
    }

    @Test
    void wrong_size_hints_still_fetch_everything() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(3, 1, new int[] {500_000, 10, 700_000, 0, 40_000}, 3);
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(1);
        FabricNode client = node(false);
        for (long hint : new long[] {1, 10_000_000}) {
            try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(4 << 20, 100, 512 << 10),
                    want(server.localAddress(), outputs, hint))) {
                Map<MapOutputBlock, byte[]> got = fetchAll(fetcher);
                outputs.contents.forEach((block, bytes) -> assertArrayEquals(bytes, got.get(block), block + " hint " + hint));
            }
        }
    }

    @Test
    void the_prefetch_cache_serves_recent_outputs_and_stays_within_its_capacity() throws Exception {
        FileOutputs outputs = new FileOutputs();
        for (long map = 0; map < 6; map++) {
            outputs.write(1, map, new int[] {100_000, 50_000, 0, 106_000}, map);
        }
        FabricNode server = node(true);
        MapOutputCache cache = new MapOutputCache(server, 1 << 20); // holds 4 of the 256 KB outputs
        closeLater.add(cache);
        for (long map = 0; map < 6; map++) {
            assertTrue(cache.prefetch(1, map, outputs));
            assertTrue(cache.cachedBytes() <= 1 << 20);
        }
        assertEquals(4, cache.entries());
        new ShuffleServer(server, outputs, cache, null, RequestAuthenticator.none()).start(2);
        FabricNode client = node(false);
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(8 << 20, 10, 1 << 20),
                want(server.localAddress(), outputs, -1))) {
            Map<MapOutputBlock, byte[]> got = fetchAll(fetcher);
            outputs.contents.forEach((block, bytes) -> assertArrayEquals(bytes, got.get(block), block.toString()));
        }
        assertEquals(4 * 3, cache.hits(), "the non-empty blocks of the 4 cached outputs");
        cache.removeShuffle(1);
        assertEquals(0, cache.cachedBytes());
        assertFalse(cache.prefetch(1, 99, outputs), "unknown map output");
    }

    @Test
    void requests_need_the_right_secret_when_authentication_is_on() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 1, new int[] {1000, 2000}, 5);
        FabricNode server = node(true);
        ShuffleServer shuffleServer = new ShuffleServer(server, outputs, null, null, new RequestAuthenticator("app-secret"));
        shuffleServer.start(1);
        FabricNode client = node(false);
        for (RequestAuthenticator wrong : List.of(new RequestAuthenticator("other-secret"), RequestAuthenticator.none())) {
            try (BlockFetcher fetcher = new BlockFetcher(client, wrong, limits(1 << 20, 10, 1 << 20), want(server.localAddress(), outputs, -1))) {
                BlockFetchException refused = assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
                assertTrue(refused.getMessage().contains("authentication") || refused.getMessage().contains("unauthenticated"),
                        refused.getMessage());
                assertNotNull(refused.wanted());
            }
        }
        assertEquals(2, shuffleServer.refusedRequests());
        try (BlockFetcher fetcher = new BlockFetcher(client, new RequestAuthenticator("app-secret"), limits(1 << 20, 10, 1 << 20),
                want(server.localAddress(), outputs, -1))) {
            assertEquals(2, fetchAll(fetcher).size());
        }
    }

    @Test
    void a_missing_block_fails_alone_a_malformed_request_closes_its_connection_and_the_server_goes_on() throws Exception {
        FileOutputs outputs = new FileOutputs();
        outputs.write(0, 1, new int[] {1000, 2000}, 5);
        FabricNode server = node(true);
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(1);
        FabricNode client = node(false);
        MapOutputBlock missing = new MapOutputBlock(0, 404, 0);
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 10, 1 << 20),
                Map.of(server.localAddress(), List.of(new BlockFetcher.Wanted(missing, 10, "tag"))))) {
            BlockFetchException failure = assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
            assertEquals(missing, failure.wanted().block());
            assertEquals("tag", failure.wanted().tag());
            assertTrue(failure.getMessage().contains("unknown"), failure.getMessage());
        }
        // A request without our header (or of another version) fails alone; one whose body breaks the
        // format, or of an unknown operation, is answered and then its connection is closed.
        int unknownOp = 77;
        for (byte[] garbage : new byte[][] {{}, {2}, {2, 0, 0, 0, 0, 1, 0, 0, 0, 9}, {2, 0, 0, 0, 1, 0, 0x7f, 0, 0, 0}, {1, 0, 0, 0, 0, 1},
                {9, 9, 9}, {2, 0, 1}}) {
            int op = garbage.length == 3 && garbage[2] == 1 ? unknownOp : ShuffleProtocol.OP_FETCH;
            FabricException error = assertThrows(FabricException.class,
                    () -> client.endpoint(server.localAddress()).request(op, garbage).release());
            assertEquals(FabricException.Kind.REMOTE, error.kind());
            boolean broken = garbage.length > 2 && garbage[0] == 2;
            if (broken) {
                FabricTesting.awaitConnectionsOpen(client, 0, "closed after " + error.getMessage());
            } else {
                assertEquals(1, client.stats().connectionsOpen(), "kept after " + error.getMessage());
            }
        }
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 10, 1 << 20),
                want(server.localAddress(), outputs, -1))) {
            assertEquals(2, fetchAll(fetcher).size());
        }
    }

    @Test
    void a_peer_that_dies_mid_fetch_is_a_fetch_failure_not_a_hang() throws Exception {
        FileOutputs outputs = new FileOutputs();
        for (long map = 0; map < 8; map++) {
            outputs.write(0, map, new int[] {2 << 20, 2 << 20}, map);
        }
        FabricNode server = FabricNode.builder().listen("127.0.0.1", 0).poolCapBytes(64L << 20).maxMessageBytes(8 << 20).start();
        new ShuffleServer(server, outputs, null, null, RequestAuthenticator.none()).start(1);
        FabricNode client = node(false);
        assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
            try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(2 << 20, 1, 1 << 20),
                    want(server.localAddress(), outputs, -1))) {
                fetcher.start();
                fetcher.next().release();
                server.close();
                BlockFetchException failure = assertThrows(BlockFetchException.class, () -> {
                    while (fetcher.hasNext()) {
                        fetcher.next().release();
                    }
                });
                assertNotNull(failure.wanted());
            }
        });
    }

    @Test
    void the_directory_answers_registered_peers_only_and_checks_the_secret() throws Exception {
        FabricNode coordinator = node(true);
        PeerDirectory directory = new PeerDirectory();
        new ShuffleServer(coordinator, null, null, directory, new RequestAuthenticator("s")).start(1);
        FabricNode peer = node(true);
        PeerDirectoryClient client = new PeerDirectoryClient(peer, coordinator.localAddress(), new RequestAuthenticator("s"));
        client.register("exec-1", peer.localAddress());
        assertEquals(peer.localAddress().getPort(), client.lookup("exec-1").orElseThrow().getPort());
        assertTrue(client.lookup("exec-2").isEmpty());
        PeerDirectoryClient impostor = new PeerDirectoryClient(peer, coordinator.localAddress(), new RequestAuthenticator("x"));
        assertThrows(FabricException.class, () -> impostor.register("exec-1", new InetSocketAddress("127.0.0.1", 1)));
        assertEquals(peer.localAddress().getPort(), directory.get("exec-1").getPort());
        assertThrows(FabricException.class, () -> node(false).endpoint(coordinator.localAddress())
                .request(ShuffleProtocol.OP_FETCH, new RequestAuthenticator("s").seal(ShuffleProtocol.OP_FETCH, ByteBuffer.allocate(8)))
                .release(), "the coordinator serves no map outputs");
    }

    @Test
    void the_directory_accepts_live_peers_only_never_replaces_a_registration_and_forgets_the_gone() throws Exception {
        FabricNode coordinator = node(true);
        java.util.Set<String> live = java.util.concurrent.ConcurrentHashMap.newKeySet();
        live.add("exec-1");
        PeerDirectory directory = new PeerDirectory(live::contains);
        new ShuffleServer(coordinator, null, null, directory, RequestAuthenticator.none()).start(1);
        FabricNode peer = node(true);
        PeerDirectoryClient client = new PeerDirectoryClient(peer, coordinator.localAddress(), RequestAuthenticator.none());
        FabricException notLive = assertThrows(FabricException.class, () -> client.register("exec-9", peer.localAddress()));
        assertTrue(notLive.getMessage().contains("not a live peer"), notLive.getMessage());
        client.register("exec-1", peer.localAddress());
        client.register("exec-1", peer.localAddress()); // a repeat of the same registration
        FabricException hijack = assertThrows(FabricException.class,
                () -> client.register("exec-1", new InetSocketAddress("127.0.0.1", 1)));
        assertTrue(hijack.getMessage().contains("never replaced"), hijack.getMessage());
        assertEquals(peer.localAddress().getPort(), client.lookup("exec-1").orElseThrow().getPort());
        live.remove("exec-1");
        PeerDirectoryClient other = new PeerDirectoryClient(node(false), coordinator.localAddress(), RequestAuthenticator.none());
        assertThrows(PeerDirectoryClient.PeerGoneException.class, () -> other.lookup("exec-1"));
        assertEquals(0, directory.size(), "the gone peer left the directory");
        // The first client still remembers the address until told to forget it; then it learns the peer is gone.
        assertEquals(peer.localAddress().getPort(), client.lookup("exec-1").orElseThrow().getPort());
        client.forget("exec-1");
        assertThrows(PeerDirectoryClient.PeerGoneException.class, () -> client.lookup("exec-1"));
    }

    @Test
    void a_peer_whose_engine_learns_a_moment_later_that_it_is_gone_is_awaited_and_a_live_one_only_for_the_wait()
            throws Exception {
        FabricNode coordinator = node(true);
        java.util.Set<String> live = java.util.concurrent.ConcurrentHashMap.newKeySet();
        live.add("exec-1");
        live.add("exec-2");
        new ShuffleServer(coordinator, null, null, new PeerDirectory(live::contains), RequestAuthenticator.none()).start(1);
        FabricNode peer = node(true);
        PeerDirectoryClient client = new PeerDirectoryClient(peer, coordinator.localAddress(), RequestAuthenticator.none());
        client.register("exec-1", peer.localAddress());
        client.register("exec-2", peer.localAddress());
        assertTrue(client.lookup("exec-1").isPresent());
        // exec-1's server has failed; its engine drops it 300 ms later (one lookup now would still answer "found").
        Thread engine = new Thread(() -> {
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                return;
            }
            live.remove("exec-1");
        });
        engine.start();
        assertTrue(client.awaitGone("exec-1", java.time.Duration.ofSeconds(10), 20), "exec-1 is gone");
        engine.join();
        long startNanos = System.nanoTime();
        assertFalse(client.awaitGone("exec-2", java.time.Duration.ofMillis(300), 20), "exec-2 is alive");
        assertTrue(System.nanoTime() - startNanos >= 300_000_000L, "asked for the whole wait");
        assertTrue(client.lookup("exec-2").isPresent(), "a live peer's address is remembered again");
    }

    /** A node that answers every request with {@code response} (a peer breaking the protocol). */
    private InetSocketAddress liar(ByteBuffer response) throws Exception {
        FabricNode server = node(true);
        server.serve(request -> request.respond(response.duplicate()), 1);
        return server.localAddress();
    }

    private static ByteBuffer fetchResponse(int tagBytes, long blockBytes, int returned, int dataBytes) {
        ByteBuffer out = ByteBuffer.allocate(tagBytes + 4 + 12 + dataBytes);
        out.position(tagBytes);
        out.putInt(1).putLong(blockBytes).putInt(returned);
        return out.clear();
    }

    @Test
    void a_response_beyond_what_was_asked_or_the_block_s_bound_is_refused_without_allocating_from_it() throws Exception {
        FabricNode client = node(false);
        MapOutputBlock block = new MapOutputBlock(0, 1, 0);
        // Says the block has 1 GiB (its bound is 1 MiB): refused before any array of that size exists.
        InetSocketAddress huge = liar(fetchResponse(0, 1L << 30, 10, 10));
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(1 << 20, 1, 256 << 10),
                Map.of(huge, List.of(new BlockFetcher.Wanted(block, 1000, 1 << 20, "tag"))))) {
            BlockFetchException failure = assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
            assertTrue(failure.getMessage().contains("at most 1048576"), failure.getMessage());
        }
        // More data than the request's budget (64 KiB reserved for a 1000-byte block).
        InetSocketAddress flood = liar(fetchResponse(0, 1 << 20, 1 << 20, 1 << 20));
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.none(), limits(4 << 20, 1, 2 << 20),
                Map.of(flood, List.of(new BlockFetcher.Wanted(block, 1000, 1 << 20, "tag"))))) {
            BlockFetchException failure = assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
            assertTrue(failure.getMessage().contains("asked"), failure.getMessage());
        }
    }

    @Test
    void with_authentication_a_forged_or_altered_response_is_refused() throws Exception {
        FabricNode client = node(false);
        MapOutputBlock block = new MapOutputBlock(0, 1, 0);
        RequestAuthenticator auth = new RequestAuthenticator("app-secret");
        // Well formed, but its tag is not the secret's.
        InetSocketAddress forger = liar(fetchResponse(RequestAuthenticator.TAG_BYTES, 10, 10, 10));
        try (BlockFetcher fetcher = new BlockFetcher(client, auth, limits(1 << 20, 1, 256 << 10),
                Map.of(forger, List.of(new BlockFetcher.Wanted(block, 10, "tag"))))) {
            BlockFetchException failure = assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
            assertTrue(failure.getMessage().contains("response authentication failed"), failure.getMessage());
        }
        // A response signed for another request does not verify for this one.
        byte[] otherRequestTag = auth.requestTag(auth.seal(ShuffleProtocol.OP_FETCH, ByteBuffer.wrap(new byte[] {1})));
        ByteBuffer signed = auth.sealResponse(ShuffleProtocol.OP_FETCH, otherRequestTag, ByteBuffer.wrap(new byte[] {4, 5}));
        assertEquals(2, auth.openResponse(ShuffleProtocol.OP_FETCH, otherRequestTag, signed).remaining());
        byte[] thisRequestTag = auth.requestTag(auth.seal(ShuffleProtocol.OP_FETCH, ByteBuffer.wrap(new byte[] {2})));
        assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> auth.openResponse(ShuffleProtocol.OP_FETCH, thisRequestTag, signed));
        signed.put(signed.limit() - 1, (byte) 6);
        assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> auth.openResponse(ShuffleProtocol.OP_FETCH, otherRequestTag, signed));
    }

    @Test
    void a_block_damaged_on_the_way_is_fetched_again_and_its_server_diagnoses_it() throws Exception {
        FileOutputs outputs = new FileOutputs() {
            @Override
            public String diagnoseCorruption(MapOutputBlock block, long checksumByReader, String algorithm) {
                return "checked " + block + " " + checksumByReader + " " + algorithm;
            }
        };
        outputs.write(0, 1, new int[] {1000, 2000, 3000}, 5);
        FabricNode server = node(true);
        System.setProperty(ShuffleServer.CORRUPT_PROPERTY, "1:1");
        try {
            new ShuffleServer(server, outputs, null, null, new RequestAuthenticator("s")).start(1);
        } finally {
            System.clearProperty(ShuffleServer.CORRUPT_PROPERTY);
        }
        FabricNode client = node(false);
        MapOutputBlock damaged = new MapOutputBlock(0, 1, 1);
        try (BlockFetcher fetcher = new BlockFetcher(client, new RequestAuthenticator("s"), limits(1 << 20, 10, 1 << 20),
                want(server.localAddress(), outputs, -1))) {
            fetcher.start();
            Map<MapOutputBlock, byte[]> got = new HashMap<>();
            int deliveries = 0;
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                deliveries++;
                byte[] bytes = new byte[block.bytes()];
                block.data().get(bytes);
                if (!java.util.Arrays.equals(bytes, outputs.contents.get(block.block()))) {
                    assertEquals(damaged, block.block(), "only the chosen partition is damaged");
                    assertEquals("checked " + damaged + " 77 ADLER32", fetcher.diagnose(block, 77, "ADLER32"));
                    block.release();
                    fetcher.fetchAgain(block);
                    continue;
                }
                got.put(block.block(), bytes);
                block.release();
            }
            assertEquals(4, deliveries, "3 blocks, one of them twice");
            outputs.contents.forEach((block, bytes) -> assertArrayEquals(bytes, got.get(block), block.toString()));
        }
    }

    @Test
    void tags_bind_the_operation_and_the_body() {
        RequestAuthenticator auth = new RequestAuthenticator("k");
        ByteBuffer sealed = auth.seal(ShuffleProtocol.OP_FETCH, ByteBuffer.wrap(new byte[] {1, 2, 3}));
        assertEquals(3, auth.open(ShuffleProtocol.OP_FETCH, sealed).remaining());
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> auth.open(ShuffleProtocol.OP_LOOKUP, sealed));
        ByteBuffer tampered = ByteBuffer.allocate(sealed.remaining()).put(sealed.duplicate()).flip();
        tampered.put(tampered.limit() - 1, (byte) 9);
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> auth.open(ShuffleProtocol.OP_FETCH, tampered));
    }

    @Test
    void a_scoped_server_serves_each_scope_under_its_own_secret_and_refuses_the_rest() throws Exception {
        FileOutputs jobA = new FileOutputs();
        jobA.write(0, 1, new int[] {1000, 2000}, 5);
        FileOutputs jobB = new FileOutputs();
        jobB.write(1, 1, new int[] {300, 400}, 6);
        Map<String, ShuffleServer.Scope> known = Map.of(
                "a", new ShuffleServer.Scope(RequestAuthenticator.scoped("a", "secret-a"), jobA, null),
                "b", new ShuffleServer.Scope(RequestAuthenticator.scoped("b", "secret-b"), jobB, null));
        FabricNode server = node(true);
        ShuffleServer shuffleServer = new ShuffleServer(server, scope -> {
            ShuffleServer.Scope found = known.get(scope);
            if (found == null) {
                throw new RequestAuthenticator.AuthenticationException("unknown scope " + scope);
            }
            return found;
        });
        shuffleServer.start(1);
        FabricNode client = node(false);
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.scoped("b", "secret-b"), limits(1 << 20, 10, 1 << 20),
                want(server.localAddress(), jobB, -1))) {
            Map<MapOutputBlock, byte[]> got = fetchAll(fetcher);
            assertArrayEquals(jobB.contents.get(new MapOutputBlock(1, 1, 1)), got.get(new MapOutputBlock(1, 1, 1)));
        }
        // Job b's secret naming job a's scope, an unknown scope, and an unscoped request: all refused.
        for (RequestAuthenticator wrong : List.of(RequestAuthenticator.scoped("a", "secret-b"), RequestAuthenticator.scoped("c", "secret-b"),
                new RequestAuthenticator("secret-a"))) {
            try (BlockFetcher fetcher = new BlockFetcher(client, wrong, limits(1 << 20, 10, 1 << 20), want(server.localAddress(), jobA, -1))) {
                assertThrows(BlockFetchException.class, () -> fetchAll(fetcher));
            }
        }
        assertEquals(3, shuffleServer.refusedRequests());
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.scoped("a", "secret-a"), limits(1 << 20, 10, 1 << 20),
                want(server.localAddress(), jobA, -1))) {
            assertEquals(2, fetchAll(fetcher).size());
        }
    }

    @Test
    void a_scope_is_covered_by_the_tag_and_must_match() {
        RequestAuthenticator a = RequestAuthenticator.scoped("job-a", "k");
        ByteBuffer sealed = a.seal(ShuffleProtocol.OP_FETCH, ByteBuffer.wrap(new byte[] {1, 2, 3}));
        assertEquals("job-a", RequestAuthenticator.scopeOf(sealed));
        assertEquals(3, a.open(ShuffleProtocol.OP_FETCH, sealed).remaining());
        assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> RequestAuthenticator.scoped("job-b", "k").open(ShuffleProtocol.OP_FETCH, sealed));
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> new RequestAuthenticator("k").open(ShuffleProtocol.OP_FETCH, sealed));
        // Same length, another name: the tag does not verify even if the scope check were skipped.
        ByteBuffer renamed = ByteBuffer.allocate(sealed.remaining()).put(sealed.duplicate()).flip();
        renamed.put(4 + 4, (byte) 'b');
        assertEquals("job-b", RequestAuthenticator.scopeOf(renamed));
        assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> RequestAuthenticator.scoped("job-b", "k").open(ShuffleProtocol.OP_FETCH, renamed));
        assertEquals(null, RequestAuthenticator.scopeOf(new RequestAuthenticator("k").seal(ShuffleProtocol.OP_FETCH, ByteBuffer.allocate(1))));
        ByteBuffer truncated = ByteBuffer.wrap(new byte[] {RequestAuthenticator.VERSION, 2, 0, 9, 'x'});
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> RequestAuthenticator.scopeOf(truncated));
    }
}
