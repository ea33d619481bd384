//! Serving the cache over the fabric. A request with op `FABRIC_OP_BINARY` carries complete
//! binary-protocol request packets; they are executed by the session of the fabric connection they
//! came on (which holds its SASL state), and the reply packets go back as the response payload.
//!
//! Replies are written straight into registered memory: `BufferReply` implements the protocol's
//! `Reply` over a pooled `fabric::Buffer`, so a value is copied once, from the store into the
//! buffer the fabric then sends (rendezvous, zero-copy, for large ones). The buffer grows by
//! doubling when a reply outgrows it; only the bytes before the growth are copied again.
//!
//! Waiting for the store (hybrid mode): when a packet needs a value the store is reading from its
//! SSD tier, `Session::process_message` stops before it (`waiting`). The handler then parks the
//! request (the `fabric::Request`, its payload, how much of it ran, the reply built so far) with
//! a fork of its connection's session in a slot, and returns without answering: the handler thread
//! (the progress thread, in Inline mode) never waits for the SSD, and the connection's later
//! requests run meanwhile (a client's requests in flight are independent, each with its own reply:
//! that is what lets non-blocking gets overlap their SSD reads). Each slot has a waker made at
//! start; a request that may wait takes a slot before it runs, so nothing is allocated per request.
//! The store's I/O thread wakes the slot's waker once the value is in memory, and the waker goes on
//! with the request right there (continues the payload into the same reply and answers). Measured
//! on 2 cores (`ohb mem nb --hybrid`), handing it to a resume thread instead made gets of values on
//! the SSD about a quarter slower (blocking 21.8k vs 29.7k gets/s, iget 43.7k vs 58.6k). The fabric lets any thread answer a request (`Request::respond_buffer` posts it to the
//! progress thread); resumed requests take reply buffers without waiting for pool memory (parked
//! requests hold pool memory that only resuming frees). Slots, all connections together, are bounded by
//! the fabric's own queue depth (`Config::dispatch_queue_depth`); a request that finds none free
//! fails at once. A parked request of a connection that closes is answered towards a peer that is
//! gone when its read completes (the store always completes or, shutting down, wakes its reads).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Wake, Waker};

use cache_proto::session::{Reply, Session, SessionConfig};
use cache_proto::storage::Storage;
use cache_proto::FABRIC_OP_BINARY;
use fabric::{Buffer, Config, HandlerMode, Node, Request, Transport};

use crate::log;
use crate::stats::Counters;

/// The smallest reply buffer taken from the pool (the pool's smallest class is 256 bytes).
const REPLY_INITIAL_BYTES: usize = 1024;
/// Sessions beyond the fabric's connection limit that may wait for pruning.
const SESSIONS_SLACK: usize = 64;
/// Why a request that would wait for the store is refused.
const PARKED_FULL: &str = "too many requests waiting for the store's SSD tier; try again";

pub struct FabricSettings {
    pub listen: SocketAddr,
    pub tcp_only: bool,
    /// 0: handle on the progress thread (Inline).
    pub threads: usize,
    pub conn_limit: usize,
    pub devices: String,
    pub pool_cap_bytes: usize,
    pub max_message_bytes: usize,
    pub spin_us: u64,
}

/// Per-connection sessions, bounded by the fabric's connection limit plus a slack.
pub struct FabricServer {
    store: Arc<dyn Storage>,
    session_config: Arc<SessionConfig>,
    counters: Arc<Counters>,
    node: Arc<OnceLock<Node>>,
    sessions: Mutex<HashMap<u64, Arc<FabricSession>>>,
    sessions_max: usize,
    max_message_bytes: usize,
    /// With a store that may wait: one per request that may wait at once, all connections
    /// together (those waiting are counted in `Counters::fabric_requests_parked`); empty otherwise.
    slots: Box<[Slot]>,
    free_slots: Mutex<Vec<usize>>,
}

/// One fabric connection's protocol state.
struct FabricSession {
    session: Mutex<Session>,
}

/// A request that waits for the store, on a fork of its connection's session, with everything
/// needed to go on with it.
struct Parked {
    session: Session,
    request: Request,
    payload: Buffer,
    /// Payload bytes executed already (whole packets).
    consumed: usize,
    /// The reply so far (`BufferReply::park`): its buffer, if one was needed yet, and its length.
    reply: Option<Buffer>,
    reply_len: usize,
}

/// A place for one request that may wait for the store: its waker, made once at start (so that
/// nothing is allocated per request), and the request while it is parked. Slots bound the
/// requests that wait, all connections together.
struct Slot {
    waker: Waker,
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    parked: Option<Parked>,
    /// The waker fired while no request was parked here (the store's read finished before the
    /// handler parked the request, or a late wake): the next request parked here runs again at once.
    woken_early: bool,
}

/// Woken by the store, on its I/O thread once the value is in memory (with no store lock held):
/// goes on with the slot's request right there. One thread hand-off fewer than queueing it for
/// another thread, which on a small machine is most of the cost of a read from the SSD.
struct SlotWaker {
    slot: usize,
    server: Weak<FabricServer>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(server) = self.server.upgrade() {
            if catch_unwind(AssertUnwindSafe(|| server.resume(self.slot))).is_err() {
                Counters::add(&server.counters.internal_errors, 1);
                log::warn(format_args!("resuming a parked fabric request panicked"));
            }
        }
    }
}

/// What executing (part of) a request came to.
enum Executed {
    /// A packet waits for the store: park the request with these.
    Waiting { consumed: usize, reply: Option<Buffer>, reply_len: usize },
    /// Answer the request; `forget`: the session is over (`quit`, a malformed payload, a panic).
    Done { answer: Answer, forget: bool },
}

enum Answer {
    Respond(Option<Buffer>),
    Fail(String),
}

/// Starts the fabric node and returns it (also stored in `node_cell`, for `stats` and pruning).
/// With a store that may wait (hybrid mode), also starts the resume threads: as many as the
/// fabric's handler threads, one in Inline mode.
pub fn start(
    settings: &FabricSettings,
    store: Arc<dyn Storage>,
    session_config: Arc<SessionConfig>,
    counters: Arc<Counters>,
    node_cell: Arc<OnceLock<Node>>,
) -> fabric::Result<(Node, Arc<FabricServer>)> {
    let config = Config {
        listen: Some(settings.listen),
        transport: if settings.tcp_only { Transport::Tcp } else { Transport::Auto },
        handler_mode: if settings.threads == 0 { HandlerMode::Inline } else { HandlerMode::Staged { threads: settings.threads } },
        max_connections: settings.conn_limit,
        net_devices: settings.devices.clone(),
        pool_cap_bytes: settings.pool_cap_bytes,
        max_message_bytes: settings.max_message_bytes,
        spin_us: settings.spin_us,
        ..Config::default()
    };
    let may_wait = store.may_wait();
    let slot_count = if may_wait { config.dispatch_queue_depth } else { 0 };
    let server = Arc::new_cyclic(|weak: &Weak<FabricServer>| FabricServer {
        store,
        session_config,
        counters,
        node: node_cell.clone(),
        sessions: Mutex::new(HashMap::new()),
        sessions_max: settings.conn_limit + SESSIONS_SLACK,
        max_message_bytes: settings.max_message_bytes,
        slots: (0..slot_count)
            .map(|slot| Slot {
                waker: Waker::from(Arc::new(SlotWaker { slot, server: weak.clone() })),
                state: Mutex::new(SlotState::default()),
            })
            .collect(),
        free_slots: Mutex::new((0..slot_count).rev().collect()),
    });
    let handler_server = server.clone();
    let node = Node::start(config, Some(Arc::new(move |request: Request| handler_server.handle(request))))?;
    let _ = node_cell.set(node.clone());
    Ok((node, server))
}

fn lock_slot(slot: &Slot) -> MutexGuard<'_, SlotState> {
    slot.state.lock().unwrap_or_else(|e| e.into_inner())
}

impl FabricServer {
    fn handle(&self, mut request: Request) {
        Counters::add(&self.counters.fabric_requests, 1);
        if request.op() != FABRIC_OP_BINARY {
            return self.fail(request, "unknown operation");
        }
        let payload = match request.take_payload() {
            Some(payload) if !payload.is_empty() => payload,
            _ => return self.fail(request, "empty payload: expected binary protocol request packets"),
        };
        if payload.first() != Some(&cache_proto::binary::MAGIC_REQUEST) {
            return self.fail(request, "payload is not binary protocol request packets (magic 0x80)");
        }
        self.dispatch(request, payload);
    }

    /// Runs a valid request on its connection's session; answers it, or parks it on a fork of the
    /// session when it waits for the store (the connection's later requests go on meanwhile: a
    /// client's requests in flight are independent, as their separate replies are). Runs on the
    /// fabric's handler thread, which may wait for pool memory (`execute`'s `no_wait` is false).
    fn dispatch(&self, request: Request, payload: Buffer) {
        let conn_id = request.connection_id();
        let Some(entry) = self.session(conn_id) else {
            return self.fail(request, "too many fabric sessions");
        };
        // A request that may wait needs a slot (and its waker) before it runs.
        let slot = if self.slots.is_empty() {
            None
        } else {
            match self.free_slots.lock().unwrap_or_else(|e| e.into_inner()).pop() {
                Some(slot) => Some(slot),
                None => return self.fail(request, PARKED_FULL),
            }
        };
        let mut session = entry.session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slot {
            lock_slot(&self.slots[slot]).woken_early = false;
            session.set_waker(self.slots[slot].waker.clone());
        }
        let executed = self.execute(&mut session, &request, &payload, 0, None, 0, false);
        match executed {
            Executed::Waiting { consumed, reply, reply_len } => {
                let slot = slot.expect("only a store that may wait answers Pending");
                let mut fork = session.fork();
                drop(session);
                fork.set_waker(self.slots[slot].waker.clone());
                Counters::add(&self.counters.fabric_requests_parked, 1);
                self.park(slot, Parked { session: fork, request, payload, consumed, reply, reply_len });
            }
            Executed::Done { answer, forget } => {
                drop(session);
                drop(payload);
                if let Some(slot) = slot {
                    self.free_slot(slot);
                }
                if forget {
                    self.forget(conn_id, &entry);
                }
                self.answer(request, answer);
            }
        }
    }

    /// Leaves a waiting request in its slot, or hands it to a resume thread at once if the wake
    /// came already.
    fn park(&self, slot: usize, parked: Parked) {
        let mut state = lock_slot(&self.slots[slot]);
        assert!(state.parked.is_none());
        state.parked = Some(parked);
        if std::mem::take(&mut state.woken_early) {
            drop(state);
            self.resume(slot);
        }
    }

    fn free_slot(&self, slot: usize) {
        self.free_slots.lock().unwrap_or_else(|e| e.into_inner()).push(slot);
    }

    /// Executes `payload[consumed..]` on `session`, appending to the reply so far. `no_wait`: take
    /// reply buffers without waiting for pool memory (the resume threads: parked requests hold
    /// pool memory that only they free, so waiting for it could wait for themselves).
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        session: &mut Session,
        request: &Request,
        payload: &[u8],
        consumed: usize,
        reply: Option<Buffer>,
        reply_len: usize,
        no_wait: bool,
    ) -> Executed {
        let node = if no_wait { self.node.get() } else { None };
        let mut out = BufferReply::resume(request, self.max_message_bytes, reply, reply_len, node);
        let outcome = catch_unwind(AssertUnwindSafe(|| session.process_message(&payload[consumed..], &mut out)));
        let processed = match outcome {
            Ok(p) => p,
            Err(_) => {
                Counters::add(&self.counters.internal_errors, 1);
                log::warn(format_args!("the protocol layer panicked on a fabric request; its session is dropped"));
                return Executed::Done { answer: Answer::Fail("internal error".into()), forget: true };
            }
        };
        if processed.waiting {
            Counters::add(&self.counters.storage_waits, 1);
            return match out.park() {
                Ok((reply, reply_len)) => Executed::Waiting { consumed: consumed + processed.consumed, reply, reply_len },
                // The reply failed already: the request fails whatever the store brings.
                Err(error) => Executed::Done { answer: Answer::Fail(format!("no memory for the reply: {error}")), forget: false },
            };
        }
        // `close`: `quit`, or a payload that ends inside a packet: the session is over (its
        // authentication with it); the connection's next request starts a new one.
        let forget = processed.close;
        let answer = match out.finish() {
            (_, Some(error)) => Answer::Fail(format!("no memory for the reply: {error}")),
            (Some(buffer), None) => Answer::Respond(Some(buffer)),
            (None, None) if processed.close => {
                Answer::Fail("malformed request: expected complete binary protocol request packets".into())
            }
            (None, None) => Answer::Respond(None),
        };
        Executed::Done { answer, forget }
    }

    fn answer(&self, request: Request, answer: Answer) {
        match answer {
            Answer::Respond(Some(buffer)) => request.respond_buffer(buffer),
            Answer::Respond(None) => request.respond(&[]),
            Answer::Fail(message) => self.fail(request, &message),
        }
    }

    fn fail(&self, request: Request, message: &str) {
        Counters::add(&self.counters.fabric_requests_failed, 1);
        log::info(format_args!("fabric request failed: {message}"));
        request.fail(message);
    }

    /// Goes on with the request parked in `slot`: answers it, or parks it again. A wake with
    /// nothing parked is remembered (`woken_early`); a spurious one runs the request again, which
    /// only asks the store again.
    fn resume(&self, slot: usize) {
        let Some(mut parked) = ({
            let mut state = lock_slot(&self.slots[slot]);
            let parked = state.parked.take();
            if parked.is_none() {
                state.woken_early = true;
            }
            parked
        }) else {
            return;
        };
        let executed = self.execute(
            &mut parked.session,
            &parked.request,
            &parked.payload,
            parked.consumed,
            parked.reply.take(),
            parked.reply_len,
            true,
        );
        match executed {
            Executed::Waiting { consumed, reply, reply_len } => {
                (parked.consumed, parked.reply, parked.reply_len) = (consumed, reply, reply_len);
                self.park(slot, parked);
            }
            Executed::Done { answer, forget } => {
                let Parked { request, payload, .. } = parked;
                drop(payload);
                self.counters.fabric_requests_parked.fetch_sub(1, Ordering::Relaxed);
                self.free_slot(slot);
                if forget {
                    // `quit` or a malformed payload in a forked request ends the connection's session too.
                    let conn_id = request.connection_id();
                    let entry = self.sessions.lock().unwrap().get(&conn_id).cloned();
                    if let Some(entry) = entry {
                        self.forget(conn_id, &entry);
                    }
                }
                self.answer(request, answer);
            }
        }
    }

    /// The session of `conn_id`, created on its first request. `None` only if the map is full of
    /// open connections (cannot happen while the fabric enforces its connection limit).
    fn session(&self, conn_id: u64) -> Option<Arc<FabricSession>> {
        if let Some(s) = self.sessions.lock().unwrap().get(&conn_id) {
            return Some(s.clone());
        }
        if self.sessions.lock().unwrap().len() >= self.sessions_max {
            self.prune();
        }
        let mut sessions = self.sessions.lock().unwrap();
        if sessions.len() >= self.sessions_max {
            return None;
        }
        let session = Session::new(self.store.clone(), self.session_config.clone());
        let entry = Arc::new(FabricSession { session: Mutex::new(session) });
        sessions.insert(conn_id, entry.clone());
        self.counters.fabric_sessions.store(sessions.len() as u64, Ordering::Relaxed);
        Some(entry)
    }

    /// Removes `entry`, the session of `conn_id` (unless a newer one has taken its place).
    fn forget(&self, conn_id: u64, entry: &Arc<FabricSession>) {
        let removed = {
            let mut sessions = self.sessions.lock().unwrap();
            let current = sessions.get(&conn_id).is_some_and(|s| Arc::ptr_eq(s, entry));
            let removed = if current { sessions.remove(&conn_id) } else { None };
            self.counters.fabric_sessions.store(sessions.len() as u64, Ordering::Relaxed);
            removed
        };
        // Dropped without the lock: parked requests in it fail (answers go to the progress thread).
        drop(removed);
    }

    /// Drops the sessions of closed connections, and with them their parked requests. Never
    /// holds the sessions lock while asking the node (which takes the worker lock; an Inline
    /// handler holds that one while taking ours), nor while dropping sessions.
    pub fn prune(&self) {
        let Some(node) = self.node.get() else { return };
        let ids: Vec<u64> = self.sessions.lock().unwrap().keys().copied().collect();
        let closed: Vec<u64> = ids.into_iter().filter(|&id| !node.connection_is_open(id)).collect();
        if closed.is_empty() {
            return;
        }
        let removed: Vec<Arc<FabricSession>> = {
            let mut sessions = self.sessions.lock().unwrap();
            let removed = closed.iter().filter_map(|id| sessions.remove(id)).collect();
            self.counters.fabric_sessions.store(sessions.len() as u64, Ordering::Relaxed);
            removed
        };
        log::debug(format_args!("pruned {} fabric sessions of closed connections", removed.len()));
        drop(removed);
    }
}

/// A `Reply` over registered memory from the request's node. If no buffer can be had (the pool
/// is at its cap, or the reply exceeds the largest message), the rest of the reply is discarded
/// and `finish` reports the error; the request then fails as a whole.
pub struct BufferReply<'a> {
    request: &'a Request,
    /// `Some`: buffers come from this node (the request's) without waiting for pool memory.
    no_wait: Option<&'a Node>,
    /// The node's `max_message_bytes`: the fabric refuses larger responses.
    max_bytes: usize,
    /// Its length is its capacity while the reply is built; `used` bytes are the reply.
    buffer: Option<Buffer>,
    used: usize,
    error: Option<fabric::Error>,
    discard: Vec<u8>,
}

impl<'a> BufferReply<'a> {
    /// A reply for `request`, or one `park` returned to go on with (`None, 0` starts one). With `no_wait`, a larger
    /// buffer is taken from that node's pool without waiting (`Node::try_alloc`); otherwise as
    /// `Request::alloc` does (waiting up to the request timeout off the progress thread).
    fn resume(
        request: &'a Request,
        max_bytes: usize,
        buffer: Option<Buffer>,
        used: usize,
        no_wait: Option<&'a Node>,
    ) -> BufferReply<'a> {
        debug_assert!(used <= buffer.as_ref().map_or(0, |b| b.len()));
        BufferReply { request, no_wait, max_bytes, buffer, used, error: None, discard: Vec::new() }
    }

    /// The reply so far, to go on with later (`resume`), or the error that already cut it short.
    fn park(self) -> Result<(Option<Buffer>, usize), fabric::Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok((self.buffer, self.used)),
        }
    }

    /// The reply (its length set), or the error that cut it short.
    pub fn finish(self) -> (Option<Buffer>, Option<fabric::Error>) {
        if self.error.is_some() {
            return (None, self.error);
        }
        let buffer = self.buffer.map(|mut b| {
            b.set_len(self.used);
            b
        });
        (buffer, None)
    }

    fn discard(&mut self, len: usize) -> &mut [u8] {
        self.discard.resize(len, 0);
        &mut self.discard[..len]
    }
}

impl Reply for BufferReply<'_> {
    fn mark(&self) -> usize {
        self.used
    }

    fn truncate(&mut self, mark: usize) {
        assert!(mark <= self.used);
        // After an error the reply fails as a whole; bytes go nowhere either way.
        self.used = mark;
    }

    fn append(&mut self, len: usize) -> &mut [u8] {
        if self.error.is_some() {
            return self.discard(len);
        }
        let need = self.used.saturating_add(len);
        let capacity = self.buffer.as_ref().map_or(0, |b| b.capacity());
        if need > capacity {
            let max = self.max_bytes;
            // Double (amortised growth), but never ask for more than a message may hold when
            // what is needed fits.
            let want = need.max(capacity.saturating_mul(2)).max(REPLY_INITIAL_BYTES);
            let want = if need <= max { want.min(max) } else { need };
            let larger = match self.no_wait {
                Some(node) => node.try_alloc(want),
                None => self.request.alloc(want),
            };
            match larger {
                Ok(mut larger) => {
                    larger.set_len(larger.capacity());
                    if let Some(old) = self.buffer.take() {
                        larger.as_mut_slice()[..self.used].copy_from_slice(&old.as_slice()[..self.used]);
                    }
                    self.buffer = Some(larger);
                }
                Err(e) => {
                    self.error = Some(e);
                    self.buffer = None;
                    return self.discard(len);
                }
            }
        }
        let buffer = self.buffer.as_mut().expect("a buffer of at least `need` bytes");
        let start = self.used;
        self.used = need;
        &mut buffer.as_mut_slice()[start..need]
    }

    fn extend_from(&mut self, data: &[u8]) {
        crate::copy::copy(self.append(data.len()), data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use fabric::Pending;

    use crate::test_store::{bin_packet, bin_replies, bin_set, BinReply, SlowTierStore};

    const GET: u8 = 0x00;
    const QUIT: u8 = 0x07;
    const NOOP: u8 = 0x0a;

    fn server(store: Arc<SlowTierStore>) -> (Node, Arc<FabricServer>, Arc<Counters>) {
        let settings = FabricSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            tcp_only: false,
            threads: 0,
            conn_limit: 64,
            devices: "lo".into(),
            pool_cap_bytes: 64 << 20,
            max_message_bytes: 8 << 20,
            spin_us: 50,
        };
        let counters = Arc::new(Counters::default());
        let config = Arc::new(SessionConfig::new("test"));
        let (node, server) = start(&settings, store, config, counters.clone(), Arc::new(OnceLock::new())).unwrap();
        (node, server, counters)
    }

    fn client() -> Node {
        Node::start(Config { request_timeout: Duration::from_secs(15), ..Config::default() }, None).unwrap()
    }

    fn send(client: &Node, server: &Node, payload: &[u8]) -> Pending {
        client.endpoint(server.local_addr().unwrap()).unwrap().request(FABRIC_OP_BINARY, payload).unwrap()
    }

    fn call(client: &Node, server: &Node, payload: &[u8]) -> Vec<BinReply> {
        bin_replies(&send(client, server, payload).wait().unwrap())
    }

    fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn parked(counters: &Counters) -> u64 {
        counters.fabric_requests_parked.load(Ordering::Relaxed)
    }

    fn hit(opaque: u32, value: &[u8]) -> BinReply {
        BinReply { opcode: GET, status: 0, opaque, value: value.to_vec() }
    }

    #[test]
    fn a_waiting_request_is_answered_after_the_wake_and_later_ones_do_not_wait_for_it() {
        let store = SlowTierStore::new(false);
        let (node, _server, counters) = server(store.clone());
        let client = client();
        let large = vec![7u8; 300 << 10];
        assert_eq!(call(&client, &node, &bin_set(b"k", b"old", 1))[0].status, 0);
        assert_eq!(call(&client, &node, &bin_set(b"large", &large, 2))[0].status, 0);
        store.make_cold(b"k");
        // One payload: a large hit (the reply buffer grows before the wait), the waiting get, a NOOP.
        let mut first = bin_packet(GET, b"large", &[], &[], 3);
        first.extend(bin_packet(GET, b"k", &[], &[], 4));
        first.extend(bin_packet(NOOP, b"", &[], &[], 5));
        let first = send(&client, &node, &first);
        eventually("the get to wait", || store.pendings() == 1);
        assert_eq!(parked(&counters), 1);
        // The connection's next requests run meanwhile.
        assert_eq!(call(&client, &node, &bin_set(b"other", b"x", 6))[0].status, 0);
        assert_eq!(call(&client, &node, &bin_packet(GET, b"other", &[], &[], 7)), vec![hit(7, b"x")]);
        assert!(!first.is_done());
        assert_eq!(store.pendings(), 1, "nothing retried before the wake");
        assert_eq!(store.release(b"k"), 1);
        let replies = bin_replies(&first.wait().unwrap());
        assert_eq!(replies, vec![hit(3, &large), hit(4, b"old"), BinReply { opcode: NOOP, status: 0, opaque: 5, value: vec![] }]);
        eventually("the parked count to drop", || parked(&counters) == 0);
        assert_eq!(counters.storage_waits.load(Ordering::Relaxed), 1);
        client.close();
        node.close();
    }

    #[test]
    fn a_wake_before_the_handler_parks_is_not_lost() {
        let store = SlowTierStore::new(true);
        let (node, _server, counters) = server(store.clone());
        let client = client();
        assert_eq!(call(&client, &node, &bin_set(b"k", b"v", 1))[0].status, 0);
        for round in 0..100 {
            store.make_cold(b"k");
            assert_eq!(call(&client, &node, &bin_packet(GET, b"k", &[], &[], round)), vec![hit(round, b"v")]);
        }
        assert_eq!(store.pendings(), 100);
        eventually("the parked count to drop", || parked(&counters) == 0);
        client.close();
        node.close();
    }

    #[test]
    fn parked_requests_are_bounded() {
        let store = SlowTierStore::new(false);
        let (node, server, counters) = server(store.clone());
        let bound = server.slots.len();
        let client = client();
        assert_eq!(call(&client, &node, &bin_set(b"k", b"v", 1))[0].status, 0);
        store.make_cold(b"k");
        let extra = 20;
        let requests: Vec<Pending> =
            (0..bound + extra).map(|i| send(&client, &node, &bin_packet(GET, b"k", &[], &[], i as u32))).collect();
        eventually("the bound to fill", || requests.iter().filter(|r| r.is_done()).count() == extra);
        assert_eq!(parked(&counters), bound as u64);
        let (refused, waiting): (Vec<Pending>, Vec<Pending>) = requests.into_iter().partition(|r| r.is_done());
        for request in refused {
            match request.wait() {
                Err(fabric::Error::Remote(message)) => assert_eq!(message, PARKED_FULL),
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
        store.release(b"k");
        for request in waiting {
            let replies = bin_replies(&request.wait().unwrap());
            assert_eq!((replies.len(), replies[0].status, replies[0].value.as_slice()), (1, 0, &b"v"[..]));
        }
        eventually("the parked count to drop", || parked(&counters) == 0);
        client.close();
        node.close();
    }

    #[test]
    fn a_quit_while_a_request_waits_leaves_that_request_to_finish() {
        let store = SlowTierStore::new(false);
        let (node, _server, counters) = server(store.clone());
        let client = client();
        assert_eq!(call(&client, &node, &bin_set(b"k", b"v", 1))[0].status, 0);
        store.make_cold(b"k");
        let first = send(&client, &node, &bin_packet(GET, b"k", &[], &[], 2));
        eventually("the get to wait", || store.pendings() == 1);
        assert_eq!(bin_replies(&send(&client, &node, &bin_packet(QUIT, b"", &[], &[], 3)).wait().unwrap())[0].opaque, 3);
        store.release(b"k");
        assert_eq!(bin_replies(&first.wait().unwrap()), vec![hit(2, b"v")]);
        assert_eq!(call(&client, &node, &bin_packet(GET, b"k", &[], &[], 4)), vec![hit(4, b"v")], "a new session");
        eventually("the parked count to drop", || parked(&counters) == 0);
        client.close();
        node.close();
    }

    #[test]
    fn a_connection_that_closes_while_parked_leaves_nothing_behind() {
        let store = SlowTierStore::new(false);
        let (node, server, counters) = server(store.clone());
        let first_client = client();
        assert_eq!(call(&first_client, &node, &bin_set(b"k", b"v", 1))[0].status, 0);
        let in_use_before = node.stats().pool_bytes_in_use;
        store.make_cold(b"k");
        let first = send(&first_client, &node, &bin_packet(GET, b"k", &[], &[], 2));
        let second = send(&first_client, &node, &bin_packet(GET, b"k", &[], &[], 3));
        eventually("the requests to park", || parked(&counters) == 2);
        drop((first, second));
        first_client.close();
        eventually("the session to be pruned", || {
            server.prune();
            counters.fabric_sessions.load(Ordering::Relaxed) == 0
        });
        // The reads complete: the requests are answered towards a peer that is gone, and freed.
        assert_eq!(store.release(b"k"), 2);
        eventually("the parked count to drop", || parked(&counters) == 0);
        eventually("their buffers to go back to the pool", || node.stats().pool_bytes_in_use <= in_use_before);
        let other = client();
        assert_eq!(call(&other, &node, &bin_packet(GET, b"k", &[], &[], 4)), vec![hit(4, b"v")]);
        other.close();
        node.close();
    }
}
