package io.slipstream.ohb;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricHandler;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.FabricUnavailableException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The server side of {@link FabricBench}, in its own JVM (started by the bench with the same class
 * path): a fabric node with default transports, one with forced TCP, and a blocking
 * {@link ServerSocket}, all on 127.0.0.1 only. Prints one {@code READY ...} line with the ports, and
 * exits when its standard input closes (the bench closes it, or dies) or after {@code --max-seconds}.
 */
public final class FabricBenchServer {
    /** Connections the socket server serves at once, at most. */
    private static final int SOCKET_CONNECTIONS_MAX = 16;

    private FabricBenchServer() {
    }

    public static void main(String[] args) throws Exception {
        long maxSeconds = 3600;
        int handlerThreads = 2;
        Long spinUs = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--max-seconds" -> maxSeconds = Long.parseLong(args[++i]);
                case "--handler-threads" -> handlerThreads = Integer.parseInt(args[++i]);
                case "--spin-us" -> spinUs = Long.parseLong(args[++i]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        List<AutoCloseable> resources = new ArrayList<>();
        String fabricPort = startFabric(FabricTransport.AUTO, handlerThreads, spinUs, resources);
        String fabricTcpPort = startFabric(FabricTransport.TCP, handlerThreads, spinUs, resources);
        ServerSocket sockets = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        resources.add(sockets);
        Thread acceptor = new Thread(() -> acceptLoop(sockets), "socket-acceptor");
        acceptor.setDaemon(true);
        acceptor.start();
        System.out.println(BenchProtocol.READY + " fabric=" + fabricPort + " fabric-tcp=" + fabricTcpPort
                + " java-socket=" + sockets.getLocalPort());
        System.out.flush();

        Thread stdinWatch = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // discard: only the end matters
                }
            } catch (IOException ignored) {
                // parent gone
            }
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();
        stdinWatch.join(TimeUnit.SECONDS.toMillis(maxSeconds));
        for (AutoCloseable resource : resources) {
            try {
                resource.close();
            } catch (Exception e) {
                System.err.println("server: closing " + resource + ": " + e);
            }
        }
    }

    private static String startFabric(FabricTransport transport, int handlerThreads, Long spinUs,
            List<AutoCloseable> resources) {
        try {
            FabricConfig.Builder config = FabricConfig.builder()
                    .listen("127.0.0.1", 0)
                    .transport(transport)
                    .maxMessageBytes(BenchProtocol.SIZE_MAX)
                    .poolCapBytes(4L * BenchProtocol.SIZE_MAX);
            if (spinUs != null) {
                config.spinUs(spinUs);
            }
            FabricNode node = config.start();
            node.serve(HANDLER, handlerThreads);
            resources.add(node);
            return Integer.toString(node.localAddress().getPort());
        } catch (FabricUnavailableException e) {
            System.err.println("server: the fabric is unavailable: " + e.getMessage());
            return "unavailable";
        }
    }

    private static final byte[] ACK = new byte[BenchProtocol.ACK_BYTES];

    private static final FabricHandler HANDLER = request -> {
        switch (request.op()) {
            case BenchProtocol.OP_ECHO -> request.respond(request.payload()); // zero-copy echo
            case BenchProtocol.OP_ACK -> request.respond(ACK);
            default -> request.fail("unknown op " + request.op());
        }
    };

    private static void acceptLoop(ServerSocket server) {
        int served = 0;
        while (!server.isClosed() && served < 10_000) {
            try {
                Socket socket = server.accept();
                served++;
                if (Thread.activeCount() > SOCKET_CONNECTIONS_MAX + 16) {
                    socket.close();
                    continue;
                }
                Thread connection = new Thread(() -> serveSocket(socket), "socket-connection-" + served);
                connection.setDaemon(true);
                connection.start();
            } catch (IOException e) {
                if (!server.isClosed()) {
                    System.err.println("server: accept: " + e);
                }
                return;
            }
        }
    }

    /** Length-prefixed requests ({@code int op, int length, bytes}) answered with {@code int length, bytes}. */
    private static void serveSocket(Socket socket) {
        try (socket) {
            socket.setTcpNoDelay(true);
            DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
            byte[] buffer = new byte[1 << 16];
            while (true) {
                int op;
                try {
                    op = in.readInt();
                } catch (EOFException end) {
                    return;
                }
                int length = in.readInt();
                if (length < 0 || length > BenchProtocol.SIZE_MAX) {
                    throw new IOException("bad length " + length);
                }
                if (buffer.length < length) {
                    buffer = new byte[Integer.highestOneBit(length - 1) << 1];
                }
                in.readFully(buffer, 0, length);
                if (op == BenchProtocol.OP_ECHO) {
                    out.writeInt(length);
                    out.write(buffer, 0, length);
                } else {
                    out.writeInt(ACK.length);
                    out.write(ACK);
                }
                out.flush();
            }
        } catch (IOException e) {
            System.err.println("server: connection: " + e);
        }
    }
}
