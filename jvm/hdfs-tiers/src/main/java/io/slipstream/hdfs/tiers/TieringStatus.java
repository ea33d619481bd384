package io.slipstream.hdfs.tiers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.HdfsConfiguration;

/**
 * The tiering service's status, for operators:
 * {@code hadoop jar slipstream-hdfs-tiers.jar io.slipstream.hdfs.tiers.TieringStatus [http://namenode:9870]}
 * prints its counters, the SSD tier's fill, the hot files and the last move batches, read from the NameNode's
 * JMX servlet (the service's metrics source); {@link TierStatus} prints every tier's space.
 */
public final class TieringStatus {
    /** The answer is a few kilobytes; a NameNode answering more is not the one asked for. */
    static final int MAX_ANSWER_BYTES = 1 << 20;

    private TieringStatus() {
    }

    public static void main(String[] args) throws IOException {
        Configuration conf = new HdfsConfiguration();
        String http = args.length > 0 ? args[0]
                : "http://" + conf.getTrimmed(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY,
                        DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_DEFAULT);
        print(URI.create(http), System.out);
    }

    /** Writes the service's status, asked of the NameNode's web server at {@code http}, to {@code out}. */
    public static void print(URI http, PrintStream out) throws IOException {
        URI jmx = http.resolve("/jmx?qry=Hadoop:service=NameNode,name=" + TieringService.METRICS_NAME);
        HttpURLConnection connection = (HttpURLConnection) jmx.toURL().openConnection();
        connection.setConnectTimeout(10_000);
        connection.setReadTimeout(10_000);
        byte[] body;
        try (InputStream in = connection.getInputStream()) {
            body = in.readNBytes(MAX_ANSWER_BYTES + 1);
        } finally {
            connection.disconnect();
        }
        if (body.length > MAX_ANSWER_BYTES) {
            throw new IOException(jmx + " answered more than " + MAX_ANSWER_BYTES + " bytes");
        }
        JsonNode beans = new ObjectMapper().readTree(body).path("beans");
        if (beans.size() != 1) {
            throw new IOException("no tiering service in the NameNode at " + http
                    + " (is io.slipstream.hdfs.tiers.TieringService in dfs.namenode.plugins?)");
        }
        JsonNode bean = beans.get(0);
        out.printf(Locale.ROOT, "tiering: batches %d promotions %d evictions %d promoted_bytes %d evicted_bytes %d "
                + "failures %d scan_truncated %d unreported_decisions %d%n", bean.path("Batches").asLong(),
                bean.path("Promotions").asLong(), bean.path("Evictions").asLong(), bean.path("PromotedBytes").asLong(),
                bean.path("EvictedBytes").asLong(), bean.path("Failures").asLong(), bean.path("ScanTruncated").asLong(),
                bean.path("UnreportedDecisions").asLong());
        long used = bean.path("SsdUsedBytes").asLong();
        long capacity = bean.path("SsdCapacityBytes").asLong();
        out.printf(Locale.ROOT, "ssd: %d of %d bytes in use (%.1f %%) at the last decision, %d moved off and %d "
                + "onto it maybe not reported yet, %d files scanned, %d files tracked, %d moves remembered%n", used,
                capacity, capacity == 0 ? 0.0 : 100.0 * used / capacity, bean.path("SsdUnreportedOffBytes").asLong(),
                bean.path("SsdUnreportedOnBytes").asLong(),
                bean.path("FilesScanned").asLong(), bean.path("TrackedFiles").asLong(),
                bean.path("MovesRemembered").asLong());
        out.println("hot files: " + bean.path("tag.HotFiles").asText(""));
        for (String batch : bean.path("tag.LastBatches").asText("").split(" \\| ")) {
            if (!batch.isEmpty()) {
                out.println(batch);
            }
        }
    }
}
