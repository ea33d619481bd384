//! A node's counters: written on the paths they count, read as one `Stats` snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::pool::Pool;

/// Counters of a node; a snapshot from `Node::stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests_sent: u64,
    pub responses_received: u64,
    pub requests_served: u64,
    pub requests_shed: u64,
    pub requests_timed_out: u64,
    pub connections_open: u64,
    pub pool_bytes_mapped: u64,
    pub pool_bytes_in_use: u64,
    pub pool_cap_bytes: u64,
    pub protocol_errors: u64,
    pub peers_failed: u64,
    /// Bytes this node pulled from same-host senders (CMA) instead of receiving them through UCX.
    pub same_host_bytes_pulled: u64,
    /// Pulls that failed (sender died, let go of the buffer, or named bad memory): those messages failed.
    pub same_host_pulls_failed: u64,
    /// Pulled responses of at least 1 MiB copied on the puller thread, outside the worker lock.
    pub same_host_pulls_deferred: u64,
    /// Same-host connections on which pulling was refused, by this node or by its peer.
    pub same_host_pull_refused: u64,
    /// The most registered memory the pool has had mapped at once (never above the cap plus the
    /// small-buffer reserve): the node's off-heap memory at its worst.
    pub pool_bytes_mapped_peak: u64,
    /// Connections to peers on this host that UCX gave a TCP lane (none without RDMA: `ucx.rs`);
    /// such a lane costs every progress call a poll of UCX's TCP interface.
    pub same_host_connections_with_tcp: u64,
    /// Times a thread slept on the worker's event fd in the progress thread's place (a waiter past
    /// its spin, a pulling handler thread: docs/fabric.md, "Who waits on the event fd"). Counted
    /// per runtime, i.e. for every node of the process with the same transport settings.
    pub event_fd_sleeps: u64,
    /// Outgoing connections made again after their handshake was reset (`HANDSHAKE_RETRIES`).
    pub handshakes_retried: u64,
    /// Bundles this node sent: several small answers posted in one progress round to one peer over
    /// TCP, or several small requests corked for one (`wire::Kind::Bundle`, docs/fabric.md "Forced
    /// to TCP" and "Corked requests and answers"), in one message.
    pub bundles_sent: u64,
    /// The answers those bundles carried.
    pub answers_bundled: u64,
    /// The requests those bundles carried.
    pub requests_bundled: u64,
    /// Requests and answers that waited for a progress round instead of going at once (corked:
    /// `Config::cork_over_tcp`), whether they then went in a bundle or alone.
    pub corked: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    /// Written under the runtime's lock only (`count_under_lock`).
    pub(super) requests_sent: AtomicU64,
    /// Written under the runtime's lock only (`count_under_lock`).
    pub(super) responses_received: AtomicU64,
    pub(super) requests_served: AtomicU64,
    pub(super) requests_shed: AtomicU64,
    pub(super) requests_timed_out: AtomicU64,
    pub(super) connections_open: AtomicU64,
    pub(super) protocol_errors: AtomicU64,
    pub(super) peers_failed: AtomicU64,
    pub(super) same_host_bytes_pulled: AtomicU64,
    pub(super) same_host_pulls_failed: AtomicU64,
    pub(super) same_host_pulls_deferred: AtomicU64,
    pub(super) same_host_pull_refused: AtomicU64,
    pub(super) same_host_connections_with_tcp: AtomicU64,
    pub(super) handshakes_retried: AtomicU64,
    /// Written under the runtime's lock only (`count_under_lock`).
    pub(super) bundles_sent: AtomicU64,
    /// Written under the runtime's lock only.
    pub(super) answers_bundled: AtomicU64,
    /// Written under the runtime's lock only.
    pub(super) requests_bundled: AtomicU64,
    /// Written under the runtime's lock only (`count_under_lock`).
    pub(super) corked: AtomicU64,
}

/// Adds one to a counter that only the holder of the runtime's lock writes: a load and a store
/// instead of an atomic read-modify-write, on the path of every message. Readers (`stats`) see
/// whole values.
pub(super) fn count_under_lock(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

impl Counters {
    /// A snapshot, with the pool's figures and the runtime's event-fd sleeps (shared by the nodes of a runtime).
    pub(super) fn snapshot(&self, pool: &Pool, event_fd_sleeps: u64) -> Stats {
        let c = self;
        Stats {
            requests_sent: c.requests_sent.load(Ordering::Relaxed),
            responses_received: c.responses_received.load(Ordering::Relaxed),
            requests_served: c.requests_served.load(Ordering::Relaxed),
            requests_shed: c.requests_shed.load(Ordering::Relaxed),
            requests_timed_out: c.requests_timed_out.load(Ordering::Relaxed),
            connections_open: c.connections_open.load(Ordering::Relaxed),
            pool_bytes_mapped: pool.mapped_bytes() as u64,
            pool_bytes_mapped_peak: pool.mapped_bytes_peak() as u64,
            pool_bytes_in_use: pool.in_use_bytes() as u64,
            pool_cap_bytes: pool.cap_bytes() as u64,
            protocol_errors: c.protocol_errors.load(Ordering::Relaxed),
            peers_failed: c.peers_failed.load(Ordering::Relaxed),
            same_host_bytes_pulled: c.same_host_bytes_pulled.load(Ordering::Relaxed),
            same_host_pulls_failed: c.same_host_pulls_failed.load(Ordering::Relaxed),
            same_host_pulls_deferred: c.same_host_pulls_deferred.load(Ordering::Relaxed),
            same_host_pull_refused: c.same_host_pull_refused.load(Ordering::Relaxed),
            same_host_connections_with_tcp: c.same_host_connections_with_tcp.load(Ordering::Relaxed),
            event_fd_sleeps,
            handshakes_retried: c.handshakes_retried.load(Ordering::Relaxed),
            bundles_sent: c.bundles_sent.load(Ordering::Relaxed),
            answers_bundled: c.answers_bundled.load(Ordering::Relaxed),
            requests_bundled: c.requests_bundled.load(Ordering::Relaxed),
            corked: c.corked.load(Ordering::Relaxed),
        }
    }
}
