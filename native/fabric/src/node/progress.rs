//! Who drives the worker, and when: the progress thread (spins for `spin_us` after the last
//! event, then arms the worker and sleeps on its event fd), callers that help while they wait for
//! their own responses (the progress thread stays out of their way), and the timers (request
//! deadlines, idle connections) that ride on progress rounds.
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::log::log_warn;

use super::connections::reap_closed_endpoints;
use super::{InProgressMark, NodeInner};

/// How long a waiting caller spins (checking and helping progress) before it parks.
pub(super) const WAITER_SPIN: Duration = Duration::from_micros(100);
/// Waiters that may spin at once: one core is left for the rest of the process (at least one).
pub(super) static SPINNING_WAITERS_MAX: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map(|n| n.get().saturating_sub(1)).unwrap_or(1).max(1)
});
/// Period of the scan for requests past their deadline.
const TIMEOUT_SCAN_PERIOD: Duration = Duration::from_millis(10);
/// Period of the scan for idle connections and expired reassembly.
const IDLE_SCAN_PERIOD: Duration = Duration::from_millis(500);
/// Longest sleep of the progress thread on the event fd; timers are checked at least this often.
const SLEEP_MAX_MS: i32 = 20;

impl NodeInner {
    pub(super) fn help_progress_or_sleep(&self) {
        if let Ok(guard) = self.lock.try_lock() {
            self.progress_once(&guard, true);
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Spins as a helper: drives progress on this thread (whenever the worker is free) until
    /// `done(events of the last round)` holds, `spin` has passed or the node closes. The progress
    /// thread stays out of the way meanwhile; a helper that leaves without `done` wakes it, since
    /// the caller will now depend on it. The clock is read every 64 rounds only: on a VM,
    /// clock_gettime was a quarter of the spinning time. Returns whether `done` was reached.
    pub(super) fn spin_as_helper(&self, spin: Duration, mut done: impl FnMut(usize) -> bool) -> bool {
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


    /// One round of the engine: UCX progress (if `receive`), then the respond stage, deferred work
    /// and timers. Returns how much happened (0 = idle). The caller holds the lock.
    pub(super) fn progress_once(&self, _guard: &MutexGuard<'_, ()>, receive: bool) -> usize {
        let _mark = InProgressMark::enter(self);
        let mut events = 0usize;
        if receive {
            // SAFETY: the caller holds the lock (`_guard`) and no borrow of the state: UCX callbacks made
            // inside borrow it themselves.
            events += unsafe { u::ucp_worker_progress(self.worker) } as usize;
        }
        events += self.run_inline_handlers();
        // SAFETY: the lock is held (`_guard`); the callbacks and Inline handlers above have returned,
        // so no other borrow is live.
        let state = unsafe { self.state() };
        state.outbox.append(&mut self.responses_under_lock.lock().unwrap_or_else(|e| e.into_inner()));
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
            let now_ms = coarse_ms();
            self.close_idle_connections(state, now_ms);
            let expired = state.partials.expire(now_ms);
            if expired > 0 {
                log_warn!("dropped {expired} messages whose chunks stopped arriving for {} ms", self.config.reassembly_timeout.as_millis());
            }
        }
        if busy { events.max(1) } else { events }
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
    pub(super) fn wake_progress_from_helpers(&self) {
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

    pub(super) fn progress_loop(self: Arc<Self>) {
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
            // SAFETY: the lock was just taken by this thread, which had no borrow of the state.
            let state = unsafe { self.state() };
            let posted = !self.responses_under_lock.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
            if posted || !state.outbox.is_empty() || !state.overflow.is_empty() || !state.to_close.is_empty() || self.respond.len() > 0 {
                false
            } else {
                // SAFETY: under the lock, on the live worker.
                unsafe { u::ucp_worker_arm(self.worker) == u::UCS_OK }
            }
        };
        if armed && !self.closed.load(Ordering::SeqCst) {
            let mut pollfd = libc::pollfd { fd: self.efd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd; the worker's event fd stays open until the worker is destroyed in
            // `close`, which joins this thread first.
            unsafe { libc::poll(&mut pollfd, 1, SLEEP_MAX_MS) };
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }


    pub(super) fn help_progress(&self, spin: Duration) -> usize {
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

}

#[cfg(test)]
mod tests {
    use crate::config::{Config, HandlerMode};
    use crate::node::Node;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    #[test]
    fn an_idle_node_stops_spinning_and_sleeps_on_its_event_fd() {
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !node.inner.sleeping.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the progress thread never went to sleep");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn helping_an_idle_node_returns_after_the_spin() {
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let start = Instant::now();
        assert_eq!(node.help_progress(Duration::from_millis(20)), 0, "nothing happens on an idle node");
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(node.inner.helpers.load(Ordering::SeqCst), 0, "the helper left");
        node.close();
        assert_eq!(node.help_progress(Duration::from_secs(5)), 0, "a closed node is not progressed");
    }
}
