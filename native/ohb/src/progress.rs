//! Progress lines on stderr, shared by every suite: one line per measured step.

use std::time::Instant;

/// "[3/44] fabric-tcp 64 KiB ... 45.2 us" lines on stderr.
pub struct Progress {
    pub enabled: bool,
    pub total: usize,
    pub done: usize,
    started: Instant,
}

impl Progress {
    pub fn new(enabled: bool, total: usize) -> Progress {
        Progress { enabled, total, done: 0, started: Instant::now() }
    }

    pub fn begin(&mut self, label: &str) {
        self.done += 1;
        assert!(self.done <= self.total, "more steps than announced");
        if self.enabled {
            eprint!("[{}/{}] {label} ...", self.done, self.total);
        }
    }

    pub fn end(&mut self, outcome: &str) {
        if self.enabled {
            eprintln!(" {outcome}  ({:.0} s)", self.started.elapsed().as_secs_f64());
        }
    }
}
