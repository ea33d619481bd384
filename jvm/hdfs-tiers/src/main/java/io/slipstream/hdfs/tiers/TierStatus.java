package io.slipstream.hdfs.tiers;

import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.protocol.DatanodeStorageReport;
import org.apache.hadoop.hdfs.server.protocol.StorageReport;

/**
 * The tiers' status as the NameNode sees it, for operators:
 * {@code hadoop jar slipstream-hdfs-tiers.jar io.slipstream.hdfs.tiers.TierStatus [hdfs://namenode:port]}
 * prints each tier's totals over the live DataNodes, then each DataNode's storages (HDFS superuser: it
 * asks for the DataNodes' storage reports).
 */
public final class TierStatus {
    private TierStatus() {
    }

    public static void main(String[] args) throws IOException {
        Configuration conf = new HdfsConfiguration();
        URI uri = args.length > 0 ? URI.create(args[0]) : FileSystem.getDefaultUri(conf);
        try (FileSystem fs = FileSystem.get(uri, conf)) {
            if (!(fs instanceof DistributedFileSystem dfs)) {
                throw new IllegalArgumentException(uri + " is not an HDFS file system");
            }
            print(dfs, System.out);
        }
    }

    /** Writes the status table of the cluster behind {@code fs} to {@code out}. */
    public static void print(DistributedFileSystem fs, PrintStream out) throws IOException {
        DatanodeStorageReport[] datanodes = fs.getClient().getDatanodeStorageReport(HdfsConstants.DatanodeReportType.LIVE);
        Map<StorageType, long[]> totals = new EnumMap<>(StorageType.class);
        for (DatanodeStorageReport datanode : datanodes) {
            for (StorageReport storage : datanode.getStorageReports()) {
                long[] sum = totals.computeIfAbsent(storage.getStorage().getStorageType(), t -> new long[4]);
                sum[0] += storage.getCapacity();
                sum[1] += storage.getDfsUsed();
                sum[2] += storage.getRemaining();
                sum[3]++;
            }
        }
        out.printf(Locale.ROOT, "%-9s %16s %16s %16s %8s %9s%n", "tier", "capacity_bytes", "dfs_used_bytes",
                "remaining_bytes", "used_pct", "storages");
        totals.forEach((type, sum) -> out.printf(Locale.ROOT, "%-9s %16d %16d %16d %8.1f %9d%n", type, sum[0], sum[1],
                sum[2], sum[0] == 0 ? 0.0 : 100.0 * (sum[0] - sum[2]) / sum[0], sum[3]));
        for (DatanodeStorageReport datanode : datanodes) {
            StringBuilder line = new StringBuilder("datanode ").append(datanode.getDatanodeInfo().getXferAddr());
            for (StorageReport storage : datanode.getStorageReports()) {
                line.append(' ').append(storage.getStorage().getStorageType()).append('=')
                        .append(storage.getDfsUsed()).append('/').append(storage.getCapacity());
            }
            out.println(line);
        }
    }
}
