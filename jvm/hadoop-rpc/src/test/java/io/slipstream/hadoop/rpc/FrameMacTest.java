package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.FabricTesting;
import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What a session's MACs cover ({@code slipstream.rpc.frameMac}): by default the frame's session, sequence
 * number and length, not its bytes (what an authenticated socket connection proves when SASL wraps nothing);
 * {@code full} when the client or the server asks for it. Agreed when the session opens, never lowered.
 */
class FrameMacTest {
    private static Configuration conf;
    private static RPC.Server server;

    @BeforeAll
    static void start() throws Exception {
        conf = EchoProtocols.conf();
        conf.set(RpcConf.FALLBACK, "never");
        server = EchoProtocols.server(conf, 2);
    }

    @AfterAll
    static void stop() {
        server.stop();
    }

    /**
     * A header session: a body altered after sealing, keeping its length, is taken (as a socket connection's
     * would be); a changed length, sequence number or session is not.
     */
    @Test
    void aDefaultSessionsMacsBindTheLengthNotTheBytes() throws Exception {
        SessionOffer session = TestFrames.open(UserGroupInformation.getCurrentUser(), conf, server.getListenerAddress(),
                EchoProtocols.FabricEcho.class, FrameAuth.Coverage.HEADER);
        assertEquals(FrameAuth.Coverage.HEADER, session.auth().coverage());
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(session.host(), session.port());
            byte[] frame = TestFrames.frame(session, 0, TestFrames.echoBody(EchoProtocols.NAME, "abc", 1));
            int at = FabricTesting.lastIndexOf(frame, "abc".getBytes(StandardCharsets.US_ASCII));
            byte[] altered = frame.clone();
            altered[at] = 'x';
            assertEquals("xbc", TestFrames.echoed(endpoint, session, altered));

            byte[] longer = TestFrames.frame(session, 1, TestFrames.echoBody(EchoProtocols.NAME, "abc", 2));
            longer = java.util.Arrays.copyOf(longer, longer.length + 1);
            TestFrames.assertRefusedUnsigned(endpoint, longer, Frames.NOT_AUTHENTIC);
            byte[] resequenced = TestFrames.withLong(TestFrames.frame(session, 2,
                    TestFrames.echoBody(EchoProtocols.NAME, "abc", 3)), Frames.SEQUENCE_OFFSET, 5);
            TestFrames.assertRefusedUnsigned(endpoint, resequenced, Frames.NOT_AUTHENTIC);
            assertEquals("still serving", TestFrames.echoed(endpoint, session,
                    TestFrames.frame(session, 3, TestFrames.echoBody(EchoProtocols.NAME, "still serving", 4))));
        }
    }

    /** A client asking for full MACs gets them from a server whose own setting is header. */
    @Test
    void aClientAskingForFullMacsGetsThem() throws Exception {
        SessionOffer session = TestFrames.open(UserGroupInformation.getCurrentUser(), conf, server.getListenerAddress(),
                EchoProtocols.FabricEcho.class, FrameAuth.Coverage.FULL);
        assertEquals(FrameAuth.Coverage.FULL, session.auth().coverage());
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(session.host(), session.port());
            byte[] frame = TestFrames.frame(session, 0, TestFrames.echoBody(EchoProtocols.NAME, "abc", 1));
            byte[] altered = frame.clone();
            altered[FabricTesting.lastIndexOf(frame, "abc".getBytes(StandardCharsets.US_ASCII))] = 'x';
            TestFrames.assertRefusedUnsigned(endpoint, altered, Frames.NOT_AUTHENTIC);
        }
    }

    /** A server set to full gives full MACs to a client that asks for header; the engine's calls work both ways. */
    @Test
    void aServerSetToFullGivesFullMacsAndCallsWorkOnBoth() throws Exception {
        Configuration fullConf = new Configuration(conf);
        fullConf.set(RpcConf.FRAME_MAC, "full");
        RPC.Server full = EchoProtocols.server(fullConf, 1);
        try {
            SessionOffer session = TestFrames.open(UserGroupInformation.getCurrentUser(), conf, full.getListenerAddress(),
                    EchoProtocols.FabricEcho.class, FrameAuth.Coverage.HEADER);
            assertEquals(FrameAuth.Coverage.FULL, session.auth().coverage());
            for (InetSocketAddress address : new InetSocketAddress[] {server.getListenerAddress(), full.getListenerAddress()}) {
                long before = FabricRpcEngine.fabricCalls();
                String big = "y".repeat(70_000);
                assertEquals(big, EchoProtocols.echoAs("carol", EchoProtocols.FabricEcho.class, address, conf, big));
                assertEquals(before + 1, FabricRpcEngine.fabricCalls(), "the call went over the fabric");
            }
        } finally {
            full.stop();
        }
    }

    /** A server's answer that would lower the coverage the client asked for opens no session. */
    @Test
    void theClientRefusesASessionCoveringLessThanItAskedFor() throws Exception {
        SessionKeys keys = SessionKeys.generate();
        String answer = Frames.FRAME_VERSION + " 127.0.0.1 1 42 "
                + Base64.getEncoder().encodeToString(SessionKeys.generate().publicKey()) + " none header";
        InetSocketAddress address = new InetSocketAddress("127.0.0.1", 1);
        IOException e = assertThrows(IOException.class,
                () -> SessionOffer.accept(address, answer, keys, 0, FrameAuth.Coverage.FULL));
        assertTrue(e.getMessage().contains("asked for full"), e.getMessage());
        assertEquals(FrameAuth.Coverage.HEADER,
                SessionOffer.accept(address, answer, SessionKeys.generate(), 0, FrameAuth.Coverage.HEADER).auth().coverage());
        assertThrows(IOException.class, () -> SessionOffer.accept(address, answer.replace("header", "none"),
                SessionKeys.generate(), 0, FrameAuth.Coverage.HEADER));
    }

    /** A coverage setting other than header or full stops the engine at its configuration. */
    @Test
    void anUnknownCoverageSettingIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new RpcConf(withFrameMac("some")));
        assertEquals(FrameAuth.Coverage.HEADER, new RpcConf(new Configuration(false)).frameMac);
        assertEquals(FrameAuth.Coverage.FULL, new RpcConf(withFrameMac("FULL")).frameMac);
    }

    private static Configuration withFrameMac(String value) {
        Configuration c = new Configuration(false);
        c.set(RpcConf.FRAME_MAC, value);
        return c;
    }
}
