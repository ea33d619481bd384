package io.slipstream.ohb;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.FabricUnavailableException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** One variant of the benchmark: how a client sends to the server. */
interface BenchClient extends AutoCloseable {
    /** Seconds any single response may take before the run is declared broken. */
    long RESPONSE_TIMEOUT_S = 60;

    /** One request of {@code size} bytes, echoed back; returns when the echo is in. */
    void echo(int size) throws Exception;

    /**
     * Sends up to {@code count} requests of {@code size} bytes, each answered by a tiny ack, keeping
     * up to {@code window} in flight; stops sending at {@code deadlineNanos}. Returns the number acked.
     */
    long stream(int size, long count, int window, long deadlineNanos) throws Exception;

    /** Sends (or batches) of {@link #stream} between two looks at the clock: one per message was 6 % of the Java client's samples at 8 B. */
    int CLOCK_EVERY = 64;

    /** Whether a stream's {@code round}-th send (from 0) finds it past {@code deadlineNanos}; the clock is read every {@link #CLOCK_EVERY}. */
    static boolean past(long deadlineNanos, long round) {
        return round % CLOCK_EVERY == 0 && System.nanoTime() >= deadlineNanos;
    }

    /** Sends one patterned payload and checks every byte of the echo. */
    default void verify(int size) throws Exception {
        echo(size);
    }

    @Override
    void close() throws IOException;

    /** The fabric from Java: registered buffers sent without copies, responses in registered memory. */
    final class Fabric implements BenchClient {
        private final FabricNode node;
        private final FabricEndpoint endpoint;

        /** Requests sent per native call in {@link #stream} (1: one {@code requestAsync} each). */
        private final int batch;

        Fabric(FabricTransport transport, InetSocketAddress server, Long spinUs, int batch) throws FabricUnavailableException {
            this.batch = Math.max(1, batch);
            FabricConfig.Builder config = FabricConfig.builder()
                    .transport(transport)
                    .maxMessageBytes(BenchProtocol.SIZE_MAX)
                    .poolCapBytes(4L * BenchProtocol.SIZE_MAX);
            if (spinUs != null) {
                config.spinUs(spinUs);
            }
            this.node = config.start();
            this.endpoint = node.endpoint(server);
        }

        @Override
        public void echo(int size) {
            FabricBuffer payload = node.allocate(size);
            try (FabricBuffer response = endpoint.request(BenchProtocol.OP_ECHO, payload)) {
                if (response.length() != size) {
                    throw new IllegalStateException("echo of " + size + " bytes came back with " + response.length());
                }
            }
        }

        @Override
        public void verify(int size) {
            FabricBuffer payload = node.allocate(size);
            for (int i = 0; i < size; i++) {
                payload.byteBuffer().put(i, (byte) (i * 31));
            }
            try (FabricBuffer response = endpoint.request(BenchProtocol.OP_ECHO, payload)) {
                java.nio.ByteBuffer view = response.byteBuffer();
                for (int i = 0; i < size; i++) {
                    if (view.get(i) != (byte) (i * 31)) {
                        throw new IllegalStateException("echo of " + size + " bytes differs at byte " + i);
                    }
                }
            }
        }

        @Override
        public long stream(int size, long count, int window, long deadlineNanos) throws Exception {
            ArrayDeque<CompletableFuture<FabricBuffer>> inFlight = new ArrayDeque<>(window);
            long acked = 0;
            long sent = 0;
            int perCall = Math.min(batch, window);
            List<FabricBuffer> payloads = new ArrayList<>(perCall);
            long rounds = 0;
            while (sent < count && !past(deadlineNanos, rounds++)) {
                // With batches: wait until a whole batch fits in the window, then send it in one call.
                int next = (int) Math.min(perCall, count - sent);
                while (inFlight.size() + next > window) {
                    inFlight.poll().get(RESPONSE_TIMEOUT_S, TimeUnit.SECONDS).close();
                    acked++;
                }
                if (next == 1) {
                    inFlight.add(endpoint.requestAsync(BenchProtocol.OP_ACK, node.allocate(size)));
                } else {
                    payloads.clear();
                    for (int i = 0; i < next; i++) {
                        payloads.add(node.allocate(size));
                    }
                    inFlight.addAll(endpoint.requestAsync(BenchProtocol.OP_ACK, payloads));
                }
                sent += next;
            }
            while (!inFlight.isEmpty()) {
                inFlight.poll().get(RESPONSE_TIMEOUT_S, TimeUnit.SECONDS).close();
                acked++;
            }
            return acked;
        }

        @Override
        public void close() {
            node.close();
        }
    }

    /** Blocking {@link Socket}, TCP_NODELAY, length-prefixed requests; pipelined for streams. */
    final class JavaSocket implements BenchClient {
        private final Socket socket;
        private final DataInputStream in;
        private final DataOutputStream out;
        private byte[] payload = new byte[1 << 16];
        private byte[] response = new byte[1 << 16];

        JavaSocket(InetSocketAddress server) throws IOException {
            socket = new Socket();
            socket.setTcpNoDelay(true);
            socket.connect(server, 10_000);
            socket.setSoTimeout((int) TimeUnit.SECONDS.toMillis(RESPONSE_TIMEOUT_S));
            in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
            out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
        }

        @Override
        public void echo(int size) throws IOException {
            send(BenchProtocol.OP_ECHO, size);
            int length = receive();
            if (length != size) {
                throw new IllegalStateException("echo of " + size + " bytes came back with " + length);
            }
        }

        @Override
        public void verify(int size) throws IOException {
            ensure(size);
            for (int i = 0; i < size; i++) {
                payload[i] = (byte) (i * 31);
            }
            echo(size);
            for (int i = 0; i < size; i++) {
                if (response[i] != (byte) (i * 31)) {
                    throw new IllegalStateException("echo of " + size + " bytes differs at byte " + i);
                }
            }
        }

        @Override
        public long stream(int size, long count, int window, long deadlineNanos) throws IOException {
            long outstanding = 0;
            long acked = 0;
            long sent = 0;
            long rounds = 0;
            while (sent < count && !past(deadlineNanos, rounds++)) {
                if (outstanding == window) {
                    receive();
                    outstanding--;
                    acked++;
                }
                send(BenchProtocol.OP_ACK, size);
                outstanding++;
                sent++;
            }
            while (outstanding > 0) {
                receive();
                outstanding--;
                acked++;
            }
            return acked;
        }

        private void send(int op, int size) throws IOException {
            ensure(size);
            out.writeInt(op);
            out.writeInt(size);
            out.write(payload, 0, size);
            out.flush();
        }

        private int receive() throws IOException {
            int length = in.readInt();
            if (length < 0 || length > BenchProtocol.SIZE_MAX) {
                throw new IOException("bad response length " + length);
            }
            if (response.length < length) {
                response = new byte[length];
            }
            in.readFully(response, 0, length);
            return length;
        }

        private void ensure(int size) {
            if (payload.length < size) {
                payload = new byte[size];
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
