//! A bounded MPMC queue: the edges between SEDA stages. Blocking pushes are how a slow stage
//! pushes back on the one before it; `try_push` is for the progress thread, which must never block.
//!
//! The length is also kept in an atomic, written only under the mutex: the progress rounds ask
//! `len`, `is_full` and `try_pop` of an empty queue on every spin, and those answer from the
//! atomic without taking the lock (a lock and an unlock per question were a tenth of a spinning
//! thread's samples: docs/fabric.md, "The cost of a spin round").
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) struct BoundedQueue<T> {
    items: Mutex<VecDeque<T>>,
    /// `items.len()`, stored under `items`' lock after every change (SeqCst: a pusher that then
    /// looks whether the progress thread sleeps, and a progress thread that declared its sleep
    /// and then looks here, cannot both miss each other).
    count: AtomicUsize,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
    /// Set by `close`: blocked and later pops return at once.
    closed: std::sync::atomic::AtomicBool,
}

impl<T> BoundedQueue<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        BoundedQueue {
            items: Mutex::new(VecDeque::with_capacity(capacity)),
            count: AtomicUsize::new(0),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity,
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The number of items, read without the lock (a snapshot, as any length of a shared queue).
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Publishes the length of `items` (the caller holds their lock).
    fn publish(&self, items: &MutexGuard<'_, VecDeque<T>>) {
        self.count.store(items.len(), Ordering::SeqCst);
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    /// Gives the item back when the queue is full.
    pub(crate) fn try_push(&self, item: T) -> Result<(), T> {
        let mut items = self.items.lock().unwrap();
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        self.publish(&items);
        drop(items);
        self.not_empty.notify_one();
        Ok(())
    }

    /// Waits for room until `deadline`; gives the item back if there is none by then.
    pub(crate) fn push_until(&self, item: T, deadline: Instant) -> Result<(), T> {
        let mut items = self.items.lock().unwrap();
        while items.len() >= self.capacity {
            let now = Instant::now();
            if now >= deadline {
                return Err(item);
            }
            items = self.not_full.wait_timeout(items, deadline - now).unwrap().0;
        }
        items.push_back(item);
        self.publish(&items);
        drop(items);
        self.not_empty.notify_one();
        Ok(())
    }

    /// The next item, if any; an empty queue answers without taking the lock.
    pub(crate) fn try_pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut items = self.items.lock().unwrap();
        let item = items.pop_front();
        self.publish(&items);
        drop(items);
        if item.is_some() {
            self.not_full.notify_one();
        }
        item
    }

    /// The next item, waiting up to `timeout`; `None` at once after `close`.
    #[cfg(test)]
    pub(crate) fn pop_timeout(&self, timeout: Duration) -> Option<T> {
        self.pop_timeout_unless(timeout, || false)
    }

    /// As `pop_timeout`, and `None` once `stop()` holds: asked under the lock before each wait, so a
    /// `wake_waiters` after whatever makes it hold is never missed.
    pub(crate) fn pop_timeout_unless(&self, timeout: Duration, stop: impl Fn() -> bool) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut items = self.items.lock().unwrap();
        loop {
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return None;
            }
            if let Some(item) = items.pop_front() {
                self.publish(&items);
                drop(items);
                self.not_full.notify_one();
                return Some(item);
            }
            let now = Instant::now();
            if now >= deadline || stop() {
                return None;
            }
            items = self.not_empty.wait_timeout(items, deadline - now).unwrap().0;
        }
    }

    /// Wakes every thread waiting to pop, to look at its `stop` condition again.
    pub(crate) fn wake_waiters(&self) {
        let _items = self.items.lock().unwrap();
        self.not_empty.notify_all();
    }

    /// Waits until the queue has room or `timeout` passes.
    pub(crate) fn wait_not_full(&self, timeout: Duration) {
        if !self.is_full() {
            return;
        }
        let items = self.items.lock().unwrap();
        if items.len() >= self.capacity {
            let _ = self.not_full.wait_timeout(items, timeout).unwrap();
        }
    }

    /// Wakes every waiter and makes later pops return `None` (used at close).
    pub(crate) fn close(&self) {
        let _items = self.items.lock().unwrap();
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }

    pub(crate) fn drain(&self) -> Vec<T> {
        let mut items = self.items.lock().unwrap();
        let drained = items.drain(..).collect();
        self.publish(&items);
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn bounded() {
        let queue = BoundedQueue::new(2);
        assert!(queue.try_push(1).is_ok());
        assert!(queue.try_push(2).is_ok());
        assert_eq!(queue.try_push(3), Err(3));
        assert_eq!(queue.push_until(3, Instant::now() + Duration::from_millis(10)), Err(3));
        assert_eq!(queue.try_pop(), Some(1));
        assert!(queue.try_push(3).is_ok());
        assert_eq!(queue.drain(), vec![2, 3]);
    }

    #[test]
    fn the_length_read_without_the_lock_follows_every_change() {
        let queue = BoundedQueue::new(3);
        assert!(queue.is_empty() && queue.try_pop().is_none());
        queue.try_push(1).unwrap();
        queue.push_until(2, Instant::now()).unwrap();
        assert_eq!(queue.len(), 2);
        assert!(!queue.is_full());
        queue.try_push(3).unwrap();
        assert!(queue.is_full());
        assert_eq!(queue.try_pop(), Some(1));
        assert_eq!(queue.pop_timeout(Duration::from_millis(1)), Some(2));
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.drain(), vec![3]);
        assert!(queue.is_empty() && queue.try_pop().is_none());
        queue.wait_not_full(Duration::from_secs(10)); // room: returns at once
    }

    #[test]
    fn blocked_push_resumes_when_consumer_pops() {
        let queue = Arc::new(BoundedQueue::new(1));
        queue.try_push(0).unwrap();
        let producer = {
            let queue = queue.clone();
            std::thread::spawn(move || queue.push_until(1, Instant::now() + Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(queue.pop_timeout(Duration::from_secs(1)), Some(0));
        assert!(producer.join().unwrap().is_ok());
        assert_eq!(queue.pop_timeout(Duration::from_secs(1)), Some(1));
        assert_eq!(queue.pop_timeout(Duration::from_millis(5)), None);
    }

    #[test]
    fn close_wakes_a_blocked_pop_at_once() {
        let queue: Arc<BoundedQueue<u32>> = Arc::new(BoundedQueue::new(1));
        let consumer = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                (queue.pop_timeout(Duration::from_secs(10)), started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        queue.close();
        let (item, waited) = consumer.join().unwrap();
        assert_eq!(item, None);
        assert!(waited < Duration::from_secs(5), "pop waited {waited:?} after close");
    }
}
