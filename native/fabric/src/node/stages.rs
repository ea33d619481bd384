//! The stages after receive (SEDA): the bounded dispatch queue (with its overflow list and load
//! shedding), the handler threads of Staged mode, the intake of Pull mode, and `Request`, which
//! a handler answers exactly once.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::config::HandlerMode;
use crate::error::{Error, Result};
use crate::pool::Buffer;
use crate::wire;

use super::progress::WAITER_SPIN;
use super::send::{Outgoing, Payload};
use super::{NodeInner, NodeState};

/// Handles requests arriving at a node (Inline and Staged modes).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request);
}

impl<F: Fn(Request) + Send + Sync + 'static> Handler for F {
    fn handle(&self, request: Request) {
        self(request)
    }
}

/// A request received by this node. Answer it exactly once; dropping it unanswered fails it.
pub struct Request {
    pub(super) node: Arc<NodeInner>,
    pub(super) conn_id: u64,
    pub(super) request_id: u64,
    pub(super) op: u16,
    pub(super) payload: Option<Buffer>,
    pub(super) answered: bool,
    /// Close the connection once the answer is sent (`close_connection_after_answer`).
    pub(super) then_close: bool,
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
        self.node.alloc_buffer(len, self.node.alloc_may_wait())
    }

    pub fn respond(mut self, data: &[u8]) {
        match self.node.check_len(data.len()).and_then(|_| self.node.alloc_buffer(data.len(), self.node.alloc_may_wait())) {
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

    /// Makes the answer, whichever it is, close the connection the request came on: for a peer
    /// that broke the protocol of the layer above (a malformed frame, a size over its limit). The
    /// answer is sent first (the close flushes it), nothing more is served from the connection,
    /// and the peer sees it close (its requests in flight on it fail with `Error::PeerFailed`).
    pub fn close_connection_after_answer(&mut self) {
        self.then_close = true;
    }

    /// `fail`, closing the connection after the answer (`close_connection_after_answer`).
    pub fn fail_and_close(mut self, message: &str) {
        self.close_connection_after_answer();
        self.fail(message);
    }

    /// Forgets the request without answering (the node is closing; the peer sees the connection close).
    pub(super) fn discard(mut self) {
        self.answered = true;
    }

    pub(super) fn finish_error(&mut self, error: &Error) {
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
        let outgoing = Outgoing { conn_id: self.conn_id, request_id: self.request_id, op: self.op, status, payload, then_close: self.then_close };
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

impl NodeInner {
    pub(super) fn dispatch_request(&self, state: &mut NodeState, request: Request) {
        if self.handler.is_none() && self.config.handler_mode != HandlerMode::Pull {
            request.fail("this node serves no requests");
            return;
        }
        match self.config.handler_mode {
            // Run by the progress round once this borrow of the state has ended (`run_inline_handlers`).
            HandlerMode::Inline => state.inline_ready.push_back(request),
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

    /// Runs the Inline handler on the requests received by the last `ucp_worker_progress`. The
    /// caller (the progress round) holds the runtime's lock and no borrow of any node's state: each
    /// request is taken out under a borrow that ends before the handler runs, so a handler that
    /// responds or sends, on this node or another of the runtime (borrowing that state anew), never
    /// meets another live borrow. Returns how many ran.
    pub(super) fn run_inline_handlers(&self) -> usize {
        let mut ran = 0;
        loop {
            // SAFETY: the caller holds the runtime's lock and no other borrow of this node's state
            // (see above); this one ends with the statement.
            let next = unsafe { self.state() }.inline_ready.pop_front();
            let Some(request) = next else { return ran };
            if self.closed.load(Ordering::SeqCst) {
                // A connection still wiring up at close delivered it: nobody serves it now.
                request.discard();
                continue;
            }
            let handler = self.handler.as_ref().expect("Inline mode has a handler");
            handler.handle(request);
            ran += 1;
        }
    }

    pub(super) fn handler_loop(self: Arc<Self>) {
        let handler = self.handler.clone().expect("Staged mode has a handler");
        while !self.closed.load(Ordering::SeqCst) {
            if let Some(request) = self.next_request(Duration::from_millis(100), true) {
                handler.handle(request);
            }
        }
    }

    /// The handle stage's intake. One handler thread at a time spins briefly, driving progress
    /// itself, so that a request arriving now is received and handled on one thread with no
    /// hand-off, and then sleeps on the worker's event fd in the progress thread's place
    /// (`spin_then_sleep_as_helper`), so that the next request wakes it directly rather than through the
    /// progress thread; the others (and that one, when the fd is taken) block on the dispatch
    /// queue.
    ///
    /// `spin` false: the one on the fd sleeps there at once, for a puller that takes over while
    /// another thread of the process runs a call (on two cores its spin would take that one's core).
    pub(super) fn next_request(&self, timeout: Duration, spin: bool) -> Option<Request> {
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(request) = self.dispatch.try_pop() {
            return Some(request);
        }
        if !self.in_progress_here() && !self.puller_spinning.swap(true, Ordering::SeqCst) {
            let mut found = None;
            let spin = if spin { WAITER_SPIN.min(timeout) } else { Duration::ZERO };
            let slept = self.runtime.spin_then_sleep_as_helper(spin, timeout, &self.closed, |_| {
                found = self.dispatch.try_pop();
                found.is_some() || self.pull_interrupted.swap(false, Ordering::SeqCst)
            });
            self.puller_spinning.store(false, Ordering::SeqCst);
            if found.is_some() {
                return found;
            }
            if slept.is_some() {
                // Its time is up (or it was closed): what arrived last, if anything.
                return self.dispatch.try_pop();
            }
        }
        self.dispatch.pop_timeout_unless(timeout, || self.pull_interrupted.swap(false, Ordering::SeqCst))
    }

    /// See `Node::interrupt_pull`. The fd sleeper takes the flag before it sleeps again (it asks
    /// `done` before each sleep, and the signal ends a sleep under way); the pullers on the
    /// dispatch queue are woken under its lock, after the flag is set, so none misses it; a pull
    /// not yet begun takes it at its first look.
    pub(super) fn interrupt_pull(&self) {
        self.pull_interrupted.store(true, Ordering::SeqCst);
        self.dispatch.wake_waiters();
        self.runtime.wake();
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, HandlerMode};
    use crate::node::Node;
    use std::time::{Duration, Instant};

    #[test]
    fn pulling_from_an_idle_node_times_out_and_from_a_closed_one_returns_at_once() {
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let start = Instant::now();
        assert!(node.next_request(Duration::from_millis(30)).is_none());
        assert!(start.elapsed() >= Duration::from_millis(30));
        node.close();
        let start = Instant::now();
        assert!(node.next_request(Duration::from_secs(10)).is_none());
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    /// An interrupt ends one pull: the one asleep on the event fd or the one waiting on the dispatch
    /// queue, whichever takes it; a second ends the other; one made while nobody pulls ends the
    /// next pull at once, and only that one.
    #[test]
    fn an_interrupt_ends_one_pull_under_way_or_the_next() {
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let start = Instant::now();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let (node, done_tx) = (node.clone(), done_tx.clone());
            std::thread::spawn(move || done_tx.send(node.next_request(Duration::from_secs(20)).is_none()).unwrap());
        }
        std::thread::sleep(Duration::from_millis(300)); // both past their spin: one on the fd, one on the queue
        node.interrupt_pull();
        assert!(done_rx.recv_timeout(Duration::from_secs(5)).unwrap(), "one pull ended, without a request");
        assert!(done_rx.recv_timeout(Duration::from_millis(300)).is_err(), "the other still waits");
        node.interrupt_pull();
        assert!(done_rx.recv_timeout(Duration::from_secs(5)).unwrap());
        assert!(start.elapsed() < Duration::from_secs(10), "interrupted, not timed out: {:?}", start.elapsed());
        node.interrupt_pull();
        let start = Instant::now();
        assert!(node.next_request(Duration::from_secs(5)).is_none());
        assert!(start.elapsed() < Duration::from_secs(1), "the pending interrupt ends the next pull at once");
        let start = Instant::now();
        assert!(node.next_request(Duration::from_millis(50)).is_none());
        assert!(start.elapsed() >= Duration::from_millis(50), "and only that one");
        node.close();
    }

    /// An Inline handler that sends a request of its own and responds runs after the receive path
    /// has let go of the node's state, so it never borrows the state a second time.
    #[test]
    fn an_inline_handler_that_sends_and_responds_does_not_reenter_the_state() {
        use crate::node::Request;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let backend = Node::start(
            Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() },
            Some(Arc::new(|request: Request| request.respond(b"backend"))),
        )
        .unwrap();
        let backend_addr = backend.local_addr().unwrap();
        let forwarded = Arc::new(AtomicUsize::new(0));
        let relay: Arc<std::sync::OnceLock<Node>> = Arc::new(std::sync::OnceLock::new());
        let handler = {
            let (relay, forwarded) = (relay.clone(), forwarded.clone());
            move |request: Request| {
                let node = relay.get().expect("relay started").clone();
                let forwarded = forwarded.clone();
                // Sends from inside the handler (a callback request: nothing here may block)...
                node.endpoint(backend_addr)
                    .unwrap()
                    .request_with(2, b"forward", move |result| {
                        if result.is_ok() {
                            forwarded.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                    .unwrap();
                // ...and responds.
                request.respond(b"relayed");
            }
        };
        let node = Node::start(
            Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() },
            Some(Arc::new(handler)),
        )
        .unwrap();
        relay.set(node.clone()).ok().unwrap();
        let client = Node::start(Config::default(), None).unwrap();
        let endpoint = client.endpoint(node.local_addr().unwrap()).unwrap();
        for _ in 0..20 {
            assert_eq!(&endpoint.request(1, b"hi").unwrap().wait().unwrap()[..], b"relayed");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while forwarded.load(Ordering::SeqCst) < 20 {
            assert!(Instant::now() < deadline, "forwarded requests answered: {}", forwarded.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(5));
        }
        // The three nodes share one worker: the handler runs in a progress round that also
        // receives for the backend and the client, and none of their states is borrowed twice.
        assert!(Arc::ptr_eq(&node.inner.runtime, &backend.inner.runtime) && Arc::ptr_eq(&node.inner.runtime, &client.inner.runtime));
        for (name, n) in [("relay", &node), ("backend", &backend), ("client", &client)] {
            assert_eq!(n.inner.state_reentries.load(Ordering::Relaxed), 0, "the {name}'s state was borrowed again inside its receive path");
        }
        client.close();
        node.close();
        backend.close();
    }

    #[test]
    fn a_listening_node_in_staged_mode_needs_a_handler() {
        let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Staged { threads: 1 }, ..Config::default() };
        assert!(Node::start(config, None).is_err());
    }
}
