package io.slipstream.hdfs.tiers;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The burst buffer's client: memcached's text protocol (set, get, delete) over TCP to slipstream-cache
 * servers (or any memcached), a bounded pool of blocking connections per server. A key goes to one server,
 * chosen by its hash. Every reply is checked; a value longer than {@code maxValueBytes} is refused before
 * anything is allocated for it, and a connection that returned anything unexpected is closed, not reused.
 */
final class BurstBufferTextClient implements BurstBufferClient {
    private final Server[] servers;
    private final int timeoutMs;
    private final int maxValueBytes;
    private final String user;
    private final String password;

    BurstBufferTextClient(List<InetSocketAddress> addresses, int connectionsPerServer, int timeoutMs, int maxValueBytes,
            String user, String password) {
        if (addresses.isEmpty()) {
            throw new IllegalArgumentException("no burst buffer server");
        }
        servers = new Server[addresses.size()];
        for (int i = 0; i < servers.length; i++) {
            servers[i] = new Server(addresses.get(i), connectionsPerServer);
        }
        this.timeoutMs = timeoutMs;
        this.maxValueBytes = maxValueBytes;
        this.user = user;
        this.password = password;
    }

    /** Stores {@code length} bytes under {@code key}; an IOException names the server and its answer otherwise. */
    @Override
    public void set(String key, byte[] value, int offset, int length) throws IOException {
        call(key, connection -> {
            connection.out.write(("set " + key + " 0 0 " + length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            connection.out.write(value, offset, length);
            connection.out.write(CRLF);
            connection.out.flush();
            String reply = connection.line();
            if (!reply.equals("STORED")) {
                throw new IOException("set " + key + ": " + reply);
            }
            return null;
        });
    }

    /** The value stored under {@code key}, or null when the server has none. */
    @Override
    public byte[] get(String key) throws IOException {
        return call(key, connection -> {
            connection.out.write(("get " + key + "\r\n").getBytes(StandardCharsets.US_ASCII));
            connection.out.flush();
            String header = connection.line();
            if (header.equals("END")) {
                return null;
            }
            String[] parts = header.split(" ");
            if (parts.length < 4 || !parts[0].equals("VALUE") || !parts[1].equals(key)) {
                throw new IOException("get " + key + ": unexpected reply " + abbreviate(header));
            }
            long length;
            try {
                length = Long.parseLong(parts[3]);
            } catch (NumberFormatException e) {
                throw new IOException("get " + key + ": bad length in " + abbreviate(header), e);
            }
            if (length < 0 || length > maxValueBytes) {
                throw new IOException("get " + key + ": value of " + length + " bytes, more than the "
                        + maxValueBytes + " a chunk may hold");
            }
            byte[] value = new byte[(int) length];
            connection.readFully(value);
            boolean endOfValue = connection.line().isEmpty();
            if (!endOfValue || !connection.line().equals("END")) {
                throw new IOException("get " + key + ": value not followed by END");
            }
            return value;
        });
    }

    /** Removes {@code key}; true if it was there. */
    @Override
    public boolean delete(String key) throws IOException {
        return call(key, connection -> {
            connection.out.write(("delete " + key + "\r\n").getBytes(StandardCharsets.US_ASCII));
            connection.out.flush();
            String reply = connection.line();
            if (reply.equals("DELETED")) {
                return true;
            }
            if (reply.equals("NOT_FOUND")) {
                return false;
            }
            throw new IOException("delete " + key + ": " + reply);
        });
    }

    @Override
    public void close() {
        for (Server server : servers) {
            server.close();
        }
    }

    private interface Exchange<T> {
        T run(Connection connection) throws IOException;
    }

    /**
     * Runs one request. Every request is idempotent (set, get, delete of one key), so one that failed on a
     * pooled connection (the server may have restarted since it was opened) is tried once more on a new one.
     */
    private <T> T call(String key, Exchange<T> exchange) throws IOException {
        Server server = servers[Math.floorMod(key.hashCode(), servers.length)];
        for (int attempt = 0; ; attempt++) {
            Connection connection;
            try {
                connection = server.borrow();
            } catch (IOException e) {
                throw new IOException("burst buffer " + server.address + ": " + e.getMessage(), e);
            }
            boolean healthy = false;
            try {
                T result = exchange.run(connection);
                healthy = true;
                return result;
            } catch (IOException e) {
                if (attempt == 0 && connection.reused) {
                    continue;
                }
                throw new IOException("burst buffer " + server.address + ": " + e.getMessage(), e);
            } finally {
                server.giveBack(connection, healthy);
            }
        }
    }

    private static final byte[] CRLF = {'\r', '\n'};
    /** A reply line longer than this is not memcached's. */
    private static final int MAX_LINE_BYTES = 1024;

    private static String abbreviate(String line) {
        return line.length() <= 80 ? line : line.substring(0, 80) + "...";
    }

    private final class Server {
        final InetSocketAddress address;
        final ArrayBlockingQueue<Connection> idle;
        final int limit;
        final AtomicInteger open = new AtomicInteger();
        volatile boolean closed;

        Server(InetSocketAddress address, int limit) {
            this.address = address;
            this.limit = limit;
            this.idle = new ArrayBlockingQueue<>(limit);
        }

        Connection borrow() throws IOException {
            Connection connection = idle.poll();
            if (connection != null) {
                connection.reused = true;
                return connection;
            }
            if (open.incrementAndGet() <= limit) {
                try {
                    return connect();
                } catch (IOException | RuntimeException e) {
                    open.decrementAndGet();
                    throw e;
                }
            }
            open.decrementAndGet();
            try {
                connection = idle.poll(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("waiting for a connection to " + address);
            }
            if (connection == null) {
                throw new IOException("burst buffer " + address + ": all " + limit + " connections busy for "
                        + timeoutMs + " ms");
            }
            connection.reused = true;
            return connection;
        }

        void giveBack(Connection connection, boolean healthy) {
            if (healthy && !closed && idle.offer(connection)) {
                return;
            }
            connection.close();
            open.decrementAndGet();
        }

        private Connection connect() throws IOException {
            Socket socket = new Socket();
            try {
                socket.connect(address, timeoutMs);
                socket.setSoTimeout(timeoutMs);
                socket.setTcpNoDelay(true);
                Connection connection = new Connection(socket);
                if (!user.isEmpty()) {
                    // slipstream-cache's and memcached's -Y login for text clients: a set whose data is "user password".
                    byte[] login = (user + " " + password).getBytes(StandardCharsets.UTF_8);
                    connection.out.write(("set auth 0 0 " + login.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
                    connection.out.write(login);
                    connection.out.write(CRLF);
                    connection.out.flush();
                    String reply = connection.line();
                    if (!reply.equals("STORED")) {
                        throw new IOException("burst buffer " + address + " refused the login of " + user + ": " + reply);
                    }
                }
                return connection;
            } catch (IOException | RuntimeException e) {
                socket.close();
                throw e;
            }
        }

        void close() {
            closed = true;
            for (Connection connection; (connection = idle.poll()) != null; ) {
                connection.close();
            }
        }
    }

    private static final class Connection {
        final Socket socket;
        final InputStream in;
        final OutputStream out;
        /** Taken from the pool: it may be older than the server's last restart. */
        boolean reused;

        Connection(Socket socket) throws IOException {
            this.socket = socket;
            this.in = new BufferedInputStream(socket.getInputStream(), 64 << 10);
            this.out = new BufferedOutputStream(socket.getOutputStream(), 64 << 10);
        }

        /** One reply line without its CRLF; an error past {@link #MAX_LINE_BYTES}. */
        String line() throws IOException {
            StringBuilder line = new StringBuilder();
            while (true) {
                int b = in.read();
                if (b < 0) {
                    throw new EOFException("connection closed by the server");
                }
                if (b == '\n') {
                    int end = line.length();
                    if (end > 0 && line.charAt(end - 1) == '\r') {
                        line.setLength(end - 1);
                    }
                    return line.toString();
                }
                if (line.length() >= MAX_LINE_BYTES) {
                    throw new IOException("reply line longer than " + MAX_LINE_BYTES + " bytes");
                }
                line.append((char) b);
            }
        }

        void readFully(byte[] into) throws IOException {
            int done = 0;
            while (done < into.length) {
                int n = in.read(into, done, into.length - done);
                if (n < 0) {
                    throw new EOFException("connection closed after " + done + " of " + into.length + " value bytes");
                }
                done += n;
            }
        }

        void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // Closing a socket we are done with: nothing left to do.
            }
        }
    }
}
