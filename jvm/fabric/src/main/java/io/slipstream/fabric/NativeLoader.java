package io.slipstream.fabric;

import java.io.IOException;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads the fabric's native libraries, once per JVM, in the only safe order:
 * <ol>
 * <li>finds the two libraries: in the directory named by the system property
 *     {@value #NATIVE_DIR_PROPERTY} if set (development, tests), else in this jar under
 *     {@code /native/<os>-<arch>/}, extracted once into a private cache directory keyed by the
 *     libraries' CRC-32 and size ({@link NativeCache}), or, when that cannot be used, to a fresh
 *     temporary directory;</li>
 * <li>loads {@code libslipstream_fabric_preload.so} (no UCX inside) and calls {@link Preload#prepare()},
 *     which sets {@code UCX_ERROR_SIGNALS=} in the C environment: libucs installs its SIGSEGV/SIGBUS/
 *     SIGILL/SIGFPE handlers in its load-time constructor unless that variable is empty, and the JVM,
 *     which raises SIGSEGV on purpose (implicit null checks, safepoints), dies under them. It also
 *     sets {@code UCX_MEM_EVENTS=no} unless the environment sets it: otherwise {@code ucp_init}
 *     patches libc's {@code mmap}/{@code munmap} code in place while JVM threads run it, for a
 *     registration cache the fabric does not use (it registers its pool explicitly);</li>
 * <li>loads {@code libslipstream_fabric_jni.so}, which links libucp and libucs (their constructors run
 *     now, with signals disabled), and checks its ABI version;</li>
 * <li>starts and closes one client-only node (UCX context and worker): UCX can start;</li>
 * <li>calls {@link Preload#verify()}: should any error-signal handler have changed anyway, the JVM's
 *     is put back and a warning logged;</li>
 * <li>deletes the files extracted to a temporary directory (a loaded library stays mapped).</li>
 * </ol>
 * Any failure ends in one {@link FabricUnavailableException} whose message names the cause; the
 * outcome is remembered, so later calls fail (or succeed) the same way without trying again.
 */
public final class NativeLoader {
    /** System property: load the libraries from this directory instead of from the jar. */
    public static final String NATIVE_DIR_PROPERTY = "slipstream.fabric.native.dir";

    static final String PRELOAD_LIBRARY = "libslipstream_fabric_preload.so";
    static final String MAIN_LIBRARY = "libslipstream_fabric_jni.so";

    private static final System.Logger LOG = System.getLogger(NativeLoader.class.getName());

    private static final Object LOCK = new Object();
    private static boolean loaded;
    private static FabricUnavailableException failure;

    private NativeLoader() {
    }

    /**
     * Loads the native libraries and starts UCX once, if not done yet.
     *
     * @throws FabricUnavailableException the fabric cannot run in this JVM (see the message); every
     *     later call throws again
     */
    public static void load() throws FabricUnavailableException {
        synchronized (LOCK) {
            if (loaded) {
                return;
            }
            if (failure != null) {
                throw new FabricUnavailableException(failure.getMessage(), failure);
            }
            try {
                loadOnce();
                loaded = true;
            } catch (FabricUnavailableException e) {
                failure = e;
                throw e;
            }
        }
    }

    /** True if {@link #load()} succeeds; never throws. */
    public static boolean isAvailable() {
        try {
            load();
            return true;
        } catch (FabricUnavailableException e) {
            return false;
        }
    }

    /** {@code <os>-<arch>} as in the jar's {@code /native/} folder, e.g. {@code linux-x86_64}. */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String osName = os.startsWith("linux") ? "linux" : os.replaceAll("[^a-z0-9]", "");
        String archName = switch (arch) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> arch.replaceAll("[^a-z0-9_]", "");
        };
        return osName + "-" + archName;
    }

    private static void loadOnce() throws FabricUnavailableException {
        String dirProperty = System.getProperty(NATIVE_DIR_PROPERTY);
        Path extracted = null;
        Path directory;
        if (dirProperty != null && !dirProperty.isEmpty()) {
            directory = Path.of(dirProperty);
        } else {
            String folder = "/native/" + platform() + "/";
            directory = NativeCache.directory(folder, new String[] {PRELOAD_LIBRARY, MAIN_LIBRARY});
            if (directory == null) {
                extracted = extract(folder);
                directory = extracted;
            }
        }
        try {
            Path preload = existing(directory.resolve(PRELOAD_LIBRARY));
            Path main = existing(directory.resolve(MAIN_LIBRARY));
            loadLibrary(preload, "the fabric's preload library");
            int flags = Preload.prepare();
            if ((flags & Preload.SETENV_FAILED) != 0) {
                throw new FabricUnavailableException("could not set UCX_ERROR_SIGNALS= in the process environment; "
                        + "refusing to load UCX, whose signal handlers would crash the JVM");
            }
            if ((flags & Preload.UCS_ALREADY_LOADED) != 0) {
                LOG.log(Level.WARNING, "libucs was loaded into this JVM before the Slipstream fabric; if it was "
                        + "loaded without UCX_ERROR_SIGNALS= its signal handlers are installed (they are checked "
                        + "and replaced by the JVM's after loading)");
            }
            if ((flags & Preload.KEPT_MEM_EVENTS) != 0) {
                LOG.log(Level.DEBUG, "UCX_MEM_EVENTS is set in the environment and kept; if it enables events, "
                        + "UCX patches libc's memory functions while JVM threads use them");
            }
            if ((flags & Preload.OVERRODE_ERROR_SIGNALS) != 0) {
                LOG.log(Level.WARNING, "UCX_ERROR_SIGNALS was set in the environment; the fabric empties it, "
                        + "because UCX's handlers would catch the JVM's own SIGSEGVs");
            }
            loadLibrary(main, "the fabric's JNI library");
            int abi = abiVersion();
            if (abi != FabricNative.ABI_VERSION) {
                throw new FabricUnavailableException("native library " + main + " has JNI ABI version " + abi
                        + ", this jar needs " + FabricNative.ABI_VERSION + ": the jar and the library were built apart");
            }
            try {
                FabricNative.probe();
            } catch (FabricException e) {
                throw new FabricUnavailableException("UCX cannot start in this process: " + e.getMessage()
                        + " (check UCX_TLS, UCX_NET_DEVICES and the UCX installation with `ucx_info -d`)", e);
            }
            long restored = Preload.verify();
            if (restored != 0) {
                LOG.log(Level.WARNING, "UCX replaced the JVM's handler of signal mask 0x" + Long.toHexString(restored)
                        + " despite UCX_ERROR_SIGNALS=; the JVM's handlers were put back");
            }
        } finally {
            if (extracted != null) {
                deleteQuietly(extracted.resolve(PRELOAD_LIBRARY));
                deleteQuietly(extracted.resolve(MAIN_LIBRARY));
                deleteQuietly(extracted);
            }
        }
    }

    private static int abiVersion() throws FabricUnavailableException {
        try {
            return FabricNative.abiVersion();
        } catch (UnsatisfiedLinkError e) {
            throw new FabricUnavailableException("the fabric's JNI library lacks its entry points: " + e.getMessage(), e);
        }
    }

    private static Path existing(Path library) throws FabricUnavailableException {
        if (!Files.isRegularFile(library)) {
            throw new FabricUnavailableException("native library " + library + " does not exist (system property "
                    + NATIVE_DIR_PROPERTY + "=" + System.getProperty(NATIVE_DIR_PROPERTY) + ")");
        }
        return library;
    }

    private static void loadLibrary(Path library, String what) throws FabricUnavailableException {
        try {
            System.load(library.toAbsolutePath().toString());
        } catch (UnsatisfiedLinkError e) {
            String detail = String.valueOf(e.getMessage());
            String cause = detail.contains("libuc")
                    ? "UCX is not installed or not found by the dynamic linker (install UCX 1.13 or newer, e.g. "
                            + "Debian's libucx0, or add its lib directory to LD_LIBRARY_PATH)"
                    : "the library cannot be loaded on this system";
            throw new FabricUnavailableException("cannot load " + what + ": " + cause + ": " + detail, e);
        } catch (SecurityException e) {
            throw new FabricUnavailableException("not allowed to load " + what + " " + library + ": " + e.getMessage(), e);
        }
    }

    /** Copies both libraries out of the jar into a new private temporary directory. */
    private static Path extract(String folder) throws FabricUnavailableException {
        String platform = platform();
        Path directory;
        try {
            directory = Files.createTempDirectory("slipstream-fabric-");
        } catch (IOException | SecurityException e) {
            throw new FabricUnavailableException("cannot create a temporary directory for the native libraries: " + e, e);
        }
        for (String library : new String[] {PRELOAD_LIBRARY, MAIN_LIBRARY}) {
            try (InputStream in = NativeLoader.class.getResourceAsStream(folder + library)) {
                if (in == null) {
                    deleteQuietly(directory.resolve(PRELOAD_LIBRARY));
                    deleteQuietly(directory);
                    throw new FabricUnavailableException("no native library for platform " + platform + " in the jar ("
                            + folder + library + " is missing; the fabric is built for linux-x86_64: run "
                            + "`cargo build --release -p fabric-jni -p fabric-jni-preload` in native/ before packaging)");
                }
                Files.copy(in, directory.resolve(library), StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException e) {
                deleteQuietly(directory.resolve(PRELOAD_LIBRARY));
                deleteQuietly(directory.resolve(MAIN_LIBRARY));
                deleteQuietly(directory);
                throw new FabricUnavailableException("cannot extract " + library + " to " + directory + ": " + e, e);
            }
        }
        return directory;
    }

    private static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException | SecurityException e) {
            LOG.log(Level.DEBUG, "could not delete " + path + ": " + e);
        }
    }
}
