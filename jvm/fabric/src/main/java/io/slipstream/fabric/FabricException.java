package io.slipstream.fabric;

/**
 * A fabric operation failed. Unchecked: it mirrors the Rust {@code fabric::Error}, one {@link Kind}
 * per variant, plus {@link Kind#INTERNAL} for a failure inside the bridge itself (a Rust panic or a
 * JNI error, which the bridge turns into this exception instead of crashing the JVM).
 *
 * <p>Misuse of the Java API (a released buffer, a request answered twice, an argument out of range)
 * throws {@link IllegalStateException} or {@link IllegalArgumentException} instead.
 */
public class FabricException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** One per {@code fabric::Error} variant. The order is the native code: keep it in step with {@code error_kind} in fabric-jni. */
    public enum Kind {
        /** A UCX call failed. */
        UCX,
        /** The connection to the peer failed (peer died, reset, unreachable). */
        PEER_FAILED,
        /** No response within the node's request timeout. */
        TIMEOUT,
        /** The peer shed the request: its dispatch queue was full. */
        OVERLOADED,
        /** The payload exceeds {@link FabricConfig#maxMessageBytes()}. */
        TOO_LARGE,
        /** The registered buffer pool is at its cap and nothing came back in time. */
        POOL_EXHAUSTED,
        /** The node is closed. */
        CLOSED,
        /** The remote handler failed the request; the message is the handler's. */
        REMOTE,
        /** A peer broke the wire format. */
        PROTOCOL,
        /** The configuration is unusable. */
        CONFIG,
        /** A failure inside the bridge (Rust panic, JNI error). A bug: please report it. */
        INTERNAL;

        static Kind ofCode(int code) {
            Kind[] kinds = values();
            return code >= 0 && code < kinds.length ? kinds[code] : INTERNAL;
        }
    }

    private final Kind kind;

    public FabricException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public FabricException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    /** Called by the native library only. */
    FabricException(int kindCode, String message) {
        this(Kind.ofCode(kindCode), message);
    }

    public Kind kind() {
        return kind;
    }

    static FabricException closed() {
        return new FabricException(Kind.CLOSED, "fabric node is closed");
    }
}
