package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Payloads of several chunks (8 MiB with 1 MiB chunks), both directions. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LargePayloadTest {
    private static final int CHUNK = 1 << 20;
    private static final int LARGE = 8 << 20;

    private static FabricNode server;
    private static FabricNode client;

    @BeforeAll
    static void start() throws FabricUnavailableException {
        server = Fixtures.serverConfig().chunkSizeBytes(CHUNK).start();
        server.serve(Fixtures.HANDLER, 2);
        client = Fixtures.clientConfig().chunkSizeBytes(CHUNK).start();
    }

    @AfterAll
    static void stop() {
        client.close();
        server.close();
    }

    @Test
    void eightMebibytesThereAndBack() {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        for (int round = 0; round < 3; round++) {
            int size = LARGE - round * 12_345; // not a multiple of the chunk size either
            FabricBuffer payload = client.allocate(size);
            ByteBuffer view = payload.byteBuffer();
            for (int i = 0; i < size; i++) {
                view.put(i, Fixtures.patternByte(round, i));
            }
            try (FabricBuffer response = endpoint.request(OP_ECHO, payload)) {
                assertEquals(size, response.length());
                assertEquals(-1, Fixtures.mismatch(round, size, response.byteBuffer()), "round " + round);
            }
        }
    }

    @Test
    void severalLargeRequestsInFlight() throws Exception {
        FabricEndpoint endpoint = client.endpoint(server.localAddress());
        List<CompletableFuture<FabricBuffer>> futures = new ArrayList<>();
        int size = 3 * CHUNK + 17;
        for (int i = 0; i < 4; i++) {
            futures.add(endpoint.requestAsync(OP_ECHO, ByteBuffer.wrap(Fixtures.pattern(100 + i, size))));
        }
        for (int i = 0; i < futures.size(); i++) {
            try (FabricBuffer response = futures.get(i).get(60, TimeUnit.SECONDS)) {
                assertEquals(-1, Fixtures.mismatch(100 + i, size, response.byteBuffer()));
            }
        }
        FabricStats stats = client.stats();
        assertTrue(stats.poolBytesMapped() <= stats.poolCapBytes());
        // The peak is what carried these messages: at least one of them, and it stays after they are released.
        assertTrue(stats.poolBytesMappedPeak() >= size, "peak " + stats.poolBytesMappedPeak() + " < one message " + size);
        assertTrue(stats.poolBytesMappedPeak() >= stats.poolBytesMapped());
    }
}
