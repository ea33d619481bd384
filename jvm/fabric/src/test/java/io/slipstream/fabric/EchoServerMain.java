package io.slipstream.fabric;

import java.io.IOException;

/**
 * A fabric server in its own JVM, for {@link SeparateJvmTest}: serves {@link Fixtures#HANDLER} on
 * 127.0.0.1, prints {@code LISTENING <port>}, and exits when its standard input closes (so it never
 * outlives the test) or after five minutes at most.
 */
public final class EchoServerMain {
    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        try (FabricNode server = Fixtures.startServer(2)) {
            System.out.println("LISTENING " + server.localAddress().getPort());
            System.out.flush();
            Thread watchdog = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // discard
                    }
                } catch (IOException ignored) {
                    // parent gone
                }
            });
            watchdog.setDaemon(true);
            watchdog.start();
            watchdog.join(5 * 60 * 1000L);
        }
        System.out.println("CLOSED");
    }
}
