package io.slipstream.fabric;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * Requests to one peer. Obtained from {@link FabricNode#endpoint}; cached per peer for the node's
 * lifetime, one connection per peer, reconnected after failures. Thread-safe: any number of threads
 * may send through one endpoint at once.
 *
 * <p>Operation codes are 0..65535. Payloads: a {@link ByteBuffer} (its remaining bytes; its position
 * is not changed) or {@code byte[]} is copied into registered memory; a {@link FabricBuffer} from this
 * node is sent without copies and is consumed (released), also when the request fails.
 *
 * <p>Responses are {@link FabricBuffer}s in registered memory: close them.
 */
public final class FabricEndpoint {
    /** Keeps the node reachable (and so open: see {@link FabricNode#close()}) while its endpoints are. */
    private final FabricNode owner;
    private final NodeHandle node;
    private final Completer completer;
    private final long ptr;
    private final InetSocketAddress peer;

    FabricEndpoint(FabricNode owner, NodeHandle node, Completer completer, long ptr, InetSocketAddress peer) {
        this.owner = owner;
        this.node = node;
        this.completer = completer;
        this.ptr = ptr;
        this.peer = peer;
    }

    public InetSocketAddress peer() {
        return peer;
    }

    /** The node this endpoint sends from. */
    public FabricNode node() {
        return owner;
    }

    /** Sends a copy of {@code payload}'s remaining bytes and waits for the response (up to the request timeout). */
    public FabricBuffer request(int op, ByteBuffer payload) {
        checkOp(op);
        Objects.requireNonNull(payload, "payload");
        if (!payload.isDirect() && !payload.hasArray()) {
            return request(op, copyOf(payload));
        }
        long[] out = new long[3];
        node.enter();
        try {
            ByteBuffer view = payload.isDirect()
                    ? FabricNative.endpointRequest(ptr, op, payload, null, payload.position(), payload.remaining(), out)
                    : FabricNative.endpointRequest(ptr, op, null, payload.array(),
                            payload.arrayOffset() + payload.position(), payload.remaining(), out);
            return FabricBuffer.adopt(node, view, out[0], out[1], out[2]);
        } finally {
            node.exit();
        }
    }

    /** Sends a copy of {@code payload} and waits for the response. */
    public FabricBuffer request(int op, byte[] payload) {
        return request(op, payload, 0, payload.length);
    }

    /** Sends a copy of {@code payload[offset, offset + length)} and waits for the response. */
    public FabricBuffer request(int op, byte[] payload, int offset, int length) {
        checkOp(op);
        Objects.checkFromIndexSize(offset, length, payload.length);
        long[] out = new long[3];
        node.enter();
        try {
            ByteBuffer view = FabricNative.endpointRequest(ptr, op, null, payload, offset, length, out);
            return FabricBuffer.adopt(node, view, out[0], out[1], out[2]);
        } finally {
            node.exit();
        }
    }

    /**
     * Sends the first {@link FabricBuffer#length()} bytes of {@code payload} without copying (a buffer
     * of another node is copied) and waits for the response. Consumes {@code payload}.
     */
    public FabricBuffer request(int op, FabricBuffer payload) {
        checkOp(op);
        Objects.requireNonNull(payload, "payload");
        if (payload.node() != node) {
            try (payload) {
                return request(op, payload.byteBuffer());
            }
        }
        int length = payload.length();
        long buffer = payload.take();
        try {
            node.enter();
        } catch (FabricException e) {
            FabricNative.bufferFree(buffer);
            throw e;
        }
        long[] out = new long[3];
        try {
            ByteBuffer view = FabricNative.endpointRequestBuffer(ptr, op, buffer, length, out);
            return FabricBuffer.adopt(node, view, out[0], out[1], out[2]);
        } finally {
            node.exit();
        }
    }

    /**
     * Sends a copy of {@code payload}'s remaining bytes (copied before this returns, so the caller may
     * reuse it at once) and completes the future with the response on the node's completer thread.
     * Failures, including a closed node, complete the future exceptionally with a {@link FabricException}.
     */
    public CompletableFuture<FabricBuffer> requestAsync(int op, ByteBuffer payload) {
        checkOp(op);
        Objects.requireNonNull(payload, "payload");
        if (!payload.isDirect() && !payload.hasArray()) {
            return requestAsync(op, copyOf(payload));
        }
        return submit(tag -> {
            if (payload.isDirect()) {
                FabricNative.endpointRequestAsync(ptr, tag, op, payload, null, payload.position(), payload.remaining());
            } else {
                FabricNative.endpointRequestAsync(ptr, tag, op, null, payload.array(),
                        payload.arrayOffset() + payload.position(), payload.remaining());
            }
        });
    }

    /** Like {@link #requestAsync(int, ByteBuffer)} with a copy of {@code payload}. */
    public CompletableFuture<FabricBuffer> requestAsync(int op, byte[] payload) {
        checkOp(op);
        Objects.requireNonNull(payload, "payload");
        return submit(tag -> FabricNative.endpointRequestAsync(ptr, tag, op, null, payload, 0, payload.length));
    }

    /** Like {@link #request(int, FabricBuffer)}, asynchronously. Consumes {@code payload} (at once). */
    public CompletableFuture<FabricBuffer> requestAsync(int op, FabricBuffer payload) {
        checkOp(op);
        Objects.requireNonNull(payload, "payload");
        if (payload.node() != node) {
            try (payload) {
                return requestAsync(op, payload.byteBuffer());
            }
        }
        int length = payload.length();
        long buffer = payload.take();
        return submit(tag -> FabricNative.endpointRequestBufferAsync(ptr, tag, op, buffer, length), buffer);
    }

    /** Most payloads one {@link #requestAsync(int, List)} call takes. */
    public static final int BATCH_MAX = FabricNative.BATCH_MAX;

    /**
     * Sends one asynchronous request per payload, all with operation {@code op}, in one call into the
     * native library (one crossing for the batch instead of one per request): the futures, in the
     * payloads' order, complete as {@link #requestAsync(int, FabricBuffer)}'s do. Consumes every
     * payload, also when requests fail. Payloads from another node are sent as copies, one call
     * each. At most {@link #BATCH_MAX} payloads; requests beyond the room left among the node's
     * {@code completionQueueDepth} asynchronous requests (after waiting up to the request timeout for
     * the first missing place) complete at once with {@code OVERLOADED}.
     *
     * @throws IllegalStateException a payload was released already (every payload is released then,
     *         nothing is sent)
     * @throws IllegalArgumentException more than {@link #BATCH_MAX} payloads, or a bad op (nothing is consumed)
     */
    public List<CompletableFuture<FabricBuffer>> requestAsync(int op, List<FabricBuffer> payloads) {
        checkOp(op);
        Objects.requireNonNull(payloads, "payloads");
        int count = payloads.size();
        if (count > BATCH_MAX) {
            throw new IllegalArgumentException("at most " + BATCH_MAX + " payloads per batch: " + count);
        }
        List<CompletableFuture<FabricBuffer>> futures = new ArrayList<>(count);
        boolean foreign = false;
        for (FabricBuffer payload : payloads) {
            foreign |= Objects.requireNonNull(payload, "payload").node() != node;
        }
        if (foreign) { // rare: no batching, each payload goes its own way
            for (FabricBuffer payload : payloads) {
                futures.add(requestAsync(op, payload));
            }
            return futures;
        }
        long[] handles = new long[count];
        int[] lengths = new int[count];
        int taken = 0;
        try {
            for (; taken < count; taken++) {
                FabricBuffer payload = payloads.get(taken);
                lengths[taken] = payload.length();
                handles[taken] = payload.take();
            }
        } catch (IllegalStateException released) {
            freeFrom(handles, 0, taken);
            for (int i = taken + 1; i < count; i++) {
                payloads.get(i).close();
            }
            throw released;
        }
        try {
            node.enter();
        } catch (FabricException e) {
            freeFrom(handles, 0, count);
            for (int i = 0; i < count; i++) {
                futures.add(CompletableFuture.failedFuture(e));
            }
            return futures;
        }
        try {
            int consumed = completer.submitBatch(futures, count,
                    (firstTag, n) -> FabricNative.endpointRequestBufferAsyncBatch(ptr, firstTag, op, handles, lengths, n));
            freeFrom(handles, consumed, count);
            return futures;
        } finally {
            node.exit();
        }
    }

    private static void freeFrom(long[] handles, int from, int to) {
        for (int i = from; i < to; i++) {
            FabricNative.bufferFree(handles[i]);
        }
    }

    @Override
    public String toString() {
        return "FabricEndpoint{peer=" + peer + "}";
    }

    private CompletableFuture<FabricBuffer> submit(Completer.Send send) {
        return submit(send, 0);
    }

    /** {@code owned}: a buffer handle the send consumes, freed here if the send never runs. */
    private CompletableFuture<FabricBuffer> submit(Completer.Send send, long owned) {
        try {
            node.enter();
        } catch (FabricException e) {
            if (owned != 0) {
                FabricNative.bufferFree(owned);
            }
            return CompletableFuture.failedFuture(e);
        }
        try {
            boolean[] sent = {false};
            CompletableFuture<FabricBuffer> future = completer.submit(tag -> {
                sent[0] = true;
                send.send(tag);
            });
            if (!sent[0] && owned != 0) {
                FabricNative.bufferFree(owned);
            }
            return future;
        } finally {
            node.exit();
        }
    }

    private static void checkOp(int op) {
        if (op < 0 || op > 0xFFFF) {
            throw new IllegalArgumentException("op must be in 0..65535: " + op);
        }
    }

    private static byte[] copyOf(ByteBuffer readOnly) {
        byte[] copy = new byte[readOnly.remaining()];
        readOnly.duplicate().get(copy);
        return copy;
    }
}
