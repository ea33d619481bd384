package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A TCP relay in front of a real slipstream-cache ({@link CacheServer}), for tests that need a store to take as
 * long as they say: while {@link #hold held}, requests wait in the relay before reaching the cache (a slow cache);
 * while {@link #refuse refusing}, each new connection is closed at once (a cache that cannot be reached, for a
 * while); {@link #cut} closes every connection and refuses new ones (a cache gone). It answers nothing itself:
 * every reply is the cache's.
 */
final class CacheRelay implements AutoCloseable {
    private final ServerSocket listener;
    private final int cachePort;
    private final Object gate = new Object();
    private boolean held; // guarded by gate
    private final List<Socket> sockets = new ArrayList<>(); // guarded by itself
    private volatile boolean cut;
    private volatile boolean refusing;

    CacheRelay(CacheServer cache) throws IOException {
        this.cachePort = cache.port;
        listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "cache relay " + listener.getLocalPort());
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String address() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    /** Requests from now on wait in the relay until {@link #release}. */
    void hold() {
        synchronized (gate) {
            held = true;
        }
    }

    /** The requests held go on to the cache, and the next ones pass at once. */
    void release() {
        synchronized (gate) {
            held = false;
            gate.notifyAll();
        }
    }

    /** New connections are closed at once, before anything reaches the cache, until {@link #admit}. */
    void refuse() {
        refusing = true;
    }

    /** New connections reach the cache again. */
    void admit() {
        refusing = false;
    }

    /** Connections closed (requests held among them: never forwarded), new ones refused. */
    void cut() throws IOException {
        cut = true;
        listener.close();
        synchronized (sockets) {
            for (Socket socket : sockets) {
                socket.close();
            }
        }
        release();
    }

    private void accept() {
        while (!cut) {
            try {
                Socket client = listener.accept();
                if (refusing) {
                    client.close();
                    continue;
                }
                Socket cache = new Socket(InetAddress.getLoopbackAddress(), cachePort);
                synchronized (sockets) {
                    sockets.add(client);
                    sockets.add(cache);
                }
                if (cut) {
                    client.close();
                    cache.close();
                    return;
                }
                pump(client, cache, true);
                pump(cache, client, false);
            } catch (IOException e) {
                return; // cut, or closed
            }
        }
    }

    private void pump(Socket from, Socket to, boolean gated) {
        Thread thread = new Thread(() -> {
            byte[] buffer = new byte[64 << 10];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                for (int n; (n = in.read(buffer)) > 0; ) {
                    if (gated) {
                        awaitOpen();
                    }
                    if (cut) {
                        return;
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // A side closed: the other one is closed with it (try-with-resources).
            } finally {
                close(from);
                close(to);
            }
        }, "cache relay pump");
        thread.setDaemon(true);
        thread.start();
    }

    private void awaitOpen() throws InterruptedException {
        synchronized (gate) {
            while (held) {
                gate.wait();
            }
        }
    }

    private static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Already closed.
        }
    }

    @Override
    public void close() throws IOException {
        cut();
    }
}
