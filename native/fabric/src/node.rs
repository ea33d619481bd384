//! The node: one UCX worker, its progress thread, the connection cache, requests in flight,
//! chunk reassembly and the SEDA stages.
//!
//! Locking: every UCX call on the worker, and every access to `WorkerState`, happens under
//! `NodeInner::lock`. UCX callbacks run inside `ucp_worker_progress` (or a send/close call), so they
//! too run under the lock; they reach the state through `NodeInner::state()`. A thread that holds
//! the lock for this node marks itself in `IN_PROGRESS`, so code reached from a callback (an inline
//! handler answering, a completion callback sending a new request) uses the state directly instead
//! of taking the lock again.
//!
//! Stages: receive (progress thread, UCX callbacks, reassembly) -> dispatch queue (bounded) ->
//! handle (handler threads, or the owner's threads in Pull mode) -> respond queue (bounded) ->
//! respond (progress thread posts the sends). When the dispatch queue is full the progress thread
//! stops receiving, so the transport's own flow control pushes back on senders.
use std::cell::{Cell, UnsafeCell};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};
use std::ptr;

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::config::{Config, HandlerMode};
use crate::error::{check, ucx_error, Error, Result};
use crate::log::{log_debug, log_warn};
use crate::pool::{Buffer, Pool};
use crate::queue::BoundedQueue;
use crate::ucx::{self, Context};
use crate::wire::{self, Header, Kind};

/// How long a waiting caller spins (checking and helping progress) before it parks.
const WAITER_SPIN: Duration = Duration::from_micros(100);
/// Waiters that may spin at once: one core is left for the rest of the process (at least one).
static SPINNING_WAITERS_MAX: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map(|n| n.get().saturating_sub(1)).unwrap_or(1).max(1)
});
/// Period of the scan for requests past their deadline.
const TIMEOUT_SCAN_PERIOD: Duration = Duration::from_millis(10);
/// Period of the scan for idle cached connections.
const IDLE_SCAN_PERIOD: Duration = Duration::from_millis(500);
/// Longest sleep of the progress thread on the event fd; timers are checked at least this often.
const SLEEP_MAX_MS: i32 = 20;
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

/// Handles requests arriving at a node (Inline and Staged modes).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request);
}

impl<F: Fn(Request) + Send + Sync + 'static> Handler for F {
    fn handle(&self, request: Request) {
        self(request)
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

struct Conn {
    ep: u::ucp_ep_h,
    /// Set for connections this node opened (they are cached by peer and closed when idle).
    outgoing_peer: Option<SocketAddr>,
    peer_name: String,
    failed: bool,
    last_used_ms: u64,
    requests_in_flight: usize,
    /// False until the endpoint's first flush completes, i.e. until UCX has finished wiring up its
    /// transports. UCX 1.13 re-sends messages queued during wire-up with the protocol chosen for
    /// the temporary lane, which shared memory with peer error handling rejects ("Invalid
    /// am_short_iov length"); so messages wait in `backlog` until then.
    ready: bool,
    /// The wire-up flush is in flight. UCX 1.22 crashes (use after free in
    /// `ucp_ep_flush_resume_slow_path_callback`) when an endpoint is closed while its flush is
    /// pending, so a close requested then (`close_after_wireup`, with its `force`) waits for it.
    wireup_flushing: bool,
    close_after_wireup: Option<bool>,
    backlog: VecDeque<(Header, Payload, Option<u64>)>,
    /// Extra `ucp_am_send_nbx` flags for this connection (`UCP_AM_SEND_FLAG_EAGER` for same-host peers).
    send_flags: u32,
}

enum Waiter {
    Slot(Arc<Slot>),
    Callback(Box<dyn FnOnce(Result<Response>) + Send>),
}

struct PendingEntry {
    conn_id: u64,
    deadline_ms: u64,
    waiter: Waiter,
}

/// A message being reassembled from chunks.
struct Partial {
    /// None when no buffer could be had: chunks are then received and dropped, and the message fails.
    buffer: Option<Buffer>,
    op: u16,
    status: u16,
    chunk_count: u32,
    chunks_done: u32,
    bytes_done: u64,
    /// One bit per chunk seen, so a duplicate chunk cannot leave a hole of stale bytes.
    seen: Vec<u64>,
}

type PartialKey = (u64, u64, u8);

enum Payload {
    None,
    Owned(Buffer),
    Shared(Arc<Buffer>),
    Bytes(Vec<u8>),
}

impl Payload {
    fn bytes(&self) -> (&[u8], u::ucp_mem_h) {
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
struct SendCtx {
    node: *const NodeInner,
    header: [u8; wire::HEADER_LEN],
    payload: Payload,
    offset: usize,
    len: usize,
    /// For a request: its id, to fail it if the send fails.
    request_id: Option<u64>,
}

struct FlushCtx {
    node: *const NodeInner,
    conn_id: u64,
}

struct RecvCtx {
    node: *const NodeInner,
    key: PartialKey,
    len: usize,
}

/// A response to send, queued by a handler thread for the respond stage.
struct Outgoing {
    conn_id: u64,
    request_id: u64,
    op: u16,
    status: u16,
    payload: Payload,
}

/// Hashes integer keys (ids, pointers) with one multiply: the per-message lookups of the pending
/// table and the endpoint map are on the hot path, and these keys need no DoS-resistant hash (ids
/// are ours; pointers are UCX's).
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64);
    }
}

type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

struct WorkerState {
    listener: u::ucp_listener_h,
    conns: IdMap<u64, Conn>,
    by_ep: IdMap<usize, u64>,
    by_peer: HashMap<SocketAddr, u64>,
    next_conn_id: u64,
    next_request_id: u64,
    pending: IdMap<u64, PendingEntry>,
    partials: IdMap<PartialKey, Partial>,
    /// Requests received while the dispatch queue was full, within one progress call.
    overflow: VecDeque<Request>,
    /// Responses produced inside the progress context, sent right after `ucp_worker_progress` returns.
    outbox: VecDeque<Outgoing>,
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
    counters: Counters,
    free_slots: Mutex<Vec<Arc<Slot>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    // Keeps the context alive until the worker is gone (declared last: dropped last).
    _context: Arc<Context>,
}

unsafe impl Send for NodeInner {}
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

/// A peer as seen by this node. Cheap to clone; all endpoints to one peer share one connection,
/// which is re-established transparently after a failure or an idle close.
#[derive(Clone)]
pub struct Endpoint {
    node: Node,
    peer: SocketAddr,
}

/// A request in flight, awaited with `wait`.
pub struct Pending {
    node: Arc<NodeInner>,
    request_id: u64,
    deadline_ms: u64,
    slot: Option<Arc<Slot>>,
}

/// A completed response: registered memory from the pool.
pub struct Response {
    buffer: Buffer,
}

/// A request received by this node. Answer it exactly once; dropping it unanswered fails it.
pub struct Request {
    node: Arc<NodeInner>,
    conn_id: u64,
    request_id: u64,
    op: u16,
    payload: Option<Buffer>,
    answered: bool,
}

/// The completion of one request: written by the progress context, read by the waiting caller.
/// Slots are pooled, so a request costs no allocation once the node is warm.
struct Slot {
    done: AtomicBool,
    parked: AtomicBool,
    result: Mutex<Option<Result<Response>>>,
    waiter: Mutex<Option<Thread>>,
}

impl Slot {
    fn new() -> Slot {
        Slot { done: AtomicBool::new(false), parked: AtomicBool::new(false), result: Mutex::new(None), waiter: Mutex::new(None) }
    }

    fn complete(&self, result: Result<Response>) {
        *self.result.lock().unwrap() = Some(result);
        self.done.store(true, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            if let Some(thread) = self.waiter.lock().unwrap().take() {
                thread.unpark();
            }
        }
    }

    fn reset(&self) {
        self.done.store(false, Ordering::SeqCst);
        self.parked.store(false, Ordering::SeqCst);
        *self.result.lock().unwrap() = None;
        *self.waiter.lock().unwrap() = None;
    }
}

impl Response {
    pub fn len(&self) -> usize {
        self.buffer.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
    pub fn into_buffer(self) -> Buffer {
        self.buffer
    }
}

impl std::ops::Deref for Response {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buffer.as_slice()
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Response {{ len: {} }}", self.len())
    }
}

// ---------------------------------------------------------------------------------------------
// Node: start, public API, close.

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
        let worker = unsafe {
            let mut params: u::ucp_worker_params_t = std::mem::zeroed();
            params.field_mask = u::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64;
            params.thread_mode = u::UCS_THREAD_MODE_MULTI;
            let mut worker: u::ucp_worker_h = ptr::null_mut();
            check("ucp_worker_create", u::ucp_worker_create(context.handle, &params, &mut worker))?;
            worker
        };
        let mut efd = -1;
        let status = unsafe { u::ucp_worker_get_efd(worker, &mut efd) };
        if status != u::UCS_OK {
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
                pending: IdMap::with_capacity_and_hasher(config.max_requests_in_flight.min(65536), Default::default()),
                partials: IdMap::default(),
                overflow: VecDeque::new(),
                outbox: VecDeque::new(),
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
            counters: Counters::default(),
            free_slots: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            _context: context,
            config,
        });
        // Register the AM handler, then the listener; both refer to the node by address.
        let setup = (|| -> Result<Option<SocketAddr>> {
            let node_ptr = Arc::as_ptr(&inner) as *mut c_void;
            unsafe {
                let mut params: u::ucp_am_handler_param_t = std::mem::zeroed();
                params.field_mask = (u::UCP_AM_HANDLER_PARAM_FIELD_ID
                    | u::UCP_AM_HANDLER_PARAM_FIELD_CB
                    | u::UCP_AM_HANDLER_PARAM_FIELD_ARG
                    | u::UCP_AM_HANDLER_PARAM_FIELD_FLAGS) as u64;
                params.id = wire::AM_ID;
                params.cb = Some(am_recv_callback);
                params.arg = node_ptr;
                params.flags = u::UCP_AM_FLAG_WHOLE_MSG;
                check("ucp_worker_set_am_recv_handler", u::ucp_worker_set_am_recv_handler(worker, &params))?;
            }
            match inner.config.listen {
                None => Ok(None),
                Some(addr) => unsafe {
                    let (storage, len) = ucx::sockaddr(&addr);
                    let mut params: u::ucp_listener_params_t = std::mem::zeroed();
                    params.field_mask =
                        (u::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | u::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER) as u64;
                    params.sockaddr.addr = &storage as *const _ as *const u::sockaddr;
                    params.sockaddr.addrlen = len;
                    params.conn_handler.cb = Some(conn_request_callback);
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

impl Endpoint {
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Sends `payload` (copied into a registered buffer) and returns the request in flight.
    pub fn request(&self, op: u16, payload: &[u8]) -> Result<Pending> {
        let buffer = self.copy_in(payload)?;
        self.request_buffer(op, buffer)
    }

    /// Sends a registered buffer without copying it.
    pub fn request_buffer(&self, op: u16, payload: Buffer) -> Result<Pending> {
        self.submit_pending(op, Payload::Owned(payload))
    }

    /// Sends a registered buffer that the caller keeps (e.g. to send it again): no copy. The buffer
    /// must not be modified until the request completes.
    pub fn request_shared(&self, op: u16, payload: Arc<Buffer>) -> Result<Pending> {
        self.submit_pending(op, Payload::Shared(payload))
    }

    /// Sends `payload`; `done` runs with the result on the progress thread (keep it short).
    pub fn request_with(
        &self,
        op: u16,
        payload: &[u8],
        done: impl FnOnce(Result<Response>) + Send + 'static,
    ) -> Result<()> {
        let buffer = self.copy_in(payload)?;
        self.request_buffer_with(op, buffer, done)
    }

    pub fn request_buffer_with(
        &self,
        op: u16,
        payload: Buffer,
        done: impl FnOnce(Result<Response>) + Send + 'static,
    ) -> Result<()> {
        self.node.inner.submit(self.peer, op, Payload::Owned(payload), Waiter::Callback(Box::new(done))).map(|_| ())
    }

    /// Submits a request whose response a caller will wait for.
    fn submit_pending(&self, op: u16, payload: Payload) -> Result<Pending> {
        let inner = &self.node.inner;
        let slot = inner.take_slot();
        let (request_id, deadline_ms) = inner.submit(self.peer, op, payload, Waiter::Slot(slot.clone()))?;
        Ok(Pending { node: inner.clone(), request_id, deadline_ms, slot: Some(slot) })
    }

    fn copy_in(&self, payload: &[u8]) -> Result<Buffer> {
        let inner = &self.node.inner;
        inner.check_len(payload.len())?;
        let mut buffer = match inner.pool.alloc(payload.len(), None) {
            Err(Error::PoolExhausted { .. }) => inner.pool.alloc(payload.len(), Some(Instant::now() + inner.config.request_timeout))?,
            other => other?,
        };
        buffer.as_mut_slice().copy_from_slice(payload);
        Ok(buffer)
    }
}

impl Pending {
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    pub fn is_done(&self) -> bool {
        self.slot.as_ref().is_some_and(|s| s.done.load(Ordering::SeqCst))
    }

    /// Waits for the response until the request's deadline (`Config::request_timeout`).
    pub fn wait(self) -> Result<Response> {
        let deadline_ms = self.deadline_ms;
        self.wait_until(deadline_ms)
    }

    pub fn wait_timeout(self, timeout: Duration) -> Result<Response> {
        let deadline_ms = (coarse_ms() + timeout.as_millis() as u64).min(self.deadline_ms);
        self.wait_until(deadline_ms)
    }

    fn wait_until(mut self, deadline_ms: u64) -> Result<Response> {
        let slot = self.slot.take().expect("pending without slot");
        let inner = self.node.clone();
        let result = inner.wait_slot(&slot, self.request_id, deadline_ms);
        inner.return_slot(slot);
        result
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Abandoned without waiting: forget the request so its response is dropped on arrival.
        if let Some(slot) = self.slot.take() {
            let request_id = self.request_id;
            let _ = self.node.with_state(|_, state| {
                state.pending.remove(&request_id);
                Ok(())
            });
            if slot.done.load(Ordering::SeqCst) || Arc::strong_count(&slot) == 1 {
                self.node.return_slot(slot);
            }
        }
    }
}

impl Request {
    pub fn op(&self) -> u16 {
        self.op
    }

    /// The connection the request came on: unique within this node and never reused, so a server
    /// can keep per-connection state (authentication) keyed by it.
    pub fn connection_id(&self) -> u64 {
        self.conn_id
    }

    pub fn payload(&self) -> &[u8] {
        self.payload.as_deref().unwrap_or(&[])
    }

    /// The payload as an owned registered buffer (left empty in the request).
    pub fn take_payload(&mut self) -> Option<Buffer> {
        self.payload.take()
    }

    /// A registered buffer from this node's pool, for building a response without a copy.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        self.node.check_len(len)?;
        self.node.pool.alloc(len, self.node.alloc_deadline())
    }

    pub fn respond(mut self, data: &[u8]) {
        match self.node.check_len(data.len()).and_then(|_| self.node.pool.alloc(data.len(), self.node.alloc_deadline())) {
            Ok(mut buffer) => {
                buffer.as_mut_slice().copy_from_slice(data);
                self.finish(wire::STATUS_OK, Payload::Owned(buffer));
            }
            Err(e) => self.finish_error(&e),
        }
    }

    pub fn respond_buffer(mut self, data: Buffer) {
        self.finish(wire::STATUS_OK, Payload::Owned(data));
    }

    /// Fails the request: the requester gets `Error::Remote(message)`.
    pub fn fail(mut self, message: &str) {
        self.finish(wire::STATUS_REMOTE, Payload::Bytes(message.as_bytes().to_vec()));
    }

    /// Forgets the request without answering (the node is closing; the peer sees the connection close).
    fn discard(mut self) {
        self.answered = true;
    }

    fn finish_error(&mut self, error: &Error) {
        let status = match error {
            Error::TooLarge { .. } => wire::STATUS_TOO_LARGE,
            Error::PoolExhausted { .. } => wire::STATUS_POOL_EXHAUSTED,
            Error::Overloaded => wire::STATUS_OVERLOADED,
            _ => wire::STATUS_REMOTE,
        };
        self.finish(status, Payload::Bytes(error.to_string().into_bytes()));
    }

    fn finish(&mut self, status: u16, payload: Payload) {
        debug_assert!(!self.answered);
        self.answered = true;
        self.payload = None;
        let outgoing = Outgoing { conn_id: self.conn_id, request_id: self.request_id, op: self.op, status, payload };
        self.node.post_response(outgoing);
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.answered {
            self.finish(wire::STATUS_REMOTE, Payload::Bytes(b"handler dropped the request".to_vec()));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// NodeInner: the engine.

impl NodeInner {
    /// The worker state. Only valid while this thread holds `lock` (directly or in a UCX callback).
    #[allow(clippy::mut_from_ref)]
    unsafe fn state(&self) -> &mut WorkerState {
        &mut *self.state.get()
    }

    fn in_progress_here(&self) -> bool {
        IN_PROGRESS.with(|p| std::ptr::eq(p.get(), self))
    }

    /// Runs `f` with the worker state, taking the lock unless this thread already holds it.
    fn with_state<T>(&self, f: impl FnOnce(&NodeInner, &mut WorkerState) -> Result<T>) -> Result<T> {
        if self.in_progress_here() {
            return f(self, unsafe { self.state() });
        }
        let guard = self.lock_for_caller();
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mark = InProgressMark::enter(self);
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
            unsafe { u::ucp_worker_signal(self.worker) };
        }
    }

    fn take_slot(&self) -> Arc<Slot> {
        self.free_slots.lock().unwrap().pop().unwrap_or_else(|| Arc::new(Slot::new()))
    }

    fn return_slot(&self, slot: Arc<Slot>) {
        if Arc::strong_count(&slot) == 1 {
            slot.reset();
            let mut free = self.free_slots.lock().unwrap();
            if free.len() < self.config.max_requests_in_flight {
                free.push(slot);
            }
        }
    }

    // --- connections -------------------------------------------------------------------------

    /// The live connection to `peer`, created if absent or failed.
    fn connection_to(&self, state: &mut WorkerState, peer: SocketAddr) -> Result<u64> {
        if let Some(&conn_id) = state.by_peer.get(&peer) {
            match state.conns.get(&conn_id) {
                Some(conn) if !conn.failed => return Ok(conn_id),
                _ => {
                    state.by_peer.remove(&peer);
                }
            }
        }
        let (storage, len) = ucx::sockaddr(&peer);
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
            params.err_handler.arg = self as *const NodeInner as *mut c_void;
            let mut ep: u::ucp_ep_h = ptr::null_mut();
            check("ucp_ep_create", u::ucp_ep_create(self.worker, &params, &mut ep))?;
            ep
        };
        let conn_id = self.add_conn(state, ep, Some(peer), peer.to_string());
        state.by_peer.insert(peer, conn_id);
        log_debug!("connecting to {peer} (connection {conn_id})");
        Ok(conn_id)
    }

    fn add_conn(&self, state: &mut WorkerState, ep: u::ucp_ep_h, outgoing_peer: Option<SocketAddr>, peer_name: String) -> u64 {
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
        let conn_id = state.next_conn_id;
        state.next_conn_id += 1;
        state.conns.insert(
            conn_id,
            Conn {
                ep,
                outgoing_peer,
                peer_name,
                failed: false,
                last_used_ms: coarse_ms(),
                requests_in_flight: 0,
                ready: false,
                wireup_flushing: false,
                close_after_wireup: None,
                backlog: VecDeque::new(),
                send_flags,
            },
        );
        state.by_ep.insert(ep as usize, conn_id);
        self.counters.connections_open.fetch_add(1, Ordering::Relaxed);
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
    fn on_conn_ready(&self, state: &mut WorkerState, conn_id: u64, result: Result<()>) {
        if let Err(e) = result {
            self.fail_conn(state, conn_id, &e.to_string());
            return;
        }
        let Some(conn) = state.conns.get_mut(&conn_id) else { return };
        conn.ready = true;
        if crate::log::debug_enabled() {
            // Which transports UCX chose for each protocol of this connection.
            unsafe {
                let stream = libc::fdopen(libc::dup(2), c"w".as_ptr());
                if !stream.is_null() {
                    u::ucp_ep_print_info(conn.ep, stream as *mut u::FILE);
                    libc::fclose(stream);
                }
            }
        }
        let backlog = std::mem::take(&mut conn.backlog);
        for (header, payload, request_id) in backlog {
            self.send_message(state, conn_id, header, payload, request_id);
        }
    }

    /// Marks a connection failed, fails its requests in flight and schedules its endpoint's close.
    fn fail_conn(&self, state: &mut WorkerState, conn_id: u64, reason: &str) {
        let Some(conn) = state.conns.get_mut(&conn_id) else { return };
        if conn.failed {
            return;
        }
        conn.failed = true;
        let peer = conn.peer_name.clone();
        if let Some(addr) = conn.outgoing_peer {
            if state.by_peer.get(&addr) == Some(&conn_id) {
                state.by_peer.remove(&addr);
            }
        }
        let failed: Vec<u64> = state.pending.iter().filter(|(_, e)| e.conn_id == conn_id).map(|(&id, _)| id).collect();
        for request_id in failed {
            self.complete_pending(state, request_id, Err(Error::PeerFailed { peer: peer.clone(), reason: reason.to_string() }));
        }
        state.partials.retain(|key, _| key.0 != conn_id);
        state.to_close.push((conn_id, true));
    }

    /// Starts closing an endpoint; `force` drops what is queued on it (for failed peers).
    fn close_conn(&self, state: &mut WorkerState, conn_id: u64, force: bool) {
        if let Some(conn) = state.conns.get_mut(&conn_id).filter(|conn| conn.wireup_flushing) {
            conn.close_after_wireup = Some(conn.close_after_wireup.unwrap_or(false) || force);
            return;
        }
        let Some(conn) = state.conns.remove(&conn_id) else { return };
        state.by_ep.remove(&(conn.ep as usize));
        if let Some(addr) = conn.outgoing_peer {
            if state.by_peer.get(&addr) == Some(&conn_id) {
                state.by_peer.remove(&addr);
            }
        }
        self.counters.connections_open.fetch_sub(1, Ordering::Relaxed);
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

    // --- requests ----------------------------------------------------------------------------

    /// Registers a request and posts its sends. Waits (bounded) while too many are in flight.
    fn submit(&self, peer: SocketAddr, op: u16, payload: Payload, waiter: Waiter) -> Result<(u64, u64)> {
        self.check_len(payload.bytes().0.len())?;
        let deadline_ms = coarse_ms() + self.config.request_timeout.as_millis() as u64;
        let mut payload = Some(payload);
        let mut waiter = Some(waiter);
        loop {
            let submitted = self.with_state(|inner, state| {
                if state.pending.len() >= inner.config.max_requests_in_flight {
                    return Ok(None);
                }
                let conn_id = inner.connection_to(state, peer)?;
                let request_id = state.next_request_id;
                state.next_request_id += 1;
                let conn = state.conns.get_mut(&conn_id).expect("connection just looked up");
                conn.last_used_ms = coarse_ms();
                conn.requests_in_flight += 1;
                state.pending.insert(request_id, PendingEntry { conn_id, deadline_ms, waiter: waiter.take().unwrap() });
                let header = Header {
                    kind: Kind::Request,
                    op,
                    status: wire::STATUS_OK,
                    chunk_index: 0,
                    chunk_count: 1,
                    request_id,
                    total_len: 0,
                    offset: 0,
                };
                inner.counters.requests_sent.fetch_add(1, Ordering::Relaxed);
                inner.send_message(state, conn_id, header, payload.take().unwrap(), Some(request_id));
                Ok(Some(request_id))
            })?;
            if let Some(request_id) = submitted {
                self.wake();
                return Ok((request_id, deadline_ms));
            }
            // Too many in flight: let responses come in, bounded by the deadline.
            if coarse_ms() >= deadline_ms {
                return Err(Error::Timeout { after_ms: self.config.request_timeout.as_millis() as u64 });
            }
            self.help_progress_or_sleep();
        }
    }

    fn help_progress_or_sleep(&self) {
        if let Ok(guard) = self.lock.try_lock() {
            self.progress_once(&guard, true);
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Completes a request in flight (if still there) with `result`.
    fn complete_pending(&self, state: &mut WorkerState, request_id: u64, result: Result<Response>) {
        let Some(entry) = state.pending.remove(&request_id) else { return };
        if let Some(conn) = state.conns.get_mut(&entry.conn_id) {
            conn.requests_in_flight = conn.requests_in_flight.saturating_sub(1);
            conn.last_used_ms = coarse_ms();
        }
        if result.is_ok() {
            self.counters.responses_received.fetch_add(1, Ordering::Relaxed);
        }
        match entry.waiter {
            Waiter::Slot(slot) => slot.complete(result),
            Waiter::Callback(done) => done(result),
        }
    }

    /// Spins as a helper: drives progress on this thread (whenever the worker is free) until
    /// `done(events of the last round)` holds, `spin` has passed or the node closes. The progress
    /// thread stays out of the way meanwhile; a helper that leaves without `done` wakes it, since
    /// the caller will now depend on it. The clock is read every 64 rounds only: on a VM,
    /// clock_gettime was a quarter of the spinning time. Returns whether `done` was reached.
    fn spin_as_helper(&self, spin: Duration, mut done: impl FnMut(usize) -> bool) -> bool {
        self.helpers.fetch_add(1, Ordering::SeqCst);
        self.helper_sessions.fetch_add(1, Ordering::Relaxed);
        let mut spin_until: Option<Instant> = None;
        let mut rounds = 0u32;
        let mut events = 0;
        let reached = loop {
            if done(events) {
                break true;
            }
            if self.closed.load(Ordering::SeqCst) {
                break false;
            }
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(64) {
                let now = Instant::now();
                if now >= *spin_until.get_or_insert(now + spin) {
                    break false;
                }
            }
            events = match self.lock.try_lock() {
                Ok(guard) => self.progress_once(&guard, true),
                Err(_) => {
                    std::hint::spin_loop();
                    0
                }
            };
        };
        self.leave_helpers(!reached);
        reached
    }

    fn wait_slot(&self, slot: &Slot, request_id: u64, deadline_ms: u64) -> Result<Response> {
        // Spin first, driving progress ourselves: no thread hand-off on the response path. But
        // only while fewer waiters spin than there are spare cores: more spinners than cores
        // starve the threads that would answer them (measured on 2 cores with 4 waiting threads:
        // 2k requests/s instead of 100k+). The others park; whoever progresses completes them.
        if self.helpers.load(Ordering::SeqCst) < *SPINNING_WAITERS_MAX {
            let spin = WAITER_SPIN.min(Duration::from_millis(deadline_ms.saturating_sub(coarse_ms())));
            self.spin_as_helper(spin, |_| slot.done.load(Ordering::SeqCst));
        }
        // Then park; the progress thread (woken by the event fd) completes the slot and unparks us.
        if !slot.done.load(Ordering::SeqCst) {
            *slot.waiter.lock().unwrap() = Some(std::thread::current());
            slot.parked.store(true, Ordering::SeqCst);
            self.parked_waiters.fetch_add(1, Ordering::SeqCst);
            if self.helpers.load(Ordering::SeqCst) == 0 {
                self.wake_progress_from_helpers();
            }
            while !slot.done.load(Ordering::SeqCst) {
                let now_ms = coarse_ms();
                if now_ms >= deadline_ms {
                    break;
                }
                std::thread::park_timeout(Duration::from_millis((deadline_ms - now_ms).min(100)));
            }
            self.parked_waiters.fetch_sub(1, Ordering::SeqCst);
        }
        if !slot.done.load(Ordering::SeqCst) {
            // Past the deadline: withdraw the request, unless it completed meanwhile.
            let _ = self.with_state(|inner, state| {
                if state.pending.remove(&request_id).is_some() {
                    inner.counters.requests_timed_out.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
            if !slot.done.load(Ordering::SeqCst) {
                return Err(Error::Timeout { after_ms: self.config.request_timeout.as_millis() as u64 });
            }
        }
        slot.result.lock().unwrap().take().unwrap_or(Err(Error::Closed))
    }

    // --- sending -----------------------------------------------------------------------------

    /// Posts a whole message (request or response) as one or more chunks. Errors fail the request
    /// (for requests) or are logged (for responses); a failed send also fails the connection.
    fn send_message(&self, state: &mut WorkerState, conn_id: u64, mut header: Header, payload: Payload, request_id: Option<u64>) {
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
        let total_len = payload.bytes().0.len();
        let (chunk_count, chunk_size) = wire::chunking(total_len, self.config.chunk_size_bytes);
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
        for index in 0..chunk_count {
            let offset = index as usize * chunk_size;
            let len = chunk_size.min(total_len - offset);
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
    fn post_send(
        &self,
        state: &mut WorkerState,
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
        let data = unsafe { bytes.as_ptr().add(offset) };
        let ctx_ptr = Box::into_raw(ctx);
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
            self.recycle_send_ctx(state, unsafe { Box::from_raw(ctx_ptr) });
            Ok(())
        } else if u::ucs_ptr_is_err(status_ptr) {
            self.recycle_send_ctx(state, unsafe { Box::from_raw(ctx_ptr) });
            Err(ucx_error("ucp_am_send_nbx", u::ucs_ptr_status(status_ptr)))
        } else {
            state.ucx_ops_in_flight += 1; // send_callback completes it
            Ok(())
        }
    }

    fn recycle_send_ctx(&self, state: &mut WorkerState, mut ctx: Box<SendCtx>) {
        ctx.payload = Payload::None; // returns the buffer to the pool
        if state.send_ctx_free.len() < 1024 {
            state.send_ctx_free.push(ctx);
        }
    }

    fn post_response(&self, outgoing: Outgoing) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        self.counters.requests_served.fetch_add(1, Ordering::Relaxed);
        if self.in_progress_here() {
            unsafe { self.state() }.outbox.push_back(outgoing);
            return;
        }
        // The respond stage's fast path: with the worker free, post the response from this
        // thread; only under contention does it go through the respond queue.
        if let Ok(guard) = self.lock.try_lock() {
            let mark = InProgressMark::enter(self);
            self.send_outgoing(unsafe { self.state() }, outgoing);
            drop(mark);
            drop(guard);
            self.wake();
            return;
        }
        let deadline = Instant::now() + self.config.request_timeout;
        if self.respond.push_until(outgoing, deadline).is_err() {
            log_warn!("respond queue full for {} ms: response dropped", self.config.request_timeout.as_millis());
        }
        self.wake();
    }

    fn send_outgoing(&self, state: &mut WorkerState, outgoing: Outgoing) {
        let kind = if outgoing.status == wire::STATUS_OK { Kind::Response } else { Kind::ErrorResponse };
        let header = Header {
            kind,
            op: outgoing.op,
            status: outgoing.status,
            chunk_index: 0,
            chunk_count: 1,
            request_id: outgoing.request_id,
            total_len: 0,
            offset: 0,
        };
        self.send_message(state, outgoing.conn_id, header, outgoing.payload, None);
    }

    // --- receiving ---------------------------------------------------------------------------

    /// The receive stage for one active message. Returns UCS_OK (data consumed) in every case but a
    /// rendezvous receive that was started (UCS_INPROGRESS is not needed: `ucp_am_recv_data_nbx`
    /// takes the descriptor).
    unsafe fn on_active_message(&self, header: &[u8], data: *mut c_void, length: usize, param: &u::ucp_am_recv_param_t) {
        let state = self.state();
        let reply_ep = if param.recv_attr & u::UCP_AM_RECV_ATTR_FIELD_REPLY_EP as u64 != 0 { param.reply_ep } else { ptr::null_mut() };
        let Some(&conn_id) = state.by_ep.get(&(reply_ep as usize)) else {
            log_debug!("message from an unknown endpoint dropped");
            return;
        };
        let header = match Header::decode(header, length, self.config.max_message_bytes) {
            Ok(h) => h,
            Err(e) => {
                self.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
                let peer = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
                log_warn!("closing connection from {peer}: {e}");
                self.fail_conn(state, conn_id, &e.to_string());
                return;
            }
        };
        if header.kind != Kind::Request {
            match state.pending.get(&header.request_id) {
                Some(entry) if entry.conn_id == conn_id => {}
                _ => return, // abandoned or timed out: drop
            }
        }
        let rndv = param.recv_attr & u::UCP_AM_RECV_ATTR_FLAG_RNDV as u64 != 0;
        if header.chunk_count == 1 && !rndv {
            // The common small-message path: one copy into a pooled buffer.
            match self.pool.alloc(length, None) {
                Ok(mut buffer) => {
                    ptr::copy_nonoverlapping(data as *const u8, buffer.as_mut_ptr(), length);
                    self.on_message(state, conn_id, &header, Ok(buffer));
                }
                Err(e) => self.on_message(state, conn_id, &header, Err(e)),
            }
            return;
        }
        let key: PartialKey = (conn_id, header.request_id, header.kind as u8);
        if !state.partials.contains_key(&key) {
            let buffer = self.pool.alloc(header.total_len as usize, None).ok();
            if buffer.is_none() {
                log_debug!("no buffer for a {}-byte message: its chunks will be dropped", header.total_len);
            }
            let words = (header.chunk_count as usize).div_ceil(64);
            state.partials.insert(
                key,
                Partial { buffer, op: header.op, status: header.status, chunk_count: header.chunk_count, chunks_done: 0, bytes_done: 0, seen: vec![0; words] },
            );
        }
        let partial = state.partials.get_mut(&key).unwrap();
        let (word, bit) = (header.chunk_index as usize / 64, 1u64 << (header.chunk_index % 64));
        if partial.chunk_count != header.chunk_count || partial.op != header.op || partial.seen[word] & bit != 0
            || partial.buffer.as_ref().is_some_and(|b| b.len() as u64 != header.total_len)
        {
            self.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
            log_warn!("closing connection {conn_id}: inconsistent or duplicate chunk {} of message {}", header.chunk_index, header.request_id);
            self.fail_conn(state, conn_id, "inconsistent chunk");
            return;
        }
        partial.seen[word] |= bit;
        let Some(buffer) = partial.buffer.as_mut() else {
            // Nowhere to put it: count it, drop it (for rendezvous, returning OK drops the descriptor).
            self.on_chunk_done(state, key, length, Ok(()));
            return;
        };
        let destination = buffer.as_mut_ptr().add(header.offset as usize);
        if !rndv {
            ptr::copy_nonoverlapping(data as *const u8, destination, length);
            self.on_chunk_done(state, key, length, Ok(()));
            return;
        }
        // Zero-copy: UCX moves the chunk straight into the registered buffer.
        let memh = buffer.memh();
        let ctx = Box::into_raw(Box::new(RecvCtx { node: self, key, len: length }));
        let mut rparam: u::ucp_request_param_t = std::mem::zeroed();
        rparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_CALLBACK | u::UCP_OP_ATTR_FIELD_USER_DATA | u::UCP_OP_ATTR_FIELD_MEMH;
        rparam.cb.recv_am = Some(recv_data_callback);
        rparam.user_data = ctx as *mut c_void;
        rparam.memh = memh;
        let status_ptr = u::ucp_am_recv_data_nbx(self.worker, data, destination as *mut c_void, length, &rparam);
        if status_ptr.is_null() {
            drop(Box::from_raw(ctx));
            self.on_chunk_done(state, key, length, Ok(()));
        } else if u::ucs_ptr_is_err(status_ptr) {
            drop(Box::from_raw(ctx));
            self.on_chunk_done(state, key, length, Err(ucx_error("ucp_am_recv_data_nbx", u::ucs_ptr_status(status_ptr))));
        } else {
            state.ucx_ops_in_flight += 1;
        }
    }

    fn on_chunk_done(&self, state: &mut WorkerState, key: PartialKey, len: usize, result: Result<()>) {
        let Some(partial) = state.partials.get_mut(&key) else { return };
        if let Err(e) = result {
            log_warn!("receiving a chunk of message {} failed: {e}", key.1);
            partial.buffer = None;
        }
        partial.chunks_done += 1;
        partial.bytes_done += len as u64;
        if partial.chunks_done < partial.chunk_count {
            return;
        }
        let partial = state.partials.remove(&key).unwrap();
        let kind = match key.2 {
            1 => Kind::Request,
            2 => Kind::Response,
            _ => Kind::ErrorResponse,
        };
        let header = Header {
            kind,
            op: partial.op,
            status: partial.status,
            chunk_index: 0,
            chunk_count: partial.chunk_count,
            request_id: key.1,
            total_len: partial.bytes_done,
            offset: 0,
        };
        let payload = match partial.buffer {
            Some(buffer) if buffer.len() as u64 == partial.bytes_done => Ok(buffer),
            Some(_) => Err(Error::Protocol("chunks do not add up to the message length".into())),
            None => Err(Error::PoolExhausted { requested: partial.bytes_done as usize, cap: self.pool.cap_bytes() }),
        };
        self.on_message(state, key.0, &header, payload);
    }

    /// A whole message has arrived (or could not be stored).
    fn on_message(&self, state: &mut WorkerState, conn_id: u64, header: &Header, payload: Result<Buffer>) {
        match header.kind {
            Kind::Request => {
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
                        });
                        return;
                    }
                };
                let node = unsafe {
                    Arc::increment_strong_count(self as *const NodeInner);
                    Arc::from_raw(self as *const NodeInner)
                };
                let request = Request { node, conn_id, request_id: header.request_id, op: header.op, payload: Some(payload), answered: false };
                self.dispatch_request(state, request);
            }
            Kind::Response => self.complete_pending(state, header.request_id, payload.map(|buffer| Response { buffer })),
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

    fn dispatch_request(&self, state: &mut WorkerState, request: Request) {
        if self.handler.is_none() && self.config.handler_mode != HandlerMode::Pull {
            request.fail("this node serves no requests");
            return;
        }
        match self.config.handler_mode {
            HandlerMode::Inline => {
                let handler = self.handler.clone().expect("Inline mode has a handler");
                handler.handle(request);
            }
            HandlerMode::Staged { .. } | HandlerMode::Pull => {
                let request = if state.overflow.is_empty() {
                    match self.dispatch.try_push(request) {
                        Ok(()) => return,
                        Err(request) => request,
                    }
                } else {
                    request
                };
                if state.overflow.len() < self.dispatch.capacity() {
                    state.overflow.push_back(request);
                } else {
                    self.counters.requests_shed.fetch_add(1, Ordering::Relaxed);
                    let mut request = request;
                    request.finish_error(&Error::Overloaded);
                }
            }
        }
    }

    // --- progress ----------------------------------------------------------------------------

    /// One round of the engine: UCX progress (if `receive`), then the respond stage, deferred work
    /// and timers. Returns how much happened (0 = idle). The caller holds the lock.
    fn progress_once(&self, _guard: &MutexGuard<'_, ()>, receive: bool) -> usize {
        let _mark = InProgressMark::enter(self);
        let mut events = 0usize;
        if receive {
            events += unsafe { u::ucp_worker_progress(self.worker) } as usize;
        }
        let state = unsafe { self.state() };
        while let Some(outgoing) = state.outbox.pop_front() {
            self.send_outgoing(state, outgoing);
            events += 1;
        }
        while let Some(outgoing) = self.respond.try_pop() {
            self.send_outgoing(state, outgoing);
            events += 1;
        }
        while let Some(request) = state.overflow.pop_front() {
            if let Err(request) = self.dispatch.try_push(request) {
                state.overflow.push_front(request);
                break;
            }
            events += 1;
        }
        for (conn_id, force) in std::mem::take(&mut state.to_close) {
            self.close_conn(state, conn_id, force);
            events += 1;
        }
        reap_closed_endpoints(state);
        // Operations in flight need progress even when nothing happened this round.
        let busy = state.ucx_ops_in_flight > 0 || !state.overflow.is_empty();
        state.progress_calls = state.progress_calls.wrapping_add(1);
        if events == 0 && !state.progress_calls.is_multiple_of(64) {
            return busy as usize;
        }
        let now = Instant::now();
        if now.duration_since(state.last_timeout_scan) >= TIMEOUT_SCAN_PERIOD {
            state.last_timeout_scan = now;
            self.expire_requests(state);
        }
        if now.duration_since(state.last_idle_scan) >= IDLE_SCAN_PERIOD {
            state.last_idle_scan = now;
            self.close_idle_connections(state, coarse_ms());
        }
        if busy { events.max(1) } else { events }
    }

    fn expire_requests(&self, state: &mut WorkerState) {
        let now_ms = coarse_ms();
        let expired: Vec<u64> = state.pending.iter().filter(|(_, e)| e.deadline_ms <= now_ms).map(|(&id, _)| id).collect();
        for request_id in expired {
            self.counters.requests_timed_out.fetch_add(1, Ordering::Relaxed);
            let after_ms = self.config.request_timeout.as_millis() as u64;
            self.complete_pending(state, request_id, Err(Error::Timeout { after_ms }));
        }
    }

    fn close_idle_connections(&self, state: &mut WorkerState, now_ms: u64) {
        let idle: Vec<u64> = state
            .conns
            .iter()
            .filter(|(_, c)| {
                c.outgoing_peer.is_some()
                    && !c.failed
                    && c.requests_in_flight == 0
                    && now_ms.saturating_sub(c.last_used_ms) >= self.config.idle_timeout.as_millis() as u64
            })
            .map(|(&id, _)| id)
            .collect();
        for conn_id in idle {
            log_debug!("closing idle connection {conn_id}");
            self.close_conn(state, conn_id, false);
        }
    }

    /// A helper stops driving progress; `wake_progress` when it will now depend on the progress
    /// thread (it parks), so that thread stops waiting for helpers at once.
    fn leave_helpers(&self, gave_up: bool) {
        // The progress thread must take over when the last helper leaves with work outstanding:
        // its own request unanswered, or other callers parked on theirs.
        let wake_progress = gave_up || self.parked_waiters.load(Ordering::SeqCst) > 0;
        if self.helpers.fetch_sub(1, Ordering::SeqCst) == 1 && wake_progress {
            self.wake_progress_from_helpers();
        }
    }

    /// Ends the progress thread's wait for helpers (a caller parks and nobody else progresses).
    fn wake_progress_from_helpers(&self) {
        if self.progress_waiting_for_helpers.load(Ordering::SeqCst) {
            let _guard = self.helpers_gone.0.lock().unwrap();
            self.helpers_gone.1.notify_one();
        }
    }

    /// While callers drive progress themselves, the progress thread waits for them to leave
    /// (bounded, so timers still run).
    fn wait_while_helpers(&self) {
        let guard = self.helpers_gone.0.lock().unwrap();
        self.progress_waiting_for_helpers.store(true, Ordering::SeqCst);
        if !self.closed.load(Ordering::SeqCst) {
            let _ = self.helpers_gone.1.wait_timeout(guard, Duration::from_millis(1)).unwrap();
        }
        self.progress_waiting_for_helpers.store(false, Ordering::SeqCst);
    }

    fn progress_loop(self: Arc<Self>) {
        let spin = Duration::from_micros(self.config.spin_us);
        let mut last_event = Instant::now();
        let mut idle_rounds = 0u32;
        let mut helper_sessions_seen = 0u64;
        while !self.closed.load(Ordering::SeqCst) {
            // Backpressure: with the dispatch queue full, stop taking messages off the wire.
            let receive = !self.dispatch.is_full();
            let events = {
                let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.progress_once(&guard, receive)
            };
            // Callers spinning on their own responses drive progress: stay out of their way, also
            // in the moments between their requests.
            let sessions = self.helper_sessions.load(Ordering::Relaxed);
            if self.helpers.load(Ordering::SeqCst) > 0 || sessions != helper_sessions_seen {
                helper_sessions_seen = sessions;
                self.wait_while_helpers();
                continue;
            }
            if events > 0 {
                idle_rounds = 0;
                continue;
            }
            if self.lock_waiters.load(Ordering::SeqCst) > 0 {
                std::thread::yield_now();
                continue;
            }
            if !receive {
                self.dispatch.wait_not_full(Duration::from_millis(1));
                continue;
            }
            // The spin's clock starts at the first idle round after activity.
            idle_rounds = idle_rounds.wrapping_add(1);
            if idle_rounds == 1 {
                last_event = Instant::now();
            }
            if !idle_rounds.is_multiple_of(32) || last_event.elapsed() < spin {
                std::hint::spin_loop();
                continue;
            }
            self.sleep_on_event_fd();
            last_event = Instant::now() - spin; // after a sleep, go back to sleep quickly if idle
        }
    }

    /// Arms the worker and sleeps on its event fd until traffic arrives, `wake` is called, or the
    /// timer period passes.
    fn sleep_on_event_fd(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        let armed = {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            let state = unsafe { self.state() };
            if !state.outbox.is_empty() || !state.overflow.is_empty() || !state.to_close.is_empty() || self.respond.len() > 0 {
                false
            } else {
                unsafe { u::ucp_worker_arm(self.worker) == u::UCS_OK }
            }
        };
        if armed && !self.closed.load(Ordering::SeqCst) {
            let mut pollfd = libc::pollfd { fd: self.efd, events: libc::POLLIN, revents: 0 };
            unsafe { libc::poll(&mut pollfd, 1, SLEEP_MAX_MS) };
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }

    fn handler_loop(self: Arc<Self>) {
        let handler = self.handler.clone().expect("Staged mode has a handler");
        while !self.closed.load(Ordering::SeqCst) {
            if let Some(request) = self.next_request(Duration::from_millis(100)) {
                handler.handle(request);
            }
        }
    }

    fn help_progress(&self, spin: Duration) -> usize {
        if self.closed.load(Ordering::SeqCst) || self.in_progress_here() {
            return 0;
        }
        let mut happened = 0;
        self.spin_as_helper(spin, |events| {
            happened = events;
            events > 0
        });
        happened
    }

    /// The handle stage's intake. One handler thread at a time spins briefly, driving progress
    /// itself, so that a request arriving now is received and handled on one thread with no
    /// hand-off; the others (and the spinner, after WAITER_SPIN) block on the dispatch queue.
    fn next_request(&self, timeout: Duration) -> Option<Request> {
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(request) = self.dispatch.try_pop() {
            return Some(request);
        }
        if !self.in_progress_here() && !self.puller_spinning.swap(true, Ordering::SeqCst) {
            let mut found = None;
            self.spin_as_helper(WAITER_SPIN.min(timeout), |_| {
                found = self.dispatch.try_pop();
                found.is_some()
            });
            self.puller_spinning.store(false, Ordering::SeqCst);
            if found.is_some() {
                return found;
            }
        }
        self.dispatch.pop_timeout(timeout)
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.dispatch.close();
        self.respond.close();
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
        let state = unsafe { self.state() };
        for request in state.overflow.drain(..) {
            request.discard();
        }
        state.outbox.clear();
        let ids: Vec<u64> = state.pending.keys().copied().collect();
        for request_id in ids {
            self.complete_pending(state, request_id, Err(Error::Closed));
        }
        // Healthy connections close gracefully, so peers see a clean disconnect rather than a
        // timeout; failed ones are forced. Either way the wait below is bounded.
        let conn_ids: Vec<(u64, bool)> = state.conns.iter().map(|(&id, c)| (id, c.failed)).collect();
        for (conn_id, failed) in conn_ids {
            self.close_conn(state, conn_id, failed);
        }
        let grace_end = Instant::now() + CLOSE_GRACE;
        let waiting = |state: &WorkerState| {
            !state.closing.is_empty() || !state.to_close.is_empty() || state.conns.values().any(|c| c.wireup_flushing)
        };
        while waiting(state) && Instant::now() < grace_end {
            unsafe { u::ucp_worker_progress(self.worker) };
            for (conn_id, force) in std::mem::take(&mut state.to_close) {
                self.close_conn(state, conn_id, force);
            }
            reap_closed_endpoints(state);
        }
        state.partials.clear();
        unsafe {
            if !state.listener.is_null() {
                u::ucp_listener_destroy(state.listener);
                state.listener = ptr::null_mut();
            }
            u::ucp_worker_destroy(self.worker);
        }
        state.send_ctx_free.clear();
        drop(mark);
        drop(guard);
    }
}

/// Frees the endpoint-close requests UCX has finished.
fn reap_closed_endpoints(state: &mut WorkerState) {
    state.closing.retain(|&request| unsafe {
        if u::ucp_request_check_status(request) == u::UCS_INPROGRESS {
            true
        } else {
            u::ucp_request_free(request);
            false
        }
    });
}

// ---------------------------------------------------------------------------------------------
// UCX callbacks. Each runs under the node's lock, inside progress or a send/close call.

unsafe extern "C" fn am_recv_callback(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const u::ucp_am_recv_param_t,
) -> u::ucs_status_t {
    let node = &*(arg as *const NodeInner);
    let header = if header_length == 0 { &[][..] } else { std::slice::from_raw_parts(header as *const u8, header_length) };
    node.on_active_message(header, data, length, &*param);
    u::UCS_OK
}

unsafe extern "C" fn send_callback(request: *mut c_void, status: u::ucs_status_t, user_data: *mut c_void) {
    let ctx = Box::from_raw(user_data as *mut SendCtx);
    let node = &*ctx.node;
    let state = node.state();
    state.ucx_ops_in_flight -= 1;
    if status != u::UCS_OK {
        if let Some(request_id) = ctx.request_id {
            let peer = state.pending.get(&request_id).and_then(|e| state.conns.get(&e.conn_id)).map(|c| c.peer_name.clone()).unwrap_or_default();
            node.complete_pending(state, request_id, Err(Error::PeerFailed { peer, reason: u::status_string(status) }));
        }
    }
    node.recycle_send_ctx(state, ctx);
    u::ucp_request_free(request);
}

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

unsafe extern "C" fn recv_data_callback(request: *mut c_void, status: u::ucs_status_t, _length: usize, user_data: *mut c_void) {
    let ctx = Box::from_raw(user_data as *mut RecvCtx);
    let node = &*ctx.node;
    let state = node.state();
    state.ucx_ops_in_flight -= 1;
    let result = if status == u::UCS_OK { Ok(()) } else { Err(ucx_error("ucp_am_recv_data_nbx", status)) };
    node.on_chunk_done(state, ctx.key, ctx.len, result);
    u::ucp_request_free(request);
}

unsafe extern "C" fn conn_request_callback(conn_request: u::ucp_conn_request_h, arg: *mut c_void) {
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
    params.err_handler.arg = arg;
    let mut ep: u::ucp_ep_h = ptr::null_mut();
    let status = u::ucp_ep_create(node.worker, &params, &mut ep);
    if status != u::UCS_OK {
        log_warn!("accepting a connection from {peer_name} failed: {}", u::status_string(status));
        return;
    }
    let conn_id = node.add_conn(state, ep, None, peer_name.clone());
    log_debug!("accepted connection {conn_id} from {peer_name}");
}

unsafe extern "C" fn ep_error_callback(arg: *mut c_void, ep: u::ucp_ep_h, status: u::ucs_status_t) {
    let node = &*(arg as *const NodeInner);
    let state = node.state();
    let Some(&conn_id) = state.by_ep.get(&(ep as usize)) else { return };
    let reason = u::status_string(status);
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
