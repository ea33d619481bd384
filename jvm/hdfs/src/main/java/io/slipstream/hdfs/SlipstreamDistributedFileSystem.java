package io.slipstream.hdfs;

import io.slipstream.fabric.FabricUnavailableException;
import java.io.IOException;
import java.net.URI;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.crypto.CryptoProtocolVersion;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options.ChecksumOpt;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DFSClient;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DFSInputStream;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.SlipstreamClientBridge;
import org.apache.hadoop.hdfs.protocol.HdfsFileStatus;
import org.apache.hadoop.io.EnumSetWritable;
import org.apache.hadoop.util.DataChecksum;
import org.apache.hadoop.util.Progressable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HDFS's {@code DistributedFileSystem} whose {@code create()} writes blocks over the fabric, selected
 * in the clients' {@code core-site.xml} by {@code fs.hdfs.impl=io.slipstream.hdfs.SlipstreamDistributedFileSystem}.
 * Everything else is HDFS's: reads (with the plugin's replica accessor if configured, which is
 * then told what HDFS's open located), appends, metadata. A create that the fabric path does not write goes to HDFS's own stream: flags other
 * than CREATE/OVERWRITE (append, lazy persist, ...), erasure-coded or encrypted files, encrypted
 * data transfer, checksums other than CRC32/CRC32C in 64 B to 64 KiB chunks, and with {@code fallback=auto} a client whose fabric cannot start or a file whose
 * first block's DataNodes offer none; with {@code fallback=never} the last two fail with the reason.
 * Leases of the files it writes are renewed here (HDFS's renewer only knows its own streams), and
 * their idle pipelines get heartbeats.
 */
public class SlipstreamDistributedFileSystem extends DistributedFileSystem {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamDistributedFileSystem.class);
    /** As HDFS's LeaseRenewer: half the NameNode's soft limit of 60 s. */
    static final long LEASE_RENEWAL_MS = 30_000;
    private static final EnumSet<CreateFlag> FABRIC_FLAGS = EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE);

    private HdfsConf hdfsConf;
    /** HDFS's replace-datanode-on-failure for this file system's fabric streams. */
    private PipelineReplacement replacement;
    private boolean encryptedTransfer;
    /** Whether this is the default file system, by which the replica locator keys files (see {@link #open}). */
    private boolean defaultFileSystem;
    private final Set<FabricOutputStream> open = ConcurrentHashMap.newKeySet();
    private ScheduledExecutorService leaseRenewer;
    private ScheduledFuture<?> renewal;
    private ScheduledFuture<?> heartbeats;

    @Override
    public void initialize(URI uri, Configuration conf) throws IOException {
        super.initialize(uri, conf);
        hdfsConf = new HdfsConf(conf);
        replacement = new PipelineReplacement(getClient(), conf);
        encryptedTransfer = conf.getBoolean(DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_KEY, DFSConfigKeys.DFS_ENCRYPT_DATA_TRANSFER_DEFAULT);
        URI defaultUri = FileSystem.getDefaultUri(conf);
        defaultFileSystem = getUri().getScheme().equalsIgnoreCase(defaultUri.getScheme()) && getUri().getAuthority() != null
                && getUri().getAuthority().equalsIgnoreCase(defaultUri.getAuthority());
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, EnumSet<CreateFlag> flags, int bufferSize, short replication,
            long blockSize, Progressable progress, ChecksumOpt checksumOpt) throws IOException {
        return create(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt, true);
    }

    /**
     * HDFS's open; then what it located is handed to the replica locator, so that the fabric
     * reader's first block of the file asks the NameNode nothing more. Only for this file system's
     * own streams when it is the default one (the locator keys files by the default file system):
     * a stream of another cluster (a symlink resolved there) or an encrypted one is left alone.
     */
    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        FSDataInputStream in = super.open(f, bufferSize);
        if (in.getWrappedStream() instanceof DFSInputStream stream && SlipstreamClientBridge.client(stream) == getClient() && defaultFileSystem) {
            ReplicaLocator.learn(getConf(), SlipstreamClientBridge.path(stream), SlipstreamClientBridge.locatedBlocks(stream));
        }
        return in;
    }

    /** As HDFS's: the parent directory must exist (HBase writes its WALs this way). */
    @Override
    public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, EnumSet<CreateFlag> flags, int bufferSize, short replication,
            long blockSize, Progressable progress) throws IOException {
        return create(f, permission, flags, bufferSize, replication, blockSize, progress, null, false);
    }

    private FSDataOutputStream create(Path f, FsPermission permission, EnumSet<CreateFlag> flags, int bufferSize, short replication,
            long blockSize, Progressable progress, ChecksumOpt checksumOpt, boolean createParent) throws IOException {
        DataChecksum checksum = getClient().getConf().createChecksum(checksumOpt);
        if (encryptedTransfer || !FABRIC_FLAGS.containsAll(flags) || !flags.contains(CreateFlag.CREATE) || !fabricWrites(checksum)) {
            return hdfsCreate(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt, createParent);
        }
        ClientFabric fabric;
        try {
            fabric = ClientFabric.get(hdfsConf);
        } catch (FabricUnavailableException e) {
            if (hdfsConf.fallback == HdfsConf.Fallback.NEVER) {
                throw new IOException("slipstream: the fabric cannot start in this client and " + HdfsConf.FALLBACK.key() + "=never", e);
            }
            SlipstreamHdfsCounters.WRITES_DECLINED.incrementAndGet();
            return hdfsCreate(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt, createParent);
        }
        statistics.incrementWriteOps(1);
        Path absolute = makeQualified(f);
        String src = absolute.toUri().getPath();
        DFSClient client = getClient();
        // As DFSClient.create: masked and unmasked, so default ACLs of the parent apply as in HDFS.
        FsPermission masked = org.apache.hadoop.fs.permission.FsCreateModes.applyUMask(
                permission == null ? FsPermission.getFileDefault() : permission, FsPermission.getUMask(getConf()));
        HdfsFileStatus status;
        try {
            status = client.getNamenode().create(src, masked, client.getClientName(), new EnumSetWritable<>(flags, CreateFlag.class),
                    createParent, replication, blockSize, CryptoProtocolVersion.supported(), null, null);
        } catch (org.apache.hadoop.ipc.RemoteException e) {
            // As DFSClient: the NameNode's own exception (FileNotFoundException, FileAlreadyExistsException, ...).
            throw e.unwrapRemoteException();
        }
        FabricOutputStream.Fallback hdfsStream = () -> {
            // The file was created for the fabric path; HDFS's stream creates it again.
            client.getNamenode().delete(src, false);
            return hdfsCreate(absolute, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt, createParent);
        };
        if (status.getErasureCodingPolicy() != null || status.getFileEncryptionInfo() != null) {
            return hdfsStream.open();
        }
        FabricOutputStream[] stream = new FabricOutputStream[1];
        stream[0] = new FabricOutputStream(client.getNamenode(), client.getClientName(), src, status.getFileId(), status.getBlockSize(), fabric,
                hdfsConf, checksum, hdfsStream, replacement, status.getReplication(), () -> closed(stream[0]));
        opened(stream[0]);
        return new FSDataOutputStream(stream[0], statistics);
    }

    /** HDFS's own stream for the file. */
    private FSDataOutputStream hdfsCreate(Path f, FsPermission permission, EnumSet<CreateFlag> flags, int bufferSize, short replication,
            long blockSize, Progressable progress, ChecksumOpt checksumOpt, boolean createParent) throws IOException {
        return createParent ? super.create(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt)
                : super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize, progress);
    }

    /** The checksums the DataNodes' fabric path writes: CRC32 or CRC32C, 64 B to 64 KiB chunks (others: HDFS's stream). */
    static boolean fabricWrites(DataChecksum checksum) {
        DataChecksum.Type type = checksum.getChecksumType();
        return (type == DataChecksum.Type.CRC32 || type == DataChecksum.Type.CRC32C)
                && checksum.getBytesPerChecksum() >= BlockReadProtocol.BYTES_PER_CHECKSUM_MIN
                && checksum.getBytesPerChecksum() <= BlockReadProtocol.BYTES_PER_CHECKSUM_MAX;
    }

    private synchronized void opened(FabricOutputStream stream) {
        open.add(stream);
        if (renewal == null) {
            if (leaseRenewer == null) {
                leaseRenewer = Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "slipstream-hdfs-lease-renewer");
                    // Also sends the open streams' heartbeats (FabricOutputStream.keepAlive).
                    t.setDaemon(true);
                    return t;
                });
            }
            renewal = leaseRenewer.scheduleWithFixedDelay(this::renewLeases, LEASE_RENEWAL_MS, LEASE_RENEWAL_MS, TimeUnit.MILLISECONDS);
            long heartbeatMs = Math.max(100, hdfsConf.writeIdleTimeout.toMillis() / 6);
            heartbeats = leaseRenewer.scheduleWithFixedDelay(() -> open.forEach(FabricOutputStream::keepAlive), heartbeatMs, heartbeatMs,
                    TimeUnit.MILLISECONDS);
        }
    }

    private synchronized void closed(FabricOutputStream stream) {
        open.remove(stream);
        if (open.isEmpty() && renewal != null) {
            renewal.cancel(false);
            renewal = null;
            heartbeats.cancel(false);
            heartbeats = null;
        }
    }

    private void renewLeases() {
        try {
            getClient().getNamenode().renewLease(getClient().getClientName(), null);
        } catch (IOException | RuntimeException e) {
            LOG.warn("slipstream: renewing the lease of {} files being written over the fabric failed: {}", open.size(), e.toString());
        }
    }

    /** As HDFS's close: files still being written are closed (completed) first. */
    @Override
    public void close() throws IOException {
        IOException first = null;
        for (FabricOutputStream stream : open.toArray(new FabricOutputStream[0])) {
            try {
                stream.close();
            } catch (IOException e) {
                first = first == null ? e : first;
            }
        }
        synchronized (this) {
            if (leaseRenewer != null) {
                leaseRenewer.shutdownNow();
            }
        }
        super.close();
        if (first != null) {
            throw first;
        }
    }
}
