//! The node: one UCX worker and everything that touches it, one responsibility per file.
//!
//! - `mod.rs` (here): the node's state, its lock, start and close, and the public `Node`.
//! - `connections.rs`: the connection cache (one endpoint per peer, wire-up backlog, idle close,
//!   failure) and the listener's accept callback.
//! - `pending.rs`: requests in flight (the bounded pending table), completion slots, waiting.
//! - `send.rs`: posting requests and responses as chunks of active messages; the respond path;
//!   over TCP, corking small requests and answers into bundles.
//! - `receive.rs`: the active-message callback: decoding, routing, messages made whole.
//! - `reassembly.rs`: chunks of large messages put back together (the bitmap of chunks seen).
//! - `stages.rs`: the SEDA stages after receive: dispatch queue, handler threads, `Request`.
//! - `runtime.rs`: the UCX context, worker and progress thread shared by the nodes of a process,
//!   and the map from endpoints to their nodes.
//! - `progress.rs`: who drives the worker: the progress thread (spin, then sleep on the event
//!   fd), callers helping while they wait, timers.
//! - `adaptive_spin.rs`: over TCP, whether a waiting thread spins before it sleeps, as long as
//!   spinning pays (each thread's record of its last spins).
//! - `stats.rs`: the node's counters and their `Stats` snapshot.
//! - `same_host.rs`: the same-host bulk path (large messages pulled with CMA, guarded by hello,
//!   nonce and slot tokens).
//! - `id_map.rs`: the cheap hash of the integer-keyed tables on the hot path.
//!
//! Locking: every UCX call on the worker, and every access to a node's `NodeState`, happens under
//! the lock of the node's runtime (`runtime.rs`: the worker shared by the nodes of a process). UCX
//! callbacks run inside `ucp_worker_progress` (or a send/close call), so they too run under the
//! lock; they reach a node's state through `NodeInner::state()`. A thread that holds the lock marks
//! itself (`runtime::InProgressMark`), so code reached from under the lock (an Inline handler
//! sending a request, a completion callback sending a new one, on this node or another of the
//! runtime) uses the state directly instead of taking the lock again.
//!
//! Borrows: `state()` hands out `&mut NodeState`, so two of one node must never be live at once
//! on the lock's thread. One `ucp_worker_progress` on the shared worker runs callbacks of every
//! node of the runtime, each borrowing the state of the node it names for the length of the
//! callback; so nobody holds a borrow of a node's state across a progress call (`close` borrows
//! anew after each). The receive path holds its node's borrow while UCX calls it, so user code
//! never runs inside it: Inline handlers are queued (`inline_ready`) and run by the progress
//! round after `ucp_worker_progress` returns, with no borrow of any node's state live
//! (`run_inline_handlers`; a handler may call its own node or another), and responses posted under
//! the lock go to `responses_under_lock`, outside the state. `state_reentries` counts violations
//! from the receive path (tests keep it at 0). Completion callbacks of `request_with` are queued
//! likewise (`callbacks_ready`) and run after the borrow ends (`run_ready_callbacks`: in the
//! progress round, at the end of `with_state`, in `close`), so they may call their own node.
//! Known remaining nesting: a forced `ucp_ep_close_nbx` may complete a connection's sends (their
//! callbacks) inside `close_conn`. Starting a node, closing one, or renewing the worker takes the
//! runtime's lock, which the thread driving progress holds: from there `start` and `renew_worker`
//! fail with an error and `close` hands itself to a thread of its own.
//!
//! Stages: receive (progress thread, UCX callbacks, reassembly) -> dispatch queue (bounded) ->
//! handle (handler threads, or the owner's threads in Pull mode) -> respond queue (bounded) ->
//! respond (progress thread posts the sends). When the dispatch queue is full the progress thread
//! stops receiving, so the transport's own flow control pushes back on senders.
mod adaptive_spin;
mod connections;
mod id_map;
mod pending;
mod progress;
pub(crate) mod reassembly; // the `fuzzing` feature exposes it (lib.rs)
mod receive;
mod runtime;
mod same_host;
mod send;
mod stages;
mod stats;
mod wedge;

use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use std::ptr;

use ucx_sys as u;

use crate::config::{Config, HandlerMode};
use crate::error::{check, Error, Result};
use crate::log::log_warn;
use crate::pool::{Buffer, Pool};
use crate::queue::BoundedQueue;
use crate::ucx;

use connections::{Conn, reap_closed_endpoints};
use id_map::IdMap;
use pending::{PendingTable, Slot};
use reassembly::Reassembly;
use runtime::{InProgressMark, Runtime};
use send::{Outgoing, SendCtx};
use stats::{count_under_lock, Counters};

pub use pending::{Endpoint, Pending, Response};
pub use stages::{Handler, Request};
pub use stats::Stats;

/// A `request_with` completion callback with its result.
type ReadyCallback = (Box<dyn FnOnce(Result<Response>) + Send>, Result<Response>);

/// How long `close` waits for endpoints to finish closing.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Everything of the node that only the holder of its runtime's lock may touch.
struct NodeState {
    listener: u::ucp_listener_h,
    conns: IdMap<u64, Conn>,
    /// Keyed by addresses this node's own callers connect to (not network input): the cheap hash
    /// of `IdMap`, looked up by every request.
    by_peer: IdMap<SocketAddr, u64>,
    next_conn_id: u64,
    next_request_id: u64,
    pending: PendingTable,
    partials: Reassembly,
    /// Requests received while the dispatch queue was full, within one progress call.
    overflow: VecDeque<Request>,
    /// Error responses produced by the receive path, sent right after `ucp_worker_progress` returns.
    outbox: VecDeque<Outgoing>,
    /// Requests waiting for this round's bundles (`NodeInner::send_request`), in the order posted.
    corked: VecDeque<send::Corked>,
    /// Requests for the Inline handler, run right after `ucp_worker_progress` returns, while no
    /// borrow of this state is live (a handler may respond or send, which borrows it anew).
    inline_ready: VecDeque<Request>,
    /// Connections to close once the current progress call returns.
    to_close: Vec<(u64, bool)>,
    /// Outgoing connections to make again once the current progress call returns (a reset
    /// handshake: `connections::HANDSHAKE_RETRIES`).
    to_reconnect: Vec<connections::Reconnect>,
    /// Handshakes reset in a row, by peer, while connecting to it (at most `HANDSHAKE_RETRIES`;
    /// an entry goes when a handshake with the peer completes or its retries are spent).
    handshake_resets: HashMap<SocketAddr, u32>,
    /// Connections closed by this node after an answer (`Request::close_connection_after_answer`):
    /// failed already, their endpoints close at the time given (coarse ms; `close_lingering`).
    lingering: Vec<(u64, u64)>,
    /// Endpoint-close requests not finished yet.
    closing: Vec<*mut c_void>,
    /// Boxed: each one's address is the `user_data` UCX hands back to `send_callback`.
    #[allow(clippy::vec_box)]
    send_ctx_free: Vec<Box<SendCtx>>,
    last_timeout_scan: Instant,
    last_idle_scan: Instant,
    /// UCX operations posted and not completed (sends, rendezvous receives, wire-up flushes). While
    /// any are, the progress thread must not sleep: UCX raises no event when, say, a shared-memory
    /// FIFO has room again for the next fragment of an eager send.
    ucx_ops_in_flight: usize,
    /// Peers on this host: who may pull from whom, buffers held for pulls, releases to send.
    same_host: same_host::SameHost,
}

pub(crate) struct NodeInner {
    config: Config,
    pool: Pool,
    /// The worker, its lock and its progress thread, shared with the other nodes of the process.
    runtime: Arc<Runtime>,
    state: UnsafeCell<NodeState>,
    /// Set once by `start`, after the listener exists. Not a plain field written through the Arc:
    /// the node is registered with the runtime (whose progress thread reads the node) before its
    /// listener can be created.
    local_addr: OnceLock<SocketAddr>,
    dispatch: BoundedQueue<Request>,
    respond: BoundedQueue<Outgoing>,
    /// Completion callbacks of `request_with` and their results, waiting to run with no borrow of
    /// the state live (`run_ready_callbacks`): a callback may call this node again.
    callbacks_ready: Mutex<VecDeque<ReadyCallback>>,
    /// How many `callbacks_ready` holds: progress rounds look here, not at the lock.
    callbacks_queued: AtomicUsize,
    /// Responses posted by code running under the lock (Inline handlers, requests refused at
    /// intake), sent by the next progress round. Outside `NodeState` so that posting one never
    /// borrows the state: the poster may run while a caller up the stack holds that borrow.
    /// Touched only by the thread holding the runtime's lock, in borrows that end within one
    /// method below (`queue_response_under_lock` and the next ones), so it needs no lock of its
    /// own: the mutex it had cost every progress round a lock and an unlock to find it empty.
    responses_under_lock: UnsafeCell<VecDeque<Outgoing>>,
    handler: Option<Arc<dyn Handler>>,
    /// One handler thread at a time spins in `next_request`.
    puller_spinning: AtomicBool,
    /// Set by `interrupt_pull`, taken by the `next_request` it ends.
    pull_interrupted: AtomicBool,
    closed: AtomicBool,
    /// Large same-host responses waiting for the puller thread (`same_host.rs`).
    deferred_pulls: same_host::DeferredPulls,
    /// Set at the end of `close`: the runtime forgets the node once its UCX operations are done.
    retired: AtomicBool,
    /// The receive path (an active-message or rendezvous-receive callback of this node) runs on
    /// the thread holding the lock, with this node's state borrowed: nothing may borrow it again
    /// meanwhile.
    receiving: AtomicBool,
    /// Times the state was borrowed again while the receive path held it (must stay 0; tests check).
    state_reentries: AtomicU64,
    counters: Counters,
    free_slots: Mutex<Vec<Arc<Slot>>>,
    /// The handler threads (Staged mode).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

// SAFETY: the raw UCX handles and the `UnsafeCell` state are only used under the runtime's lock
// (see the module comment); everything else is Sync on its own.
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
    /// Starts a node: a listener if `config.listen` is set and, in Staged mode, the handler
    /// threads, on the process's UCX runtime (context, worker and progress thread), which the
    /// first node starts and the nodes of the process share (docs/fabric.md, "Several nodes in
    /// one process"). Inline and Staged modes need a handler.
    ///
    /// Not from the thread driving progress (an Inline handler or a completion callback): that
    /// thread holds the runtime's lock, which starting a node takes; an error says so.
    pub fn start(config: Config, handler: Option<Arc<dyn Handler>>) -> Result<Node> {
        config.validate()?;
        if runtime::any_in_progress_here() {
            return Err(Error::Config(
                "Node::start cannot run on the thread driving progress (an Inline handler or a completion callback): \
                 start the node from another thread"
                    .into(),
            ));
        }
        match (config.handler_mode, &handler) {
            (HandlerMode::Inline | HandlerMode::Staged { .. }, None) if config.listen.is_some() => {
                return Err(Error::Config("a listening node in Inline or Staged mode needs a handler".into()))
            }
            _ => {}
        }
        let runtime = Runtime::acquire(&config)?;
        let pool = Pool::new(runtime.context.clone(), config.pool_cap_bytes, config.max_message_bytes);
        let depth = config.dispatch_queue_depth;
        let now = Instant::now();
        let inner = Arc::new(NodeInner {
            pool,
            runtime,
            state: UnsafeCell::new(NodeState {
                listener: ptr::null_mut(),
                conns: IdMap::default(),
                by_peer: IdMap::default(),
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
                corked: VecDeque::new(),
                inline_ready: VecDeque::new(),
                to_close: Vec::new(),
                to_reconnect: Vec::new(),
                handshake_resets: HashMap::new(),
                lingering: Vec::new(),
                closing: Vec::new(),
                send_ctx_free: Vec::new(),
                last_timeout_scan: now,
                last_idle_scan: now,
                ucx_ops_in_flight: 0,
                same_host: same_host::SameHost::default(),
            }),
            local_addr: OnceLock::new(),
            dispatch: BoundedQueue::new(depth),
            respond: BoundedQueue::new(depth),
            callbacks_ready: Mutex::new(VecDeque::new()),
            callbacks_queued: AtomicUsize::new(0),
            responses_under_lock: UnsafeCell::new(VecDeque::new()),
            handler,
            puller_spinning: AtomicBool::new(false),
            pull_interrupted: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            deferred_pulls: same_host::DeferredPulls::default(),
            retired: AtomicBool::new(false),
            receiving: AtomicBool::new(false),
            state_reentries: AtomicU64::new(0),
            counters: Counters::default(),
            free_slots: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            config,
        });
        // Join the runtime, then listen: the listener's accept callback refers to the node by
        // address, and the node stays registered (alive) until its listener is destroyed.
        let setup = {
            let runtime = &inner.runtime;
            let _guard = runtime.lock_for_caller();
            let _mark = InProgressMark::enter(runtime);
            // SAFETY: under the runtime's lock (taken above).
            runtime.register(unsafe { runtime.shared() }, inner.clone());
            match inner.config.listen {
                None => Ok(None),
                // SAFETY: under the runtime's lock (taken above), with no borrow of the node's state.
                Some(addr) => unsafe { inner.listen_on(inner.state(), addr).map(Some) },
            }
        };
        let local_addr = match setup {
            Ok(addr) => addr,
            Err(e) => {
                inner.close();
                return Err(e);
            }
        };
        if let Some(addr) = local_addr {
            inner.local_addr.set(addr).expect("local_addr is set once, here");
        }

        let mut threads = Vec::new();
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
        self.inner.local_addr.get().copied()
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
        self.inner.alloc_buffer(len, true)
    }

    /// Like `alloc`, but fails at once at the cap.
    pub fn try_alloc(&self, len: usize) -> Result<Buffer> {
        self.inner.check_len(len)?;
        self.inner.pool.alloc(len, None)
    }

    /// The next request, in Pull mode. `None` after `timeout`, once the node is closed, or when
    /// `interrupt_pull` ends it.
    pub fn next_request(&self, timeout: Duration) -> Option<Request> {
        self.inner.next_request(timeout, true)
    }

    /// Like `next_request`, but the thread that waits on the worker's event fd sleeps there at
    /// once instead of spinning first (~100 us). For a puller that takes over from one that left
    /// with a call: on a small machine its spin would take the core that call runs on.
    pub fn next_request_without_spin(&self, timeout: Duration) -> Option<Request> {
        self.inner.next_request(timeout, false)
    }

    /// Makes one `next_request` return `None` (unless a request is there): one under way, or else
    /// the next one, at once. For pulling threads that also serve work from elsewhere (the Hadoop
    /// RPC engine's handlers take socket calls from Hadoop's call queue too): whoever queues such
    /// work interrupts a pull, so that a puller looks at it, even one that was about to pull.
    /// Interrupts do not add up: one pending at most.
    pub fn interrupt_pull(&self) {
        self.inner.interrupt_pull();
    }

    /// Drives this node's progress on the calling thread, as a helper, for up to `spin` or until
    /// something happens; returns how much happened. For threads that wait on callback requests
    /// (`request_with`): receiving on the waiting thread avoids a hand-off through the progress
    /// thread, which backs off while helpers are active.
    pub fn help_progress(&self, spin: Duration) -> usize {
        self.inner.help_progress(spin)
    }

    /// Drives progress on this thread for up to `spin` (as `help_progress`), then sleeps on the
    /// worker's event fd in the progress thread's place, until `until()` holds (asked after each
    /// progress round) or `max` (from the start) passed; returns whether `until()` held, or `None`
    /// when the spin did not reach it and another thread sleeps on the fd already (then wait
    /// another way). For threads that wait on callback requests: the message they wait for wakes
    /// them directly, not through the progress thread.
    pub fn await_progress(&self, spin: Duration, max: Duration, until: impl FnMut() -> bool) -> Option<bool> {
        self.inner.await_progress(spin, max, until)
    }

    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        inner.counters.snapshot(&inner.pool, inner.runtime.fd_sleeps.load(Ordering::Relaxed))
    }

    /// Stops the node: pending requests fail with `Error::Closed`, connections are closed, threads
    /// joined. Idempotent. Buffers still held stay valid until dropped. Called on the thread
    /// driving progress (an Inline handler or a completion callback, which hold the runtime's lock
    /// that closing takes), the close runs on a thread of its own and `is_closed` turns true
    /// shortly after.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Replaces the UCX worker that this node shares with the process's other nodes of the same
    /// transport settings: every connection of those nodes fails (requests in flight with
    /// `Error::PeerFailed`), the worker is destroyed and a new one created, and each listening node
    /// listens again on its address. Peers reconnect on their next request. The progress rounds do
    /// this by themselves when the receive path is wedged (`Config::wedge_timeout`, docs/fabric.md,
    /// "Failures"); this is the same recovery on demand. Not from an Inline handler or a completion
    /// callback (an error then).
    pub fn renew_worker(&self) -> Result<()> {
        if self.inner.in_progress_here() {
            return Err(Error::Config("renew_worker cannot run on the thread driving progress (an Inline handler or a completion callback)".into()));
        }
        let runtime = &self.inner.runtime;
        let guard = runtime.lock_for_caller();
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mark = InProgressMark::enter(runtime);
        runtime.renew_worker();
        drop(mark);
        drop(guard);
        if runtime.worker().is_null() {
            return Err(Error::Config("creating a new UCX worker failed (see the log); this process's nodes cannot communicate".into()));
        }
        Ok(())
    }

    /// How many times the worker this node uses was renewed (`renew_worker`, or after a wedge).
    pub fn worker_renewals(&self) -> u64 {
        self.inner.runtime.renewals.load(Ordering::Relaxed)
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
    /// The node's state.
    ///
    /// # Safety
    /// Only while this thread holds the runtime's lock (directly or in a UCX callback), and
    /// without another live borrow of this node's state on this thread (see the module comment,
    /// "Borrows").
    #[allow(clippy::mut_from_ref)]
    unsafe fn state(&self) -> &mut NodeState {
        &mut *self.state.get()
    }

    /// Creates the node's listener on `addr` on the runtime's current worker; returns the address
    /// it got (the real port if `addr` asked for 0).
    ///
    /// # Safety
    /// Under the runtime's lock, with `state` this node's state and no listener of the node alive.
    unsafe fn listen_on(&self, state: &mut NodeState, addr: SocketAddr) -> Result<SocketAddr> {
        let (storage, len) = ucx::sockaddr(&addr);
        // SAFETY: the parameter structs are zeroed and their used fields set; the node outlives its
        // listener (destroyed in `close` or when the worker is renewed, before the node leaves the
        // runtime); `storage` outlives the call.
        let mut params: u::ucp_listener_params_t = std::mem::zeroed();
        params.field_mask = (u::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | u::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER) as u64;
        params.sockaddr.addr = &storage as *const _ as *const u::sockaddr;
        params.sockaddr.addrlen = len;
        params.conn_handler.cb = Some(connections::conn_request_callback);
        params.conn_handler.arg = self as *const NodeInner as *mut c_void;
        let mut listener: u::ucp_listener_h = ptr::null_mut();
        check("ucp_listener_create", u::ucp_listener_create(self.runtime.worker(), &params, &mut listener))?;
        state.listener = listener;
        let mut attr: u::ucp_listener_attr_t = std::mem::zeroed();
        attr.field_mask = u::UCP_LISTENER_ATTR_FIELD_SOCKADDR as u64;
        check("ucp_listener_query", u::ucp_listener_query(listener, &mut attr))?;
        let storage: &libc::sockaddr_storage = &*(&attr.sockaddr as *const _ as *const libc::sockaddr_storage);
        ucx::socket_addr(storage)
    }

    fn in_progress_here(&self) -> bool {
        self.runtime.in_progress_here()
    }

    /// A listening node whose handlers do not pull their requests (Staged, Inline): see
    /// `Runtime::serving_nodes`.
    pub(super) fn serves_without_pulling(&self) -> bool {
        self.config.listen.is_some() && !matches!(self.config.handler_mode, HandlerMode::Pull)
    }

    /// Runs `f` with the node's state, taking the runtime's lock unless this thread holds it.
    fn with_state<T>(&self, f: impl FnOnce(&NodeInner, &mut NodeState) -> Result<T>) -> Result<T> {
        if self.in_progress_here() {
            // Another node's callback may reach a closed node of the same runtime.
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if self.receiving.load(Ordering::Relaxed) {
                self.state_reentries.fetch_add(1, Ordering::Relaxed);
            }
            // SAFETY: this thread holds the runtime's lock (the mark says so), and no borrow of this
            // node's state is live up its stack: code that runs under the lock with user code above
            // it (Inline handlers, `run_inline_handlers`) holds none, nor does anything across a
            // progress call (`state_reentries` counts violations from the receive path).
            let result = f(self, unsafe { self.state() });
            self.run_ready_callbacks();
            return result;
        }
        let guard = self.runtime.lock_for_caller();
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mark = InProgressMark::enter(&self.runtime);
        // SAFETY: the runtime's lock was just taken by this thread, which had no borrow of the
        // state before.
        let result = f(self, unsafe { self.state() });
        self.run_ready_callbacks();
        drop(mark);
        drop(guard);
        result
    }

    /// Runs the completion callbacks whose requests completed, in order. Caller holds the
    /// runtime's lock (marked) and no borrow of this node's state: a callback may use the node.
    fn run_ready_callbacks(&self) -> usize {
        let mut ran = 0;
        while self.callbacks_queued.load(Ordering::Acquire) > 0 {
            let next = self.callbacks_ready.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some((done, result)) = next else { break };
            self.callbacks_queued.fetch_sub(1, Ordering::AcqRel);
            done(result);
            ran += 1;
        }
        ran
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.config.max_message_bytes {
            return Err(Error::TooLarge { len, max: self.config.max_message_bytes });
        }
        Ok(())
    }

    /// A buffer of `len` bytes from the pool. At the cap it waits, bounded by the request timeout,
    /// when `may_wait` (never inside the progress context: `alloc_may_wait`). The clock is read
    /// for that deadline only once the pool is found at its cap, not on every allocation.
    fn alloc_buffer(&self, len: usize, may_wait: bool) -> Result<Buffer> {
        match self.pool.alloc(len, None) {
            Err(Error::PoolExhausted { .. }) if may_wait => self.pool.alloc(len, Some(Instant::now() + self.config.request_timeout)),
            other => other,
        }
    }

    /// Inside the progress context nothing may block; elsewhere waits are bounded by the request timeout.
    fn alloc_may_wait(&self) -> bool {
        !self.in_progress_here()
    }

    fn wake(&self) {
        self.runtime.wake();
    }

    /// A new strong reference to this node, from the receive path (which has `&self` only).
    fn arc(&self) -> Arc<NodeInner> {
        // SAFETY: `self` lives in an Arc (every NodeInner is made by `Node::start`), and the
        // runtime's node list holds a strong count while a connection of the node can deliver
        // (`Shared::nodes`); the count is raised before the new Arc takes it over.
        unsafe {
            Arc::increment_strong_count(self as *const NodeInner);
            Arc::from_raw(self as *const NodeInner)
        }
    }

    /// Whether UCX still holds pointers into this node (operations in flight, endpoints closing):
    /// until then a closed node stays registered with the runtime.
    fn ucx_busy(state: &NodeState) -> bool {
        state.ucx_ops_in_flight > 0 || !state.closing.is_empty()
    }

    /// Forgets the requests received and not handed to a handler yet (the node is closing: their
    /// peers see the connection close) and the responses not posted yet.
    fn drop_unserved(&self, state: &mut NodeState) {
        for request in state.overflow.drain(..).chain(state.inline_ready.drain(..)) {
            request.discard();
        }
        state.outbox.clear();
        // (Their requests fail with the node's other requests in flight.)
        state.corked.clear();
        // SAFETY: the caller holds the runtime's lock (it has `state`); the borrow ends here.
        unsafe { &mut *self.responses_under_lock.get() }.clear();
    }

    /// Queues a response posted under the runtime's lock (`post_response`) for the next round.
    /// Caller holds the runtime's lock.
    fn queue_response_under_lock(&self, outgoing: Outgoing) {
        debug_assert!(self.in_progress_here());
        // SAFETY: only the holder of the runtime's lock (this thread) touches the queue, and no
        // borrow of it is live up the stack (each method here ends its own); this one ends here.
        unsafe { &mut *self.responses_under_lock.get() }.push_back(outgoing);
    }

    /// Moves the responses queued under the runtime's lock to `outbox`. Caller holds that lock.
    fn take_responses_under_lock(&self, outbox: &mut VecDeque<Outgoing>) {
        // SAFETY: as in `queue_response_under_lock`.
        let queued = unsafe { &mut *self.responses_under_lock.get() };
        if !queued.is_empty() {
            outbox.append(queued);
        }
    }

    /// Whether responses queued under the runtime's lock wait for a round. Caller holds that lock.
    fn has_responses_under_lock(&self) -> bool {
        // SAFETY: as in `queue_response_under_lock`.
        !unsafe { &*self.responses_under_lock.get() }.is_empty()
    }

    fn close(&self) {
        if self.in_progress_here() {
            // This thread holds the runtime's lock: closing here would wait for it for ever.
            if !self.closed.load(Ordering::SeqCst) {
                // SAFETY: under the runtime's lock (the mark says so); no borrow of the list is live
                // up this thread's stack (rounds index it anew); this one ends with the statement.
                let me = unsafe { self.runtime.shared() }.nodes.iter().find(|n| std::ptr::eq(Arc::as_ptr(n), self)).cloned();
                if let Some(me) = me {
                    let spawned = std::thread::Builder::new().name("fabric-close".into()).spawn(move || me.close());
                    if let Err(e) = spawned {
                        log_warn!("closing a node from its progress thread: spawning the closing thread failed: {e}");
                    }
                }
            }
            return;
        }
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.dispatch.close();
        self.respond.close();
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
        let runtime = &self.runtime;
        let guard = runtime.lock_for_caller();
        let mark = InProgressMark::enter(runtime);
        {
            // SAFETY: under the runtime's lock, taken above, with no other borrow of the state; this
            // one ends before the progress calls below.
            let state = unsafe { self.state() };
            self.drop_unserved(state);
            for request_id in state.pending.ids() {
                self.complete_pending(state, request_id, Err(Error::Closed));
            }
            state.to_reconnect.clear();
            // Healthy connections close gracefully, so peers see a clean disconnect rather than a
            // timeout; failed ones are forced. Either way the wait below is bounded.
            let conn_ids: Vec<(u64, bool)> = state.conns.iter().map(|(&id, c)| (id, c.failed)).collect();
            for (conn_id, failed) in conn_ids {
                self.close_conn(state, conn_id, failed);
            }
        }
        // Requests of `request_with` fail with `Closed`: their callbacks run now, with no borrow.
        self.run_ready_callbacks();
        let grace_end = Instant::now() + CLOSE_GRACE;
        loop {
            let waiting = {
                // SAFETY: under the runtime's lock; no other borrow of the state is live (the
                // progress call below has returned); this one ends with the block.
                let state = unsafe { self.state() };
                for (conn_id, force) in std::mem::take(&mut state.to_close) {
                    self.close_conn(state, conn_id, force);
                }
                reap_closed_endpoints(state);
                !state.closing.is_empty() || !state.to_close.is_empty() || state.conns.values().any(|c| c.wireup_flushing)
            };
            if !waiting || Instant::now() >= grace_end {
                break;
            }
            if !runtime.worker().is_null() {
                // SAFETY: under the runtime's lock, with no borrow of this node's state (or the
                // shared state) live: the callbacks this runs, of this node or another of the
                // runtime, borrow the state of the node they name themselves.
                unsafe { u::ucp_worker_progress(runtime.worker()) };
            }
        }
        // SAFETY: under the runtime's lock; the progress calls above have returned, so no other
        // borrow of the state is live.
        let state = unsafe { self.state() };
        // Requests that came in during the grace: nobody serves them now.
        self.drop_unserved(state);
        // Messages in reassembly go; a buffer a rendezvous receive still writes into stays with its
        // message until the receive completes (the node stays registered until then: `ucx_busy`).
        state.partials.clear();
        if !state.listener.is_null() {
            // SAFETY: under the runtime's lock; the listener is this node's and destroyed once.
            unsafe { u::ucp_listener_destroy(state.listener) };
            state.listener = ptr::null_mut();
        }
        state.send_ctx_free.clear();
        // Endpoints that did not finish closing within the grace stay with the node, which the
        // runtime keeps (and reaps) until UCX is done with them.
        if self.serves_without_pulling() {
            runtime.serving_nodes.fetch_sub(1, Ordering::SeqCst);
        }
        self.retired.store(true, Ordering::SeqCst);
        // SAFETY: under the runtime's lock.
        let shared = unsafe { runtime.shared() };
        shared.nodes.retain(|n| !std::ptr::eq(Arc::as_ptr(n), self) || NodeInner::ucx_busy(state));
        drop(mark);
        drop(guard);
        runtime.release();
    }
}
