//! The receive stage: the active-message callback decodes each frame's header (the only parser
//! of network input, `wire::Header::decode`), finds the connection it came on, copies small
//! messages into a pooled buffer, hands chunks of large ones to the reassembly (by copy or
//! zero-copy rendezvous receive), and passes whole messages on: requests to the stages, responses
//! to their waiting callers.
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::Ordering;

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::error::{ucx_error, Error, Result};
use crate::log::{log_debug, log_warn};
use crate::pool::Buffer;
use crate::wire::{self, Header, Kind};

use super::pending::Response;
use super::reassembly::{ChunkTarget, PartialKey};
use super::runtime::Runtime;
use super::send::{Outgoing, Payload};
use super::{NodeInner, Request, NodeState};

struct RecvCtx {
    node: *const NodeInner,
    key: PartialKey,
    len: usize,
}

impl NodeInner {
    /// The receive stage for one active message that came on connection `conn_id` of this node.
    /// The message is consumed in every case (UCS_OK): a rendezvous receive, if started, takes
    /// the descriptor (`ucp_am_recv_data_nbx`).
    ///
    /// # Safety
    /// Called from `am_recv_callback` only: under the runtime's lock with no borrow of this node's
    /// state live; `data` holds `length` bytes (or is a rendezvous descriptor when `param` says so).
    unsafe fn on_active_message(&self, conn_id: u64, header: &[u8], data: *mut c_void, length: usize, param: &u::ucp_am_recv_param_t) {
        let state = self.state();
        match state.conns.get_mut(&conn_id) {
            // Failed or closing (its endpoint waits for its wire-up flush): nothing more is served
            // from it. Returning drops the message (a rendezvous descriptor too).
            Some(conn) if conn.failed => return,
            Some(conn) => conn.last_used_ms = coarse_ms(), // for the idle rule of accepted connections
            None => {}
        }
        let header = match Header::decode(header, length, self.config.max_message_bytes) {
            Ok(h) => Self::learn_from_answer(state, conn_id, h),
            Err(e) => return self.protocol_error(state, conn_id, &e),
        };
        let rndv = param.recv_attr & u::UCP_AM_RECV_ATTR_FLAG_RNDV as u64 != 0;
        // The bytes of a message sent eagerly (not a rendezvous descriptor).
        // SAFETY: called only where `rndv` is false: then `data` holds `length` bytes (this
        // function's contract), alive until the callback returns, which the slice does not outlive.
        let eager_bytes = || if length == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(data as *const u8, length) } };
        if matches!(header.kind, Kind::Control | Kind::PulledRequest | Kind::PulledResponse) {
            if rndv {
                return self.same_host_protocol_error(state, conn_id, "same-host control or descriptor sent by rendezvous");
            }
            match header.kind {
                Kind::Control => self.on_same_host_control(state, conn_id, &header, eager_bytes()),
                _ => self.on_pulled(state, conn_id, &header, eager_bytes()),
            }
            return;
        }
        if header.kind == Kind::Bundle {
            if rndv {
                return self.protocol_error(state, conn_id, &Error::Protocol("bundle sent by rendezvous".into()));
            }
            return self.on_bundle(state, conn_id, &header, eager_bytes());
        }
        if header.chunk_count == 1 && !rndv {
            // The common small-message path: one copy into a pooled buffer.
            return self.on_whole(state, conn_id, &header, eager_bytes());
        }
        if header.kind != Kind::Request && !Self::awaited(state, conn_id, &header) {
            return; // abandoned or timed out: drop
        }
        let key: PartialKey = (conn_id, header.request_id, header.kind as u8);
        let pool = &self.pool;
        let alloc = |len: usize| {
            let buffer = pool.alloc(len, None).ok();
            if buffer.is_none() {
                log_debug!("no buffer for a {len}-byte message: its chunks will be dropped");
            }
            buffer
        };
        let (destination, memh) = match state.partials.accept(key, &header, length, coarse_ms(), rndv, alloc) {
            Err(reason) => {
                self.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
                log_warn!("closing connection {conn_id}: {reason}");
                self.fail_conn(state, conn_id, "inconsistent chunk");
                return;
            }
            Ok(ChunkTarget::Drop) => {
                // Nowhere to put it: count it, drop it (for rendezvous, returning OK drops the descriptor).
                self.on_chunk_done(state, key, length, false, Ok(()));
                return;
            }
            // SAFETY: `Header::decode` checked offset + length <= total_len, and `accept` checked
            // the buffer holds total_len bytes.
            Ok(ChunkTarget::Into(buffer, offset)) => (buffer.as_mut_ptr().add(offset), buffer.memh()),
        };
        if !rndv {
            ptr::copy_nonoverlapping(data as *const u8, destination, length);
            self.on_chunk_done(state, key, length, false, Ok(()));
            return;
        }
        // Zero-copy: UCX moves the chunk straight into the registered buffer.
        let ctx = Box::into_raw(Box::new(RecvCtx { node: self, key, len: length }));
        let mut rparam: u::ucp_request_param_t = std::mem::zeroed();
        rparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_CALLBACK | u::UCP_OP_ATTR_FIELD_USER_DATA | u::UCP_OP_ATTR_FIELD_MEMH;
        rparam.cb.recv_am = Some(recv_data_callback);
        rparam.user_data = ctx as *mut c_void;
        rparam.memh = memh;
        let status_ptr = u::ucp_am_recv_data_nbx(self.runtime.worker(), data, destination as *mut c_void, length, &rparam);
        if status_ptr.is_null() {
            drop(Box::from_raw(ctx));
            self.on_chunk_done(state, key, length, true, Ok(()));
        } else if u::ucs_ptr_is_err(status_ptr) {
            drop(Box::from_raw(ctx));
            self.on_chunk_done(state, key, length, true, Err(ucx_error("ucp_am_recv_data_nbx", u::ucs_ptr_status(status_ptr))));
        } else {
            state.ucx_ops_in_flight += 1;
        }
    }

    /// A frame that failed `wire`'s checks: the connection it came on is closed, the node goes on.
    fn protocol_error(&self, state: &mut NodeState, conn_id: u64, e: &Error) {
        self.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
        let peer = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
        log_warn!("closing connection from {peer}: {e}");
        self.fail_conn(state, conn_id, &e.to_string());
    }

    /// An answer's id with `wire::ANSWER_ID_TAKES_BUNDLES` cleared (the id this node chose), noting
    /// on its connection that the peer takes bundles if it was set. Other kinds pass unchanged.
    fn learn_from_answer(state: &mut NodeState, conn_id: u64, header: Header) -> Header {
        let answer = matches!(header.kind, Kind::Response | Kind::ErrorResponse | Kind::PulledResponse);
        if !answer || header.request_id & wire::ANSWER_ID_TAKES_BUNDLES == 0 {
            return header;
        }
        if let Some(conn) = state.conns.get_mut(&conn_id) {
            conn.peer_takes_bundles = true;
        }
        Header { request_id: header.request_id & !wire::ANSWER_ID_TAKES_BUNDLES, ..header }
    }

    /// Whether a response (or error response) answers a request of this node still waiting, sent
    /// on this connection: else it is dropped (abandoned, timed out, or a peer's mistake).
    fn awaited(state: &NodeState, conn_id: u64, header: &Header) -> bool {
        state.pending.get(header.request_id).is_some_and(|entry| entry.conn_id == conn_id)
    }

    /// A whole single-chunk message whose bytes came with it (eagerly, alone or in a bundle): one
    /// copy into a pooled buffer, then on as any message.
    fn on_whole(&self, state: &mut NodeState, conn_id: u64, header: &Header, bytes: &[u8]) {
        if header.kind != Kind::Request && !Self::awaited(state, conn_id, header) {
            return;
        }
        match self.pool.alloc(bytes.len(), None) {
            Ok(mut buffer) => {
                buffer.as_mut_slice().copy_from_slice(bytes);
                self.on_message(state, conn_id, header, Ok(buffer));
            }
            Err(e) => self.on_message(state, conn_id, header, Err(e)),
        }
    }

    /// A bundle (`Kind::Bundle`): its frames, each as if it had come alone. Checked whole first,
    /// so that a bad frame closes the connection with none of the bundle served.
    fn on_bundle(&self, state: &mut NodeState, conn_id: u64, bundle: &Header, data: &[u8]) {
        let max = self.config.max_message_bytes;
        if let Some(Err(e)) = wire::BundleFrames::new(bundle, data, max).find(Result::is_err) {
            return self.protocol_error(state, conn_id, &e);
        }
        // A peer that sends bundles takes them: this node's requests to it may travel in one.
        if let Some(conn) = state.conns.get_mut(&conn_id) {
            conn.peer_takes_bundles = true;
        }
        for (header, bytes) in wire::BundleFrames::new(bundle, data, max).flatten() {
            if state.conns.get(&conn_id).is_some_and(|c| c.failed) {
                return;
            }
            let header = Self::learn_from_answer(state, conn_id, header);
            self.on_whole(state, conn_id, &header, bytes);
        }
    }

    /// `receive`: the chunk came by a rendezvous receive into the message's buffer.
    fn on_chunk_done(&self, state: &mut NodeState, key: PartialKey, len: usize, receive: bool, result: Result<()>) {
        if let Err(e) = &result {
            log_warn!("receiving a chunk of message {} failed: {e}", key.1);
        }
        if let Some((header, payload)) = state.partials.chunk_done(key, len, result.is_ok(), receive, self.pool.cap_bytes()) {
            self.on_message(state, key.0, &header, payload);
        }
    }

    /// A whole message has arrived (or could not be stored).
    pub(super) fn on_message(&self, state: &mut NodeState, conn_id: u64, header: &Header, payload: Result<Buffer>) {
        match header.kind {
            Kind::Request => {
                // Being served: an accepted connection is not idle until it is answered (`send_outgoing`).
                if let Some(conn) = state.conns.get_mut(&conn_id) {
                    conn.requests_in_flight += 1;
                    // Its sender takes bundles (`wire`, "Versions").
                    conn.peer_takes_bundles |= header.request_id & wire::REQUEST_ID_TAKES_BUNDLES != 0;
                }
                let payload = match payload {
                    Ok(buffer) => buffer,
                    Err(e) => {
                        let status = if matches!(e, Error::PoolExhausted { .. }) { wire::STATUS_POOL_EXHAUSTED } else { wire::STATUS_REMOTE };
                        state.outbox.push_back(Outgoing {
                            conn_id,
                            request_id: header.request_id,
                            op: header.op,
                            status,
                            payload: Payload::Bytes(e.to_string().into_bytes()),
                            then_close: false,
                        });
                        return;
                    }
                };
                let node = self.arc();
                let request = Request { node, conn_id, request_id: header.request_id, op: header.op, payload: Some(payload), answered: false, then_close: false };
                self.dispatch_request(state, request);
            }
            Kind::Response => self.complete_pending(state, header.request_id, payload.map(|buffer| Response { buffer })),
            Kind::Control | Kind::PulledRequest | Kind::PulledResponse => unreachable!("handled by same_host.rs before reassembly"),
            Kind::Bundle => unreachable!("opened by on_bundle before reassembly"),
            Kind::ErrorResponse => {
                let message = payload.map(|b| String::from_utf8_lossy(b.as_slice()).into_owned()).unwrap_or_default();
                let error = match header.status {
                    wire::STATUS_OVERLOADED => Error::Overloaded,
                    _ => Error::Remote(message),
                };
                self.complete_pending(state, header.request_id, Err(error));
            }
        }
    }
}

// UCX callbacks of the receive path. Each runs under the runtime's lock, inside progress.

// SAFETY: UCX calls this only as registered: `arg` is the runtime given to
// `ucp_worker_set_am_recv_handler`, alive while its worker is; an entry of `by_ep` names a node
// registered with the runtime (an entry lives exactly as long as its connection is in the node's
// table); `header` holds `header_length` bytes and `param` is valid for the call; the callback runs
// inside `ucp_worker_progress` under the runtime's lock, with no borrow of the shared state or of
// that node's state live (nobody holds one across a progress call).
pub(super) unsafe extern "C" fn am_recv_callback(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const u::ucp_am_recv_param_t,
) -> u::ucs_status_t {
    // The handler's argument is the runtime (registered once per worker); the endpoint the
    // message came on names the node and connection.
    let runtime = &*(arg as *const Runtime);
    // Evidence that the receive path is alive (`wedge.rs`). Written only here, under the lock, so
    // a load and a store (no atomic read-modify-write per message).
    let received = runtime.messages_received.load(Ordering::Relaxed);
    runtime.messages_received.store(received.wrapping_add(1), Ordering::Relaxed);
    let param = &*param;
    let reply_ep = if param.recv_attr & u::UCP_AM_RECV_ATTR_FIELD_REPLY_EP as u64 != 0 { param.reply_ep } else { ptr::null_mut() };
    let Some(&(node, conn_id)) = runtime.shared().by_ep.get(&(reply_ep as usize)) else {
        log_debug!("message from an unknown endpoint dropped");
        return u::UCS_OK;
    };
    let header = if header_length == 0 { &[][..] } else { std::slice::from_raw_parts(header as *const u8, header_length) };
    let node = &*node;
    // Only the thread holding the lock writes `receiving`: a load and a store suffice.
    let was_receiving = node.receiving.load(Ordering::Relaxed);
    node.receiving.store(true, Ordering::Relaxed);
    node.on_active_message(conn_id, header, data, length, param);
    node.receiving.store(was_receiving, Ordering::Relaxed);
    u::UCS_OK
}

// SAFETY: UCX calls this only as registered: `user_data` is the RecvCtx boxed by `on_active_message`
// for this receive, handed over once; its node is alive (a closed node stays registered with the
// runtime while its receives are in flight: `ucx_busy`); the callback runs inside progress under the
// runtime's lock with no borrow of the node's state live; the reassembly kept the target buffer
// alive while this receive was in flight.
unsafe extern "C" fn recv_data_callback(request: *mut c_void, status: u::ucs_status_t, _length: usize, user_data: *mut c_void) {
    let ctx = Box::from_raw(user_data as *mut RecvCtx);
    let node = &*ctx.node;
    let was_receiving = node.receiving.load(Ordering::Relaxed);
    node.receiving.store(true, Ordering::Relaxed);
    let state = node.state();
    state.ucx_ops_in_flight -= 1;
    let result = if status == u::UCS_OK { Ok(()) } else { Err(ucx_error("ucp_am_recv_data_nbx", status)) };
    node.on_chunk_done(state, ctx.key, ctx.len, true, result);
    node.receiving.store(was_receiving, Ordering::Relaxed);
    u::ucp_request_free(request);
}
