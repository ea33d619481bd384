//! memcached's protocols, executed against the `Storage` trait.
//!
//! - `storage`: the trait a store implements (owned here, so the protocols are testable without a
//!   store and the store without a network).
//! - `session`: one connection's state machine, bytes in, replies out, for any transport.
//! - `binary`: the binary protocol's header, opcodes and status codes (shared with the client).

pub mod binary;
pub mod session;
pub mod storage;

/// The fabric operation code of a cache request: its payload is one or more binary-protocol
/// request packets, its response the reply packets the same packets get over TCP.
pub const FABRIC_OP_BINARY: u16 = 0x6d63; // "mc"
