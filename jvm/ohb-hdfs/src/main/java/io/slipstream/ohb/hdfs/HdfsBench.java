package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.SlipstreamDataNodePlugin;
import io.slipstream.hdfs.SlipstreamDistributedFileSystem;
import io.slipstream.hdfs.SlipstreamHdfsCounters;
import io.slipstream.hdfs.SlipstreamReplicaAccessorBuilder;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.client.HdfsDataInputStream;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * The JVM side of {@code ohb hdfs swl|srl|rrl|swt|srt}: one configuration per JVM, a mini HDFS
 * cluster of a NameNode and three DataNodes (replication 3) in it, and the reader or writer in a JVM
 * of its own started by it ({@code --client own-jvm}, the default), as HDFS's clients run: not in a
 * DataNode's process, whose fabric node (one UCX worker per process, shared by the three DataNodes)
 * the client's would otherwise share; {@code --client in-process} keeps the reader or writer in the
 * cluster's JVM (the layout before session 38). Configurations: {@code vanilla} (HDFS's TCP reader and writer, short-circuit off),
 * {@code plugin} (the Slipstream DataNode plugin, replica accessor and
 * {@code SlipstreamDistributedFileSystem}, fallback never), {@code plugin-tcp} (the same, fabric
 * forced to TCP), {@code vanilla-sc} (short-circuit reads on: the local-read reference). Tests,
 * after OHB's HDFS suite:
 * <ul>
 *   <li>{@code swl}: create a file, write it sequentially and close it; one file per iteration;</li>
 *   <li>{@code swt}: {@code readers} threads each write their own file; aggregate MB/s;</li>
 *   <li>{@code srl}: open a file and read it sequentially to the end; one file per iteration;</li>
 *   <li>{@code rrl}: open a file and read {@code read-bytes} at every {@code seek-bytes} offset of it, in
 *       a random order; one file per iteration;</li>
 *   <li>{@code srt}: {@code readers} threads each read their own file sequentially; aggregate MB/s.</li>
 * </ul>
 * Every file's contents are checked (CRC32) on an untimed read after the timed ones, so that a
 * timed read is the file's first since it was written. Prints one {@code OHB_HDFS_RESULT {json}}
 * line; exits 1 when a read or write fails
 * or the configuration's path was not used (plugin: every byte over the fabric; vanilla-sc:
 * short-circuit bytes read).
 */
public final class HdfsBench {
    private HdfsBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        o.put("test", "srl");
        o.put("config", "vanilla");
        o.put("file-bytes", String.valueOf(1 << 20));
        o.put("block-bytes", String.valueOf(128 << 20));
        o.put("readers", "1");
        o.put("seek-bytes", String.valueOf(64 << 10));
        o.put("read-bytes", String.valueOf(4 << 10));
        o.put("iterations", "20");
        o.put("buffer-bytes", String.valueOf(128 << 10));
        o.put("work", "build/ohb-hdfs");
        o.put("set", "");
        o.put("client", "own-jvm");
        o.put("namenode", "");
        parseOptions(args, o, "usage: HdfsBench --test swl|srl|rrl|swt|srt --config vanilla|plugin|plugin-tcp|vanilla-sc [--file-bytes N]"
                + " [--block-bytes N] [--readers N] [--seek-bytes N] [--read-bytes N] [--iterations N] [--buffer-bytes N] [--work DIR]"
                + " [--set key=value[,key=value...]] [--client own-jvm|in-process]"
                + " (--set: Hadoop or slipstream.hdfs.* settings on top of the configuration's, for A/B runs)");
        String test = o.get("test");
        String config = o.get("config");
        long fileBytes = Long.parseLong(o.get("file-bytes"));
        long blockBytes = Long.parseLong(o.get("block-bytes"));
        int readers = Integer.parseInt(o.get("readers"));
        int iterations = Integer.parseInt(o.get("iterations"));
        int bufferBytes = Integer.parseInt(o.get("buffer-bytes"));
        long seekBytes = Long.parseLong(o.get("seek-bytes"));
        int readBytes = Integer.parseInt(o.get("read-bytes"));

        String client = o.get("client");
        if (!client.equals("own-jvm") && !client.equals("in-process") && !client.equals("child")) {
            System.err.println("--client own-jvm|in-process");
            System.exit(2);
        }
        // The client JVM's configuration is the cluster's, without the cluster's directories (the cluster's JVM made them).
        Configuration conf = conf(config, blockBytes, client.equals("child") ? null : o.get("work"));
        for (String setting : o.get("set").split(",")) {
            if (!setting.isBlank()) {
                String[] kv = setting.split("=", 2);
                if (kv.length != 2) {
                    System.err.println("--set: " + setting + " is not key=value");
                    System.exit(2);
                }
                conf.set(kv[0].trim(), kv[1].trim());
            }
        }
        boolean ok = true;
        String failure = "";
        Map<String, Object> result = new LinkedHashMap<>();
        MiniDFSCluster cluster = null;
        try {
            FileSystem fs;
            if (client.equals("child")) {
                exitWithParent();
                // The reader or writer's JVM: HDFS's client of the cluster JVM's NameNode.
                conf.set(CommonConfigurationKeysPublic.FS_DEFAULT_NAME_KEY, o.get("namenode"));
                fs = FileSystem.get(conf);
            } else {
                cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3).build();
                cluster.waitActive();
                if (client.equals("own-jvm")) {
                    int exit = runClientJvm(args, cluster.getURI().toString());
                    cluster.shutdown();
                    System.exit(exit);
                }
                fs = cluster.getFileSystem();
            }
            String why = test.startsWith("sw") ? writeTest(fs, config, test, fileBytes, readers, iterations, bufferBytes, result)
                    : readTest(fs, test, config, fileBytes, readers, iterations, bufferBytes, seekBytes, readBytes, result);
            if (why != null) {
                ok = false;
                failure = why;
            }
        } catch (Exception e) {
            ok = false;
            failure = config + ": " + e;
            e.printStackTrace();
        } finally {
            if (cluster != null) {
                cluster.shutdown();
            }
        }
        result.put("client", client.equals("child") ? "own-jvm" : client);
        result.put("test", test);
        result.put("config", config);
        result.put("file_bytes", fileBytes);
        result.put("block_bytes", blockBytes);
        result.put("readers", readers);
        result.put("iterations", iterations);
        result.put("seek_bytes", seekBytes);
        result.put("read_bytes", readBytes);
        result.put("ok", ok);
        result.put("failure", failure);
        result.put("counters", SlipstreamHdfsCounters.summary());
        System.out.println("OHB_HDFS_RESULT " + json(result));
        if (!ok) {
            System.err.println("ohb hdfs " + test + ": " + failure);
        }
        System.exit(ok ? 0 : 1);
    }

    /** srl, rrl, srt on files written first (untimed; CRCs checked after); returns null or why the run failed. */
    private static String readTest(FileSystem fs, String test, String config, long fileBytes, int readers, int iterations, int bufferBytes,
            long seekBytes, int readBytes, Map<String, Object> result) throws Exception {
        int files = test.equals("srt") ? readers : iterations + 2;
        long[] crcs = new long[files];
        byte[] chunk = source();
        for (int f = 0; f < files; f++) {
            crcs[f] = write(fs, file(f), fileBytes, f, chunk);
        }
        long fabricBefore = SlipstreamHdfsCounters.bytesRead();
        long bytesMeasured = 0;
        switch (test) {
            case "srl", "rrl" -> {
                // Files 0 and 1 warm up (untimed), 2.. are timed, each read once: a fresh open per iteration.
                for (int f = 0; f < 2; f++) {
                    bytesMeasured += test.equals("srl") ? readAll(fs, file(f), bufferBytes).bytes : randomReads(fs, file(f), fileBytes, seekBytes, readBytes, f);
                }
                double[] ms = new double[iterations];
                for (int i = 0; i < iterations; i++) {
                    long start = System.nanoTime();
                    bytesMeasured += test.equals("srl") ? readAll(fs, file(i + 2), bufferBytes).bytes
                            : randomReads(fs, file(i + 2), fileBytes, seekBytes, readBytes, i);
                    ms[i] = (System.nanoTime() - start) / 1e6;
                }
                Arrays.sort(ms);
                result.put("latency_ms_p50", ms[ms.length / 2]);
                result.put("latency_ms_p99", ms[Math.min(ms.length - 1, (int) Math.ceil(ms.length * 0.99) - 1)]);
                result.put("latency_ms_min", ms[0]);
            }
            case "srt" -> {
                double[] mbs = new double[iterations];
                ExecutorService pool = Executors.newFixedThreadPool(readers);
                try {
                    for (int i = 0; i < iterations; i++) {
                        long start = System.nanoTime();
                        List<Future<Read>> reads = new ArrayList<>();
                        for (int r = 0; r < readers; r++) {
                            int f = r;
                            reads.add(pool.submit(() -> readAll(fs, file(f), bufferBytes)));
                        }
                        long bytes = 0;
                        for (Future<Read> read : reads) {
                            bytes += read.get().bytes;
                        }
                        mbs[i] = bytes / 1e6 / ((System.nanoTime() - start) / 1e9);
                        bytesMeasured += bytes;
                    }
                } finally {
                    pool.shutdownNow();
                }
                Arrays.sort(mbs);
                result.put("throughput_mb_s", mbs[mbs.length / 2]);
                result.put("throughput_mb_s_max", mbs[mbs.length - 1]);
            }
            default -> throw new IllegalArgumentException("unknown test " + test);
        }
        long fabricBytes = SlipstreamHdfsCounters.bytesRead() - fabricBefore;
        // Checked after the timed reads, so that each timed read is a file's first since it was
        // written, as a fresh reader's: no reader-side cache (the plugin keeps a file's block
        // locations for 10 s) is warmed by a pass before.
        long sc = 0;
        for (int f = 0; f < files; f++) {
            Read read = readAll(fs, file(f), bufferBytes);
            sc += read.shortCircuitBytes;
            if (read.crc != crcs[f]) {
                throw new IOException("file " + f + ": CRC " + read.crc + ", written " + crcs[f]);
            }
        }
        result.put("bytes_measured", bytesMeasured);
        result.put("fabric_bytes", fabricBytes);
        result.put("short_circuit_bytes_check_pass", sc);
        if (config.startsWith("plugin") && fabricBytes < bytesMeasured) {
            return config + ": " + fabricBytes + " of " + bytesMeasured + " bytes over the fabric (" + SlipstreamHdfsCounters.summary() + ")";
        }
        if (!config.startsWith("plugin") && fabricBytes != 0) {
            return config + ": " + fabricBytes + " bytes over the fabric in a vanilla configuration";
        }
        if (config.equals("vanilla-sc") && sc == 0) {
            return "vanilla-sc: no byte was read by short-circuit";
        }
        return null;
    }

    /**
     * swl: 2 untimed files, then one file created, written and closed per iteration (latency);
     * swt: {@code writers} threads each write their own file per iteration (aggregate MB/s). Every
     * file is read back untimed and its CRC checked. Returns null or why the run failed.
     */
    private static String writeTest(FileSystem fs, String config, String test, long fileBytes, int writers, int iterations, int bufferBytes,
            Map<String, Object> result) throws Exception {
        long fabricBefore = SlipstreamHdfsCounters.bytesWritten();
        Map<Integer, Long> crcs = new LinkedHashMap<>();
        long bytesMeasured = 0;
        byte[][] chunks = new byte[writers][];
        for (int w = 0; w < writers; w++) {
            chunks[w] = source();
        }
        byte[] chunk = chunks[0];
        if (test.equals("swl")) {
            for (int f = 0; f < 2; f++) {
                crcs.put(f, write(fs, file(f), fileBytes, f, chunk));
            }
            double[] ms = new double[iterations];
            for (int i = 0; i < iterations; i++) {
                long start = System.nanoTime();
                crcs.put(i + 2, write(fs, file(i + 2), fileBytes, i + 2, chunk));
                ms[i] = (System.nanoTime() - start) / 1e6;
                bytesMeasured += fileBytes;
            }
            Arrays.sort(ms);
            result.put("latency_ms_p50", ms[ms.length / 2]);
            result.put("latency_ms_p99", ms[Math.min(ms.length - 1, (int) Math.ceil(ms.length * 0.99) - 1)]);
            result.put("latency_ms_min", ms[0]);
        } else {
            double[] mbs = new double[iterations];
            ExecutorService pool = Executors.newFixedThreadPool(writers);
            try {
                for (int i = 0; i < iterations; i++) {
                    long start = System.nanoTime();
                    Map<Integer, Future<Long>> written = new LinkedHashMap<>();
                    for (int w = 0; w < writers; w++) {
                        int f = i * writers + w;
                        byte[] own = chunks[w];
                        written.put(f, pool.submit(() -> write(fs, file(f), fileBytes, f, own)));
                    }
                    for (Map.Entry<Integer, Future<Long>> e : written.entrySet()) {
                        crcs.put(e.getKey(), e.getValue().get());
                    }
                    mbs[i] = writers * fileBytes / 1e6 / ((System.nanoTime() - start) / 1e9);
                    bytesMeasured += writers * fileBytes;
                }
            } finally {
                pool.shutdownNow();
            }
            Arrays.sort(mbs);
            result.put("throughput_mb_s", mbs[mbs.length / 2]);
            result.put("throughput_mb_s_max", mbs[mbs.length - 1]);
        }
        long fabricBytes = SlipstreamHdfsCounters.bytesWritten() - fabricBefore;
        result.put("bytes_measured", bytesMeasured);
        result.put("fabric_bytes", fabricBytes);
        for (Map.Entry<Integer, Long> e : crcs.entrySet()) {
            Read read = readAll(fs, file(e.getKey()), bufferBytes);
            if (read.crc != e.getValue() || read.bytes != fileBytes) {
                return "file " + e.getKey() + ": " + read.bytes + " bytes of CRC " + read.crc + " read, " + fileBytes + " of CRC " + e.getValue()
                        + " written";
            }
        }
        if (config.startsWith("plugin") && fabricBytes < bytesMeasured) {
            return config + ": " + fabricBytes + " of " + bytesMeasured + " bytes written over the fabric (" + SlipstreamHdfsCounters.summary() + ")";
        }
        if (!config.startsWith("plugin") && fabricBytes != 0) {
            return config + ": " + fabricBytes + " bytes written over the fabric in a vanilla configuration";
        }
        return null;
    }

    private static Configuration conf(String config, long blockBytes, String work) throws IOException {
        Configuration conf = new HdfsConfiguration();
        if (work != null) {
            Path base = Files.createDirectories(Path.of(work)).resolve(config);
            deleteTree(base);
            conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        }
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, blockBytes);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        switch (config) {
            case "vanilla" -> { }
            case "plugin", "plugin-tcp" -> {
                conf.set("dfs.datanode.plugins", SlipstreamDataNodePlugin.class.getName());
                conf.set("dfs.client.replica.accessor.builder.classes", SlipstreamReplicaAccessorBuilder.class.getName());
                conf.set("fs.hdfs.impl", SlipstreamDistributedFileSystem.class.getName());
                conf.set("slipstream.hdfs.fallback", "never");
                conf.set("slipstream.hdfs.transport", config.equals("plugin-tcp") ? "tcp" : "auto");
            }
            case "vanilla-sc" -> {
                // Maven's Hadoop has no libhadoop (domain sockets), so the local-read reference is
                // HDFS's legacy short-circuit reader: the DataNode hands the client the replica's paths.
                conf.setBoolean("dfs.client.read.shortcircuit", true);
                conf.setBoolean("dfs.client.use.legacy.blockreader.local", true);
                conf.set("dfs.block.local-path-access.user", UserGroupInformation.getCurrentUser().getShortUserName());
            }
            default -> throw new IllegalArgumentException("unknown configuration " + config);
        }
        return conf;
    }

    /**
     * Runs this test's reader or writer in a JVM of its own ({@code --client child}, the same arguments and
     * class path, a 1 GiB heap), a client of {@code nameNode}; its output is passed on as it comes (its
     * {@code OHB_HDFS_RESULT} line is this run's). Returns its exit status; a child that outlives
     * {@link #CLIENT_JVM_TIMEOUT_MINUTES} is killed (status 1).
     */
    private static int runClientJvm(String[] args, String nameNode) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx1g", "-cp", System.getProperty("java.class.path"), HdfsBench.class.getName()));
        command.addAll(Arrays.asList(args));
        command.addAll(List.of("--client", "child", "--namenode", nameNode));
        Process child = new ProcessBuilder(command).inheritIO().start();
        try {
            if (!child.waitFor(CLIENT_JVM_TIMEOUT_MINUTES, java.util.concurrent.TimeUnit.MINUTES)) {
                System.err.println("ohb hdfs: the client JVM ran longer than " + CLIENT_JVM_TIMEOUT_MINUTES + " minutes: killed");
                return 1;
            }
            return child.exitValue();
        } finally {
            child.destroyForcibly();
        }
    }

    static final int CLIENT_JVM_TIMEOUT_MINUTES = 20;

    /**
     * The client JVM exits when the cluster's JVM is gone (ohb kills that one with SIGKILL on a timeout or its
     * own end, which no shutdown hook sees): a daemon thread looks once a second.
     */
    private static void exitWithParent() {
        ProcessHandle parent = ProcessHandle.current().parent().orElse(null);
        Thread watch = new Thread(() -> {
            while (parent != null && parent.isAlive()) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
            System.err.println("ohb hdfs: the cluster's JVM is gone: the client JVM exits");
            Runtime.getRuntime().halt(3);
        }, "ohb-parent-watch");
        watch.setDaemon(true);
        watch.start();
    }

    private static org.apache.hadoop.fs.Path file(int index) {
        return new org.apache.hadoop.fs.Path("/ohb/file-" + index);
    }

    /** Writes {@code bytes} seeded random bytes; returns their CRC32. */
    /** Bytes per chunk a file is written from: {@link #source()}. */
    private static final int CHUNK_BYTES = 1 << 20;

    /**
     * What files are written from, made before any timed write: 1 MiB of seeded random bytes, one
     * array per writing thread. Each chunk written is first stamped with its file's seed and its
     * index (the first 16 bytes), so no two chunks are alike; the rest repeats, as in TestDFSIO,
     * whose writers send one buffer filled once. Generating every byte inside the timed write
     * (java.util.Random: about 2.8 ms per MiB here, profiled) had been part of each swl latency and
     * of swt's CPU, for every configuration.
     */
    private static byte[] source() {
        byte[] bytes = new byte[CHUNK_BYTES];
        new Random(0x5157).nextBytes(bytes);
        return bytes;
    }

    /** Writes {@code bytes} to a new file from {@code chunk} (a {@link #source()}, stamped per chunk here); returns their CRC32. */
    private static long write(FileSystem fs, org.apache.hadoop.fs.Path path, long bytes, long seed, byte[] chunk) throws IOException {
        ByteBuffer stamp = ByteBuffer.wrap(chunk);
        CRC32 crc = new CRC32();
        try (FSDataOutputStream out = fs.create(path, (short) 3)) {
            long index = 0;
            for (long left = bytes; left > 0;) {
                int n = (int) Math.min(chunk.length, left);
                stamp.putLong(0, seed).putLong(8, index++);
                out.write(chunk, 0, n);
                crc.update(chunk, 0, n);
                left -= n;
            }
        }
        return crc.getValue();
    }

    record Read(long bytes, long crc, long shortCircuitBytes) {
    }

    static Read readAll(FileSystem fs, org.apache.hadoop.fs.Path path, int bufferBytes) throws IOException {
        byte[] buf = new byte[bufferBytes];
        CRC32 crc = new CRC32();
        long bytes = 0;
        try (FSDataInputStream in = fs.open(path)) {
            for (int n; (n = in.read(buf)) > 0;) {
                crc.update(buf, 0, n);
                bytes += n;
            }
            long sc = in instanceof HdfsDataInputStream h ? h.getReadStatistics().getTotalShortCircuitBytesRead() : 0;
            return new Read(bytes, crc.getValue(), sc);
        }
    }

    /** Reads {@code readBytes} at every {@code seekBytes} of the file, in a seeded random order; returns the bytes read. */
    private static long randomReads(FileSystem fs, org.apache.hadoop.fs.Path path, long fileBytes, long seekBytes, int readBytes, long seed)
            throws IOException {
        List<Long> offsets = new ArrayList<>();
        for (long off = 0; off + readBytes <= fileBytes; off += seekBytes) {
            offsets.add(off);
        }
        Collections.shuffle(offsets, new Random(seed));
        byte[] buf = new byte[readBytes];
        try (FSDataInputStream in = fs.open(path)) {
            for (long off : offsets) {
                in.seek(off);
                in.readFully(buf);
            }
        }
        return (long) offsets.size() * readBytes;
    }

    /**
     * {@code --key value} pairs into {@code options}, whose entries are the keys known and their defaults; an unknown
     * key or one without a value prints {@code usage} and exits 2.
     */
    static void parseOptions(String[] args, Map<String, String> options, String usage) {
        for (int i = 0; i < args.length; i++) {
            String key = args[i].replaceFirst("^--", "");
            if (!options.containsKey(key) || i + 1 >= args.length) {
                System.err.println(usage);
                System.exit(2);
            }
            options.put(key, args[++i]);
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (Files.exists(dir)) {
            try (var paths = Files.walk(dir)) {
                for (Path p : paths.sorted(Collections.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
    }

    static String json(Map<String, Object> map) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> e : map.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append('"').append(e.getKey()).append("\":");
            Object v = e.getValue();
            if (v instanceof Number || v instanceof Boolean) {
                out.append(v instanceof Double d ? String.format(Locale.ROOT, "%.4f", d) : v.toString());
            } else if (v instanceof double[] values) {
                out.append('[');
                for (int i = 0; i < values.length; i++) {
                    out.append(i > 0 ? "," : "").append(String.format(Locale.ROOT, "%.4f", values[i]));
                }
                out.append(']');
            } else {
                out.append('"').append(v.toString().replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
        }
        return out.append('}').toString();
    }
}
