package io.slipstream.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/** Test helpers shared by the modules above the fabric (this module's test jar). */
public final class FabricTesting {
    private FabricTesting() {
    }

    /**
     * Waits up to 10 s until {@code node} holds {@code open} connections (a server's close of a
     * connection reaches the client a moment after its answer); fails with {@code what} and the
     * node's stats otherwise.
     */
    public static void awaitConnectionsOpen(FabricNode node, long open, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (node.stats().connectionsOpen() != open) {
            assertTrue(System.nanoTime() < deadline, what + ": " + node.stats());
            Thread.sleep(10);
        }
    }

    /**
     * Waits up to 10 s until {@code node}'s pool bytes in use are {@code expected} (responses that arrive
     * after their fetcher or future is gone are released as they come); fails with {@code what} otherwise.
     */
    public static void awaitPoolBytesInUse(FabricNode node, long expected, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (node.stats().poolBytesInUse() != expected && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(expected, node.stats().poolBytesInUse(), what);
    }

    /**
     * The port a server started in a child process printed as its line {@code PORT <port>}; the child's
     * further output is drained (so its pipe never fills) by a daemon thread. Fails when the child exits
     * first, with what it printed.
     */
    public static int childPort(Process child) throws IOException {
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith("PORT ")) {
                Thread drain = new Thread(() -> {
                    try {
                        while (out.readLine() != null) {
                            // keep the child's pipe from filling
                        }
                    } catch (IOException ignored) {
                        // the child is gone
                    }
                }, "child-server-output");
                drain.setDaemon(true);
                drain.start();
                return Integer.parseInt(line.substring(5).trim());
            }
            seen.append(line).append('\n');
        }
        throw new IOException("the server process exited before printing its port:\n" + seen);
    }

    /** Where {@code needle} last occurs in {@code haystack} (tests that alter a frame's bytes find them so). */
    public static int lastIndexOf(byte[] haystack, byte[] needle) {
        outer:
        for (int i = haystack.length - needle.length; i >= 0; i--) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        throw new AssertionError("not found");
    }
}
