package io.slipstream.fabric;

/**
 * The two JNI entry points of {@code libslipstream_fabric_preload.so} (crate
 * {@code native/fabric-jni/preload}), which the loader loads before the main library. See the crate's
 * documentation for why it exists.
 */
final class Preload {
    /** {@link #prepare()} flag: libucs was in the process already, loaded by someone else. */
    static final int UCS_ALREADY_LOADED = 1;
    /** {@link #prepare()} flag: a non-empty {@code UCX_ERROR_SIGNALS} was overridden. */
    static final int OVERRODE_ERROR_SIGNALS = 2;
    /** {@link #prepare()} flag: setenv failed; the main library must not be loaded. */
    static final int SETENV_FAILED = 4;
    /** {@link #prepare()} flag: {@code UCX_MEM_EVENTS} was set in the environment and kept (else it is set to {@code no}). */
    static final int KEPT_MEM_EVENTS = 8;

    private Preload() {
    }

    /**
     * Sets {@code UCX_ERROR_SIGNALS=} (and {@code UCX_MEM_EVENTS=no} unless set) in the C environment
     * and records the JVM's error-signal handlers.
     */
    static native int prepare();

    /**
     * Puts back any error-signal handler that changed since {@link #prepare()}; returns the mask
     * ({@code 1 << signo}) of those it had to put back, -1 if {@code prepare} never ran.
     */
    static native long verify();
}
