package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricTesting;
import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeys;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.protobuf.TestProtos.SleepRequestProto;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

/** A server process killed while a fabric call waits: the call fails with an IOException within the RPC timeout. */
class ServerKilledTest {
    private static final int RPC_TIMEOUT_MS = 20_000;

    @Test
    void aCallPendingOnAKilledServerFailsWithinTheRpcTimeout() throws Exception {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        Process server = new ProcessBuilder(java, "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                EchoServerMain.class.getName()).redirectErrorStream(true).start();
        ExecutorService caller = Executors.newSingleThreadExecutor();
        try {
            int port = FabricTesting.childPort(server);
            Configuration conf = EchoProtocols.conf();
            conf.set(RpcConf.FALLBACK, "never");
            conf.setInt(CommonConfigurationKeys.IPC_CLIENT_RPC_TIMEOUT_KEY, RPC_TIMEOUT_MS);
            FabricEcho proxy = RPC.getProxy(FabricEcho.class, 1, new InetSocketAddress("127.0.0.1", port), conf);
            try {
                assertEquals("alive", proxy.echo(null, EchoProtocols.echo("alive")).getMessage());
                long sent = FabricRpcEngine.fabricCalls();
                Future<?> pending = caller.submit(() -> proxy.sleep(null, SleepRequestProto.newBuilder().setMilliSeconds(120_000).build()));
                Thread.sleep(1000);
                server.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                long killedNanos = System.nanoTime();
                ExecutionException e = assertThrows(ExecutionException.class, () -> pending.get(RPC_TIMEOUT_MS + 10_000, TimeUnit.MILLISECONDS));
                long failedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedNanos);
                ServiceException se = assertInstanceOf(ServiceException.class, e.getCause());
                assertInstanceOf(IOException.class, se.getCause(), "the usual exception: " + se.getCause());
                assertTrue(failedAfterMs <= RPC_TIMEOUT_MS + 5_000, "failed " + failedAfterMs + " ms after the kill");
                assertEquals(sent, FabricRpcEngine.fabricCalls(), "the pending call did not complete");
            } finally {
                RPC.stopProxy(proxy);
            }
        } finally {
            caller.shutdownNow();
            server.destroyForcibly();
        }
    }
}
