package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTesting;
import io.slipstream.hadoop.rpc.EchoProtocols.FabricEcho;
import io.slipstream.hadoop.rpc.EchoProtocols.SocketEcho;
import java.nio.ByteBuffer;
import java.security.PrivilegedExceptionAction;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeys;
import org.apache.hadoop.ipc.Client;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.ipc.RpcServerException;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Hadoop's echo protocol against one real Hadoop RPC server, with fabric and socket clients at once. */
class EchoOverFabricTest {
    /** ipc.maximum.data.length of the server here, small so the test reaches it. */
    private static final int MAX_DATA_LENGTH = 256 << 10;

    private static Configuration conf;
    private static RPC.Server server;
    private static FabricEcho fabric;
    private static SocketEcho socket;

    @BeforeAll
    static void start() throws Exception {
        conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        conf.setInt(CommonConfigurationKeys.IPC_MAXIMUM_DATA_LENGTH, MAX_DATA_LENGTH);
        server = EchoProtocols.server(conf, 4);
        assertInstanceOf(FabricRpcServer.class, server);
        fabric = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
        socket = EchoProtocols.client(SocketEcho.class, server.getListenerAddress(), conf);
    }

    @AfterAll
    static void stop() {
        RPC.stopProxy(fabric);
        RPC.stopProxy(socket);
        server.stop();
    }

    private static FabricRpcServer fabricServer() {
        return (FabricRpcServer) server;
    }

    @Test
    void echoesOverTheFabricAndOverSocketsOnOneServer() throws Exception {
        long sentBefore = FabricRpcEngine.fabricCalls();
        long receivedBefore = fabricServer().fabricCallsReceived();
        int[] sizes = {1, 100, 4096, 65536};
        for (int size : sizes) {
            String message = "m".repeat(size);
            assertEquals(message, fabric.echo(null, EchoProtocols.echo(message)).getMessage());
            assertEquals(message, socket.echo(null, EchoProtocols.echo(message)).getMessage());
        }
        assertEquals(sizes.length, FabricRpcEngine.fabricCalls() - sentBefore);
        assertEquals(sizes.length, fabricServer().fabricCallsReceived() - receivedBefore);
    }

    @Test
    void serverErrorsAreTheRemoteExceptionsSocketClientsGet() {
        for (boolean application : new boolean[] {false, true}) {
            RemoteException overFabric = remote(assertThrows(ServiceException.class,
                    () -> call(fabric, application)));
            RemoteException overSocket = remote(assertThrows(ServiceException.class,
                    () -> call(socket, application)));
            assertEquals(overSocket.getClassName(), overFabric.getClassName());
            assertEquals(overSocket.getErrorCode(), overFabric.getErrorCode());
            assertEquals(application ? "java.io.IOException" : RpcServerException.class.getName(), overFabric.getClassName());
            assertTrue(overFabric.getMessage().contains("error from the echo server"), overFabric.getMessage());
        }
    }

    private static void call(org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface proxy,
            boolean application) throws ServiceException {
        if (application) {
            proxy.error2(null, EchoProtocols.EMPTY);
        } else {
            proxy.error(null, EchoProtocols.EMPTY);
        }
    }

    private static RemoteException remote(ServiceException e) {
        return assertInstanceOf(RemoteException.class, e.getCause());
    }

    @Test
    void callsRunAsTheCallingUser() throws Exception {
        UserGroupInformation alice = UserGroupInformation.createRemoteUser("alice");
        String seen = alice.doAs((PrivilegedExceptionAction<String>) () -> {
            FabricEcho proxy = EchoProtocols.client(FabricEcho.class, server.getListenerAddress(), conf);
            try {
                return proxy.getServerRemoteUser(null, EchoProtocols.EMPTY).getUser();
            } finally {
                RPC.stopProxy(proxy);
            }
        });
        assertEquals("alice", seen);
        assertEquals(UserGroupInformation.getCurrentUser().getUserName(),
                fabric.getServerRemoteUser(null, EchoProtocols.EMPTY).getUser());
    }

    @Test
    void callIdRetryCountAndClientIdReachTheServer() throws Exception {
        Client.setCallIdAndRetryCount(424242, 3, null);
        String[] seen = fabric.getCurrentUser(null, EchoProtocols.EMPTY).getUser().split(" ");
        assertEquals("424242", seen[0]);
        assertEquals("3", seen[1]);
        assertEquals(32, seen[2].length(), "a 16-byte client id");
        assertNotEquals("0".repeat(32), seen[2]);
        assertEquals("fabric", seen[3]);
        // The next call has a fresh id and no retries, from the same client id.
        String[] next = fabric.getCurrentUser(null, EchoProtocols.EMPTY).getUser().split(" ");
        assertNotEquals("424242", next[0]);
        assertEquals("0", next[1]);
        assertEquals(seen[2], next[2]);
    }

    @Test
    void callsOverTheMaximumDataLengthGetHadoopsErrorAndTheSessionGoesOn() throws Exception {
        String fits = "f".repeat(MAX_DATA_LENGTH - 200);
        assertEquals(fits, fabric.echo(null, EchoProtocols.echo(fits)).getMessage());
        long refusedBefore = fabricServer().fabricFramesRefused();
        RemoteException e = remote(assertThrows(ServiceException.class,
                () -> fabric.echo(null, EchoProtocols.echo("x".repeat(MAX_DATA_LENGTH)))));
        assertTrue(e.getMessage().contains("is longer than maximum configured RPC length " + MAX_DATA_LENGTH), e.getMessage());
        assertEquals(1, fabricServer().fabricFramesRefused() - refusedBefore);
        assertEquals("after", fabric.echo(null, EchoProtocols.echo("after")).getMessage());
    }

    @Test
    void malformedFramesCloseTheirSessionAndTheServerKeepsServing() throws Exception {
        SessionOffer session = TestFrames.open(UserGroupInformation.getCurrentUser(), conf, server.getListenerAddress(),
                FabricEcho.class);
        long refusedBefore = fabricServer().fabricFramesRefused();
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(session.host(), session.port());
            byte[] garbage = new byte[64];
            Arrays.fill(garbage, (byte) 0xff);
            // Authentic (signed with the session's key) but not a call: the session is closed, the refusal signed.
            TestFrames.assertRefusedSigned(endpoint, TestFrames.frame(session, 0, garbage), session, Frames.MALFORMED);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.frame(session, 1, garbage), Frames.UNKNOWN_SESSION);
            assertRefused(endpoint, 7, TestFrames.frame(session, 2, garbage), Frames.MALFORMED);
            // A frame of no session closes its fabric connection; the next goes on a new one.
            FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            assertRefused(endpoint, Frames.OP_CALL, new byte[3], Frames.MALFORMED);
            FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            // Version 1's frame (no sequence number, no MAC) is refused as any unknown version.
            ByteBuffer v1 = ByteBuffer.allocate(9 + 64);
            v1.put((byte) 1).putLong(session.sessionId()).put(garbage);
            assertRefused(endpoint, Frames.OP_CALL, v1.array(), "version 1");
            FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            // Versions 2, 3 and 4 (answers, then refusals, not signed; MACs always over the whole body), even sealed
            // with a key, are refused as unknown, saying which version this server takes.
            for (byte version : new byte[] {2, 3, 4}) {
                byte[] older = TestFrames.frame(session, 3, garbage);
                session.auth().seal(older, version, session.sessionId(), 3);
                assertRefused(endpoint, Frames.OP_CALL, older, "version " + version + " (this server takes version "
                        + Frames.FRAME_VERSION + ")");
                FabricTesting.awaitConnectionsOpen(raw, 0, "the server closed the connection");
            }
        }
        assertEquals(8, fabricServer().fabricFramesRefused() - refusedBefore);
        long sent = FabricRpcEngine.fabricCalls();
        assertEquals("still serving", fabric.echo(null, EchoProtocols.echo("still serving")).getMessage());
        assertEquals(1, FabricRpcEngine.fabricCalls() - sent);
    }

    private static void assertRefused(FabricEndpoint endpoint, int op, byte[] frame, String why) {
        TestFrames.assertRefused(endpoint, op, frame, why);
    }
}
