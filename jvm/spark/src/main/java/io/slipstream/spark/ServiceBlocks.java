package io.slipstream.spark;

import io.slipstream.shuffle.BlockFetcher;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.storage.BlockManagerId;

/**
 * Blocks of executors that are gone, fetched from the external shuffle service of their host with
 * Spark's own client ({@code BlockManager.blockStoreClient}, Spark's {@code ExternalBlockStoreClient}
 * when {@code spark.shuffle.service.enabled}): the service serves the files the executor registered
 * with it when it started, so its map outputs outlive it, as with Spark's own reader.
 *
 * <p>Requests go one executor at a time, each asking for at most {@code maxBytesInFlight} (by the map
 * statuses' sizes; one block always goes), and the next request only when the bytes of the previous
 * were handed out: the bytes held stay within one window. Single-threaded like the reader, except
 * for the client's callbacks, which only queue.
 */
final class ServiceBlocks implements AutoCloseable {
    /** One block as the service sent it; {@code buffer} is retained until {@link #release}d. */
    record Fetched(BlockFetcher.Wanted wanted, ManagedBuffer buffer) {}

    /** What the reader needs to know of a wanted block: where the service is and the block's name. */
    interface Addressing {
        BlockManagerId serviceOf(BlockFetcher.Wanted wanted);

        String blockName(BlockFetcher.Wanted wanted);
    }

    /** A failed fetch, naming the block that failed. */
    static final class ServiceFetchException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final transient BlockFetcher.Wanted wanted;

        ServiceFetchException(BlockFetcher.Wanted wanted, String message, Throwable cause) {
            super(message, cause);
            this.wanted = wanted;
        }
    }

    private record Outcome(BlockFetcher.Wanted wanted, ManagedBuffer buffer, Throwable error) {}

    private final BlockStoreClient client;
    private final Addressing addressing;
    private final long maxBytesInFlight;
    private final Duration responseTimeout;
    private final ArrayDeque<BlockFetcher.Wanted> waiting = new ArrayDeque<>();
    private final LinkedBlockingQueue<Outcome> outcomes = new LinkedBlockingQueue<>();
    private final List<ManagedBuffer> held = new ArrayList<>();
    private final Object closeLock = new Object();
    private boolean closed;
    /** Blocks of the request on the wire not yet handed out. */
    private int outstanding;
    private long fetchWaitNanos;

    ServiceBlocks(BlockStoreClient client, Addressing addressing, long maxBytesInFlight, Duration responseTimeout) {
        this.client = client;
        this.addressing = addressing;
        this.maxBytesInFlight = maxBytesInFlight;
        this.responseTimeout = responseTimeout;
    }

    void add(BlockFetcher.Wanted wanted) {
        waiting.add(wanted);
    }

    boolean hasNext() {
        return !waiting.isEmpty() || outstanding > 0;
    }

    long fetchWaitNanos() {
        return fetchWaitNanos;
    }

    /** Sends the first request (call early: the caller reads other blocks meanwhile). */
    void start() {
        if (outstanding == 0 && !waiting.isEmpty()) {
            send();
        }
    }

    /** The next block, waiting for it; a failure of the service is a {@link ServiceFetchException}. */
    Fetched next() {
        start();
        if (outstanding == 0) {
            throw new java.util.NoSuchElementException();
        }
        Outcome outcome;
        long waitStart = System.nanoTime();
        try {
            outcome = outcomes.poll(responseTimeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ServiceFetchException(null, "interrupted while waiting for the external shuffle service", e);
        } finally {
            fetchWaitNanos += System.nanoTime() - waitStart;
        }
        if (outcome == null) {
            throw new ServiceFetchException(null, "no answer from the external shuffle service within "
                    + responseTimeout.toMillis() + " ms", null);
        }
        outstanding--;
        if (outcome.error() != null) {
            throw new ServiceFetchException(outcome.wanted(), "the external shuffle service could not serve "
                    + addressing.blockName(outcome.wanted()) + ": " + outcome.error(), outcome.error());
        }
        ManagedBuffer buffer = outcome.buffer();
        if (buffer.size() > outcome.wanted().maxBytes()) {
            buffer.release();
            throw new ServiceFetchException(outcome.wanted(), "the external shuffle service sent " + buffer.size() + " bytes for "
                    + addressing.blockName(outcome.wanted()) + ", more than its map status allows (" + outcome.wanted().maxBytes()
                    + ")", null);
        }
        if (buffer.size() > 0 && CORRUPTIONS_LEFT.getAndUpdate(left -> Math.max(0, left - 1)) > 0) {
            buffer = corruptedCopy(buffer, addressing.blockName(outcome.wanted()));
        }
        held.add(buffer);
        return new Fetched(outcome.wanted(), buffer);
    }

    /**
     * Test seam: with the system property {@value #CORRUPT_PROPERTY}{@code =COUNT}, the first COUNT
     * blocks this process receives from a service get their middle byte flipped, as a damaged network
     * would. For tests of the reader's corruption handling only.
     */
    static final String CORRUPT_PROPERTY = "slipstream.test.corruptServiceBlocks";
    private static final java.util.concurrent.atomic.AtomicInteger CORRUPTIONS_LEFT =
            new java.util.concurrent.atomic.AtomicInteger(Integer.getInteger(CORRUPT_PROPERTY, 0));

    private static ManagedBuffer corruptedCopy(ManagedBuffer buffer, String blockName) {
        java.nio.ByteBuffer copy;
        try {
            java.nio.ByteBuffer bytes = buffer.nioByteBuffer();
            copy = java.nio.ByteBuffer.allocate(bytes.remaining()).put(bytes.duplicate()).flip();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } finally {
            buffer.release();
        }
        int at = copy.limit() / 2;
        copy.put(at, (byte) ~copy.get(at));
        org.slf4j.LoggerFactory.getLogger(ServiceBlocks.class).warn("slipstream: TEST SETTING {}: flipped byte {} of {} from the service",
                CORRUPT_PROPERTY, at, blockName);
        return new org.apache.spark.network.buffer.NioManagedBuffer(copy);
    }

    /** Gives a block's bytes back (after its records were read). */
    void release(Fetched block) {
        if (held.remove(block.buffer())) {
            block.buffer().release();
        }
    }

    /** One request: blocks of the first waiting block's executor, within the window (at least one). */
    private void send() {
        BlockManagerId service = addressing.serviceOf(waiting.peek());
        List<BlockFetcher.Wanted> batch = new ArrayList<>();
        long bytes = 0;
        for (var it = waiting.iterator(); it.hasNext(); ) {
            BlockFetcher.Wanted wanted = it.next();
            if (!addressing.serviceOf(wanted).equals(service)) {
                continue;
            }
            if (!batch.isEmpty() && bytes + wanted.expectedBytes() > maxBytesInFlight) {
                break;
            }
            batch.add(wanted);
            bytes += wanted.expectedBytes();
            it.remove();
        }
        // Concurrent: the client calls back from its threads (a retry from another than the first answer).
        java.util.Map<String, BlockFetcher.Wanted> byName = new java.util.concurrent.ConcurrentHashMap<>();
        String[] names = new String[batch.size()];
        for (int i = 0; i < names.length; i++) {
            names[i] = addressing.blockName(batch.get(i));
            byName.put(names[i], batch.get(i));
        }
        outstanding += names.length;
        BlockFetchingListener listener = new BlockFetchingListener() {
            @Override
            public void onBlockFetchSuccess(String blockId, ManagedBuffer data) {
                BlockFetcher.Wanted wanted = byName.remove(blockId);
                if (wanted == null) {
                    return; // not asked for, or answered twice: not ours to hold
                }
                synchronized (closeLock) {
                    if (closed) {
                        return;
                    }
                    // The client releases its reference when this returns.
                    data.retain();
                    outcomes.add(new Outcome(wanted, data, null));
                }
            }

            @Override
            public void onBlockFetchFailure(String blockId, Throwable exception) {
                BlockFetcher.Wanted wanted = byName.remove(blockId);
                if (wanted != null) {
                    outcomes.add(new Outcome(wanted, null, exception));
                }
            }
        };
        try {
            client.fetchBlocks(service.host(), service.port(), service.executorId(), names, listener, null);
        } catch (RuntimeException e) {
            for (String name : names) {
                listener.onBlockFetchFailure(name, e);
            }
        }
    }

    /** Releases every buffer held or still arriving. */
    @Override
    public void close() {
        synchronized (closeLock) {
            if (closed) {
                return;
            }
            closed = true;
        }
        for (ManagedBuffer buffer : held) {
            buffer.release();
        }
        held.clear();
        Outcome outcome;
        while ((outcome = outcomes.poll()) != null) {
            if (outcome.buffer() != null) {
                outcome.buffer().release();
            }
        }
    }
}
