//! The per-node queue between the fabric's progress thread and the Java threads that complete
//! asynchronous requests.
//!
//! An asynchronous request's callback runs on whatever thread drives the fabric's progress (its
//! progress thread, a native thread that must never enter the JVM: attaching it would put Java on
//! the fabric's hot path and tie the thread's lifetime to the JVM's). The callback only pushes
//! `(tag, result)` here. Java threads pull, many completions per JNI call (`nodePollCompletions`):
//! the completer thread (`io.slipstream.fabric.Completer`), blocking, and threads waiting on a
//! future of the node (`get`/`join`), which spin on the queue for a short while before they park.
//!
//! Wake-ups cost a futex call on the pushing thread and a context switch: a push wakes a blocked
//! poller only if one is blocked (`sleepers`) and no Java thread is spinning on the queue
//! (`helpers`), which would take the completion anyway. A helper that stops spinning with
//! completions left wakes a blocked poller.
//!
//! Bound: the Java side admits at most `capacity` asynchronous requests awaiting completion (a
//! semaphore), so the queue never holds more. The progress thread cannot wait, so a push above the
//! bound (a bridge bug) is still accepted, counted in `overflows`, and asserted in debug builds.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fabric::Buffer;

/// A request's tag and its response (the buffer) or failure.
pub(crate) type Completion = (i64, fabric::Result<Buffer>);

pub(crate) struct Completions {
    state: Mutex<State>,
    ready: Condvar,
    /// `state.items.len()`, readable without the lock: spinning helpers poll it.
    queued: AtomicUsize,
    capacity: usize,
}

struct State {
    items: VecDeque<Completion>,
    closed: bool,
    overflows: u64,
    /// Pollers blocked in `pop_wait`.
    sleepers: usize,
    /// Java threads spinning on the queue (between `enter_helper` and `leave_helper`).
    helpers: usize,
    /// Wake-ups sent (for tests).
    wakeups: u64,
}

impl Completions {
    pub(crate) fn new(capacity: usize) -> Completions {
        assert!(capacity > 0);
        Completions {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity.min(1 << 16)),
                closed: false,
                overflows: 0,
                sleepers: 0,
                helpers: 0,
                wakeups: 0,
            }),
            ready: Condvar::new(),
            queued: AtomicUsize::new(0),
            capacity,
        }
    }

    /// Never blocks beyond the short critical section, never panics: runs on the progress thread.
    pub(crate) fn push(&self, tag: i64, result: fabric::Result<Buffer>) {
        let mut state = self.lock();
        if state.items.len() >= self.capacity {
            state.overflows += 1;
            debug_assert!(false, "completion queue above its bound of {}", self.capacity);
        }
        state.items.push_back((tag, result));
        self.queued.store(state.items.len(), Ordering::Release);
        let wake = state.sleepers > 0 && state.helpers == 0;
        if wake {
            state.wakeups += 1;
        }
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The oldest completion, waiting at most `timeout` if there is none (once: a wake-up by
    /// `close`, by a departing helper or a spurious one returns `None` early, which the caller
    /// treats like a timeout).
    pub(crate) fn pop_wait(&self, timeout: Duration) -> Option<Completion> {
        if timeout.is_zero() {
            return self.try_pop();
        }
        let mut state = self.lock();
        if state.items.is_empty() && !state.closed {
            state.sleepers += 1;
            state = self
                .ready
                .wait_timeout(state, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            state.sleepers -= 1;
        }
        self.pop_locked(&mut state)
    }

    /// The oldest completion if there is one; does not take the lock when the queue is empty.
    pub(crate) fn try_pop(&self) -> Option<Completion> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut state = self.lock();
        self.pop_locked(&mut state)
    }

    /// Whether completions are queued (without the lock).
    pub(crate) fn has_items(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    /// Puts back a completion that could not be handed to Java, as the oldest.
    pub(crate) fn unpop(&self, item: Completion) {
        let mut state = self.lock();
        state.items.push_front(item);
        self.queued.store(state.items.len(), Ordering::Release);
    }

    /// A Java thread starts spinning on the queue: pushes stop waking blocked pollers.
    pub(crate) fn enter_helper(&self) {
        self.lock().helpers += 1;
    }

    /// The helper stops spinning: a blocked poller is woken if completions are left.
    pub(crate) fn leave_helper(&self) {
        let mut state = self.lock();
        state.helpers = state.helpers.saturating_sub(1);
        let wake = state.helpers == 0 && state.sleepers > 0 && !state.items.is_empty();
        if wake {
            state.wakeups += 1;
        }
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Wakes every poller; completions pushed later (failures of requests in flight) still queue.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    #[allow(dead_code)]
    pub(crate) fn overflows(&self) -> u64 {
        self.lock().overflows
    }

    #[allow(dead_code)]
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    #[allow(dead_code)]
    pub(crate) fn wakeups(&self) -> u64 {
        self.lock().wakeups
    }

    fn pop_locked(&self, state: &mut State) -> Option<Completion> {
        let item = state.items.pop_front();
        if item.is_some() {
            self.queued.store(state.items.len(), Ordering::Release);
        }
        item
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn fifo_with_timeouts() {
        let queue = Completions::new(4);
        assert!(queue.pop_wait(Duration::from_millis(1)).is_none());
        queue.push(1, Err(fabric::Error::Closed));
        queue.push(2, Err(fabric::Error::Overloaded));
        assert_eq!(queue.try_pop().map(|c| c.0), Some(1));
        queue.push(3, Err(fabric::Error::Overloaded));
        assert_eq!(queue.pop_wait(Duration::ZERO).map(|c| c.0), Some(2));
        let third = queue.pop_wait(Duration::from_secs(1)).unwrap();
        assert_eq!(third.0, 3);
        queue.unpop(third);
        assert_eq!(queue.try_pop().map(|c| c.0), Some(3));
        assert!(queue.try_pop().is_none());
        assert!(queue.pop_wait(Duration::ZERO).is_none());
        assert_eq!(queue.overflows(), 0);
        assert_eq!(queue.wakeups(), 0, "nobody was blocked: no wake-up");
    }

    #[test]
    fn close_wakes_a_poller() {
        let queue = Arc::new(Completions::new(4));
        let poller = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let item = queue.pop_wait(Duration::from_secs(10));
                (item.is_none(), start.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        queue.close();
        let (empty, waited) = poller.join().unwrap();
        assert!(empty);
        assert!(
            waited < Duration::from_secs(5),
            "close did not wake the poller: {waited:?}"
        );
        assert!(queue.is_closed());
        // A closed queue does not block.
        let start = Instant::now();
        assert!(queue.pop_wait(Duration::from_secs(10)).is_none());
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    fn blocked_poller(queue: &Arc<Completions>) -> std::thread::JoinHandle<(Option<i64>, Duration)> {
        let polled = queue.clone();
        let poller = std::thread::spawn(move || {
            let start = Instant::now();
            let item = polled.pop_wait(Duration::from_secs(10));
            (item.map(|c| c.0), start.elapsed())
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while queue.lock().sleepers == 0 {
            assert!(Instant::now() < deadline, "the poller never blocked");
            std::thread::sleep(Duration::from_millis(1));
        }
        poller
    }

    #[test]
    fn a_push_wakes_a_blocked_poller() {
        let queue = Arc::new(Completions::new(4));
        let poller = blocked_poller(&queue);
        queue.push(7, Err(fabric::Error::Closed));
        let (tag, waited) = poller.join().unwrap();
        assert_eq!(tag, Some(7));
        assert!(waited < Duration::from_secs(5));
        assert_eq!(queue.wakeups(), 1);
    }

    #[test]
    fn helpers_suppress_wakeups_and_wake_on_leaving() {
        let queue = Arc::new(Completions::new(8));
        let poller = blocked_poller(&queue);
        queue.enter_helper();
        queue.push(1, Err(fabric::Error::Closed));
        assert_eq!(queue.wakeups(), 0, "a helper is spinning: the blocked poller stays asleep");
        assert_eq!(queue.try_pop().map(|c| c.0), Some(1), "the helper takes it");
        queue.push(2, Err(fabric::Error::Closed));
        queue.leave_helper();
        assert_eq!(queue.wakeups(), 1, "the helper left a completion behind: the poller is woken");
        let (tag, waited) = poller.join().unwrap();
        assert_eq!(tag, Some(2));
        assert!(waited < Duration::from_secs(5));
        // Leaving with nothing left wakes nobody.
        queue.enter_helper();
        queue.leave_helper();
        assert_eq!(queue.wakeups(), 1);
    }
}
