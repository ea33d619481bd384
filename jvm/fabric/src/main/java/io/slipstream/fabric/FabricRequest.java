package io.slipstream.fabric;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A request received by a node, to be answered exactly once with {@code respond} or {@link #fail}.
 *
 * <p>Answering releases the payload buffer (unless it was released already, or sent back with
 * {@link #respond(FabricBuffer)}, the zero-copy echo): copy out what you need first. A request may be
 * answered from any thread, also after the handler returned. A request that becomes garbage
 * unanswered is answered by a {@link Cleaner} with the error "handler dropped the request".
 * Answering twice throws {@link IllegalStateException}.
 */
public final class FabricRequest {
    private final int op;
    private final FabricBuffer payload;
    private final Answer answer;
    private final Cleaner.Cleanable cleanable;

    private FabricRequest(int op, FabricBuffer payload, Answer answer) {
        this.op = op;
        this.payload = payload;
        this.answer = answer;
        this.cleanable = NodeHandle.CLEANER.register(this, answer);
    }

    /** Wraps a request just returned by a native call; the caller holds a reference of {@code node}. */
    static FabricRequest adopt(NodeHandle node, long handle, int op, FabricBuffer payload) {
        assert handle != 0 && op >= 0 && op <= 0xFFFF;
        node.retain();
        return new FabricRequest(op, payload, new Answer(node, handle));
    }

    /** The operation code the requester chose (0..65535). */
    public int op() {
        return op;
    }

    /** The payload, in registered memory (released when the request is answered). */
    public FabricBuffer payload() {
        return payload;
    }

    /** Shorthand for {@code payload().byteBuffer()}. */
    public ByteBuffer payloadBuffer() {
        return payload.byteBuffer();
    }

    public boolean isAnswered() {
        return answer.handle.get() == 0;
    }

    /** Answers with a copy of {@code data}'s remaining bytes; its position is not changed. */
    public void respond(ByteBuffer data) {
        Objects.requireNonNull(data, "data");
        byte[] copy = null;
        if (!data.isDirect() && !data.hasArray()) {
            copy = new byte[data.remaining()];
            data.duplicate().get(copy);
        }
        long handle = take();
        long payloadHandle = payload.takeIfLive();
        try {
            if (copy != null) {
                FabricNative.requestRespond(handle, payloadHandle, null, copy, 0, copy.length);
            } else if (data.isDirect()) {
                FabricNative.requestRespond(handle, payloadHandle, data, null, data.position(), data.remaining());
            } else {
                FabricNative.requestRespond(handle, payloadHandle, null, data.array(), data.arrayOffset() + data.position(),
                        data.remaining());
            }
        } finally {
            answered();
        }
    }

    /** Answers with a copy of {@code data}. */
    public void respond(byte[] data) {
        respond(data, 0, data.length);
    }

    /** Answers with a copy of {@code data[offset, offset + length)}. */
    public void respond(byte[] data, int offset, int length) {
        respond(data, offset, length, false);
    }

    /**
     * Answers with the first {@link FabricBuffer#length()} bytes of {@code data} without copying
     * (when it comes from this node's pool; otherwise with a copy); consumes {@code data}. The
     * payload itself may be passed: an echo without copies.
     */
    public void respond(FabricBuffer data) {
        Objects.requireNonNull(data, "data");
        if (data.node() != answer.node) {
            try (data) {
                respond(data.byteBuffer());
            }
            return;
        }
        int length = data.length();
        long buffer = data.take();
        long handle;
        try {
            handle = take();
        } catch (IllegalStateException e) {
            FabricNative.bufferFree(buffer);
            throw e;
        }
        long payloadHandle = payload.takeIfLive(); // 0 for the echo: `data` was the payload
        try {
            FabricNative.requestRespondBuffer(handle, payloadHandle, buffer, length);
        } finally {
            answered();
        }
    }

    /** Fails the request: the requester gets a {@link FabricException} of kind {@code REMOTE} with {@code message}. */
    public void fail(String message) {
        fail(message, false);
    }

    /**
     * Answers like {@link #respond(byte[], int, int)}, then closes the connection the request came
     * on: for an engine that answers a broken request with its own error message and then drops
     * the connection (HBase's answer to a request over its size limit). See {@link #failAndClose}.
     */
    public void respondAndClose(byte[] data, int offset, int length) {
        respond(data, offset, length, true);
    }

    private void respond(byte[] data, int offset, int length, boolean thenClose) {
        Objects.checkFromIndexSize(offset, length, data.length);
        long handle = take();
        long payloadHandle = payload.takeIfLive();
        try {
            if (thenClose) {
                FabricNative.requestRespondAndClose(handle, payloadHandle, data, offset, length);
            } else {
                FabricNative.requestRespond(handle, payloadHandle, null, data, offset, length);
            }
        } finally {
            answered();
        }
    }

    /**
     * Fails the request like {@link #fail}, then closes the connection it came on: for a peer that
     * broke the protocol of the layer above (a malformed frame, a size over a limit). The answer is
     * sent before the close; nothing more is served from that connection; the peer's requests in
     * flight on it fail with {@code PEER_FAILED}, and its next request opens a new connection.
     */
    public void failAndClose(String message) {
        fail(message, true);
    }

    private void fail(String message, boolean thenClose) {
        Objects.requireNonNull(message, "message");
        long handle = take();
        long payloadHandle = payload.takeIfLive();
        try {
            if (thenClose) {
                FabricNative.requestFailAndClose(handle, payloadHandle, message);
            } else {
                FabricNative.requestFail(handle, payloadHandle, message);
            }
        } finally {
            answered();
        }
    }

    @Override
    public String toString() {
        return "FabricRequest{op=" + op + ", answered=" + isAnswered() + "}";
    }

    private long take() {
        long handle = answer.handle.getAndSet(0);
        if (handle == 0) {
            throw new IllegalStateException("fabric request was answered already");
        }
        return handle;
    }

    /** After the native answer, which freed the payload buffer too (one crossing, not two). */
    private void answered() {
        cleanable.clean();
    }

    /** The native request; also the {@link Cleaner} action (which must not reference the request). */
    private static final class Answer implements Runnable {
        final NodeHandle node;
        final AtomicLong handle;

        Answer(NodeHandle node, long handle) {
            this.node = node;
            this.handle = new AtomicLong(handle);
        }

        @Override
        public void run() {
            long dropped = handle.getAndSet(0);
            if (dropped != 0) {
                FabricNative.requestFree(dropped);
            }
            node.exit();
        }
    }
}
