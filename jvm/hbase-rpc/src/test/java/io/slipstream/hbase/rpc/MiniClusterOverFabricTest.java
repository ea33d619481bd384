package io.slipstream.hbase.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Increment;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Row;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.exceptions.RequestTooBigException;
import org.apache.hadoop.hbase.ipc.NettyRpcClient;
import org.apache.hadoop.hbase.ipc.RpcExecutor;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A real HBase (HMaster, one RegionServer, ZooKeeper, HDFS) whose servers are {@link FabricRpcServer}s
 * and whose own calls go through {@link FabricRpcClient} with {@code fallback=never}: table, data and
 * admin calls over the fabric give what HBase's Netty client gets over the same servers' sockets.
 */
class MiniClusterOverFabricTest {
    private static final byte[] FAMILY = Bytes.toBytes("f");
    private static final int MAX_REQUEST_BYTES = 1 << 20;
    private static HBaseTestingUtility util;
    private static FabricRpcServer regionServer;
    private static FabricRpcServer master;

    @BeforeAll
    static void startCluster() throws Exception {
        Configuration conf = MiniCluster.fabricConf();
        conf.setInt(RpcServer.MAX_REQUEST_SIZE, MAX_REQUEST_BYTES);
        // The client's own cell size check (10 MB) would refuse the oversized puts before any RPC.
        conf.setInt("hbase.client.keyvalue.maxsize", 16 << 20);
        // The README's recommended call queue: the servers' idle general handlers pull the fabric's calls.
        conf.set(RpcExecutor.CALL_QUEUE_TYPE_CONF_KEY, RpcExecutor.CALL_QUEUE_TYPE_PLUGGABLE_CONF_VALUE);
        conf.set(RpcExecutor.PLUGGABLE_CALL_QUEUE_CLASS_NAME, FabricCallQueue.class.getName());
        util = new HBaseTestingUtility(conf);
        util.startMiniCluster(1);
        regionServer = (FabricRpcServer) util.getMiniHBaseCluster().getRegionServer(0).getRpcServer();
        master = (FabricRpcServer) util.getMiniHBaseCluster().getMaster().getRpcServer();
        assertTrue(regionServer.fabricAddress() != null && master.fabricAddress() != null, "both servers offer the fabric");
        assertFalse(regionServer.receiverThreadsStarted() || master.receiverThreadsStarted(), "handlers pull, no receivers");
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (util != null) {
            util.shutdownMiniCluster();
        }
    }

    @Test
    void tableDataAndAdminCallsOverTheFabricEqualNettys() throws Exception {
        Configuration nettyConf = new Configuration(util.getConfiguration());
        nettyConf.set("hbase.rpc.client.impl", NettyRpcClient.class.getName());
        long clientFabric = FabricRpcClient.fabricCalls();
        long regionServerFabric = regionServer.fabricCallsReceived();
        long masterFabric = master.fabricCallsReceived();
        long refused = regionServer.fabricFramesRefused();
        long socketCalls = FabricRpcClient.socketCalls();
        List<String> viaFabric;
        try (Connection fabric = ConnectionFactory.createConnection(new Configuration(util.getConfiguration()))) {
            viaFabric = workload(fabric, TableName.valueOf("over_fabric"));
        }
        long regionServerCalls = regionServer.fabricCallsReceived() - regionServerFabric;
        long masterCalls = master.fabricCallsReceived() - masterFabric;
        List<String> viaNetty;
        try (Connection netty = ConnectionFactory.createConnection(nettyConf)) {
            viaNetty = workload(netty, TableName.valueOf("over_netty"));
        }
        assertEquals(viaNetty, viaFabric);
        // 100 single puts, 10 gets and the rest: each one call the RegionServer took over the fabric.
        assertTrue(regionServerCalls >= 110, "RegionServer fabric calls: " + regionServerCalls);
        assertTrue(masterCalls > 0, "HMaster fabric calls (admin): " + masterCalls);
        assertTrue(FabricRpcClient.fabricCalls() - clientFabric >= regionServerCalls, "client fabric calls");
        // fallback=never: not one call of this JVM's fabric clients took the socket path.
        assertEquals(socketCalls, FabricRpcClient.socketCalls());
        assertEquals(refused, regionServer.fabricFramesRefused());
    }

    @Test
    void aPutAboveTheRequestLimitGetsHBasesError() throws Exception {
        TableName name = TableName.valueOf("too_big");
        try (Connection fabric = ConnectionFactory.createConnection(new Configuration(util.getConfiguration()));
                Admin admin = fabric.getAdmin()) {
            admin.createTable(TableDescriptorBuilder.newBuilder(name)
                    .setColumnFamily(ColumnFamilyDescriptorBuilder.of(FAMILY)).build());
            try (Table table = fabric.getTable(name)) {
                // Just above the limit (the server's fabric takes it and answers with HBase's error), and far above
                // (the client refuses it without sending, with the same exception).
                for (int bytes : new int[] {MAX_REQUEST_BYTES + 1024, 3 * MAX_REQUEST_BYTES}) {
                    Put put = new Put(Bytes.toBytes("big")).addColumn(FAMILY, Bytes.toBytes("q"), new byte[bytes]);
                    IOException e = assertThrows(IOException.class, () -> table.put(put));
                    assertTrue(causedBy(e, RequestTooBigException.class), "HBase's RequestTooBigException: " + e);
                }
                assertTrue(regionServer.fabricFramesRefused() >= 1, "the RegionServer refused the frame above its limit");
                table.put(new Put(Bytes.toBytes("small")).addColumn(FAMILY, Bytes.toBytes("q"), Bytes.toBytes("v")));
                assertEquals("v", Bytes.toString(table.get(new Get(Bytes.toBytes("small"))).getValue(FAMILY, Bytes.toBytes("q"))));
            }
        }
    }

    private static boolean causedBy(Throwable t, Class<? extends Throwable> type) {
        for (; t != null; t = t.getCause()) {
            if (type.isInstance(t) || String.valueOf(t.getMessage()).contains(type.getName())) {
                return true;
            }
        }
        return false;
    }

    /** Everything a client sees of a mixed workload, independent of the table's name. */
    private static List<String> workload(Connection connection, TableName name) throws IOException, InterruptedException {
        List<String> seen = new ArrayList<>();
        try (Admin admin = connection.getAdmin()) {
            admin.createTable(TableDescriptorBuilder.newBuilder(name)
                    .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(FAMILY).setMaxVersions(3).build()).build(),
                    new byte[][] {Bytes.toBytes("row-033"), Bytes.toBytes("row-066")});
            seen.add("exists " + admin.tableExists(name));
            seen.add("regions " + admin.getRegions(name).size());
            seen.add("families " + admin.getDescriptor(name).getColumnFamilyNames().size());
            try (Table table = connection.getTable(name)) {
                for (int i = 0; i < 100; i++) {
                    table.put(new Put(row(i)).addColumn(FAMILY, Bytes.toBytes("a"), Bytes.toBytes("value-" + i)));
                }
                List<Put> puts = new ArrayList<>();
                for (int i = 0; i < 100; i++) {
                    puts.add(new Put(row(i)).addColumn(FAMILY, Bytes.toBytes("b"), Bytes.toBytes(i * 7L)));
                }
                table.put(puts);
                for (int i = 0; i < 100; i += 10) {
                    seen.add("get " + describe(table.get(new Get(row(i)))));
                }
                seen.add("exists row-005 " + table.exists(new Get(row(5))) + ", row-500 " + table.exists(new Get(row(500))));
                List<Row> batch = new ArrayList<>();
                batch.add(new Get(row(1)));
                batch.add(new Put(row(200)).addColumn(FAMILY, Bytes.toBytes("a"), Bytes.toBytes("batched")));
                batch.add(new Delete(row(2)));
                batch.add(new Increment(row(3)).addColumn(FAMILY, Bytes.toBytes("n"), 5));
                Object[] results = new Object[batch.size()];
                table.batch(batch, results);
                for (Object r : results) {
                    seen.add("batch " + (r instanceof Result res ? describe(res) : String.valueOf(r)));
                }
                seen.add("increment " + Bytes.toLong(table.increment(new Increment(row(3)).addColumn(FAMILY,
                        Bytes.toBytes("n"), 10)).getValue(FAMILY, Bytes.toBytes("n"))));
                admin.flush(name);
                try (ResultScanner scanner = table.getScanner(new Scan().setCaching(7))) {
                    for (Result r : scanner) {
                        seen.add("scan " + describe(r));
                    }
                }
                try (ResultScanner scanner = table.getScanner(new Scan().withStartRow(row(40)).withStopRow(row(45))
                        .addColumn(FAMILY, Bytes.toBytes("a")))) {
                    for (Result r : scanner) {
                        seen.add("range " + describe(r));
                    }
                }
            }
            admin.disableTable(name);
            seen.add("enabled " + admin.isTableEnabled(name));
            admin.deleteTable(name);
            seen.add("exists " + admin.tableExists(name));
        }
        return seen;
    }

    private static byte[] row(int i) {
        return Bytes.toBytes(String.format("row-%03d", i));
    }

    private static String describe(Result r) {
        if (r.isEmpty()) {
            return "(empty)";
        }
        StringBuilder s = new StringBuilder(Bytes.toString(r.getRow()));
        for (Cell c : r.rawCells()) {
            s.append(' ').append(Bytes.toString(CellUtil.cloneQualifier(c))).append('=')
                    .append(Arrays.toString(CellUtil.cloneValue(c)));
        }
        return s.toString();
    }
}
