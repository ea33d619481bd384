package io.slipstream.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader, each case in a fresh JVM (loading happens once per JVM): success from the jar's
 * resources, every failure path ending in one {@link FabricUnavailableException}, and the JVM's own
 * SIGSEGVs surviving UCX (with a negative control showing that they would not without the preload).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NativeLoaderTest {

    /** The child JVMs must not inherit a setting that would hide what is tested. */
    private static Map<String, String> cleanEnv() {
        Map<String, String> env = new HashMap<>();
        env.put("UCX_ERROR_SIGNALS", "ILL,SEGV,BUS,FPE"); // UCX's default, spelled out: the loader must override it
        // Debian's 1.13 (and HPC-X) default to backtraces on those signals; PyPI's 1.22 build defaults to
        // UCX_HANDLE_ERRORS=none, which installs no handlers at all. Spelled out too, so the loader is
        // tested against handlers that would be installed, whichever UCX the library was built with.
        env.put("UCX_HANDLE_ERRORS", "bt");
        return env;
    }

    @Test
    void loadsFromTheJarResourcesAndTheJvmKeepsItsSignals(@TempDir Path cache) throws Exception {
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class, List.of(cacheDir(cache)), cleanEnv(), "npe");
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("LOADED\n"), result.output());
        assertTrue(result.output().contains("LOADED AGAIN"), result.output());
        assertTrue(result.output().contains("NPES 150000"), result.output());
        assertFalse(result.output().contains("Caught signal"), "UCX must not see the JVM's signals\n" + result.output());
        assertTrue(result.output().contains("LIBC_TEXT_MAPPINGS 1\n"), "UCX left libc's code alone\n" + result.output());
    }

    @Test
    void anExplicitUcxMemEventsIsRespectedAndPatchesLibc() throws Exception {
        // Also the negative control of the mapping count above: with events on, UCX patches libc.
        Map<String, String> env = cleanEnv();
        env.put("UCX_MEM_EVENTS", "yes");
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class, List.of(), env);
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("LOADED\n"), result.output());
        assertFalse(result.output().contains("LIBC_TEXT_MAPPINGS 1\n"), "expected patched libc code\n" + result.output());
    }

    @Test
    void withoutThePreloadUcxKillsTheJvm(@TempDir Path crashes) throws Exception {
        Path library = extractedMainLibrary();
        Fixtures.ChildResult result = Fixtures.runJvm(UnguardedLoadMain.class,
                List.of("-XX:-CreateCoredumpOnCrash", "-XX:ErrorFile=" + crashes.resolve("hs_err_%p.log")),
                cleanEnv(), library.toString());
        // UCX's handler takes the JVM's own SIGSEGV (an implicit null check). What happens next varies
        // (UCX prints a backtrace, then either kills the process or hands the signal back), so the
        // robust evidence is UCX's report of the signal it should never have seen.
        assertTrue(result.output().contains("Caught signal 11"), "UCX's SIGSEGV handler saw the JVM's signal\n" + result.output());
    }

    private static String cacheDir(Path cache) {
        return "-D" + NativeCache.CACHE_DIR_PROPERTY + "=" + cache;
    }

    /** The cache's version folders. */
    private static List<Path> versionFolders(Path cache) throws IOException {
        try (var folders = Files.list(cache)) {
            return folders.toList();
        }
    }

    /**
     * Every reduce task and executor extracted both libraries to a fresh temporary directory (137 of 222 samples of
     * a reducer's first node start, docs/mapreduce-shuffle.md). Now the first JVM fills a private cache folder named
     * by the libraries' CRC-32 and size, the next ones load from it without writing, and a damaged cached library is
     * replaced before anything loads it.
     */
    @Test
    void theLibrariesAreExtractedOncePerVersionIntoAPrivateCache(@TempDir Path home) throws Exception {
        Path cache = home.resolve("cache");
        Fixtures.ChildResult first = Fixtures.runJvm(LoaderProbeMain.class, List.of(cacheDir(cache)), cleanEnv());
        assertEquals(0, first.exitCode(), first.output());
        assertTrue(first.output().contains("LOADED\n"), first.output());
        List<Path> versions = versionFolders(cache);
        assertEquals(1, versions.size(), versions.toString());
        Path main = versions.get(0).resolve(NativeLoader.MAIN_LIBRARY);
        Path preload = versions.get(0).resolve(NativeLoader.PRELOAD_LIBRARY);
        assertTrue(Files.isRegularFile(main) && Files.isRegularFile(preload), versions.toString());
        assertEquals("rwx------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(cache)));
        assertEquals("rwx------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(versions.get(0))));
        assertEquals("r-x------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(main)));
        Object inode = Files.readAttributes(main, java.nio.file.attribute.BasicFileAttributes.class).fileKey();

        Fixtures.ChildResult second = Fixtures.runJvm(LoaderProbeMain.class, List.of(cacheDir(cache)), cleanEnv());
        assertEquals(0, second.exitCode(), second.output());
        assertTrue(second.output().contains("LOADED\n"), second.output());
        assertTrue(second.output().contains("MAPPED_FROM " + main + "\n"), "loaded from the cache\n" + second.output());
        assertEquals(inode, Files.readAttributes(main, java.nio.file.attribute.BasicFileAttributes.class).fileKey(),
                "the second JVM rewrote the cached library");
        assertEquals(1, versionFolders(cache).size());

        byte[] damaged = Files.readAllBytes(main);
        damaged[damaged.length / 2] ^= 1;
        Files.setPosixFilePermissions(main, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        Files.write(main, damaged);
        Fixtures.ChildResult third = Fixtures.runJvm(LoaderProbeMain.class, List.of(cacheDir(cache)), cleanEnv());
        assertEquals(0, third.exitCode(), third.output());
        assertTrue(third.output().contains("LOADED\n"), third.output());
        assertFalse(java.util.Arrays.equals(damaged, Files.readAllBytes(main)), "the damaged library was kept");
    }

    /** A cache others could write to would let them run code in the JVM: not used, one warning, loaded all the same. */
    @Test
    void aCacheOthersCanWriteIsNotUsed(@TempDir Path home) throws Exception {
        Path cache = Files.createDirectory(home.resolve("cache"));
        Files.setPosixFilePermissions(cache, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class, List.of(cacheDir(cache)), cleanEnv());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("LOADED\n"), result.output());
        assertTrue(result.output().contains("cannot be used (" + cache + " is writable by others"), result.output());
        try (var versions = Files.list(cache)) {
            // The version folder may exist (it is made before the check of its parent); no library was written into it.
            for (Path version : versions.toList()) {
                try (var files = Files.list(version)) {
                    assertEquals(0, files.count(), "libraries written to an unsafe cache: " + version);
                }
            }
        }
    }

    @Test
    void aMissingLibraryIsOneClearException(@TempDir Path empty) throws Exception {
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class,
                List.of("-D" + NativeLoader.NATIVE_DIR_PROPERTY + "=" + empty), cleanEnv());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("UNAVAILABLE native library " + empty), result.output());
        assertTrue(result.output().contains("does not exist"), result.output());
        assertTrue(result.output().contains("UNAVAILABLE AGAIN true"), "the failure is remembered\n" + result.output());
    }

    @Test
    void anUnloadableLibraryIsOneClearException(@TempDir Path directory) throws Exception {
        Files.write(directory.resolve(NativeLoader.PRELOAD_LIBRARY), "not an ELF file".getBytes());
        Files.write(directory.resolve(NativeLoader.MAIN_LIBRARY), "not an ELF file".getBytes());
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class,
                List.of("-D" + NativeLoader.NATIVE_DIR_PROPERTY + "=" + directory), cleanEnv());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("UNAVAILABLE cannot load the fabric's preload library"), result.output());
    }

    @Test
    void aMissingUcxIsOneClearException(@TempDir Path directory) throws Exception {
        // The real preload, and a main library whose UCX dependency the dynamic linker cannot find:
        // a copy of the real one with "libucp.so.0" renamed in its dynamic section.
        copyResource(NativeLoader.PRELOAD_LIBRARY, directory);
        byte[] main = Files.readAllBytes(extractedMainLibrary());
        int patched = replaceAll(main, "libucp.so.0".getBytes(), "libucX.so.0".getBytes());
        assertTrue(patched > 0, "libucp.so.0 not found in the main library");
        Files.write(directory.resolve(NativeLoader.MAIN_LIBRARY), main);
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class,
                List.of("-D" + NativeLoader.NATIVE_DIR_PROPERTY + "=" + directory), cleanEnv());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("UNAVAILABLE cannot load the fabric's JNI library: UCX is not installed"),
                result.output());
        assertTrue(result.output().contains("libucX.so.0"), result.output());
    }

    @Test
    void ucxThatCannotStartIsOneClearException() throws Exception {
        Map<String, String> env = cleanEnv();
        env.put("UCX_TLS", "no-such-transport");
        Fixtures.ChildResult result = Fixtures.runJvm(LoaderProbeMain.class, List.of(), env);
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("UNAVAILABLE UCX cannot start in this process"), result.output());
    }

    @Test
    void theSameUcxFailureReachesFabricNodeStart() throws Exception {
        Map<String, String> env = cleanEnv();
        env.put("UCX_TLS", "no-such-transport");
        Fixtures.ChildResult result = Fixtures.runJvm(StartProbeMain.class, List.of(), env);
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("FALLBACK UCX cannot start"), result.output());
    }

    @Test
    void platformNames() {
        String platform = NativeLoader.platform();
        assertTrue(platform.matches("[a-z0-9]+-[a-z0-9_]+"), platform);
    }

    private static Path extractedMainLibrary() throws IOException {
        Path directory = Files.createTempDirectory("fabric-loader-test-");
        directory.toFile().deleteOnExit();
        Path library = copyResource(NativeLoader.MAIN_LIBRARY, directory);
        library.toFile().deleteOnExit();
        return library;
    }

    private static Path copyResource(String library, Path directory) throws IOException {
        String resource = "/native/" + NativeLoader.platform() + "/" + library;
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException(resource + " is not on the class path: build native/ first");
            }
            Path target = directory.resolve(library);
            Files.copy(in, target);
            return target;
        }
    }

    private static int replaceAll(byte[] haystack, byte[] needle, byte[] replacement) {
        int count = 0;
        outer:
        for (int i = 0; i + needle.length <= haystack.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            System.arraycopy(replacement, 0, haystack, i, replacement.length);
            count++;
        }
        return count;
    }
}
