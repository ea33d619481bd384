//! The server's part of `stats`: process facts, connection counters, fabric counters. The
//! protocol layer adds its command counters, the store its item and memory counters.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Counters shared by the acceptor, the workers and the fabric handler. Relaxed atomics: they are
/// read only by `stats`.
#[derive(Default)]
pub struct Counters {
    /// TCP connections open now.
    pub curr_connections: AtomicU64,
    /// TCP connections accepted since start (rejected ones excluded).
    pub total_connections: AtomicU64,
    /// TCP connections refused at `-c` ("ERROR Too many open connections").
    pub rejected_connections: AtomicU64,
    /// TCP connections closed because one command could not fit the bounded read buffer.
    pub oversized_requests: AtomicU64,
    /// Fabric requests received (any op).
    pub fabric_requests: AtomicU64,
    /// Fabric requests answered with a failure (unknown op, malformed payload, no memory for the reply).
    pub fabric_requests_failed: AtomicU64,
    /// Fabric connections with protocol state (authentication) held now.
    pub fabric_sessions: AtomicU64,
    /// Connections closed because a read buffer or a reply could not grow (output cap, or
    /// `--conn-buffers-mb` exhausted).
    pub buffer_budget_refusals: AtomicU64,
    /// Panics caught around the protocol layer (a bug; the connection or request is dropped).
    pub internal_errors: AtomicU64,
    /// Times a TCP connection or a fabric request stopped before a command to wait for a value the
    /// store reads from its SSD tier (hybrid mode).
    pub storage_waits: AtomicU64,
    /// Fabric requests parked now: waiting for the store, or queued behind one of their
    /// connection's that waits.
    pub fabric_requests_parked: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What `stats` needs besides the counters.
pub struct ServerFacts {
    pub version: String,
    pub threads: usize,
    pub conn_limit: usize,
    pub started: Instant,
    pub fabric: Arc<OnceLock<fabric::Node>>,
    pub buffers: Arc<crate::buffers::Budget>,
}

pub fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The server's `stats` lines, in memcached's order where memcached has them.
pub fn server_stats(facts: &ServerFacts, counters: &Counters) -> Vec<(String, String)> {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
    let (user_s, system_s) = rusage();
    let mut out: Vec<(String, String)> = vec![
        ("pid".into(), std::process::id().to_string()),
        ("uptime".into(), facts.started.elapsed().as_secs().to_string()),
        ("time".into(), unix_now_s().to_string()),
        ("version".into(), facts.version.clone()),
        ("libevent".into(), "none (epoll)".into()),
        ("pointer_size".into(), (usize::BITS).to_string()),
        ("rusage_user".into(), user_s),
        ("rusage_system".into(), system_s),
        ("max_connections".into(), facts.conn_limit.to_string()),
        ("curr_connections".into(), load(&counters.curr_connections)),
        ("total_connections".into(), load(&counters.total_connections)),
        ("rejected_connections".into(), load(&counters.rejected_connections)),
        ("oversized_requests".into(), load(&counters.oversized_requests)),
        ("buffer_budget_refusals".into(), load(&counters.buffer_budget_refusals)),
        ("conn_buffers_bytes".into(), facts.buffers.used_bytes().to_string()),
        ("conn_buffers_limit".into(), facts.buffers.limit_bytes().to_string()),
        ("internal_errors".into(), load(&counters.internal_errors)),
        ("storage_waits".into(), load(&counters.storage_waits)),
        ("threads".into(), facts.threads.to_string()),
    ];
    match facts.fabric.get() {
        Some(node) => {
            let s = node.stats();
            out.push(("fabric_listen".into(), node.local_addr().map(|a| a.to_string()).unwrap_or_default()));
            out.push(("fabric_connections".into(), s.connections_open.to_string()));
            out.push(("fabric_sessions".into(), load(&counters.fabric_sessions)));
            out.push(("fabric_requests".into(), load(&counters.fabric_requests)));
            out.push(("fabric_requests_failed".into(), load(&counters.fabric_requests_failed)));
            out.push(("fabric_requests_shed".into(), s.requests_shed.to_string()));
            out.push(("fabric_requests_parked".into(), load(&counters.fabric_requests_parked)));
            out.push(("fabric_protocol_errors".into(), s.protocol_errors.to_string()));
            out.push(("fabric_peers_failed".into(), s.peers_failed.to_string()));
            out.push(("fabric_pool_bytes_mapped".into(), s.pool_bytes_mapped.to_string()));
            out.push(("fabric_pool_bytes_in_use".into(), s.pool_bytes_in_use.to_string()));
            out.push(("fabric_pool_cap_bytes".into(), s.pool_cap_bytes.to_string()));
        }
        None => out.push(("fabric_listen".into(), "off".into())),
    }
    out
}

/// User and system CPU time as memcached prints them (`seconds.microseconds`).
fn rusage() -> (String, String) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return ("0.000000".into(), "0.000000".into());
    }
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (fmt(usage.ru_utime), fmt(usage.ru_stime))
}
