package io.slipstream.mapreduce.it;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;

/** Inputs, job settings and output comparison for the integration tests. */
final class Jobs {
    static final String PLUGIN = "io.slipstream.mapreduce.SlipstreamShuffle";

    private Jobs() {}

    /** The plugin on for this job, never falling back (a test must know which shuffle ran). */
    static Configuration withPlugin(Configuration base) {
        Configuration conf = new Configuration(base);
        conf.set("mapreduce.job.reduce.shuffle.consumer.plugin.class", PLUGIN);
        conf.set("slipstream.mapreduce.fallback", "never");
        return conf;
    }

    /** Text files of words drawn from a Zipf-like vocabulary (a few frequent words, a long tail). */
    static void writeText(FileSystem fs, Path dir, int files, int linesPerFile, long seed) throws IOException {
        Random random = new Random(seed);
        for (int f = 0; f < files; f++) {
            StringBuilder text = new StringBuilder();
            for (int line = 0; line < linesPerFile; line++) {
                for (int w = 0; w < 12; w++) {
                    int rank = (int) Math.min(50_000, Math.floor(1 / Math.pow(1 - random.nextDouble(), 1.2)));
                    text.append("w").append(Integer.toString(rank, 36)).append(' ');
                }
                text.append('\n');
            }
            try (OutputStream out = fs.create(new Path(dir, "part-" + f + ".txt"))) {
                out.write(text.toString().getBytes(StandardCharsets.UTF_8));
            }
        }
    }

    /** A digest of every part file of an output directory, in name order (empty parts included). */
    static String digest(FileSystem fs, Path outputDir) throws IOException {
        List<Path> parts = new ArrayList<>();
        for (FileStatus status : fs.listStatus(outputDir)) {
            if (status.getPath().getName().startsWith("part-")) {
                parts.add(status.getPath());
            }
        }
        parts.sort(null);
        if (parts.isEmpty()) {
            throw new IOException("no part files in " + outputDir);
        }
        try {
            MessageDigest digest = MessageDigest.getInstance("SHA-256");
            for (Path part : parts) {
                digest.update(part.getName().getBytes(StandardCharsets.UTF_8));
                try (InputStream in = fs.open(part)) {
                    byte[] buffer = new byte[1 << 16];
                    for (int n; (n = in.read(buffer)) > 0; ) {
                        digest.update(buffer, 0, n);
                    }
                }
            }
            return parts.size() + " parts, sha256 " + HexFormat.of().formatHex(digest.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Every line of an output directory's part files, as key to the rest of the line. */
    static java.util.Map<String, String> lines(FileSystem fs, Path outputDir) throws IOException {
        java.util.Map<String, String> lines = new java.util.TreeMap<>();
        for (FileStatus status : fs.listStatus(outputDir)) {
            if (!status.getPath().getName().startsWith("part-")) {
                continue;
            }
            try (InputStream in = fs.open(status.getPath())) {
                for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
                    if (!line.isEmpty()) {
                        int tab = line.indexOf('\t');
                        if (lines.put(line.substring(0, tab), line.substring(tab + 1)) != null) {
                            throw new IOException("key " + line.substring(0, tab) + " written twice in " + outputDir);
                        }
                    }
                }
            }
        }
        return lines;
    }

    static long counter(Counters counters, String group, String name) {
        return counters.findCounter(group, name).getValue();
    }

    static long taskCounter(Job job, String name) throws IOException {
        return counter(job.getCounters(), "org.apache.hadoop.mapreduce.TaskCounter", name);
    }

    static long fabricCounter(Counters counters, String name) {
        return counter(counters, "io.slipstream.mapreduce.SlipstreamCounter", name);
    }
}
