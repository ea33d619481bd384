package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real slipstream-cache process in hybrid mode (memory + an SSD log in a temporary directory) on a loopback
 * port, for HHH-L-BB's burst buffer. The binary is the one `make native` builds; its path comes from the
 * build (system property slipstream.cache.binary), and its absence fails the test.
 */
final class CacheServer implements AutoCloseable {
    final int port;
    private final Path ssdDir;
    private Process process;

    CacheServer() throws IOException, InterruptedException {
        try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        ssdDir = Files.createTempDirectory("slipstream-bb-ssd");
        start();
    }

    static File binary() {
        String path = System.getProperty("slipstream.cache.binary");
        assertTrue(path != null, "system property slipstream.cache.binary is not set (the module's pom sets it)");
        File binary = new File(path);
        assertTrue(binary.canExecute(), "slipstream-cache is not built at " + binary + ": run make native first");
        return binary;
    }

    /** Starts the server (again, empty, on the same port after {@link #kill}). */
    void start() throws IOException, InterruptedException {
        process = new ProcessBuilder(List.of(binary().getPath(), "-l", "127.0.0.1", "-p", String.valueOf(port),
                "-m", "64", "--no-fabric", "--ssd-path", ssdDir.toString(), "--ssd-size", "64m"))
                .redirectError(ProcessBuilder.Redirect.appendTo(ssdDir.resolve("stderr.log").toFile())).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        if (line == null || !line.startsWith("slipstream-cache listening")) {
            process.destroyForcibly();
            fail("slipstream-cache did not start: " + line + "; its log: "
                    + Files.readString(ssdDir.resolve("stderr.log")));
        }
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // The server's log: not needed, only kept from filling the pipe.
                }
            } catch (IOException ignored) {
                // The process ended.
            }
        }, "slipstream-cache output");
        drain.setDaemon(true);
        drain.start();
    }

    String address() {
        return "127.0.0.1:" + port;
    }

    /** SIGKILL: everything the cache held is gone. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        assertTrue(process.waitFor(10, TimeUnit.SECONDS), "slipstream-cache did not die");
    }

    /** A counter from the server's `stats` (curr_items, bytes, ...). */
    long stat(String name) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(10_000);
            OutputStream out = socket.getOutputStream();
            out.write("stats\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
            for (String line; (line = in.readLine()) != null && !line.equals("END"); ) {
                String[] parts = line.split(" ");
                if (parts.length == 3 && parts[1].equals(name)) {
                    return Long.parseLong(parts[2]);
                }
            }
        }
        throw new IOException("no stat " + name);
    }

    /** A value, through the module's own client (one connection). */
    byte[] get(String key) throws IOException {
        try (BurstBufferClient client = client()) {
            return client.get(key);
        }
    }

    void set(String key, byte[] value) throws IOException {
        try (BurstBufferClient client = client()) {
            client.set(key, value, 0, value.length);
        }
    }

    BurstBufferClient client() {
        return new BurstBufferClient(List.of(new java.net.InetSocketAddress("127.0.0.1", port)), 1, 10_000, 1 << 20,
                "", "");
    }

    @Override
    public void close() {
        if (process != null) {
            process.destroyForcibly();
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
