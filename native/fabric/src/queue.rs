//! A bounded MPMC queue: the edges between SEDA stages. Blocking pushes are how a slow stage
//! pushes back on the one before it; `try_push` is for the progress thread, which must never block.
//!
//! The length is also kept in an atomic, written only under the mutex: the progress rounds ask
//! `len`, `is_full` and `try_pop` of an empty queue on every spin, and those answer from the
//! atomic without taking the lock (a lock and an unlock per question were a tenth of a spinning
//! thread's samples: docs/fabric.md, "The cost of a spin round").
//!
//! A push or a pop wakes the other side only when a thread waits there: each side counts its
//! waiters under the lock. `Condvar::notify_one` is a `futex` system call whether or not anyone
//! waits, and the request queue's push on the progress thread and pop on a handler made two of
//! them per request (a JVM echo over TCP: about two `futex` calls per message on the server's
//! handler threads, 95 % of them from these notifies; docs/fabric.md).
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
    /// Threads waiting on `not_empty` / `not_full`; changed and read only under `items`' lock, so
    /// a push or pop that sees none cannot miss a waiter (who would look at `items` before waiting).
    pop_waiters: AtomicUsize,
    push_waiters: AtomicUsize,
    /// Notifies sent by pushes and pops (tests: none while nobody waits).
    #[cfg(test)]
    notifies: AtomicUsize,
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
            pop_waiters: AtomicUsize::new(0),
            push_waiters: AtomicUsize::new(0),
            #[cfg(test)]
            notifies: AtomicUsize::new(0),
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

    /// After an item went in (the lock held as `items`): unlocks, then wakes one popper if any waits.
    fn pushed(&self, items: MutexGuard<'_, VecDeque<T>>) {
        self.publish(&items);
        let waiting = self.pop_waiters.load(Ordering::Relaxed) > 0;
        drop(items);
        if waiting {
            #[cfg(test)]
            self.notifies.fetch_add(1, Ordering::Relaxed);
            self.not_empty.notify_one();
        }
    }

    /// After an item came out (the lock held as `items`): unlocks, then wakes one pusher if any waits.
    fn popped(&self, items: MutexGuard<'_, VecDeque<T>>) {
        self.publish(&items);
        let waiting = self.push_waiters.load(Ordering::Relaxed) > 0;
        drop(items);
        if waiting {
            #[cfg(test)]
            self.notifies.fetch_add(1, Ordering::Relaxed);
            self.not_full.notify_one();
        }
    }

    /// Waits on `condvar` (counted in `waiters`) with the lock held as `items`, at most `timeout`.
    fn wait<'a>(&self, condvar: &Condvar, waiters: &AtomicUsize, items: MutexGuard<'a, VecDeque<T>>, timeout: Duration) -> MutexGuard<'a, VecDeque<T>> {
        waiters.fetch_add(1, Ordering::Relaxed);
        let items = condvar.wait_timeout(items, timeout).unwrap().0;
        waiters.fetch_sub(1, Ordering::Relaxed);
        items
    }

    /// Gives the item back when the queue is full.
    pub(crate) fn try_push(&self, item: T) -> Result<(), T> {
        let mut items = self.items.lock().unwrap();
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        self.pushed(items);
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
            items = self.wait(&self.not_full, &self.push_waiters, items, deadline - now);
        }
        items.push_back(item);
        self.pushed(items);
        Ok(())
    }

    /// The next item, if any; an empty queue answers without taking the lock.
    pub(crate) fn try_pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut items = self.items.lock().unwrap();
        let item = items.pop_front();
        if item.is_some() {
            self.popped(items);
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
                self.popped(items);
                return Some(item);
            }
            let now = Instant::now();
            if now >= deadline || stop() {
                return None;
            }
            items = self.wait(&self.not_empty, &self.pop_waiters, items, deadline - now);
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
            drop(self.wait(&self.not_full, &self.push_waiters, items, timeout));
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

    #[test]
    fn pushes_and_pops_wake_nobody_while_nobody_waits() {
        let queue = BoundedQueue::new(4);
        for i in 0..1000 {
            queue.try_push(i).unwrap();
            queue.push_until(i, Instant::now()).unwrap();
            assert_eq!(queue.try_pop(), Some(i));
            assert_eq!(queue.pop_timeout(Duration::ZERO), Some(i));
        }
        assert_eq!(queue.notifies.load(Ordering::Relaxed), 0);
    }

    /// A waiter is never missed: a consumer blocked with a long timeout gets each of many items
    /// pushed at random moments (a missed wake would cost it the whole timeout), and a producer
    /// blocked on a full queue resumes at each pop.
    #[test]
    fn every_waiter_is_woken_under_contention() {
        const ITEMS: u32 = 20_000;
        for capacity in [1, 3] {
            let queue = Arc::new(BoundedQueue::new(capacity));
            let started = Instant::now();
            let consumer = {
                let queue = queue.clone();
                std::thread::spawn(move || {
                    let mut next = 0;
                    while next < ITEMS {
                        let item = queue.pop_timeout(Duration::from_secs(30)).expect("a pushed item, woken in time");
                        assert_eq!(item, next);
                        next += 1;
                    }
                })
            };
            for i in 0..ITEMS {
                if i % 7 == 0 {
                    std::thread::yield_now();
                }
                queue.push_until(i, Instant::now() + Duration::from_secs(30)).unwrap();
            }
            consumer.join().unwrap();
            assert!(started.elapsed() < Duration::from_secs(20), "a wake was missed: {:?}", started.elapsed());
            assert!(queue.is_empty());
            assert_eq!(queue.pop_waiters.load(Ordering::Relaxed) + queue.push_waiters.load(Ordering::Relaxed), 0);
        }
    }
}
