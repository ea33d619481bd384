package io.slipstream.fabric;

/**
 * Run in a child JVM by {@link NativeLoaderTest}: loads the fabric and reports the outcome on stdout as
 * {@code LOADED}, or {@code UNAVAILABLE <message>} (also for the second attempt, which must fail the
 * same way), then the number of executable libc mappings (see {@link #libcTextMappings()}) and, with
 * argument {@code npe}, makes the JVM raise many SIGSEGVs of its own; {@code MAPPED_FROM} names the
 * file the JNI library was loaded from.
 */
public final class LoaderProbeMain {
    private LoaderProbeMain() {
    }

    /**
     * Executable mappings of libc: one, unless UCX's memory hooks patched its code (the patched pages
     * become separate mappings).
     */
    static long libcTextMappings() {
        try {
            return java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps")).stream()
                    .filter(line -> line.contains("/libc.so") && line.split("\\s+")[1].contains("x"))
                    .count();
        } catch (java.io.IOException e) {
            return -1;
        }
    }

    /** The file the JVM mapped {@code library} from (empty if none). */
    static String mappedFrom(String library) {
        try {
            return java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps")).stream()
                    .map(line -> line.split("\\s+"))
                    .filter(fields -> fields.length >= 6 && fields[5].endsWith("/" + library))
                    .map(fields -> fields[5]).findFirst().orElse("");
        } catch (java.io.IOException e) {
            return "";
        }
    }

    public static void main(String[] args) {
        boolean loaded;
        try {
            NativeLoader.load();
            System.out.println("LOADED");
            loaded = true;
        } catch (FabricUnavailableException e) {
            System.out.println("UNAVAILABLE " + e.getMessage());
            loaded = false;
        }
        try {
            NativeLoader.load();
            System.out.println(loaded ? "LOADED AGAIN" : "LOADED AFTER FAILURE");
        } catch (FabricUnavailableException e) {
            System.out.println(loaded ? "FAILED AFTER SUCCESS" : "UNAVAILABLE AGAIN " + (e.getCause() != null));
        }
        System.out.println("LIBC_TEXT_MAPPINGS " + libcTextMappings());
        System.out.println("MAPPED_FROM " + mappedFrom(NativeLoader.MAIN_LIBRARY));
        if (args.length > 0 && args[0].equals("npe")) {
            System.out.println("NPES " + SignalStress.nullPointerExceptions());
        }
    }
}
