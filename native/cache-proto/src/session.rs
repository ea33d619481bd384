//! One client connection's protocol state machine, independent of the transport: bytes in, reply
//! bytes out. The TCP server feeds it a socket's input; the fabric server feeds it the payload of a
//! fabric request (binary protocol packets). Protocol detection: a first byte of 0x80 means binary,
//! anything else the text protocol (ASCII and meta commands share one line parser).

use std::sync::Arc;

#[allow(unused_imports)]
use crate::storage::Storage;

/// Where replies go. `append(n)` grows the output by `n` bytes and returns them to fill; a fabric
/// server implements it over a registered buffer so large values are copied once, from the store.
pub trait Reply {
    fn append(&mut self, len: usize) -> &mut [u8];

    fn extend_from(&mut self, data: &[u8]) {
        self.append(data.len()).copy_from_slice(data);
    }
}

impl Reply for Vec<u8> {
    fn append(&mut self, len: usize) -> &mut [u8] {
        let start = self.len();
        self.resize(start + len, 0);
        &mut self[start..]
    }
}

/// Credentials checked by SASL PLAIN (binary) and by the text protocol's `-Y` style authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// (user, password) pairs.
    pub users: Vec<(String, String)>,
}

/// Settings shared by every session of a server.
#[derive(Clone)]
pub struct SessionConfig {
    /// Longest text command line accepted (memcached: 2048 for most commands, more for multi-get).
    pub max_line_bytes: usize,
    /// `Some`: clients must authenticate before any other command.
    pub credentials: Option<Arc<Credentials>>,
    /// Reported by `version` and `stats`.
    pub version: String,
    /// The server's `stats` besides the store's (pid, uptime, connections, threads ...), slow path.
    pub server_stats: Option<Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>>,
}

/// The result of one `Session::process` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Processed {
    /// Input bytes consumed (complete commands only; keep the rest and call again with more).
    pub consumed: usize,
    /// Close the connection after writing the output (`quit`, or an error that desynchronises the
    /// stream, such as a line longer than `max_line_bytes` or a bad binary magic).
    pub close: bool,
}
