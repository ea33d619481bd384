package io.slipstream.fabric;

/**
 * The fabric cannot run in this JVM: the native library is missing for this platform, UCX is not
 * installed (the library's dependency {@code libucp.so.0} is not found), or UCX cannot start
 * ({@code ucp_init} or worker creation fails).
 *
 * <p>Checked on purpose: it is the one exception a plugin must decide about, typically by falling
 * back to its engine's default (TCP) path. {@link NativeLoader#load()} and
 * {@link FabricNode#start(FabricConfig)} throw it; once the library has loaded and UCX has started
 * once in this JVM, it is never thrown again, and later failures are {@link FabricException}s.
 * The loader tries once per JVM: after a failure, every later call throws a new instance of this
 * exception with the first failure as its cause.
 */
public class FabricUnavailableException extends Exception {
    private static final long serialVersionUID = 1L;

    public FabricUnavailableException(String message) {
        super(message);
    }

    public FabricUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
