//! The process's UCX runtime: one context, one worker and one progress thread, shared by every
//! node of the process whose transport settings match, created by the first such node and torn
//! down by the last.
//!
//! Why shared: UCX 1.13 aborts a process that runs several workers when connections churn (an
//! async event missed by one worker is delivered, after the fd number was reused, to another
//! worker's handler: `async.c:643 Assertion 'handler->async == async' failed`; docs/fabric.md,
//! "Several nodes in one process"). With one worker there is no other worker to confuse. It also
//! saves a progress thread per node, which matters on two cores.
//!
//! What is shared: the worker, its lock (every UCX call on the worker and every node's state are
//! under it), the progress thread and the accounting of who drives progress (sleeping, helpers).
//! What each node keeps: its listener, connections, pending table, reassembly, queues, handler
//! threads, pool, limits and counters. Messages reach their node through `Shared::by_ep`, which
//! maps each endpoint to the node and connection it belongs to; a listener's accept callback
//! carries its node.
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

use ucx_sys as u;

use crate::config::{Config, Transport};
use crate::error::{check, Result};
use crate::ucx::Context;
use crate::wire;

use super::id_map::IdMap;
use super::progress::HelperGate;
use super::wedge::WedgeWatch;
use super::NodeInner;

thread_local! {
    static IN_PROGRESS: Cell<*const Runtime> = const { Cell::new(ptr::null()) };
}

/// Marks this thread as holding a runtime's lock (see `IN_PROGRESS`) until dropped, restoring the
/// previous mark (a thread can hold the locks of two runtimes).
pub(super) struct InProgressMark(*const Runtime);

impl InProgressMark {
    pub(super) fn enter(runtime: &Runtime) -> InProgressMark {
        InProgressMark(IN_PROGRESS.with(|p| p.replace(runtime)))
    }
}

impl Drop for InProgressMark {
    fn drop(&mut self) {
        IN_PROGRESS.with(|p| p.set(self.0));
    }
}

/// Whether this thread holds the lock of any runtime (it drives progress: an Inline handler or a
/// completion callback runs on it).
pub(super) fn any_in_progress_here() -> bool {
    IN_PROGRESS.with(|p| !p.get().is_null())
}

/// The settings that shape a UCX context: nodes that differ in them cannot share one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContextKey {
    transport: Transport,
    /// Shared memory with peer error handling: the one setting under which UCX 1.13's FIFO hazard applies.
    pub(super) shm_with_peer_errors: bool,
    net_devices: String,
    /// Unit tests only: the thread that asked for a runtime of its own (`runtime_of_this_thread`).
    #[cfg(test)]
    owner: Option<std::thread::ThreadId>,
}

impl ContextKey {
    fn of(config: &Config) -> ContextKey {
        ContextKey {
            transport: config.transport,
            shm_with_peer_errors: config.transport == Transport::Auto && config.shm_with_peer_errors,
            net_devices: config.net_devices.clone(),
            #[cfg(test)]
            owner: OWN_RUNTIME.with(Cell::get).then(|| std::thread::current().id()),
        }
    }
}

#[cfg(test)]
thread_local! {
    static OWN_RUNTIME: Cell<bool> = const { Cell::new(false) };
}

/// Unit tests only: nodes this thread starts from now on share a runtime with no other test's
/// nodes. The unit tests of a crate run in parallel in one process, and a test that counts what
/// the runtime did (a helper's events, the progress thread's sleep) would otherwise count the
/// traffic of tests that happen to run beside it.
#[cfg(test)]
pub(super) fn runtime_of_this_thread() {
    OWN_RUNTIME.with(|own| own.set(true));
}

/// What only the holder of `Runtime::lock` may touch.
pub(super) struct Shared {
    /// The nodes on this worker: open ones, and closed ones whose UCX operations have not all
    /// completed yet (UCX still holds pointers to them); see `Runtime::retire_finished`.
    pub(super) nodes: Vec<Arc<NodeInner>>,
    /// Every endpoint of every node: its node and connection. An entry lives exactly as long as
    /// the connection is in its node's table, and a node is in `nodes` at least that long.
    pub(super) by_ep: IdMap<usize, (*const NodeInner, u64)>,
    /// Idle progress rounds read the clock for timers only every 64th time.
    pub(super) progress_calls: u64,
    /// The coarse clock (ms) when the timers last ran: rounds with events run them again only
    /// once it has moved on.
    pub(super) timers_ran_ms: u64,
    /// Watches for a receive path wedged after a peer died (`wedge.rs`).
    pub(super) wedge: WedgeWatch,
}

pub(super) struct Runtime {
    pub(super) key: ContextKey,
    pub(super) context: Arc<Context>,
    /// The worker; replaced under `lock` (and `signal_lock` written) when it is renewed after a
    /// wedge (`wedge.rs`), null once `stop` destroyed it.
    worker: AtomicPtr<u::ucp_worker>,
    /// The worker's event fd (changes with the worker).
    efd: AtomicI32,
    pub(super) lock: Mutex<()>,
    /// `ucp_worker_signal` is the one worker call made without `lock` (`wake`, from any thread):
    /// it holds this for reading, and whoever destroys the worker holds it for writing, so no
    /// signal reaches a destroyed worker (a thread answering a request of a node that just
    /// closed, while the last node stops the runtime).
    signal_lock: RwLock<()>,
    /// Active messages received by the worker since it started (all nodes, every worker).
    pub(super) messages_received: AtomicU64,
    /// Times the worker was renewed after a wedge.
    pub(super) renewals: AtomicU64,
    /// The largest `wedge_timeout` of the nodes on the runtime, in ms (0: no wedge check).
    pub(super) wedge_timeout_ms: AtomicU64,
    shared: UnsafeCell<Shared>,
    /// Nodes using the runtime; changed only under `RUNTIMES`' lock.
    users: AtomicUsize,
    /// The largest `spin_us` of the nodes on the runtime: the progress thread's spin.
    pub(super) spin_us: AtomicU64,
    /// Every poll of the worker is a system call (`Transport::Tcp`: UCX's TCP interface calls
    /// `epoll_wait` in each `ucp_worker_progress`), and the kernel wakes a thread asleep on the
    /// event fd when data arrives: the progress thread and waiting threads spin only while
    /// spinning pays (`AdaptiveSpin`, adaptive_spin.rs).
    pub(super) polls_by_syscall: bool,
    /// Set when the last node left: the progress thread ends.
    pub(super) stopped: AtomicBool,
    progress_thread: Mutex<Option<JoinHandle<()>>>,
    /// The progress thread is (about to be) asleep on the event fd: wake it with `ucp_worker_signal`.
    pub(super) sleeping: AtomicBool,
    /// Threads waiting for the lock: the progress thread yields to them.
    pub(super) lock_waiters: AtomicUsize,
    /// Callers spinning on their own completion while driving progress: the progress thread backs off.
    pub(super) helpers: AtomicUsize,
    /// Callers parked on a response (see `leave_helpers`).
    pub(super) parked_waiters: AtomicUsize,
    /// The progress thread waits here while helpers drive progress, so that it neither competes
    /// for the two cores nor wakes on every event; the last helper to leave wakes it
    /// (a wake before the wait is kept: see `HelperGate`).
    pub(super) helper_gate: HelperGate,
    /// Counts helper sessions. A caller issuing request after request is a helper only while it
    /// waits; between requests the count of helpers is 0 for a moment. The progress thread keeps
    /// deferring to helpers while this moves, instead of arming the event fd and waking on every
    /// response it is not needed for.
    pub(super) helper_sessions: AtomicU64,
    /// Counts helpers that left without what they waited for (they park now, and depend on the
    /// progress thread): the progress thread then serves them at once instead of waiting out the
    /// gap between a caller's requests (see `progress_loop`).
    pub(super) helper_give_ups: AtomicU64,
    /// The token (`thread_token`) of the caller asleep on the worker's event fd in the progress
    /// thread's place (`spin_then_sleep_as_helper`), 0 when none: at most one at a time.
    pub(super) fd_sleeper: AtomicU64,
    /// Times a caller took that place (tests, stats).
    pub(super) fd_sleeps: AtomicU64,
    /// Open listening nodes whose handlers do not pull requests themselves (Staged, Inline):
    /// requests may arrive for them at any time and nobody else would take them off the wire, so
    /// a caller leaving the event fd hands it back to the progress thread at once. (A Pull node's
    /// next puller takes the fd again.)
    pub(super) serving_nodes: AtomicUsize,
}

/// A number naming the calling thread, never 0 (for `Runtime::fd_sleeper`).
pub(super) fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

// SAFETY: the worker handle and `shared` are used only under `lock` (the worker is created in
// thread mode SERIALIZED: UCX relies on that lock and takes none of its own; the one call made
// without it, `ucp_worker_signal`, is safe from any thread in every mode); every other field is
// Sync on its own.
unsafe impl Send for Runtime {}
// SAFETY: as for Send.
unsafe impl Sync for Runtime {}

/// The runtimes of this process, one per `ContextKey` in use. Usually one.
static RUNTIMES: Mutex<Vec<Arc<Runtime>>> = Mutex::new(Vec::new());

impl Runtime {
    /// The runtime for `config`'s transport settings, started if no node uses one yet.
    pub(super) fn acquire(config: &Config) -> Result<Arc<Runtime>> {
        let key = ContextKey::of(config);
        let mut runtimes = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(runtime) = runtimes.iter().find(|r| r.key == key) {
            runtime.users.fetch_add(1, Ordering::SeqCst);
            return Ok(runtime.clone());
        }
        let runtime = Runtime::start(config, key)?;
        runtime.users.store(1, Ordering::SeqCst);
        runtimes.push(runtime.clone());
        Ok(runtime)
    }

    /// A node is done with the runtime; the last one stops it. The registry stays locked until
    /// the worker is gone, so that a node starting meanwhile never runs a second worker beside a
    /// dying one.
    pub(super) fn release(self: &Arc<Self>) {
        let mut runtimes = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
        if self.users.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        runtimes.retain(|r| !Arc::ptr_eq(r, self));
        self.stop();
    }

    fn start(config: &Config, key: ContextKey) -> Result<Arc<Runtime>> {
        let context = Arc::new(Context::new(config)?);
        let runtime = Arc::new(Runtime {
            key,
            context,
            worker: AtomicPtr::new(ptr::null_mut()),
            efd: AtomicI32::new(-1),
            lock: Mutex::new(()),
            signal_lock: RwLock::new(()),
            messages_received: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            wedge_timeout_ms: AtomicU64::new(config.wedge_timeout.as_millis() as u64),
            shared: UnsafeCell::new(Shared {
                nodes: Vec::new(),
                by_ep: IdMap::default(),
                progress_calls: 0,
                timers_ran_ms: 0,
                wedge: WedgeWatch::default(),
            }),
            users: AtomicUsize::new(0),
            spin_us: AtomicU64::new(config.spin_us),
            polls_by_syscall: config.transport == Transport::Tcp,
            stopped: AtomicBool::new(false),
            progress_thread: Mutex::new(None),
            sleeping: AtomicBool::new(false),
            lock_waiters: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            parked_waiters: AtomicUsize::new(0),
            helper_gate: HelperGate::default(),
            helper_sessions: AtomicU64::new(0),
            helper_give_ups: AtomicU64::new(0),
            fd_sleeper: AtomicU64::new(0),
            fd_sleeps: AtomicU64::new(0),
            serving_nodes: AtomicUsize::new(0),
        });
        if let Err(e) = runtime.create_worker() {
            runtime.stop();
            return Err(e);
        }
        let thread = {
            let runtime = runtime.clone();
            std::thread::Builder::new().name("fabric-progress".into()).spawn(move || runtime.progress_loop())
        };
        match thread {
            Ok(thread) => *runtime.progress_thread.lock().unwrap() = Some(thread),
            Err(e) => {
                runtime.stop();
                return Err(crate::error::Error::Config(format!("spawning the progress thread: {e}")));
            }
        }
        Ok(runtime)
    }

    /// Ends the progress thread and destroys the worker. Every node has closed by now: their
    /// listeners and endpoints are gone; nodes retired with UCX operations still in flight are
    /// dropped after the worker, which completes or discards those operations.
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.signal();
        self.wake_progress_from_helpers();
        let thread = self.progress_thread.lock().unwrap().take();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.destroy_worker();
        // SAFETY: under the lock; the worker is gone, so no callback can borrow the list meanwhile.
        // The nodes are dropped after the worker: UCX operations it completed or discarded held
        // pointers into them.
        let retired = std::mem::take(&mut unsafe { self.shared() }.nodes);
        drop(guard);
        drop(retired);
    }

    /// The shared state.
    ///
    /// # Safety
    /// Only while this thread holds `lock` (directly or inside a UCX callback), and without
    /// another live reference from an earlier call.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn shared(&self) -> &mut Shared {
        &mut *self.shared.get()
    }

    /// Whether this thread holds the lock (marked by `InProgressMark`).
    pub(super) fn in_progress_here(&self) -> bool {
        IN_PROGRESS.with(|p| std::ptr::eq(p.get(), self))
    }

    /// Takes the lock; a caller that has to wait for it counts in `lock_waiters` meanwhile, so
    /// that the progress thread yields it (a free lock is taken at once, uncounted).
    pub(super) fn lock_for_caller(&self) -> MutexGuard<'_, ()> {
        match self.lock.try_lock() {
            Ok(guard) => return guard,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        self.lock_waiters.fetch_add(1, Ordering::SeqCst);
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.lock_waiters.fetch_sub(1, Ordering::SeqCst);
        guard
    }

    /// The worker. Use it under `lock` only: it changes when the worker is renewed.
    pub(super) fn worker(&self) -> u::ucp_worker_h {
        self.worker.load(Ordering::Acquire)
    }

    /// The worker's event fd.
    pub(super) fn efd(&self) -> i32 {
        self.efd.load(Ordering::Acquire)
    }

    /// Creates the worker (the one active-message handler, its event fd). Caller holds `lock` or
    /// is `start`, before anyone knows the runtime; no worker exists.
    ///
    /// Thread mode SERIALIZED: any thread may call the worker, one at a time, which `lock`
    /// guarantees (ARCHITECTURE.md's invariant: every UCX call on a worker under its runtime's
    /// lock; `ucp_worker_signal`, the exception, is safe from any thread in every thread mode,
    /// ucp.h). In thread mode MULTI UCX took a lock of its own in every call (a spin lock, never
    /// contended behind ours), on every progress round and send: an atomic instruction each,
    /// about 7 % of each spinning thread's samples in an 8-byte ping-pong (docs/fabric.md, "The
    /// cost of a spin round"). UCX serializes its transports in both modes alike.
    pub(super) fn create_worker(&self) -> Result<()> {
        // SAFETY: plain FFI with a zeroed parameter struct whose used fields are set; the worker
        // handle is checked before use.
        let worker = unsafe {
            let mut params: u::ucp_worker_params_t = std::mem::zeroed();
            params.field_mask = u::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64;
            params.thread_mode = u::UCS_THREAD_MODE_SERIALIZED;
            let mut worker: u::ucp_worker_h = ptr::null_mut();
            check("ucp_worker_create", u::ucp_worker_create(self.context.handle, &params, &mut worker))?;
            worker
        };
        let mut efd = -1;
        // SAFETY: `worker` is the live worker created above.
        let status = unsafe { u::ucp_worker_get_efd(worker, &mut efd) };
        // SAFETY: the handler's argument is the runtime, which outlives the worker (the worker is
        // destroyed in `stop` or `renew_worker`, while the runtime is still referenced).
        let registered = check("ucp_worker_get_efd", status).and_then(|()| unsafe {
            let mut params: u::ucp_am_handler_param_t = std::mem::zeroed();
            params.field_mask = (u::UCP_AM_HANDLER_PARAM_FIELD_ID
                | u::UCP_AM_HANDLER_PARAM_FIELD_CB
                | u::UCP_AM_HANDLER_PARAM_FIELD_ARG
                | u::UCP_AM_HANDLER_PARAM_FIELD_FLAGS) as u64;
            params.id = wire::AM_ID;
            params.cb = Some(super::receive::am_recv_callback);
            params.arg = self as *const Runtime as *mut c_void;
            params.flags = u::UCP_AM_FLAG_WHOLE_MSG;
            check("ucp_worker_set_am_recv_handler", u::ucp_worker_set_am_recv_handler(worker, &params))
        });
        if let Err(e) = registered {
            // SAFETY: nothing else knows the worker yet.
            unsafe { u::ucp_worker_destroy(worker) };
            return Err(e);
        }
        self.efd.store(efd, Ordering::Release);
        self.worker.store(worker, Ordering::Release);
        Ok(())
    }

    /// Destroys the worker, if any. Caller holds `lock`. Waits for `wake`s in progress
    /// (`signal_lock`), so that none signals the destroyed worker.
    pub(super) fn destroy_worker(&self) {
        let _signals = self.signal_lock.write().unwrap_or_else(|e| e.into_inner());
        let worker = self.worker.swap(ptr::null_mut(), Ordering::AcqRel);
        self.efd.store(-1, Ordering::Release);
        if !worker.is_null() {
            // SAFETY: under the lock (the caller's) and `signal_lock`: no other thread uses the
            // worker; it was taken out of `self.worker` above, so it is destroyed once.
            unsafe { u::ucp_worker_destroy(worker) };
        }
    }

    /// Signals the worker (wakes a thread sleeping on its event fd), if it exists.
    fn signal(&self) {
        let _signals = self.signal_lock.read().unwrap_or_else(|e| e.into_inner());
        let worker = self.worker();
        if !worker.is_null() {
            // SAFETY: ucp_worker_signal is the one worker call that is safe from any thread, and
            // the worker is live: it is destroyed only under `signal_lock` held for writing.
            unsafe { u::ucp_worker_signal(worker) };
        }
    }

    /// Wakes the progress thread if it sleeps on the event fd, or the caller sleeping there in its
    /// place. Safe at any time, also after the runtime stopped (then it does nothing).
    pub(super) fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) || self.fd_sleeper.load(Ordering::SeqCst) != 0 {
            self.signal();
        }
    }

    /// Wakes the caller asleep on the event fd, if there is one and it is not this thread: a
    /// progress round on another thread may have taken the events it sleeps for (a TCP socket
    /// read dry leaves the fd quiet), and queued work for it.
    pub(super) fn wake_fd_sleeper_elsewhere(&self) {
        let sleeper = self.fd_sleeper.load(Ordering::SeqCst);
        if sleeper != 0 && sleeper != thread_token() {
            self.signal();
        }
    }

    /// Adds a node. Caller holds the lock.
    pub(super) fn register(&self, shared: &mut Shared, node: Arc<NodeInner>) {
        self.spin_us.fetch_max(node.config.spin_us, Ordering::Relaxed);
        self.wedge_timeout_ms.fetch_max(node.config.wedge_timeout.as_millis() as u64, Ordering::Relaxed);
        if node.serves_without_pulling() {
            self.serving_nodes.fetch_add(1, Ordering::SeqCst);
        }
        shared.nodes.push(node);
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, HandlerMode, Transport};
    use crate::node::Node;
    use std::sync::Arc;

    /// Settings no other unit test uses, so that no other test's node keeps the runtime alive.
    fn own_settings() -> Config {
        Config { handler_mode: HandlerMode::Pull, shm_with_peer_errors: false, ..Config::default() }
    }

    #[test]
    fn nodes_with_the_same_settings_share_one_runtime_until_the_last_closes() {
        let first = Node::start(own_settings(), None).unwrap();
        let second = Node::start(Config { spin_us: 500, ..own_settings() }, None).unwrap();
        let runtime = first.inner.runtime.clone();
        assert!(Arc::ptr_eq(&runtime, &second.inner.runtime), "one worker for both nodes");
        assert_eq!(runtime.spin_us.load(std::sync::atomic::Ordering::Relaxed), 500, "the largest spin of its nodes");
        let tcp = Node::start(Config { transport: Transport::Tcp, ..own_settings() }, None).unwrap();
        assert!(!Arc::ptr_eq(&runtime, &tcp.inner.runtime), "another transport needs another context");
        first.close();
        assert!(!runtime.stopped.load(std::sync::atomic::Ordering::SeqCst), "the second node still uses it");
        second.close();
        assert!(runtime.stopped.load(std::sync::atomic::Ordering::SeqCst), "the last node stopped it");
        let third = Node::start(own_settings(), None).unwrap();
        assert!(!Arc::ptr_eq(&runtime, &third.inner.runtime), "a new node starts a new runtime");
        drop(tcp);
    }

    #[test]
    fn a_closed_node_leaves_the_runtime_and_its_neighbour_keeps_working() {
        // Over TCP: the other test here needs the runtime of `own_settings` to itself.
        let tcp = Config { transport: Transport::Tcp, ..own_settings() };
        let stays = Node::start(tcp.clone(), None).unwrap();
        let leaves = Node::start(tcp, None).unwrap();
        let runtime = stays.inner.runtime.clone();
        leaves.close();
        let registered = {
            let _guard = runtime.lock.lock().unwrap();
            // SAFETY: under the runtime's lock.
            unsafe { runtime.shared() }.nodes.iter().any(|n| Arc::ptr_eq(n, &leaves.inner))
        };
        assert!(!registered, "a closed node with nothing in flight leaves at once");
        assert!(stays.alloc(100).is_ok());
        assert!(!stays.is_closed());
    }
}
