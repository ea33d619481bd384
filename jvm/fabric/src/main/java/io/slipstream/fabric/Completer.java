package io.slipstream.fabric;

import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Completes the futures of a node's asynchronous requests: on one Java thread per node, and on
 * threads that wait for one of those futures.
 *
 * <p>Why a thread: the fabric runs a request's completion callback on its progress thread, a native
 * thread. Calling into the JVM from there would mean attaching native threads and running Java code
 * on the fabric's hot path. Instead the callback only pushes {@code (tag, result)} into the node's
 * native completion queue, and this thread drains it, many completions per native call
 * ({@link FabricNative#nodePollCompletions}), so no native thread ever enters the JVM.
 *
 * <p>Waiting threads help: {@code get} and {@code join} on a future of this node first drain the
 * queue themselves, spinning for at most {@link #HELP_SPIN_NANOS} without a completion, and only then
 * park. Under a steady stream of responses (a window of requests in flight) the waiting thread picks
 * up its own response without a hand-off through the completer thread, which stays asleep meanwhile
 * (see {@link FabricNative#nodeHelpCompletions}). On a node that serves no requests (no listener),
 * a waiting thread also drives the fabric's progress itself meanwhile (see {@link #driveProgress}),
 * so responses are received on the thread that waits for them, as with a synchronous request.
 *
 * <p>Limits: at most {@link FabricConfig#completionQueueDepth()} requests await completion (a
 * {@link Semaphore}; callers wait up to the request timeout, then get {@code OVERLOADED}), which also
 * bounds the native queue. Futures complete on the completer thread or on a thread waiting for a
 * future of the node: dependent actions that block delay other completions of the node, so use the
 * {@code *Async} variants for heavy work.
 */
final class Completer implements Runnable {
    private static final System.Logger LOG = System.getLogger(Completer.class.getName());
    /** A blocked poll wakes this often to check for close; close itself wakes it at once. */
    private static final long POLL_TIMEOUT_MS = 200;
    /** After close, requests still awaiting completion get this long before they fail with CLOSED. */
    private static final long CLOSE_GRACE_MS = 2_000;
    /** Completions taken per native call by the completer thread. */
    static final int BATCH = 64;
    /** Completions taken per native call by a helping thread. */
    static final int HELPER_BATCH = 16;
    /** A waiting thread stops spinning on the queue after this long without a completion, then parks. */
    static final long HELP_SPIN_NANOS = 50_000;
    /**
     * The shortest spin of a first-level wait once spins keep failing. A wait whose spin ran out
     * before its response came halves the next wait's spin, down to this; a wait answered while it
     * spun gives the next the whole {@link #HELP_SPIN_NANOS} again, and every
     * {@link #SPIN_PROBE_EVERY}th wait spins in full anyway, to find out whether responses got fast
     * again. Why: the spin only pays when the response comes within it (the fabric's own round trip,
     * a few microseconds); an engine's call that takes longer (Hadoop's RPC: its call queue and a
     * handler, 100 us and more) spun 50 us for nothing on every call, with a core taken from the
     * handlers that would answer it (RPCCallBenchmark, 1 client: 406 us of client CPU per call
     * against vanilla's 161 us).
     */
    static final long HELP_SPIN_MIN_NANOS = 2_000;
    /** Every this many first-level waits, one spins the whole {@link #HELP_SPIN_NANOS}. */
    static final int SPIN_PROBE_EVERY = 16;
    /** Off ({@code -Dslipstream.fabric.adaptiveSpin=false}): every wait spins in full, as before, for A/B runs. */
    static final boolean ADAPTIVE_SPIN = Boolean.parseBoolean(System.getProperty("slipstream.fabric.adaptiveSpin", "true"));
    /** One {@code Node::help_progress} call spins at most this long before the queue is drained again. */
    private static final long HELP_PROGRESS_SPIN_US = 20;
    /** Off ({@code -Dslipstream.fabric.awaitOnFd=false}): waiting threads spin and park as before, for A/B runs. */
    static final boolean AWAIT_ON_FD = Boolean.parseBoolean(System.getProperty("slipstream.fabric.awaitOnFd", "true"));
    /** Longest native sleep on the event fd per call: an interrupt or close is noticed this fast. */
    private static final long AWAIT_SLICE_US = 20_000;
    /** Poll slice of the completer thread waiting inside a dependent action. */
    private static final long NESTED_POLL_MS = 10;
    /** Batches a helper whose future is done still drains before it leaves. */
    private static final int LEAVE_DRAINS_MAX = 4;
    /** Idle spin rounds between two clock reads. */
    private static final int CLOCK_EVERY = 32;
    /** The same while driving progress (each round may spin up to {@link #HELP_PROGRESS_SPIN_US}). */
    private static final int CLOCK_EVERY_DRIVING = 4;

    /**
     * Threads of one node that may spin as helpers at once: one core is left for the rest of the
     * process (at least one), as the fabric's own waiters do (Rust {@code SPINNING_WAITERS_MAX}). More
     * spinners than cores starve the threads that would answer them: with 8 Hadoop RPC client threads
     * each spinning, Hadoop's RPCCallBenchmark measured 184-344 us of client CPU per call against
     * vanilla's 21-92 us (docs/benchmarks.md). The others park at once; the spinning helper (or the
     * completer thread) completes their futures, which wakes them.
     */
    static final int SPINNERS_MAX = Integer.getInteger("slipstream.fabric.spinnersMax", Math.max(1, Runtime.getRuntime().availableProcessors() - 1));

    /**
     * How deep waits nest on one thread: a dependent action that waits for another future helps too,
     * with its own batch, after delivering what the batches it interrupted still hold (one of those
     * may be the completion it waits for). Deeper waits just park.
     */
    static final int NESTING_MAX = 4;

    /** A thread's batches, one per nesting level; level 0 of the completer thread is its own. */
    private static final ThreadLocal<Batch[]> BATCHES = ThreadLocal.withInitial(() -> new Batch[NESTING_MAX]);

    /** Sends one asynchronous request with the given tag; may throw {@link FabricException}. */
    interface Send {
        void send(long tag);
    }

    /** Reusable arrays of one native poll. */
    private static final class Batch {
        final long[] out;
        final Object[] results;
        /** Completions in {@code out}/{@code results}, and the next one to deliver. */
        int count;
        int next;
        /** In use by its thread (a wait nested in a dependent action takes the next level). */
        boolean busy;

        Batch(int size) {
            out = new long[FabricNative.COMPLETION_LONGS * size];
            results = new Object[size];
        }
    }

    /**
     * The future of one asynchronous request: waiting for it ({@code get}, {@code join}) first helps
     * completing the node's requests (see the class comment). Dependent stages are plain futures.
     */
    static final class FabricFuture extends CompletableFuture<FabricBuffer> {
        private final Completer completer;

        FabricFuture(Completer completer) {
            this.completer = completer;
        }

        @Override
        public FabricBuffer get() throws InterruptedException, ExecutionException {
            completer.help(this, Long.MAX_VALUE);
            return super.get();
        }

        @Override
        public FabricBuffer get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            long start = System.nanoTime();
            long timeoutNanos = unit.toNanos(timeout);
            completer.help(this, timeoutNanos);
            long left = timeoutNanos - (System.nanoTime() - start);
            return super.get(Math.max(0, left), TimeUnit.NANOSECONDS);
        }

        @Override
        public FabricBuffer join() {
            completer.help(this, Long.MAX_VALUE);
            return super.join();
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            return new CompletableFuture<>();
        }
    }

    private final NodeHandle node;
    private final Semaphore permits;
    private final int depth;
    private final long waitMs;
    private final Map<Long, CompletableFuture<FabricBuffer>> pending = new ConcurrentHashMap<>();
    private final AtomicLong tags = new AtomicLong();
    private volatile Thread thread;
    private volatile long closeDeadlineNanos;
    private volatile boolean closing;
    private volatile boolean exited;

    /**
     * The spin of the next first-level wait ({@link #HELP_SPIN_MIN_NANOS}); read and written by the
     * waiting threads without a lock: a lost update only makes one wait spin a little more or less.
     */
    private volatile long spinBudgetNanos = HELP_SPIN_NANOS;
    /** First-level waits so far (racy, for the probe only). */
    private int firstLevelWaits;

    /** Threads spinning in {@link #help} at nesting level 0 now (at most {@link #SPINNERS_MAX}). */
    private final java.util.concurrent.atomic.AtomicInteger spinners = new java.util.concurrent.atomic.AtomicInteger();

    private final String threadName;
    /** Waiting threads drive the fabric's progress themselves: only on a node that serves no requests. */
    private final boolean drivesProgress;

    Completer(NodeHandle node, int depth, long waitMs, String threadName, boolean drivesProgress) {
        this.node = node;
        this.drivesProgress = drivesProgress;
        this.threadName = threadName;
        this.depth = depth;
        this.permits = new Semaphore(depth);
        this.waitMs = waitMs;
    }

    /** Called inside {@code node.enter()}. Never throws {@link FabricException}: failures complete the future. */
    CompletableFuture<FabricBuffer> submit(Send send) {
        CompletableFuture<FabricBuffer> future = new FabricFuture(this);
        try {
            if (!permits.tryAcquire() && !permits.tryAcquire(waitMs, TimeUnit.MILLISECONDS)) {
                future.completeExceptionally(new FabricException(FabricException.Kind.OVERLOADED,
                        depth + " asynchronous requests await completion (completionQueueDepth); waited " + waitMs + " ms"));
                return future;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            future.completeExceptionally(new FabricException(FabricException.Kind.CLOSED, "interrupted while waiting to send"));
            return future;
        }
        long tag = tags.incrementAndGet();
        pending.put(tag, future);
        if (!startIfNeeded()) {
            abandon(tag, FabricException.closed());
            return future;
        }
        try {
            send.send(tag);
        } catch (RuntimeException e) {
            abandon(tag, e);
        }
        // The thread sets `exited` before its last sweep of `pending`: one of the two sees the other.
        if (exited) {
            abandon(tag, FabricException.closed());
        }
        return future;
    }

    /** Sends requests with consecutive tags {@code firstTag, firstTag + 1, ...}; may throw {@link FabricException}. */
    interface BatchSend {
        void send(long firstTag, int count);
    }

    /**
     * Like {@link #submit} for {@code count} requests sent in one native call: adds their futures to
     * {@code futures} in order. Requests are admitted while permits are available (waiting for the
     * first missing one up to the request timeout); the rest complete at once with
     * {@code OVERLOADED}. Returns how many requests {@code send} consumed: the admitted ones if it
     * ran, else 0 (the caller frees the payloads from there on).
     */
    int submitBatch(List<CompletableFuture<FabricBuffer>> futures, int count, BatchSend send) {
        int admitted = 0;
        FabricException refused = null;
        try {
            while (admitted < count) {
                if (!permits.tryAcquire() && !permits.tryAcquire(waitMs, TimeUnit.MILLISECONDS)) {
                    refused = new FabricException(FabricException.Kind.OVERLOADED,
                            depth + " asynchronous requests await completion (completionQueueDepth); waited " + waitMs + " ms");
                    break;
                }
                admitted++;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            refused = new FabricException(FabricException.Kind.CLOSED, "interrupted while waiting to send");
        }
        long firstTag = tags.getAndAdd(admitted) + 1;
        for (int i = 0; i < admitted; i++) {
            CompletableFuture<FabricBuffer> future = new FabricFuture(this);
            pending.put(firstTag + i, future);
            futures.add(future);
        }
        for (int i = admitted; i < count; i++) {
            futures.add(CompletableFuture.failedFuture(refused));
        }
        if (admitted == 0) {
            return 0;
        }
        if (!startIfNeeded()) {
            abandonAll(firstTag, admitted, FabricException.closed());
            return 0;
        }
        int consumed = 0;
        try {
            send.send(firstTag, admitted);
            consumed = admitted;
        } catch (RuntimeException e) {
            abandonAll(firstTag, admitted, e); // thrown before the native side took any buffer
        }
        if (exited) {
            abandonAll(firstTag, admitted, FabricException.closed());
        }
        return consumed;
    }

    private void abandonAll(long firstTag, int count, Throwable failure) {
        for (int i = 0; i < count; i++) {
            abandon(firstTag + i, failure);
        }
    }

    private void abandon(long tag, Throwable failure) {
        CompletableFuture<FabricBuffer> future = pending.remove(tag);
        if (future != null) {
            permits.release();
            future.completeExceptionally(failure);
        }
    }

    /** False once closing began before the thread was ever started (then nothing would complete the future). */
    private synchronized boolean startIfNeeded() {
        if (thread == null) {
            if (closing) {
                return false;
            }
            node.retain();
            Thread started = new Thread(this, threadName);
            started.setDaemon(true);
            thread = started;
            started.start();
        }
        return true;
    }

    @Override
    public void run() {
        Batch batch = new Batch(BATCH);
        batch.busy = true;
        BATCHES.get()[0] = batch;
        try {
            while (true) {
                if (closing && (pending.isEmpty() || System.nanoTime() - closeDeadlineNanos > 0)) {
                    break;
                }
                try {
                    drain(batch, POLL_TIMEOUT_MS);
                } catch (FabricException e) {
                    LOG.log(Level.ERROR, "polling completions failed", e);
                    pause();
                }
            }
        } finally {
            exited = true;
            FabricException closed = FabricException.closed();
            for (Long tag : pending.keySet()) {
                abandon(tag, closed);
            }
            node.exit();
        }
    }

    /** One native poll (waiting up to {@code timeoutMs}) and the futures it completes; the caller holds a node reference. */
    private int drain(Batch batch, long timeoutMs) {
        int count = FabricNative.nodePollCompletions(node.ptr, timeoutMs, batch.out, batch.results);
        batch.count = count;
        batch.next = 0;
        deliverRest(batch);
        return count;
    }

    /** Completes the futures of the batch's completions not delivered yet (also from a nested wait). */
    private void deliverRest(Batch batch) {
        while (batch.next < batch.count) {
            int i = batch.next++;
            Object result = batch.results[i];
            batch.results[i] = null;
            int at = FabricNative.COMPLETION_LONGS * i;
            complete(batch.out[at], result, batch.out[at + 1], batch.out[at + 2], batch.out[at + 3]);
        }
    }

    /**
     * A thread waits for {@code future}: it drains the completion queue itself until the future is
     * done, {@link #HELP_SPIN_NANOS} pass without a completion, or {@code timeoutNanos} pass; then the
     * caller parks as usual. Does nothing when nothing was ever sent, once the node is closing, or
     * when the thread is already draining (a dependent action that waits for another future).
     */
    void help(CompletableFuture<FabricBuffer> future, long timeoutNanos) {
        if (future.isDone() || thread == null || closing || timeoutNanos <= 0) {
            return;
        }
        Batch[] levels = BATCHES.get();
        int level = 0;
        while (level < NESTING_MAX && levels[level] != null && levels[level].busy) {
            level++;
        }
        if (level == NESTING_MAX) {
            return;
        }
        // A first-level wait spins only while fewer than SPINNERS_MAX do; nested waits (inside a
        // dependent action, which may hold up completions) always help.
        boolean counted = level == 0 && Thread.currentThread() != thread;
        // A first-level wait on a node with no listener drives progress and then sleeps on the event
        // fd itself (awaitOnFd); without a spinner's place it goes to the fd at once.
        boolean awaitsOnFd = level == 0 && drivesProgress && Thread.currentThread() != thread && AWAIT_ON_FD;
        boolean mayspin = true;
        if (counted && !takeSpinnerSlot()) {
            if (!awaitsOnFd) {
                return;
            }
            counted = false;
            mayspin = false;
        }
        try {
            node.enter();
        } catch (FabricException e) {
            if (counted) {
                spinners.decrementAndGet();
            }
            return; // closed: the completer thread fails what is left
        }
        if (levels[level] == null) {
            levels[level] = new Batch(HELPER_BATCH);
        }
        Batch batch = levels[level];
        batch.busy = true;
        long spinNanos = mayspin ? spinFor(level) : 0;
        long start = System.nanoTime();
        try {
            // Waiting inside a dependent action: first what the interrupted batches still hold.
            for (int outer = 0; outer < level && !future.isDone(); outer++) {
                deliverRest(levels[outer]);
            }
            FabricNative.nodeHelpCompletions(node.ptr, true);
            if (awaitsOnFd) {
                try {
                    awaitOnFd(future, batch, start, timeoutNanos, spinNanos);
                } finally {
                    FabricNative.nodeHelpCompletions(node.ptr, false);
                }
                return;
            }
            try {
                long lastCompletion = start;
                boolean completed = false;
                int idle = 0;
                while (!future.isDone()) {
                    if (drain(batch, 0) > 0) {
                        idle = 0;
                        completed = true; // the clock is read at the next idle round
                        continue;
                    }
                    // Events (not only completions) may follow: drain again at once. Only a completion
                    // restarts the spin time.
                    boolean active = drivesProgress && driveProgress() > 0;
                    // A progress round lasts up to HELP_PROGRESS_SPIN_US: the clock is read more often then.
                    if (idle++ % (drivesProgress ? CLOCK_EVERY_DRIVING : CLOCK_EVERY) == 0) {
                        long now = System.nanoTime();
                        if (completed) {
                            lastCompletion = now;
                            completed = false;
                        }
                        if (now - lastCompletion > spinNanos || now - start > timeoutNanos || closing) {
                            break;
                        }
                    }
                    if (!active) {
                        Thread.onSpinWait();
                    }
                }
                // Done: take what else is queued too (bounded), so leaving wakes the completer thread
                // only for completions that arrive later.
                for (int i = 0; i < LEAVE_DRAINS_MAX && drain(batch, 0) == batch.results.length; i++) {
                    // the next batch
                }
                if (level == 0) {
                    spinEnded(spinNanos, future.isDone());
                }
            } finally {
                FabricNative.nodeHelpCompletions(node.ptr, false);
            }
            // The completer thread waits inside a dependent action: nobody else delivers completions.
            while (Thread.currentThread() == thread && !future.isDone() && !closing
                    && System.nanoTime() - start < timeoutNanos) {
                drain(batch, NESTED_POLL_MS);
            }
        } catch (FabricException e) {
            LOG.log(Level.ERROR, "polling completions failed", e);
        } finally {
            batch.busy = false;
            if (counted) {
                spinners.decrementAndGet();
            }
            node.exit();
        }
    }

    /**
     * A first-level wait on a node with no listener: the thread drives the fabric's progress for its
     * spin and then sleeps on the worker's event fd in the progress thread's place
     * ({@link FabricNative#nodeAwaitProgress}: one thread at a time, one helper session for both), so
     * that the response wakes this thread, which receives it and completes the future itself: not
     * the progress thread, which would wake the completer thread, which would wake this one (on two
     * cores each of those hand-offs cost a Hadoop RPC call tens of microseconds; docs/fabric.md, "Who
     * waits on the event fd"). Returns when the future is done, the time is up, the node closes, the
     * thread is interrupted (the caller's {@code get} then throws), or another thread holds the fd
     * (the caller parks, and whoever progresses completes its future). The adaptive spin learns from
     * it as from a spin: answered within the spin, or not.
     */
    private void awaitOnFd(CompletableFuture<FabricBuffer> future, Batch batch, long start, long timeoutNanos, long spinNanos) {
        boolean parks = false;
        while (!future.isDone() && !closing && !Thread.currentThread().isInterrupted()) {
            while (drain(batch, 0) > 0) {
                // every completion queued so far, this future's among them if it came
            }
            if (future.isDone()) {
                break;
            }
            long elapsed = System.nanoTime() - start;
            if (elapsed >= timeoutNanos) {
                break;
            }
            long spinUs = TimeUnit.NANOSECONDS.toMicros(Math.max(0, spinNanos - elapsed));
            long maxUs = Math.min(TimeUnit.NANOSECONDS.toMicros(timeoutNanos - elapsed) + 1, AWAIT_SLICE_US);
            if (FabricNative.nodeAwaitProgress(node.ptr, spinUs, maxUs) < 0) {
                parks = true;
                break;
            }
        }
        while (drain(batch, 0) > 0) {
            // leave nothing queued that arrived with this future's completion
        }
        if (spinNanos > 0) {
            spinEnded(spinNanos, !parks && future.isDone() && System.nanoTime() - start <= spinNanos);
        }
    }

    /** How long a wait at {@code level} spins without a completion before it parks. */
    private long spinFor(int level) {
        if (!ADAPTIVE_SPIN || level > 0 || ++firstLevelWaits % SPIN_PROBE_EVERY == 0) {
            return HELP_SPIN_NANOS;
        }
        return spinBudgetNanos;
    }

    /** After a first-level wait's spin of {@code spunNanos}: answered while spinning, or not. */
    private void spinEnded(long spunNanos, boolean answered) {
        if (ADAPTIVE_SPIN) {
            spinBudgetNanos = answered ? HELP_SPIN_NANOS : Math.max(HELP_SPIN_MIN_NANOS, Math.min(spinBudgetNanos, spunNanos) / 2);
        }
    }

    /** The spin the next first-level wait would get (tests). */
    long spinBudgetNanos() {
        return spinBudgetNanos;
    }

    /**
     * Drives the fabric's progress for a moment on this thread, as a helper ({@code Node::help_progress}):
     * responses are received (and their completions queued) here, with no hand-off through the
     * progress thread, which backs off meanwhile.
     */
    private int driveProgress() {
        return FabricNative.nodeHelpProgress(node.ptr, HELP_PROGRESS_SPIN_US);
    }

    private void complete(long tag, Object result, long handle, long length, long pin) {
        CompletableFuture<FabricBuffer> future = pending.remove(tag);
        if (future != null) {
            permits.release();
        }
        try {
            if (result instanceof ByteBuffer view) {
                FabricBuffer buffer = FabricBuffer.adopt(node, view, handle, length, pin);
                if (future == null || !future.complete(buffer)) {
                    buffer.close(); // nobody will see it: cancelled, or failed at close
                }
            } else if (future != null) {
                future.completeExceptionally((Throwable) result);
            }
        } catch (RuntimeException | Error e) {
            LOG.log(Level.ERROR, "completing request " + tag + " failed", e);
        }
    }

    private static void pause() {
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** After the node was closed natively (which fails what is in flight): lets the thread drain, then ends it. */
    void close() {
        Thread running;
        synchronized (this) {
            closeDeadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_GRACE_MS);
            closing = true;
            running = thread;
        }
        if (running != null && running != Thread.currentThread()) { // closed from a completion callback: no self-join
            try {
                running.join(CLOSE_GRACE_MS + 2 * POLL_TIMEOUT_MS + 1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** A place among the spinning helpers, if one is free (never counts past the limit, even briefly). */
    private boolean takeSpinnerSlot() {
        for (int now = spinners.get(); now < SPINNERS_MAX; now = spinners.get()) {
            if (spinners.compareAndSet(now, now + 1)) {
                return true;
            }
        }
        return false;
    }

    /** Threads spinning as first-level helpers now (tests). */
    int spinning() {
        return spinners.get();
    }

    int awaiting() {
        return pending.size();
    }
}
