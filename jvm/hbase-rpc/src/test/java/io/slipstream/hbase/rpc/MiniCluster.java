package io.slipstream.hbase.rpc;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;

/** Configuration shared by the tests: loopback only, both impls, no web UIs. */
final class MiniCluster {
    private MiniCluster() {
    }

    /** HBase's configuration with the fabric server and client and {@code fallback=never}, on 127.0.0.1 only. */
    static Configuration fabricConf() {
        Configuration conf = HBaseConfiguration.create();
        conf.set("hbase.rpc.server.impl", FabricRpcServer.class.getName());
        conf.set("hbase.rpc.client.impl", FabricRpcClient.class.getName());
        conf.set(HBaseRpcConf.FALLBACK, "never");
        loopback(conf);
        return conf;
    }

    static void loopback(Configuration conf) {
        conf.set("hbase.master.ipc.address", "127.0.0.1");
        conf.set("hbase.regionserver.ipc.address", "127.0.0.1");
        conf.set("hbase.master.hostname", "localhost");
        conf.set("hbase.unsafe.regionserver.hostname", "localhost");
        conf.setInt("hbase.master.info.port", -1);
        conf.setInt("hbase.regionserver.info.port", -1);
        conf.set("hbase.zookeeper.quorum", "localhost");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    }
}
