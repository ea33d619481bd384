package io.slipstream.hadoop.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

class RpcConfTest {
    private static Configuration conf(String... keyValues) {
        Configuration conf = new Configuration(false);
        for (int i = 0; i < keyValues.length; i += 2) {
            conf.set(keyValues[i], keyValues[i + 1]);
        }
        return conf;
    }

    @Test
    void simpleOrKerberosWithAuthenticationOnlyProtectionLetsTheFabricCarryCalls() {
        assertNull(new RpcConf(conf()).securityRefusal);
        assertNull(new RpcConf(conf("hadoop.rpc.protection", "authentication")).securityRefusal);
        assertNull(new RpcConf(conf("hadoop.security.authentication", "kerberos")).securityRefusal);
        assertNull(new RpcConf(conf("hadoop.security.authentication", "Kerberos", "hadoop.security.authorization", "true"))
                .securityRefusal);
        assertTrue(new RpcConf(conf("hadoop.security.authentication", "kerberos", "hadoop.rpc.protection", "integrity"))
                .securityRefusal.contains("integrity"));
        assertTrue(new RpcConf(conf("hadoop.rpc.protection", "authentication,privacy")).securityRefusal.contains("privacy"));
        assertTrue(new RpcConf(conf("hadoop.security.authentication", "token")).securityRefusal.contains("token"));
    }

    @Test
    void badSettingsAreClearErrors() {
        assertEquals(RpcConf.Fallback.NEVER, new RpcConf(conf(RpcConf.FALLBACK, "Never")).fallback);
        for (String[] bad : new String[][] {{RpcConf.FALLBACK, "sometimes"}, {RpcConf.TRANSPORT, "rdma"}, {RpcConf.PORT, "70000"},
                {RpcConf.SESSIONS_MAX, "0"}, {RpcConf.RECEIVER_THREADS, "65"}, {RpcConf.REQUEST_TIMEOUT_MS, "0"},
                {RpcConf.HANDLER_PULLERS, "0"}, {RpcConf.HANDLER_PULL_MS, "0"}}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new RpcConf(conf(bad)));
            assertTrue(e.getMessage().contains(bad[0]), e.getMessage());
        }
    }

    @Test
    void aServersOwnPortKeyWinsOverTheSharedOne() {
        assertEquals(0, RpcConf.serverPort(conf(), 8020));
        assertEquals(9000, RpcConf.serverPort(conf(RpcConf.PORT, "9000"), 8020));
        Configuration both = conf(RpcConf.PORT, "9000", "ipc.8020." + RpcConf.PORT, "9001");
        assertEquals(9001, RpcConf.serverPort(both, 8020), "the NameNode's (RPC port 8020) own key");
        assertEquals(9000, RpcConf.serverPort(both, 9867), "another server of the same configuration");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RpcConf.serverPort(conf("ipc.8020." + RpcConf.PORT, "-1"), 8020));
        assertTrue(e.getMessage().contains("ipc.8020." + RpcConf.PORT), e.getMessage());
    }
}
