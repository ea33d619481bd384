package io.slipstream.shuffle;

import java.io.IOException;
import java.nio.file.Path;

/**
 * Where the map outputs this process serves live on disk: the engine adapter knows its file
 * layout, the server only reads byte ranges.
 */
public interface MapOutputSource {
    /** The bytes of {@code block}: a range of a file. Throws if the block is unknown here. */
    Segment locate(MapOutputBlock block) throws IOException;

    /**
     * The partition boundaries of one map output ({@code partitions + 1} offsets into its data
     * file) and the data file, for the cache; null if unknown.
     */
    MapOutputFile mapOutput(int shuffleId, long mapId) throws IOException;

    /**
     * Why a reader that received {@code block} with the checksum {@code checksumByReader}
     * ({@code algorithm}) found it corrupt: the engine's own diagnosis, from the block's file and
     * what the engine recorded when it wrote it (Spark: its checksum files; the answer is one of
     * its {@code Cause} names). Null when the engine cannot tell.
     */
    default String diagnoseCorruption(MapOutputBlock block, long checksumByReader, String algorithm) throws IOException {
        return null;
    }

    /** {@code length} bytes of {@code file} from {@code offset}. */
    record Segment(Path file, long offset, long length) {
        public Segment {
            if (offset < 0 || length < 0) {
                throw new IllegalArgumentException("bad segment " + offset + "+" + length);
            }
        }
    }

    /** A whole map output: its data file and each partition's start offset (plus the end). */
    record MapOutputFile(Path dataFile, long[] partitionOffsets) {}
}
