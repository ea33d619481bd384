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
    /** The fabric's port (fixed, so that a restarted server is found there), or 0 for a server without the fabric. */
    final int fabricPort;
    private final Path ssdDir;
    /** A -Y file of 'user:password' lines, or null: no login. */
    private final Path authFile;
    private Process process;

    /** A server without the fabric, no login (the TCP transport's tests). */
    CacheServer() throws IOException, InterruptedException {
        this(false, null);
    }

    /** A server with the fabric on a free port when {@code fabric}, and with a login when {@code userPassword} is set. */
    CacheServer(boolean fabric, String userPassword) throws IOException, InterruptedException {
        port = freePort();
        fabricPort = fabric ? freePort() : 0;
        ssdDir = Files.createTempDirectory("slipstream-bb-ssd");
        if (userPassword != null) {
            authFile = ssdDir.resolve("auth");
            Files.writeString(authFile, userPassword + "\n");
        } else {
            authFile = null;
        }
        start();
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return probe.getLocalPort();
        }
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
        List<String> command = new java.util.ArrayList<>(List.of(binary().getPath(), "-l", "127.0.0.1", "-p",
                String.valueOf(port), "-m", "64", "--ssd-path", ssdDir.toString(), "--ssd-size", "64m"));
        command.addAll(fabricPort == 0 ? List.of("--no-fabric") : List.of("--fabric-port", String.valueOf(fabricPort)));
        if (authFile != null) {
            command.addAll(List.of("-Y", authFile.toString()));
        }
        process = new ProcessBuilder(command)
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

    /** The fabric's address, for {@code bb.servers} with {@code bb.transport=fabric}. */
    String fabricAddress() {
        if (fabricPort == 0) {
            throw new IllegalStateException("this cache runs without the fabric");
        }
        return "127.0.0.1:" + fabricPort;
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

    /** A client over the fabric with the given login (empty user: none). */
    BurstBufferFabricClient fabricClient(String user, String password) throws IOException {
        try {
            return new BurstBufferFabricClient(List.of(new java.net.InetSocketAddress("127.0.0.1", fabricPort)), 10_000,
                    1 << 20, 64L << 20, user, password);
        } catch (io.slipstream.fabric.FabricUnavailableException e) {
            throw new IOException(e);
        }
    }

    BurstBufferClient client() {
        return new BurstBufferTextClient(List.of(new java.net.InetSocketAddress("127.0.0.1", port)), 1, 10_000, 1 << 20,
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
