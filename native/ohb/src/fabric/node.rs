//! The fabric as a measured party: a server node with an inline echo/ack handler in its own
//! process, and a client node whose caller waits on `Pending`s.
//!
//! Send path: by default every request carries a registered pool buffer (`Node::alloc` +
//! `Endpoint::request_buffer`), like `ucx_perftest`, which sends from registered memory it does not
//! rewrite; the payload pattern is written only for checked echoes. `SendPath::Copy` measures the
//! convenience call `Endpoint::request(&[u8])`, which copies the payload into a pool buffer.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use fabric::{Config, Endpoint, HandlerMode, Node, Pending, Request, Transport};

use crate::fabric::measure::{check_pattern, fill_pattern, Party};

/// Answered with the request's own payload (zero-copy: the received buffer goes back).
pub const OP_ECHO: u16 = 1;
/// Answered with an empty response.
pub const OP_ACK: u16 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendPath {
    /// `Node::alloc` + `Endpoint::request_buffer`: no copy of the payload.
    Registered,
    /// `Endpoint::request(&[u8])`: one copy into a pool buffer per request.
    Copy,
}

pub fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Auto => "auto",
        Transport::Tcp => "tcp",
    }
}

pub fn parse_transport(text: &str) -> Option<Transport> {
    match text {
        "auto" => Some(Transport::Auto),
        "tcp" => Some(Transport::Tcp),
        _ => None,
    }
}

/// The benchmark handler: echo or ack. Small enough for `HandlerMode::Inline`.
pub fn handle(mut request: Request) {
    match request.op() {
        OP_ECHO => match request.take_payload() {
            Some(buffer) => request.respond_buffer(buffer),
            None => request.respond(&[]),
        },
        OP_ACK => request.respond(&[]),
        op => request.fail(&format!("ohb: unknown op {op}")),
    }
}

/// How a benchmark server node is configured.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address to listen on: 127.0.0.1, or host a's with `--hosts netns`.
    pub ip: Ipv4Addr,
    pub transport: Transport,
    pub port: u16,
    pub handler_mode: HandlerMode,
    pub pool_cap_bytes: Option<usize>,
    pub max_message_bytes: Option<usize>,
}

impl ServerConfig {
    pub fn node_config(&self) -> Config {
        let mut config = Config {
            listen: Some(SocketAddr::from((self.ip, self.port))),
            transport: self.transport,
            handler_mode: self.handler_mode,
            ..Config::default()
        };
        if let Some(cap) = self.pool_cap_bytes {
            config.pool_cap_bytes = cap;
        }
        if let Some(max) = self.max_message_bytes {
            config.max_message_bytes = max;
        }
        config
    }
}

pub fn start_server(server: &ServerConfig) -> Result<Node, String> {
    let handler: Arc<dyn fabric::Handler> = Arc::new(handle);
    let node = Node::start(server.node_config(), Some(handler)).map_err(|e| format!("fabric server: {e}"))?;
    assert!(node.local_addr().is_some(), "a listening node has an address");
    Ok(node)
}

/// One line of server statistics, for the memory test.
pub fn stats_json(node: &Node) -> serde_json::Value {
    let s = node.stats();
    serde_json::json!({
        "stats": true,
        "requests_served": s.requests_served,
        "requests_shed": s.requests_shed,
        "connections_open": s.connections_open,
        "pool_bytes_mapped": s.pool_bytes_mapped,
        "pool_bytes_in_use": s.pool_bytes_in_use,
        "pool_cap_bytes": s.pool_cap_bytes,
        "protocol_errors": s.protocol_errors,
    })
}

/// The client side: a client-only node and one endpoint.
pub struct FabricParty {
    node: Node,
    endpoint: Endpoint,
    send_path: SendPath,
    payload: Vec<u8>,
    in_flight: VecDeque<Pending>,
}

impl FabricParty {
    pub fn connect(transport: Transport, server: SocketAddr, send_path: SendPath, same_host_pull: bool) -> Result<FabricParty, String> {
        let config = Config { transport, same_host_pull, ..Config::default() };
        let node = Node::start(config, None).map_err(|e| format!("fabric client: {e}"))?;
        let endpoint = node.endpoint(server).map_err(|e| format!("fabric connect {server}: {e}"))?;
        Ok(FabricParty { node, endpoint, send_path, payload: Vec::new(), in_flight: VecDeque::new() })
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    fn send(&self, op: u16, fill: bool) -> Result<Pending, String> {
        let pending = match self.send_path {
            SendPath::Copy => self.endpoint.request(op, &self.payload),
            SendPath::Registered => {
                let mut buffer = self.node.alloc(self.payload.len()).map_err(|e| format!("alloc: {e}"))?;
                debug_assert_eq!(buffer.len(), self.payload.len());
                if fill {
                    buffer.as_mut_slice().copy_from_slice(&self.payload);
                }
                self.endpoint.request_buffer(op, buffer)
            }
        };
        pending.map_err(|e| format!("request: {e}"))
    }
}

impl Party for FabricParty {
    fn prepare(&mut self, size_bytes: usize) -> Result<(), String> {
        assert!(self.in_flight.is_empty());
        self.payload.resize(size_bytes, 0);
        fill_pattern(&mut self.payload);
        Ok(())
    }

    fn echo(&mut self, verify: bool) -> Result<(), String> {
        let response = self.send(OP_ECHO, verify)?.wait().map_err(|e| format!("echo: {e}"))?;
        if response.len() != self.payload.len() {
            return Err(format!("echo of {} bytes came back with {}", self.payload.len(), response.len()));
        }
        if verify {
            check_pattern(&response)?;
        }
        Ok(())
    }

    fn stream(&mut self, window: usize, count: u64) -> Result<(), String> {
        assert!(window > 0);
        let mut sent = 0u64;
        let mut acked = 0u64;
        let result = (|| {
            while acked < count {
                while sent < count && self.in_flight.len() < window {
                    let pending = self.send(OP_ACK, false)?;
                    self.in_flight.push_back(pending);
                    sent += 1;
                }
                let pending = self.in_flight.pop_front().expect("window holds a request");
                let response = pending.wait().map_err(|e| format!("ack: {e}"))?;
                if !response.is_empty() {
                    return Err(format!("ack of {} bytes, expected 0", response.len()));
                }
                acked += 1;
            }
            Ok(())
        })();
        // On failure, abandon what is still in flight (dropping a Pending forgets it).
        self.in_flight.clear();
        result
    }
}
