//! memcached's protocols, executed against the `Storage` trait.
//!
//! - `storage`: the trait a store implements (owned here, so the protocols are testable without a
//!   store and the store without a network).
//! - `session`: one connection's state machine, bytes in, replies out, for any transport.
//! - `text`, `meta`: the ASCII protocol's classic and meta commands.
//! - `binary`: the binary protocol's header, opcodes and status codes (shared with the client);
//!   `binary_session` executes binary requests.
//! - `clock`: exptime rules and the time sessions read; `counters`: the `stats` counters.
//! - `reference` (tests, feature `reference-store`): a simple `Storage`, the oracle of the tests.
//!
//! Compatibility: replies follow memcached 1.6.18 byte for byte (tests/against_memcached.rs
//! compares them with a running memcached). Deliberate differences:
//! - A text line longer than `max_line_bytes` without a newline gets "CLIENT_ERROR line too long"
//!   before the close (memcached closes silently). get/gets/gat/gats lines may grow to
//!   `text::RETRIEVAL_LINE_BYTES_MAX`; memcached allows get/gets lines without bound.
//! - Bounded output: one retrieval returns at most `text::RETRIEVAL_REPLY_BYTES_MAX` value bytes
//!   (then memcached's "SERVER_ERROR out of memory writing get response" ends it), and `process`
//!   pauses between commands past `session::REPLY_BYTES_PER_PROCESS_MAX` (`output_full`).
//! - memcached 1.6.18 drops replies already queued in a read batch when a later multi-get fails,
//!   or when pipelining before text authentication: we keep them.
//! - Text authentication (`-Y`): the password is everything after the first space (memcached
//!   1.6.18 takes the second token); a block over 16 KiB is refused at once (as later memcached).
//!   With credentials, binary clients use SASL PLAIN (memcached's `-Y` forces the text protocol).
//! - Binary: VERBOSITY is answered; after an unknown opcode or a body part a command ignores,
//!   exactly the rest of the packet is skipped (memcached skips a wrong amount).
//! - Meta: newer flags where the trait supports them (`E`, `N` on `ms` append, `mg` `C`+`v`),
//!   `me` prints the TTL left with the right sign, a too-long opaque is refused before the command
//!   runs; `x` (md) and the `s` reflection of `ms` are not supported (1.6.18 has neither).
//! - `stats`: the server's entries, then the protocol counters, then the store's; `stats items`,
//!   `slabs`, `sizes` and `conns` answer END.

mod base64;
pub mod binary;
pub mod binary_session;
pub mod clock;
pub mod counters;
pub mod meta;
mod number;
#[cfg(any(test, feature = "reference-store"))]
pub mod reference;
pub mod session;
pub mod storage;
pub mod text;
#[cfg(test)]
mod test_support;
mod tokens;

pub use counters::ProtocolCounters;
pub use session::{Credentials, Processed, Protocol, Reply, ServerStats, Session, SessionConfig};

/// The fabric operation code of a cache request: its payload is one or more binary-protocol
/// request packets, its response the reply packets the same packets get over TCP.
pub const FABRIC_OP_BINARY: u16 = 0x6d63; // "mc"
