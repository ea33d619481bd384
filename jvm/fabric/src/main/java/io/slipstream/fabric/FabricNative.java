package io.slipstream.fabric;

import java.nio.ByteBuffer;

/**
 * The JNI entry points of {@code libslipstream_fabric_jni.so} (crate {@code native/fabric-jni}), and
 * the only place they are declared. Package-private: callers are the API classes of this package,
 * which check arguments and hold the node's lifetime (see {@link NodeHandle}) around every call.
 *
 * <p>Conventions, shared with {@code native/fabric-jni/src/}:
 * <ul>
 * <li>Native objects are Rust boxes whose addresses travel as {@code long} handles. A function whose
 *     name says "free", and every function that takes a buffer or request handle to answer or send
 *     it, consumes the handle, also when it throws.</li>
 * <li>Failures arrive as {@link FabricException}; a Rust panic arrives as one of kind
 *     {@link FabricException.Kind#INTERNAL}. No native function can crash the JVM on bad input from
 *     this package, but a freed handle passed again is undefined: the callers make that impossible.</li>
 * <li>Functions that return a registered buffer return its direct {@link ByteBuffer} view (capacity =
 *     the buffer's capacity) and fill {@code out}: {@code out[0]} the buffer handle, {@code out[1]}
 *     its length, {@code out[2]} the handle of the pin that keeps its memory mapped for its views
 *     (freed with {@link #viewUnpin} once they are garbage), unless said otherwise.</li>
 * <li>A payload is either a direct {@code ByteBuffer} ({@code direct}; {@code offset} is added to its
 *     address) or a {@code byte[]} ({@code heap}), never both; both null means an empty payload.</li>
 * <li>No native function calls back into Java, and no native thread attaches to the JVM.</li>
 * </ul>
 */
final class FabricNative {
    /** Bumped whenever a signature here or a layout of an {@code out} array changes. */
    static final int ABI_VERSION = 9;

    /** Longs per completion in {@link #nodePollCompletions}'s {@code out}. */
    static final int COMPLETION_LONGS = 4;

    /** Length of {@link #nodeStats(long)}. */
    static final int STATS_FIELDS = 19;

    private FabricNative() {
    }

    static native int abiVersion();

    /** Starts and closes a client-only node: proves that UCX can start here. */
    static native void probe();

    /** The Rust {@code Config::default()}: chunk, pool cap, max message, max in flight, dispatch depth, idle ms, request timeout ms, spin us, shm (0/1), max connections, same-host eager (0/1). */
    /** {@code fabric::Config}'s settings with their defaults as text: {@code [name, value, ...]}. */
    static native String[] configSettings();

    /**
     * Returns a node handle. {@code listenIp} null = client-only; {@code settings}: {@code fabric::Config}
     * settings as {@code [name, value, ...]} text (the rest keep their defaults). Handler mode is always Pull.
     */
    static native long nodeStart(String listenIp, int listenPort, String[] settings, int completionQueueDepth);

    /** {@code "ip:port"} ({@code "[v6]:port"}) or null for a client-only node. */
    static native String nodeLocalAddress(long node);

    /** Returns an endpoint handle (a clone of the node's cached endpoint for the peer). */
    static native long nodeEndpoint(long node, String peerIp, int peerPort);

    /** {@code wait}: wait at the pool cap up to the request timeout (alloc) or fail at once (try_alloc). */
    static native ByteBuffer nodeAlloc(long node, int length, boolean wait, long[] out);

    /**
     * Null on timeout. Otherwise the payload's view, and {@code out[0]} the request handle,
     * {@code out[1]} the payload buffer handle, {@code out[2]} the payload length, {@code out[3]} the op,
     * {@code out[4]} the payload's pin handle.
     */
    static native ByteBuffer nodeNextRequest(long node, long timeoutMs, boolean spin, long[] out);

    /** {@code Node::interrupt_pull}: one {@link #nodeNextRequest}, under way or the next, returns. */
    static native void nodeInterruptPull(long node);

    /** {@code Node::help_progress}: drives the node's progress on this thread for up to {@code spinUs}; returns events. */
    static native int nodeHelpProgress(long node, long spinUs);

    /**
     * {@code Node::await_progress}: drives the node's progress on this thread for up to {@code spinUs},
     * then sleeps on the worker's event fd in the progress thread's place until a completion is queued
     * or {@code maxUs} (from the start) passed; returns 1 when one is queued, 0 when not, or -1 when
     * the spin found none and another thread sleeps on the fd already.
     */
    static native int nodeAwaitProgress(long node, long spinUs, long maxUs);

    /**
     * Drains completed asynchronous requests, at most {@code results.length} (and at most 1024) per
     * call, waiting up to {@code timeoutMs} if none is queued (0: never waits). Returns how many,
     * {@code n}; 0 on timeout, or at once when the node is closed and the queue is empty. For
     * {@code i < n}: {@code results[i]} is a {@link ByteBuffer} view of the response or a
     * {@link FabricException}, {@code out[4i]} the tag, and for a response {@code out[4i + 1]} its
     * buffer handle, {@code out[4i + 2]} its length and {@code out[4i + 3]} its pin handle. {@code out}
     * holds at least {@code 4 * results.length} longs ({@link #COMPLETION_LONGS}). Entries at {@code n} and above are left as they were.
     */
    static native int nodePollCompletions(long node, long timeoutMs, long[] out, Object[] results);

    /**
     * {@code enter}: the calling thread starts spinning on the completion queue (polling with timeout
     * 0), so completions stop waking a thread blocked in {@link #nodePollCompletions}; otherwise it
     * stops, waking one if completions are left. Pair them in a finally block.
     */
    static native void nodeHelpCompletions(long node, boolean enter);

    /** {@link FabricStats} fields in declaration order. */
    static native long[] nodeStats(long node);

    /** {@code Node::close}: idempotent; fails requests in flight, wakes {@link #nodeNextRequest} and {@link #nodePollCompletions}. */
    static native void nodeClose(long node);

    /** Frees the node handle; no call with it may be running or follow. */
    static native void nodeFree(long node);

    /** Sends a copy of the payload and waits for the response. */
    static native ByteBuffer endpointRequest(long endpoint, int op, ByteBuffer direct, byte[] heap, int offset,
            int length, long[] out);

    /** Sends the first {@code length} bytes of a registered buffer without copying; consumes {@code buffer}. */
    static native ByteBuffer endpointRequestBuffer(long endpoint, int op, long buffer, int length, long[] out);

    /** Sends a copy of the payload; the result arrives through {@link #nodePollCompletions} with {@code tag}. */
    static native void endpointRequestAsync(long endpoint, long tag, int op, ByteBuffer direct, byte[] heap,
            int offset, int length);

    /** Like {@link #endpointRequestAsync} from a registered buffer; consumes {@code buffer}. */
    static native void endpointRequestBufferAsync(long endpoint, long tag, int op, long buffer, int length);

    /** Most requests one {@link #endpointRequestBufferAsyncBatch} call sends. */
    static final int BATCH_MAX = 1024;

    /**
     * Sends {@code count} (at most {@link #BATCH_MAX}) registered buffers as asynchronous requests in
     * one call: request {@code i} carries the first {@code lengths[i]} bytes of {@code buffers[i]}
     * and completes with tag {@code firstTag + i} through {@link #nodePollCompletions}, also when it
     * cannot be sent. Consumes every buffer, unless it throws (a bad argument or a JNI failure,
     * before any buffer is taken).
     */
    static native void endpointRequestBufferAsyncBatch(long endpoint, long firstTag, int op, long[] buffers,
            int[] lengths, int count);

    static native void endpointFree(long endpoint);

    /** Returns the buffer to its pool. Its memory stays mapped while its pin exists. */
    static native void bufferFree(long buffer);

    /** Frees a pin handed out with a buffer, once no view of the buffer is reachable. */
    static native void viewUnpin(long pin);

    // Answers consume the request and its payload buffer ({@code payload}, 0 if already released),
    // which is freed after the answer's data was copied (the data may be a view of the payload).

    /** Answers with a copy of the data; consumes {@code request} and {@code payload}. */
    static native void requestRespond(long request, long payload, ByteBuffer direct, byte[] heap, int offset, int length);

    /** Answers with the first {@code length} bytes of a registered buffer; consumes the three handles. */
    static native void requestRespondBuffer(long request, long payload, long buffer, int length);

    /** The requester gets {@link FabricException.Kind#REMOTE} with {@code message}; consumes {@code request} and {@code payload}. */
    static native void requestFail(long request, long payload, String message);

    /** As {@link #requestRespond} with a heap array, then closes the connection the request came on once the answer is sent. */
    static native void requestRespondAndClose(long request, long payload, byte[] heap, int offset, int length);

    /** As {@link #requestFail}, then closes the connection the request came on once the answer is sent. */
    static native void requestFailAndClose(long request, long payload, String message);

    /** Drops an unanswered request: the requester gets "handler dropped the request". */
    static native void requestFree(long request);
}
