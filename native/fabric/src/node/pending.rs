//! Requests in flight: the bounded pending table, the completion slots callers wait on, the
//! `Endpoint` that submits requests and the `Pending` handle that waits for their responses.
use std::cell::{Cell, UnsafeCell};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::Duration;

use crate::clock::coarse_ms;
use crate::error::{Error, Result};
use crate::pool::Buffer;
use crate::wire::{self, Header, Kind};

use super::id_map::IdMap;
use super::progress::{SPINNING_WAITERS_MAX, WAITER_SPIN};
use super::send::Payload;
use super::{Node, NodeInner, NodeState};

thread_local! {
    /// One reset slot per thread, for its next request: a thread that waits for one request at a
    /// time takes and returns its slot without the node's lock (`take_slot`, `return_slot`).
    static SPARE_SLOT: Cell<Option<Arc<Slot>>> = const { Cell::new(None) };
}

pub(super) enum Waiter {
    Slot(Arc<Slot>),
    Callback(Box<dyn FnOnce(Result<Response>) + Send>),
}

pub(super) struct PendingEntry {
    pub(super) conn_id: u64,
    pub(super) deadline_ms: u64,
    pub(super) waiter: Waiter,
}

/// The requests of this node awaiting a response, by request id; at most `capacity`
/// (`Config::max_requests_in_flight`): `submit` waits while it is full.
pub(super) struct PendingTable {
    entries: IdMap<u64, PendingEntry>,
    capacity: usize,
}

impl PendingTable {
    pub(super) fn new(capacity: usize) -> PendingTable {
        PendingTable { entries: IdMap::with_capacity_and_hasher(capacity.min(65536), Default::default()), capacity }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn is_full(&self) -> bool {
        self.entries.len() >= self.capacity
    }

    /// Adds a request; gives the entry back when the table is full.
    pub(super) fn insert(&mut self, request_id: u64, entry: PendingEntry) -> std::result::Result<(), PendingEntry> {
        if self.is_full() {
            return Err(entry);
        }
        self.entries.insert(request_id, entry);
        Ok(())
    }

    pub(super) fn get(&self, request_id: u64) -> Option<&PendingEntry> {
        self.entries.get(&request_id)
    }

    pub(super) fn remove(&mut self, request_id: u64) -> Option<PendingEntry> {
        self.entries.remove(&request_id)
    }

    pub(super) fn contains(&self, request_id: u64) -> bool {
        self.entries.contains_key(&request_id)
    }

    /// A request waits for another connection to the same peer (a handshake made again).
    pub(super) fn move_to_conn(&mut self, request_id: u64, conn_id: u64) {
        if let Some(entry) = self.entries.get_mut(&request_id) {
            entry.conn_id = conn_id;
        }
    }

    /// The requests in flight on one connection (to fail them with it).
    pub(super) fn ids_on_conn(&self, conn_id: u64) -> Vec<u64> {
        self.entries.iter().filter(|(_, e)| e.conn_id == conn_id).map(|(&id, _)| id).collect()
    }

    /// The requests whose deadline is at or before `now_ms`.
    pub(super) fn expired(&self, now_ms: u64) -> Vec<u64> {
        self.entries.iter().filter(|(_, e)| e.deadline_ms <= now_ms).map(|(&id, _)| id).collect()
    }

    pub(super) fn ids(&self) -> Vec<u64> {
        self.entries.keys().copied().collect()
    }
}

/// The completion of one request: written by the progress context, read by the waiting caller.
/// Slots are pooled (`take_slot`), so a request costs no allocation once the node is warm.
///
/// The result needs no lock: `complete` writes it once, before it sets `done`, and it is read
/// (`take_result`) only after `done` was seen set, or with the slot held alone (`reset`). A lock
/// and an unlock on each side were two of the atomic instructions that made most of the fabric's
/// cost of a small round trip (docs/fabric.md, "The cost of a spin round").
pub(super) struct Slot {
    pub(super) done: AtomicBool,
    parked: AtomicBool,
    result: UnsafeCell<Option<Result<Response>>>,
    waiter: Mutex<Option<Thread>>,
}

// SAFETY: `result` is the one field that is not Sync: it is written by `complete` only, once per
// use of the slot (a request's entry leaves the pending table once, under the runtime's lock,
// and is completed then), before `done` is set (SeqCst, a release); it is read by `take_result`
// only after `done` was seen set (SeqCst, an acquire), and by `reset` through `&mut`. So no two
// threads ever access it at once. The result itself is Send.
unsafe impl Sync for Slot {}

impl Slot {
    pub(super) fn new() -> Slot {
        Slot { done: AtomicBool::new(false), parked: AtomicBool::new(false), result: UnsafeCell::new(None), waiter: Mutex::new(None) }
    }

    /// Completes the slot. Once per use: by whoever removed the request's entry from the table.
    pub(super) fn complete(&self, result: Result<Response>) {
        debug_assert!(!self.done.load(Ordering::Relaxed), "a slot is completed once");
        // SAFETY: nobody reads `result` before `done` is set below, and this is its only writer
        // (see the Sync impl).
        unsafe { *self.result.get() = Some(result) };
        self.done.store(true, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            if let Some(thread) = self.waiter.lock().unwrap().take() {
                thread.unpark();
            }
        }
    }

    /// Registers the calling thread to be unparked by `complete`.
    fn park_here(&self) {
        *self.waiter.lock().unwrap() = Some(std::thread::current());
        self.parked.store(true, Ordering::SeqCst);
    }

    /// The result, once `complete` has run (`None` before). Called by the slot's one waiter.
    fn take_result(&self) -> Option<Result<Response>> {
        if !self.done.load(Ordering::SeqCst) {
            return None;
        }
        // SAFETY: `done` is set, so `complete` wrote the result and will not touch it again; only
        // the waiter (this caller, the slot's one `Pending`) reads it.
        unsafe { (*self.result.get()).take() }
    }

    /// Makes the slot new again; `&mut`: nobody else holds it (`return_slot`), so this is plain
    /// stores, no lock and no atomic instruction.
    fn reset(&mut self) {
        *self.done.get_mut() = false;
        *self.parked.get_mut() = false;
        *self.result.get_mut() = None;
        *self.waiter.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A peer as seen by this node. Cheap to clone; all endpoints to one peer share one connection,
/// which is re-established transparently after a failure or an idle close.
#[derive(Clone)]
pub struct Endpoint {
    pub(super) node: Node,
    pub(super) peer: SocketAddr,
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
    pub(super) buffer: Buffer,
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

    /// Sends `payload`; `done` runs with the result on the thread driving progress (keep it
    /// short), under the runtime's lock but with no node's state borrowed: it may send through
    /// this node or another (chain requests), but not wait for a response (that fails at once
    /// with `Error::Config`).
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
        let mut buffer = inner.alloc_buffer(payload.len(), true)?;
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
        let result = self.node.wait_slot(&slot, self.request_id, deadline_ms);
        self.node.return_slot(slot);
        result
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Abandoned without waiting: forget the request so its response is dropped on arrival.
        if let Some(slot) = self.slot.take() {
            let request_id = self.request_id;
            let _ = self.node.with_state(|_, state| {
                state.pending.remove(request_id);
                Ok(())
            });
            if slot.done.load(Ordering::SeqCst) || Arc::strong_count(&slot) == 1 {
                self.node.return_slot(slot);
            }
        }
    }
}

impl NodeInner {
    /// A slot for a request: this thread's spare if it has one (no lock), else the node's free
    /// list, else a new one.
    pub(super) fn take_slot(&self) -> Arc<Slot> {
        if let Some(slot) = SPARE_SLOT.try_with(Cell::take).ok().flatten() {
            return slot;
        }
        self.free_slots.lock().unwrap().pop().unwrap_or_else(|| Arc::new(Slot::new()))
    }

    /// Takes a slot back for reuse once nobody else holds it: as this thread's spare, or on the
    /// node's free list (bounded by `max_requests_in_flight`).
    pub(super) fn return_slot(&self, mut slot: Arc<Slot>) {
        let Some(unique) = Arc::get_mut(&mut slot) else { return };
        unique.reset();
        // A slot knows no node: the spare serves whichever node this thread asks next.
        let slot = match SPARE_SLOT.try_with(|spare| match spare.take() {
            None => {
                spare.set(Some(slot));
                None
            }
            Some(other) => {
                spare.set(Some(other));
                Some(slot)
            }
        }) {
            Ok(None) => return,
            Ok(Some(slot)) => slot,
            Err(_) => return, // the thread is ending: let the slot go
        };
        let mut free = self.free_slots.lock().unwrap();
        if free.len() < self.config.max_requests_in_flight {
            free.push(slot);
        }
    }

    /// Registers a request and posts its sends. Waits (bounded) while too many are in flight.
    pub(super) fn submit(&self, peer: SocketAddr, op: u16, payload: Payload, waiter: Waiter) -> Result<(u64, u64)> {
        self.check_len(payload.bytes().0.len())?;
        // One clock read per attempt, for the deadline and the connection's last use.
        let mut now_ms = coarse_ms();
        let deadline_ms = now_ms + self.config.request_timeout.as_millis() as u64;
        let mut payload = Some(payload);
        let mut waiter = Some(waiter);
        loop {
            let submitted = self.with_state(|inner, state| {
                if state.pending.is_full() {
                    return Ok(None);
                }
                let conn_id = inner.connection_to(state, peer)?;
                // The counter stays far below bit 62, which answers set (`ANSWER_ID_TAKES_BUNDLES`),
                // and bit 63, which says this node takes bundled answers.
                debug_assert!(state.next_request_id < wire::ANSWER_ID_TAKES_BUNDLES);
                let request_id = state.next_request_id | wire::REQUEST_ID_TAKES_BUNDLES;
                state.next_request_id += 1;
                let conn = state.conns.get_mut(&conn_id).expect("connection just looked up");
                conn.last_used_ms = now_ms;
                conn.requests_in_flight += 1;
                if state.pending.insert(request_id, PendingEntry { conn_id, deadline_ms, waiter: waiter.take().unwrap() }).is_err() {
                    unreachable!("the pending table was checked for room under the same lock");
                }
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
                super::count_under_lock(&inner.counters.requests_sent);
                let posted = inner.send_request(state, conn_id, header, payload.take().unwrap(), request_id);
                // (A send UCX did not finish at once, a new connection's wire-up, the first corked
                // request: `wake_due`.)
                Ok(Some((request_id, inner.wake_due(state, posted))))
            })?;
            if let Some((request_id, wake)) = submitted {
                self.wake_as(wake);
                return Ok((request_id, deadline_ms));
            }
            // Too many in flight: let responses come in, bounded by the deadline.
            now_ms = coarse_ms();
            if now_ms >= deadline_ms {
                return Err(Error::Timeout { after_ms: self.config.request_timeout.as_millis() as u64 });
            }
            self.runtime.help_progress_or_sleep();
        }
    }

    /// Completes a request in flight (if still there) with `result`.
    pub(super) fn complete_pending(&self, state: &mut NodeState, request_id: u64, result: Result<Response>) {
        let Some(entry) = state.pending.remove(request_id) else { return };
        if let Some(conn) = state.conns.get_mut(&entry.conn_id) {
            conn.requests_in_flight = conn.requests_in_flight.saturating_sub(1);
            conn.last_used_ms = coarse_ms();
        }
        if result.is_ok() {
            super::count_under_lock(&self.counters.responses_received);
        }
        match entry.waiter {
            Waiter::Slot(slot) => slot.complete(result),
            // Not here: the caller holds this node's state borrowed (a UCX callback, a timer,
            // close), and the callback may call the node. It runs once that borrow has ended
            // (`run_ready_callbacks`).
            Waiter::Callback(done) => {
                self.callbacks_ready.lock().unwrap_or_else(|e| e.into_inner()).push_back((done, result));
                self.callbacks_queued.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    pub(super) fn wait_slot(&self, slot: &Slot, request_id: u64, deadline_ms: u64) -> Result<Response> {
        if self.in_progress_here() && !slot.done.load(Ordering::SeqCst) {
            // This thread runs the worker (an Inline handler or a completion callback): nothing
            // else can progress it, so the wait could only end at the deadline. Say so at once.
            let _ = self.with_state(|_, state| Ok(state.pending.remove(request_id)));
            return Err(Error::Config(
                "waiting for a response on the progress thread (in an Inline handler or a completion callback) cannot complete: \
                 use Staged or Pull mode, or request_with"
                    .into(),
            ));
        }
        // Spin first, driving progress ourselves: no thread hand-off on the response path. But
        // only while fewer waiters spin than there are spare cores: more spinners than cores
        // starve the threads that would answer them (measured on 2 cores with 4 waiting threads:
        // 2k requests/s instead of 100k+). The others park; whoever progresses completes them.
        let runtime = &self.runtime;
        let left = Duration::from_millis(deadline_ms.saturating_sub(coarse_ms()));
        let spin = if runtime.helpers.load(Ordering::SeqCst) < *SPINNING_WAITERS_MAX { WAITER_SPIN.min(left) } else { Duration::ZERO };
        // Then sleep on the worker's event fd in the progress thread's place, if nobody else does,
        // so that the response wakes this thread itself (`spin_then_sleep_as_helper`).
        runtime.spin_then_sleep_as_helper(spin, left, &self.closed, |_| slot.done.load(Ordering::SeqCst));
        // Else park; the progress thread (woken by the event fd) completes the slot and unparks us.
        if !slot.done.load(Ordering::SeqCst) {
            slot.park_here();
            runtime.parked_waiters.fetch_add(1, Ordering::SeqCst);
            if runtime.helpers.load(Ordering::SeqCst) == 0 {
                runtime.wake_progress_from_helpers();
            }
            while !slot.done.load(Ordering::SeqCst) {
                let now_ms = coarse_ms();
                if now_ms >= deadline_ms {
                    break;
                }
                std::thread::park_timeout(Duration::from_millis((deadline_ms - now_ms).min(100)));
            }
            runtime.parked_waiters.fetch_sub(1, Ordering::SeqCst);
        }
        if !slot.done.load(Ordering::SeqCst) {
            // Past the deadline: withdraw the request, unless it completed meanwhile.
            let _ = self.with_state(|inner, state| {
                if state.pending.remove(request_id).is_some() {
                    inner.counters.requests_timed_out.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
            if !slot.done.load(Ordering::SeqCst) {
                return Err(Error::Timeout { after_ms: self.config.request_timeout.as_millis() as u64 });
            }
        }
        slot.take_result().unwrap_or(Err(Error::Closed))
    }

    pub(super) fn expire_requests(&self, state: &mut NodeState) {
        let now_ms = coarse_ms();
        for request_id in state.pending.expired(now_ms) {
            self.counters.requests_timed_out.fetch_add(1, Ordering::Relaxed);
            let after_ms = self.config.request_timeout.as_millis() as u64;
            self.complete_pending(state, request_id, Err(Error::Timeout { after_ms }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn entry(conn_id: u64, deadline_ms: u64) -> PendingEntry {
        PendingEntry { conn_id, deadline_ms, waiter: Waiter::Callback(Box::new(|_| {})) }
    }

    #[test]
    fn the_table_refuses_entries_at_its_capacity() {
        let mut table = PendingTable::new(3);
        for id in 1..=3 {
            assert!(table.insert(id, entry(1, 100)).is_ok());
        }
        assert!(table.is_full());
        let refused = table.insert(4, entry(2, 100)).expect_err("a fourth entry is refused");
        assert_eq!(refused.conn_id, 2);
        assert_eq!(table.len(), 3);
        assert!(table.get(4).is_none());
        assert!(table.remove(2).is_some());
        assert!(!table.is_full());
        assert!(table.insert(4, entry(2, 100)).is_ok());
    }

    #[test]
    fn the_table_finds_requests_by_connection_and_deadline() {
        let mut table = PendingTable::new(10);
        table.insert(1, entry(7, 100)).ok().unwrap();
        table.insert(2, entry(8, 200)).ok().unwrap();
        table.insert(3, entry(7, 300)).ok().unwrap();
        let mut on_7 = table.ids_on_conn(7);
        on_7.sort();
        assert_eq!(on_7, vec![1, 3]);
        assert!(table.ids_on_conn(9).is_empty());
        assert!(table.expired(99).is_empty());
        let mut expired = table.expired(200);
        expired.sort();
        assert_eq!(expired, vec![1, 2]);
        let mut all = table.ids();
        all.sort();
        assert_eq!(all, vec![1, 2, 3]);
        assert!(table.remove(1).is_some());
        assert!(table.remove(1).is_none(), "a request completes once");
    }

    #[test]
    fn a_completed_slot_wakes_its_parked_waiter_and_resets_for_reuse() {
        let slot = Arc::new(Slot::new());
        let waiter = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                slot.park_here();
                let start = Instant::now();
                while !slot.done.load(Ordering::SeqCst) {
                    assert!(start.elapsed() < Duration::from_secs(10), "never completed");
                    std::thread::park_timeout(Duration::from_secs(1));
                }
                slot.take_result()
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        slot.complete(Err(Error::Overloaded));
        let result = waiter.join().unwrap();
        assert!(matches!(result, Some(Err(Error::Overloaded))));
        let mut slot = slot;
        Arc::get_mut(&mut slot).expect("the waiter's clone is gone").reset();
        assert!(!slot.done.load(Ordering::SeqCst));
        assert!(slot.take_result().is_none());
    }

    /// A `request_with` callback runs after the receive path's borrow of its node's state ended,
    /// so it may send through that node (chain requests). It used to run inside that borrow
    /// (`state_reentries` counted the second borrow its request took).
    #[test]
    fn a_completion_callback_may_send_through_its_own_node() {
        use crate::config::{Config, HandlerMode};
        use crate::node::{Node, Request};
        use std::sync::mpsc;
        let echo = |request: Request| {
            let payload = request.payload().to_vec();
            request.respond(&payload);
        };
        // Over TCP: a runtime of its own, so that this traffic is not on the default runtime, where
        // another unit test expects an idle worker.
        let tcp = Config { transport: crate::config::Transport::Tcp, ..Config::default() };
        let server = Node::start(
            Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..tcp.clone() },
            Some(Arc::new(echo)),
        )
        .unwrap();
        let client = Node::start(tcp, None).unwrap();
        let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
        let (tx, rx) = mpsc::channel::<(&str, std::result::Result<Vec<u8>, String>)>();
        let chained = endpoint.clone();
        endpoint
            .request_with(1, b"first", move |first| {
                let second_tx = tx.clone();
                let sent = chained.request_with(1, b"second", move |second| {
                    let _ = second_tx.send(("second", second.map(|r| r.to_vec()).map_err(|e| e.to_string())));
                });
                let _ = tx.send(("chained send", sent.map(|()| Vec::new()).map_err(|e| e.to_string())));
                let _ = tx.send(("first", first.map(|r| r.to_vec()).map_err(|e| e.to_string())));
            })
            .unwrap();
        let mut seen = std::collections::HashMap::new();
        for _ in 0..3 {
            let (what, result) = rx.recv_timeout(Duration::from_secs(10)).expect("every callback ran");
            seen.insert(what, result);
        }
        assert_eq!(seen["first"], Ok(b"first".to_vec()));
        assert_eq!(seen["chained send"], Ok(Vec::new()));
        assert_eq!(seen["second"], Ok(b"second".to_vec()));
        assert_eq!(client.inner.state_reentries.load(Ordering::Relaxed), 0, "no callback ran inside a borrow of its node's state");
        client.close();
        server.close();
    }
}
