package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.examples.terasort.TeraGen;
import org.apache.hadoop.examples.terasort.TeraSort;
import org.apache.hadoop.examples.terasort.TeraValidate;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.util.ToolRunner;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A MapReduce job reading and writing HDFS through the plugin, as an operator checks a cluster: TeraGen writes
 * its input, TeraSort reads it and writes the sorted output, TeraValidate reads that, all with
 * {@code fs.hdfs.impl=SlipstreamDistributedFileSystem} and the replica accessor (fallback never), in Hadoop's
 * local job runner against a real mini cluster whose DataNodes run the plugin. The output must be in order
 * with the input's checksum (the sum of every record's CRC-32), and the plugin's counters must show the
 * bytes went over the fabric.
 */
class HdfsMapReduceTest {
    private static final int RECORDS = 30_000; // 3 MB, several 256 KiB blocks per file
    private static MiniDFSCluster cluster;
    private static Configuration jobs;
    private static FileSystem fs;

    @BeforeAll
    static void start() throws Exception {
        Configuration conf = TestClusters.conf(false);
        cluster = TestClusters.start(conf, "mapreduce");
        jobs = new Configuration(conf);
        jobs.set("fs.defaultFS", cluster.getFileSystem().getUri().toString());
        jobs.set("fs.hdfs.impl", SlipstreamDistributedFileSystem.class.getName());
        jobs.setBoolean("fs.hdfs.impl.disable.cache", true);
        jobs.set("mapreduce.framework.name", "local");
        java.nio.file.Path local = Files.createTempDirectory("slipstream-hdfs-mr");
        jobs.set("hadoop.tmp.dir", local.toString());
        jobs.set("mapreduce.cluster.local.dir", local.resolve("local").toString());
        fs = FileSystem.get(jobs);
        assertTrue(fs instanceof SlipstreamDistributedFileSystem, "jobs use the plugin's file system: " + fs.getClass());
    }

    @AfterAll
    static void stop() throws Exception {
        if (fs != null) {
            fs.close();
        }
        if (cluster != null) {
            cluster.shutdown();
        }
    }

    @Test
    void teraGenTeraSortTeraValidateReadAndWriteOverTheFabric() throws Exception {
        long writtenBefore = SlipstreamHdfsCounters.bytesWritten();
        long readBefore = SlipstreamHdfsCounters.bytesRead();
        Path in = new Path("/tera/in");
        assertEquals(0, ToolRunner.run(new Configuration(jobs), new TeraGen(),
                new String[] {"-Dmapreduce.job.maps=2", String.valueOf(RECORDS), in.toString()}), "teragen");
        Path out = new Path("/tera/out");
        assertEquals(0, ToolRunner.run(new Configuration(jobs), new TeraSort(),
                new String[] {"-Dmapreduce.job.reduces=2", in.toString(), out.toString()}), "terasort");
        Path report = new Path("/tera/validate");
        assertEquals(0, ToolRunner.run(new Configuration(jobs), new TeraValidate(),
                new String[] {out.toString(), report.toString()}), "teravalidate");
        String validated;
        try (FSDataInputStream stream = fs.open(new Path(report, "part-r-00000"))) {
            validated = new String(stream.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(!validated.contains("misorder") && !validated.contains("error"), "TeraValidate: " + validated);
        Matcher checksum = Pattern.compile("checksum\\t([0-9a-fA-F]+)").matcher(validated);
        assertTrue(checksum.find(), "TeraValidate: " + validated);
        assertEquals(recordChecksum(in), new BigInteger(checksum.group(1), 16), "TeraValidate's checksum against the input's");

        long dataBytes = 100L * RECORDS;
        // TeraGen's and TeraSort's files (replication 3 is the DataNodes' business: the client sends each byte once).
        long written = SlipstreamHdfsCounters.bytesWritten() - writtenBefore;
        assertTrue(written >= 2 * dataBytes, "bytes written over the fabric: " + written);
        // TeraSort's input, TeraValidate's input and this test's own read of the input.
        long read = SlipstreamHdfsCounters.bytesRead() - readBefore;
        assertTrue(read >= 3 * dataBytes, "bytes read over the fabric: " + read);
        assertEquals(0, SlipstreamHdfsCounters.writesDeclined(), "no write fell back to HDFS's stream");
        java.io.ByteArrayOutputStream fsck = new java.io.ByteArrayOutputStream();
        int status = new org.apache.hadoop.hdfs.tools.DFSck(cluster.getConfiguration(0),
                new java.io.PrintStream(fsck, true, StandardCharsets.UTF_8)).run(new String[] {"/tera", "-files"});
        String fsckReport = fsck.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, fsckReport);
        assertTrue(fsckReport.contains("is HEALTHY"), fsckReport);
    }

    /** TeraValidate's checksum of TeraGen's files: the sum of the CRC-32 of every 100-byte record. */
    private static BigInteger recordChecksum(Path dir) throws Exception {
        long sum = 0;
        long records = 0;
        byte[] record = new byte[100];
        CRC32 crc = new CRC32();
        for (FileStatus part : fs.listStatus(dir)) {
            if (!part.getPath().getName().startsWith("part-")) {
                continue;
            }
            assertEquals(0, part.getLen() % record.length, part.getPath() + " is not whole records");
            try (FSDataInputStream stream = fs.open(part.getPath())) {
                for (long left = part.getLen() / record.length; left > 0; left--) {
                    stream.readFully(record);
                    crc.reset();
                    crc.update(record);
                    sum += crc.getValue();
                    records++;
                }
            }
        }
        assertEquals(RECORDS, records, "TeraGen's records");
        return BigInteger.valueOf(sum);
    }
}
