package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.session.FrameAuth;
import java.lang.reflect.UndeclaredThrowableException;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.authorize.AuthorizationException;
import org.apache.hadoop.security.authorize.PolicyProvider;
import org.apache.hadoop.security.authorize.Service;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Service-level authorization ({@code hadoop.security.authorization=true}, ACLs per protocol from a
 * {@link PolicyProvider}, as the NameNode has) with the fabric, under SIMPLE authentication: a session is
 * opened only for a protocol its user may call, and carries calls of that protocol only.
 */
class AuthorizationOverFabricTest {
    private static final String ECHO_ACL = "security.slipstream.test.echo.protocol.acl";
    private static final String ADMIN_ACL = "security.slipstream.test.admin.protocol.acl";

    /** A second protocol the policy knows, which only root may call. */
    @ProtocolInfo(protocolName = "io.slipstream.hadoop.rpc.AuthorizationOverFabricTest$AdminEcho", protocolVersion = 1)
    interface AdminEcho extends TestProtobufRpcProto.BlockingInterface {
    }

    /** What a Hadoop service's policy provider is: the ACL key of each protocol. */
    static final class Policy extends PolicyProvider {
        @Override
        public Service[] getServices() {
            return new Service[] {new Service(ECHO_ACL, SecureEcho.class), new Service(ADMIN_ACL, AdminEcho.class)};
        }
    }

    private static Configuration conf;
    private static RPC.Server server;

    @BeforeAll
    static void start() throws Exception {
        conf = EchoProtocols.conf();
        conf.setBoolean(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHORIZATION, true);
        conf.set(ECHO_ACL, "alice");
        conf.set(ADMIN_ACL, "root");
        conf.set(RpcConf.FALLBACK, "never");
        server = EchoProtocols.server(conf, 2, SecureEcho.class, null);
        // The echo protocol under its other name too, to show a session does not carry it.
        server.addProtocol(RPC.RpcKind.RPC_PROTOCOL_BUFFER, EchoProtocols.FabricEcho.class,
                TestProtobufRpcProto.newReflectiveBlockingService(new EchoProtocols.Impl()));
        server.refreshServiceAcl(conf, new Policy());
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.stop();
        }
    }

    private static FabricRpcServer fabricServer() {
        return (FabricRpcServer) server;
    }

    private static String echoAs(String user, String message) throws Exception {
        return EchoProtocols.echoAs(user, SecureEcho.class, server.getListenerAddress(), conf, message);
    }

    @Test
    void aUserTheAclAdmitsCallsOverTheFabric() throws Exception {
        long receivedBefore = fabricServer().fabricCallsReceived();
        assertEquals("admitted", echoAs("alice", "admitted"));
        assertEquals(1, fabricServer().fabricCallsReceived() - receivedBefore);
    }

    @Test
    void aUserTheAclRefusesGetsHadoopsAuthorizationErrorAndNoSession() throws Exception {
        int sessionsBefore = fabricServer().fabricSessions();
        ServiceException e = assertThrows(ServiceException.class, () -> echoAs("bob", "refused"));
        assertTrue(e.getCause().getMessage().contains("is not authorized for protocol interface " + SecureEcho.NAME),
                e.getCause().getMessage());
        assertEquals(sessionsBefore, fabricServer().fabricSessions());
    }

    @Test
    void aSessionIsOpenedOnlyForAProtocolItsUserMayCall() throws Exception {
        // alice's connection is for SecureEcho, which she may call; the session she asks for names AdminEcho.
        UserGroupInformation alice = UserGroupInformation.createRemoteUser("alice");
        int sessionsBefore = fabricServer().fabricSessions();
        RemoteException e = assertThrows(RemoteException.class, () -> {
            try {
                alice.doAs((PrivilegedExceptionAction<SessionOffer>) () -> SessionOffer.open(conf, server.getListenerAddress(),
                        SecureEcho.class, RPC.getProtocolName(AdminEcho.class), alice, 0, 0, FrameAuth.Coverage.HEADER));
            } catch (UndeclaredThrowableException u) {
                throw u.getCause();
            }
        });
        assertEquals(AuthorizationException.class.getName(), e.getClassName());
        assertTrue(e.getMessage().contains("alice") && e.getMessage().contains("AdminEcho"), e.getMessage());
        assertEquals(sessionsBefore, fabricServer().fabricSessions());
    }

    @Test
    void aSessionCarriesCallsOfItsOwnProtocolOnly() throws Exception {
        SessionOffer session = TestFrames.open(UserGroupInformation.createRemoteUser("alice"), conf,
                server.getListenerAddress(), SecureEcho.class);
        long refusedBefore = fabricServer().fabricFramesRefused();
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(session.host(), session.port());
            // Authentic, but a call of the other protocol this server registers: refused, signed for that frame.
            TestFrames.assertRefusedSigned(endpoint,
                    TestFrames.frame(session, 0, TestFrames.echoBody(EchoProtocols.NAME, "elsewhere", 1)), session,
                    Frames.WRONG_PROTOCOL + EchoProtocols.NAME);
            // The session stays, for its own protocol.
            assertEquals("own", TestFrames.echoed(endpoint, session,
                    TestFrames.frame(session, 1, TestFrames.echoBody(SecureEcho.NAME, "own", 2))));
        }
        assertEquals(1, fabricServer().fabricFramesRefused() - refusedBefore);
    }
}
