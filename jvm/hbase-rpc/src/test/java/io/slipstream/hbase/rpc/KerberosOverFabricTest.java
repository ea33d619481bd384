package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.ipc.TestProtobufRpcServiceImpl;
import org.apache.hadoop.hbase.protobuf.generated.AuthenticationProtos.TokenIdentifier;
import org.apache.hadoop.hbase.security.SecurityConstants;
import org.apache.hadoop.hbase.security.SecurityInfo;
import org.apache.hadoop.hbase.security.User;
import org.apache.hadoop.hbase.security.provider.SaslClientAuthenticationProviders;
import org.apache.hadoop.hbase.security.provider.SaslServerAuthenticationProviders;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.authorize.PolicyProvider;
import org.apache.hadoop.security.authorize.ProxyUsers;
import org.apache.hadoop.security.authorize.Service;
import org.apache.hbase.thirdparty.com.google.protobuf.BlockingService;
import org.apache.hbase.thirdparty.com.google.protobuf.RpcController;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.AddrResponseProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EchoResponseProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EmptyRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.EmptyResponseProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestProtos.PauseRequestProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.hbase.shaded.ipc.protobuf.generated.TestRpcServiceProtos.TestProtobufRpcProto.BlockingInterface;

/**
 * HBase RPC under Kerberos (a real KDC: hadoop-minikdc, one for the class) with SASL QOP
 * {@code authentication}: sessions are opened over the SASL-authenticated socket connection and calls run
 * as its principal (a proxy user as itself with its real user); with QOP integrity the calls keep the socket
 * path. The service answers each echo with who HBase says is calling.
 */
class KerberosOverFabricTest {
    private static final String SERVER = "hbase/localhost";
    private static final String CLIENT = "client";
    private static final String TEST_SERVICE_ACL = "security.slipstream.test.protocol.acl";

    private static File dir;
    private static MiniKdc kdc;
    private static String realm;
    private static File keytab;
    private static UserGroupInformation serverUser;
    private static UserGroupInformation client;

    @BeforeAll
    static void startKdc() throws Exception {
        dir = Files.createTempDirectory("slipstream-hbase-kdc").toFile();
        kdc = new MiniKdc(MiniKdc.createConf(), dir);
        kdc.start();
        realm = kdc.getRealm();
        keytab = new File(dir, "test.keytab");
        kdc.createPrincipal(keytab, SERVER, CLIENT);
        Configuration conf = conf("never", "authentication");
        // The client principal may act for alice (Hadoop's proxy users, as HBase's REST and Thrift servers do).
        conf.set("hadoop.proxyuser." + CLIENT + ".users", "alice");
        conf.set("hadoop.proxyuser." + CLIENT + ".hosts", "127.0.0.1");
        ProxyUsers.refreshSuperUserGroupsConfiguration(conf);
        UserGroupInformation.setConfiguration(conf);
        serverUser = UserGroupInformation.loginUserFromKeytabAndReturnUGI(SERVER + "@" + realm, keytab.getPath());
        client = UserGroupInformation.loginUserFromKeytabAndReturnUGI(CLIENT + "@" + realm, keytab.getPath());
        // HBase's client needs the server principal of each service it authenticates (HBase's own services
        // have theirs built in; its test service has none).
        SecurityInfo.addInfo(TestProtobufRpcProto.getDescriptor().getName(),
                new SecurityInfo(SecurityConstants.REGIONSERVER_KRB_PRINCIPAL, TokenIdentifier.Kind.HBASE_AUTH_TOKEN));
        resetSaslProviders();
    }

    /**
     * HBase caches its SASL providers JVM-wide with the configuration of the first client or server made (an
     * earlier test class's SIMPLE one): dropped, so that this class's Kerberos configuration is read, and
     * again after it, so that the next class's SIMPLE one is.
     */
    private static void resetSaslProviders() {
        SaslClientAuthenticationProviders.reset();
        SaslServerAuthenticationProviders.reset();
    }

    @AfterAll
    static void stopKdc() {
        if (kdc != null) {
            kdc.stop();
        }
        // Security is JVM-wide in Hadoop: the other test classes of this JVM run SIMPLE again.
        UserGroupInformation.reset();
        resetSaslProviders();
        ProxyUsers.refreshSuperUserGroupsConfiguration(new Configuration(false));
        FileUtil.fullyDelete(dir);
    }

    /** Kerberos on both sides, the given fallback and SASL QOP. */
    private static Configuration conf(String fallback, String protection) {
        Configuration conf = EchoServers.conf(fallback);
        conf.set(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHENTICATION, "kerberos");
        conf.set(User.HBASE_SECURITY_CONF_KEY, "kerberos");
        conf.set(HBaseRpcConf.RPC_PROTECTION, protection);
        conf.set(SecurityConstants.REGIONSERVER_KRB_PRINCIPAL, SERVER + "@" + realm);
        conf.set(SecurityConstants.MASTER_KRB_PRINCIPAL, SERVER + "@" + realm);
        // Explicit rules: Hadoop's DEFAULT rule needs the JVM's default realm, which an earlier test class
        // (no krb5.conf yet) may have cached as none.
        conf.set(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTH_TO_LOCAL,
                "RULE:[1:$1@$0](.*@" + realm + ")s/@.*//\nRULE:[2:$1@$0](.*@" + realm + ")s/@.*//\nDEFAULT");
        conf.set("hadoop.proxyuser." + CLIENT + ".users", "alice");
        conf.set("hadoop.proxyuser." + CLIENT + ".hosts", "127.0.0.1");
        return conf;
    }

    /** HBase's test service whose echo answers {@code "<user> <authentication method> <real user or ->"}. */
    private static final class WhoCalls implements BlockingInterface {
        private final TestProtobufRpcServiceImpl delegate = new TestProtobufRpcServiceImpl();

        @Override
        public EchoResponseProto echo(RpcController controller, EchoRequestProto request) {
            UserGroupInformation ugi = RpcServer.getRequestUser().orElseThrow().getUGI();
            return EchoResponseProto.newBuilder().setMessage(ugi.getUserName() + " " + ugi.getAuthenticationMethod() + " "
                    + (ugi.getRealUser() == null ? "-" : ugi.getRealUser().getUserName())).build();
        }

        @Override
        public EmptyResponseProto ping(RpcController controller, EmptyRequestProto request) throws ServiceException {
            return delegate.ping(controller, request);
        }

        @Override
        public EmptyResponseProto error(RpcController controller, EmptyRequestProto request) throws ServiceException {
            return delegate.error(controller, request);
        }

        @Override
        public EmptyResponseProto pause(RpcController controller, PauseRequestProto request) throws ServiceException {
            return delegate.pause(controller, request);
        }

        @Override
        public AddrResponseProto addr(RpcController controller, EmptyRequestProto request) throws ServiceException {
            return delegate.addr(controller, request);
        }
    }

    /**
     * A server of {@link WhoCalls} started as the server principal (HBase's server takes its principal from its
     * login); with {@code hadoop.security.authorization} its policy admits everyone to the test service, as
     * HMasters and RegionServers load HBasePolicyProvider's ACLs (the proxy-user check comes with it).
     */
    private static RpcServer server(Configuration conf) throws Exception {
        BlockingService service = TestProtobufRpcProto.newReflectiveBlockingService(new WhoCalls());
        RpcServer server = serverUser.doAs((PrivilegedExceptionAction<RpcServer>) () -> EchoServers.start(conf, service,
                BlockingInterface.class));
        conf.set(TEST_SERVICE_ACL, "*");
        server.refreshAuthManager(conf, new PolicyProvider() {
            @Override
            public Service[] getServices() {
                return new Service[] {new Service(TEST_SERVICE_ACL, BlockingInterface.class)};
            }
        });
        return server;
    }

    /** Who the server says called, for an echo sent by {@code caller} through a client of {@code conf}. */
    private static String whoCalls(Configuration conf, RpcServer server, UserGroupInformation caller) throws Exception {
        return client.doAs((PrivilegedExceptionAction<String>) () -> {
            try (FabricRpcClient rpcClient = new FabricRpcClient(conf)) {
                BlockingInterface stub = TestProtobufRpcServiceImpl.newBlockingStub(rpcClient, server.getListenerAddress(),
                        User.create(caller));
                return stub.echo(null, EchoRequestProto.newBuilder().setMessage("who").build()).getMessage();
            }
        });
    }

    @Test
    void aKerberosClientsCallsGoOverTheFabricAsItsPrincipal() throws Exception {
        Configuration conf = conf("never", "authentication");
        RpcServer server = server(conf);
        FabricRpcServer fabricServer = (FabricRpcServer) server;
        try {
            long received = fabricServer.fabricCallsReceived();
            long sent = FabricRpcClient.fabricCalls();
            assertEquals(CLIENT + "@" + realm + " KERBEROS -", whoCalls(conf, server, client));
            assertEquals(received + 1, fabricServer.fabricCallsReceived(), "the echo came over the fabric");
            assertEquals(sent + 1, FabricRpcClient.fabricCalls());
            assertEquals(1, fabricServer.fabricSessions());
        } finally {
            server.stop();
        }
    }

    /**
     * HBase checks a proxy user (hadoop.proxyuser.*) with its service-level authorization: with it on, the
     * session's user is the proxy user HBase admitted on the socket connection, and one it refuses opens nothing.
     */
    @Test
    void aProxyUserRunsAsItselfWithItsKerberosRealUserAndAnImpersonationNotAllowedOpensNothing() throws Exception {
        Configuration conf = conf("never", "authentication");
        conf.setBoolean(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHORIZATION, true);
        RpcServer server = server(conf);
        FabricRpcServer fabricServer = (FabricRpcServer) server;
        try {
            long received = fabricServer.fabricCallsReceived();
            UserGroupInformation alice = UserGroupInformation.createProxyUser("alice", client);
            assertEquals("alice PROXY " + CLIENT + "@" + realm, whoCalls(conf, server, alice));
            assertEquals(received + 1, fabricServer.fabricCallsReceived(), "alice's echo came over the fabric");
            // bob is not among the users the client principal may act for: HBase refuses (and closes) the socket
            // connection that would open the session, as it would one for bob's calls; no session is opened.
            UserGroupInformation bob = UserGroupInformation.createProxyUser("bob", client);
            Exception e = assertThrows(Exception.class, () -> whoCalls(conf, server, bob));
            StringBuilder causes = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                causes.append(t).append('\n');
            }
            assertTrue(causes.toString().contains("opened no fabric session"), causes.toString());
            assertEquals(1, fabricServer.fabricSessions(), "alice's only");
        } finally {
            server.stop();
        }
    }

    /** QOP integrity is more than the fabric gives calls: with fallback auto they go, SASL-wrapped, on sockets. */
    @Test
    void withQopIntegrityCallsKeepTheSocketPath() throws Exception {
        Configuration conf = conf("auto", "integrity");
        RpcServer server = server(conf);
        try {
            long socket = FabricRpcClient.socketCalls();
            long fabric = FabricRpcClient.fabricCalls();
            assertEquals(CLIENT + "@" + realm + " KERBEROS -", whoCalls(conf, server, client));
            assertEquals(socket + 1, FabricRpcClient.socketCalls());
            assertEquals(fabric, FabricRpcClient.fabricCalls());
            assertEquals(null, ((FabricRpcServer) server).fabricAddress());
        } finally {
            server.stop();
        }
    }
}
