//! Minimal logging to stderr. `SLIPSTREAM_LOG=debug` enables debug lines. The fabric logs only
//! events an operator acts on (protocol errors, peer failures); never per message.
use std::sync::OnceLock;

pub(crate) fn debug_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("SLIPSTREAM_LOG").map(|v| v == "debug").unwrap_or(false))
}

macro_rules! log_warn {
    ($($arg:tt)*) => { eprintln!("[slipstream-fabric WARN] {}", format_args!($($arg)*)) };
}

macro_rules! log_debug {
    ($($arg:tt)*) => {
        if $crate::log::debug_enabled() { eprintln!("[slipstream-fabric DEBUG] {}", format_args!($($arg)*)) }
    };
}

pub(crate) use {log_debug, log_warn};
