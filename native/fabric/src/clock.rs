//! A coarse monotonic clock for deadlines and idle times. Hot paths read it instead of
//! `Instant::now()`: on virtual machines a precise clock read cost tens of nanoseconds and showed
//! up as a tenth of the time of a small request. Resolution is the kernel tick (1-4 ms), far
//! below the timeouts it serves (seconds).

/// Milliseconds on CLOCK_MONOTONIC_COARSE.
pub(crate) fn coarse_ms() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec for the duration of the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
    debug_assert_eq!(status, 0);
    now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
mod tests {
    #[test]
    fn coarse_clock_moves_forward() {
        let before = super::coarse_ms();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = super::coarse_ms();
        assert!(after >= before + 10, "{before} -> {after}");
    }
}
