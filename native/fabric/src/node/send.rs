//! The send path: a request or response posted as one or more chunks of active messages on the
//! caller's own thread (no hand-off), and the respond path of handler threads (straight to UCX
//! when the worker is free, through the bounded respond queue under contention).
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ucx_sys as u;

use crate::error::{ucx_error, Error, Result};
use crate::log::log_warn;
use crate::pool::Buffer;
use crate::wire::{self, Header, Kind};

use super::runtime::InProgressMark;
use super::{NodeInner, NodeState};

/// The bytes of a message and who owns them until UCX is done with them.
pub(super) enum Payload {
    None,
    Owned(Buffer),
    Shared(Arc<Buffer>),
    Bytes(Vec<u8>),
}

impl Payload {
    pub(super) fn bytes(&self) -> (&[u8], u::ucp_mem_h) {
        match self {
            Payload::None => (&[], ptr::null_mut()),
            Payload::Owned(b) => (b.as_slice(), b.memh()),
            Payload::Shared(b) => (b.as_slice(), b.memh()),
            Payload::Bytes(v) => (v.as_slice(), ptr::null_mut()),
        }
    }
}

/// What travels with a send until UCX completes it: the header (UCX may read it after the call
/// returns) and the payload's owner.
pub(super) struct SendCtx {
    node: *const NodeInner,
    header: [u8; wire::HEADER_LEN],
    payload: Payload,
    offset: usize,
    len: usize,
    /// For a request: its id, to fail it if the send fails.
    request_id: Option<u64>,
}

/// A response to send, queued by a handler thread for the respond stage.
pub(super) struct Outgoing {
    pub(super) conn_id: u64,
    pub(super) request_id: u64,
    pub(super) op: u16,
    pub(super) status: u16,
    pub(super) payload: Payload,
    /// Close the connection once this answer is sent (`Request::fail_and_close`).
    pub(super) then_close: bool,
}

impl Outgoing {
    /// Whether this answer may travel in a bundle: small, not closing its connection, and to a
    /// requester whose id says it takes bundles (a fabric from before bundles refuses kind 7 and
    /// would close the connection: `wire`, "Versions").
    fn may_join_bundle(&self) -> bool {
        self.request_id & wire::REQUEST_ID_TAKES_BUNDLES != 0 && !self.then_close && self.payload.bytes().0.len() <= BUNDLE_PAYLOAD_MAX
    }
}

/// What to wake once the runtime's lock is released after posting (`NodeInner::wake_due`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    Nothing,
    /// Work left behind: the thread asleep on the event fd (`NodeInner::wake`).
    Sleeper,
    /// The first corked message: `Runtime::wake_for_corked`.
    ForCorked,
}

/// A request waiting in `NodeState::corked` for the round that sends it in a bundle
/// (`NodeInner::send_request`); its pending entry is in the table already.
pub(super) struct Corked {
    conn_id: u64,
    header: Header,
    payload: Payload,
}

/// What became of a request or answer handed to `NodeInner::send_request` or `post_answer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Posted {
    /// Sent (or queued for the connection's wire-up, or failed: as `send_message`).
    Sent,
    /// Corked, the first message waiting for the next round: whoever sleeps on the worker's
    /// event fd must be woken to run it (`Runtime::wake_for_corked`).
    CorkedFirst,
    /// Corked behind others: the wake for the first one covers it.
    Corked,
}

/// The chunks a message of `total_len` bytes travels as: `(offset, len)` each, in order.
fn chunk_ranges(total_len: usize, chunk_count: u32, chunk_size: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..chunk_count as usize).map(move |index| {
        let offset = index * chunk_size;
        (offset, chunk_size.min(total_len - offset))
    })
}

impl NodeInner {

    /// Posts a whole message (request or response) as one or more chunks. Errors fail the request
    /// (for requests) or are logged (for responses); a failed send also fails the connection.
    pub(super) fn send_message(&self, state: &mut NodeState, conn_id: u64, mut header: Header, payload: Payload, request_id: Option<u64>) {
        let Some(conn) = state.conns.get(&conn_id) else {
            if let Some(id) = request_id {
                self.complete_pending(state, id, Err(Error::PeerFailed { peer: format!("connection {conn_id}"), reason: "closed".into() }));
            }
            return;
        };
        if conn.failed {
            let peer = conn.peer_name.clone();
            if let Some(id) = request_id {
                self.complete_pending(state, id, Err(Error::PeerFailed { peer, reason: "connection failed".into() }));
            }
            return;
        }
        if !conn.ready {
            state.conns.get_mut(&conn_id).unwrap().backlog.push_back((header, payload, request_id));
            return;
        }
        let ep = conn.ep;
        let send_flags = conn.send_flags;
        let chunk_bytes = conn.chunk_bytes;
        let payload = match self.send_by_pull(state, conn_id, &header, payload, request_id) {
            Ok(()) => return,
            Err(payload) => payload,
        };
        let total_len = payload.bytes().0.len();
        let (chunk_count, chunk_size) = wire::chunking(total_len, chunk_bytes);
        header.total_len = total_len as u64;
        header.chunk_count = chunk_count;
        let payload = if chunk_count > 1 {
            match payload {
                Payload::Owned(buffer) => Payload::Shared(Arc::new(buffer)),
                other => other,
            }
        } else {
            payload
        };
        let mut payload = Some(payload);
        for (index, (offset, len)) in chunk_ranges(total_len, chunk_count, chunk_size).enumerate() {
            let index = index as u32;
            header.chunk_index = index;
            header.offset = offset as u64;
            let chunk_payload = if index + 1 == chunk_count {
                payload.take().unwrap()
            } else {
                match payload.as_ref().unwrap() {
                    Payload::Shared(buffer) => Payload::Shared(buffer.clone()),
                    _ => unreachable!("multi-chunk payloads are shared buffers"),
                }
            };
            if let Err(e) = self.post_send(state, ep, send_flags, &header, chunk_payload, offset, len, request_id) {
                log_warn!("send to connection {conn_id} failed: {e}");
                if let Some(id) = request_id {
                    self.complete_pending(state, id, Err(e.clone()));
                }
                self.fail_conn(state, conn_id, &e.to_string());
                return;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_send(
        &self,
        state: &mut NodeState,
        ep: u::ucp_ep_h,
        send_flags: u32,
        header: &Header,
        payload: Payload,
        offset: usize,
        len: usize,
        request_id: Option<u64>,
    ) -> Result<()> {
        let mut ctx = state.send_ctx_free.pop().unwrap_or_else(|| {
            Box::new(SendCtx { node: self, header: [0; wire::HEADER_LEN], payload: Payload::None, offset: 0, len: 0, request_id: None })
        });
        ctx.node = self;
        ctx.header = header.encode();
        ctx.payload = payload;
        ctx.offset = offset;
        ctx.len = len;
        ctx.request_id = request_id;
        let (bytes, memh) = ctx.payload.bytes();
        debug_assert!(offset + len <= bytes.len());
        // SAFETY: `offset + len <= bytes.len()` (chunk_ranges cuts inside the payload; asserted above).
        let data = unsafe { bytes.as_ptr().add(offset) };
        let ctx_ptr = Box::into_raw(ctx);
        // SAFETY: under the runtime's lock (the caller holds `state`); `ep` is a live endpoint of the
        // runtime's worker; the header and the payload bytes live in `ctx`, which is leaked into
        // `user_data` until UCX is done: freed below if the send completed or failed at once, else by
        // `send_callback`; the node outlives the send (`NodeInner::ucx_busy`); `memh`, if set,
        // registers the payload's buffer.
        let status_ptr = unsafe {
            let mut param: u::ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = u::UCP_OP_ATTR_FIELD_CALLBACK | u::UCP_OP_ATTR_FIELD_USER_DATA | u::UCP_OP_ATTR_FIELD_FLAGS;
            if !memh.is_null() {
                param.op_attr_mask |= u::UCP_OP_ATTR_FIELD_MEMH;
                param.memh = memh;
            }
            param.flags = u::UCP_AM_SEND_FLAG_REPLY | send_flags;
            param.cb.send = Some(send_callback);
            param.user_data = ctx_ptr as *mut c_void;
            u::ucp_am_send_nbx(
                ep,
                wire::AM_ID,
                (*ctx_ptr).header.as_ptr() as *const c_void,
                wire::HEADER_LEN,
                data as *const c_void,
                len,
                &param,
            )
        };
        if status_ptr.is_null() {
            // SAFETY: completed at once: UCX will not call back, so the box is ours again (once).
            self.recycle_send_ctx(state, unsafe { Box::from_raw(ctx_ptr) });
            Ok(())
        } else if u::ucs_ptr_is_err(status_ptr) {
            // SAFETY: failed at once: UCX will not call back, so the box is ours again (once).
            self.recycle_send_ctx(state, unsafe { Box::from_raw(ctx_ptr) });
            Err(ucx_error("ucp_am_send_nbx", u::ucs_ptr_status(status_ptr)))
        } else {
            state.ucx_ops_in_flight += 1; // send_callback completes it
            Ok(())
        }
    }

    fn recycle_send_ctx(&self, state: &mut NodeState, mut ctx: Box<SendCtx>) {
        ctx.payload = Payload::None; // returns the buffer to the pool
        if state.send_ctx_free.len() < 1024 {
            state.send_ctx_free.push(ctx);
        }
    }

    pub(super) fn post_response(&self, outgoing: Outgoing) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        self.counters.requests_served.fetch_add(1, Ordering::Relaxed);
        if self.in_progress_here() {
            // Not through the node's state: a caller up this thread's stack may hold its borrow.
            self.queue_response_under_lock(outgoing);
            return;
        }
        // The respond stage's fast path: with the worker free, post the response from this
        // thread; only under contention does it go through the respond queue.
        if let Ok(guard) = self.runtime.lock.try_lock() {
            let mark = InProgressMark::enter(&self.runtime);
            // SAFETY: this thread took the runtime's lock just now (`try_lock`), so no borrow of the
            // state is live on it; it ends before the lock is dropped.
            let state = unsafe { self.state() };
            let posted = self.post_answer(state, outgoing);
            let wake = self.wake_due(state, posted);
            drop(mark);
            drop(guard);
            self.wake_as(wake);
            return;
        }
        let deadline = Instant::now() + self.config.request_timeout;
        if self.respond.push_until(outgoing, deadline).is_err() {
            log_warn!("respond queue full for {} ms: response dropped", self.config.request_timeout.as_millis());
        }
        self.wake();
    }

    /// What to wake after posting a request or answer (`posted`), once the lock is released. Only
    /// work left behind needs the progress thread (or the thread asleep on the event fd in its
    /// place) now: a message UCX sent at once needs none, the response to a request wakes whoever
    /// sleeps on the fd when it arrives, and a wake costs the woken thread a context switch and
    /// the posting thread a system call (`ucp_worker_signal`) whenever the waits around it did not
    /// spin (forced TCP on shared cores: `AdaptiveSpin`). The first corked message needs the round
    /// that sends it; those corked behind it need no wake of their own.
    pub(super) fn wake_due(&self, state: &NodeState, posted: Posted) -> Wake {
        match posted {
            Posted::CorkedFirst => Wake::ForCorked,
            Posted::Sent if Self::ucx_busy(state) || self.has_deferred_work(state) => Wake::Sleeper,
            Posted::Corked if Self::ucx_busy(state) => Wake::Sleeper,
            Posted::Sent | Posted::Corked => Wake::Nothing,
        }
    }

    /// Wakes as `wake_due` said; called with the runtime's lock released.
    pub(super) fn wake_as(&self, wake: Wake) {
        match wake {
            Wake::Nothing => {}
            Wake::Sleeper => self.wake(),
            Wake::ForCorked => self.runtime.wake_for_corked(),
        }
    }

    /// An answer posted by a handler thread that holds the lock: at once, or corked in the outbox
    /// for the next round while other requests of its connection are still being served, as
    /// `send_request` corks requests (same conditions: TCP only, small, a peer that takes bundles),
    /// so that the answers to requests that came together go back together. The answer to the last
    /// of them sends the corked ones with it, in one bundle.
    fn post_answer(&self, state: &mut NodeState, outgoing: Outgoing) -> Posted {
        let Some(conn) = state.conns.get_mut(&outgoing.conn_id) else {
            self.send_outgoing(state, outgoing);
            return Posted::Sent;
        };
        let corks = self.config.cork_over_tcp
            && conn.bundles_now()
            // Its own request counts in `requests_in_flight` until it is sent (`answered`).
            && conn.requests_in_flight > conn.answers_corked + 1
            && outgoing.may_join_bundle();
        if corks {
            super::count_under_lock(&self.counters.corked);
            conn.answers_corked += 1;
            let first = state.outbox.is_empty();
            state.outbox.push_back(outgoing);
            return if first { Posted::CorkedFirst } else { Posted::Corked };
        }
        if conn.answers_corked > 0 {
            state.outbox.push_back(outgoing);
            self.send_outbox(state);
        } else {
            self.send_outgoing(state, outgoing);
        }
        Posted::Sent
    }

    pub(super) fn send_outgoing(&self, state: &mut NodeState, outgoing: Outgoing) {
        let header = Self::answered(state, &outgoing);
        self.send_message(state, outgoing.conn_id, header, outgoing.payload, None);
        if outgoing.then_close {
            self.close_after_answer(state, outgoing.conn_id);
        }
    }

    /// The bookkeeping of an answer about to be sent (an accepted connection is idle again once
    /// its requests are answered), and its header (`total_len` still to be set).
    fn answered(state: &mut NodeState, outgoing: &Outgoing) -> Header {
        if let Some(conn) = state.conns.get_mut(&outgoing.conn_id) {
            if conn.outgoing_peer.is_none() {
                conn.requests_in_flight = conn.requests_in_flight.saturating_sub(1);
                conn.last_used_ms = crate::clock::coarse_ms();
            }
            // Its corked answers are in the outbox, which `send_outbox` sends whole in this call.
            conn.answers_corked = 0;
        }
        let kind = if outgoing.status == wire::STATUS_OK { Kind::Response } else { Kind::ErrorResponse };
        // A requester that takes bundles learns from its answers that this node takes them too.
        let request_id = if outgoing.request_id & wire::REQUEST_ID_TAKES_BUNDLES != 0 {
            outgoing.request_id | wire::ANSWER_ID_TAKES_BUNDLES
        } else {
            outgoing.request_id
        };
        Header { kind, op: outgoing.op, status: outgoing.status, chunk_index: 0, chunk_count: 1, request_id, total_len: 0, offset: 0 }
    }

    /// Posts a request (its pending entry registered): at once, or corked for the next round.
    ///
    /// Over TCP each message costs a `sendmsg` and a trip through both ends' TCP stacks, so the
    /// requests a caller posts while its earlier ones to the same peer are in flight (a window of
    /// asynchronous requests, several threads sharing a connection) wait for the next progress
    /// round, which sends those gathered by then as one bundle (`flush_corked`). The round comes
    /// soon, whatever the caller does next: a caller that waits runs it itself; else the thread
    /// asleep on the event fd is woken for the first corked request (`Posted::CorkedFirst`), and
    /// no thread may go to sleep while requests are corked (`has_deferred_work`). A lone request
    /// (none in flight to the peer) is never corked, so a single call's latency is untouched.
    pub(super) fn send_request(&self, state: &mut NodeState, conn_id: u64, header: Header, payload: Payload, request_id: u64) -> Posted {
        let payload_len = payload.bytes().0.len();
        let len = wire::HEADER_LEN + payload_len;
        let (corks, conn_has_corked) = match state.conns.get(&conn_id) {
            // `requests_in_flight` counts this request already.
            Some(c) => (
                self.config.cork_over_tcp && payload_len <= REQUEST_CORK_PAYLOAD_MAX && c.bundles_now() && c.peer_takes_bundles && c.requests_in_flight > 1,
                c.corked > 0,
            ),
            None => (false, false),
        };
        if !corks {
            if conn_has_corked {
                self.flush_corked(state); // the connection's requests go in the order posted
            }
            self.send_message(state, conn_id, header, payload, Some(request_id));
            return Posted::Sent;
        }
        let conn = state.conns.get(&conn_id).expect("checked above");
        let limit = wire::BUNDLE_BYTES_MAX.min(conn.chunk_bytes);
        if conn.corked + 1 > wire::BUNDLE_FRAMES_MAX as usize || conn.corked_bytes + len > limit {
            self.flush_corked(state); // a full bundle goes now; this request starts the next
        }
        super::count_under_lock(&self.counters.corked);
        let first = state.corked.is_empty();
        let conn = state.conns.get_mut(&conn_id).expect("flushing fails no connection in place");
        conn.corked += 1;
        conn.corked_bytes += len;
        state.corked.push_back(Corked { conn_id, header, payload });
        if first {
            Posted::CorkedFirst
        } else {
            Posted::Corked
        }
    }

    /// Sends every corked request (`send_request`) in the order posted: each run of two or more to
    /// one peer as a bundle (`send_request` kept a connection's corked requests within one bundle's
    /// bounds), a single one alone. Requests that timed out or failed meanwhile (their pending entry
    /// is gone) are left out. Returns how many went.
    pub(super) fn flush_corked(&self, state: &mut NodeState) -> usize {
        let mut sent = 0;
        while let Some(first) = state.corked.pop_front() {
            let conn_id = first.conn_id;
            let followers = state.corked.iter().take_while(|c| c.conn_id == conn_id).count();
            let (healthy, ep, send_flags) = match state.conns.get_mut(&conn_id) {
                Some(conn) => {
                    // All of its corked requests go in this call.
                    (conn.corked, conn.corked_bytes) = (0, 0);
                    (conn.ready && !conn.failed, conn.ep, conn.send_flags)
                }
                None => (false, ptr::null_mut(), 0),
            };
            let pending = &state.pending;
            let live = |c: &&Corked| pending.contains(c.header.request_id);
            let (frames, bytes) = std::iter::once(&first)
                .chain(state.corked.iter().take(followers))
                .filter(live)
                .fold((0usize, 0usize), |(n, b), c| (n + 1, b + wire::HEADER_LEN + c.payload.bytes().0.len()));
            // Registered memory, like any payload; without it (pool at its cap), one by one.
            let buffer = if frames > 1 && healthy { self.pool.alloc(bytes, None).ok() } else { None };
            let (mut next, mut left) = (Some(first), followers);
            let Some(mut buffer) = buffer else {
                // Alone, as `send_message` handles each (a failed connection fails the request).
                while let Some(corked) = next.take() {
                    let request_id = corked.header.request_id;
                    if state.pending.contains(request_id) {
                        self.send_message(state, conn_id, corked.header, corked.payload, Some(request_id));
                        sent += 1;
                    }
                    if left > 0 {
                        left -= 1;
                        next = state.corked.pop_front();
                    }
                }
                continue;
            };
            let mut at = 0;
            while let Some(corked) = next.take() {
                if state.pending.contains(corked.header.request_id) {
                    at = put_frame(&mut buffer, at, corked.header, corked.payload.bytes().0);
                }
                // (The request's own buffer goes back to the pool here.)
                if left > 0 {
                    left -= 1;
                    next = state.corked.pop_front();
                }
            }
            debug_assert_eq!(at, bytes);
            // (Failing the connection fails its requests in flight, these among them.)
            self.post_bundle(state, conn_id, (ep, send_flags), buffer, frames, &self.counters.requests_bundled);
            sent += frames;
        }
        sent
    }

    /// Posts a bundle of `frames` frames (`buffer`, its length the bundle's) on a connection
    /// (`endpoint`: its endpoint and send flags), failing the connection if the send fails, and
    /// counts it and its frames (`bundled`).
    fn post_bundle(&self, state: &mut NodeState, conn_id: u64, endpoint: (u::ucp_ep_h, u32), buffer: Buffer, frames: usize, bundled: &AtomicU64) {
        let bytes = buffer.len();
        let header = Header::bundle(frames as u32, bytes);
        if let Err(e) = self.post_send(state, endpoint.0, endpoint.1, &header, Payload::Owned(buffer), 0, bytes, None) {
            log_warn!("send to connection {conn_id} failed: {e}");
            self.fail_conn(state, conn_id, &e.to_string());
        }
        super::count_under_lock(&self.counters.bundles_sent);
        bundled.store(bundled.load(Ordering::Relaxed) + frames as u64, Ordering::Relaxed);
    }

    /// Sends the answers queued for this round (`NodeState::outbox`), in order; returns how many.
    /// Consecutive small ones to one connection over TCP go as one bundle (`wire::Kind::Bundle`):
    /// there each message cost a `sendmsg` system call and a trip through both ends' TCP stacks,
    /// which made most of a forced-TCP server's time at small sizes (docs/fabric.md, "Forced to
    /// TCP: where the time goes"). A bundle copies the payloads once more, so only payloads up to
    /// `BUNDLE_PAYLOAD_MAX` join one.
    pub(super) fn send_outbox(&self, state: &mut NodeState) -> usize {
        let mut sent = 0;
        while let Some(first) = state.outbox.pop_front() {
            let (followers, bytes) = self.bundle_run(state, &first);
            if followers == 0 {
                self.send_outgoing(state, first);
                sent += 1;
                continue;
            }
            // Registered memory, like any payload; without it (pool at its cap), one by one.
            let Ok(mut buffer) = self.pool.alloc(bytes, None) else {
                self.send_outgoing(state, first);
                sent += 1;
                continue;
            };
            let conn_id = first.conn_id;
            let mut at = 0;
            let (mut next, mut left) = (Some(first), followers);
            while let Some(outgoing) = next.take() {
                debug_assert_eq!(outgoing.conn_id, conn_id);
                let header = Self::answered(state, &outgoing);
                at = put_frame(&mut buffer, at, header, outgoing.payload.bytes().0);
                // (The answer's own buffer goes back to the pool here.)
                if left > 0 {
                    left -= 1;
                    next = state.outbox.pop_front();
                }
            }
            debug_assert_eq!(at, bytes);
            let Some(conn) = state.conns.get(&conn_id) else { continue };
            let endpoint = (conn.ep, conn.send_flags);
            self.post_bundle(state, conn_id, endpoint, buffer, followers + 1, &self.counters.answers_bundled);
            sent += followers + 1;
        }
        sent
    }

    /// How many of the answers after `first` in the outbox join it in a bundle (0: `first` goes
    /// alone), and the bundle's length: the following answers to the same connection, while they
    /// and the bundle stay small, the connection bundles (over TCP, wired up, healthy), the peer
    /// announced it takes bundles, and none closes the connection.
    fn bundle_run(&self, state: &NodeState, first: &Outgoing) -> (usize, usize) {
        let Some(conn) = state.conns.get(&first.conn_id) else { return (0, 0) };
        if !conn.bundles_now() {
            return (0, 0);
        }
        // A bundle must travel as one chunk.
        let limit = wire::BUNDLE_BYTES_MAX.min(conn.chunk_bytes);
        let fits = |o: &Outgoing| o.conn_id == first.conn_id && o.may_join_bundle();
        if !fits(first) {
            return (0, 0);
        }
        let mut bytes = wire::HEADER_LEN + first.payload.bytes().0.len();
        let mut followers = 0;
        for next in state.outbox.iter() {
            let len = wire::HEADER_LEN + next.payload.bytes().0.len();
            if !fits(next) || bytes + len > limit || followers + 1 >= wire::BUNDLE_FRAMES_MAX as usize {
                break;
            }
            bytes += len;
            followers += 1;
        }
        (followers, bytes)
    }
}

/// Writes one frame of a bundle (a whole single-chunk message: `header` with its length set, then
/// `payload`) into `buffer` at `at`; returns where the next frame goes.
fn put_frame(buffer: &mut Buffer, at: usize, header: Header, payload: &[u8]) -> usize {
    let header = Header { total_len: payload.len() as u64, chunk_count: 1, ..header };
    let frame = &mut buffer.as_mut_slice()[at..at + wire::HEADER_LEN + payload.len()];
    frame[..wire::HEADER_LEN].copy_from_slice(&header.encode());
    frame[wire::HEADER_LEN..].copy_from_slice(payload);
    at + frame.len()
}

/// The largest answer payload that joins a bundle: beyond it, the copy into the bundle costs about
/// what the saved `sendmsg` does.
const BUNDLE_PAYLOAD_MAX: usize = 4096;

/// The largest request payload that is corked. Higher than for answers: a corked request spares
/// its caller the `sendmsg` (the next round sends the run as one), which measured more than the
/// extra copy up to 16 KiB (docs/benchmarks.md, "Session 45: corking requests up to 16 KiB").
const REQUEST_CORK_PAYLOAD_MAX: usize = 16 << 10;

// SAFETY: UCX calls this only as registered: `user_data` is the SendCtx leaked by `post_send` for
// this send, handed over once; its node is alive (a closed node stays registered with the runtime
// while its sends are in flight: `ucx_busy`); the callback runs under the runtime's lock (inside
// progress, or a forced `ucp_ep_close_nbx` in `close_conn`: see the module comment's known nesting).
unsafe extern "C" fn send_callback(request: *mut c_void, status: u::ucs_status_t, user_data: *mut c_void) {
    let ctx = Box::from_raw(user_data as *mut SendCtx);
    let node = &*ctx.node;
    let state = node.state();
    state.ucx_ops_in_flight -= 1;
    if status != u::UCS_OK {
        if let Some(request_id) = ctx.request_id {
            let peer = state.pending.get(request_id).and_then(|e| state.conns.get(&e.conn_id)).map(|c| c.peer_name.clone()).unwrap_or_default();
            node.complete_pending(state, request_id, Err(Error::PeerFailed { peer, reason: u::status_string(status) }));
        }
    }
    node.recycle_send_ctx(state, ctx);
    u::ucp_request_free(request);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_message_once_in_order() {
        for (total_len, chunk_size) in [(0usize, 4096usize), (1, 4096), (4096, 4096), (4097, 4096), (10 << 20, 1 << 20), ((10 << 20) + 3, 1 << 20)] {
            let (count, size) = wire::chunking(total_len, chunk_size);
            let ranges: Vec<(usize, usize)> = chunk_ranges(total_len, count, size).collect();
            assert_eq!(ranges.len(), count as usize);
            let mut next = 0;
            for &(offset, len) in &ranges {
                assert_eq!(offset, next, "chunks of {total_len} bytes are contiguous");
                assert!(len <= size && (len > 0 || total_len == 0));
                next = offset + len;
            }
            assert_eq!(next, total_len, "chunks of {total_len} bytes add up");
        }
    }

    #[test]
    fn byte_payloads_carry_no_memory_handle() {
        let payload = Payload::Bytes(b"error".to_vec());
        let (bytes, memh) = payload.bytes();
        assert_eq!(bytes, b"error");
        assert!(memh.is_null(), "unregistered bytes must not claim a registration");
        let (bytes, memh) = Payload::None.bytes();
        assert!(bytes.is_empty() && memh.is_null());
    }
}
