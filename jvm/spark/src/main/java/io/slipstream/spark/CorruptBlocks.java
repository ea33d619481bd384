package io.slipstream.spark;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.function.Function;
import java.util.zip.Checksum;
import org.apache.spark.network.shuffle.checksum.Cause;
import org.apache.spark.network.shuffle.checksum.ShuffleChecksumHelper;
import org.apache.spark.storage.BlockId;

/**
 * Corrupt shuffle blocks handled as Spark's own reader ({@code ShuffleBlockFetcherIterator})
 * handles them: with {@code spark.shuffle.detectCorrupt}, a compressed (or encrypted) block whose
 * first {@code maxSizeInFlight / 3} bytes fail to decompress ({@code detectCorrupt.useExtraMemory})
 * is fetched again once if it came from another executor, then reported as a fetch failure; a
 * failure later in the stream is a fetch failure at once. With {@code spark.shuffle.checksum.enabled},
 * the failure carries the diagnosis of the executor that wrote the block (its checksum file against
 * the file's bytes and the bytes the reader received: disk or network), worded as Spark words it.
 */
final class CorruptBlocks {
    private CorruptBlocks() {}

    /** The checksum of {@code data} (its remaining bytes; position unchanged) with Spark's {@code algorithm}. */
    static long checksum(ByteBuffer data, String algorithm) {
        Checksum checksum = ShuffleChecksumHelper.getChecksumByAlgorithm(algorithm);
        checksum.update(data.duplicate());
        return checksum.getValue();
    }

    /** The checksum of everything {@code in} has (closed afterwards). */
    static long checksum(InputStream in, String algorithm) throws IOException {
        Checksum checksum = ShuffleChecksumHelper.getChecksumByAlgorithm(algorithm);
        byte[] buffer = new byte[ShuffleChecksumHelper.CHECKSUM_CALCULATION_BUFFER];
        try (in) {
            for (int read; (read = in.read(buffer)) != -1; ) {
                checksum.update(buffer, 0, read);
            }
        }
        return checksum.getValue();
    }

    /** Spark's words for a diagnosis ({@code cause}: a {@link Cause} name; anything else is unknown). */
    static String diagnosisMessage(BlockId blockId, String cause, String algorithm) {
        Cause known;
        try {
            known = cause == null || cause.isEmpty() ? Cause.UNKNOWN_ISSUE : Cause.valueOf(cause);
        } catch (IllegalArgumentException e) {
            known = Cause.UNKNOWN_ISSUE;
        }
        return switch (known) {
            case UNSUPPORTED_CHECKSUM_ALGORITHM -> "Block " + blockId
                    + " is corrupted but corruption diagnosis failed due to unsupported checksum algorithm: " + algorithm;
            case CHECKSUM_VERIFY_PASS -> "Block " + blockId + " is corrupted but checksum verification passed";
            case UNKNOWN_ISSUE -> "Block " + blockId + " is corrupted but the cause is unknown";
            default -> "Block " + blockId + " is corrupted due to " + known;
        };
    }

    /**
     * A decompressing stream whose read failures become fetch failures (as Spark's
     * BufferReleasingInputStream does with detectCorrupt): {@code onCorrupt} builds the exception
     * (a FetchFailedException, thrown through the stream's unchecked path).
     */
    static final class DetectingInputStream extends FilterInputStream {
        private final Function<IOException, Exception> onCorrupt;

        DetectingInputStream(InputStream in, Function<IOException, Exception> onCorrupt) {
            super(in);
            this.onCorrupt = onCorrupt;
        }

        @Override
        public int read() throws IOException {
            try {
                return super.read();
            } catch (IOException e) {
                throw corrupt(e);
            }
        }

        @Override
        public int read(byte[] into, int offset, int length) throws IOException {
            try {
                return super.read(into, offset, length);
            } catch (IOException e) {
                throw corrupt(e);
            }
        }

        @Override
        public long skip(long bytes) throws IOException {
            try {
                return super.skip(bytes);
            } catch (IOException e) {
                throw corrupt(e);
            }
        }

        @Override
        public int available() throws IOException {
            try {
                return super.available();
            } catch (IOException e) {
                throw corrupt(e);
            }
        }

        private IOException corrupt(IOException e) {
            throw SlipstreamShuffleReader.<RuntimeException>sneaky(onCorrupt.apply(e));
        }
    }
}
