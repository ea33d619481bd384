//! Logging to stderr by verbosity (`-v`: info, `-vv`: connection events). Warnings and notices
//! always print.
use std::fmt::Arguments;
use std::sync::atomic::{AtomicU32, Ordering};

static VERBOSITY: AtomicU32 = AtomicU32::new(0);

pub fn set_verbosity(level: u32) {
    VERBOSITY.store(level, Ordering::Relaxed);
}

pub fn warn(message: Arguments<'_>) {
    eprintln!("slipstream-cache: {message}");
}

/// What an operator should see once at start whatever the verbosity (e.g. the SSD tier's log).
pub fn notice(message: Arguments<'_>) {
    eprintln!("slipstream-cache: {message}");
}

pub fn info(message: Arguments<'_>) {
    if VERBOSITY.load(Ordering::Relaxed) >= 1 {
        eprintln!("slipstream-cache: {message}");
    }
}

pub fn debug(message: Arguments<'_>) {
    if VERBOSITY.load(Ordering::Relaxed) >= 2 {
        eprintln!("slipstream-cache: {message}");
    }
}
