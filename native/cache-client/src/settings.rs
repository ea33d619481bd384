//! What a client is configured with: its servers (and the transport to each), credentials, which
//! fabric node it sends from, and the limits of `ClientConfig`.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ring::POINTS_PER_SERVER_DEFAULT;

/// A server and the transport to reach it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerAddr {
    /// memcached's binary protocol over a TCP connection.
    Tcp(SocketAddr),
    /// The binary protocol over the fabric (`cache_proto::FABRIC_OP_BINARY` requests).
    Fabric(SocketAddr),
}

impl ServerAddr {
    pub fn socket_addr(&self) -> SocketAddr {
        match *self {
            ServerAddr::Tcp(a) | ServerAddr::Fabric(a) => a,
        }
    }

    /// Parses `tcp://host:port`, `fabric://host:port` or `host:port` (TCP), resolving the host
    /// name (IPv4 addresses first).
    pub fn parse(text: &str) -> Result<ServerAddr> {
        let (fabric, rest) = if let Some(rest) = text.strip_prefix("fabric://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("tcp://") {
            (false, rest)
        } else if text.contains("://") {
            return Err(Error::InvalidArguments);
        } else {
            (false, text)
        };
        let addr = resolve(rest)?;
        Ok(if fabric { ServerAddr::Fabric(addr) } else { ServerAddr::Tcp(addr) })
    }
}

/// Resolves `host:port`, preferring IPv4 (servers commonly listen on 127.0.0.1 only).
pub fn resolve(host_port: &str) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = host_port.to_socket_addrs().map_err(|_| Error::InvalidArguments)?.collect();
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).copied().ok_or(Error::InvalidArguments)
}

impl FromStr for ServerAddr {
    type Err = Error;
    fn from_str(s: &str) -> Result<ServerAddr> {
        ServerAddr::parse(s)
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddr::Tcp(a) => write!(f, "tcp://{a}"),
            ServerAddr::Fabric(a) => write!(f, "fabric://{a}"),
        }
    }
}

/// SASL PLAIN credentials, sent once per connection (TCP) or per fabric peer.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials {{ username: {:?}, password: <hidden> }}", self.username)
    }
}

/// Which fabric node carries the client's fabric requests.
#[derive(Clone, Default)]
pub enum FabricNode {
    /// One client node per process, started on first use with `fabric::Config::default()` and
    /// shared by every client (one UCX worker and progress thread however many clients and
    /// threads; its connections are shared too). The default.
    #[default]
    Shared,
    /// A node of the client's own, started with this configuration when the client adds its
    /// first fabric server and closed with the client.
    Dedicated(fabric::Config),
    /// A node the caller started (and may share).
    Node(fabric::Node),
}

impl fmt::Debug for FabricNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FabricNode::Shared => write!(f, "Shared"),
            FabricNode::Dedicated(c) => write!(f, "Dedicated({c:?})"),
            FabricNode::Node(n) => write!(f, "Node({:?})", n.local_addr()),
        }
    }
}

/// Client settings. Every limit has a name here.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bound on establishing a TCP connection.
    pub connect_timeout: Duration,
    /// Bound on each wait for a reply or for socket room (TCP), and on each fabric request.
    pub io_timeout: Duration,
    /// Non-blocking requests on the wire per client. At the bound, issuing another first waits
    /// for the oldest one's reply (its outcome is kept for its own `wait`/`test`).
    pub max_in_flight: usize,
    /// Ring points per server (rounded up to a multiple of 4).
    pub points_per_server: usize,
    /// Largest value accepted in a reply; a larger reply is a protocol error.
    pub value_bytes_max: usize,
    /// SASL PLAIN credentials; `None`: no authentication.
    pub credentials: Option<Credentials>,
    pub fabric_node: FabricNode,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(5),
            max_in_flight: 64,
            points_per_server: POINTS_PER_SERVER_DEFAULT,
            value_bytes_max: 128 << 20,
            credentials: None,
            fabric_node: FabricNode::Shared,
        }
    }
}
