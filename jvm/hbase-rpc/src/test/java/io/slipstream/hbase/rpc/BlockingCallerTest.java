package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import org.apache.hadoop.hbase.CellScanner;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.ipc.CallTimeoutException;
import org.apache.hadoop.hbase.ipc.HBaseRpcControllerImpl;
import org.apache.hadoop.hbase.security.User;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.PauseRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/**
 * A blocking call over the fabric is completed on the thread that makes it (the caller waits on its
 * route's answer and, on the client's node without a listener, takes the progress thread's place on
 * the event fd), not handed over from the fabric's completer thread; and HBase's own call timeout still
 * ends a blocking call whose answer does not come. The server runs in a JVM of its own: in one process
 * a server's idle puller holds the event fd, and a waiting caller then parks (docs/fabric.md, "Who waits
 * on the event fd").
 */
class BlockingCallerTest {
    private static Process server;
    private static FabricRpcClient client;
    private static BlockingInterface stub;

    /** Records the thread HBase completes the call on (its callback sets the controller done there). */
    private static final class RecordingController extends HBaseRpcControllerImpl {
        volatile Thread doneOn;

        @Override
        public void setDone(CellScanner cellScanner) {
            doneOn = Thread.currentThread();
            super.setDone(cellScanner);
        }
    }

    @BeforeAll
    static void start() throws Exception {
        server = EchoServers.startInOwnProcess();
        InetSocketAddress at = new InetSocketAddress("127.0.0.1", EchoServers.port(server));
        client = new FabricRpcClient(EchoServers.conf("never"));
        stub = TestProtobufRpcProto.newBlockingStub(client.createBlockingRpcChannel(
                ServerName.valueOf("127.0.0.1", at.getPort(), 0L), User.getCurrent(), 10_000));
        assertEquals("first", stub.echo(null, echo("first")).getMessage()); // the session opens (socket path)
    }

    @AfterAll
    static void stop() {
        if (client != null) {
            client.close();
        }
        if (server != null) {
            server.destroyForcibly();
        }
    }

    @Test
    void aBlockingCallIsCompletedOnTheCallersThread() throws Exception {
        long before = FabricRpcClient.fabricCalls();
        int calls = 50;
        int onCaller = 0;
        for (int i = 0; i < calls; i++) {
            RecordingController controller = new RecordingController();
            assertEquals("call " + i, stub.echo(controller, echo("call " + i)).getMessage());
            if (controller.doneOn == Thread.currentThread()) {
                onCaller++;
            }
        }
        assertEquals(before + calls, FabricRpcClient.fabricCalls(), "every call went over the fabric");
        // HBase's own wait had every one completed on the fabric's completer thread (0 of 50). Some still are
        // (about 1 in 10 here): a completion the completer thread takes while the caller is between two
        // looks at the queue.
        assertTrue(onCaller > calls / 2, onCaller + " of " + calls + " calls completed on the caller's thread");
    }

    @Test
    void hbasesCallTimeoutEndsABlockingCallOverTheFabric() throws Exception {
        HBaseRpcControllerImpl controller = new HBaseRpcControllerImpl();
        controller.setCallTimeout(100);
        long start = System.nanoTime();
        ServiceException e = assertThrows(ServiceException.class,
                () -> stub.pause(controller, PauseRequestProto.newBuilder().setMs(3000).build()));
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertInstanceOf(CallTimeoutException.class, e.getCause(), e.toString());
        assertTrue(tookMs < 2500, "the call returned after " + tookMs + " ms, not at its 100 ms timeout");
        assertEquals("after", stub.echo(null, echo("after")).getMessage());
    }

    private static EchoRequestProto echo(String message) {
        return EchoRequestProto.newBuilder().setMessage(message).build();
    }
}
