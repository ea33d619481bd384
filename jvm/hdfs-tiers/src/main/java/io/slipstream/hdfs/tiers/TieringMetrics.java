package io.slipstream.hdfs.tiers;

import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.hadoop.metrics2.MetricsCollector;
import org.apache.hadoop.metrics2.MetricsSource;
import org.apache.hadoop.metrics2.lib.Interns;

/**
 * The tiering service's counters as a Hadoop metrics source of the NameNode (JMX
 * {@code Hadoop:service=NameNode,name=SlipstreamTiering}, read by {@link TieringStatus}); the hot files and the
 * last batches are tags, so the status command gets everything in one query.
 */
final class TieringMetrics implements MetricsSource {
    final AtomicLong batches = new AtomicLong();
    final AtomicLong promotions = new AtomicLong();
    final AtomicLong evictions = new AtomicLong();
    final AtomicLong promotedBytes = new AtomicLong();
    final AtomicLong evictedBytes = new AtomicLong();
    final AtomicLong failures = new AtomicLong();
    final AtomicLong scanTruncated = new AtomicLong();
    final AtomicLong unreportedDecisions = new AtomicLong();
    volatile long ssdUsedBytes;
    volatile long ssdUnreportedOffBytes;
    volatile long ssdUnreportedOnBytes;
    volatile long ssdCapacityBytes;
    volatile long movesRemembered;
    volatile long filesScanned;
    private final TieringService service;

    TieringMetrics(TieringService service) {
        this.service = service;
    }

    @Override
    public void getMetrics(MetricsCollector collector, boolean all) {
        String hot = service.hotFiles().stream().map(e -> e.getKey() + "=" + e.getValue())
                .collect(Collectors.joining(" "));
        collector.addRecord(TieringService.METRICS_NAME).setContext("dfs")
                .addCounter(Interns.info("Batches", "move batches asked of HDFS"), batches.get())
                .addCounter(Interns.info("Promotions", "files promoted to SSD"), promotions.get())
                .addCounter(Interns.info("Evictions", "files evicted from SSD"), evictions.get())
                .addCounter(Interns.info("PromotedBytes", "replica bytes asked to move to SSD"), promotedBytes.get())
                .addCounter(Interns.info("EvictedBytes", "SSD replica bytes asked to move off SSD"), evictedBytes.get())
                .addCounter(Interns.info("Failures", "moves or decisions that failed"), failures.get())
                .addCounter(Interns.info("ScanTruncated", "scans stopped at tiering.scan.maxFiles"), scanTruncated.get())
                .addCounter(Interns.info("UnreportedDecisions", "decisions that corrected the reported SSD use by "
                        + "moves the storage reports did not show yet"), unreportedDecisions.get())
                .addGauge(Interns.info("SsdUsedBytes", "SSD tier in use at the last decision"), ssdUsedBytes)
                .addGauge(Interns.info("SsdUnreportedOffBytes", "bytes moved off SSD maybe not yet in the storage "
                        + "reports, at the last decision"), ssdUnreportedOffBytes)
                .addGauge(Interns.info("SsdUnreportedOnBytes", "bytes moved onto SSD maybe not yet in the storage "
                        + "reports, at the last decision"), ssdUnreportedOnBytes)
                .addGauge(Interns.info("MovesRemembered", "moved files remembered until the storage reports show "
                        + "their moves"), movesRemembered)
                .addGauge(Interns.info("SsdCapacityBytes", "SSD tier capacity at the last decision"), ssdCapacityBytes)
                .addGauge(Interns.info("FilesScanned", "files looked at by the last decision"), filesScanned)
                .addGauge(Interns.info("TrackedFiles", "files whose reads are counted"), service.trackedFiles())
                .tag(Interns.info("HotFiles", "hot files (path=reads in the window), most read first"), hot)
                .tag(Interns.info("LastBatches", "the last batches, oldest first"),
                        String.join(" | ", service.lastBatches()));
    }
}
