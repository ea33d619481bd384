//! Serving the cache over the fabric. A request with op `FABRIC_OP_BINARY` carries complete
//! binary-protocol request packets; they are executed by the session of the fabric connection they
//! came on (which holds its SASL state), and the reply packets go back as the response payload.
//!
//! Replies are written straight into registered memory: `BufferReply` implements the protocol's
//! `Reply` over a pooled `fabric::Buffer`, so a value is copied once, from the store into the
//! buffer the fabric then sends (rendezvous, zero-copy, for large ones). The buffer grows by
//! doubling when a reply outgrows it; only the bytes before the growth are copied again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use cache_proto::session::{Reply, Session, SessionConfig};
use cache_proto::storage::Storage;
use cache_proto::FABRIC_OP_BINARY;
use fabric::{Buffer, Config, HandlerMode, Node, Request, Transport};

use crate::log;
use crate::stats::Counters;

/// The smallest reply buffer taken from the pool (the pool's smallest class is 256 bytes).
const REPLY_INITIAL_BYTES: usize = 1024;
/// Sessions beyond the fabric's connection limit that may wait for pruning.
const SESSIONS_SLACK: usize = 64;

pub struct FabricSettings {
    pub listen: SocketAddr,
    pub tcp_only: bool,
    /// 0: handle on the progress thread (Inline).
    pub threads: usize,
    pub conn_limit: usize,
    pub devices: String,
    pub pool_cap_bytes: usize,
    pub max_message_bytes: usize,
    pub spin_us: u64,
}

/// Per-connection sessions, bounded by the fabric's connection limit plus a slack.
pub struct FabricServer {
    store: Arc<dyn Storage>,
    session_config: Arc<SessionConfig>,
    counters: Arc<Counters>,
    node: Arc<OnceLock<Node>>,
    sessions: Mutex<HashMap<u64, Arc<Mutex<Session>>>>,
    sessions_max: usize,
    max_message_bytes: usize,
}

/// Starts the fabric node and returns it (also stored in `node_cell`, for `stats` and pruning).
pub fn start(
    settings: &FabricSettings,
    store: Arc<dyn Storage>,
    session_config: Arc<SessionConfig>,
    counters: Arc<Counters>,
    node_cell: Arc<OnceLock<Node>>,
) -> fabric::Result<(Node, Arc<FabricServer>)> {
    let server = Arc::new(FabricServer {
        store,
        session_config,
        counters,
        node: node_cell.clone(),
        sessions: Mutex::new(HashMap::new()),
        sessions_max: settings.conn_limit + SESSIONS_SLACK,
        max_message_bytes: settings.max_message_bytes,
    });
    let config = Config {
        listen: Some(settings.listen),
        transport: if settings.tcp_only { Transport::Tcp } else { Transport::Auto },
        handler_mode: if settings.threads == 0 { HandlerMode::Inline } else { HandlerMode::Staged { threads: settings.threads } },
        max_connections: settings.conn_limit,
        net_devices: settings.devices.clone(),
        pool_cap_bytes: settings.pool_cap_bytes,
        max_message_bytes: settings.max_message_bytes,
        spin_us: settings.spin_us,
        ..Config::default()
    };
    let handler_server = server.clone();
    let node = Node::start(config, Some(Arc::new(move |request: Request| handler_server.handle(request))))?;
    let _ = node_cell.set(node.clone());
    Ok((node, server))
}

impl FabricServer {
    fn handle(&self, mut request: Request) {
        Counters::add(&self.counters.fabric_requests, 1);
        if request.op() != FABRIC_OP_BINARY {
            return self.fail(request, "unknown operation");
        }
        let payload = match request.take_payload() {
            Some(payload) if !payload.is_empty() => payload,
            _ => return self.fail(request, "empty payload: expected binary protocol request packets"),
        };
        if payload.first() != Some(&cache_proto::binary::MAGIC_REQUEST) {
            return self.fail(request, "payload is not binary protocol request packets (magic 0x80)");
        }
        let conn_id = request.connection_id();
        let Some(session) = self.session(conn_id) else {
            return self.fail(request, "too many fabric sessions");
        };
        let mut reply = BufferReply::new(&request, self.max_message_bytes);
        let outcome = {
            let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
            catch_unwind(AssertUnwindSafe(|| session.process_message(&payload, &mut reply)))
        };
        drop(payload);
        let (buffer, error) = reply.finish();
        let processed = match outcome {
            Ok(p) => p,
            Err(_) => {
                Counters::add(&self.counters.internal_errors, 1);
                log::warn(format_args!("the protocol layer panicked on a fabric request; its session is dropped"));
                self.forget(conn_id);
                return self.fail(request, "internal error");
            }
        };
        if processed.close {
            // `quit`, or a payload that ends inside a packet: the session is over (its
            // authentication with it); the connection's next request starts a new one.
            self.forget(conn_id);
        }
        if let Some(error) = error {
            return self.fail(request, &format!("no memory for the reply: {error}"));
        }
        match buffer {
            Some(buffer) => request.respond_buffer(buffer),
            None if processed.close => self.fail(request, "malformed request: expected complete binary protocol request packets"),
            None => request.respond(&[]),
        }
    }

    fn fail(&self, request: Request, message: &str) {
        Counters::add(&self.counters.fabric_requests_failed, 1);
        log::info(format_args!("fabric request failed: {message}"));
        request.fail(message);
    }

    /// The session of `conn_id`, created on its first request. `None` only if the map is full of
    /// open connections (cannot happen while the fabric enforces its connection limit).
    fn session(&self, conn_id: u64) -> Option<Arc<Mutex<Session>>> {
        if let Some(s) = self.sessions.lock().unwrap().get(&conn_id) {
            return Some(s.clone());
        }
        if self.sessions.lock().unwrap().len() >= self.sessions_max {
            self.prune();
        }
        let mut sessions = self.sessions.lock().unwrap();
        if sessions.len() >= self.sessions_max {
            return None;
        }
        let session = Arc::new(Mutex::new(Session::new(self.store.clone(), self.session_config.clone())));
        sessions.insert(conn_id, session.clone());
        self.counters.fabric_sessions.store(sessions.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Some(session)
    }

    fn forget(&self, conn_id: u64) {
        let mut sessions = self.sessions.lock().unwrap();
        sessions.remove(&conn_id);
        self.counters.fabric_sessions.store(sessions.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Drops the sessions of closed connections. Never holds the sessions lock while asking the
    /// node (which takes the worker lock; an Inline handler holds that one while taking ours).
    pub fn prune(&self) {
        let Some(node) = self.node.get() else { return };
        let ids: Vec<u64> = self.sessions.lock().unwrap().keys().copied().collect();
        let closed: Vec<u64> = ids.into_iter().filter(|&id| !node.connection_is_open(id)).collect();
        if closed.is_empty() {
            return;
        }
        let mut sessions = self.sessions.lock().unwrap();
        for id in &closed {
            sessions.remove(id);
        }
        self.counters.fabric_sessions.store(sessions.len() as u64, std::sync::atomic::Ordering::Relaxed);
        log::debug(format_args!("pruned {} fabric sessions of closed connections", closed.len()));
    }
}

/// A `Reply` over registered memory from the request's node. If no buffer can be had (the pool
/// is at its cap, or the reply exceeds the largest message), the rest of the reply is discarded
/// and `finish` reports the error; the request then fails as a whole.
pub struct BufferReply<'a> {
    request: &'a Request,
    /// The node's `max_message_bytes`: the fabric refuses larger responses.
    max_bytes: usize,
    buffer: Option<Buffer>,
    used: usize,
    error: Option<fabric::Error>,
    discard: Vec<u8>,
}

impl<'a> BufferReply<'a> {
    pub fn new(request: &'a Request, max_bytes: usize) -> BufferReply<'a> {
        BufferReply { request, max_bytes, buffer: None, used: 0, error: None, discard: Vec::new() }
    }

    /// The reply (its length set), or the error that cut it short.
    pub fn finish(self) -> (Option<Buffer>, Option<fabric::Error>) {
        if self.error.is_some() {
            return (None, self.error);
        }
        let buffer = self.buffer.map(|mut b| {
            b.set_len(self.used);
            b
        });
        (buffer, None)
    }

    fn discard(&mut self, len: usize) -> &mut [u8] {
        self.discard.resize(len, 0);
        &mut self.discard[..len]
    }
}

impl Reply for BufferReply<'_> {
    fn mark(&self) -> usize {
        self.used
    }

    fn truncate(&mut self, mark: usize) {
        assert!(mark <= self.used);
        // After an error the reply fails as a whole; bytes go nowhere either way.
        self.used = mark;
    }

    fn append(&mut self, len: usize) -> &mut [u8] {
        if self.error.is_some() {
            return self.discard(len);
        }
        let need = self.used.saturating_add(len);
        let capacity = self.buffer.as_ref().map_or(0, |b| b.capacity());
        if need > capacity {
            let max = self.max_bytes;
            // Double (amortised growth), but never ask for more than a message may hold when
            // what is needed fits.
            let want = need.max(capacity.saturating_mul(2)).max(REPLY_INITIAL_BYTES);
            let want = if need <= max { want.min(max) } else { need };
            match self.request.alloc(want) {
                Ok(mut larger) => {
                    larger.set_len(larger.capacity());
                    if let Some(old) = self.buffer.take() {
                        larger.as_mut_slice()[..self.used].copy_from_slice(&old.as_slice()[..self.used]);
                    }
                    self.buffer = Some(larger);
                }
                Err(e) => {
                    self.error = Some(e);
                    self.buffer = None;
                    return self.discard(len);
                }
            }
        }
        let buffer = self.buffer.as_mut().expect("a buffer of at least `need` bytes");
        let start = self.used;
        self.used = need;
        &mut buffer.as_mut_slice()[start..need]
    }

    fn extend_from(&mut self, data: &[u8]) {
        crate::copy::copy(self.append(data.len()), data);
    }
}
