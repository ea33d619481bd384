package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricException;
import io.slipstream.fabric.FabricNode;
import io.slipstream.shuffle.BlockFetchException;
import io.slipstream.shuffle.BlockFetcher;
import io.slipstream.shuffle.FetchedBlock;
import io.slipstream.shuffle.RequestAuthenticator;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.crypto.SecretKey;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.task.reduce.ExceptionReporter;
import org.apache.hadoop.mapreduce.task.reduce.Fetcher;
import org.apache.hadoop.mapreduce.task.reduce.MapHost;
import org.apache.hadoop.mapreduce.task.reduce.MapOutput;
import org.apache.hadoop.mapreduce.task.reduce.MergeManagerImpl;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleClientMetrics;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleSchedulerImpl;
import org.apache.hadoop.mapreduce.task.reduce.SlipstreamBridge;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One copier of a reduce task (there are {@code mapreduce.reduce.shuffle.parallelcopies}): takes a
 * NodeManager from Hadoop's scheduler with the map outputs known there, fetches all of them in
 * batched fabric requests (each map's 24-byte index record and its partition's bytes), and hands
 * each complete output to Hadoop's merge manager, in memory or on disk as it decides. Success and
 * failure go to the scheduler as Hadoop's own fetcher reports them, so counters, progress, and the
 * fetch-failure reports that make the ApplicationMaster re-run a lost map are Hadoop's. A
 * NodeManager whose fabric port does not answer (no plugin there, or its fabric could not start)
 * is fetched from over Hadoop's HTTP shuffle with fallback auto (one warning per NodeManager and
 * reduce task); with never it is a connection failure, reported as Hadoop does.
 */
final class FabricCopier<K, V> extends Thread {
    private static final Logger LOG = LoggerFactory.getLogger(FabricCopier.class);
    /** A guess of a partition's size before its index record arrives (the fetcher's hint only). */
    private static final long DATA_BYTES_HINT = 1 << 20;
    /** Between two asks for merge memory when the merge manager says wait. */
    private static final long RESERVE_RETRY_MS = 20;
    /** Hadoop's counter of a failed fetch, in its group {@code Shuffle Errors}. */
    private static final String IO_ERROR = "IO_ERROR";

    private final int id;
    private final FabricNode node;
    private final MapReduceConf conf;
    private final BlockFetcher.Limits limits;
    private final JobID job;
    private final int reduce;
    private final String secret;
    private final ShuffleSchedulerImpl<K, V> scheduler;
    private final MergeManagerImpl<K, V> merger;
    private final Reporter reporter;
    private final ShuffleClientMetrics metrics;
    private final ExceptionReporter exceptionReporter;
    private final JobConf jobConf;
    private final TaskAttemptID reduceId;
    private final SecretKey shuffleKey;
    /**
     * The NodeManagers ({@code host:shufflePort}, as the scheduler names them) this reduce task
     * fetches from over HTTP because nothing answered on their fabric port; shared by its copiers,
     * bounded by the job's NodeManagers (a name enters only after a failed connection to one).
     */
    private final Set<String> httpHosts;
    /** Hadoop's HTTP fetcher for the NodeManagers in {@link #httpHosts}, made at the first (never started). */
    private Thread httpFetcher;
    private volatile boolean stopped;
    /** Where this copier's time went (logged when it stops; docs/mapreduce-shuffle.md reads them). */
    private long fetchWaitNanos;
    private long reserveWaitNanos;
    private long shuffleNanos;
    private long copiedBytes;
    private long copiedMaps;
    private long requestsSent;
    private long hostPasses;
    /** In the fetcher's next(): waiting for responses, checking them (HMAC), reassembling pieces. */
    private long nextNanos;
    private final long startNanos = System.nanoTime();

    FabricCopier(int id, FabricNode node, MapReduceConf conf, BlockFetcher.Limits limits, JobConf jobConf, TaskAttemptID reduceId,
            SecretKey shuffleKey, Set<String> httpHosts, ShuffleSchedulerImpl<K, V> scheduler, MergeManagerImpl<K, V> merger,
            Reporter reporter, ShuffleClientMetrics metrics, ExceptionReporter exceptionReporter) {
        super("slipstream-copier-" + id);
        setDaemon(true);
        this.id = id;
        this.node = node;
        this.conf = conf;
        this.limits = limits;
        this.job = reduceId.getJobID();
        this.reduce = reduceId.getTaskID().getId();
        this.secret = MapBlocks.secretText(shuffleKey);
        this.jobConf = jobConf;
        this.reduceId = reduceId;
        this.shuffleKey = shuffleKey;
        this.httpHosts = httpHosts;
        this.scheduler = scheduler;
        this.merger = merger;
        this.reporter = reporter;
        this.metrics = metrics;
        this.exceptionReporter = exceptionReporter;
    }

    @Override
    public void run() {
        try {
            copyUntilStopped();
        } finally {
            LOG.info("slipstream: copier {}: {} maps, {} bytes, {} requests, {} host passes; ms alive {}, taking responses {} "
                    + "(of which waiting {}), waiting for merge memory {}, in Hadoop's shuffle (checksum, copy) {}", id, copiedMaps,
                    copiedBytes, requestsSent, hostPasses, (System.nanoTime() - startNanos) / 1_000_000, nextNanos / 1_000_000,
                    fetchWaitNanos / 1_000_000, reserveWaitNanos / 1_000_000, shuffleNanos / 1_000_000);
        }
    }

    private void copyUntilStopped() {
        while (!stopped) {
            MapHost host = null;
            try {
                host = scheduler.getHost();
                metrics.threadBusy();
                copyFromHost(host);
            } catch (InterruptedException e) {
                return;
            } catch (Throwable t) {
                if (!stopped) {
                    exceptionReporter.reportException(t);
                }
                return;
            } finally {
                if (host != null) {
                    scheduler.freeHost(host);
                    metrics.threadFree();
                }
            }
        }
    }

    void shutDown() throws InterruptedException {
        stopped = true;
        interrupt();
        join(10_000);
        if (httpFetcher != null) {
            SlipstreamBridge.closeHttpFetcher(httpFetcher);
        }
    }

    /** One pass of Hadoop's HTTP fetcher over {@code host} (a NodeManager without a reachable fabric). */
    private void copyOverHttp(MapHost host) throws IOException {
        if (httpFetcher == null) {
            httpFetcher = SlipstreamBridge.httpFetcher(jobConf, reduceId, scheduler, merger, reporter, metrics, exceptionReporter,
                    shuffleKey);
        }
        SlipstreamBridge.copyOverHttp(httpFetcher, host);
    }

    private void copyFromHost(MapHost host) throws IOException, InterruptedException {
        if (httpHosts.contains(host.getHostName())) {
            copyOverHttp(host);
            return;
        }
        List<TaskAttemptID> maps = scheduler.getMapsForHost(host);
        if (maps.isEmpty()) {
            return;
        }
        String hostAndPort = host.getHostName();
        int colon = hostAndPort.lastIndexOf(':');
        String hostName = hostAndPort.substring(0, colon);
        int shufflePort = Integer.parseInt(hostAndPort.substring(colon + 1));
        InetSocketAddress peer = new InetSocketAddress(hostName, conf.port);
        RequestAuthenticator authenticator = RequestAuthenticator.scoped(MapBlocks.scope(shufflePort, job), secret, conf.responseMac);
        List<BlockFetcher.Wanted> wanted = wanted(maps, reduce);
        Set<TaskAttemptID> remaining = new LinkedHashSet<>(maps);
        Map<TaskAttemptID, long[]> lengths = new HashMap<>();
        Map<TaskAttemptID, FetchedBlock> bytes = new HashMap<>();
        long startMillis = System.currentTimeMillis();
        BlockFetcher fetcher = new BlockFetcher(node, authenticator, limits, Map.of(peer, wanted));
        TaskAttemptID current = null;
        try {
            fetcher.start();
            while (fetcher.hasNext()) {
                long nextStart = System.nanoTime();
                FetchedBlock block = fetcher.next();
                nextNanos += System.nanoTime() - nextStart;
                TaskAttemptID map = (TaskAttemptID) block.tag();
                if (block.block().shuffleId() == MapBlocks.INDEX) {
                    lengths.put(map, indexRecord(block));
                } else {
                    bytes.put(map, block);
                }
                if (lengths.containsKey(map) && bytes.containsKey(map)) {
                    current = map;
                    copy(host, map, lengths.remove(map), bytes.remove(map), startMillis);
                    remaining.remove(map);
                    current = null;
                    startMillis = System.currentTimeMillis();
                }
            }
        } catch (BlockFetchException e) {
            Failure failure = remaining.size() == maps.size() ? failureOf(e) : Failure.READ;
            if (failure == Failure.CONNECT && conf.fallback == MapReduceConf.Fallback.AUTO) {
                // Nothing answers on this NodeManager's fabric port: its maps go back to the scheduler
                // unfailed (below) and the next pass over it is Hadoop's HTTP fetcher's.
                if (httpHosts.add(hostAndPort)) {
                    LOG.warn("slipstream: no fabric reachable at {}:{} ({}), fetching that NodeManager's map outputs over HTTP ({}=auto)",
                            hostName, conf.port, e.getMessage(), MapReduceConf.FALLBACK.key());
                    reporter.incrCounter(SlipstreamCounter.HTTP_FALLBACK_HOSTS, 1);
                }
            } else {
                reportFailure(host, failure, e, remaining);
            }
        } catch (IOException e) {
            // The bytes arrived but are not a valid map output (checksum, length): Hadoop's read error.
            LOG.warn("slipstream: map output {} from {} is unusable: {}", current, hostAndPort, e.toString());
            reporter.incrCounter(Fetcher.SHUFFLE_ERR_GRP_NAME, IO_ERROR, 1);
            scheduler.copyFailed(current != null ? current : remaining.iterator().next(), host, true, false);
            metrics.failedFetch();
        } finally {
            hostPasses++;
            requestsSent += fetcher.requestsSent();
            fetchWaitNanos += fetcher.fetchWaitNanos();
            reporter.incrCounter(SlipstreamCounter.FABRIC_REQUESTS, fetcher.requestsSent());
            bytes.values().forEach(FetchedBlock::release);
            fetcher.close();
            for (TaskAttemptID map : remaining) {
                scheduler.putBackKnownMapOutput(host, map);
            }
        }
    }

    /**
     * What to ask a NodeManager for: every map's index record first (they fill the first request
     * together, and each map's length is known before most of its bytes arrive), then the maps'
     * bytes, in the scheduler's order.
     */
    static List<BlockFetcher.Wanted> wanted(List<TaskAttemptID> maps, int reduce) {
        List<BlockFetcher.Wanted> wanted = new ArrayList<>(2 * maps.size());
        for (TaskAttemptID map : maps) {
            wanted.add(new BlockFetcher.Wanted(MapBlocks.block(MapBlocks.INDEX, map, reduce), MapBlocks.INDEX_RECORD_BYTES, map));
        }
        for (TaskAttemptID map : maps) {
            // Streamed: Hadoop's MapOutput reads it as a stream, so a map output larger than a response is
            // handed over piece by piece as it arrives, not put together first (a skewed job's 134 MiB
            // outputs cost the reducer +533 MiB of RSS that way, session 30).
            wanted.add(new BlockFetcher.Wanted(MapBlocks.block(MapBlocks.DATA, map, reduce), DATA_BYTES_HINT,
                    BlockFetcher.BLOCK_BYTES_MAX, map, true));
        }
        return wanted;
    }

    private static long[] indexRecord(FetchedBlock block) throws IOException {
        try {
            ByteBuffer record = block.data();
            if (record.remaining() != MapBlocks.INDEX_RECORD_BYTES) {
                throw new IOException("index record of " + record.remaining() + " bytes");
            }
            long start = record.getLong();
            long raw = record.getLong();
            long part = record.getLong();
            if (start < 0 || raw < 0 || part < 0) {
                throw new IOException("bad index record " + start + "/" + raw + "/" + part);
            }
            return new long[] {raw, part};
        } finally {
            block.release();
        }
    }

    private void copy(MapHost host, TaskAttemptID map, long[] lengths, FetchedBlock data, long startMillis)
            throws IOException, InterruptedException {
        long rawBytes = lengths[0];
        long partBytes = lengths[1];
        try {
            if (data.bytes() != partBytes) {
                throw new IOException(map + ": " + data.bytes() + " bytes received, its index says " + partBytes);
            }
            MapOutput<K, V> output;
            long reserveStart = System.nanoTime();
            while ((output = merger.reserve(map, rawBytes, id)) == null) {
                // Merge memory is full until a merge ends: Hadoop's fetcher backs off the same way.
                merger.waitForResource();
                Thread.sleep(RESERVE_RETRY_MS);
            }
            long shuffleStart = System.nanoTime();
            reserveWaitNanos += shuffleStart - reserveStart;
            try (InputStream in = data.stream()) {
                output.shuffle(host, in, partBytes, rawBytes, metrics, reporter);
            } catch (IOException e) {
                output.abort();
                throw e;
            } catch (BlockFetchException e) {
                // The rest of a streamed map output did not come: a failed fetch, handled by the caller.
                output.abort();
                throw e;
            } catch (InternalError | RuntimeException e) {
                // As Hadoop's Fetcher: codecs (lz4, snappy, bzip2) throw these on corrupt input, which the
                // header-only response MAC (the default) lets reach them before the IFile's CRC at its end.
                // A read error of this map, not the reduce task's failure.
                output.abort();
                throw new IOException(map + ": " + e, e);
            } finally {
                shuffleNanos += System.nanoTime() - shuffleStart;
            }
            copiedBytes += partBytes;
            copiedMaps++;
            scheduler.copySucceeded(map, host, partBytes, startMillis, System.currentTimeMillis(), output);
            metrics.successFetch();
            reporter.incrCounter(SlipstreamCounter.FABRIC_SHUFFLE_BYTES, partBytes);
            reporter.incrCounter(SlipstreamCounter.FABRIC_SHUFFLED_MAPS, 1);
        } finally {
            data.release();
        }
    }

    /**
     * A failed fetch reported as Hadoop's {@code Fetcher} reports it. The NodeManager did not answer
     * at all: its connection failed (as Hadoop's {@code ConnectException}) or timed out; Hadoop
     * counts a host failure and fails every map asked of it, reporting them to the ApplicationMaster
     * at once if the connection failed. Otherwise the NodeManager answered with an error or broke
     * off: a read error of the map it names, else of the first of the request.
     */
    private void reportFailure(MapHost host, Failure failure, BlockFetchException e, Set<TaskAttemptID> remaining) {
        LOG.warn("slipstream: fetch of {} map outputs from {} failed ({}): {}", remaining.size(), host.getHostName(), failure,
                e.getMessage());
        reporter.incrCounter(Fetcher.SHUFFLE_ERR_GRP_NAME, IO_ERROR, 1);
        if (failure == Failure.READ) {
            scheduler.copyFailed(culprit(e, remaining), host, true, false);
        } else {
            scheduler.hostFailed(host.getHostName());
            for (TaskAttemptID map : remaining) {
                scheduler.copyFailed(map, host, false, failure == Failure.CONNECT);
            }
        }
        metrics.failedFetch();
    }

    /** How a fetch from a NodeManager failed, in the terms of Hadoop's fetcher. */
    enum Failure {
        /** No connection: nothing listens there, or the host is gone. */
        CONNECT,
        /** Connected, or connecting, but no answer in time. */
        TIMEOUT,
        /** The NodeManager answered with an error, or the answer broke off. */
        READ
    }

    /**
     * The map a failure is about: the one the NodeManager's message names (a lost output), else
     * the first block of the failed request.
     */
    private static TaskAttemptID culprit(BlockFetchException e, Set<TaskAttemptID> remaining) {
        String message = String.valueOf(e.getMessage());
        for (TaskAttemptID map : remaining) {
            if (message.contains(map.toString())) {
                return map;
            }
        }
        return e.wanted() != null && e.wanted().tag() instanceof TaskAttemptID t ? t : remaining.iterator().next();
    }

    /** What a failed fetch, before anything of it arrived, says of the NodeManager. */
    static Failure failureOf(BlockFetchException e) {
        for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
            if (cause instanceof FabricException fabric) {
                return switch (fabric.kind()) {
                    case PEER_FAILED, UCX -> Failure.CONNECT;
                    case TIMEOUT -> Failure.TIMEOUT;
                    default -> Failure.READ;
                };
            }
        }
        return e.getMessage() != null && e.getMessage().startsWith("no response") ? Failure.TIMEOUT : Failure.READ;
    }
}
