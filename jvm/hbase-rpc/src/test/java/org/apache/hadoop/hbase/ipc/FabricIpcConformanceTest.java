package org.apache.hadoop.hbase.ipc;

import static org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl.SERVICE;
import static org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl.newBlockingStub;
import static org.junit.Assert.assertEquals;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.spy;
import static org.mockito.Mockito.times;
import static org.mockito.Mockito.verify;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.codec.Codec;
import org.apache.hbase.thirdparty.com.google.common.collect.Lists;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.BeforeClass;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;
import org.junit.runners.Parameterized.Parameters;

import io.slipstream.hbase.rpc.FabricRpcClient;
import io.slipstream.hbase.rpc.FabricRpcServer;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/**
 * HBase's own IPC conformance tests ({@code AbstractTestIPC} from hbase-server's test jar, as
 * {@code TestNettyIPC} runs them for Netty) against {@link FabricRpcServer} and {@link FabricRpcClient}
 * with {@code slipstream.hbase.rpc.fallback=never}: every call of these tests but the connection-level
 * ones (bad preamble, connection registry) goes over the fabric or fails. In HBase's package because
 * {@code createBadAuthRpcClient} needs its package-private {@code ConnectionId}.
 */
@RunWith(Parameterized.class)
public class FabricIpcConformanceTest extends AbstractTestIPC {

    @Parameters(name = "{index}: rpcServerImpl={0}")
    public static List<Object[]> parameters() {
        return Collections.singletonList(new Object[] {FabricRpcServer.class});
    }

    @BeforeClass
    public static void fabricOnly() {
        CONF.set("slipstream.hbase.rpc.fallback", "never");
    }

    @Override
    protected AbstractRpcClient<?> createRpcClientNoCodec(Configuration conf) {
        return new FabricRpcClient(conf) {
            @Override
            protected Codec getCodec() {
                return null;
            }
        };
    }

    @Override
    protected AbstractRpcClient<?> createRpcClient(Configuration conf) {
        return new FabricRpcClient(conf);
    }

    @Override
    protected AbstractRpcClient<?> createRpcClientRTEDuringConnectionSetup(Configuration conf) {
        return new FabricRpcClient(conf) {
            @Override
            protected boolean isTcpNoDelay() {
                throw new RuntimeException("Injected fault");
            }
        };
    }

    @Override
    protected AbstractRpcClient<?> createBadAuthRpcClient(Configuration conf) {
        // A bad preamble is the socket path's business (the fabric has none): HBase's own bad connection.
        return new FabricRpcClient(conf) {
            @Override
            protected NettyRpcConnection createConnection(ConnectionId remoteId) throws IOException {
                return new BadAuthNettyRpcConnection(this, remoteId);
            }
        };
    }

    /**
     * HBase's testRpcScheduler expects exactly 10 dispatches for 10 echo calls; a fabric client makes one
     * more call first, OpenSession on the socket path (docs/hbase-rpc.md, message 1), and HBase's server
     * dispatches it to the same scheduler as any call. The same test, counting it, and checking that the
     * 10 echoes came over the fabric.
     */
    @Override
    @Test
    public void testRpcScheduler() throws IOException, ServiceException, InterruptedException {
        Configuration clientConf = new Configuration(CONF);
        RpcScheduler scheduler = spy(new FifoRpcScheduler(CONF, 1));
        RpcServer rpcServer = RpcServerFactory.createRpcServer(null, "testRpcServer",
                Lists.newArrayList(new RpcServer.BlockingServiceAndInterface(SERVICE, null)),
                new InetSocketAddress("localhost", 0), CONF, scheduler);
        verify(scheduler).init(any(RpcScheduler.Context.class));
        try (AbstractRpcClient<?> client = createRpcClient(clientConf)) {
            rpcServer.start();
            verify(scheduler).start();
            BlockingInterface stub = newBlockingStub(client, rpcServer.getListenerAddress());
            EchoRequestProto param = EchoRequestProto.newBuilder().setMessage("hello").build();
            for (int i = 0; i < 10; i++) {
                stub.echo(null, param);
            }
            verify(scheduler, times(10 + 1)).dispatch(any(CallRunner.class));
            assertEquals(10, ((FabricRpcServer) rpcServer).fabricCallsReceived());
        } finally {
            rpcServer.stop();
            verify(scheduler).stop();
        }
    }

    /**
     * HBase's client ends a call's span after it has woken the caller (AbstractRpcClient's callback runs
     * the caller's, then {@code span.end()}), on another thread; so the span of the previous test's last
     * call can end inside the next test and fail HBase's "every span of this trace lasts at least 100 ms".
     * Reproduced with HBase's own NettyRpcClient and NettyRpcServer (testBadPreambleHeader or
     * testGetConnectionRegistry, then testTracingSuccessIpc, in a loop under load; 2026-11-29). The two
     * tracing tests start once no span has ended for {@link #QUIET_MS}; their assertions are HBase's.
     */
    @Override
    @Test
    public void testTracingSuccessIpc() throws IOException, ServiceException {
        quietSpans();
        try {
            super.testTracingSuccessIpc();
        } catch (AssertionError e) {
            throw withSpans(e);
        }
    }

    @Override
    @Test
    public void testTracingErrorIpc() throws IOException {
        quietSpans();
        try {
            super.testTracingErrorIpc();
        } catch (AssertionError e) {
            throw withSpans(e);
        }
    }

    /** HBase's assertion names no span: the failure lists every span the test saw. */
    private AssertionError withSpans(AssertionError e) {
        StringBuilder spans = new StringBuilder(e.getMessage()).append("\nspans seen:");
        for (io.opentelemetry.sdk.trace.data.SpanData span : traceRule.getSpans()) {
            spans.append("\n  ").append(span.getName()).append(' ').append(span.getKind()).append(' ')
                    .append(span.getStatus().getStatusCode()).append(" trace ").append(span.getTraceId())
                    .append(" parent ").append(span.getParentSpanId()).append(" thread ")
                    .append(span.getAttributes().get(io.opentelemetry.api.common.AttributeKey.stringKey("thread.name")))
                    .append(" start ").append(span.getStartEpochNanos()).append(" end ").append(span.getEndEpochNanos());
        }
        AssertionError described = new AssertionError(spans.toString(), e);
        described.setStackTrace(e.getStackTrace());
        return described;
    }

    /**
     * 2 s (0.2 s until session 36, then 1 s): under CI's load a span of the previous test still ended after 0.2 s
     * of quiet and failed testTracingErrorIpc ("StatusCode ERROR" expected, an OK span seen; session 36's clean run
     * of 769d639), and again after 1 s in session 38's clean run of e9d90f1 (not reproduced in 8 runs of the class
     * under two busy loops). Which span it is was not known: a failure now lists every span seen. The list, in CI's
     * clean run of a37c176 (this class's first test): {@code ConnectionImplementation.close INTERNAL OK}, started
     * after the 2 s of quiet, a connection of MiniClusterOverFabricTest's mini cluster (the class before, in the
     * same JVM) closing late; since then each test class runs in a JVM of its own (the module's pom).
     */
    private static final long QUIET_MS = 2000;

    private void quietSpans() {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
        int ended = -1;
        while (traceRule.getSpans().size() != ended) {
            ended = traceRule.getSpans().size();
            if (System.nanoTime() > deadline) {
                throw new AssertionError("spans of earlier tests still ending after 30 s: " + ended);
            }
            try {
                Thread.sleep(QUIET_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        }
        traceRule.clearSpans();
    }
}
