package io.slipstream.fabric;

/** Which transports UCX may use; mirrors {@code fabric::Transport}. The order is the native code. */
public enum FabricTransport {
    /** UCX selects (shared memory and CMA on one host, verbs on RDMA clusters, TCP otherwise); {@code UCX_TLS} is respected. */
    AUTO,
    /** TCP only, for side-by-side comparisons with sockets. */
    TCP
}
