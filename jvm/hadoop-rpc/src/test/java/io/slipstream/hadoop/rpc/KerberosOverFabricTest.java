package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.fabric.session.ReplayWindow;
import java.io.File;
import java.io.IOException;
import java.lang.reflect.UndeclaredThrowableException;
import java.nio.file.Files;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.SecurityUtil;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.authorize.ProxyUsers;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.thirdparty.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A Kerberos-secured Hadoop RPC server on the fabric engine (a real KDC: hadoop-minikdc, one for the
 * class), serving {@link SecureEcho} with a delegation-token secret manager, fallback never: clients
 * authenticated by Kerberos or by a token get fabric sessions bound to that identity, others none, and
 * frames not made by a session's own client are refused.
 */
class KerberosOverFabricTest {
    private static final String SERVER = "slipstream/localhost";
    private static final String CLIENT = "client";

    private static File dir;
    private static MiniKdc kdc;
    private static String realm;
    private static Configuration conf;
    private static EchoTokens.SecretManager tokens;
    private static RPC.Server server;
    private static UserGroupInformation client;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("slipstream-kdc").toFile();
        kdc = new MiniKdc(MiniKdc.createConf(), dir);
        kdc.start();
        realm = kdc.getRealm();
        File keytab = new File(dir, "test.keytab");
        kdc.createPrincipal(keytab, SERVER, CLIENT);

        conf = EchoProtocols.conf();
        conf.set(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHENTICATION, "kerberos");
        // Explicit rules: Hadoop's DEFAULT rule needs the JVM's default realm, which an earlier test class
        // (no krb5.conf yet) may have cached as none.
        conf.set(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTH_TO_LOCAL,
                "RULE:[1:$1@$0](.*@" + realm + ")s/@.*//\nRULE:[2:$1@$0](.*@" + realm + ")s/@.*//\nDEFAULT");
        conf.set(SecureEcho.SERVER_PRINCIPAL_KEY, SERVER + "@" + realm);
        conf.set(RpcConf.FALLBACK, "never");
        // The client principal may act for alice (Hadoop's proxy users, as Oozie or Hive's servers do).
        conf.set("hadoop.proxyuser." + CLIENT + ".users", "alice");
        conf.set("hadoop.proxyuser." + CLIENT + ".hosts", "127.0.0.1");
        ProxyUsers.refreshSuperUserGroupsConfiguration(conf);
        UserGroupInformation.setConfiguration(conf);
        // The server runs as its service principal, as a NameNode does after its keytab login.
        UserGroupInformation.loginUserFromKeytab(SERVER + "@" + realm, keytab.getPath());
        tokens = new EchoTokens.SecretManager();
        tokens.startThreads();
        server = EchoProtocols.server(conf, 2, SecureEcho.class, tokens);
        client = UserGroupInformation.loginUserFromKeytabAndReturnUGI(CLIENT + "@" + realm, keytab.getPath());
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.stop();
        }
        if (tokens != null) {
            tokens.stopThreads();
        }
        if (kdc != null) {
            kdc.stop();
        }
        // Security is JVM-wide in Hadoop: the other test classes of this JVM run SIMPLE again.
        UserGroupInformation.reset();
        ProxyUsers.refreshSuperUserGroupsConfiguration(new Configuration(false));
        FileUtil.fullyDelete(dir);
    }

    private static FabricRpcServer fabricServer() {
        return (FabricRpcServer) server;
    }

    /** Calls {@code call} on a {@link SecureEcho} proxy made as {@code user}. */
    private static <T> T as(UserGroupInformation user, ProxyCall<T> call) throws Exception {
        try {
            return user.doAs((PrivilegedExceptionAction<T>) () -> {
                SecureEcho proxy = RPC.getProxy(SecureEcho.class, 1, server.getListenerAddress(), conf);
                try {
                    return call.on(proxy);
                } finally {
                    RPC.stopProxy(proxy);
                }
            });
        } catch (UndeclaredThrowableException e) {
            throw (Exception) e.getCause();
        }
    }

    private interface ProxyCall<T> {
        T on(SecureEcho proxy) throws Exception;
    }

    @Test
    void aKerberosClientsCallsGoOverTheFabricAndRunAsItsPrincipal() throws Exception {
        long receivedBefore = fabricServer().fabricCallsReceived();
        long socketBefore = FabricRpcEngine.socketCalls();
        String[] seen = as(client, proxy -> {
            assertEquals("kerberos", proxy.echo(null, EchoProtocols.echo("kerberos")).getMessage());
            assertEquals("KERBEROS", proxy.getAuthMethod(null, EchoProtocols.EMPTY).getMechanismName());
            return proxy.getAuthUser(null, EchoProtocols.EMPTY).getUser().split(" ");
        });
        assertEquals(CLIENT + "@" + realm, seen[0], "the principal the KDC vouched for");
        assertEquals(CLIENT, seen[1], "its short name");
        assertEquals("KERBEROS", seen[2]);
        assertEquals("-", seen[3], "no real user: not a proxy user");
        assertEquals(CLIENT + "@" + realm, seen[4], "the handler runs as the session's user");
        assertEquals(3, fabricServer().fabricCallsReceived() - receivedBefore);
        assertEquals(socketBefore, FabricRpcEngine.socketCalls());
    }

    @Test
    void aProxyUsersSessionCarriesItsKerberosRealUser() throws Exception {
        UserGroupInformation alice = UserGroupInformation.createProxyUser("alice", client);
        long receivedBefore = fabricServer().fabricCallsReceived();
        String[] seen = as(alice, proxy -> proxy.getAuthUser(null, EchoProtocols.EMPTY).getUser().split(" "));
        assertEquals("alice", seen[0]);
        assertEquals("PROXY", seen[2]);
        assertEquals(CLIENT + "@" + realm, seen[3], "authenticated by Kerberos, acting for alice");
        assertEquals("alice", seen[4]);
        assertEquals(1, fabricServer().fabricCallsReceived() - receivedBefore);
        // A user the principal may not act for gets Hadoop's refusal on the socket connection: no session.
        int sessionsBefore = fabricServer().fabricSessions();
        ServiceException e = assertThrows(ServiceException.class, () -> as(UserGroupInformation.createProxyUser("bob", client),
                proxy -> proxy.echo(null, EchoProtocols.echo("as bob"))));
        assertTrue(String.valueOf(e.getCause()).contains("is not allowed to impersonate bob"), String.valueOf(e.getCause()));
        assertEquals(sessionsBefore, fabricServer().fabricSessions());
    }

    @Test
    void aDelegationTokenClientsSessionIsBoundToTheTokensOwner() throws Exception {
        Token<EchoTokens.Identifier> token = new Token<>(
                new EchoTokens.Identifier(new Text("tokenowner"), new Text(CLIENT), null), tokens);
        SecurityUtil.setTokenService(token, server.getListenerAddress());
        // The token's holder names itself otherwise: with a token Hadoop takes the token's owner.
        UserGroupInformation holder = UserGroupInformation.createRemoteUser("holder");
        holder.addToken(token);
        long receivedBefore = fabricServer().fabricCallsReceived();
        String[] seen = as(holder, proxy -> {
            assertEquals("TOKEN", proxy.getAuthMethod(null, EchoProtocols.EMPTY).getMechanismName());
            return proxy.getAuthUser(null, EchoProtocols.EMPTY).getUser().split(" ");
        });
        assertEquals("tokenowner", seen[0]);
        assertEquals("TOKEN", seen[2]);
        assertEquals("tokenowner", seen[4]);
        assertEquals(2, fabricServer().fabricCallsReceived() - receivedBefore);
    }

    @Test
    void aClientWithoutKerberosCredentialsOpensNoSession() throws Exception {
        UserGroupInformation mallory = UserGroupInformation.createRemoteUser("mallory");
        int sessionsBefore = fabricServer().fabricSessions();
        long receivedBefore = fabricServer().fabricCallsReceived();
        ServiceException e = assertThrows(ServiceException.class,
                () -> as(mallory, proxy -> proxy.echo(null, EchoProtocols.echo("let me in"))));
        IOException why = assertInstanceOf(IOException.class, e.getCause());
        assertTrue(String.valueOf(why.getMessage()).contains("Client cannot authenticate via:[TOKEN, KERBEROS]"),
                String.valueOf(why));
        assertEquals(sessionsBefore, fabricServer().fabricSessions());
        assertEquals(receivedBefore, fabricServer().fabricCallsReceived());
    }

    @Test
    void framesNotSignedWithTheSessionsKeyOrSeenBeforeAreRefused() throws Exception {
        SessionOffer mine = TestFrames.open(client, conf, server.getListenerAddress(), SecureEcho.class);
        SessionOffer other = TestFrames.open(client, conf, server.getListenerAddress(), SecureEcho.class);
        assertNotEquals(mine.sessionId(), other.sessionId());
        byte[] body = TestFrames.echoBody(SecureEcho.NAME, "signed", 1);
        long refusedBefore = fabricServer().fabricFramesRefused();
        long receivedBefore = fabricServer().fabricCallsReceived();
        try (FabricNode raw = FabricNode.builder().start()) {
            FabricEndpoint endpoint = raw.endpoint(mine.host(), mine.port());
            byte[] first = TestFrames.frame(mine, 0, body);
            assertEquals("signed", TestFrames.echoed(endpoint, mine, first));
            // The very frame again (a copy off the wire): refused, signed for that frame.
            TestFrames.assertRefusedSigned(endpoint, first, mine, Frames.REPLAYED);
            // Frames whose MAC does not verify: another session named, another sequence number, the body
            // or the MAC altered, another session's key, no MAC at all.
            // Each refused unsigned: a signed refusal of a frame the server could not authenticate would be a
            // signed refusal for whatever session and number the sender named.
            byte[] next = TestFrames.frame(mine, 1, body);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.withLong(next, Frames.SESSION_OFFSET, other.sessionId()),
                    Frames.NOT_AUTHENTIC);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.withLong(next, Frames.SEQUENCE_OFFSET, 2),
                    Frames.NOT_AUTHENTIC);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.flipped(next, next.length - 1), Frames.NOT_AUTHENTIC);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.flipped(next, Frames.MAC_OFFSET), Frames.NOT_AUTHENTIC);
            byte[] keyOfOther = TestFrames.frame(other, 1, body);
            TestFrames.assertRefusedUnsigned(endpoint, TestFrames.withLong(keyOfOther, Frames.SESSION_OFFSET,
                    mine.sessionId()), Frames.NOT_AUTHENTIC);
            byte[] unsigned = next.clone();
            java.util.Arrays.fill(unsigned, Frames.MAC_OFFSET, Frames.PREFIX_BYTES, (byte) 0);
            TestFrames.assertRefusedUnsigned(endpoint, unsigned, Frames.NOT_AUTHENTIC);
            // None of those moved the window: sequence 1, untouched, is still new.
            assertEquals("signed", TestFrames.echoed(endpoint, mine, next));
            // Out of order within the window is accepted once. Behind it, the numbers the window left unseen are
            // remembered (the highest ReplayWindow.MISSED_MAX of them) and accepted once when they come at last;
            // below those, whether a number was taken cannot be told: each refusal signed for its frame.
            assertEquals("signed", TestFrames.echoed(endpoint, mine, TestFrames.frame(mine, 5000, body)));
            assertEquals("signed", TestFrames.echoed(endpoint, mine,
                    TestFrames.frame(mine, 5000 - ReplayWindow.SIZE + 1, body)));
            TestFrames.assertRefusedSigned(endpoint, TestFrames.frame(mine, 5000 - ReplayWindow.SIZE + 1, body), mine,
                    Frames.REPLAYED);
            assertEquals("signed", TestFrames.echoed(endpoint, mine, TestFrames.frame(mine, 5000 - ReplayWindow.SIZE, body)));
            TestFrames.assertRefusedSigned(endpoint, TestFrames.frame(mine, 5000 - ReplayWindow.SIZE, body), mine,
                    Frames.REPLAYED);
            TestFrames.assertRefusedSigned(endpoint, TestFrames.frame(mine, 2, body), mine, Frames.TOO_OLD);
            // The other session was not disturbed by frames naming it.
            assertEquals("signed", TestFrames.echoed(raw.endpoint(other.host(), other.port()), other,
                    TestFrames.frame(other, 0, body)));
        }
        assertEquals(10, fabricServer().fabricFramesRefused() - refusedBefore);
        assertEquals(6, fabricServer().fabricCallsReceived() - receivedBefore);
    }
}
