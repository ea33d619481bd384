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
