package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/**
 * Which chunk keys a restart deletes for a replica it cannot use, against a real slipstream-cache (the kill and
 * restart themselves: {@code HhhlbbKilledDataNodeTest}).
 */
class BurstBufferRecoveryTest {
    @Test
    void everyKeyTheChecksumsCoverThenTheRunStoredOutOfOrderUntilAsManyAreMissingAsCanBeInFlight() throws Exception {
        String keyBase = "ssbb:dn:bp:7_1001:";
        byte[] chunk = {1, 2, 3};
        // A replica killed while written, its checksums covering chunks 0 to 4: chunk 1 evicted by the cache (or
        // its store had not ended), 6 and 8 stored out of order past the checksums (at most 4 in flight, so a key
        // 4 past the last one stored cannot be there), and 13, which only a larger bb.maxInFlight.chunks in the
        // killed run could have left.
        int[] stored = {0, 2, 3, 4, 6, 8, 13};
        try (CacheServer cache = new CacheServer(); BurstBufferClient client = cache.client()) {
            for (int key : stored) {
                client.set(keyBase + key, chunk, 0, chunk.length);
            }
            long found = BurstBufferRecovery.deleteChunks(client,
                    new BurstBufferRecovery.Leftover("bp", 7, keyBase, 5, 4));
            assertEquals(6, found, "0, 2, 3, 4 below the bound (1 missing does not stop it), then 6 and 8");
            for (int key : new int[] {0, 2, 3, 4, 6, 8}) {
                assertNull(client.get(keyBase + key), "chunk " + key);
            }
            assertNotNull(client.get(keyBase + 13), "past four missing in a row (9 to 12), nothing is asked");

            // A finalized replica's chunks were all stored before it was finalized: no tail past the bound.
            client.set(keyBase + 0, chunk, 0, chunk.length);
            client.set(keyBase + 1, chunk, 0, chunk.length);
            assertEquals(1, BurstBufferRecovery.deleteChunks(client,
                    new BurstBufferRecovery.Leftover("bp", 7, keyBase, 1, 0)));
            assertNotNull(client.get(keyBase + 1));
        }
    }
}
