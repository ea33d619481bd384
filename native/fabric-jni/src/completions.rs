//! The per-node queue between the fabric's progress thread and the Java completer thread.
//!
//! An asynchronous request's callback runs on the progress thread, a native thread that must never
//! enter the JVM (attaching it would put Java on the fabric's hot path and tie the thread's lifetime
//! to the JVM's). The callback only pushes `(tag, result)` here; the completer thread
//! (`io.slipstream.fabric.Completer`) pops through `nodePollCompletion`, a blocking native call.
//!
//! Bound: the Java side admits at most `capacity` asynchronous requests awaiting completion (a
//! semaphore), so the queue never holds more. The progress thread cannot wait, so a push above the
//! bound (a bridge bug) is still accepted, counted in `overflows`, and asserted in debug builds.
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fabric::Response;

pub(crate) type Completion = (i64, fabric::Result<Response>);

pub(crate) struct Completions {
    state: Mutex<State>,
    ready: Condvar,
    capacity: usize,
}

struct State {
    items: VecDeque<Completion>,
    closed: bool,
    overflows: u64,
}

impl Completions {
    pub(crate) fn new(capacity: usize) -> Completions {
        assert!(capacity > 0);
        Completions {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity.min(1 << 16)),
                closed: false,
                overflows: 0,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    /// Never blocks beyond the short critical section, never panics: runs on the progress thread.
    pub(crate) fn push(&self, tag: i64, result: fabric::Result<Response>) {
        let mut state = self.lock();
        if state.items.len() >= self.capacity {
            state.overflows += 1;
            debug_assert!(false, "completion queue above its bound of {}", self.capacity);
        }
        state.items.push_back((tag, result));
        drop(state);
        self.ready.notify_one();
    }

    /// The oldest completion, waiting at most `timeout` (once: a wake-up by `close` or a spurious
    /// one returns `None` early, which the caller treats like a timeout).
    pub(crate) fn poll(&self, timeout: Duration) -> Option<Completion> {
        let mut state = self.lock();
        if state.items.is_empty() && !timeout.is_zero() {
            state = self
                .ready
                .wait_timeout(state, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.items.pop_front()
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
        assert!(queue.poll(Duration::from_millis(1)).is_none());
        queue.push(1, Err(fabric::Error::Closed));
        queue.push(2, Err(fabric::Error::Overloaded));
        assert_eq!(queue.poll(Duration::ZERO).map(|c| c.0), Some(1));
        assert_eq!(queue.poll(Duration::ZERO).map(|c| c.0), Some(2));
        assert!(queue.poll(Duration::ZERO).is_none());
        assert_eq!(queue.overflows(), 0);
    }

    #[test]
    fn close_wakes_a_poller() {
        let queue = Arc::new(Completions::new(4));
        let poller = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let item = queue.poll(Duration::from_secs(10));
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
    }
}
