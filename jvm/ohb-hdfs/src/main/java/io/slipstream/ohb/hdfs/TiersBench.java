package io.slipstream.ohb.hdfs;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * The JVM side of {@code ohb hdfs tiers}: one storage configuration per JVM, on a mini HDFS cluster of a
 * NameNode and three DataNodes, each with a RAM_DISK directory (under {@code --ram-dir}, on tmpfs), an SSD
 * and a DISK directory (under {@code --disk-dir}, on the disk). Configurations: {@code hot} (vanilla HDFS,
 * default policy: every replica on DISK), {@code lazy-persist} and {@code all-ssd} (vanilla HDFS with that
 * storage policy on the written directory), {@code hhh} and {@code hhh-m} (Triple-H, {@code jvm/hdfs-tiers};
 * HHH-M's files marked short-lived with LAZY_PERSIST), {@code hhh-l} and {@code hhh-l-bb} (each DataNode also
 * has an ARCHIVE directory standing for a parallel file system; hhh-l-bb writes its replica through the burst
 * buffer at {@code --bb-servers}, a slipstream-cache that {@code ohb} runs; {@link TiersPfs}). OHB's SWT: {@code writers} threads each write their
 * own file per run (aggregate MB/s when every {@code close()} returned, and for configurations with RAM
 * replicas also when HDFS's lazy writer had persisted every one of them), after one untimed warm-up file
 * per writer; then SRT: as many readers read
 * one run's files at once, contents checked (CRC32). After the runs, every replica must be on the tier the
 * configuration promises, in the NameNode's locations and the DataNode's own volume, else the run fails.
 * Prints one {@code OHB_TIERS_RESULT {json}} line; exits 1 on a failure. The cluster, the policies and the checks
 * are {@link TiersCluster}'s, shared with {@link TiersDfsioBench} (Hadoop's TestDFSIO on the same configurations).
 */
public final class TiersBench {
    private static final Path DIR = new Path("/ohb-tiers");
    private static final int CHUNK_BYTES = 1 << 20;
    private static final int SHIFT_BYTES_MAX = 64 << 10;

    private TiersBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> o = TiersCluster.clusterOptions("/dev/shm/ohb-hdfs-tiers", "build/ohb-hdfs-tiers");
        o.put("writers", "2");
        o.put("file-bytes", String.valueOf(128 << 20));
        o.put("block-bytes", String.valueOf(64 << 20));
        o.put("runs", "3");
        o.put("buffer-bytes", String.valueOf(128 << 10));
        o.put("sync-on-close", "false");
        HdfsBench.parseOptions(args, o, "usage: TiersBench --config " + String.join("|", TiersCluster.CONFIGS) + " [--writers N] [--file-bytes N]"
                + " [--block-bytes N] [--runs N] [--buffer-bytes N] [--ram-dir DIR] [--disk-dir DIR] [--sync-on-close true|false]"
                + " [--bb-servers HOST:PORT --bb-max-pending-bytes N (hhh-l-bb)]");
        String config = o.get("config");
        TiersCluster.requireConfig(config);
        int writers = Integer.parseInt(o.get("writers"));
        long fileBytes = Long.parseLong(o.get("file-bytes"));
        long blockBytes = Long.parseLong(o.get("block-bytes"));
        int runs = Integer.parseInt(o.get("runs"));
        int bufferBytes = Integer.parseInt(o.get("buffer-bytes"));
        boolean syncOnClose = Boolean.parseBoolean(o.get("sync-on-close"));

        Map<String, Object> result = new LinkedHashMap<>();
        result.put("writers", writers);
        result.put("file_bytes", fileBytes);
        result.put("block_bytes", blockBytes);
        result.put("runs", runs);
        result.put("sync_on_close", syncOnClose);
        TiersCluster.runAndExit(o, blockBytes, ramBytesPerDataNode(runs, writers, fileBytes, blockBytes), syncOnClose, result,
                "OHB_TIERS_RESULT", "ohb hdfs tiers", (cluster, fs) -> {
                    TiersCluster.makeDir(fs, DIR, config);
                    return measure(cluster, fs, config, writers, fileBytes, runs, bufferBytes, result);
                });
    }

    /** Each DataNode's RAM tier: every block of the runs and of the warm-up files ({@link TiersCluster#ramBytesPerDataNode}). */
    static long ramBytesPerDataNode(int runs, int writers, long fileBytes, long blockBytes) {
        long blocksPerFile = (fileBytes + blockBytes - 1) / blockBytes;
        return TiersCluster.ramBytesPerDataNode((long) (runs + 1) * writers * blocksPerFile, blockBytes); // + the warm-up files
    }

    /** The runs, then the placement check; returns null or why the run failed. */
    private static String measure(MiniDFSCluster cluster, DistributedFileSystem fs, String config, int writers, long fileBytes,
            int runs, int bufferBytes, Map<String, Object> result) throws Exception {
        double[] ackedMbS = new double[runs];
        double[] persistedMbS = new double[runs];
        double[] readMbS = new double[runs];
        Map<Integer, Long> crcs = new LinkedHashMap<>();
        long persistWaitMsMax = 0;
        ExecutorService pool = Executors.newFixedThreadPool(writers);
        try {
            // One untimed file per writer first (class loading, JIT, the pipelines' first connections).
            List<Future<Long>> warmUp = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                Path path = new Path(DIR, "warm-up-" + w);
                byte[] source = source(-1 - w);
                warmUp.add(pool.submit(() -> write(fs, path, fileBytes, source)));
            }
            for (Future<Long> f : warmUp) {
                f.get();
            }
            for (int run = 0; run < runs; run++) {
                byte[][] sources = new byte[writers][];
                for (int w = 0; w < writers; w++) {
                    sources[w] = source(run * writers + w);
                }
                long start = System.nanoTime();
                Map<Integer, Future<Long>> written = new LinkedHashMap<>();
                for (int w = 0; w < writers; w++) {
                    int f = run * writers + w;
                    byte[] source = sources[w];
                    written.put(f, pool.submit(() -> write(fs, file(f), fileBytes, source)));
                }
                for (Map.Entry<Integer, Future<Long>> e : written.entrySet()) {
                    crcs.put(e.getKey(), e.getValue().get());
                }
                long acked = System.nanoTime();
                // Durable as vanilla HOT once no replica is left only in RAM or (HHH-L-BB) in the burst buffer.
                String notPersisted = TiersCluster.awaitPersisted(cluster, config);
                if (notPersisted != null) {
                    return "run " + run + ": " + notPersisted;
                }
                long persisted = System.nanoTime();
                double bytes = (double) writers * fileBytes;
                ackedMbS[run] = bytes / 1e6 / ((acked - start) / 1e9);
                persistedMbS[run] = bytes / 1e6 / ((persisted - start) / 1e9);
                persistWaitMsMax = Math.max(persistWaitMsMax, (persisted - acked) / 1_000_000);
            }
            for (int run = 0; run < runs; run++) {
                long start = System.nanoTime();
                List<Future<HdfsBench.Read>> reads = new ArrayList<>();
                for (int w = 0; w < writers; w++) {
                    int f = run * writers + w;
                    reads.add(pool.submit(() -> HdfsBench.readAll(fs, file(f), bufferBytes)));
                }
                long bytes = 0;
                for (int w = 0; w < writers; w++) {
                    HdfsBench.Read read = reads.get(w).get();
                    int f = run * writers + w;
                    if (read.crc() != crcs.get(f) || read.bytes() != fileBytes) {
                        return "file " + f + ": " + read.bytes() + " bytes of CRC " + read.crc() + " read, " + fileBytes + " of CRC "
                                + crcs.get(f) + " written";
                    }
                    bytes += read.bytes();
                }
                readMbS[run] = bytes / 1e6 / ((System.nanoTime() - start) / 1e9);
            }
        } finally {
            pool.shutdownNow();
        }
        put(result, "write_mb_s", ackedMbS);
        put(result, "write_persisted_mb_s", persistedMbS);
        put(result, "read_mb_s", readMbS);
        result.put("persist_wait_ms_max", persistWaitMsMax);
        long[] ram = TiersCluster.ramCounters(cluster);
        result.put("ram_blocks_written", ram[0]);
        result.put("ram_blocks_persisted", ram[1]);
        List<Path> files = new ArrayList<>();
        for (int f = 0; f < runs * writers; f++) {
            files.add(file(f));
        }
        return TiersCluster.checkPlacement(cluster, fs, config, files, DIR, result);
    }

    /** A file's source bytes, generated before the timed write: seeded random, a chunk and a shift window long. */
    private static byte[] source(long seed) {
        byte[] bytes = new byte[CHUNK_BYTES + SHIFT_BYTES_MAX];
        new java.util.Random(seed).nextBytes(bytes);
        return bytes;
    }

    /**
     * Writes {@code bytes} from {@code source} with replication 3, chunk {@code i} from a shifting offset so that
     * no two neighbouring chunks are equal; returns their CRC32. Generating random bytes in the timed loop
     * (HdfsBench's {@code write}) took a fifth of the JVM's CPU samples in JFR, on a machine where the
     * pipeline's three DataNodes share two cores with the writers.
     */
    private static long write(DistributedFileSystem fs, Path path, long bytes, byte[] source) throws IOException {
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(path, TiersCluster.REPLICATION)) {
            long chunk = 0;
            for (long left = bytes; left > 0; chunk++) {
                int n = (int) Math.min(CHUNK_BYTES, left);
                int offset = (int) (chunk * 4099 % SHIFT_BYTES_MAX);
                out.write(source, offset, n);
                crc.update(source, offset, n);
                left -= n;
            }
        }
        return crc.getValue();
    }

    /** Median and maximum of one figure over the runs. */
    private static void put(Map<String, Object> result, String key, double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        result.put(key, sorted[sorted.length / 2]);
        result.put(key + "_max", sorted[sorted.length - 1]);
    }

    private static Path file(int index) {
        return new Path(DIR, "file-" + index);
    }
}
