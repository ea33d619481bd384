package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import org.apache.hadoop.fs.StorageType;
import org.junit.jupiter.api.Test;

class BlockWriteProtocolTest {
    private static BlockWriteProtocol.Open open(int downstream) {
        List<BlockWriteProtocol.Target> targets = new java.util.ArrayList<>();
        for (int i = 0; i < downstream; i++) {
            targets.add(new BlockWriteProtocol.Target("10.0.0." + i, 9866 + i, StorageType.SSD, "DS-" + i));
        }
        return new BlockWriteProtocol.Open(9866, 42, "BP-1", 7, 1001, 2, 512, StorageType.DISK, "", new byte[] {1, 2}, targets);
    }

    @Test
    void anOpenDecodesAsEncodedAndForwardsToTheNextDataNode() {
        var decoded = BlockWriteProtocol.Open.decode(open(2).encode());
        assertEquals(2, decoded.downstream().size());
        assertEquals(StorageType.SSD, decoded.downstream().get(1).storageType());
        assertEquals(2, decoded.token().length);
        var forwarded = BlockWriteProtocol.Open.decode(decoded.forward().encode());
        assertEquals(9866, forwarded.xferPort());
        assertEquals("DS-0", forwarded.storageId());
        assertEquals(List.of(decoded.downstream().get(1)), forwarded.downstream());
        assertEquals(42, forwarded.writeId());
    }

    @Test
    void aRecoveryOpenCarriesItsStageAndLengthsDownThePipeline() {
        var recovery = new BlockWriteProtocol.Open(9866, 42, "BP-1", 7, 1001, 2, 512, StorageType.DISK, "", new byte[0],
                BlockWriteProtocol.STAGE_RECOVERY, 1002, 4096, 8192, open(1).downstream());
        var forwarded = BlockWriteProtocol.Open.decode(BlockWriteProtocol.Open.decode(recovery.encode()).forward().encode());
        assertEquals(BlockWriteProtocol.STAGE_RECOVERY, forwarded.stage());
        assertEquals(1002, forwarded.newGenerationStamp());
        assertEquals(4096, forwarded.minBytes());
        assertEquals(8192, forwarded.maxBytes());
        var backwards = new BlockWriteProtocol.Open(9866, 42, "BP-1", 7, 1001, 2, 512, StorageType.DISK, "", new byte[0],
                BlockWriteProtocol.STAGE_RECOVERY, 1002, 8192, 4096, List.of());
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.Open.decode(backwards.encode()));
        var unknownStage = new BlockWriteProtocol.Open(9866, 42, "BP-1", 7, 1001, 2, 512, StorageType.DISK, "", new byte[0], 7, 1002, 0, 0,
                List.of());
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.Open.decode(unknownStage.encode()));
    }

    @Test
    void openLengthsAreBoundedBeforeUse() {
        ByteBuffer b = open(1).encode();
        ByteBuffer hugePool = ByteBuffer.allocate(b.remaining()).put(b.duplicate()).putShort(13, (short) 0xffff).flip();
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.Open.decode(hugePool));
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.Open.decode(b.duplicate().limit(30)));
        assertThrows(IllegalArgumentException.class, () -> open(BlockWriteProtocol.DOWNSTREAM_MAX + 1).encode());
        ByteBuffer extra = ByteBuffer.allocate(b.remaining() + 1).put(b.duplicate()).put((byte) 0).flip();
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.Open.decode(extra));
    }

    @Test
    void aPacketHeaderMustAgreeWithItsMessageAndTheDataLimit() {
        ByteBuffer b = ByteBuffer.allocate(BlockWriteProtocol.PACKET_HEADER_BYTES);
        new BlockWriteProtocol.PacketHeader(9866, 42, 3, 1024, BlockWriteProtocol.FLAG_SYNC, 1000, 8).encode(b);
        b.flip();
        int right = BlockWriteProtocol.PACKET_HEADER_BYTES + 1008;
        var h = BlockWriteProtocol.PacketHeader.decode(b, right, 4096);
        assertTrue(h.sync());
        assertEquals(42, h.writeId());
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.PacketHeader.decode(b, right - 1, 4096));
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockWriteProtocol.PacketHeader.decode(b, right, 999));
        assertEquals(9866, b.getInt(BlockWriteProtocol.PACKET_XFER_PORT_OFFSET));
        assertEquals(7, BlockWriteProtocol.decodeAck(BlockWriteProtocol.encodeAck(7)));
    }

    @Test
    void theLargestPacketFitsTheNodesMessageLimit() {
        assertTrue(BlockWriteProtocol.packetBytesMax(HdfsConf.REQUEST_BYTES_MAX) <= BlockReadProtocol.responseBytesMax(HdfsConf.REQUEST_BYTES_MAX));
    }
}
