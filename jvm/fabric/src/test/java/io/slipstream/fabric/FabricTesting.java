package io.slipstream.fabric;

import static org.junit.jupiter.api.Assertions.assertTrue;

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
}
