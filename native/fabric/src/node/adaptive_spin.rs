//! How long a thread spins on a worker whose every poll is a system call (`Transport::Tcp`) before
//! it sleeps on the event fd: `AdaptiveSpin`, and each waiting thread's own record of it.

use std::cell::Cell;

/// Spins in a row that must run out before the thread stops spinning: a spin that catches some
/// of its answers pays (a 1 MiB echo server's idle spin over TCP catches about three next
/// requests in four on the quiet VM; stopping after each miss, tried first, left it asleep before
/// almost every request), while on a shared core every spin runs out.
const MISSES_TO_STOP: u8 = 8;
/// Waits without a spin before the first probe.
const PROBE_INTERVAL_MIN: u32 = 16;
/// The longest interval between probes, in waits: while the cores stay shared, a probe costs a
/// full spin on this share of the waits (under 0.1 %).
const PROBE_INTERVAL_MAX: u32 = 1024;

/// One thread's record of its spins on a worker whose every poll is a system call
/// (`Transport::Tcp`): whether it spins before it sleeps on the event fd, as long as spinning
/// pays, judged by what its last spins got.
///
/// Why: over shared memory a poll is a few loads, and a spin catches the peer's message a
/// fraction of a microsecond after it lands. Over TCP every poll is an `epoll_wait` system call,
/// and the kernel wakes a thread sleeping on the socket as it wakes a blocking socket reader. A
/// spin still pays while both ends have a core each: it saves the wake-up (a halted vCPU takes
/// tens of microseconds to wake on the VM). It is pure loss when they share one core, because
/// then the peer cannot run, and so cannot answer, until the spinner stops: on the 2-core VM with
/// a third busy process, a forced-TCP round trip took the waiter's 100 us spin plus the server's
/// 50 us spin (p50 174 us against 8 us without spins), and the message rate halved
/// (docs/fabric.md, "Forced to TCP: where the time goes"). Which of the two holds changes with the
/// load of the machine, so each spinning thread keeps its own record:
///
/// - it spins as it always did (the caller's 100 us, the progress thread's `spin_us`) until
///   `MISSES_TO_STOP` spins in a row ran out without what they waited for; a catch clears the count;
/// - then it sleeps on the fd at once, and every `probe_interval`-th wait spins again (a probe), so
///   that a return to spare cores is noticed; a probe that runs out doubles the interval (up to
///   `PROBE_INTERVAL_MAX`), so that probes cost little while the cores stay shared, and one that
///   catches its answer brings the spins back.
///
/// A wait that finds its answer before any spin tells nothing and changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AdaptiveSpin {
    /// Spins in a row that ran out; at `MISSES_TO_STOP`, no spin (but probes).
    misses: u8,
    /// Waits left until the next probe (while not spinning).
    until_probe: u32,
    /// Waits between probes.
    probe_interval: u32,
    /// The current spin is a probe.
    probing: bool,
}

impl Default for AdaptiveSpin {
    fn default() -> AdaptiveSpin {
        AdaptiveSpin { misses: 0, until_probe: PROBE_INTERVAL_MIN, probe_interval: PROBE_INTERVAL_MIN, probing: false }
    }
}

impl AdaptiveSpin {
    /// Whether the next wait spins (else it sleeps at once). A wait that spins is followed by one
    /// `spun(caught)`, or by none when it was cut short and tells nothing (the progress thread's
    /// idle spin when helpers come in): a probe dropped so is made again at the next wait.
    pub(super) fn spins(&mut self) -> bool {
        if self.misses < MISSES_TO_STOP || self.probing {
            return true;
        }
        debug_assert!(self.until_probe > 0, "{self:?}");
        self.until_probe = self.until_probe.saturating_sub(1);
        if self.until_probe > 0 {
            return false;
        }
        self.probing = true;
        true
    }

    /// The outcome of a spin `spins` allowed: `caught` when what the thread waited for came while
    /// it spun.
    pub(super) fn spun(&mut self, caught: bool) {
        let probing = std::mem::replace(&mut self.probing, false);
        if caught {
            *self = AdaptiveSpin::default();
        } else if probing {
            self.probe_interval = (self.probe_interval * 2).min(PROBE_INTERVAL_MAX);
            self.until_probe = self.probe_interval;
        } else {
            self.misses += 1;
            self.until_probe = self.probe_interval;
        }
    }
}

thread_local! {
    /// The record of a thread's waits (a caller's `Pending::wait`, a puller's `next_request`, a
    /// JVM thread's `await_progress`) on syscall-polled runtimes.
    static WAITER: Cell<AdaptiveSpin> = Cell::new(AdaptiveSpin::default());
}

/// `AdaptiveSpin::spins` on this thread's waiter record.
pub(super) fn waiter_spins() -> bool {
    WAITER.with(|w| {
        let mut record = w.get();
        let spins = record.spins();
        w.set(record);
        spins
    })
}

/// `AdaptiveSpin::spun` on this thread's waiter record.
pub(super) fn waiter_spun(caught: bool) {
    WAITER.with(|w| {
        let mut spin = w.get();
        spin.spun(caught);
        w.set(spin);
    })
}

/// The spin state machine (no worker involved).
#[cfg(test)]
mod tests {
    use super::*;

    /// One wait: reports `caught` if it spins; returns whether it spun.
    fn wait(spin: &mut AdaptiveSpin, caught: bool) -> bool {
        let spins = spin.spins();
        if spins {
            spin.spun(caught);
        }
        spins
    }

    #[test]
    fn spins_that_run_out_in_a_row_stop_the_spinning() {
        let mut spin = AdaptiveSpin::default();
        for i in 0..MISSES_TO_STOP {
            assert!(wait(&mut spin, false), "miss {i} still spins");
        }
        assert!(!wait(&mut spin, false), "no spin after {MISSES_TO_STOP} misses in a row");
    }

    #[test]
    fn a_catch_clears_the_misses() {
        let mut spin = AdaptiveSpin::default();
        for round in 0..100 {
            for _ in 1..MISSES_TO_STOP {
                assert!(wait(&mut spin, false), "round {round}");
            }
            assert!(wait(&mut spin, true), "round {round}");
        }
    }

    #[test]
    fn without_spins_probes_come_at_intervals_that_double_while_they_miss() {
        let mut spin = AdaptiveSpin::default();
        while wait(&mut spin, false) {}
        // Waits from one spin to the next probe; the wait that stopped the spin was the first.
        let mut gaps = Vec::new();
        let mut since = 1;
        for _ in 0..5000 {
            since += 1;
            if wait(&mut spin, false) {
                gaps.push(since);
                since = 0;
            }
        }
        assert_eq!(gaps[..7], [16, 32, 64, 128, 256, 512, 1024]);
        assert!(gaps[7..].iter().all(|&g| g == 1024), "{gaps:?}");
    }

    #[test]
    fn a_probe_that_catches_its_answer_brings_the_spins_back() {
        let mut spin = AdaptiveSpin::default();
        while wait(&mut spin, false) {}
        while !wait(&mut spin, true) {}
        assert_eq!(spin, AdaptiveSpin::default());
        assert!(spin.spins());
    }

    /// The progress thread drops an idle spin that helpers cut short without reporting it
    /// (`progress_loop`): when that spin was a probe, the next wait must probe again, and the
    /// probes must keep coming. (The count of waits to the next probe was 0 then, and the next
    /// `spins` took 1 from it: an overflow panic in a debug build, no probe for 2^32 waits in a
    /// release build.)
    #[test]
    fn a_probe_dropped_without_its_outcome_is_made_again_and_the_probes_go_on() {
        let mut spin = AdaptiveSpin::default();
        while wait(&mut spin, false) {}
        while !spin.spins() {}
        // The probe is dropped: no `spun`.
        assert!(spin.spins(), "the dropped probe is made again");
        spin.spun(false);
        let waits_to_next_probe = (1..=2 * PROBE_INTERVAL_MAX).find(|_| wait(&mut spin, false));
        assert_eq!(waits_to_next_probe, Some(2 * PROBE_INTERVAL_MIN), "{spin:?}");
    }

    #[test]
    fn the_waiter_record_is_per_thread() {
        for _ in 0..MISSES_TO_STOP {
            assert!(waiter_spins());
            waiter_spun(false);
        }
        assert!(!waiter_spins(), "this thread stopped spinning");
        assert!(std::thread::spawn(waiter_spins).join().unwrap(), "another thread starts spinning");
    }
}
