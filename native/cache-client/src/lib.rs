//! # cache-client: a memcached client over TCP and the fabric
//!
//! Speaks memcached's binary protocol on both transports: over TCP as any memcached client does,
//! over the fabric as `cache_proto::FABRIC_OP_BINARY` requests whose payload is the same packets.
//! Keys are spread over servers by a ketama ring ([`ring`]: libketama's MD5 scheme, 160 points
//! per server).
//!
//! ```no_run
//! use cache_client::{Client, ClientConfig, ServerAddr};
//! let client = Client::new(ClientConfig::default())?;
//! client.add_server("tcp://127.0.0.1:11211".parse()?)?;
//! client.add_server(ServerAddr::Fabric("127.0.0.1:11212".parse().unwrap()))?;
//! client.set(b"greeting", b"hello", 0, 0)?;
//! let mut value = Vec::new();
//! if let Some(meta) = client.get_into(b"greeting", &mut value)? {
//!     assert_eq!((&value[..], meta.flags), (&b"hello"[..], 0));
//! }
//! // Non-blocking (OSU RDMA-Memcached's iset/iget/bset/bget, wait and test):
//! let mut dest = Vec::new();
//! let mut get = client.iget(b"greeting", &mut dest)?;
//! while get.test().is_pending() { /* overlap other work */ }
//! get.wait()?;
//! drop(get);
//! assert_eq!(dest, b"hello");
//! # Ok::<(), cache_client::Error>(())
//! ```
//!
//! The buffer rules of the non-blocking calls are checked by the compiler. An `iset` value and
//! an `iget` destination stay borrowed until the request is dropped:
//!
//! ```compile_fail
//! # let client = cache_client::Client::new(Default::default()).unwrap();
//! let mut value = b"v1".to_vec();
//! let mut set = client.iset(b"key", &value, 0, 0).unwrap();
//! value.push(b'!'); // error: `value` may still be read by the request
//! set.wait().unwrap();
//! ```
//!
//! ```compile_fail
//! # let client = cache_client::Client::new(Default::default()).unwrap();
//! let mut dest = Vec::new();
//! let mut get = client.iget(b"key", &mut dest).unwrap();
//! println!("{}", dest.len()); // error: `dest` is written when the request completes
//! get.wait().unwrap();
//! ```
//!
//! `bset` and `bget` return once key and value have been copied or sent, so those may be reused
//! at once (the destination of `bget` stays borrowed):
//!
//! ```no_run
//! # let client = cache_client::Client::new(Default::default()).unwrap();
//! let mut value = b"v1".to_vec();
//! let mut set = client.bset(b"key", &value, 0, 0).unwrap();
//! value.push(b'!');
//! set.wait().unwrap();
//! ```
//!
//! ## Design
//!
//! - **Threads.** A [`Client`] is `Send`, not `Sync`: one per thread (the benchmark makes one per
//!   thread). It keeps one TCP connection per server, opened on first use.
//! - **Fabric node.** By default every client of the process shares one client fabric node
//!   ([`FabricNode::Shared`]): one UCX worker, one progress thread and one connection per server
//!   however many clients, which on a machine with few cores is what performs (each node adds a
//!   progress thread that spins after activity). [`FabricNode::Dedicated`] gives a client its own.
//! - **Hot path.** A blocking get encodes into a reused buffer (TCP) or straight into a registered
//!   pool buffer (fabric), sends, and copies the value once into the caller's `Vec`
//!   ([`Client::get_into`]); no allocation once warm, no lock but the fabric's own.
//! - **Non-blocking requests** ([`Request`]): over TCP written at once and their replies read in
//!   order later, matched by opaque; over the fabric truly asynchronous (`fabric::Pending`). At
//!   most [`ClientConfig::max_in_flight`] (64) on the wire per client; issuing one more first
//!   waits for the oldest. Buffer rules are lifetimes: the compiler rejects reusing an `iset`
//!   value or a get's destination while its request lives.
//! - **Errors** are typed ([`Error`]); an I/O, timeout or protocol error closes the connection it
//!   happened on (failing its queued requests) and the next call reconnects.
pub mod client;
pub mod error;
pub mod md5;
pub mod nonblocking;
pub mod packet;
pub mod ring;
mod settings;
mod tcp;

pub use client::{resolve, Client, ClientConfig, Credentials, FabricNode, Item, ServerAddr, Stats};
pub use error::{Error, Result};
pub use nonblocking::{Meta, Request};
