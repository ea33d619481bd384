//! Who drives the worker, and when: the runtime's progress thread (spins for `spin_us` after the
//! last event, then arms the worker and sleeps on its event fd), callers that help while they
//! wait for their own responses (the progress thread stays out of their way), and each node's
//! share of a progress round: its Inline handlers (run after `ucp_worker_progress` returns), its
//! respond stage, deferred work and timers (request deadlines, idle connections, expired
//! reassembly).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ucx_sys as u;

use crate::clock::coarse_ms;
use crate::log::log_warn;

use super::adaptive_spin::{waiter_spins, waiter_spun, AdaptiveSpin};
use super::connections::reap_closed_endpoints;
use super::runtime::{thread_token, InProgressMark, Runtime};
use super::{NodeInner, NodeState};

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
/// Longest wait of the progress thread while helpers drive progress; timers are checked at
/// least this often.
const HELPER_WAIT_MAX: Duration = Duration::from_millis(1);
/// Its wait when no helper is in at the moment (a caller between two requests, or one that just
/// parked): about the gap between a caller's back-to-back requests. A caller that parked while
/// the progress thread was deciding to wait (the JVM's waiting threads park in Java, unseen) then
/// waits this for its response, not `HELPER_WAIT_MAX`: before, that cost the Hadoop RPC engine's
/// calls ~1 ms each.
const HELPER_GAP_WAIT_MAX: Duration = Duration::from_micros(100);

/// Where the progress thread waits while helpers drive progress, and how it is woken. A wake
/// is not kept for a later wait: keeping it (tried) took the progress thread out of its waits and
/// set it against the helpers, and a JVM request's round trip went from ~5 us to ~400 us at the
/// median. Instead a wake cannot be lost in the 1 ms case: `wait` picks its bound after it
/// declared itself waiting, under the mutex, and a leaving helper looks for a waiter after it left
/// (SeqCst on both sides), so either the helper sees the waiter and wakes it, or the waiter sees
/// no helper and waits only `HELPER_GAP_WAIT_MAX`.
#[derive(Default)]
pub(super) struct HelperGate {
    mutex: Mutex<()>,
    condvar: Condvar,
    waiting: AtomicBool,
}

impl HelperGate {
    /// Wakes the waiter if there is one.
    pub(super) fn nudge(&self) {
        if self.waiting.load(Ordering::SeqCst) {
            let _guard = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
            self.condvar.notify_one();
        }
    }

    /// Waits until a `nudge` or the bound passed: `bound()`, read once the wait is declared (so a
    /// helper that leaves after it either sees the waiter or was already left out of the bound).
    /// Returns the bound it waited for.
    pub(super) fn wait(&self, bound: impl Fn() -> Duration) -> Duration {
        let guard = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
        self.waiting.store(true, Ordering::SeqCst);
        let max = bound();
        let _ = self.condvar.wait_timeout(guard, max);
        self.waiting.store(false, Ordering::SeqCst);
        max
    }
}

/// What arming the worker's event fd came to.
enum Arm {
    /// Armed: sleep on the fd.
    Armed,
    /// Events are waiting, or the fd was signalled: progress again.
    Busy,
    /// A node has work to do before anyone may sleep: progress again.
    WorkQueued,
}

/// What one progress round did.
pub(super) struct Round {
    /// How much happened (0 = idle; at least 1 while UCX operations are in flight).
    pub(super) events: usize,
    /// A node whose full dispatch queue kept this round from receiving (backpressure).
    blocked_by: Option<Arc<NodeInner>>,
    /// A message was on its way: UCX moved bytes without handing over a whole message (part of a
    /// large one arrived), a message's first chunks are in reassembly and the rest is coming, or
    /// operations were in flight (a send waiting for room in the socket). Over TCP the gaps in such
    /// a transfer are short, and a thread that slept in each would pay a wake-up per gap: spins
    /// through them count as paid (`AdaptiveSpin`).
    moving: bool,
}

impl Runtime {
    /// For a caller that must wait for room (the pending table is full): one progress round if
    /// the worker is free, else a short sleep.
    pub(super) fn help_progress_or_sleep(&self) {
        if let Ok(guard) = self.lock.try_lock() {
            self.progress_once(&guard, false);
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Spins as a helper: drives progress on this thread (whenever the worker is free) until
    /// `done(events of the last round)` holds, `spin` has passed or `closed` (the caller's node)
    /// is set. The progress thread stays out of the way meanwhile; a helper that leaves without
    /// `done` wakes it, since the caller will now depend on it. The clock is read every 64 rounds
    /// only: on a VM, clock_gettime was a quarter of the spinning time. Returns whether `done`
    /// was reached.
    pub(super) fn spin_as_helper(&self, spin: Duration, closed: &AtomicBool, mut done: impl FnMut(usize) -> bool) -> bool {
        self.helpers.fetch_add(1, Ordering::SeqCst);
        self.helper_sessions.fetch_add(1, Ordering::Relaxed);
        let (reached, _) = self.spin_rounds(spin, closed, &mut done, &mut None);
        self.leave_helpers(!reached);
        reached
    }

    /// The helper's spin (see `spin_as_helper`), inside a helper session. Nothing when `spin` is 0.
    /// `began` gets the spin's first clock reading (at its 64th round), if it got that far.
    /// Returns whether `done` was reached, and whether a message was on its way in any round
    /// (`Round::moving`).
    fn spin_rounds(&self, spin: Duration, closed: &AtomicBool, done: &mut impl FnMut(usize) -> bool, began: &mut Option<Instant>) -> (bool, bool) {
        if spin.is_zero() {
            return (done(0), false);
        }
        let mut rounds = 0u32;
        let mut events = 0;
        let mut moving = false;
        loop {
            if done(events) {
                return (true, moving);
            }
            if closed.load(Ordering::SeqCst) {
                return (false, moving);
            }
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(64) {
                let now = Instant::now();
                if now >= *began.get_or_insert(now) + spin {
                    return (false, moving);
                }
            }
            events = match self.lock.try_lock() {
                Ok(guard) => {
                    let round = self.progress_once(&guard, false);
                    moving |= round.moving;
                    round.events
                }
                Err(_) => {
                    std::hint::spin_loop();
                    0
                }
            };
        }
    }

    /// One round of the engine: UCX progress (unless `backpressure` is asked for and a node's
    /// dispatch queue is full), then for each node its Inline handlers (with no borrow of any
    /// node's state live), its respond stage and deferred work, and timers. The caller holds the
    /// lock.
    pub(super) fn progress_once(&self, _guard: &MutexGuard<'_, ()>, backpressure: bool) -> Round {
        let _mark = InProgressMark::enter(self);
        let blocked_by = if backpressure {
            // SAFETY: under the lock (`_guard`); this borrow ends with the statement.
            unsafe { self.shared() }.nodes.iter().find(|n| n.dispatch.is_full()).cloned()
        } else {
            None
        };
        let mut events = 0usize;
        let mut partial = false;
        // No worker: renewing it failed (`wedge.rs`); nothing to progress.
        if blocked_by.is_none() && !self.worker().is_null() {
            // Written only under the lock (`am_recv_callback`): comparable across the call.
            let received = self.messages_received.load(Ordering::Relaxed);
            // SAFETY: under the lock, with no borrow of the shared state or of a node's state live:
            // the callbacks this runs (of any node of the runtime) borrow the endpoint map and the
            // state of the node they name themselves.
            let ucx_events = unsafe { u::ucp_worker_progress(self.worker()) } as usize;
            partial = ucx_events > 0 && self.messages_received.load(Ordering::Relaxed) == received;
            events += ucx_events;
        }
        // Indexes, not an iterator: each node's round may reach `shared` again (the endpoint map),
        // and an Inline handler may call any node of the runtime.
        // SAFETY: under the lock; the callbacks above have returned; the borrow ends here.
        let node_count = unsafe { self.shared() }.nodes.len();
        // SAFETY: (for every `node_at` below) under the lock; the list holds an Arc of each node for
        // the whole round and does not change during it (nodes join and leave it only under the
        // lock, from outside a round); the borrow of the list ends within the call.
        let node_at = |i: usize| unsafe { &*Arc::as_ptr(&self.shared().nodes[i]) };
        let mut busy = false;
        let mut reassembling = false;
        for i in 0..node_count {
            let node = node_at(i);
            // No borrow of any node's state is live here: the handlers may use this node or another.
            events += node.run_inline_handlers();
            // SAFETY: under the lock; the handlers above have returned and no other reference to
            // this node's state is alive; this one ends with the call.
            let (node_events, node_busy, node_reassembling) = node.round(unsafe { node.state() });
            events += node_events;
            // Completion callbacks of responses received above, with no borrow live.
            events += node.run_ready_callbacks();
            busy |= node_busy;
            reassembling |= node_reassembling;
        }
        // SAFETY: under the lock; no reference from the loop above is alive.
        let shared = unsafe { self.shared() };
        shared.progress_calls = shared.progress_calls.wrapping_add(1);
        // Timers: on every 64th round, and on a round with events once the coarse clock has
        // moved on (one tick, 1-4 ms, far below the timers' periods) since they last ran. Every
        // round with events used to read the precise clock, which a busy or ping-ponging thread
        // then paid per message (docs/fabric.md, "The cost of a spin round").
        let timers_due = shared.progress_calls.is_multiple_of(64) || (events > 0 && coarse_ms() != shared.timers_ran_ms);
        if timers_due {
            shared.timers_ran_ms = coarse_ms();
            let now = Instant::now();
            for i in 0..node_count {
                let node = node_at(i);
                // SAFETY: as for `round` above.
                node.run_timers(unsafe { node.state() }, now);
            }
            // Callbacks of requests that expired in the timers, with no borrow live.
            for i in 0..node_count {
                node_at(i).run_ready_callbacks();
            }
            // (A renewal's failed callbacks run in the next round: its deferred work.)
            self.watch_for_wedge();
            // Last: it may shorten the list of nodes that `node_at` indexes.
            self.retire_finished();
        }
        if events > 0 {
            self.wake_fd_sleeper_elsewhere();
        }
        let events = if busy { events.max(1) } else { events };
        Round { events, blocked_by, moving: partial || busy || reassembling }
    }

    /// Drops closed nodes that UCX no longer holds pointers into.
    fn retire_finished(&self) {
        // SAFETY: called under the lock from `progress_once`.
        let shared = unsafe { self.shared() };
        // SAFETY: each node's state, under the lock.
        shared.nodes.retain(|n| !n.retired.load(Ordering::SeqCst) || NodeInner::ucx_busy(unsafe { n.state() }));
    }

    /// A helper stops driving progress; `wake_progress` when it will now depend on the progress
    /// thread (it parks), so that thread stops waiting for helpers at once.
    fn leave_helpers(&self, gave_up: bool) {
        // The progress thread must take over when the last helper leaves with work outstanding:
        // its own request unanswered, or other callers parked on theirs.
        let wake_progress = gave_up || self.parked_waiters.load(Ordering::SeqCst) > 0;
        if gave_up {
            // Before leaving: the progress thread that sees no helper in also sees this.
            self.helper_give_ups.fetch_add(1, Ordering::SeqCst);
        }
        if self.helpers.fetch_sub(1, Ordering::SeqCst) == 1 && wake_progress {
            self.helper_gate.nudge();
        }
    }

    /// A request was corked (`NodeInner::send_request`) with nobody bound to run a round soon,
    /// maybe: wakes the thread asleep on the event fd, and the progress thread from its wait for
    /// helpers when none is in (a spinning helper runs the round itself).
    pub(super) fn wake_for_corked(&self) {
        self.wake();
        if self.helpers.load(Ordering::SeqCst) == 0 {
            self.helper_gate.nudge();
        }
    }

    /// Ends the progress thread's wait for helpers (a caller parks and nobody else progresses).
    pub(super) fn wake_progress_from_helpers(&self) {
        self.helper_gate.nudge();
    }

    /// While callers drive progress themselves, the progress thread waits for them to leave
    /// (bounded, so timers still run): as long as its own sleep on the event fd while a caller
    /// sleeps there in its place (`spin_then_sleep_as_helper`, which wakes it when it leaves), else
    /// `HELPER_WAIT_MAX` while helpers spin and `HELPER_GAP_WAIT_MAX` between them.
    fn wait_while_helpers(&self) {
        if !self.stopped.load(Ordering::SeqCst) {
            self.helper_gate.wait(|| {
                if self.fd_sleeper.load(Ordering::SeqCst) != 0 {
                    Duration::from_millis(SLEEP_MAX_MS as u64)
                } else if self.helpers.load(Ordering::SeqCst) > 0 {
                    HELPER_WAIT_MAX
                } else {
                    HELPER_GAP_WAIT_MAX
                }
            });
        }
    }

    /// A waiting caller spins as a helper for `spin` (see `spin_as_helper`), then takes the progress
    /// thread's place on the worker's event fd, until `done(events of the last round)` holds,
    /// `max` (from the start) passed, or `closed` (the caller's node) is set: it progresses, arms
    /// the worker and sleeps on the fd as the progress thread would, and the progress thread waits
    /// meanwhile. One helper session for both, so the progress thread is not woken between them.
    /// Returns whether `done` was reached, or `None` when the spin did not reach it and another
    /// caller holds the place (then park as before: the progress thread was woken for it).
    ///
    /// Why: a caller that parks is woken through the progress thread (which wakes on the fd,
    /// receives, and completes or queues what the caller waits for), one thread hand-off more
    /// per message, each a futex wake and a context switch: on two cores shared by both ends of a
    /// Hadoop RPC call those hand-offs, not the transport, made most of a call's median
    /// (docs/fabric.md, "Who waits on the event fd"). Sleeping on the fd itself, the caller is
    /// woken by the message it waits for.
    ///
    /// Wakes: `wake` signals the fd while a caller sleeps there (work queued for progress); a
    /// progress round with events on another thread signals it too (it may have taken the
    /// events this caller sleeps for); leaving nudges the progress thread back to its watch when
    /// something may still arrive for someone else, so that no message waits for a caller that is
    /// gone.
    pub(super) fn spin_then_sleep_as_helper(
        &self,
        spin: Duration,
        max: Duration,
        closed: &AtomicBool,
        mut done: impl FnMut(usize) -> bool,
    ) -> Option<bool> {
        // On a worker polled by system calls this thread spins only while spinning has been paying
        // (`AdaptiveSpin`). A wait answered before any spin tells nothing about that.
        self.helpers.fetch_add(1, Ordering::SeqCst);
        self.helper_sessions.fetch_add(1, Ordering::Relaxed);
        let adaptive = self.polls_by_syscall && !spin.is_zero();
        if adaptive && done(0) {
            self.leave_helpers(false);
            return Some(true);
        }
        let spin = if adaptive && !waiter_spins() { Duration::ZERO } else { spin };
        // `max` counts from the spin's first clock reading (64 rounds, a few microseconds, after
        // the start): a wait answered within those rounds, the common case, reads no clock.
        let mut began = None;
        let (caught, moving) = self.spin_rounds(spin.min(max), closed, &mut done, &mut began);
        if adaptive && !spin.is_zero() {
            // An answer found after the spin's time is no catch of the spin's: this thread was
            // preempted meanwhile, and the peer answered while it did not run (one core shared).
            // A spin that ran out while a message was on its way (`Round::moving`) paid too: it
            // kept a large transfer going between the socket's moments of room or data.
            let in_time = began.is_none_or(|began| began.elapsed() <= spin);
            waiter_spun(if caught { in_time } else { moving });
        }
        if caught {
            self.leave_helpers(false);
            return Some(true);
        }
        let start = began.unwrap_or_else(Instant::now);
        let me = thread_token();
        if self.fd_sleeper.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            self.leave_helpers(true);
            return None;
        }
        self.fd_sleeps.fetch_add(1, Ordering::Relaxed);
        let (reached, others_pending) = self.sleep_rounds(start + max, closed, &mut done);
        self.fd_sleeper.store(0, Ordering::SeqCst);
        self.leave_helpers(!reached);
        // Back to the progress thread's watch at once when anything may still arrive for someone
        // else (requests of a node whose handlers do not pull them, responses to others'
        // requests); else it resumes after its wait (at most SLEEP_MAX_MS), a wake-up per message
        // saved. (A pulling node's next puller takes the fd again: `next_request`.)
        if others_pending || self.serving_nodes.load(Ordering::SeqCst) > 0 {
            self.helper_gate.nudge();
        }
        Some(reached)
    }

    /// The fd sleeper's rounds (see `spin_then_sleep_as_helper`); also returns whether requests of
    /// the runtime's nodes still awaited responses after the last round (their waiters need
    /// someone on the fd once this caller leaves).
    fn sleep_rounds(&self, deadline: Instant, closed: &AtomicBool, done: &mut impl FnMut(usize) -> bool) -> (bool, bool) {
        let mut events = 0;
        let mut others_pending = true;
        loop {
            if done(events) {
                return (true, others_pending);
            }
            if closed.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst) {
                return (false, others_pending);
            }
            let now = Instant::now();
            if now >= deadline {
                return (false, others_pending);
            }
            let armed = {
                let guard = self.lock_for_caller();
                events = self.progress_once(&guard, false).events;
                if self.worker().is_null() {
                    return (false, true); // renewing the worker failed (`wedge.rs`): park instead
                }
                // SAFETY: under the lock (`guard`); each node's state likewise.
                others_pending = unsafe { self.shared() }.nodes.iter().any(|n| !unsafe { n.state() }.pending.is_empty());
                if events > 0 {
                    false
                } else {
                    match self.arm_unless_work(&guard) {
                        Arm::Armed => true,
                        // Events, or a signal (`wake`, or another thread's round that may have done
                        // what this caller waits for): `done` is asked again with an event.
                        Arm::Busy => {
                            events = 1;
                            false
                        }
                        Arm::WorkQueued => false,
                    }
                }
            };
            if !armed {
                continue; // events to look at, or to progress again before the fd can be armed
            }
            let wait_ms = deadline.saturating_duration_since(now).as_micros().div_ceil(1000).clamp(1, SLEEP_MAX_MS as u128) as i32;
            self.poll_event_fd(wait_ms);
        }
    }

    /// Arms the worker's event fd unless a node has work to do first (the caller holds the lock,
    /// `_guard`, and the worker is live).
    fn arm_unless_work(&self, _guard: &MutexGuard<'_, ()>) -> Arm {
        // SAFETY: under the lock (`_guard`); each node's state likewise.
        if unsafe { self.shared() }.nodes.iter().any(|n| n.has_deferred_work(unsafe { n.state() })) {
            return Arm::WorkQueued;
        }
        // SAFETY: under the lock; the caller checked the worker is live.
        match unsafe { u::ucp_worker_arm(self.worker()) } {
            u::UCS_OK => Arm::Armed,
            _ => Arm::Busy,
        }
    }

    /// Sleeps on the worker's event fd (armed by `arm_unless_work`) for at most `wait_ms`.
    fn poll_event_fd(&self, wait_ms: i32) {
        let mut pollfd = libc::pollfd { fd: self.efd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. The fd is the live worker's (read after the arm under the lock);
        // if the worker is renewed or destroyed meanwhile, the poll holds its own reference to the
        // file and returns at its timeout at the latest (`stop` also joins the progress thread
        // before it destroys the worker).
        unsafe { libc::poll(&mut pollfd, 1, wait_ms) };
    }

    pub(super) fn progress_loop(self: Arc<Self>) {
        // When the idle spin began: read at its 32nd round (the first time it is asked about),
        // not at its first: a thread that ping-pongs ends most spins within 32 rounds, and read at
        // the first, the clock cost it a read per message.
        let mut idle_since: Option<Instant> = None;
        let mut idle_rounds = 0u32;
        // On a worker polled by system calls: this thread's record of its idle spins, and whether
        // the idle time under way spins (None until it is decided; false after a sleep, until
        // events come again).
        let mut idle_spins = AdaptiveSpin::default();
        let mut idle_spinning: Option<bool> = None;
        // The last round with events had a message on its way (`Round::moving`).
        let mut moving = false;
        let mut helper_sessions_seen = 0u64;
        let mut give_ups_seen = 0u64;
        while !self.stopped.load(Ordering::SeqCst) {
            // While callers drive progress (or did since the last look) and none gave up, this
            // round only comes before another wait for them (below). With the lock busy then (a
            // caller's round or its next request), it is skipped instead of queueing on the mutex:
            // the caller's unlock then had to wake this thread, a futex system call and a
            // context switch in the caller's path (forced TCP: 0.3 us per message at 8 B, 8 us per
            // 64 KiB message; docs/fabric.md, "Forced to TCP: where the time goes").
            let callers_active = (self.helpers.load(Ordering::SeqCst) > 0
                || self.helper_sessions.load(Ordering::Relaxed) != helper_sessions_seen)
                && self.helper_give_ups.load(Ordering::SeqCst) == give_ups_seen;
            let guard = match self.lock.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if callers_active => None,
                Err(std::sync::TryLockError::WouldBlock) => Some(self.lock.lock().unwrap_or_else(|e| e.into_inner())),
            };
            let round = match guard {
                // Backpressure: with a dispatch queue full, stop taking messages off the wire.
                Some(guard) => self.progress_once(&guard, true),
                None => Round { events: 0, blocked_by: None, moving: false },
            };
            // Callers spinning on their own responses drive progress: stay out of their way, also
            // in the moments between their requests.
            // But a helper that gave up parked and now depends on this thread: then no gap wait,
            // which would hold its response (arriving meanwhile, unseen) until the wait ends and
            // cost this thread a sleep more per request (a JVM thread waiting for a Hadoop RPC
            // call gives up after its short spin on every call: 2 sleeps of this thread per call).
            let sessions = self.helper_sessions.load(Ordering::Relaxed);
            let helpers_in = self.helpers.load(Ordering::SeqCst) > 0;
            if helpers_in || sessions != helper_sessions_seen {
                helper_sessions_seen = sessions;
                let give_ups = self.helper_give_ups.load(Ordering::SeqCst);
                let gave_up = give_ups != give_ups_seen;
                give_ups_seen = give_ups;
                if helpers_in || !gave_up {
                    if self.polls_by_syscall {
                        // An idle spin cut short by the helpers tells nothing.
                        (idle_spinning, idle_since) = (None, None);
                    }
                    self.wait_while_helpers();
                    continue;
                }
            }
            if round.events > 0 {
                if idle_spinning == Some(true) && !moving {
                    // Events after the spin's time came while this thread was preempted: no catch.
                    let spin = Duration::from_micros(self.spin_us.load(Ordering::Relaxed));
                    idle_spins.spun(idle_since.is_none_or(|since| since.elapsed() <= spin));
                }
                moving = round.moving;
                idle_spinning = None;
                idle_rounds = 0;
                idle_since = None;
                continue;
            }
            if self.lock_waiters.load(Ordering::SeqCst) > 0 {
                std::thread::yield_now();
                continue;
            }
            if let Some(node) = round.blocked_by {
                node.dispatch.wait_not_full(Duration::from_millis(1));
                continue;
            }
            // On a worker polled by system calls, whether this idle time spins at all
            // (`AdaptiveSpin`); in the middle of a transfer it does, outside the record.
            if self.polls_by_syscall
                && !*idle_spinning.get_or_insert_with(|| moving || idle_spins.spins())
            {
                self.sleep_on_event_fd();
                continue;
            }
            // The spin's clock starts at the 32nd idle round after activity (`idle_since`).
            idle_rounds = idle_rounds.wrapping_add(1);
            if !idle_rounds.is_multiple_of(32) {
                std::hint::spin_loop();
                continue;
            }
            let spin = Duration::from_micros(self.spin_us.load(Ordering::Relaxed));
            let now = Instant::now();
            if now.duration_since(*idle_since.get_or_insert(now)) < spin {
                std::hint::spin_loop();
                continue;
            }
            if self.polls_by_syscall {
                if idle_spinning == Some(true) && !moving {
                    idle_spins.spun(false);
                }
                // Asleep again at once while nothing happens (a sleep ends at least every
                // SLEEP_MAX_MS for the timers).
                idle_spinning = Some(false);
            }
            self.sleep_on_event_fd();
            // After a sleep, go back to sleep quickly if idle.
            let now = Instant::now();
            idle_since = Some(now.checked_sub(spin).unwrap_or(now));
        }
    }

    /// Arms the worker and sleeps on its event fd until traffic arrives, `wake` is called, or the
    /// timer period passes.
    fn sleep_on_event_fd(&self) {
        if self.worker().is_null() {
            // Renewing the worker failed (`wedge.rs`): nothing to wait for but the timers.
            std::thread::sleep(Duration::from_millis(SLEEP_MAX_MS as u64));
            return;
        }
        self.sleeping.store(true, Ordering::SeqCst);
        let armed = {
            let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            !self.worker().is_null() && matches!(self.arm_unless_work(&guard), Arm::Armed)
        };
        if armed && !self.stopped.load(Ordering::SeqCst) {
            self.poll_event_fd(SLEEP_MAX_MS);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

impl NodeInner {
    /// This node's share of a progress round, after `ucp_worker_progress`: the respond stage,
    /// requests waiting for room in the dispatch queue, connections to close. Returns how much
    /// happened, whether UCX operations of the node are in flight, and whether a message of the
    /// node is in reassembly.
    fn round(&self, state: &mut NodeState) -> (usize, bool, bool) {
        // Every step looks first whether it has anything to do, without a lock or an allocation:
        // most rounds of a spinning thread have nothing (docs/fabric.md, "The cost of a spin round").
        let mut events = 0;
        if !state.corked.is_empty() {
            events += self.flush_corked(state);
        }
        self.take_responses_under_lock(&mut state.outbox);
        while let Some(outgoing) = self.respond.try_pop() {
            state.outbox.push_back(outgoing);
        }
        if !state.outbox.is_empty() {
            events += self.send_outbox(state);
        }
        if state.same_host.has_outgoing() {
            events += self.flush_same_host(state);
        }
        while let Some(request) = state.overflow.pop_front() {
            if let Err(request) = self.dispatch.try_push(request) {
                state.overflow.push_front(request);
                break;
            }
            events += 1;
        }
        if !state.to_close.is_empty() {
            for (conn_id, force) in std::mem::take(&mut state.to_close) {
                self.close_conn(state, conn_id, force);
                events += 1;
            }
        }
        if !state.to_reconnect.is_empty() {
            for reconnect in std::mem::take(&mut state.to_reconnect) {
                self.reconnect(state, reconnect);
                events += 1;
            }
        }
        if !state.closing.is_empty() {
            reap_closed_endpoints(state);
        }
        // Operations in flight need progress even when nothing happened this round.
        (events, state.ucx_ops_in_flight > 0 || !state.overflow.is_empty(), !state.partials.is_empty())
    }

    fn run_timers(&self, state: &mut NodeState, now: Instant) {
        if now.duration_since(state.last_timeout_scan) >= TIMEOUT_SCAN_PERIOD {
            state.last_timeout_scan = now;
            self.expire_requests(state);
            self.close_lingering(state, coarse_ms());
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
    }

    /// Work the progress thread must do before it may sleep.
    pub(super) fn has_deferred_work(&self, state: &NodeState) -> bool {
        !state.outbox.is_empty()
            || !state.corked.is_empty()
            || state.same_host.has_outgoing()
            || !state.inline_ready.is_empty()
            || self.callbacks_queued.load(Ordering::Acquire) > 0
            || !state.overflow.is_empty()
            || !state.to_close.is_empty()
            || !state.to_reconnect.is_empty()
            || !self.respond.is_empty()
            || self.has_responses_under_lock()
    }

    /// `Runtime::spin_then_sleep_as_helper` until `until()` holds or `max` passed.
    pub(super) fn await_progress(&self, spin: Duration, max: Duration, mut until: impl FnMut() -> bool) -> Option<bool> {
        if self.closed.load(Ordering::SeqCst) || self.in_progress_here() {
            return Some(until());
        }
        self.runtime.spin_then_sleep_as_helper(spin, max, &self.closed, |_| until())
    }

    pub(super) fn help_progress(&self, spin: Duration) -> usize {
        if self.closed.load(Ordering::SeqCst) || self.in_progress_here() {
            return 0;
        }
        let mut happened = 0;
        self.runtime.spin_as_helper(spin, &self.closed, |events| {
            happened = events;
            events > 0
        });
        happened
    }
}

#[cfg(test)]
mod tests {
    use super::HelperGate;
    use crate::config::{Config, HandlerMode};
    use crate::node::Node;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    #[test]
    fn a_helper_gate_nudged_during_the_wait_ends_it() {
        let gate = std::sync::Arc::new(HelperGate::default());
        let nudger = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                while !gate.waiting.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                gate.nudge();
            })
        };
        let start = Instant::now();
        assert_eq!(gate.wait(|| Duration::from_secs(30)), Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(20), "woken, not timed out");
        nudger.join().unwrap();
    }

    #[test]
    fn the_gate_reads_its_bound_after_declaring_the_wait() {
        let gate = HelperGate::default();
        // Read with the wait declared: a helper that leaves from then on sees the waiter and
        // nudges it, and one that left before was left out of the bound.
        let bound = gate.wait(|| {
            assert!(gate.waiting.load(Ordering::SeqCst));
            Duration::from_millis(1)
        });
        assert_eq!(bound, Duration::from_millis(1));
        gate.nudge(); // no waiter: nothing kept
        let start = Instant::now();
        assert_eq!(gate.wait(|| Duration::from_millis(5)), Duration::from_millis(5));
        assert!(start.elapsed() >= Duration::from_millis(5));
    }

    #[test]
    fn an_idle_node_stops_spinning_and_sleeps_on_its_event_fd() {
        crate::node::runtime::runtime_of_this_thread();
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !node.inner.runtime.sleeping.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the progress thread never went to sleep");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn helping_an_idle_node_returns_after_the_spin() {
        // Alone on its runtime: events of another test's node would end the spin (CI saw 1).
        crate::node::runtime::runtime_of_this_thread();
        let node = Node::start(Config { handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
        let start = Instant::now();
        assert_eq!(node.help_progress(Duration::from_millis(20)), 0, "nothing happens on an idle node");
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(node.inner.runtime.helpers.load(Ordering::SeqCst), 0, "the helper left");
        node.close();
        assert_eq!(node.help_progress(Duration::from_secs(5)), 0, "a closed node is not progressed");
    }
}
