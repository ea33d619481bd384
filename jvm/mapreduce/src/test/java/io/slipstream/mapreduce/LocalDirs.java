package io.slipstream.mapreduce;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.hadoop.yarn.server.api.AuxiliaryLocalPathHandler;

/** A NodeManager's local directories for its shuffle handler in tests: one directory. */
final class LocalDirs implements AuxiliaryLocalPathHandler {
    private final Path dir;

    LocalDirs(Path dir) {
        this.dir = dir;
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForRead(String path) throws IOException {
        Path file = dir.resolve(path);
        if (!Files.exists(file)) {
            throw new IOException("not found in the local dirs: " + path);
        }
        return new org.apache.hadoop.fs.Path(file.toString());
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForWrite(String path) {
        return new org.apache.hadoop.fs.Path(dir.resolve(path).toString());
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForWrite(String path, long size) {
        return getLocalPathForWrite(path);
    }

    @Override
    public Iterable<org.apache.hadoop.fs.Path> getAllLocalPathsForRead(String path) {
        return List.of(new org.apache.hadoop.fs.Path(dir.resolve(path).toString()));
    }
}
