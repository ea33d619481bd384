//! The node: one UCX worker and everything that touches it, one responsibility per file.
//!
//! - `mod.rs` (here): the node's state, its lock, start and close, and the public `Node`.
//! - `connections.rs`: the connection cache (one endpoint per peer, wire-up backlog, idle close,
//!   failure) and the listener's accept callback.
//! - `pending.rs`: requests in flight (the bounded pending table), completion slots, waiting.
//! - `send.rs`: posting requests and responses as chunks of active messages; the respond path.
//! - `receive.rs`: the active-message callback: decoding, routing, messages made whole.
//! - `reassembly.rs`: chunks of large messages put back together (the bitmap of chunks seen).
//! - `stages.rs`: the SEDA stages after receive: dispatch queue, handler threads, `Request`.
//! - `progress.rs`: who drives the worker: the progress thread (spin, then sleep on the event
//!   fd), callers helping while they wait, timers.
//! - `id_map.rs`: the cheap hash of the integer-keyed tables on the hot path.
//!
//! Locking: every UCX call on the worker, and every access to `WorkerState`, happens under
//! `NodeInner::lock`. UCX callbacks run inside `ucp_worker_progress` (or a send/close call), so they
//! too run under the lock; they reach the state through `NodeInner::state()`. A thread that holds
//! the lock for this node marks itself in `IN_PROGRESS`, so code reached from under the lock (an
//! Inline handler sending a request, a completion callback sending a new one) uses the state
//! directly instead of taking the lock again.
//!
//! Borrows: `state()` hands out `&mut WorkerState`, so two must never be live at once on the lock's
//! thread. The receive path holds one while UCX calls it, so user code never runs inside it:
//! Inline handlers are queued (`inline_ready`) and run after `ucp_worker_progress` returns with no
//! borrow live (`run_inline_handlers`), and responses posted under the lock go to
//! `responses_under_lock`, outside the state. `state_reentries` counts violations from the receive
//! path (a test keeps it at 0). Known remaining nesting: completion callbacks of `request_with`
//! run inside the state's borrow (they must not call the node; the JVM bridge's only queue a
//! result), and a forced `ucp_ep_close_nbx` may complete a connection's sends (their callbacks)
//! inside `close_conn`.
//!
//! Stages: receive (progress thread, UCX callbacks, reassembly) -> dispatch queue (bounded) ->
//! handle (handler threads, or the owner's threads in Pull mode) -> respond queue (bounded) ->
//! respond (progress thread posts the sends). When the dispatch queue is full the progress thread
//! stops receiving, so the transport's own flow control pushes back on senders.
mod connections;
mod id_map;
mod pending;
mod progress;
mod reassembly;
mod receive;
mod send;
mod stages;

use std::cell::{Cell, UnsafeCell};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use std::ptr;

use ucx_sys as u;

use crate::config::{Config, HandlerMode};
use crate::error::{check, ucx_error, Error, Result};
use crate::pool::{Buffer, Pool};
use crate::queue::BoundedQueue;
use crate::ucx::{self, Context};
use crate::wire;

use connections::{Conn, reap_closed_endpoints};
use id_map::IdMap;
use pending::{PendingTable, Slot};
use reassembly::Reassembly;
use send::{Outgoing, SendCtx};

pub use pending::{Endpoint, Pending, Response};
pub use stages::{Handler, Request};

/// How long `close` waits for endpoints to finish closing.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

thread_local! {
    static IN_PROGRESS: Cell<*const NodeInner> = const { Cell::new(ptr::null()) };
}

/// Marks this thread as holding a node's lock (see `IN_PROGRESS`) until dropped, restoring the
/// previous mark (a thread can hold the locks of two nodes).
struct InProgressMark(*const NodeInner);

impl InProgressMark {
    fn enter(node: &NodeInner) -> InProgressMark {
        InProgressMark(IN_PROGRESS.with(|p| p.replace(node)))
    }
}

impl Drop for InProgressMark {
    fn drop(&mut self) {
        IN_PROGRESS.with(|p| p.set(self.0));
    }
}

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
}

#[derive(Default)]
struct Counters {
    requests_sent: AtomicU64,
    responses_received: AtomicU64,
    requests_served: AtomicU64,
    requests_shed: AtomicU64,
    requests_timed_out: AtomicU64,
    connections_open: AtomicU64,
    protocol_errors: AtomicU64,
    peers_failed: AtomicU64,
}

/// Everything of the node that only the holder of `NodeInner::lock` may touch.
struct WorkerState {
    listener: u::ucp_listener_h,
    conns: IdMap<u64, Conn>,
    by_ep: IdMap<usize, u64>,
    by_peer: HashMap<SocketAddr, u64>,
    next_conn_id: u64,
    next_request_id: u64,
    pending: PendingTable,
    partials: Reassembly,
    /// Requests received while the dispatch queue was full, within one progress call.
    overflow: VecDeque<Request>,
    /// Error responses produced by the receive path, sent right after `ucp_worker_progress` returns.
    outbox: VecDeque<Outgoing>,
    /// Requests for the Inline handler, run right after `ucp_worker_progress` returns, while no
    /// borrow of this state is live (a handler may respond or send, which borrows it anew).
    inline_ready: VecDeque<Request>,
    /// Connections to close once the current progress call returns.
    to_close: Vec<(u64, bool)>,
    /// Endpoint-close requests not finished yet.
    closing: Vec<*mut c_void>,
    /// Boxed: each one's address is the `user_data` UCX hands back to `send_callback`.
    #[allow(clippy::vec_box)]
    send_ctx_free: Vec<Box<SendCtx>>,
    last_timeout_scan: Instant,
    last_idle_scan: Instant,
    /// Idle progress rounds read the clock for timers only every 64th time.
    progress_calls: u64,
    /// UCX operations posted and not completed (sends, rendezvous receives, wire-up flushes). While
    /// any are, the progress thread must not sleep: UCX raises no event when, say, a shared-memory
    /// FIFO has room again for the next fragment of an eager send.
    ucx_ops_in_flight: usize,
}

pub(crate) struct NodeInner {
    config: Config,
    pool: Pool,
    lock: Mutex<()>,
    state: UnsafeCell<WorkerState>,
    worker: u::ucp_worker_h,
    efd: i32,
    local_addr: Option<SocketAddr>,
    dispatch: BoundedQueue<Request>,
    respond: BoundedQueue<Outgoing>,
    /// Responses posted by code running under the lock (Inline handlers, requests refused at
    /// intake), sent by the next progress round. Outside `WorkerState` so that posting one never
    /// borrows the state: the poster may run while a caller up the stack holds that borrow.
    responses_under_lock: Mutex<VecDeque<Outgoing>>,
    handler: Option<Arc<dyn Handler>>,
    /// The progress thread is (about to be) asleep on the event fd: wake it with `ucp_worker_signal`.
    sleeping: AtomicBool,
    /// Threads waiting for the lock: the progress thread yields to them.
    lock_waiters: AtomicUsize,
    /// Callers spinning on their own completion while driving progress: the progress thread backs off.
    helpers: AtomicUsize,
    /// Callers parked on a response (see `leave_helpers`).
    parked_waiters: AtomicUsize,
    /// The progress thread waits here while helpers drive progress, so that it neither competes
    /// for the two cores nor wakes on every event; the last helper to leave wakes it.
    helpers_gone: (Mutex<()>, std::sync::Condvar),
    progress_waiting_for_helpers: AtomicBool,
    /// Counts helper sessions. A caller issuing request after request is a helper only while it
    /// waits; between requests the count of helpers is 0 for a moment. The progress thread keeps
    /// deferring to helpers while this moves, instead of arming the event fd and waking on every
    /// response it is not needed for.
    helper_sessions: AtomicU64,
    /// One handler thread at a time spins in `next_request`.
    puller_spinning: AtomicBool,
    closed: AtomicBool,
    /// The receive path (an active-message callback) runs on the thread holding the lock, with the
    /// worker state borrowed: nothing may borrow it again meanwhile.
    receiving: AtomicBool,
    /// Times the state was borrowed again while the receive path held it (must stay 0; tests check).
    state_reentries: AtomicU64,
    counters: Counters,
    free_slots: Mutex<Vec<Arc<Slot>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    // Keeps the context alive until the worker is gone (declared last: dropped last).
    _context: Arc<Context>,
}

// SAFETY: the raw UCX handles and the `UnsafeCell` state are only used under `lock` (see the
// module comment); everything else is Sync on its own.
unsafe impl Send for NodeInner {}
// SAFETY: as for Send.
unsafe impl Sync for NodeInner {}

/// Closes the node when the last user handle goes away.
struct Owner(Arc<NodeInner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A fabric node: listens (optionally), connects on demand, sends requests, serves handlers.
#[derive(Clone)]
pub struct Node {
    inner: Arc<NodeInner>,
    _owner: Arc<Owner>,
}
impl Node {
    /// Starts a node: a UCX context and worker, a listener if `config.listen` is set, the progress
    /// thread and, in Staged mode, the handler threads. Inline and Staged modes need a handler.
    ///
    /// Run one node per process: with UCX 1.13, several nodes in one process that open and close
    /// connections concurrently can abort the process (docs/fabric.md, "Several nodes in one
    /// process").
    pub fn start(config: Config, handler: Option<Arc<dyn Handler>>) -> Result<Node> {
        config.validate()?;
        match (config.handler_mode, &handler) {
            (HandlerMode::Inline | HandlerMode::Staged { .. }, None) if config.listen.is_some() => {
                return Err(Error::Config("a listening node in Inline or Staged mode needs a handler".into()))
            }
            _ => {}
        }
        let context = Arc::new(Context::new(&config)?);
        let pool = Pool::new(context.clone(), config.pool_cap_bytes, config.max_message_bytes);
        // SAFETY: the params are zeroed, then filled for the fields in `field_mask`; `context` is alive
        // (the node keeps it until after the worker is destroyed).
        let worker = unsafe {
            let mut params: u::ucp_worker_params_t = std::mem::zeroed();
            params.field_mask = u::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64;
            params.thread_mode = u::UCS_THREAD_MODE_MULTI;
            let mut worker: u::ucp_worker_h = ptr::null_mut();
            check("ucp_worker_create", u::ucp_worker_create(context.handle, &params, &mut worker))?;
            worker
        };
        let mut efd = -1;
        // SAFETY: `worker` was just created; `efd` is a writable local.
        let status = unsafe { u::ucp_worker_get_efd(worker, &mut efd) };
        if status != u::UCS_OK {
            // SAFETY: nothing else has seen `worker` yet; destroyed once, on this failure path only.
            unsafe { u::ucp_worker_destroy(worker) };
            return Err(ucx_error("ucp_worker_get_efd", status));
        }
        let depth = config.dispatch_queue_depth;
        let now = Instant::now();
        let inner = Arc::new(NodeInner {
            pool,
            lock: Mutex::new(()),
            state: UnsafeCell::new(WorkerState {
                listener: ptr::null_mut(),
                conns: IdMap::default(),
                by_ep: IdMap::default(),
                by_peer: HashMap::new(),
                next_conn_id: 1,
                next_request_id: 1,
                pending: PendingTable::new(config.max_requests_in_flight),
                partials: Reassembly::new(reassembly::Limits {
                    requests_per_connection: config.max_reassembly_messages_per_connection,
                    requests: config.max_reassembly_messages,
                    bytes_per_connection: config.max_reassembly_bytes_per_connection,
                    timeout_ms: config.reassembly_timeout.as_millis() as u64,
                }),
                overflow: VecDeque::new(),
                outbox: VecDeque::new(),
                inline_ready: VecDeque::new(),
                to_close: Vec::new(),
                closing: Vec::new(),
                send_ctx_free: Vec::new(),
                last_timeout_scan: now,
                last_idle_scan: now,
                progress_calls: 0,
                ucx_ops_in_flight: 0,
            }),
            worker,
            efd,
            local_addr: None,
            dispatch: BoundedQueue::new(depth),
            respond: BoundedQueue::new(depth),
            responses_under_lock: Mutex::new(VecDeque::new()),
            handler,
            sleeping: AtomicBool::new(false),
            lock_waiters: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            parked_waiters: AtomicUsize::new(0),
            helpers_gone: (Mutex::new(()), std::sync::Condvar::new()),
            progress_waiting_for_helpers: AtomicBool::new(false),
            helper_sessions: AtomicU64::new(0),
            puller_spinning: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            receiving: AtomicBool::new(false),
            state_reentries: AtomicU64::new(0),
            counters: Counters::default(),
            free_slots: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            _context: context,
            config,
        });
        // Register the AM handler, then the listener; both refer to the node by address.
        let setup = (|| -> Result<Option<SocketAddr>> {
            let node_ptr = Arc::as_ptr(&inner) as *mut c_void;
            // SAFETY: the params are zeroed and filled for the fields in `field_mask`; `node_ptr` stays valid
            // while the worker exists (`close` destroys the worker before the last Arc can drop).
            unsafe {
                let mut params: u::ucp_am_handler_param_t = std::mem::zeroed();
                params.field_mask = (u::UCP_AM_HANDLER_PARAM_FIELD_ID
                    | u::UCP_AM_HANDLER_PARAM_FIELD_CB
                    | u::UCP_AM_HANDLER_PARAM_FIELD_ARG
                    | u::UCP_AM_HANDLER_PARAM_FIELD_FLAGS) as u64;
                params.id = wire::AM_ID;
                params.cb = Some(receive::am_recv_callback);
                params.arg = node_ptr;
                params.flags = u::UCP_AM_FLAG_WHOLE_MSG;
                check("ucp_worker_set_am_recv_handler", u::ucp_worker_set_am_recv_handler(worker, &params))?;
            }
            match inner.config.listen {
                None => Ok(None),
                // SAFETY: `storage` outlives `ucp_listener_create`; the listener's callback arg is the node (as
                // above); this thread is the only one with `inner` so far, so the state is its alone; UCX fills
                // `attr.sockaddr` (a sockaddr_storage) before it is read.
                Some(addr) => unsafe {
                    let (storage, len) = ucx::sockaddr(&addr);
                    let mut params: u::ucp_listener_params_t = std::mem::zeroed();
                    params.field_mask =
                        (u::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | u::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER) as u64;
                    params.sockaddr.addr = &storage as *const _ as *const u::sockaddr;
                    params.sockaddr.addrlen = len;
                    params.conn_handler.cb = Some(connections::conn_request_callback);
                    params.conn_handler.arg = node_ptr;
                    let mut listener: u::ucp_listener_h = ptr::null_mut();
                    check("ucp_listener_create", u::ucp_listener_create(worker, &params, &mut listener))?;
                    (*inner.state.get()).listener = listener;
                    let mut attr: u::ucp_listener_attr_t = std::mem::zeroed();
                    attr.field_mask = u::UCP_LISTENER_ATTR_FIELD_SOCKADDR as u64;
                    check("ucp_listener_query", u::ucp_listener_query(listener, &mut attr))?;
                    let storage: &libc::sockaddr_storage = &*(&attr.sockaddr as *const _ as *const libc::sockaddr_storage);
                    Ok(Some(ucx::socket_addr(storage)?))
                },
            }
        })();
        let local_addr = match setup {
            Ok(addr) => addr,
            Err(e) => {
                inner.close();
                return Err(e);
            }
        };
        // Only this thread holds `inner` so far: setting a field through the Arc is still exclusive.
        // SAFETY: no other thread has `inner` yet (the progress thread starts below) and no reference to
        // `local_addr` exists, so this write through the Arc is exclusive.
        unsafe { (*(Arc::as_ptr(&inner) as *mut NodeInner)).local_addr = local_addr };

        let mut threads = Vec::new();
        {
            let inner = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("fabric-progress".into())
                    .spawn(move || inner.progress_loop())
                    .expect("spawning the progress thread"),
            );
        }
        if let (HandlerMode::Staged { threads: count }, Some(_)) = (inner.config.handler_mode, &inner.handler) {
            for i in 0..count {
                let inner = inner.clone();
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("fabric-handler-{i}"))
                        .spawn(move || inner.handler_loop())
                        .expect("spawning a handler thread"),
                );
            }
        }
        *inner.threads.lock().unwrap() = threads;
        let owner = Arc::new(Owner(inner.clone()));
        Ok(Node { inner, _owner: owner })
    }

    /// The address this node listens on (with the real port if 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.local_addr
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// An endpoint to `peer`, connecting now if no cached connection exists.
    pub fn endpoint(&self, peer: SocketAddr) -> Result<Endpoint> {
        self.inner.with_state(|inner, state| inner.connection_to(state, peer).map(|_| ()))?;
        Ok(Endpoint { node: self.clone(), peer })
    }

    /// A registered buffer of `len` bytes; at the pool's cap, waits up to `request_timeout`.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        self.inner.check_len(len)?;
        self.inner.pool.alloc(len, Some(Instant::now() + self.inner.config.request_timeout))
    }

    /// Like `alloc`, but fails at once at the cap.
    pub fn try_alloc(&self, len: usize) -> Result<Buffer> {
        self.inner.check_len(len)?;
        self.inner.pool.alloc(len, None)
    }

    /// The next request, in Pull mode. `None` after `timeout` or once the node is closed.
    pub fn next_request(&self, timeout: Duration) -> Option<Request> {
        self.inner.next_request(timeout)
    }

    /// Drives this node's progress on the calling thread, as a helper, for up to `spin` or until
    /// something happens; returns how much happened. For threads that wait on callback requests
    /// (`request_with`): receiving on the waiting thread avoids a hand-off through the progress
    /// thread, which backs off while helpers are active.
    pub fn help_progress(&self, spin: Duration) -> usize {
        self.inner.help_progress(spin)
    }

    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        Stats {
            requests_sent: c.requests_sent.load(Ordering::Relaxed),
            responses_received: c.responses_received.load(Ordering::Relaxed),
            requests_served: c.requests_served.load(Ordering::Relaxed),
            requests_shed: c.requests_shed.load(Ordering::Relaxed),
            requests_timed_out: c.requests_timed_out.load(Ordering::Relaxed),
            connections_open: c.connections_open.load(Ordering::Relaxed),
            pool_bytes_mapped: self.inner.pool.mapped_bytes() as u64,
            pool_bytes_in_use: self.inner.pool.in_use_bytes() as u64,
            pool_cap_bytes: self.inner.pool.cap_bytes() as u64,
            protocol_errors: c.protocol_errors.load(Ordering::Relaxed),
            peers_failed: c.peers_failed.load(Ordering::Relaxed),
        }
    }

    /// Stops the node: pending requests fail with `Error::Closed`, connections are closed, threads
    /// joined. Idempotent. Buffers still held stay valid until dropped.
    pub fn close(&self) {
        self.inner.close();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Whether the connection `Request::connection_id` named is still open. Slow path (takes the
    /// worker lock): for pruning per-connection state such as an authenticated flag.
    pub fn connection_is_open(&self, connection_id: u64) -> bool {
        self.inner.with_state(|_, state| Ok(state.conns.get(&connection_id).is_some_and(|c| !c.failed))).unwrap_or(false)
    }
}

impl NodeInner {
    /// The worker state. Only valid while this thread holds `lock` (directly or in a UCX callback).
    #[allow(clippy::mut_from_ref)]
    ///
    /// # Safety
    /// The caller holds `lock` on this thread (directly, or inside a UCX callback) and no other borrow
    /// of the state is live on this thread (see the module comment, "Borrows").
    unsafe fn state(&self) -> &mut WorkerState {
        &mut *self.state.get()
    }

    fn in_progress_here(&self) -> bool {
        IN_PROGRESS.with(|p| std::ptr::eq(p.get(), self))
    }

    /// Runs `f` with the worker state, taking the lock unless this thread already holds it.
    fn with_state<T>(&self, f: impl FnOnce(&NodeInner, &mut WorkerState) -> Result<T>) -> Result<T> {
        if self.in_progress_here() {
            if self.receiving.load(Ordering::Relaxed) {
                self.state_reentries.fetch_add(1, Ordering::Relaxed);
            }
            // SAFETY: this thread holds the lock (it marked itself in IN_PROGRESS), and no borrow
            // of the state is live up its stack: code that runs under the lock with user code above
            // it (Inline handlers, `run_inline_handlers`) holds none (`state_reentries` counts
            // violations from the receive path).
            return f(self, unsafe { self.state() });
        }
        let guard = self.lock_for_caller();
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mark = InProgressMark::enter(self);
        // SAFETY: the lock was just taken by this thread, which had no borrow of the state before.
        let result = f(self, unsafe { self.state() });
        drop(mark);
        drop(guard);
        result
    }

    fn lock_for_caller(&self) -> MutexGuard<'_, ()> {
        self.lock_waiters.fetch_add(1, Ordering::SeqCst);
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.lock_waiters.fetch_sub(1, Ordering::SeqCst);
        guard
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.config.max_message_bytes {
            return Err(Error::TooLarge { len, max: self.config.max_message_bytes });
        }
        Ok(())
    }

    /// Inside the progress context nothing may block; elsewhere waits are bounded by the request timeout.
    fn alloc_deadline(&self) -> Option<Instant> {
        if self.in_progress_here() {
            None
        } else {
            Some(Instant::now() + self.config.request_timeout)
        }
    }

    fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            // SAFETY: `ucp_worker_signal` is the one worker call UCX allows from any thread without the
            // worker's lock; the worker lives until `close` destroys it, after the progress thread stopped.
            unsafe { u::ucp_worker_signal(self.worker) };
        }
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.dispatch.close();
        self.respond.close();
        // SAFETY: as in `wake`; `close` destroys the worker only further down, after joining the threads.
        unsafe { u::ucp_worker_signal(self.worker) };
        let current = std::thread::current().id();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        for thread in threads {
            if thread.thread().id() != current {
                let _ = thread.join();
            }
        }
        // Requests still queued are answered with nothing: their peers see the connection close.
        for request in self.dispatch.drain() {
            request.discard();
        }
        drop(self.respond.drain());
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mark = InProgressMark::enter(self);
        // SAFETY: this thread holds the lock (taken just above) and had no borrow of the state.
        let state = unsafe { self.state() };
        for request in state.overflow.drain(..) {
            request.discard();
        }
        state.outbox.clear();
        for request in state.inline_ready.drain(..) {
            request.discard();
        }
        self.responses_under_lock.lock().unwrap_or_else(|e| e.into_inner()).clear();
        for request_id in state.pending.ids() {
            self.complete_pending(state, request_id, Err(Error::Closed));
        }
        // Healthy connections close gracefully, so peers see a clean disconnect rather than a
        // timeout; failed ones are forced. Either way the wait below is bounded.
        let conn_ids: Vec<(u64, bool)> = state.conns.iter().map(|(&id, c)| (id, c.failed)).collect();
        for (conn_id, failed) in conn_ids {
            self.close_conn(state, conn_id, failed);
        }
        let grace_end = Instant::now() + CLOSE_GRACE;
        while !state.closing.is_empty() && Instant::now() < grace_end {
            // SAFETY: under the lock, on a worker that is not destroyed yet (below).
            unsafe { u::ucp_worker_progress(self.worker) };
            reap_closed_endpoints(state);
        }
        // SAFETY: under the lock; the listener and the worker are destroyed exactly once (the listener's
        // pointer is cleared; `closed` makes `close` run once), after every thread that used them was
        // joined and every endpoint closed.
        unsafe {
            if !state.listener.is_null() {
                u::ucp_listener_destroy(state.listener);
                state.listener = ptr::null_mut();
            }
            u::ucp_worker_destroy(self.worker);
        }
        // After the worker: no rendezvous receive can still be writing into a message's buffer.
        state.partials.clear();
        state.send_ctx_free.clear();
        drop(mark);
        drop(guard);
    }
}
