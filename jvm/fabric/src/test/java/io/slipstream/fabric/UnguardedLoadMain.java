package io.slipstream.fabric;

/**
 * The negative control of {@link NativeLoaderTest}: loads the main library directly, without the
 * preload step, then raises the JVM's own SIGSEGVs. Expected to be killed by UCX's signal handler.
 */
public final class UnguardedLoadMain {
    private UnguardedLoadMain() {
    }

    public static void main(String[] args) {
        System.load(args[0]);
        System.out.println("NPES " + SignalStress.nullPointerExceptions());
    }
}
