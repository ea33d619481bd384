package io.slipstream.hadoop.rpc;

import org.apache.hadoop.ipc.RPC;

/** An echo server with the fabric engine in its own process, for tests that kill it: prints "PORT n", then serves. */
public final class EchoServerMain {
    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        RPC.Server server = EchoProtocols.server(EchoProtocols.conf(), 2);
        System.out.println("PORT " + server.getListenerAddress().getPort());
        System.out.flush();
        server.join();
    }
}
