//! The connection cache: one UCX endpoint per peer, shared by every caller of the node; endpoints
//! accepted by the listener; wire-up (messages wait in a backlog until the endpoint's first flush
//! completes; a reset handshake is made again, bounded); idle close; failure (requests in flight
//! fail, the endpoint is force-closed, the next request reconnects).
use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::error::{check, ucx_error, Error, Result};
use crate::log::{log_debug, log_warn};
use crate::ucx;
use crate::wire::Header;

use super::send::Payload;
use super::runtime::Runtime;
use super::{NodeInner, NodeState};

/// How long an endpoint closed by `close_after_answer` stays open after the answer (ms).
const CLOSE_LINGER_MS: u64 = 1000;

/// Times an outgoing connection whose handshake was reset is made again before its requests fail.
/// UCX's sockaddr connection manager does not retry a reset handshake (openucx/ucx#4346), and one
/// was seen on loopback under load (CI, a MapReduce fetch). Bounded: a peer that resets every
/// handshake fails its requests after `HANDSHAKE_RETRIES + 1` attempts, within milliseconds.
pub(super) const HANDSHAKE_RETRIES: u32 = 2;

/// The statuses a reset handshake fails with: UCX 1.13 reports "connection reset"; UCX 1.22
/// sometimes reports "endpoint is not connected" for the same reset (seen in CI). Either counts as
/// a reset only while the handshake is still under way (`retry_handshake` checks).
fn handshake_was_reset(status: i32) -> bool {
    status == u::UCS_ERR_CONNECTION_RESET as i32 || status == u::UCS_ERR_NOT_CONNECTED as i32
}

/// An outgoing connection to make again: what waited for the reset one moves to it.
pub(super) struct Reconnect {
    peer: SocketAddr,
    backlog: VecDeque<(Header, Payload, Option<u64>)>,
    request_ids: Vec<u64>,
}

pub(super) struct Conn {
    pub(super) ep: u::ucp_ep_h,
    /// Set for connections this node opened (they are cached by peer and closed when idle).
    pub(super) outgoing_peer: Option<SocketAddr>,
    pub(super) peer_name: String,
    /// The peer's address is one of this host's (`ucx::is_local_address`), read once at creation.
    pub(super) same_host: bool,
    pub(super) failed: bool,
    /// Last request sent or response received (outgoing), last message received or response sent
    /// (accepted), on the coarse clock.
    pub(super) last_used_ms: u64,
    /// Outgoing: this node's requests awaiting their response. Accepted: requests received and not
    /// answered yet.
    pub(super) requests_in_flight: usize,
    /// False until the endpoint's first flush completes, i.e. until UCX has finished wiring up its
    /// transports. UCX 1.13 re-sends messages queued during wire-up with the protocol chosen for
    /// the temporary lane, which shared memory with peer error handling rejects ("Invalid
    /// am_short_iov length"); so messages wait in `backlog` until then.
    pub(super) ready: bool,
    /// The wire-up flush is in flight. UCX 1.22 crashes (use after free in
    /// `ucp_ep_flush_resume_slow_path_callback`) when an endpoint is closed while its flush is
    /// pending, so a close requested then (`close_after_wireup`, with its `force`) waits for it.
    pub(super) wireup_flushing: bool,
    pub(super) close_after_wireup: Option<bool>,
    pub(super) backlog: VecDeque<(Header, Payload, Option<u64>)>,
    /// Extra `ucp_am_send_nbx` flags for this connection (`UCP_AM_SEND_FLAG_EAGER` for same-host peers).
    pub(super) send_flags: u32,
    /// Payloads above this are cut into chunks: `Config::chunk_size_bytes`, or at most
    /// `ucx::TCP_CHUNK_BYTES` on connections that send eagerly over TCP (`tcp_chunk_bytes`).
    pub(super) chunk_bytes: usize,
    /// The connection runs over TCP only (`Transport::Tcp`, or a peer on another host without
    /// RDMA): small responses posted in one progress round go out as one bundle
    /// (`wire::Kind::Bundle`, `NodeInner::send_outbox`).
    pub(super) bundles: bool,
    /// The peer has shown it takes bundles (an answer or a request whose id says so, or a bundle):
    /// only then may this node's requests to it travel in one (`NodeInner::send_request`). A fabric
    /// from before bundles refuses kind 7.
    pub(super) peer_takes_bundles: bool,
    /// Requests to this peer waiting in `NodeState::corked` for the next round, and their bytes
    /// (headers included): at most one bundle's worth (`wire::BUNDLE_FRAMES_MAX`, `BUNDLE_BYTES_MAX`).
    pub(super) corked: usize,
    pub(super) corked_bytes: usize,
    /// Answers to this peer's requests corked in `NodeState::outbox` (`NodeInner::post_answer`).
    pub(super) answers_corked: usize,
}

/// The chunk size of a connection that sends everything eagerly over TCP: each chunk then fits
/// one UCX receive segment (`ucx::TCP_RX_SEG_BYTES`) and reaches the fabric's callback without
/// UCP's reassembly copy.
pub(super) fn tcp_chunk_bytes(chunk_size_bytes: usize) -> usize {
    chunk_size_bytes.min(ucx::TCP_CHUNK_BYTES)
}

impl Conn {
    /// Whether a bundle may go on this connection now: it bundles (TCP only), is wired up and healthy.
    pub(super) fn bundles_now(&self) -> bool {
        self.bundles && self.ready && !self.failed
    }

    /// Whether the idle scan closes this connection: healthy, with nothing in flight, unused for
    /// `idle_timeout_ms` if this node opened it, for `incoming_idle_timeout_ms` if it accepted it
    /// (longer, so that a peer closes the connections it opened itself first).
    fn is_idle(&self, now_ms: u64, idle_timeout_ms: u64, incoming_idle_timeout_ms: u64) -> bool {
        let timeout_ms = if self.outgoing_peer.is_some() { idle_timeout_ms } else { incoming_idle_timeout_ms };
        !self.failed && self.requests_in_flight == 0 && now_ms.saturating_sub(self.last_used_ms) >= timeout_ms
    }
}

struct FlushCtx {
    node: *const NodeInner,
    conn_id: u64,
}

impl NodeInner {
    /// The live connection to `peer`, created if absent or failed.
    pub(super) fn connection_to(&self, state: &mut NodeState, peer: SocketAddr) -> Result<u64> {
        if let Some(&conn_id) = state.by_peer.get(&peer) {
            match state.conns.get(&conn_id) {
                Some(conn) if !conn.failed => return Ok(conn_id),
                _ => {
                    state.by_peer.remove(&peer);
                }
            }
        }
        if self.runtime.worker().is_null() {
            return Err(Error::PeerFailed { peer: peer.to_string(), reason: "this process has no UCX worker: renewing it failed (see the log)".into() });
        }
        let (storage, len) = ucx::sockaddr(&peer);
        // SAFETY: under the runtime's lock (the caller holds `state`); the params are zeroed and
        // filled for exactly the fields in `field_mask`; `storage` (the peer's sockaddr) outlives the
        // call; the error callback's arg is the runtime, which outlives every endpoint of its worker
        // (the worker is destroyed in `Runtime::stop`, after every node closed its endpoints).
        let ep = unsafe {
            let mut params: u::ucp_ep_params_t = std::mem::zeroed();
            params.field_mask = (u::UCP_EP_PARAM_FIELD_FLAGS
                | u::UCP_EP_PARAM_FIELD_SOCK_ADDR
                | u::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                | u::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64;
            params.flags = u::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
            params.sockaddr.addr = &storage as *const _ as *const u::sockaddr;
            params.sockaddr.addrlen = len;
            params.err_mode = u::UCP_ERR_HANDLING_MODE_PEER;
            params.err_handler.cb = Some(ep_error_callback);
            // The runtime outlives every endpoint; the callback finds the node through `by_ep`.
            params.err_handler.arg = Arc::as_ptr(&self.runtime) as *mut c_void;
            let mut ep: u::ucp_ep_h = ptr::null_mut();
            check("ucp_ep_create", u::ucp_ep_create(self.runtime.worker(), &params, &mut ep))?;
            ep
        };
        let conn_id = self.add_conn(state, ep, Some(peer), peer.to_string());
        state.by_peer.insert(peer, conn_id);
        log_debug!("connecting to {peer} (connection {conn_id})");
        Ok(conn_id)
    }

    pub(super) fn add_conn(&self, state: &mut NodeState, ep: u::ucp_ep_h, outgoing_peer: Option<SocketAddr>, peer_name: String) -> u64 {
        // Over TCP, UCX's rendezvous emulates a remote get in software and needs the peer's
        // progress for every fragment: eager sends are faster at every size (docs/fabric.md), and a
        // peer dying mid-message only breaks its own TCP stream. Through shared memory, eager is
        // opt-in (`same_host_eager`): a dying writer can wedge the shared FIFO.
        let same_host = peer_name.parse::<SocketAddr>().is_ok_and(|addr| crate::ucx::is_local_address(addr.ip()));
        let eager = match self.config.transport {
            crate::config::Transport::Tcp => true,
            crate::config::Transport::Auto => same_host && self.config.same_host_eager,
        };
        let send_flags = if eager { u::UCP_AM_SEND_FLAG_EAGER } else { 0 };
        let chunk_bytes = match self.config.transport {
            crate::config::Transport::Tcp => tcp_chunk_bytes(self.config.chunk_size_bytes),
            crate::config::Transport::Auto => self.config.chunk_size_bytes,
        };
        let conn_id = state.next_conn_id;
        state.next_conn_id += 1;
        state.conns.insert(
            conn_id,
            Conn {
                ep,
                outgoing_peer,
                peer_name,
                same_host,
                failed: false,
                last_used_ms: coarse_ms(),
                requests_in_flight: 0,
                ready: false,
                wireup_flushing: false,
                close_after_wireup: None,
                backlog: VecDeque::new(),
                send_flags,
                chunk_bytes,
                bundles: self.config.transport == crate::config::Transport::Tcp,
                peer_takes_bundles: false,
                corked: 0,
                corked_bytes: 0,
                answers_corked: 0,
            },
        );
        // SAFETY: under the runtime's lock (the caller holds `state`).
        unsafe { self.runtime.shared() }.by_ep.insert(ep as usize, (self as *const NodeInner, conn_id));
        self.counters.connections_open.fetch_add(1, Ordering::Relaxed);
        // SAFETY: under the runtime's lock; `ep` was just created on the runtime's worker; the boxed
        // FlushCtx is freed exactly once: here if UCX returns no request (the callback will not
        // run), else by `wireup_flush_callback`; the node outlives the flush (`NodeInner::ucx_busy`).
        let status_ptr = unsafe {
            let mut param: u::ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = u::UCP_OP_ATTR_FIELD_CALLBACK | u::UCP_OP_ATTR_FIELD_USER_DATA;
            param.cb.send = Some(wireup_flush_callback);
            param.user_data = Box::into_raw(Box::new(FlushCtx { node: self, conn_id })) as *mut c_void;
            let request = u::ucp_ep_flush_nbx(ep, &param);
            if !u::ucs_ptr_is_ptr(request) {
                drop(Box::from_raw(param.user_data as *mut FlushCtx));
            }
            request
        };
        if status_ptr.is_null() {
            self.on_conn_ready(state, conn_id, Ok(()));
        } else if u::ucs_ptr_is_err(status_ptr) {
            self.on_conn_ready(state, conn_id, Err(ucx_error("ucp_ep_flush_nbx", u::ucs_ptr_status(status_ptr))));
        } else {
            state.ucx_ops_in_flight += 1;
            state.conns.get_mut(&conn_id).expect("connection just inserted").wireup_flushing = true;
        }
        conn_id
    }

    /// The endpoint's transports are wired up: send what waited.
    fn on_conn_ready(&self, state: &mut NodeState, conn_id: u64, result: Result<()>) {
        if let Err(e) = result {
            let reset = matches!(e, Error::Ucx { status, .. } if handshake_was_reset(status));
            if !(reset && self.retry_handshake(state, conn_id)) {
                self.fail_conn(state, conn_id, &e.to_string());
            }
            return;
        }
        let Some(conn) = state.conns.get_mut(&conn_id) else { return };
        conn.ready = true;
        if let Some(peer) = conn.outgoing_peer {
            state.handshake_resets.remove(&peer);
        }
        // A peer on another host reached over TCP only (no RDMA): UCX emulates rendezvous in
        // software there, one fragment per round of the peer's progress (22 to 64 MB/s from 64 KiB
        // to 1 MiB across a veth pair, against 1.1 to 1.4 GB/s eagerly: `ohb fabric bw --hosts
        // netns`), so send eagerly, as `Transport::Tcp` does. Same-host peers keep their rule
        // (`same_host_eager`); RDMA lanes keep zero-copy rendezvous.
        if self.config.transport == crate::config::Transport::Auto {
            let same_host = conn.same_host;
            // SAFETY: under the runtime's lock (the caller holds `state`); `conn.ep` is a live,
            // wired-up endpoint of this worker.
            let lanes = unsafe { endpoint_info(conn.ep) };
            // A TCP lane to a same-host peer keeps UCX's TCP interface polled on every progress
            // call (`ucx.rs`, MAX_RNDV_LANES): counted, so that a test and an operator can see it.
            if same_host && lane_transports(&lanes).any(|(_, transport)| transport == "tcp") {
                self.counters.same_host_connections_with_tcp.fetch_add(1, Ordering::Relaxed);
                log_debug!("connection {conn_id} to {}: same host, but UCX gave it a TCP lane", conn.peer_name);
            }
            if conn.send_flags == 0 && !same_host && rendezvous_is_emulated(&lanes) {
                conn.send_flags = u::UCP_AM_SEND_FLAG_EAGER;
                conn.chunk_bytes = tcp_chunk_bytes(self.config.chunk_size_bytes);
                conn.bundles = true;
                log_debug!("connection {conn_id} to {}: TCP only, sending eagerly", conn.peer_name);
            }
        }
        if crate::log::debug_enabled() {
            // Which transports UCX chose for each protocol of this connection.
            // SAFETY: `dup(2)` gives a descriptor that `fdopen` owns (checked for null) and `fclose` closes;
            // `conn.ep` is a live endpoint of this worker (under the lock).
            unsafe {
                let stream = libc::fdopen(libc::dup(2), c"w".as_ptr());
                if !stream.is_null() {
                    u::ucp_ep_print_info(conn.ep, stream as *mut u::FILE);
                    libc::fclose(stream);
                }
            }
        }
        let backlog = std::mem::take(&mut conn.backlog);
        self.same_host_hello(state, conn_id);
        for (header, payload, request_id) in backlog {
            self.send_message(state, conn_id, header, payload, request_id);
        }
    }

    /// An outgoing connection reset before its handshake completed: unless its retries are spent,
    /// nothing waits for it or the node is closing, it leaves the cache without failing its requests (nothing of theirs was
    /// sent: they wait in the backlog until the handshake completes), its endpoint is closed, and
    /// `reconnect` makes it again after this progress call (or moves its requests to a connection
    /// to the same peer made meanwhile). True if so.
    fn retry_handshake(&self, state: &mut NodeState, conn_id: u64) -> bool {
        let Some(conn) = state.conns.get_mut(&conn_id) else { return false };
        let Some(peer) = conn.outgoing_peer else { return false };
        // A connection nothing waits for (an `Endpoint`'s early connect) just fails: the next
        // request connects afresh.
        if conn.failed || conn.ready || conn.backlog.is_empty() || self.closed.load(Ordering::SeqCst) {
            return false;
        }
        // Counted by peer, not by connection: a request may open a new connection to the peer
        // while a retry waits, and both count against the same bound.
        let resets = state.handshake_resets.entry(peer).or_insert(0);
        if *resets >= HANDSHAKE_RETRIES {
            state.handshake_resets.remove(&peer); // the next request starts afresh
            return false;
        }
        *resets += 1;
        let attempt = *resets;
        let backlog = std::mem::take(&mut conn.backlog);
        self.leave_cache(state, conn_id);
        self.counters.handshakes_retried.fetch_add(1, Ordering::Relaxed);
        let request_ids = state.pending.ids_on_conn(conn_id);
        state.to_close.push((conn_id, true));
        log_warn!("the handshake with {peer} was reset; connecting again (retry {attempt} of {HANDSHAKE_RETRIES})");
        state.to_reconnect.push(Reconnect { peer, backlog, request_ids });
        true
    }

    /// Makes a connection of `retry_handshake` again and moves its requests to it; they fail if
    /// that cannot start. Requests that ended meanwhile (timed out, node closing) are not sent.
    pub(super) fn reconnect(&self, state: &mut NodeState, reconnect: Reconnect) {
        let Reconnect { peer, backlog, request_ids } = reconnect;
        if self.closed.load(Ordering::SeqCst) {
            return; // `close` failed its requests
        }
        let request_ids: Vec<u64> = request_ids.into_iter().filter(|&id| state.pending.contains(id)).collect();
        let conn_id = match self.connection_to(state, peer) {
            Ok(conn_id) => conn_id,
            Err(e) => {
                for request_id in request_ids {
                    self.complete_pending(state, request_id, Err(Error::PeerFailed { peer: peer.to_string(), reason: e.to_string() }));
                }
                return;
            }
        };
        for &request_id in &request_ids {
            state.pending.move_to_conn(request_id, conn_id);
        }
        if let Some(conn) = state.conns.get_mut(&conn_id) {
            conn.requests_in_flight += request_ids.len();
        }
        for (header, payload, request_id) in backlog {
            if request_id.is_none_or(|id| state.pending.contains(id)) {
                self.send_message(state, conn_id, header, payload, request_id);
            }
        }
    }

    /// Marks a connection failed, fails its requests in flight and schedules its endpoint's close.
    pub(super) fn fail_conn(&self, state: &mut NodeState, conn_id: u64, reason: &str) {
        if !self.shut_conn(state, conn_id, reason) {
            return;
        }
        // The wedge check starts from the moment of a failure, of any kind (a killed same-host
        // peer may show as a reset, a timeout or a failed send).
        // SAFETY: under the runtime's lock (the caller holds `state`); no borrow of the shared state
        // is live up the stack (callers copy out of the endpoint map); this one ends with the statement.
        unsafe { self.runtime.shared() }.wedge.peer_failed(coarse_ms(), self.runtime.messages_received.load(Ordering::Relaxed));
        state.to_close.push((conn_id, true));
    }

    /// What a connection's failure and a close after an answer share: the connection counts as
    /// failed (nothing more is served from it, it leaves the cache and `connections_open`: a
    /// failed connection is no longer open, even while its endpoint waits to be closed), this
    /// node's requests on it fail with `reason`, its partial messages and same-host state go.
    /// False if it was gone or failed already. The caller schedules the endpoint's close.
    fn shut_conn(&self, state: &mut NodeState, conn_id: u64, reason: &str) -> bool {
        let Some(conn) = state.conns.get(&conn_id).filter(|c| !c.failed) else { return false };
        let peer = conn.peer_name.clone();
        if let Some(addr) = conn.outgoing_peer.filter(|_| !conn.ready) {
            state.handshake_resets.remove(&addr); // failed otherwise than by a reset
        }
        self.leave_cache(state, conn_id);
        for request_id in state.pending.ids_on_conn(conn_id) {
            self.complete_pending(state, request_id, Err(Error::PeerFailed { peer: peer.clone(), reason: reason.to_string() }));
        }
        true
    }

    /// What every end of a live connection shares (a failure, a close after an answer, a reset
    /// handshake made again): it counts as failed (nothing more is sent or served on it), it leaves
    /// the cache and `connections_open`, its partial messages and same-host state go. Its requests
    /// stay in the pending table: the caller fails or moves them. False if it was gone or failed.
    fn leave_cache(&self, state: &mut NodeState, conn_id: u64) -> bool {
        let Some(conn) = state.conns.get_mut(&conn_id).filter(|c| !c.failed) else { return false };
        conn.failed = true;
        self.counters.connections_open.fetch_sub(1, Ordering::Relaxed);
        if let Some(addr) = conn.outgoing_peer {
            if state.by_peer.get(&addr) == Some(&conn_id) {
                state.by_peer.remove(&addr);
            }
        }
        state.partials.drop_conn(conn_id);
        state.same_host.drop_conn(conn_id);
        self.drop_deferred_pulls(conn_id);
        true
    }

    /// Starts closing an endpoint; `force` drops what is queued on it (for failed peers).
    ///
    /// During the endpoint's wire-up flush only the connection closes at once: it counts as
    /// failed (nothing more is sent or served on it, it leaves the cache and `connections_open`),
    /// and its endpoint is closed when the flush completes (UCX 1.22 crashes on an endpoint closed
    /// under its pending flush). The flush of an accepted endpoint may wait for the peer's
    /// progress, so a peer that stops progressing (a hostile raw client) keeps only that endpoint,
    /// until the flush ends or UCX times the endpoint out.
    pub(super) fn close_conn(&self, state: &mut NodeState, conn_id: u64, force: bool) {
        state.same_host.drop_conn(conn_id);
        self.drop_deferred_pulls(conn_id);
        if let Some(conn) = state.conns.get_mut(&conn_id).filter(|conn| conn.wireup_flushing) {
            conn.close_after_wireup = Some(conn.close_after_wireup.unwrap_or(false) || force);
            if !conn.failed {
                conn.failed = true;
                self.counters.connections_open.fetch_sub(1, Ordering::Relaxed);
                if let Some(addr) = conn.outgoing_peer {
                    if state.by_peer.get(&addr) == Some(&conn_id) {
                        state.by_peer.remove(&addr);
                    }
                }
            }
            return;
        }
        let Some(conn) = state.conns.remove(&conn_id) else { return };
        // SAFETY: under the runtime's lock (the caller holds `state`).
        unsafe { self.runtime.shared() }.by_ep.remove(&(conn.ep as usize));
        if let Some(addr) = conn.outgoing_peer {
            if state.by_peer.get(&addr) == Some(&conn_id) {
                state.by_peer.remove(&addr);
            }
        }
        if !conn.failed {
            self.counters.connections_open.fetch_sub(1, Ordering::Relaxed); // else counted at the failure
        }
        // SAFETY: under the runtime's lock; `conn.ep` is live and left every table above, so it is
        // closed once, here; a returned request is kept in `closing` and freed by
        // `reap_closed_endpoints` once complete.
        unsafe {
            let mut param: u::ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = u::UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = if force { u::UCP_EP_CLOSE_FLAG_FORCE } else { 0 };
            let request = u::ucp_ep_close_nbx(conn.ep, &param);
            if u::ucs_ptr_is_ptr(request) {
                state.closing.push(request);
            }
        }
    }

    /// Closes a connection right after an answer was posted on it (`Request::fail_and_close`).
    /// Not a peer failure (the wedge watch is not started). At once: nothing more is served from
    /// it, this node's own requests on it fail, its partial messages go, and it leaves the cache
    /// and `connections_open`. Its endpoint closes `CLOSE_LINGER_MS` later: a peer may see a
    /// disconnect (it comes through UCX's connection manager) before the answer still in its
    /// receive queue (shared memory, another lane), so the close waits until the answer was
    /// surely taken in.
    pub(super) fn close_after_answer(&self, state: &mut NodeState, conn_id: u64) {
        if self.shut_conn(state, conn_id, "this node closed the connection after a broken request of the peer") {
            log_debug!("closing connection {conn_id} after answering a request on it");
            state.lingering.push((conn_id, coarse_ms() + CLOSE_LINGER_MS));
        }
    }

    /// Closes the endpoints of `close_after_answer` whose linger is over.
    pub(super) fn close_lingering(&self, state: &mut NodeState, now_ms: u64) {
        while let Some(position) = state.lingering.iter().position(|&(_, at_ms)| at_ms <= now_ms) {
            let (conn_id, _) = state.lingering.swap_remove(position);
            self.close_conn(state, conn_id, false);
        }
    }

    pub(super) fn close_idle_connections(&self, state: &mut NodeState, now_ms: u64) {
        let idle_timeout_ms = self.config.idle_timeout.as_millis() as u64;
        let incoming_idle_timeout_ms = self.config.incoming_idle_timeout.as_millis() as u64;
        let idle: Vec<u64> =
            state.conns.iter().filter(|(_, c)| c.is_idle(now_ms, idle_timeout_ms, incoming_idle_timeout_ms)).map(|(&id, _)| id).collect();
        for conn_id in idle {
            log_debug!("closing idle connection {conn_id}");
            self.close_conn(state, conn_id, false);
        }
    }

}

/// What `ucp_ep_print_info` says of an endpoint (its lanes and their transports).
///
/// # Safety
/// Under the runtime's lock, with `ep` a live endpoint.
unsafe fn endpoint_info(ep: u::ucp_ep_h) -> String {
    let mut text: *mut libc::c_char = ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: `open_memstream` writes the buffer's address and length at `fclose`; the stream is
    // checked for null, written by UCX, closed once; the buffer (malloc'ed by libc) is read for
    // `len` bytes and freed once.
    let stream = libc::open_memstream(&mut text, &mut len);
    if stream.is_null() {
        return String::new();
    }
    u::ucp_ep_print_info(ep, stream as *mut u::FILE);
    libc::fclose(stream);
    if text.is_null() {
        return String::new();
    }
    let info = String::from_utf8_lossy(std::slice::from_raw_parts(text as *const u8, len)).into_owned();
    libc::free(text as *mut c_void);
    info
}

/// Whether UCX would emulate rendezvous in software on an endpoint with these lanes
/// (`ucp_ep_print_info` text): no remote-memory lane for bulk data (`rma_bw`), or only TCP ones.
fn rendezvous_is_emulated(info: &str) -> bool {
    let mut rma_transports = lane_transports(info).filter(|(lane, _)| lane.contains("rma_bw")).map(|(_, transport)| transport);
    !info.is_empty() && rma_transports.all(|transport| transport == "tcp")
}

/// Each transport lane of `ucp_ep_print_info` text (`lane[1]:  2:sysv/memory.0 md[2] ... am`) with
/// its transport's name (`sysv`); the connection-manager lane (`lane[0]: cm tcp`) is not one.
fn lane_transports(info: &str) -> impl Iterator<Item = (&str, &str)> {
    info.lines()
        .filter(|line| line.contains("lane["))
        .filter_map(|line| line.split_once("]:").map(|(_, rest)| rest.trim()))
        .filter(|lane| !lane.starts_with("cm "))
        .map(|lane| (lane, lane.split_whitespace().next().unwrap_or("").split(':').nth(1).unwrap_or("").split('/').next().unwrap_or("")))
}

/// Frees the endpoint-close requests UCX has finished.
pub(super) fn reap_closed_endpoints(state: &mut NodeState) {
    // SAFETY: the caller holds the runtime's lock (it has `state`); every entry of `closing` is a
    // request returned by `ucp_ep_close_nbx` on the runtime's worker, not freed yet; it is freed
    // exactly once, here, when UCX says it is complete.
    state.closing.retain(|&request| unsafe {
        if u::ucp_request_check_status(request) == u::UCS_INPROGRESS {
            true
        } else {
            u::ucp_request_free(request);
            false
        }
    });
}

// UCX callbacks of connections. Each runs under the runtime's lock, inside progress or a UCX call,
// so each may use the state of the node it names (the node outlives the operation or listener
// behind the callback: `NodeInner::ucx_busy`, `NodeInner::close`).

// SAFETY: UCX calls this only as registered: `user_data` is the FlushCtx boxed by `add_conn`, handed
// over once; the node it names is alive (a closed node stays registered with the runtime while its
// flush is in flight: `ucx_busy`); the runtime's lock is held (callbacks run inside progress or a UCX
// call made under the lock) and nobody holds a borrow of that node's state across a progress call,
// so `state()` is this callback's to use.
unsafe extern "C" fn wireup_flush_callback(request: *mut c_void, status: u::ucs_status_t, user_data: *mut c_void) {
    let ctx = Box::from_raw(user_data as *mut FlushCtx);
    let node = &*ctx.node;
    let state = node.state();
    state.ucx_ops_in_flight -= 1;
    if let Some(conn) = state.conns.get_mut(&ctx.conn_id) {
        conn.wireup_flushing = false;
        if let Some(force) = conn.close_after_wireup {
            // Not closed here: UCX may be completing this flush from inside its own failure
            // handling of the endpoint (ucp_ep_set_failed), which a close would pull out from under it.
            state.to_close.push((ctx.conn_id, force));
            u::ucp_request_free(request);
            return;
        }
    }
    let result = if status == u::UCS_OK { Ok(()) } else { Err(ucx_error("ucp_ep_flush_nbx", status)) };
    node.on_conn_ready(state, ctx.conn_id, result);
    u::ucp_request_free(request);
}

// SAFETY: UCX calls this only as registered: `arg` is the node given to `ucp_listener_create`, alive
// while its listener is (destroyed in `close`, before the node leaves the runtime); the callback runs
// inside progress, under the runtime's lock, with no borrow of the node's state live; `conn_request`
// is UCX's, handed to `ucp_ep_create` or `ucp_listener_reject` exactly once.
pub(super) unsafe extern "C" fn conn_request_callback(conn_request: u::ucp_conn_request_h, arg: *mut c_void) {
    let node = &*(arg as *const NodeInner);
    let state = node.state();
    let accepted = state.conns.values().filter(|c| c.outgoing_peer.is_none()).count();
    if node.closed.load(Ordering::SeqCst) || accepted >= node.config.max_connections {
        log_warn!("refusing a connection: {accepted} accepted connections open (limit {})", node.config.max_connections);
        u::ucp_listener_reject(state.listener, conn_request);
        return;
    }
    let mut attr: u::ucp_conn_request_attr_t = std::mem::zeroed();
    attr.field_mask = u::UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR as u64;
    let peer_name = if u::ucp_conn_request_query(conn_request, &mut attr) == u::UCS_OK {
        let storage: &libc::sockaddr_storage = &*(&attr.client_address as *const _ as *const libc::sockaddr_storage);
        ucx::socket_addr(storage).map(|a| a.to_string()).unwrap_or_else(|_| "unknown".into())
    } else {
        "unknown".into()
    };
    let mut params: u::ucp_ep_params_t = std::mem::zeroed();
    params.field_mask =
        (u::UCP_EP_PARAM_FIELD_CONN_REQUEST | u::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | u::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64;
    params.conn_request = conn_request;
    params.err_mode = u::UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = Some(ep_error_callback);
    params.err_handler.arg = Arc::as_ptr(&node.runtime) as *mut c_void;
    let mut ep: u::ucp_ep_h = ptr::null_mut();
    let status = u::ucp_ep_create(node.runtime.worker(), &params, &mut ep);
    if status != u::UCS_OK {
        log_warn!("accepting a connection from {peer_name} failed: {}", u::status_string(status));
        return;
    }
    let conn_id = node.add_conn(state, ep, None, peer_name.clone());
    log_debug!("accepted connection {conn_id} from {peer_name}");
}

// SAFETY: UCX calls this only as registered: `arg` is the runtime, which outlives its worker's
// endpoints; an entry of `by_ep` names a node registered with the runtime (an entry lives exactly as
// long as its connection is in the node's table); the callback runs inside progress (or a UCX call)
// under the runtime's lock, with no borrow of the shared state or that node's state live.
unsafe extern "C" fn ep_error_callback(arg: *mut c_void, ep: u::ucp_ep_h, status: u::ucs_status_t) {
    let runtime = &*(arg as *const Runtime);
    // An endpoint no node knows any more (closed, its node gone) has nothing left to fail.
    let Some(&(node, conn_id)) = runtime.shared().by_ep.get(&(ep as usize)) else { return };
    let node = &*node;
    let state = node.state();
    // A connection that already ended (closed after an answer, failed, its reset handshake made
    // again) has nothing left to fail: UCX 1.22 reports a second error for a reset handshake's
    // endpoint, which would otherwise count as a failed peer. Its endpoint's close is scheduled.
    if state.conns.get(&conn_id).is_none_or(|c| c.failed) {
        log_debug!("connection {conn_id}: {} after it ended", u::status_string(status));
        return;
    }
    let reason = u::status_string(status);
    if handshake_was_reset(status as i32) && node.retry_handshake(state, conn_id) {
        return;
    }
    // A peer that closes cleanly shows up here as "connection reset": a normal disconnect.
    if status == u::UCS_ERR_CONNECTION_RESET {
        log_debug!("connection {conn_id} closed by peer");
    } else {
        node.counters.peers_failed.fetch_add(1, Ordering::Relaxed);
        let peer = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
        log_warn!("connection to {peer} failed: {reason}");
    }
    node.fail_conn(state, conn_id, &reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lanes as UCX 1.13's `ucp_ep_print_info` prints them (the first from a same-host endpoint).
    const SHM_AND_TCP: &str = "#                 lane[0]: cm rdmacm
#                 lane[1]:  2:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0 keepalive
#                 lane[2]:  1:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 wireup
";
    const TCP_ONLY: &str = "#                 lane[0]: cm tcp
#                 lane[1]:  1:tcp/veth1.0 md[1]             -> md[1]/tcp/sysdev[255] am am_bw#0 rma_bw#0 wireup keepalive
";
    const VERBS: &str = "#                 lane[0]: cm rdmacm
#                 lane[1]:  3:rc_mlx5/mlx5_0:1.0 md[3]      -> md[3]/ib/sysdev[255] am am_bw#0 rma_bw#0 wireup
#                 lane[2]:  1:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] rma_bw#1
";

    #[test]
    fn lanes_are_read_with_their_transport_and_the_connection_manager_is_not_one() {
        let transports = |info| lane_transports(info).map(|(_, transport)| transport).collect::<Vec<_>>();
        assert_eq!(transports(SHM_AND_TCP), ["sysv", "tcp"]);
        assert_eq!(transports(TCP_ONLY), ["tcp"], "`cm tcp` is the connection manager, not a lane");
        assert_eq!(transports(VERBS), ["rc_mlx5", "tcp"]);
        assert_eq!(transports("#  lane[0]: cm rdmacm\n#  lane[1]:  2:sysv/memory.0 md[2] -> md[2]/sysv am keepalive\n"), ["sysv"]);
    }

    #[test]
    fn rendezvous_counts_as_emulated_over_tcp_only_or_without_a_bulk_lane() {
        assert!(rendezvous_is_emulated(TCP_ONLY));
        assert!(rendezvous_is_emulated(SHM_AND_TCP), "its one rma_bw lane is TCP (same-host peers have their own rule)");
        assert!(!rendezvous_is_emulated(VERBS), "an RDMA lane keeps zero-copy rendezvous");
        assert!(rendezvous_is_emulated("#  lane[0]: cm tcp\n#  lane[1]:  1:tcp/eth0.0 md[1] -> md[1]/tcp am am_bw#0\n"), "no rma_bw lane");
        assert!(!rendezvous_is_emulated(""), "no information: leave the connection as it is");
    }

    fn conn(outgoing: bool, last_used_ms: u64) -> Conn {
        Conn {
            ep: ptr::null_mut(),
            outgoing_peer: outgoing.then(|| "127.0.0.1:9".parse().unwrap()),
            peer_name: "127.0.0.1:9".into(),
            same_host: true,
            failed: false,
            last_used_ms,
            requests_in_flight: 0,
            ready: true,
            wireup_flushing: false,
            close_after_wireup: None,
            backlog: VecDeque::new(),
            send_flags: 0,
            chunk_bytes: 1 << 20,
            bundles: false,
            peer_takes_bundles: false,
            corked: 0,
            corked_bytes: 0,
            answers_corked: 0,
        }
    }

    #[test]
    fn connections_over_tcp_cut_chunks_that_fit_one_receive_segment() {
        assert_eq!(tcp_chunk_bytes(1 << 20), ucx::TCP_CHUNK_BYTES, "the default chunk is cut down");
        assert_eq!(tcp_chunk_bytes(4096), 4096, "a smaller configured chunk stays");
    }

    #[test]
    fn an_outgoing_connection_is_idle_after_the_timeout_with_nothing_in_flight() {
        let c = conn(true, 1_000);
        assert!(!c.is_idle(1_000, 500, 5_000));
        assert!(!c.is_idle(1_499, 500, 5_000));
        assert!(c.is_idle(1_500, 500, 5_000));
        // A clock that went backwards (coarse clock read on another core) is not idleness.
        assert!(!c.is_idle(900, 500, 5_000));
    }

    #[test]
    fn an_accepted_connection_is_idle_after_the_incoming_timeout() {
        let c = conn(false, 1_000);
        assert!(!c.is_idle(1_500, 500, 5_000), "the peer closes its own end first");
        assert!(!c.is_idle(5_999, 500, 5_000));
        assert!(c.is_idle(6_000, 500, 5_000));
        let mut serving = conn(false, 0);
        serving.requests_in_flight = 1;
        assert!(!serving.is_idle(1_000_000, 500, 5_000), "a request being served keeps it open");
    }

    #[test]
    fn busy_and_failed_connections_are_never_idle() {
        let mut busy = conn(true, 0);
        busy.requests_in_flight = 1;
        assert!(!busy.is_idle(1_000_000, 500, 500));
        let mut failed = conn(true, 0);
        failed.failed = true;
        assert!(!failed.is_idle(1_000_000, 500, 500), "failed connections are closed by the failure path");
    }
}
