package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.shuffle.RequestAuthenticator;
import io.slipstream.shuffle.ShuffleServer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The NodeManager side's one fabric node per process, shared by every {@link SlipstreamShuffleHandler}
 * of the process (one on a real NodeManager; several in a mini cluster, where NodeManagers share a
 * JVM) and counted: the first handler to start opens it, the last to stop closes it. A request's
 * scope names the NodeManager (its HTTP shuffle port) and the job; the handler of that port
 * answers it from that job's files under that job's secret.
 */
final class NodeFabric {
    private static final Logger LOG = LoggerFactory.getLogger(NodeFabric.class);
    private static final Object LOCK = new Object();
    private static NodeFabric shared;

    final FabricNode node;
    final ShuffleServer server;
    private final Map<Integer, SlipstreamShuffleHandler> handlers = new ConcurrentHashMap<>();
    private final Map<SlipstreamShuffleHandler, Integer> ports = new HashMap<>();

    private NodeFabric(MapReduceConf conf) throws FabricUnavailableException {
        node = conf.nodeBuilder().listen(conf.bindAddress, conf.port).start();
        server = new ShuffleServer(node, this::resolve);
        server.start(conf.serverThreads);
        LOG.info("slipstream: NodeManager map outputs served over the fabric at {} ({} transport)", node.localAddress(), conf.transport);
    }

    /** Registers {@code handler} (serving HTTP shuffle on {@code shufflePort}), opening the node if it is the first. */
    static NodeFabric acquire(MapReduceConf conf, int shufflePort, SlipstreamShuffleHandler handler) throws FabricUnavailableException {
        synchronized (LOCK) {
            if (shared == null) {
                shared = new NodeFabric(conf);
            } else if (shared.node.localAddress().getPort() != conf.port) {
                LOG.warn("slipstream: this process's fabric node listens on {}; {}={} of a later NodeManager ignored",
                        shared.node.localAddress(), MapReduceConf.PORT.key(), conf.port);
            }
            if (shared.handlers.putIfAbsent(shufflePort, handler) != null) {
                throw new IllegalStateException("two NodeManagers of this process on shuffle port " + shufflePort);
            }
            shared.ports.put(handler, shufflePort);
            return shared;
        }
    }

    /** Unregisters {@code handler}; closes the node after the last one. */
    void release(SlipstreamShuffleHandler handler) {
        synchronized (LOCK) {
            Integer port = ports.remove(handler);
            if (port != null) {
                handlers.remove(port);
            }
            if (ports.isEmpty() && shared == this) {
                LOG.info("slipstream: served {} fetch requests, {} bytes, refused {}", server.fetchRequests(), server.bytesServed(),
                        server.refusedRequests());
                shared = null;
                node.close();
            }
        }
    }

    private ShuffleServer.Scope resolve(String scope) {
        int port;
        try {
            port = MapBlocks.scopePort(scope);
        } catch (IllegalArgumentException e) {
            throw new RequestAuthenticator.AuthenticationException("malformed scope");
        }
        SlipstreamShuffleHandler handler = handlers.get(port);
        if (handler == null) {
            throw new RequestAuthenticator.AuthenticationException("no NodeManager of shuffle port " + port + " here");
        }
        return handler.scope(scope);
    }
}
