package io.slipstream.hbase.rpc;

import org.apache.hadoop.hbase.ipc.RpcServer;

/** A fabric echo server in its own process (for the test that kills it): prints {@code PORT <port>}, serves until killed. */
public final class EchoServerMain {
    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        RpcServer server = EchoServers.start(EchoServers.conf("never"));
        System.out.println("PORT " + server.getListenerAddress().getPort());
        System.out.flush();
        server.join();
    }
}
