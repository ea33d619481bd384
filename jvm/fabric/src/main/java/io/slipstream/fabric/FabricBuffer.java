package io.slipstream.fabric;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A buffer of registered (UCX-mapped) memory from a node's pool: a response, a request's payload, or
 * an allocation to fill and send without copies.
 *
 * <p><b>Lifetime.</b> Release it with {@link #release()} or {@link #close()} (try-with-resources), or
 * hand it to {@link FabricEndpoint#request(int, FabricBuffer)} / {@link FabricRequest#respond(FabricBuffer)},
 * which consume it. After that, every method except {@link #isReleased()} and {@link #close()} throws
 * {@link IllegalStateException}. A buffer that becomes garbage unreleased is released by a
 * {@link Cleaner} (once it and every view of it are unreachable; a small, kept buffer once it is), so a
 * leak costs pool memory until the next collection, never more; the node's
 * {@link FabricStats#poolBytesInUse()} shows it.
 *
 * <p><b>Views.</b> {@link #byteBuffer()} is a direct {@link ByteBuffer} over the registered memory
 * itself, without copies. A view is plain memory and cannot check the buffer's state: used after the
 * buffer was released it reads or writes memory that the pool may have handed to someone else. It can
 * never crash the JVM or touch the native heap, though: the memory of a buffer is pinned from its
 * creation until its last view is garbage, and the pool never unmaps pinned memory (it may reuse it);
 * the pool itself lives (even after {@link FabricNode#close()}) until every view of every such buffer
 * is garbage. Small buffers (up to 16 KiB, a bounded amount per node) are instead kept: their memory is
 * never freed (a closed node's goes to later nodes), so their views need neither pin nor pool, an
 * explicit release leaves nothing for the garbage collector to process, and the native side makes the
 * root view of such memory once and hands the same one out with every later buffer of it. Drop views
 * when you release the buffer: a view kept reachable also keeps a pinned buffer's memory from being
 * reclaimed for buffers of other sizes when the pool is at its cap.
 *
 * <p>Not thread-safe, except that releasing and consuming race safely: exactly one wins.
 */
public final class FabricBuffer implements AutoCloseable {
    private final Owner owner;
    /**
     * The root view: capacity = the native capacity. Never handed out nor changed (callers get
     * duplicates, which keep it reachable): a kept buffer's root is shared with every buffer of the
     * same memory, for good.
     */
    private final ByteBuffer root;
    /**
     * The release action, registered on the root view (on the buffer, if kept); run at once by an
     * explicit release of a kept buffer. Set once, by {@link #adopt}, before the buffer is published.
     */
    private Cleaner.Cleanable cleanable;
    private int length;

    private FabricBuffer(Owner owner, ByteBuffer root, int length) {
        this.owner = owner;
        this.root = root;
        this.length = length;
    }

    /**
     * Wraps a buffer handle just returned by a native call with its view and its pin (made in the
     * same native call, so the memory stays mapped until the cleaner unpins it, whenever the buffer
     * is released), or with pin 0 for a small buffer whose memory the native side keeps for good
     * (it is never freed, so its views need no pin and no node); the caller holds a reference of
     * {@code node}.
     */
    static FabricBuffer adopt(NodeHandle node, ByteBuffer root, long handle, long length, long pin) {
        assert handle != 0 && root != null && root.isDirect();
        assert length >= 0 && length <= root.capacity() : "length " + length + " above capacity " + root.capacity();
        node.retain();
        Owner owner = new Owner(node, handle, pin);
        FabricBuffer buffer = new FabricBuffer(owner, root, (int) length);
        // A pinned buffer's action is registered on the root view, not on this object: the memory is
        // released only when neither this buffer nor any view derived from the root (duplicates and
        // slices keep it reachable) is left. Kept memory's root view is the memory's for good (the
        // native side holds it), so it never becomes garbage; its views need nothing from the buffer
        // (the memory is never freed), so the leak guard watches the buffer itself.
        buffer.cleanable = NodeHandle.CLEANER.register(pin == 0 ? buffer : root, owner);
        return buffer;
    }

    /** The root view, for tests of this package: whether kept memory's is shared. */
    ByteBuffer rootView() {
        return root;
    }

    /** Valid bytes: what a response or payload holds, or what {@link FabricEndpoint#request(int, FabricBuffer)} sends. */
    public int length() {
        checkLive();
        return length;
    }

    /** Bytes of registered memory behind this buffer (its pool class; at least {@link #length()}). */
    public int capacity() {
        checkLive();
        return root.capacity();
    }

    /** Sets the valid length, e.g. after writing through a view. */
    public FabricBuffer setLength(int newLength) {
        checkLive();
        if (newLength < 0 || newLength > root.capacity()) {
            throw new IllegalArgumentException("length " + newLength + " outside 0.." + root.capacity());
        }
        this.length = newLength;
        return this;
    }

    /**
     * A new direct view of the registered memory, no copy: position 0, limit {@link #length()},
     * capacity {@link #capacity()}, big-endian. Each call returns an independent view.
     */
    public ByteBuffer byteBuffer() {
        checkLive();
        return root.duplicate().clear().limit(length);
    }

    public boolean isReleased() {
        return owner.handle.get() == 0;
    }

    /** Returns the memory to the pool now. Throws {@link IllegalStateException} if already released or consumed. */
    public void release() {
        long handle = owner.handle.getAndSet(0);
        if (handle == 0) {
            throw released();
        }
        FabricNative.bufferFree(handle);
        releasedNow();
    }

    /** Like {@link #release()}, but does nothing if already released or consumed. */
    @Override
    public void close() {
        long handle = owner.handle.getAndSet(0);
        if (handle != 0) {
            FabricNative.bufferFree(handle);
            releasedNow();
        }
    }

    /** Takes the native handle for a native call that consumes it. */
    long take() {
        long handle = owner.handle.getAndSet(0);
        if (handle == 0) {
            throw released();
        }
        releasedNow();
        return handle;
    }

    /** Takes the native handle if not released yet, else 0 (a request's answer frees its payload natively). */
    long takeIfLive() {
        long handle = owner.handle.getAndSet(0);
        if (handle != 0) {
            releasedNow();
        }
        return handle;
    }

    /**
     * The handle is gone (freed or handed to a native call). A kept buffer's memory needs nothing more
     * from its views (no pin, never freed), so its release action runs now instead of after the
     * collector found the views unreachable: the registration is dropped while young, and the node's
     * reference goes with it. A pinned buffer's action waits for its views, as before.
     */
    private void releasedNow() {
        if (owner.pin == 0) {
            cleanable.clean();
        }
    }

    /** The node this buffer came from (buffers can only be sent through endpoints of the same node). */
    NodeHandle node() {
        return owner.node;
    }

    @Override
    public String toString() {
        return isReleased() ? "FabricBuffer{released}" : "FabricBuffer{length=" + length + ", capacity=" + root.capacity() + "}";
    }

    private void checkLive() {
        if (owner.handle.get() == 0) {
            throw released();
        }
    }

    private static IllegalStateException released() {
        return new IllegalStateException("fabric buffer was released (or sent, which releases it)");
    }

    /** The native side of a buffer; also the {@link Cleaner} action, which must not reference the buffer. */
    private static final class Owner implements Runnable {
        final NodeHandle node;
        final AtomicLong handle;
        /** Keeps the memory mapped until no view is reachable (this action runs then); 0 for kept memory. */
        final long pin;

        Owner(NodeHandle node, long handle, long pin) {
            this.node = node;
            this.handle = new AtomicLong(handle);
            this.pin = pin;
        }

        @Override
        public void run() {
            long leaked = handle.getAndSet(0);
            if (leaked != 0) {
                FabricNative.bufferFree(leaked);
            }
            if (pin != 0) {
                FabricNative.viewUnpin(pin);
            }
            node.exit();
        }
    }
}
