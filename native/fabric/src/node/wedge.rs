//! Recovery from a wedged receive path: UCX 1.13's shared-memory FIFO hazard.
//!
//! Every same-host peer writes its messages into one receive FIFO of this process's worker (UCX's
//! `mm` transports). A writer reserves an element, copies its data in, then flips the element's
//! owner flag; the reader stops at the first element whose flag is not flipped. A peer killed
//! between the reservation and the flip leaves such an element for ever: nothing behind it is
//! read again, from any peer, and requests to same-host peers fail only at their deadline
//! (docs/fabric.md, "Failures"; `examples/shm_fifo_wedge.rs` reproduces it). The FIFO belongs to
//! the worker, so the only way out is a new worker.
//!
//! Detection (`WedgeWatch`): after a connection failure (any: a killed peer shows as "endpoint
//! timeout", as "connection reset" like a clean disconnect, or as a failed send; the time is taken
//! in `fail_conn`), if the worker then receives no
//! active message at all while a request posted after the failure waits `wedge_timeout`, the
//! receive path is taken to be wedged. A healthy worker receives its answer, or at least some
//! other message (the first message of a rendezvous transfer too), well before. A false alarm
//! needs a handler slower than `wedge_timeout` answering the first request after a failure with
//! nothing else arriving meanwhile; it costs what a real renewal costs (connections fail,
//! peers reconnect).
//!
//! Recovery (`Runtime::renew_worker`): every connection of every node of the runtime fails (its
//! requests with `Error::PeerFailed`, saying why) and its endpoint is force-closed; the listeners
//! are destroyed; the worker is destroyed and a new one (with a new FIFO) created; each open
//! node listens again on its address (same port). Peers see their connections fail and
//! reconnect on their next request, as after a restart of this process; new requests from here
//! open new connections.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::log::{log_debug, log_warn};

use super::connections::reap_closed_endpoints;
use super::runtime::Runtime;
use super::NodeInner;

/// How often the watch looks (it is cheap while no peer has failed).
const CHECK_PERIOD_MS: u64 = 100;
/// How long the renewal waits for the forced closes of the old worker's endpoints.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Why requests failed when the worker was renewed.
pub(super) const RENEWED_REASON: &str =
    "this process's receive path was wedged after a same-host peer died (UCX shared-memory FIFO); the worker was renewed";

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// No connection failed since the last message received: nothing to watch.
    Healthy,
    /// A connection failed and nothing was received since; no request has waited long enough (yet).
    Watching { since_ms: u64 },
    /// A request posted after the failure waited the whole timeout with nothing received.
    Wedged,
}

/// The detection's state: pure bookkeeping, fed by `peer_failed` (from `fail_conn`) and
/// `Runtime::watch_for_wedge`.
#[derive(Debug, Default)]
pub(super) struct WedgeWatch {
    /// The first connection failure since a message was last received: when (coarse clock), and
    /// the count of messages received by then.
    first_failure: Option<(u64, u64)>,
    next_check_ms: u64,
}

impl WedgeWatch {
    /// A connection failed at `now_ms`, when `received` messages had been received. A failure
    /// with nothing received since the previous one keeps the previous one's time.
    pub(super) fn peer_failed(&mut self, now_ms: u64, received: u64) {
        match self.first_failure {
            Some((_, received_then)) if received_then == received => {}
            _ => self.first_failure = Some((now_ms, received)),
        }
    }

    /// Takes in the count of messages received so far; a message since the failure ends the
    /// watch. Returns the verdict, short of `Wedged`, which needs the requests: see `judge`.
    pub(super) fn observe(&mut self, received: u64) -> Verdict {
        match self.first_failure {
            Some((_, received_then)) if received != received_then => {
                self.first_failure = None;
                Verdict::Healthy
            }
            Some((since_ms, _)) => Verdict::Watching { since_ms },
            None => Verdict::Healthy,
        }
    }

    /// Whether the oldest request posted since the failure (`oldest_posted_ms`, posted at or
    /// after `Watching::since_ms`) has waited `timeout_ms`. A `Wedged` verdict ends the watch.
    pub(super) fn judge(&mut self, now_ms: u64, oldest_posted_ms: Option<u64>, timeout_ms: u64) -> Verdict {
        let Some((since_ms, _)) = self.first_failure else { return Verdict::Healthy };
        match oldest_posted_ms {
            Some(posted_ms) if now_ms.saturating_sub(posted_ms) >= timeout_ms => {
                self.first_failure = None;
                Verdict::Wedged
            }
            _ => Verdict::Watching { since_ms },
        }
    }

    /// Forgets the failures (the worker was renewed: its own failures of every connection are
    /// no evidence against the new one).
    fn reset(&mut self) {
        self.first_failure = None;
    }

    /// Whether a look is due (at most every `CHECK_PERIOD_MS`).
    fn due(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_check_ms {
            return false;
        }
        self.next_check_ms = now_ms + CHECK_PERIOD_MS;
        true
    }
}

impl Runtime {
    /// The timer part of a progress round: looks for a wedged receive path and renews the worker
    /// when it finds one. Caller holds the lock, outside any UCX callback, with no borrow of the
    /// shared state or of a node's state live.
    pub(super) fn watch_for_wedge(&self) {
        let timeout_ms = self.wedge_timeout_ms.load(Ordering::Relaxed);
        if timeout_ms == 0 || !self.key.shm_with_peer_errors {
            return; // no shared-memory FIFO with peer failures on this runtime
        }
        let now_ms = coarse_ms();
        // SAFETY: under the lock (the caller's); this borrow ends before the nodes' states are read.
        let shared = unsafe { self.shared() };
        if !shared.wedge.due(now_ms) {
            return;
        }
        let received = self.messages_received.load(Ordering::Relaxed);
        let verdict = shared.wedge.observe(received);
        log_debug!("wedge watch: {received} messages received: {verdict:?}");
        let Verdict::Watching { since_ms } = verdict else { return };
        let nodes: Vec<Arc<NodeInner>> = shared.nodes.clone();
        let oldest_posted_ms = nodes
            .iter()
            .filter(|n| !n.closed.load(Ordering::SeqCst))
            .filter_map(|n| {
                // SAFETY: under the lock, with no other borrow of this node's state live.
                let state = unsafe { n.state() };
                let timeout_ms = n.config.request_timeout.as_millis() as u64;
                let posted = state.pending.ids().into_iter().filter_map(|id| state.pending.get(id)).map(|e| e.deadline_ms.saturating_sub(timeout_ms));
                posted.filter(|&p| p >= since_ms).min()
            })
            .min();
        // SAFETY: under the lock; the borrows of the loop above have ended.
        if unsafe { self.shared() }.wedge.judge(now_ms, oldest_posted_ms, timeout_ms) == Verdict::Wedged {
            log_warn!(
                "no message received for {} ms after a peer failed, while a request waited {timeout_ms} ms: \
                 the shared-memory receive FIFO is taken to be wedged; renewing the worker",
                now_ms.saturating_sub(since_ms)
            );
            self.renew_worker();
        }
    }

    /// Replaces the worker (see the module comment). Caller holds the lock, outside any UCX
    /// callback, with no borrow of the shared state or of a node's state live.
    pub(super) fn renew_worker(&self) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        // SAFETY: under the lock; the list is copied, the borrow ends here.
        let nodes: Vec<Arc<NodeInner>> = unsafe { self.shared() }.nodes.clone();
        let mut relisten = Vec::new();
        for node in &nodes {
            // SAFETY: under the lock, with no other borrow of this node's state live; it ends with
            // the block.
            let state = unsafe { node.state() };
            let conn_ids: Vec<u64> = state.conns.keys().copied().collect();
            for conn_id in conn_ids {
                node.fail_conn(state, conn_id, RENEWED_REASON);
            }
            for (conn_id, force) in std::mem::take(&mut state.to_close) {
                node.close_conn(state, conn_id, force);
            }
            if !state.listener.is_null() {
                // SAFETY: under the lock; the listener is this node's and destroyed once (nulled).
                unsafe { u::ucp_listener_destroy(state.listener) };
                state.listener = std::ptr::null_mut();
                if !node.closed.load(Ordering::SeqCst) {
                    relisten.push(node.clone());
                }
            }
        }
        // Let the forced closes, and the operations they cancel, complete (bounded).
        let grace_end = Instant::now() + CLOSE_GRACE;
        loop {
            let waiting = nodes.iter().any(|node| {
                // SAFETY: under the lock; no other borrow of this node's state is live (the
                // progress call below has returned); this one ends with the closure.
                let state = unsafe { node.state() };
                // A completion callback run by a failure above may have connected again (through
                // another node): those go too.
                let fresh: Vec<u64> = state.conns.iter().filter(|(_, c)| !c.failed).map(|(&id, _)| id).collect();
                for conn_id in fresh {
                    node.fail_conn(state, conn_id, RENEWED_REASON);
                }
                for (conn_id, force) in std::mem::take(&mut state.to_close) {
                    node.close_conn(state, conn_id, force);
                }
                reap_closed_endpoints(state);
                NodeInner::ucx_busy(state) || !state.conns.is_empty()
            });
            if !waiting || Instant::now() >= grace_end {
                break;
            }
            // SAFETY: under the lock, with no borrow of any node's state or the shared state live:
            // the callbacks borrow what they name themselves.
            unsafe { u::ucp_worker_progress(self.worker()) };
        }
        // What did not finish goes with the worker: UCX completes or discards it in the destroy
        // (callbacks it runs there find their connections gone or failed).
        self.destroy_worker();
        let mut leftover = 0;
        for node in &nodes {
            // SAFETY: under the lock; the destroy above has returned; the borrow ends with the block.
            let state = unsafe { node.state() };
            leftover += state.ucx_ops_in_flight + state.closing.len() + state.conns.len();
            // The requests of `closing` belonged to the destroyed worker, which freed them.
            state.closing.clear();
            state.ucx_ops_in_flight = 0;
            state.conns.clear();
            state.by_peer.clear();
            state.handshake_resets.clear();
            state.to_close.clear();
            state.lingering.clear();
            state.partials.clear();
        }
        // SAFETY: under the lock; no other borrow of the shared state is live.
        unsafe { self.shared() }.by_ep = Default::default();
        if leftover > 0 {
            log_warn!("{leftover} UCX operations or endpoints of the old worker were still open after {CLOSE_GRACE:?}; discarded with it");
        }
        if let Err(e) = self.create_worker() {
            // Without a worker nothing can be sent or received: connections fail at once
            // (`connection_to`) and progress rounds do nothing, until the nodes close.
            log_warn!("renewing the worker failed: {e}; this process's fabric nodes cannot communicate any more");
            return;
        }
        for node in relisten {
            let Some(addr) = node.local_addr.get().copied() else { continue };
            // SAFETY: under the lock, with no other borrow of this node's state live; its listener
            // was destroyed above.
            if let Err(e) = unsafe { node.listen_on(node.state(), addr) } {
                log_warn!("listening again on {addr} after renewing the worker failed: {e}; the node serves no new connections");
            }
        }
        // SAFETY: under the lock; no other borrow of the shared state is live.
        unsafe { self.shared() }.wedge.reset();
        log_warn!("worker renewed ({} nodes); peers reconnect on their next request", nodes.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT_MS: u64 = 5000;

    #[test]
    fn nothing_is_watched_until_a_connection_fails() {
        let mut watch = WedgeWatch::default();
        assert_eq!(watch.observe(0), Verdict::Healthy);
        assert_eq!(watch.judge(1_000_000, Some(0), TIMEOUT_MS), Verdict::Healthy, "a slow request alone is no wedge");
    }

    #[test]
    fn a_request_that_waits_the_timeout_with_nothing_received_after_a_failure_is_a_wedge() {
        let mut watch = WedgeWatch::default();
        watch.peer_failed(1000, 50);
        assert_eq!(watch.observe(50), Verdict::Watching { since_ms: 1000 });
        assert_eq!(watch.judge(1000, None, TIMEOUT_MS), Verdict::Watching { since_ms: 1000 }, "no request waits");
        // A request posted 10 ms after the failure, seen by a look much later: it counts from its post.
        assert_eq!(watch.judge(1010 + TIMEOUT_MS - 1, Some(1010), TIMEOUT_MS), Verdict::Watching { since_ms: 1000 }, "1 ms short");
        assert_eq!(watch.judge(1010 + TIMEOUT_MS, Some(1010), TIMEOUT_MS), Verdict::Wedged, "at the timeout");
        assert_eq!(watch.observe(50), Verdict::Healthy, "the verdict ends the watch until the next failure");
        watch.peer_failed(9100, 50);
        assert_eq!(watch.observe(50), Verdict::Watching { since_ms: 9100 });
    }

    #[test]
    fn any_message_received_after_the_failure_ends_the_watch() {
        let mut watch = WedgeWatch::default();
        watch.peer_failed(1000, 50);
        assert_eq!(watch.observe(51), Verdict::Healthy);
        assert_eq!(watch.judge(1_000_000, Some(1100), TIMEOUT_MS), Verdict::Healthy);
    }

    #[test]
    fn failures_with_nothing_received_between_them_keep_the_first_ones_time() {
        let mut watch = WedgeWatch::default();
        watch.peer_failed(1000, 7);
        watch.peer_failed(2000, 7);
        assert_eq!(watch.observe(7), Verdict::Watching { since_ms: 1000 });
        watch.peer_failed(3000, 8);
        assert_eq!(watch.observe(8), Verdict::Watching { since_ms: 3000 }, "a message came between: the later failure starts anew");
    }

    #[test]
    fn a_renewal_forgets_the_failures() {
        let mut watch = WedgeWatch::default();
        watch.peer_failed(1000, 7);
        watch.reset();
        assert_eq!(watch.observe(7), Verdict::Healthy);
    }

    #[test]
    fn looks_are_rate_limited() {
        let mut watch = WedgeWatch::default();
        assert!(watch.due(1000));
        assert!(!watch.due(1000 + CHECK_PERIOD_MS - 1));
        assert!(watch.due(1000 + CHECK_PERIOD_MS));
    }
}
