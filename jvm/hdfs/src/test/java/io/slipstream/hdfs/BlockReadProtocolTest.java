package io.slipstream.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

class BlockReadProtocolTest {
    @Test
    void aRequestDecodesAsEncoded() {
        var request = new BlockReadProtocol.ReadRequest(9866, "BP-1", 7, 1001, 12345, 4096, new byte[] {1, 2});
        var decoded = BlockReadProtocol.ReadRequest.decode(request.encode(), 1 << 20);
        assertEquals(request.poolId(), decoded.poolId());
        assertEquals(request.offset(), decoded.offset());
        assertEquals(2, decoded.token().length);
    }

    @Test
    void lengthsFromTheNetworkAreBoundedBeforeUse() {
        ByteBuffer hugePool = ByteBuffer.allocate(16).put((byte) 1).putInt(1).putShort((short) 0xffff).flip();
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockReadProtocol.ReadRequest.decode(hugePool, 1 << 20));
        var tooLong = new BlockReadProtocol.ReadRequest(1, "BP", 1, 1, 0, (1 << 20) + 1, new byte[0]).encode();
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockReadProtocol.ReadRequest.decode(tooLong, 1 << 20));
        ByteBuffer truncated = new BlockReadProtocol.ReadRequest(1, "BP", 1, 1, 0, 1, new byte[5]).encode().limit(20);
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockReadProtocol.ReadRequest.decode(truncated, 1 << 20));
    }

    @Test
    void aResponseHeaderMustAgreeWithItsMessage() {
        ByteBuffer b = ByteBuffer.allocate(BlockReadProtocol.RESPONSE_HEADER_BYTES);
        new BlockReadProtocol.ReadHeader(2, 512, 10_000, 512, 1024, 8).encode(b);
        b.flip();
        int right = BlockReadProtocol.RESPONSE_HEADER_BYTES + 1024 + 8;
        assertEquals(1024, BlockReadProtocol.ReadHeader.decode(b.duplicate(), right).dataLength());
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockReadProtocol.ReadHeader.decode(b.duplicate(), right + 1));
        ByteBuffer odd = ByteBuffer.allocate(BlockReadProtocol.RESPONSE_HEADER_BYTES);
        new BlockReadProtocol.ReadHeader(2, 512, 10_000, 100, 1024, 8).encode(odd);
        assertThrows(BlockReadProtocol.MalformedException.class, () -> BlockReadProtocol.ReadHeader.decode(odd.flip(), right));
    }

    @Test
    void theLargestResponseFitsTheFabricsMessageLimit() {
        assertEquals(true, BlockReadProtocol.responseBytesMax(HdfsConf.REQUEST_BYTES_MAX) < io.slipstream.fabric.FabricConfig.MAX_MESSAGE_BYTES_LIMIT);
    }
}
