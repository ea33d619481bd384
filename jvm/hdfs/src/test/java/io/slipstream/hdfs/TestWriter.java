package io.slipstream.hdfs;

import io.slipstream.fabric.FabricNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.crypto.CryptoProtocolVersion;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DFSClient;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.protocol.ClientProtocol;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.HdfsFileStatus;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.io.EnumSetWritable;
import org.apache.hadoop.util.DataChecksum;

/**
 * A test's file writer for the DataNode side of fabric writes: it makes the NameNode calls a
 * writer makes ({@code create}, {@code addBlock}, {@code complete}, through the test's
 * {@code DFSClient}) and writes each block with the plugin's {@link FabricBlockWriter}. It is not
 * the client the plugin will offer (no lease renewal, no pipeline recovery: see docs/hdfs.md,
 * "Not done"); it exists to test the DataNodes' write path and pipeline.
 */
final class TestWriter implements AutoCloseable {
    static final DataChecksum CRC32C_512 = DataChecksum.newDataChecksum(DataChecksum.Type.CRC32C, 512);

    private final ClientProtocol nameNode;
    private final String clientName;
    private final String src;
    private final long fileId;
    private final FabricNode node;
    private final HdfsConf conf;
    private final long blockBytes;
    private ExtendedBlock previous;
    private FabricBlockWriter block;
    private long blockStart;
    private long written;

    /** Creates {@code path} (replication 3) for writing over the fabric. */
    TestWriter(DistributedFileSystem fs, Configuration conf, Path path, long blockBytes) throws IOException {
        DFSClient client = fs.getClient();
        this.nameNode = client.getNamenode();
        this.clientName = client.getClientName();
        this.src = path.toUri().getPath();
        this.conf = new HdfsConf(conf);
        try {
            this.node = ClientFabric.get(this.conf).node;
        } catch (io.slipstream.fabric.FabricUnavailableException e) {
            throw new IOException("the fabric cannot start in this test", e);
        }
        this.blockBytes = blockBytes;
        HdfsFileStatus status = nameNode.create(src, FsPermission.getFileDefault(), clientName,
                new EnumSetWritable<>(EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE)), true, (short) 3, blockBytes,
                CryptoProtocolVersion.supported(), null, null);
        this.fileId = status.getFileId();
    }

    /** Writes {@code length} seeded random bytes to {@code path} over the fabric; returns them. */
    static byte[] write(DistributedFileSystem fs, Configuration conf, Path path, int length, long seed) throws IOException {
        byte[] data = new byte[length];
        new Random(seed).nextBytes(data);
        try (TestWriter writer = new TestWriter(fs, conf, path, TestClusters.BLOCK_BYTES)) {
            writer.write(data, 0, length);
            writer.complete();
        }
        return data;
    }

    void write(byte[] b, int off, int len) throws IOException {
        while (len > 0) {
            if (block == null || written - blockStart == blockBytes) {
                startBlock();
            }
            int n = (int) Math.min(len, blockBytes - (written - blockStart));
            block.write(b, off, n);
            written += n;
            off += n;
            len -= n;
        }
    }

    /** The writer of the current block (opened on the first write). */
    FabricBlockWriter block() {
        return block;
    }

    private void startBlock() throws IOException {
        finishBlock();
        // As HDFS's DataStreamer: a pipeline that fails to open is abandoned and the failed DataNode excluded.
        List<DatanodeInfo> excluded = new ArrayList<>();
        LocatedBlock located;
        while (true) {
            located = nameNode.addBlock(src, clientName, previous, excluded.toArray(new DatanodeInfo[0]), fileId, null, null);
            try {
                block = new FabricBlockWriter(node, conf, located, CRC32C_512);
                break;
            } catch (IOException e) {
                String failed = FabricBlockWriter.failedNode(e);
                nameNode.abandonBlock(located.getBlock(), fileId, src, clientName);
                DatanodeInfo bad = Arrays.stream(located.getLocations()).filter(d -> d.getXferAddr().equals(failed)).findFirst()
                        .orElseThrow(() -> e);
                if (excluded.size() >= 2) {
                    throw e;
                }
                excluded.add(bad);
            }
        }
        blockStart = written;
        previous = null;
        this.located = located;
    }

    private LocatedBlock located;

    LocatedBlock located() {
        return located;
    }

    private void finishBlock() throws IOException {
        if (block != null) {
            long length = block.finish();
            block.close();
            block = null;
            previous = new ExtendedBlock(located.getBlock());
            previous.setNumBytes(length);
        }
    }

    /** Finishes the last block and closes the file at the NameNode (retrying while it waits for the replicas' reports). */
    void complete() throws IOException {
        finishBlock();
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!nameNode.complete(src, clientName, previous, fileId)) {
            if (System.nanoTime() > deadline) {
                throw new IOException("the NameNode did not complete " + src + " in 20 s");
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException();
            }
        }
    }

    @Override
    public void close() {
        if (block != null) {
            block.close();
        }
    }
}
