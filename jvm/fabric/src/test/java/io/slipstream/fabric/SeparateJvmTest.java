package io.slipstream.fabric;

import static io.slipstream.fabric.Fixtures.OP_ECHO;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A server in another JVM process: real inter-process transports (shared memory, CMA, TCP). */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SeparateJvmTest {

    @Test
    void echoAcrossProcessesAndSurviveTheServersDeath() throws Exception {
        Process child = Fixtures.startJvm(EchoServerMain.class, List.of(), Map.of());
        try (FabricNode client = Fixtures.clientConfig().requestTimeout(Duration.ofSeconds(5)).start()) {
            BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
            String line = readListening(out);
            assertNotNull(line, "the child printed no LISTENING line");
            int port = Integer.parseInt(line.substring("LISTENING ".length()).trim());
            FabricEndpoint endpoint = client.endpoint(new InetSocketAddress("127.0.0.1", port));
            for (int i = 0; i < 50; i++) {
                int size = i * 5_000;
                try (FabricBuffer response = endpoint.request(OP_ECHO, Fixtures.pattern(i, size))) {
                    assertEquals(-1, Fixtures.mismatch(i, size, response.byteBuffer()), "request " + i);
                }
            }
            try (FabricBuffer response = endpoint.request(OP_ECHO, Fixtures.pattern(99, 3 << 20))) {
                assertEquals(-1, Fixtures.mismatch(99, 3 << 20, response.byteBuffer()));
            }

            child.destroyForcibly(); // SIGKILL: no goodbye
            assertTrue(child.waitFor(20, TimeUnit.SECONDS));
            FabricException e = assertThrows(FabricException.class, () -> {
                for (int i = 0; i < 20; i++) { // the first may still be answered from buffers in flight
                    endpoint.request(OP_ECHO, new byte[8]).close();
                }
            });
            assertTrue(e.kind() == FabricException.Kind.PEER_FAILED || e.kind() == FabricException.Kind.TIMEOUT
                    || e.kind() == FabricException.Kind.UCX, e.toString());
        } finally {
            child.destroyForcibly();
            child.waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aWaitPastItsSpinIsCompletedOnTheWaitingThread() throws Exception {
        // Answered after 2 ms, well past the spin: the waiting thread sleeps on the event fd, the
        // response wakes it, and it completes its future itself, so the dependent action runs here,
        // not on the completer thread (which is how it went when the waiter parked; with
        // -Dslipstream.fabric.awaitOnFd=false this fails). The server is in another JVM: a server in
        // this process would hold the fd with its idle puller (docs/fabric.md, "Who waits on the
        // event fd").
        Process child = Fixtures.startJvm(EchoServerMain.class, List.of(), Map.of());
        try (FabricNode client = Fixtures.clientConfig().start()) {
            String line = readListening(new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8)));
            assertNotNull(line, "the child printed no LISTENING line");
            FabricEndpoint endpoint = client.endpoint(new InetSocketAddress("127.0.0.1",
                    Integer.parseInt(line.substring("LISTENING ".length()).trim())));
            for (int i = 0; i < 5; i++) {
                java.util.concurrent.CompletableFuture<FabricBuffer> future =
                        endpoint.requestAsync(Fixtures.OP_SLOW_ECHO, new byte[] {(byte) i});
                java.util.concurrent.CompletableFuture<Thread> completedOn = future.thenApply(response -> {
                    response.close();
                    return Thread.currentThread();
                });
                future.get(30, TimeUnit.SECONDS);
                assertEquals(Thread.currentThread(), completedOn.get(30, TimeUnit.SECONDS), "wait " + i);
            }
        } finally {
            child.destroyForcibly();
            child.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private static String readListening(BufferedReader out) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        String line;
        while (System.nanoTime() < deadline && (line = out.readLine()) != null) {
            if (line.startsWith("LISTENING ")) {
                return line;
            }
            System.err.println("child: " + line);
        }
        return null;
    }
}
