package io.slipstream.ohb.hdfs;

import io.slipstream.hdfs.tiers.AccessAuditLogger;
import io.slipstream.hdfs.tiers.TieredBlockPlacementPolicy;
import io.slipstream.hdfs.tiers.TieredFsDatasetFactory;
import io.slipstream.hdfs.tiers.TieringService;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.client.HdfsDataInputStream;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.StoragePolicySatisfierMode;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.server.balancer.NameNodeConnector;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.FsVolumeImpl;
import org.apache.hadoop.hdfs.server.namenode.sps.StoragePolicySatisfier;
import org.apache.hadoop.hdfs.server.sps.ExternalSPSContext;
import org.apache.hadoop.hdfs.server.sps.ExternalStoragePolicySatisfier;

/**
 * The skewed-read part of {@code ohb hdfs tiers}: Triple-H's tiering service at work. A mini cluster in mode
 * {@code hhh} whose three DataNodes have an SSD directory (sized to hold {@code ssd-share} of all replicas) and
 * a DISK directory, no RAM tier (so that a read is served by SSD or DISK and the service's doing is what is
 * measured); the NameNode runs AccessAuditLogger and TieringService (promoting hot files with
 * {@code promote-policy}, ONE_SSD or ALL_SSD), and HDFS's external StoragePolicySatisfier runs in this JVM.
 * {@code files} one-block files are written (the first ones land on SSD, the rest on DISK once SSD is at
 * placement's high-water mark), then one reader reads them {@code reads} times, the file of each read
 * drawn from a Zipf distribution over a seeded shuffle of the files (so the hot set is not the files written
 * first). For each read, the tier of the replica that served it (the stream's DataNode, looked up in the
 * block's locations) is recorded; reported per window of reads: the fraction served from SSD, the fastest tier
 * here, and from the fastest tier holding a replica of that file at that time. Contents are checked (CRC32).
 * Prints one {@code OHB_TIERS_SKEW_RESULT {json}} line; exits 1 on a failure.
 */
public final class TiersSkewBench {
    private static final Path DIR = new Path("/ohb-tiers-skew");
    private static final int FILE_BYTES = 1 << 20;

    private TiersSkewBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        o.put("files", "40");
        o.put("reads", "2000");
        o.put("zipf", "1.2");
        o.put("ssd-share", "0.5");
        o.put("promote-policy", "ALL_SSD");
        o.put("windows", "10");
        o.put("read-interval-ms", "20");
        o.put("disk-dir", "build/ohb-hdfs-tiers-skew");
        HdfsBench.parseOptions(args, o, "usage: TiersSkewBench [--files N] [--reads N] [--zipf S] [--ssd-share X] [--promote-policy ONE_SSD|ALL_SSD] [--windows N] [--read-interval-ms N] [--disk-dir DIR]");
        int files = Integer.parseInt(o.get("files"));
        int reads = Integer.parseInt(o.get("reads"));
        double zipf = Double.parseDouble(o.get("zipf"));
        double ssdShare = Double.parseDouble(o.get("ssd-share"));
        int windows = Integer.parseInt(o.get("windows"));
        long readIntervalMs = Long.parseLong(o.get("read-interval-ms"));
        String promotePolicy = o.get("promote-policy");
        if (files < 2 || files > 10_000 || reads < windows || windows < 1 || reads > 1_000_000 || !(zipf > 0)
                || !(ssdShare > 0 && ssdShare < 1)
                || readIntervalMs < 0 || readIntervalMs > 10_000) {
            System.err.println("ohb hdfs tiers skew: 2 <= files <= 10000, windows <= reads <= 1000000, zipf > 0, 0 < ssd-share < 1, 0 <= read-interval-ms <= 10000");
            System.exit(2);
        }
        long ssdBytesPerDataNode = (long) (ssdShare * files * (FILE_BYTES + (64 << 10)));
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("files", files);
        result.put("file_bytes", FILE_BYTES);
        result.put("reads", reads);
        result.put("zipf", zipf);
        result.put("ssd_bytes_per_datanode", ssdBytesPerDataNode);
        result.put("read_interval_ms", readIntervalMs);
        result.put("promote_policy", promotePolicy);
        boolean ok = true;
        String failure = "";
        MiniDFSCluster cluster = null;
        StoragePolicySatisfier satisfier = null;
        NameNodeConnector connector = null;
        try {
            Configuration conf = conf();
            conf.set("slipstream.hdfs.tiers.tiering.promotePolicy", promotePolicy); // TiersConf refuses a bad one
            cluster = start(conf, java.nio.file.Path.of(o.get("disk-dir")), ssdBytesPerDataNode);
            satisfier = new StoragePolicySatisfier(conf);
            connector = ExternalStoragePolicySatisfier.getNameNodeConnector(conf);
            satisfier.init(new ExternalSPSContext(satisfier, connector));
            satisfier.start(StoragePolicySatisfierMode.EXTERNAL);
            String why = measure(cluster.getFileSystem(), files, reads, zipf, windows, readIntervalMs, result);
            if (why != null) {
                ok = false;
                failure = why;
            }
        } catch (Exception e) {
            ok = false;
            failure = e.toString();
            e.printStackTrace();
        } finally {
            if (satisfier != null) {
                satisfier.stopGracefully();
            }
            if (connector != null) {
                connector.close();
            }
            if (cluster != null) {
                cluster.shutdown(true);
            }
        }
        result.put("ok", ok);
        result.put("failure", failure.replace('\n', ' ')); // one result line
        System.out.println("OHB_TIERS_SKEW_RESULT " + HdfsBench.json(result));
        if (!ok) {
            System.err.println("ohb hdfs tiers skew: " + failure);
        }
        System.exit(ok ? 0 : 1);
    }

    private static Configuration conf() {
        Configuration conf = new HdfsConfiguration();
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
        conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, FILE_BYTES);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
        conf.setBoolean("dfs.client.read.shortcircuit", false);
        conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
        conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_READ_CONSIDERSTORAGETYPE_KEY, true);
        conf.set("slipstream.hdfs.tiers.mode", "hhh");
        conf.set(DFSConfigKeys.DFS_BLOCK_REPLICATOR_CLASSNAME_KEY, TieredBlockPlacementPolicy.class.getName());
        // A DataNode whose SSD is full now (the NameNode's view is a heartbeat old) puts the replica on DISK.
        conf.set(DFSConfigKeys.DFS_DATANODE_FSDATASET_FACTORY_KEY, TieredFsDatasetFactory.class.getName());
        conf.set(DFSConfigKeys.DFS_NAMENODE_AUDIT_LOGGERS_KEY, AccessAuditLogger.class.getName());
        conf.set(DFSConfigKeys.DFS_NAMENODE_PLUGINS_KEY, TieringService.class.getName());
        conf.set(DFSConfigKeys.DFS_STORAGE_POLICY_SATISFIER_MODE_KEY, "external");
        conf.setLong(DFSConfigKeys.DFS_SPS_DATANODE_CACHE_REFRESH_INTERVAL_MS, 1000);
        conf.setLong(DFSConfigKeys.DFS_STORAGE_POLICY_SATISFIER_RECHECK_TIMEOUT_MILLIS_KEY, 1000);
        conf.setLong("slipstream.hdfs.tiers.tiering.interval.ms", 500);
        conf.setLong("slipstream.hdfs.tiers.tiering.window.ms", 30_000);
        conf.set("slipstream.hdfs.tiers.tiering.paths", DIR.toString());
        return conf;
    }

    private static MiniDFSCluster start(Configuration conf, java.nio.file.Path diskDir, long ssdBytesPerDataNode)
            throws Exception {
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, diskDir.resolve("namenode").toString());
        Configuration[] overlays = new Configuration[3];
        for (int dn = 0; dn < 3; dn++) {
            java.nio.file.Path ssd = Files.createDirectories(diskDir.resolve("ssd").resolve("dn" + dn));
            java.nio.file.Path disk = Files.createDirectories(diskDir.resolve("disk").resolve("dn" + dn));
            overlays[dn] = new Configuration(false);
            overlays[dn].set(DFSConfigKeys.DFS_DATANODE_DATA_DIR_KEY, "[SSD]" + ssd.toUri() + ",[DISK]" + disk.toUri());
        }
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3).storagesPerDatanode(2)
                .manageDataDfsDirs(false).dataNodeConfOverlays(overlays).build();
        cluster.waitActive();
        // The SSD tier's size (the directory is on the same disk as DISK's, which is far larger).
        for (DataNode dn : cluster.getDataNodes()) {
            try (FsDatasetSpi.FsVolumeReferences volumes = dn.getFSDataset().getFsVolumeReferences()) {
                for (FsVolumeSpi volume : volumes) {
                    if (volume.getStorageType() == StorageType.SSD) {
                        ((FsVolumeImpl) volume).setCapacityForTesting(ssdBytesPerDataNode);
                    }
                }
            }
        }
        cluster.triggerHeartbeats();
        Thread.sleep(2000); // the NameNode's view of the SSD tier's size, before placement uses it
        return cluster;
    }

    /** Writes the files, reads them with a Zipf skew, records which tier served each read; null or why it failed. */
    private static String measure(DistributedFileSystem fs, int files, int reads, double zipf, int windows,
            long readIntervalMs, Map<String, Object> result) throws Exception {
        fs.mkdirs(DIR);
        long[] crcs = new long[files];
        byte[] data = new byte[FILE_BYTES];
        for (int f = 0; f < files; f++) {
            new Random(f).nextBytes(data);
            try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(file(f), (short) 3)) {
                out.write(data);
            }
            java.util.zip.CRC32 crc = new java.util.zip.CRC32();
            crc.update(data);
            crcs[f] = crc.getValue();
        }
        int onSsdAtStart = 0;
        for (int f = 0; f < files; f++) {
            onSsdAtStart += hasSsd(fs, f) ? 1 : 0;
        }
        result.put("files_with_ssd_replica_at_start", onSsdAtStart);
        // Zipf over ranks 1..files, the ranks dealt to files by a seeded shuffle.
        double[] cumulative = new double[files];
        double sum = 0;
        for (int rank = 1; rank <= files; rank++) {
            sum += 1 / Math.pow(rank, zipf);
            cumulative[rank - 1] = sum;
        }
        List<Integer> byRank = new ArrayList<>();
        for (int f = 0; f < files; f++) {
            byRank.add(f);
        }
        Collections.shuffle(byRank, new Random(42));
        Random draws = new Random(7);
        double[] windowReadsEnd = new double[windows];
        double[] windowSeconds = new double[windows];
        double[] windowSsd = new double[windows];
        double[] windowFastest = new double[windows];
        int window = 0;
        int perWindow = reads / windows;
        int ssdServed = 0;
        int fastestServed = 0;
        int inWindow = 0;
        long start = System.nanoTime();
        byte[] buffer = new byte[FILE_BYTES];
        for (int r = 0; r < reads; r++) {
            // Reads paced (at most one per interval), so that the run spans the service's decisions and the
            // satisfier's moves, as a steady workload would, rather than ending before the first batch.
            long due = start + r * readIntervalMs * 1_000_000;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            double u = draws.nextDouble() * sum;
            int rank = 0;
            while (cumulative[rank] < u) {
                rank++;
            }
            int f = byRank.get(rank);
            StorageType served;
            StorageType fastest;
            try (HdfsDataInputStream in = (HdfsDataInputStream) fs.open(file(f))) {
                in.readFully(buffer); // a sequential read: a positional one does not set the stream's current DataNode
                DatanodeInfo dn = in.getCurrentDatanode();
                LocatedBlock block = in.getAllBlocks().get(0);
                served = null;
                fastest = StorageType.DISK;
                for (int i = 0; i < block.getLocations().length; i++) {
                    if (block.getStorageTypes()[i] == StorageType.SSD) {
                        fastest = StorageType.SSD;
                    }
                    if (block.getLocations()[i].getDatanodeUuid().equals(dn == null ? null : dn.getDatanodeUuid())) {
                        served = block.getStorageTypes()[i];
                    }
                }
            }
            java.util.zip.CRC32 crc = new java.util.zip.CRC32();
            crc.update(buffer);
            if (crc.getValue() != crcs[f]) {
                return "file " + f + " read back with CRC " + crc.getValue() + ", written " + crcs[f];
            }
            if (served == null) {
                return "read " + r + " of file " + f + ": the serving DataNode is not among the block's locations";
            }
            ssdServed += served == StorageType.SSD ? 1 : 0;
            fastestServed += served == fastest ? 1 : 0;
            inWindow++;
            if (inWindow == perWindow && window < windows - 1 || r == reads - 1) {
                windowReadsEnd[window] = r + 1;
                windowSeconds[window] = (System.nanoTime() - start) / 1e9;
                windowSsd[window] = (double) ssdServed / inWindow;
                windowFastest[window] = (double) fastestServed / inWindow;
                window++;
                ssdServed = 0;
                fastestServed = 0;
                inWindow = 0;
            }
        }
        result.put("window_reads_end", windowReadsEnd);
        result.put("window_t_s", windowSeconds);
        result.put("window_ssd_fraction", windowSsd);
        result.put("window_fastest_fraction", windowFastest);
        result.put("elapsed_s", (System.nanoTime() - start) / 1e9);
        // After warm-up: the second half of the windows.
        double ssd = 0;
        double fastest = 0;
        for (int w = windows / 2; w < windows; w++) {
            ssd += windowSsd[w];
            fastest += windowFastest[w];
        }
        int late = windows - windows / 2;
        result.put("ssd_fraction_after_warmup", ssd / late);
        result.put("fastest_fraction_after_warmup", fastest / late);
        MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
        ObjectName tiering = new ObjectName("Hadoop:service=NameNode,name=SlipstreamTiering");
        for (String counter : new String[] {"Batches", "Promotions", "Evictions", "PromotedBytes", "EvictedBytes", "Failures"}) {
            result.put("tiering_" + counter, jmx.getAttribute(tiering, counter));
        }
        return null;
    }

    /** Whether the file's block has a replica on SSD, from a listing (which the service does not count as a read). */
    private static boolean hasSsd(DistributedFileSystem fs, int f) throws java.io.IOException {
        org.apache.hadoop.hdfs.protocol.HdfsFileStatus[] listing = fs.getClient().listPaths(file(f).toString(),
                org.apache.hadoop.hdfs.protocol.HdfsFileStatus.EMPTY_NAME, true).getPartialListing();
        LocatedBlock block = ((org.apache.hadoop.hdfs.protocol.HdfsLocatedFileStatus) listing[0]).getLocatedBlocks().get(0);
        for (StorageType type : block.getStorageTypes()) {
            if (type == StorageType.SSD) {
                return true;
            }
        }
        return false;
    }

    private static Path file(int index) {
        return new Path(DIR, "file-" + index);
    }
}
