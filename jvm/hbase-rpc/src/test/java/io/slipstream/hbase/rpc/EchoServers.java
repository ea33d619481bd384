package io.slipstream.hbase.rpc;

import io.slipstream.fabric.FabricTesting;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.ipc.FifoRpcScheduler;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.RpcServerFactory;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;

/** HBase's own test service (echo, error, pause: TestProtobufRpcServiceImpl) on a server of the configured impl. */
final class EchoServers {
    private EchoServers() {
    }

    /** A client and server configuration: the fabric impls, {@code fallback} as given. */
    static Configuration conf(String fallback) {
        Configuration conf = HBaseConfiguration.create();
        conf.set("hbase.rpc.server.impl", FabricRpcServer.class.getName());
        conf.set("hbase.rpc.client.impl", FabricRpcClient.class.getName());
        conf.set(HBaseRpcConf.FALLBACK, fallback);
        return conf;
    }

    /** Started, on 127.0.0.1 and a free port. */
    static RpcServer start(Configuration conf) throws IOException {
        return start(conf, TestProtobufRpcServiceImpl.SERVICE, null);
    }

    /**
     * {@code service} (one of HBase's test service's) started, on 127.0.0.1 and a free port; its interface
     * (or null) is what service-level authorization names it by.
     */
    static RpcServer start(Configuration conf, BlockingService service, Class<?> serviceInterface) throws IOException {
        RpcServer server = RpcServerFactory.createRpcServer(null, "echo",
                List.of(new RpcServer.BlockingServiceAndInterface(service, serviceInterface)),
                new InetSocketAddress("127.0.0.1", 0), conf, new FifoRpcScheduler(conf, 2));
        try {
            server.start();
        } catch (RuntimeException e) {
            server.stop();
            throw e;
        }
        return server;
    }

    /** {@link EchoServerMain} in a JVM of its own (its port: {@link #port}); the caller destroys it. */
    static Process startInOwnProcess() throws IOException {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        return new ProcessBuilder(java, "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                EchoServerMain.class.getName()).redirectErrorStream(true).start();
    }

    /** The port {@code server} (started by {@link #startInOwnProcess}) printed. */
    static int port(Process server) throws IOException {
        return FabricTesting.childPort(server);
    }

    /** A fabric echo server (fallback never) and a fabric client of it, closed together. */
    static final class Running implements AutoCloseable {
        final FabricRpcServer server;
        final FabricRpcClient client;
        /** Where the server's socket listens (its fabric address is learned through the discovery). */
        final InetSocketAddress at;

        private Running(FabricRpcServer server, FabricRpcClient client) {
            this.server = server;
            this.client = client;
            this.at = server.getListenerAddress();
        }

        static Running start() throws IOException {
            Configuration conf = conf("never");
            RpcServer server = EchoServers.start(conf);
            try {
                return new Running((FabricRpcServer) server, new FabricRpcClient(conf));
            } catch (RuntimeException e) {
                server.stop();
                throw e;
            }
        }

        @Override
        public void close() {
            try {
                client.close();
            } finally {
                server.stop();
            }
        }
    }
}
