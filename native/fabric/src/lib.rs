//! # fabric: Slipstream's communication engine over UCX
//!
//! A [`Node`] owns one UCX worker. It listens on a socket address (optionally), connects to peers
//! on demand (one connection per peer, shared by every caller, closed when idle, re-established
//! after failures) and carries requests and responses as UCX active messages: eager for small
//! payloads, rendezvous (zero-copy) for large ones. A payload above `Config::chunk_size_bytes`
//! travels as chunks that may complete out of order and are reassembled by request id and offset.
//! Payloads live in a pool of registered buffers with a hard cap.
//!
//! Requests are handled in stages (SEDA): receive (the progress thread) -> bounded dispatch queue
//! -> handler threads -> bounded respond queue -> respond (the progress thread). The progress
//! thread spins briefly after activity, then sleeps on the worker's event fd.
//!
//! Architecture invariant: this crate knows nothing of Spark, Hadoop or memcached. It moves
//! opaque payloads tagged with a 16-bit operation code; meaning belongs to the layers above.
//!
//! ```no_run
//! use std::sync::Arc;
//! use fabric::{Config, HandlerMode, Node, Request};
//! let server = Node::start(
//!     Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() },
//!     Some(Arc::new(|request: Request| { let echo = request.payload().to_vec(); request.respond(&echo) })),
//! ).unwrap();
//! let client = Node::start(Config::default(), None).unwrap();
//! let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
//! let response = endpoint.request(1, b"hello").unwrap().wait().unwrap();
//! assert_eq!(&response[..], b"hello");
//! ```
mod clock;
mod config;
mod environ;
mod error;
mod log;
mod node;
mod pool;
mod queue;
mod setting;
mod ucx;
pub mod wire;

pub use config::{Config, HandlerMode, Transport};
pub use error::{Error, Result};
pub use node::{Endpoint, Handler, Node, Pending, Request, Response, Stats};
pub use pool::{Buffer, ViewPin};
pub use setting::{Setting, SettingValue};

/// Internals for the cargo-fuzz targets of `fuzz/` (feature `fuzzing`, which only that package
/// turns on): the reassembly of chunked messages, whose input comes from the network. Not an API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::node::reassembly::{ChunkTarget, Limits, MessageBuffer, PartialKey, Reassembly};
}
