package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The burst buffer's client over the fabric against a real slipstream-cache (fabric on), and its answer checks. */
class BurstBufferFabricClientTest {
    @Test
    void setGetDeleteRoundTripOverTheFabric() throws Exception {
        try (CacheServer cache = new CacheServer(true, null);
                BurstBufferFabricClient client = cache.fabricClient("", "")) {
            long requestsBefore = cache.stat("fabric_requests");
            byte[] value = new byte[300_000];
            new Random(1).nextBytes(value);
            client.set("bb-fabric:a", value, 0, value.length);
            assertArrayEquals(value, client.get("bb-fabric:a"));
            client.set("bb-fabric:b", value, 5, 7);
            assertArrayEquals(Arrays.copyOfRange(value, 5, 12), client.get("bb-fabric:b"));
            assertTrue(client.delete("bb-fabric:a"));
            assertFalse(client.delete("bb-fabric:a"));
            assertNull(client.get("bb-fabric:a"));
            assertEquals(7, cache.stat("fabric_requests") - requestsBefore, "every request went over the fabric");
            // What the fabric client stored, the text protocol reads: the same items.
            assertArrayEquals(Arrays.copyOfRange(value, 5, 12), cache.get("bb-fabric:b"));
        }
    }

    @Test
    void aValueLargerThanAChunkIsRefusedNotAllocated() throws Exception {
        try (CacheServer cache = new CacheServer(true, null);
                BurstBufferFabricClient small = new BurstBufferFabricClient(
                        java.util.List.of(new java.net.InetSocketAddress("127.0.0.1", cache.fabricPort)), 10_000, 100_000,
                        16L << 20, "", "")) {
            assertThrows(IllegalArgumentException.class, () -> small.set("bb-fabric:big", new byte[100_001], 0, 100_001));
            cache.set("bb-fabric:big", new byte[200_000]);
            IOException e = assertThrows(IOException.class, () -> small.get("bb-fabric:big"));
            assertTrue(e.getMessage().contains("exceeds the limit"), e.getMessage());
            small.set("bb-fabric:ok", new byte[100_000], 0, 100_000);
            assertEquals(100_000, small.get("bb-fabric:ok").length, "the client goes on after a refused answer");
        }
    }

    @Test
    void aServerWithALoginTakesTheRightPasswordAgainAfterItsRestart() throws Exception {
        try (CacheServer cache = new CacheServer(true, "bb:secret")) {
            try (BurstBufferFabricClient client = cache.fabricClient("bb", "secret")) {
                client.set("bb-fabric:l", new byte[] {1, 2, 3}, 0, 3);
                assertArrayEquals(new byte[] {1, 2, 3}, client.get("bb-fabric:l"));
                cache.kill();
                cache.start();
                assertNull(client.get("bb-fabric:l"), "the restarted server is empty; the client logged in again");
                client.set("bb-fabric:l", new byte[] {4}, 0, 1);
                assertArrayEquals(new byte[] {4}, client.get("bb-fabric:l"));
            }
            try (BurstBufferFabricClient anonymous = cache.fabricClient("", "")) {
                IOException e = assertThrows(IOException.class, () -> anonymous.get("bb-fabric:l"));
                assertTrue(e.getMessage().contains("status 0x20"), e.getMessage());
            }
            try (BurstBufferFabricClient wrong = cache.fabricClient("bb", "guess")) {
                IOException e = assertThrows(IOException.class, () -> wrong.get("bb-fabric:l"));
                assertTrue(e.getMessage().contains("refused the login"), e.getMessage());
            }
        }
    }

    /** Answers a server must never be believed for: each is an IOException, nothing of it returned. */
    @Test
    void malformedAnswersAreRefused() {
        int max = 1000;
        assertThrows(IOException.class, () -> parse(new byte[10], max), "shorter than a header");
        ByteBuffer wrongOpcode = answer(BurstBufferFabricClient.SET, 0, 0, new byte[0]);
        assertThrows(IOException.class, () -> BurstBufferFabricClient.Reply.parse(wrongOpcode,
                BurstBufferFabricClient.GET, max), "another request's answer");
        ByteBuffer longer = answer(BurstBufferFabricClient.GET, 0, 4, new byte[8]);
        longer.putInt(8, 100); // the body says 100 bytes, 12 follow
        assertThrows(IOException.class, () -> BurstBufferFabricClient.Reply.parse(longer, BurstBufferFabricClient.GET, max));
        ByteBuffer keyBeyondBody = answer(BurstBufferFabricClient.GET, 0, 4, new byte[8]);
        keyBeyondBody.putShort(2, (short) 50);
        assertThrows(IOException.class, () -> BurstBufferFabricClient.Reply.parse(keyBeyondBody,
                BurstBufferFabricClient.GET, max));
        ByteBuffer tooLarge = answer(BurstBufferFabricClient.GET, 0, 4, new byte[max + 1]);
        assertThrows(IOException.class, () -> BurstBufferFabricClient.Reply.parse(tooLarge, BurstBufferFabricClient.GET, max));
        ByteBuffer fine = answer(BurstBufferFabricClient.GET, 0, 4, new byte[max]);
        assertDoesNotThrowIo(() -> assertEquals(max,
                BurstBufferFabricClient.Reply.parse(fine, BurstBufferFabricClient.GET, max).value.remaining()));
    }

    private interface IoAction {
        void run() throws IOException;
    }

    private static void assertDoesNotThrowIo(IoAction action) {
        try {
            action.run();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static void parse(byte[] bytes, int max) throws IOException {
        BurstBufferFabricClient.Reply.parse(ByteBuffer.wrap(bytes), BurstBufferFabricClient.GET, max);
    }

    /** A response packet: magic 0x81, {@code opcode}, no key, {@code extras} bytes of extras, then {@code value}. */
    private static ByteBuffer answer(byte opcode, int status, int extras, byte[] value) {
        ByteBuffer b = ByteBuffer.allocate(BurstBufferFabricClient.HEADER_BYTES + extras + value.length);
        b.put((byte) 0x81).put(opcode).putShort((short) 0).put((byte) extras).put((byte) 0).putShort((short) status)
                .putInt(extras + value.length).putInt(0).putLong(0);
        b.put(new byte[extras]).put(value).flip();
        return b;
    }
}
