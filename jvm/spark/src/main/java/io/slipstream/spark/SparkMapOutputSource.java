package io.slipstream.spark;

import io.slipstream.shuffle.MapOutputBlock;
import io.slipstream.shuffle.MapOutputSource;
import java.io.DataInputStream;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import org.apache.spark.SparkEnv;
import org.apache.spark.network.buffer.FileSegmentManagedBuffer;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.storage.ShuffleBlockId;
import scala.Option;

/** The sort shuffle's files (an index and a data file per map output), through Spark's own resolver. */
final class SparkMapOutputSource implements MapOutputSource {
    private final IndexShuffleBlockResolver resolver;

    SparkMapOutputSource(IndexShuffleBlockResolver resolver) {
        this.resolver = resolver;
    }

    @Override
    public Segment locate(MapOutputBlock block) throws IOException {
        ManagedBuffer buffer;
        try {
            buffer = resolver.getBlockData(new ShuffleBlockId(block.shuffleId(), block.mapId(), block.partition()), Option.empty());
        } catch (RuntimeException e) {
            throw new IOException(block + " is not here: " + e.getMessage(), e);
        }
        if (!(buffer instanceof FileSegmentManagedBuffer segment)) {
            throw new IOException(block + ": unexpected " + buffer.getClass().getName());
        }
        return new Segment(segment.getFile().toPath(), segment.getOffset(), segment.getLength());
    }

    /** Spark's own diagnosis (the block manager compares the map's checksum file with the file's bytes and the reader's checksum). */
    @Override
    public String diagnoseCorruption(MapOutputBlock block, long checksumByReader, String algorithm) throws IOException {
        try {
            return SparkEnv.get().blockManager().diagnoseShuffleBlockCorruption(
                    new ShuffleBlockId(block.shuffleId(), block.mapId(), block.partition()), checksumByReader, algorithm).name();
        } catch (RuntimeException e) {
            throw new IOException(block + ": no diagnosis: " + e, e);
        }
    }

    @Override
    public MapOutputFile mapOutput(int shuffleId, long mapId) throws IOException {
        File index = resolver.getIndexFile(shuffleId, mapId, Option.empty());
        File data = resolver.getDataFile(shuffleId, mapId);
        if (!index.isFile() || !data.isFile()) {
            return null;
        }
        long indexBytes = index.length();
        if (indexBytes < 16 || indexBytes % 8 != 0 || indexBytes > (1L << 30)) {
            throw new IOException(index + ": not an index file (" + indexBytes + " bytes)");
        }
        long[] offsets = new long[(int) (indexBytes / 8)];
        try (DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(Files.newInputStream(index.toPath())))) {
            for (int i = 0; i < offsets.length; i++) {
                offsets[i] = in.readLong();
            }
        }
        if (offsets[0] != 0 || offsets[offsets.length - 1] != data.length()) {
            throw new IOException(index + " does not describe " + data);
        }
        return new MapOutputFile(data.toPath(), offsets);
    }
}
