package io.slipstream.ohb.hdfs;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * The JVM side of {@code ohb hdfs tiers dfsio}: Hadoop's own TestDFSIO (the 3.4.2 tests jar, unmodified, run as
 * {@link DfsioBench} runs it: ToolRunner, LocalJobRunner, HDFS's own client) {@code -write} then {@code -read} on one
 * of {@code ohb hdfs tiers}' storage configurations, on the same mini cluster {@link TiersBench} uses for it
 * ({@link TiersCluster}). TestDFSIO keeps everything under its base directory, the {@code test.build.data} setting
 * (default {@code /benchmarks/TestDFSIO}): control files in {@code io_control}, the measured files in
 * {@code io_data}, the jobs' outputs in {@code io_write} and {@code io_read}. The base directory here is
 * {@link #BASE}, which carries the configuration's storage policy (LAZY_PERSIST for lazy-persist and HHH-M, ALL_SSD
 * for all-ssd), so every file TestDFSIO writes inherits it.
 *
 * <p>Between the write and the read it waits until every RAM replica was persisted (and for HHH-L-BB every replica
 * flushed out of the burst buffer), as TiersBench does before its reads; the wait is reported, TestDFSIO's own
 * write figure ends at {@code close()}. After the read, every block of every measured file must have its replicas
 * on the tiers the configuration promises (and for HHH-L-BB every parallel file system replica must have gone
 * through the burst buffer), else the run fails. Prints TestDFSIO's result file and one
 * {@code OHB_TIERS_DFSIO {json}} line; exits 1 on a failure.
 */
public final class TiersDfsioBench {
    /** TestDFSIO's base directory, with the configuration's storage policy. */
    static final Path BASE = new Path("/ohb-tiers-dfsio");

    private TiersDfsioBench() {}

    public static void main(String[] args) {
        Map<String, String> o = TiersCluster.clusterOptions("/dev/shm/ohb-hdfs-tiers-dfsio", "build/ohb-hdfs-tiers-dfsio");
        o.put("files", "2");
        o.put("file-bytes", String.valueOf(16 << 20));
        o.put("block-bytes", String.valueOf(4 << 20));
        o.put("maps", "2");
        o.put("ram-bytes-per-datanode", "0");
        o.put("sync-on-close", "false");
        o.put("warmup-passes", "0");
        HdfsBench.parseOptions(args, o, "usage: TiersDfsioBench --config " + String.join("|", TiersCluster.CONFIGS)
                + " --ram-bytes-per-datanode N [--files N] [--file-bytes N] [--block-bytes N] [--maps N] [--ram-dir DIR] [--disk-dir DIR] [--sync-on-close true|false]"
                + " [--warmup-passes N]"
                + " [--bb-servers HOST:PORT --bb-max-pending-bytes N (hhh-l-bb)]");
        String config = o.get("config");
        TiersCluster.requireConfig(config);
        int files = Integer.parseInt(o.get("files"));
        long fileBytes = Long.parseLong(o.get("file-bytes"));
        long blockBytes = Long.parseLong(o.get("block-bytes"));
        int maps = Integer.parseInt(o.get("maps"));
        // ohb sizes the RAM tier (it checks the tmpfs has room): TestDFSIO's files and its jobs' own files.
        long ramBytesPerDataNode = Long.parseLong(o.get("ram-bytes-per-datanode"));
        if (ramBytesPerDataNode <= 0) {
            System.err.println("--ram-bytes-per-datanode is required (ohb hdfs tiers dfsio passes it)");
            System.exit(2);
        }
        boolean syncOnClose = Boolean.parseBoolean(o.get("sync-on-close"));
        int warmupPasses = Integer.parseInt(o.get("warmup-passes"));
        java.nio.file.Path diskDir = java.nio.file.Path.of(o.get("disk-dir")).toAbsolutePath();

        Map<String, Object> result = new LinkedHashMap<>();
        result.put("files", files);
        result.put("file_bytes", fileBytes);
        result.put("block_bytes", blockBytes);
        result.put("maps", maps);
        result.put("sync_on_close", syncOnClose);
        result.put("warmup_passes", warmupPasses);
        TiersCluster.runAndExit(o, blockBytes, ramBytesPerDataNode, syncOnClose, result, "OHB_TIERS_DFSIO", "ohb hdfs tiers dfsio",
                (cluster, fs) -> {
                    for (int pass = 0; pass < warmupPasses; pass++) {
                        String failure = warmUp(cluster, fs, config, files, fileBytes, blockBytes, maps, diskDir, pass, result);
                        if (failure != null) {
                            return "warm-up pass " + (pass + 1) + ": " + failure;
                        }
                    }
                    return measure(cluster, fs, config, files, fileBytes, blockBytes, maps, diskDir, result);
                });
    }

    /**
     * One unmeasured pass of the same TestDFSIO write and read, so that the measured pass runs in a JVM whose JIT has
     * compiled HDFS's data path (profiled: in a fresh JVM the C1/C2 compiler threads took 30 % of all samples during
     * the jobs, more than the data path's 20 %), then its files deleted and the DataNodes waited for until none holds
     * a replica of them and each tier's used bytes are back where they were: the measured pass meets the same free
     * space (which HHH's placement weighs) as a pass in a fresh cluster. Its throughput goes into the result as
     * {@code warmup_<phase>_mb_s} (the cold figure), not into the tables.
     */
    private static String warmUp(MiniDFSCluster cluster, DistributedFileSystem fs, String config, int files, long fileBytes,
            long blockBytes, int maps, java.nio.file.Path diskDir, int pass, Map<String, Object> result) throws Exception {
        Path base = new Path("/ohb-tiers-dfsio-warmup");
        Map<String, Long> usedBefore = TiersCluster.usedBytesByTier(cluster);
        TiersCluster.makeDir(fs, base, config);
        java.nio.file.Path resFile = diskDir.resolve("TestDFSIO_warmup_results.log");
        java.nio.file.Files.deleteIfExists(resFile);
        List<String> generic = new ArrayList<>(DfsioBench.genericOptions("vanilla", cluster.getURI().toString(), blockBytes, maps, diskDir));
        generic.addAll(List.of("-D", "test.build.data=" + base));
        for (String phase : List.of("write", "read")) {
            int rc = DfsioBench.runTestDfsio(generic, phase, files, fileBytes, resFile, "ohb hdfs tiers dfsio (warm-up)");
            if (rc != 0) {
                return "TestDFSIO -" + phase + " exited with " + rc;
            }
            if (phase.equals("write")) {
                String notPersisted = TiersCluster.awaitPersisted(cluster, config);
                if (notPersisted != null) {
                    return "after TestDFSIO -write: " + notPersisted;
                }
            }
        }
        if (pass == 0) {
            DfsioBench.throughputs(resFile).forEach((phase, mbS) -> result.put("warmup_" + phase + "_mb_s", mbS));
        }
        return TiersCluster.deleteAndAwaitFreed(cluster, fs, base, usedBefore);
    }

    /** TestDFSIO's write, the persist wait, its read, then the placement check; null or why the run failed. */
    private static String measure(MiniDFSCluster cluster, DistributedFileSystem fs, String config, int files, long fileBytes,
            long blockBytes, int maps, java.nio.file.Path diskDir, Map<String, Object> result) throws Exception {
        TiersCluster.makeDir(fs, BASE, config);
        java.nio.file.Path resFile = diskDir.resolve("TestDFSIO_results.log");
        // HDFS's own client: every storage configuration here is the cluster's (placement, DataNode volumes).
        List<String> generic = new ArrayList<>(DfsioBench.genericOptions("vanilla", cluster.getURI().toString(), blockBytes, maps, diskDir));
        generic.addAll(List.of("-D", "test.build.data=" + BASE));
        try {
            for (String phase : List.of("write", "read")) {
                int rc = DfsioBench.runTestDfsio(generic, phase, files, fileBytes, resFile, "ohb hdfs tiers dfsio");
                result.put(phase + "_exit_code", rc);
                if (rc != 0) {
                    return "TestDFSIO -" + phase + " exited with " + rc;
                }
                if (phase.equals("write")) {
                    long start = System.nanoTime();
                    String notPersisted = TiersCluster.awaitPersisted(cluster, config);
                    if (notPersisted != null) {
                        return "after TestDFSIO -write: " + notPersisted;
                    }
                    result.put("persist_wait_ms", (System.nanoTime() - start) / 1_000_000);
                    // The figures the wait was about (the read's own control files and output come later).
                    long[] ram = TiersCluster.ramCounters(cluster);
                    result.put("ram_blocks_written", ram[0]);
                    result.put("ram_blocks_persisted", ram[1]);
                }
            }
        } finally {
            DfsioBench.printResults(resFile);
        }
        Path dataDir = new Path(BASE, "io_data");
        List<Path> measured = new ArrayList<>();
        for (FileStatus file : fs.listStatus(dataDir)) {
            if (file.getLen() != fileBytes) {
                return file.getPath() + ": " + file.getLen() + " bytes, TestDFSIO was asked for " + fileBytes;
            }
            measured.add(Path.getPathWithoutSchemeAndAuthority(file.getPath()));
        }
        if (measured.size() != files) {
            return measured.size() + " files in " + dataDir + ", TestDFSIO was asked for " + files;
        }
        return TiersCluster.checkPlacement(cluster, fs, config, measured, dataDir, result);
    }
}
