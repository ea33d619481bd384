package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import io.slipstream.hadoop.rpc.EchoProtocols.SocketEcho;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.TestProtos.SleepRequestProto;
import org.junit.jupiter.api.Test;

/**
 * {@link FabricCallQueue} as a real Hadoop server's call queue: its idle handlers pull the fabric's calls
 * (no receiver threads), socket calls of the same server still reach a handler at once, fabric calls run
 * on as many handlers as they need, and the queue can be swapped by Hadoop's {@code refreshCallQueue}.
 */
class HandlerPullTest {
    private static final long WAIT_MS = 20_000;

    private static Configuration conf(int pullers, long pullMs) {
        Configuration conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        conf.set("ipc.callqueue.impl", FabricCallQueue.class.getName());
        conf.setInt(RpcConf.HANDLER_PULLERS, pullers);
        conf.setLong(RpcConf.HANDLER_PULL_MS, pullMs);
        return conf;
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + WAIT_MS + " ms: " + what);
            }
            Thread.sleep(5);
        }
    }

    @Test
    void idleHandlersPullTheFabricsCallsAndRunThem() throws Exception {
        Configuration conf = conf(2, 100);
        FabricRpcServer server = (FabricRpcServer) EchoProtocols.server(conf, 4);
        FabricEcho fabric = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
        SocketEcho socket = EchoProtocols.client(SocketEcho.class, server.getListenerAddress(), conf);
        try {
            await("two idle handlers pulling", () -> server.handlersPulling() == 2);
            assertFalse(server.receiverThreadsStarted(), "no receiver threads");
            long before = server.fabricCallsReceived();
            for (int i = 0; i < 50; i++) {
                assertEquals("m" + i, fabric.echo(null, EchoProtocols.echo("m" + i)).getMessage());
                assertTrue(EchoProtocols.Impl.ECHO_THREAD.get().startsWith("IPC Server handler"),
                        "run by Hadoop's handler: " + EchoProtocols.Impl.ECHO_THREAD.get());
                assertEquals("s" + i, socket.echo(null, EchoProtocols.echo("s" + i)).getMessage());
            }
            assertEquals(50, server.fabricCallsReceived() - before);
            assertEquals(0, server.getCallQueueLen());
        } finally {
            RPC.stopProxy(fabric);
            RPC.stopProxy(socket);
            server.stop();
        }
    }

    /** Every handler pulls (none parked) and a pull lasts a minute: only the interrupt serves the socket call soon. */
    @Test
    void aSocketCallInterruptsAHandlerPullingTheFabric() throws Exception {
        Configuration conf = conf(2, 60_000);
        FabricRpcServer server = (FabricRpcServer) EchoProtocols.server(conf, 2);
        FabricEcho fabric = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
        SocketEcho socket = EchoProtocols.client(SocketEcho.class, server.getListenerAddress(), conf);
        try {
            fabric.echo(null, EchoProtocols.echo("warm"));
            for (int i = 0; i < 5; i++) {
                await("both handlers pulling", () -> server.handlersPulling() == 2);
                Thread.sleep(200); // past their spin: asleep in the fabric
                long start = System.nanoTime();
                assertEquals("s" + i, socket.echo(null, EchoProtocols.echo("s" + i)).getMessage());
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(ms < WAIT_MS, "the socket call waited " + ms + " ms (a pull lasts 60 s)");
                assertEquals("f" + i, fabric.echo(null, EchoProtocols.echo("f" + i)).getMessage());
            }
        } finally {
            RPC.stopProxy(fabric);
            RPC.stopProxy(socket);
            long start = System.nanoTime();
            server.stop();
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30), "stop does not wait out a pull");
        }
    }

    /** One puller, four handlers: four slow fabric calls still run at once (a puller that leaves wakes another). */
    @Test
    void fabricCallsRunOnMoreHandlersThanPull() throws Exception {
        Configuration conf = conf(1, 100);
        FabricRpcServer server = (FabricRpcServer) EchoProtocols.server(conf, 4);
        FabricEcho fabric = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
        ExecutorService callers = Executors.newFixedThreadPool(4);
        try {
            fabric.echo(null, EchoProtocols.echo("warm"));
            int sleepingBefore = EchoProtocols.Impl.SLEEPING.get();
            List<Future<?>> calls = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                calls.add(callers.submit(() -> fabric.sleep(null, SleepRequestProto.newBuilder().setMilliSeconds(8000).build())));
            }
            await("four fabric calls running at once", () -> EchoProtocols.Impl.SLEEPING.get() - sleepingBefore == 4);
            for (Future<?> call : calls) {
                call.get(60, TimeUnit.SECONDS);
            }
        } finally {
            callers.shutdownNow();
            RPC.stopProxy(fabric);
            server.stop();
        }
    }

    @Test
    void refreshingTheCallQueueKeepsTheFabricServed() throws Exception {
        Configuration conf = conf(2, 100);
        FabricRpcServer server = (FabricRpcServer) EchoProtocols.server(conf, 3);
        FabricEcho fabric = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
        try {
            assertEquals("a", fabric.echo(null, EchoProtocols.echo("a")).getMessage());
            Configuration plain = new Configuration(conf);
            plain.set("ipc.callqueue.impl", java.util.concurrent.LinkedBlockingQueue.class.getName());
            server.refreshCallQueue(plain);
            assertEquals(-1, server.handlersPulling());
            assertTrue(server.receiverThreadsStarted(), "receiver threads pull for Hadoop's own queue");
            for (int i = 0; i < 20; i++) {
                assertEquals("b" + i, fabric.echo(null, EchoProtocols.echo("b" + i)).getMessage());
            }
            server.refreshCallQueue(conf);
            await("handlers of the new queue pulling", () -> server.handlersPulling() > 0);
            for (int i = 0; i < 20; i++) {
                assertEquals("c" + i, fabric.echo(null, EchoProtocols.echo("c" + i)).getMessage());
            }
        } finally {
            RPC.stopProxy(fabric);
            server.stop();
        }
    }
}
