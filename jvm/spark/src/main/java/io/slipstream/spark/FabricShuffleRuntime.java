package io.slipstream.spark;

import io.slipstream.fabric.FabricConfig;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.shuffle.MapOutputCache;
import io.slipstream.shuffle.PeerDirectory;
import io.slipstream.shuffle.PeerDirectoryClient;
import io.slipstream.shuffle.RequestAuthenticator;
import io.slipstream.shuffle.ShuffleServer;
import java.net.InetSocketAddress;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkEnv;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One process's fabric side of the shuffle: on the driver, a node keeping the peer directory; on
 * an executor, a node serving this executor's map outputs (with the prefetch cache), registered in
 * the directory, and fetching from others.
 */
final class FabricShuffleRuntime implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(FabricShuffleRuntime.class);

    final SlipstreamConf conf;
    final FabricNode node;
    final RequestAuthenticator authenticator;
    final ShuffleServer server;
    final MapOutputCache cache;
    final PeerDirectory directory;
    final PeerDirectoryClient directoryClient;
    private final ThreadPoolExecutor prefetcher;
    private final SparkMapOutputSource source;
    private final IndexShuffleBlockResolver resolver;
    /** Executors: what their reduce tasks received over the fabric; null on the driver. */
    final FabricReadCounters readCounters;
    private final String executorId;

    private FabricShuffleRuntime(SlipstreamConf conf, FabricNode node, RequestAuthenticator authenticator, ShuffleServer server,
            MapOutputCache cache, PeerDirectory directory, PeerDirectoryClient directoryClient, SparkMapOutputSource source,
            IndexShuffleBlockResolver resolver, String executorId) {
        this.resolver = resolver;
        this.executorId = executorId;
        this.readCounters = executorId == null ? null : new FabricReadCounters(node);
        if (readCounters != null) {
            readCounters.register();
        }
        this.conf = conf;
        this.node = node;
        this.authenticator = authenticator;
        this.server = server;
        this.cache = cache;
        this.directory = directory;
        this.directoryClient = directoryClient;
        this.source = source;
        this.prefetcher = cache == null ? null : new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new ArrayBlockingQueue<>(1024),
                runnable -> {
                    Thread thread = new Thread(runnable, "slipstream-prefetch");
                    thread.setDaemon(true);
                    return thread;
                }, new ThreadPoolExecutor.DiscardPolicy());
    }

    /** The driver's side: a node with the peer directory, listening where the driver listens. */
    static FabricShuffleRuntime startDriver(SlipstreamConf conf, String host) throws FabricUnavailableException {
        RequestAuthenticator authenticator = authenticator(conf);
        FabricNode node = nodeConfig(conf, host).start();
        PeerDirectory directory = new PeerDirectory(FabricShuffleRuntime::executorAlive);
        ShuffleServer server = new ShuffleServer(node, null, null, directory, authenticator);
        server.start(1);
        return new FabricShuffleRuntime(conf, node, authenticator, server, null, directory, null, null, null, null);
    }

    /**
     * Driver: whether Spark's block manager master knows {@code executorId} as a running executor
     * (it forgets lost ones). The directory accepts registrations only from those, and forgets the others.
     */
    private static boolean executorAlive(String executorId) {
        SparkEnv env = SparkEnv.get();
        if (env == null || env.blockManager() == null || env.blockManager().master() == null) {
            return false;
        }
        return env.blockManager().master().getExecutorEndpointRef(executorId).isDefined();
    }

    /** An executor's side: serves its map outputs and registers with the driver's directory. */
    static FabricShuffleRuntime startExecutor(SlipstreamConf conf, String host, InetSocketAddress directoryAddress,
            String executorId, IndexShuffleBlockResolver resolver) throws FabricUnavailableException {
        RequestAuthenticator authenticator = authenticator(conf);
        FabricNode node = nodeConfig(conf, host).start();
        try {
            SparkMapOutputSource source = new SparkMapOutputSource(resolver);
            MapOutputCache cache = conf.cacheBytes > 0 ? new MapOutputCache(node, conf.cacheBytes) : null;
            ShuffleServer server = new ShuffleServer(node, source, cache, null, authenticator);
            server.start(conf.serverThreads);
            PeerDirectoryClient directoryClient = new PeerDirectoryClient(node, directoryAddress, authenticator);
            directoryClient.register(executorId, node.localAddress());
            LOG.info("slipstream: executor {} serves map outputs over the fabric at {} ({} transport)", executorId,
                    node.localAddress(), conf.transport);
            return new FabricShuffleRuntime(conf, node, authenticator, server, cache, null, directoryClient, source, resolver,
                    executorId);
        } catch (RuntimeException e) {
            node.close();
            throw e;
        }
    }

    private static FabricConfig.Builder nodeConfig(SlipstreamConf conf, String host) {
        return FabricNode.builder()
                .listen(host, 0)
                .netDevices(conf.netDevicesFor(host))
                .transport(conf.transport)
                .poolCapBytes(conf.bufferCapBytes)
                .maxMessageBytes(conf.maxMessageBytes())
                .requestTimeout(conf.requestTimeout);
    }

    /** {@code spark.authenticate}: the application's secret, asked of Spark's SecurityManager at first use. */
    private static RequestAuthenticator authenticator(SlipstreamConf conf) {
        return new RequestAuthenticator(conf.authenticate, () -> SparkEnv.get().securityManager().getSecretKey());
    }

    /** After a map task committed its output: read it into the cache, off the task's thread. */
    void prefetch(int shuffleId, long mapId) {
        if (prefetcher == null) {
            return;
        }
        prefetcher.execute(() -> {
            try {
                cache.prefetch(shuffleId, mapId, source);
            } catch (Exception e) {
                LOG.debug("slipstream: map output {}/{} not cached: {}", shuffleId, mapId, e.toString());
            }
        });
    }

    /** This executor's own blocks, read from its files. */
    IndexShuffleBlockResolver localBlocks() {
        return resolver;
    }

    void removeShuffle(int shuffleId) {
        if (cache != null) {
            cache.removeShuffle(shuffleId);
        }
    }

    @Override
    public void close() {
        if (prefetcher != null) {
            prefetcher.shutdownNow();
        }
        if (server != null && cache != null) {
            LOG.info("slipstream: served {} fetch requests, {} bytes; cache {} hits, {} misses, {} outputs cached",
                    server.fetchRequests(), server.bytesServed(), cache.hits(), cache.misses(), cache.inserted());
        }
        if (readCounters != null) {
            readCounters.unregister(executorId);
        }
        if (cache != null) {
            cache.close();
        }
        node.close();
    }
}
