package io.slipstream.shuffle;

import java.io.InputStream;
import java.nio.ByteBuffer;

/** An InputStream over a ByteBuffer; {@code onClose} runs once, at the first close. */
final class ByteBufferInputStream extends InputStream {
    private ByteBuffer buffer;
    private final Runnable onClose;

    ByteBufferInputStream(ByteBuffer buffer, Runnable onClose) {
        this.buffer = buffer;
        this.onClose = onClose;
    }

    @Override
    public int read() {
        if (buffer == null || !buffer.hasRemaining()) {
            return -1;
        }
        return buffer.get() & 0xff;
    }

    @Override
    public int read(byte[] into, int offset, int length) {
        if (buffer == null || !buffer.hasRemaining()) {
            return length == 0 ? 0 : -1;
        }
        int count = Math.min(length, buffer.remaining());
        buffer.get(into, offset, count);
        return count;
    }

    @Override
    public long skip(long bytes) {
        if (buffer == null || bytes <= 0) {
            return 0;
        }
        int count = (int) Math.min(bytes, buffer.remaining());
        buffer.position(buffer.position() + count);
        return count;
    }

    @Override
    public int available() {
        return buffer == null ? 0 : buffer.remaining();
    }

    @Override
    public void close() {
        if (buffer != null) {
            buffer = null;
            onClose.run();
        }
    }
}
