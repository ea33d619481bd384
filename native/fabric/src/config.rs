//! Node configuration. Every limit the node enforces is named here, declared once with its
//! default and its meaning (`settings!`): docs/configuration.md and the JVM bridge's settings are
//! generated from these declarations (`Config::SETTINGS`, `Config::set`).
use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::setting::settings;

/// Which transports UCX may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UCX selects (shared memory and CMA on one host, verbs on RDMA clusters, TCP otherwise).
    /// `UCX_TLS` in the environment is respected.
    Auto,
    /// TCP only, for side-by-side comparisons with sockets.
    Tcp,
}

/// Where request handlers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerMode {
    /// On the progress thread, inside the receive stage: for tiny handlers that never block (echo, counters).
    Inline,
    /// Receive -> dispatch queue -> `threads` handler threads -> respond queue -> progress thread.
    Staged { threads: usize },
    /// No fabric thread runs handlers; the owner pulls with `Node::next_request` (the JVM bridge does).
    Pull,
}

settings! {
    #[derive(Debug, Clone)]
    pub struct Config {
        /// Address to listen on; `None` makes a client-only node. Port 0 picks a free port.
        pub listen: Option<SocketAddr> = None,
        /// Transports UCX may use: `auto` (UCX picks: shared memory on one host, verbs on RDMA
        /// clusters, TCP otherwise; `UCX_TLS` respected) or `tcp` (TCP only).
        pub transport: Transport = Transport::Auto,
        /// Payloads above this travel as several chunks that may complete out of order. Connections
        /// that send eagerly over TCP cut at most 512 KiB (one UCX receive segment, docs/fabric.md).
        pub chunk_size_bytes: usize = 1 << 20,
        /// Hard cap on registered (UCX-mapped) buffer memory of this node.
        pub pool_cap_bytes: usize = 256 << 20,
        /// Largest request or response accepted, sent or received.
        pub max_message_bytes: usize = 128 << 20,
        /// Requests of this node awaiting a response; a caller above it waits (up to `request_timeout`).
        pub max_requests_in_flight: usize = 4096,
        /// Connections a listening node accepts at once; further connection requests are rejected.
        pub max_connections: usize = 1024,
        /// Depth of the queue between the receive and handle stages (and of the respond queue).
        pub dispatch_queue_depth: usize = 1024,
        /// Where request handlers run: `inline` (on the progress thread), `staged:N` (N handler
        /// threads behind the dispatch queue) or `pull` (the owner takes requests; the JVM bridge).
        pub handler_mode: HandlerMode = HandlerMode::Staged { threads: 2 },
        /// Cached outgoing connections unused this long are closed.
        pub idle_timeout: Duration = Duration::from_secs(60),
        /// Accepted (incoming) connections on which nothing was received or sent this long, with no
        /// request being served, are closed. Longer than `idle_timeout` by default, so that a peer with
        /// the same settings closes its own end first and never sees its cached connection fail.
        pub incoming_idle_timeout: Duration = Duration::from_secs(120),
        /// Multi-chunk requests one connection may have in reassembly at once; a chunk that would start
        /// one more is a protocol error (the connection is closed). Responses are bounded by the
        /// pending table instead (`max_requests_in_flight`).
        pub max_reassembly_messages_per_connection: usize = 256,
        /// Multi-chunk requests in reassembly at once over all connections; beyond it, as above, for
        /// the connection whose chunk would exceed it.
        pub max_reassembly_messages: usize = 4096,
        /// Bytes of buffers one connection's requests may hold in reassembly (at least one message is
        /// always admitted). A request beyond it gets no buffer: its chunks are received and dropped
        /// and it is answered `STATUS_POOL_EXHAUSTED`, so one peer cannot pin the whole pool.
        pub max_reassembly_bytes_per_connection: usize = 128 << 20,
        /// A message in reassembly whose chunks stop arriving for this long is dropped and its buffer
        /// freed (no answer is sent: the requester's own deadline fails it).
        pub reassembly_timeout: Duration = Duration::from_secs(30),
        /// A request without a response after this fails with `Error::Timeout`.
        pub request_timeout: Duration = Duration::from_secs(30),
        /// The progress thread spins this long after the last event before sleeping on the worker's event fd.
        pub spin_us: u64 = 50,
        /// Keep shared memory with peer error handling (`UCX_MM_ERROR_HANDLING=y`); without it UCX
        /// falls back to TCP between processes on one host once peer failures are detected. See docs/fabric.md.
        pub shm_with_peer_errors: bool = true,
        /// Network devices UCX may use (`UCX_NET_DEVICES` syntax, e.g. `mlx5_0:1,eth0`). UCX's TCP
        /// transport listens on every device it uses, so the default, `lo`, keeps everything on
        /// loopback; a cluster names its devices here (or in `UCX_NET_DEVICES`, which wins).
        pub net_devices: String = "lo".to_string(),
        /// Send every message to a peer on this host eagerly (through shared memory), never by
        /// rendezvous. With peer error handling UCX 1.13 cannot use CMA, so rendezvous between two
        /// processes on one host runs over TCP; eager copies through shared memory reach about twice
        /// the bandwidth. Off by default: a peer killed while writing a large eager message into the
        /// shared receive FIFO can wedge that FIFO for every other peer (docs/fabric.md, "Peer error
        /// handling"). Peers on other hosts are unaffected either way.
        pub same_host_eager: bool = false,
        /// Between processes on one host, the receiver pulls large messages from the sender's
        /// buffer with process_vm_readv (CMA, one copy) instead of UCX moving them; refused peers
        /// keep UCX (docs/fabric.md, "The same-host path").
        pub same_host_pull: bool = true,
        /// Smallest message (bytes) that takes the same-host pull path; smaller ones go through
        /// UCX's shared memory. 8 KiB: UCX 1.13 sends a same-host active message eagerly only
        /// while it fits one shared-memory FIFO element (8 KiB and its headers); above, it runs a
        /// rendezvous over active messages, which waits on the sender's progress and cost an
        /// 8 KiB Hadoop RPC echo between JVMs a p50 of 280 us against 130 us by pull (docs/fabric.md).
        pub same_host_pull_min_bytes: usize = 8 << 10,
        /// After a peer failed, a worker that then receives nothing while a later request waits this
        /// long is renewed (UCX 1.13's shared-memory FIFO hazard, docs/fabric.md); zero turns the
        /// check off.
        pub wedge_timeout: Duration = Duration::from_secs(5),
        /// On connections over TCP only, a small request (or answer) posted while others of its
        /// connection are in flight (or being served) waits for the next progress round, which sends
        /// those gathered by then as one message (a bundle), to a peer that has shown it takes
        /// bundles. A lone one goes at once (docs/fabric.md, "Corked requests and answers").
        pub cork_over_tcp: bool = true,
    }
}

impl Config {
    pub(crate) fn validate(&self) -> Result<()> {
        let fail = |m: &str| Err(Error::Config(m.to_string()));
        if (self.chunk_size_bytes as u64) < crate::wire::MIN_CHUNK_BYTES {
            return fail("chunk_size_bytes must be at least 4096");
        }
        if self.max_message_bytes == 0 || self.max_message_bytes > (1usize << 40) {
            return fail("max_message_bytes must be in 1..=2^40");
        }
        if self.pool_cap_bytes < self.max_message_bytes.next_power_of_two() {
            return fail("pool_cap_bytes must hold at least one message of max_message_bytes (rounded up to a power of two)");
        }
        if self.max_requests_in_flight == 0 || self.dispatch_queue_depth == 0 || self.max_connections == 0 {
            return fail("max_requests_in_flight, dispatch_queue_depth and max_connections must be positive");
        }
        if let HandlerMode::Staged { threads } = self.handler_mode {
            if threads == 0 || threads > 256 {
                return fail("Staged handler threads must be in 1..=256");
            }
        }
        if self.request_timeout.is_zero() {
            return fail("request_timeout must be positive");
        }
        if self.max_reassembly_messages_per_connection == 0 || self.max_reassembly_messages == 0 || self.max_reassembly_bytes_per_connection == 0 {
            return fail("max_reassembly_messages_per_connection, max_reassembly_messages and max_reassembly_bytes_per_connection must be positive");
        }
        if self.reassembly_timeout.is_zero() || self.incoming_idle_timeout.is_zero() {
            return fail("reassembly_timeout and incoming_idle_timeout must be positive");
        }
        Ok(())
    }
}
