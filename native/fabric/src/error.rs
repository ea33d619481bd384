//! Errors of the fabric. Every failure a caller can see is one of these, with enough text to act on.
use std::fmt;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A UCX call failed.
    Ucx { op: &'static str, status: i32, text: String },
    /// The connection to the peer failed (peer died, reset, unreachable); pending requests on it fail with this.
    PeerFailed { peer: String, reason: String },
    /// No response within the deadline.
    Timeout { after_ms: u64 },
    /// The peer's dispatch queue and overflow were full: it shed this request.
    Overloaded,
    /// A payload above `Config::max_message_bytes`.
    TooLarge { len: usize, max: usize },
    /// The registered buffer pool is at its cap and nothing was freed in time.
    PoolExhausted { requested: usize, cap: usize },
    /// The node is closed.
    Closed,
    /// The remote handler failed the request with this message.
    Remote(String),
    /// A peer sent a frame that breaks the wire format; its connection was closed.
    Protocol(String),
    /// The configuration is unusable.
    Config(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Ucx { op, status, text } => write!(f, "UCX {op} failed: {text} (status {status})"),
            Error::PeerFailed { peer, reason } => write!(f, "connection to {peer} failed: {reason}"),
            Error::Timeout { after_ms } => write!(f, "no response after {after_ms} ms"),
            Error::Overloaded => write!(f, "peer overloaded: request shed (dispatch queue full)"),
            Error::TooLarge { len, max } => write!(f, "message of {len} bytes exceeds the limit of {max} bytes"),
            Error::PoolExhausted { requested, cap } => {
                write!(f, "registered buffer pool exhausted: {requested} bytes requested, cap {cap} bytes")
            }
            Error::Closed => write!(f, "fabric node is closed"),
            Error::Remote(message) => write!(f, "remote handler failed: {message}"),
            Error::Protocol(message) => write!(f, "protocol error: {message}"),
            Error::Config(message) => write!(f, "bad fabric configuration: {message}"),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn ucx_error(op: &'static str, status: ucx_sys::ucs_status_t) -> Error {
    Error::Ucx { op, status: status as i32, text: ucx_sys::status_string(status) }
}

pub(crate) fn check(op: &'static str, status: ucx_sys::ucs_status_t) -> Result<()> {
    if status == ucx_sys::UCS_OK {
        Ok(())
    } else {
        Err(ucx_error(op, status))
    }
}
