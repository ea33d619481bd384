//! Time for the protocols: the clock sessions read (system time, or a manual clock in tests), and
//! memcached's `exptime` rules turned into the absolute Unix seconds the `Storage` trait takes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// memcached's `REALTIME_MAXDELTA`: an `exptime` up to 30 days is relative to now, a larger one is
/// an absolute Unix time.
pub const EXPTIME_RELATIVE_S_MAX: i64 = 60 * 60 * 24 * 30;

/// The absolute time given to items that expire at once (negative `exptime`, or an absolute time
/// already past): one second after the epoch, always in the past, and never 0 ("never expires").
pub const EXPIRED_UNIX_S: u64 = 1;

/// Converts a client's `exptime` into absolute Unix seconds, 0 meaning never.
pub fn exptime_to_unix_s(exptime: i64, now_unix_s: u64) -> u64 {
    if exptime == 0 {
        return 0;
    }
    if exptime < 0 {
        return EXPIRED_UNIX_S;
    }
    if exptime > EXPTIME_RELATIVE_S_MAX {
        let absolute = exptime as u64;
        // memcached: an absolute time at or before the server's start expires at once. Our bound is
        // "now", which also keeps the result strictly in the past and never 0.
        return if absolute <= now_unix_s { EXPIRED_UNIX_S } else { absolute };
    }
    now_unix_s + exptime as u64
}

/// Seconds left before `exptime_unix_s`, as meta's `t` flag prints them: -1 for "never".
pub fn ttl_remaining_s(exptime_unix_s: u64, now_unix_s: u64) -> i64 {
    if exptime_unix_s == 0 {
        return -1;
    }
    // The store may judge expiry by its own clock a tick apart: never print a negative TTL.
    exptime_unix_s.saturating_sub(now_unix_s) as i64
}

/// Where sessions (and the reference store) read the time. `Clock::system()` in production; tests
/// use `Clock::manual` and move time by hand.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual_unix_s: Option<Arc<AtomicU64>>,
}

impl Clock {
    pub fn system() -> Clock {
        Clock { manual_unix_s: None }
    }

    /// A clock that stands still at `start_unix_s` until `set` or `advance`. Clones share the time.
    pub fn manual(start_unix_s: u64) -> Clock {
        assert!(start_unix_s > 0, "0 means 'never' to the store");
        Clock { manual_unix_s: Some(Arc::new(AtomicU64::new(start_unix_s))) }
    }

    /// A manual clock reading `now_unix_s`, which the caller may share with a store's clock.
    pub fn manual_shared(now_unix_s: Arc<AtomicU64>) -> Clock {
        assert!(now_unix_s.load(Ordering::Relaxed) > 0, "0 means 'never' to the store");
        Clock { manual_unix_s: Some(now_unix_s) }
    }

    pub fn now_unix_s(&self) -> u64 {
        match &self.manual_unix_s {
            Some(manual) => manual.load(Ordering::Relaxed),
            None => SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1),
        }
    }

    pub fn advance(&self, seconds: u64) {
        let manual = self.manual_unix_s.as_ref().expect("only a manual clock can be moved");
        manual.fetch_add(seconds, Ordering::Relaxed);
    }

    pub fn set(&self, now_unix_s: u64) {
        let manual = self.manual_unix_s.as_ref().expect("only a manual clock can be moved");
        manual.store(now_unix_s, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    #[test]
    fn exptime_rules() {
        assert_eq!(exptime_to_unix_s(0, NOW), 0);
        assert_eq!(exptime_to_unix_s(-1, NOW), EXPIRED_UNIX_S);
        assert_eq!(exptime_to_unix_s(i64::MIN, NOW), EXPIRED_UNIX_S);
        assert_eq!(exptime_to_unix_s(1, NOW), NOW + 1);
        assert_eq!(exptime_to_unix_s(EXPTIME_RELATIVE_S_MAX, NOW), NOW + EXPTIME_RELATIVE_S_MAX as u64);
        // One second more is an absolute time, long past.
        assert_eq!(exptime_to_unix_s(EXPTIME_RELATIVE_S_MAX + 1, NOW), EXPIRED_UNIX_S);
        assert_eq!(exptime_to_unix_s(NOW as i64, NOW), EXPIRED_UNIX_S);
        assert_eq!(exptime_to_unix_s(NOW as i64 + 10, NOW), NOW + 10);
        assert_eq!(exptime_to_unix_s(u32::MAX as i64, NOW), u32::MAX as u64);
    }

    #[test]
    fn ttl_remaining() {
        assert_eq!(ttl_remaining_s(0, NOW), -1);
        assert_eq!(ttl_remaining_s(NOW + 5, NOW), 5);
        assert_eq!(ttl_remaining_s(NOW - 5, NOW), 0);
    }

    #[test]
    fn manual_clock_is_shared_by_clones() {
        let clock = Clock::manual(NOW);
        let clone = clock.clone();
        clock.advance(3);
        assert_eq!(clone.now_unix_s(), NOW + 3);
        clone.set(NOW);
        assert_eq!(clock.now_unix_s(), NOW);
        assert!(Clock::system().now_unix_s() > NOW);
    }
}
