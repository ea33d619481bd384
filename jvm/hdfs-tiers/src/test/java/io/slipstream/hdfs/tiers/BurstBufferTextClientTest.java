package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The burst buffer's memcached client against a real slipstream-cache, and against a server that lies. */
class BurstBufferTextClientTest {
    private static CacheServer cache;

    @BeforeAll
    static void start() throws Exception {
        cache = new CacheServer();
    }

    @AfterAll
    static void stop() throws Exception {
        cache.close();
    }

    @Test
    void setGetDeleteRoundTripBinaryValues() throws Exception {
        try (BurstBufferClient client = cache.client()) {
            byte[] value = new byte[300_000];
            new Random(1).nextBytes(value);
            value[10] = '\r';
            value[11] = '\n';
            client.set("bb-test:a", value, 0, value.length);
            assertArrayEquals(value, client.get("bb-test:a"));
            client.set("bb-test:b", value, 5, 7);
            assertArrayEquals(java.util.Arrays.copyOfRange(value, 5, 12), client.get("bb-test:b"));
            assertTrue(client.delete("bb-test:a"));
            assertFalse(client.delete("bb-test:a"));
            assertNull(client.get("bb-test:a"));
        }
    }

    @Test
    void aPooledConnectionToARestartedServerIsReplacedOnce() throws Exception {
        try (BurstBufferClient client = cache.client()) {
            client.set("bb-test:r", new byte[] {1, 2, 3}, 0, 3);
            cache.kill();
            cache.start();
            assertNull(client.get("bb-test:r"), "the restarted server is empty, and the stale connection was retried");
        }
    }

    /** A server announcing a value larger than a chunk: refused before anything is allocated for it. */
    @Test
    void aValueLargerThanAChunkIsRefused() throws Exception {
        try (ServerSocket liar = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            Thread server = new Thread(() -> {
                try (Socket s = liar.accept()) {
                    InputStream in = s.getInputStream();
                    while (in.read() != '\n') {
                        // the request line
                    }
                    OutputStream out = s.getOutputStream();
                    out.write("VALUE k 0 2000000000\r\n".getBytes(StandardCharsets.US_ASCII));
                    out.flush();
                    Thread.sleep(1000);
                } catch (Exception ignored) {
                    // The client closes first.
                }
            });
            server.start();
            try (BurstBufferClient client = new BurstBufferTextClient(
                    List.of(new InetSocketAddress("127.0.0.1", liar.getLocalPort())), 1, 5000, 1 << 20, "", "")) {
                IOException e = assertThrows(IOException.class, () -> client.get("k"));
                assertTrue(e.getMessage().contains("2000000000"), e.getMessage());
            }
            server.join(5000);
        }
    }

    /**
     * The reply parser against arbitrary bytes (the client's network input): every answer is a value within
     * the chunk limit, a miss, or an IOException; nothing else escapes and nothing larger is allocated.
     */
    @Test
    void arbitraryRepliesGiveAValueAMissOrAnIOException() throws Exception {
        Random random = new Random(7);
        String[] seeds = {"VALUE k 0 5\r\nhello\r\nEND\r\n", "END\r\n", "VALUE k 0 -1\r\n", "VALUE k 0 99999999999\r\n",
            "VALUE j 0 1\r\nx\r\nEND\r\n", "VALUE k 0 3\r\nabcEND\r\n", "SERVER_ERROR out of memory\r\n", "VALUE k\r\n"};
        try (ServerSocket server = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            for (int i = 0; i < 400; i++) {
                byte[] reply;
                if (i < seeds.length) {
                    reply = seeds[i].getBytes(StandardCharsets.US_ASCII);
                } else {
                    reply = seeds[random.nextInt(seeds.length)].getBytes(StandardCharsets.US_ASCII);
                    for (int flips = random.nextInt(4); flips >= 0; flips--) {
                        reply[random.nextInt(reply.length)] = (byte) random.nextInt(256);
                    }
                    if (random.nextInt(4) == 0) {
                        reply = java.util.Arrays.copyOf(reply, random.nextInt(reply.length + 1));
                    }
                }
                byte[] answer = reply;
                Thread peer = new Thread(() -> {
                    try (Socket s = server.accept()) {
                        InputStream in = s.getInputStream();
                        while (in.read() != '\n') {
                            // the request line
                        }
                        s.getOutputStream().write(answer);
                        s.getOutputStream().flush();
                        s.shutdownOutput();
                        in.read(); // until the client closes
                    } catch (IOException ignored) {
                        // The client may close first.
                    }
                });
                peer.start();
                try (BurstBufferClient client = new BurstBufferTextClient(
                        List.of(new InetSocketAddress("127.0.0.1", server.getLocalPort())), 1, 2000, 1024, "", "")) {
                    byte[] value = client.get("k");
                    assertTrue(value == null || value.length <= 1024);
                } catch (IOException expected) {
                    // A clear error for a reply that is not memcached's.
                }
                peer.join(5000);
            }
        }
    }

    @Test
    void aServerDownIsAClearError() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0)) {
            port = probe.getLocalPort();
        }
        try (BurstBufferClient client = new BurstBufferTextClient(List.of(new InetSocketAddress("127.0.0.1", port)), 1,
                2000, 1 << 20, "", "")) {
            IOException e = assertThrows(IOException.class, () -> client.set("k", new byte[1], 0, 1));
            assertTrue(e.getMessage().contains("burst buffer"), e.getMessage());
            assertEquals(IOException.class, e.getClass());
        }
    }
}
