package io.slipstream.ohb;

/** What the benchmark client and server agree on. */
final class BenchProtocol {
    /** Respond with the request's payload (the fabric server sends it back without copying). */
    static final int OP_ECHO = 1;
    /** Respond with {@link #ACK_BYTES} bytes. */
    static final int OP_ACK = 2;
    static final int ACK_BYTES = 8;
    /** Largest payload either side accepts. */
    static final int SIZE_MAX = 64 << 20;
    /** The server's line on stdout once it listens: {@code READY fabric=<port|unavailable> fabric-tcp=... java-socket=<port>}. */
    static final String READY = "READY";

    private BenchProtocol() {
    }
}
