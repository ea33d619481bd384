package io.slipstream.fabric;

import java.io.IOException;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import java.util.zip.CRC32;

/**
 * The jar's native libraries, extracted once per user and version instead of in every JVM: a
 * profile of a MapReduce reducer's first fabric node (async-profiler, wall clock; docs/mapreduce-shuffle.md)
 * had 137 of its 222 samples in extracting the two libraries to a fresh temporary directory (the
 * directory's random name seeds a SecureRandom in a JVM seconds old; then 1.5 MB inflated and
 * written, and deleted again after loading), on the start of every reduce task and executor.
 *
 * <p>The cache is {@value #CACHE_DIR_PROPERTY} if set ({@code none}: no cache), else
 * {@code $XDG_CACHE_HOME/slipstream/native}, else {@code ~/.cache/slipstream/native}; not
 * {@code java.io.tmpdir}, which YARN points into each container's own directory. A version's
 * libraries live in {@code <cache>/<crc32>-<size>/}, named by the jar entries' CRC-32 and size
 * (read from the jar's directory, nothing inflated). Each file is written under a temporary name and
 * renamed into place, so concurrent JVMs never see a partial library; before loading, its size and
 * CRC-32 are checked against the jar's (1.5 MB read from the page cache, about a millisecond).
 *
 * <p>Code loaded from here runs in the JVM, so the directories must be the user's own: every
 * directory from the cache down, and each library, must be owned by this process's user and
 * writable by nobody else; otherwise (or on any I/O error) the caller extracts to a temporary
 * directory as before, with one warning.
 */
final class NativeCache {
    /** System property: the cache directory, or {@code none} to extract to a temporary directory in every JVM. */
    static final String CACHE_DIR_PROPERTY = "slipstream.fabric.native.cacheDir";

    private static final System.Logger LOG = System.getLogger(NativeCache.class.getName());
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");

    private NativeCache() {
    }

    /** The cache directory configured, or null for none. */
    static Path root() {
        String configured = System.getProperty(CACHE_DIR_PROPERTY);
        if (configured != null && !configured.isEmpty()) {
            return configured.equals("none") ? null : Path.of(configured);
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && xdg.startsWith("/")) {
            return Path.of(xdg, "slipstream", "native");
        }
        String home = System.getProperty("user.home");
        return home == null || home.isEmpty() || home.equals("?") ? null : Path.of(home, ".cache", "slipstream", "native");
    }

    /**
     * A directory holding {@code libraries} (resources under {@code folder}) as the jar has them,
     * extracting them there first if needed; null when the jar lacks one, there is no cache, or it
     * cannot be trusted or written (the caller then extracts to a temporary directory).
     */
    static Path directory(String folder, String[] libraries) {
        Path root = root();
        if (root == null) {
            return null;
        }
        try {
            long[][] crcAndSize = new long[libraries.length][];
            StringBuilder key = new StringBuilder();
            for (int i = 0; i < libraries.length; i++) {
                crcAndSize[i] = crcAndSize(folder + libraries[i]);
                if (crcAndSize[i] == null) {
                    return null;
                }
                key.append(key.length() == 0 ? "" : "-").append(Long.toHexString(crcAndSize[i][0])).append('-').append(crcAndSize[i][1]);
            }
            Path version = root.resolve(key.toString());
            createPrivate(root, version);
            for (int i = 0; i < libraries.length; i++) {
                Path library = version.resolve(libraries[i]);
                if (!matches(library, crcAndSize[i])) {
                    extractInto(folder + libraries[i], library);
                    if (!matches(library, crcAndSize[i])) {
                        throw new IOException(library + " differs from the jar's after extracting it");
                    }
                }
            }
            return version;
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.WARNING, "the fabric's native library cache " + root + " cannot be used (" + e.getMessage()
                    + "); extracting the libraries to a temporary directory in this JVM (set -D" + CACHE_DIR_PROPERTY
                    + "=none to do so without this warning)");
            return null;
        }
    }

    /** The resource's CRC-32 and size, from the jar's directory when it is in a jar; null if missing. */
    private static long[] crcAndSize(String resource) throws IOException {
        URL url = NativeCache.class.getResource(resource);
        if (url == null) {
            return null;
        }
        URLConnection connection = url.openConnection();
        if (connection instanceof JarURLConnection jar) {
            jar.setUseCaches(true); // the class loader's open jar, not a second copy of it
            java.util.jar.JarEntry entry = jar.getJarEntry();
            if (entry.getCrc() >= 0 && entry.getSize() >= 0) {
                return new long[] {entry.getCrc(), entry.getSize()};
            }
        }
        try (InputStream in = connection.getInputStream()) { // classes directory (development): read it
            return crcOf(in);
        }
    }

    private static long[] crcOf(InputStream in) throws IOException {
        CRC32 crc = new CRC32();
        byte[] buffer = new byte[64 << 10];
        long size = 0;
        for (int n; (n = in.read(buffer)) > 0; ) {
            crc.update(buffer, 0, n);
            size += n;
        }
        return new long[] {crc.getValue(), size};
    }

    private static boolean matches(Path library, long[] crcAndSize) throws IOException {
        if (!Files.exists(library, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        checkPrivate(library, false);
        if (Files.size(library) != crcAndSize[1]) {
            return false;
        }
        try (InputStream in = Files.newInputStream(library)) {
            return crcOf(in)[0] == crcAndSize[0];
        }
    }

    /** Writes the resource under a temporary name beside {@code library}, then renames it into place. */
    private static void extractInto(String resource, Path library) throws IOException {
        Path partial = library.resolveSibling("." + library.getFileName() + "." + ProcessHandle.current().pid() + ".partial");
        try (InputStream in = NativeCache.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException(resource + " vanished from the jar");
            }
            Files.copy(in, partial, StandardCopyOption.REPLACE_EXISTING);
            Files.setPosixFilePermissions(partial, PosixFilePermissions.fromString("r-x------"));
            try {
                Files.move(partial, library, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                throw new IOException("cannot rename within " + library.getParent() + ": " + e.getMessage(), e);
            }
        } finally {
            Files.deleteIfExists(partial);
        }
    }

    /** Creates {@code version} (a folder of {@code root}) and missing parents owner-only; checks both. */
    private static void createPrivate(Path root, Path version) throws IOException {
        Files.createDirectories(version, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        checkPrivate(root, true);
        checkPrivate(version, true);
    }

    /** Owned by this process's user, a real file or directory (no link), writable by no one else. */
    private static void checkPrivate(Path path, boolean directory) throws IOException {
        PosixFileAttributes attributes = Files.readAttributes(path, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (directory ? !attributes.isDirectory() : !attributes.isRegularFile()) {
            throw new IOException(path + " is not a " + (directory ? "directory" : "regular file"));
        }
        String user = System.getProperty("user.name");
        if (!attributes.owner().getName().equals(user)) {
            throw new IOException(path + " is owned by " + attributes.owner().getName() + ", not " + user);
        }
        Set<PosixFilePermission> permissions = attributes.permissions();
        if (permissions.contains(PosixFilePermission.GROUP_WRITE) || permissions.contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new IOException(path + " is writable by others (" + PosixFilePermissions.toString(permissions) + ")");
        }
    }
}
