//! The protocol's `stats` counters (memcached's names), shared by every session of a server.
//!
//! Hot-path cost: a session counts into plain integers (`CounterBatch`) and adds them to the
//! shared atomics once per `Session::process` call, so a pipeline of N commands costs a few relaxed
//! atomic adds, not N. Each shared counter sits on its own cache line so that threads flushing
//! different counters do not bounce one line between cores.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
#[repr(align(64))]
struct PaddedCounter(AtomicU64);

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Totals since start (or the last `stats reset`), readable at any time.
        #[derive(Debug, Default)]
        pub struct ProtocolCounters {
            $($name: PaddedCounter,)*
        }

        /// One session's counts not yet added to the shared `ProtocolCounters`.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct CounterBatch {
            $(pub(crate) $name: u64,)*
        }

        impl ProtocolCounters {
            /// Every counter by its memcached name, in memcached's `stats` order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.0.load(Ordering::Relaxed)),)*]
            }

            /// `stats reset`.
            pub fn reset(&self) {
                $(self.$name.0.store(0, Ordering::Relaxed);)*
            }

            pub(crate) fn add(&self, batch: &CounterBatch) {
                $(if batch.$name != 0 {
                    self.$name.0.fetch_add(batch.$name, Ordering::Relaxed);
                })*
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    auth_cmds,
    auth_errors,
);

impl ProtocolCounters {
    /// One counter by name, for tests and the server; `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.snapshot().into_iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

impl CounterBatch {
    pub(crate) fn is_empty(&self) -> bool {
        *self == CounterBatch::default()
    }

    /// One retrieval: a read (`cmd_get`, `get_hits`/`get_misses`) or, when it set a new expiry,
    /// a touch (`cmd_touch`, `touch_hits`/`touch_misses`), as memcached counts gat and mg T.
    pub(crate) fn count_retrieval(&mut self, touch: bool, hit: bool) {
        match (touch, hit) {
            (true, true) => self.touch_hits += 1,
            (true, false) => self.touch_misses += 1,
            (false, true) => self.get_hits += 1,
            (false, false) => self.get_misses += 1,
        }
        if touch {
            self.cmd_touch += 1;
        } else {
            self.cmd_get += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_add_and_reset() {
        let counters = ProtocolCounters::default();
        let batch = CounterBatch { cmd_get: 3, get_hits: 2, get_misses: 1, ..CounterBatch::default() };
        assert!(!batch.is_empty());
        counters.add(&batch);
        counters.add(&batch);
        assert_eq!(counters.get("cmd_get"), Some(6));
        assert_eq!(counters.get("get_hits"), Some(4));
        assert_eq!(counters.get("cmd_set"), Some(0));
        assert_eq!(counters.get("no_such_counter"), None);
        counters.reset();
        assert!(counters.snapshot().iter().all(|(_, value)| *value == 0));
        assert_eq!(counters.snapshot()[0].0, "cmd_get");
        assert_eq!(std::mem::align_of::<PaddedCounter>(), 64);
    }
}
