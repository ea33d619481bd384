//! The client's errors: one variant per outcome a caller acts on differently.
use std::fmt;
use std::sync::Arc;

use cache_proto::binary::status;

pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong. Cheap to clone (a non-blocking request keeps its outcome and hands
/// out copies to `test` and `wait`).
#[derive(Debug, Clone)]
pub enum Error {
    /// The key does not exist (replace, delete, incr/decr without initial value, touch, cas, a
    /// non-blocking get). Blocking gets report a miss as `Ok(None)` instead.
    NotFound,
    /// The item was not stored (append/prepend to a missing key).
    NotStored,
    /// The key exists (add), or its CAS changed (cas, delete with CAS).
    Exists,
    /// The value exceeds the server's item size limit.
    TooLarge,
    /// incr/decr on a value that is not a decimal number.
    NonNumeric,
    /// The server rejected the request's arguments (status 0x04).
    InvalidArguments,
    /// SASL authentication failed, or the server requires it and none was configured.
    AuthFailed,
    /// Any other status the server answered with (`cache_proto::binary::status`).
    ServerError(u16),
    /// The key is empty or longer than 250 bytes (memcached's limit).
    InvalidKey { len: usize },
    /// No server was added.
    NoServers,
    /// A socket error; the connection was closed and the next operation reconnects.
    Io(Arc<std::io::Error>),
    /// No reply within the I/O timeout (or no connection within the connect timeout); the
    /// connection was closed.
    Timeout,
    /// The server sent bytes that are not a valid reply; the connection was closed.
    Protocol(String),
    /// The fabric failed the request (peer failed, pool exhausted, node closed, ...).
    Fabric(fabric::Error),
    /// The client is in use: called from inside a `get_multi_with` callback.
    Busy,
}

impl Error {
    /// The error for a binary-protocol status other than success.
    pub fn from_status(code: u16) -> Error {
        debug_assert_ne!(code, status::NO_ERROR);
        match code {
            status::KEY_NOT_FOUND => Error::NotFound,
            status::KEY_EXISTS => Error::Exists,
            status::VALUE_TOO_LARGE => Error::TooLarge,
            status::INVALID_ARGUMENTS => Error::InvalidArguments,
            status::ITEM_NOT_STORED => Error::NotStored,
            status::NON_NUMERIC => Error::NonNumeric,
            status::AUTH_ERROR => Error::AuthFailed,
            other => Error::ServerError(other),
        }
    }

    /// Whether the connection the error happened on is unusable (and was closed).
    pub fn is_connection_error(&self) -> bool {
        matches!(self, Error::Io(_) | Error::Timeout | Error::Protocol(_) | Error::Fabric(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound => write!(f, "not found"),
            Error::NotStored => write!(f, "not stored"),
            Error::Exists => write!(f, "exists (or CAS mismatch)"),
            Error::TooLarge => write!(f, "value too large for the server"),
            Error::NonNumeric => write!(f, "incr/decr on a non-numeric value"),
            Error::InvalidArguments => write!(f, "invalid arguments"),
            Error::AuthFailed => write!(f, "authentication failed"),
            Error::ServerError(code) => write!(f, "server error status 0x{code:04x}"),
            Error::InvalidKey { len } => write!(f, "invalid key of {len} bytes (1 to 250 allowed)"),
            Error::NoServers => write!(f, "no servers"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Timeout => write!(f, "timed out"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
            Error::Fabric(e) => write!(f, "fabric: {e}"),
            Error::Busy => write!(f, "client busy (called from inside a get_multi callback)"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Error::Timeout,
            _ => Error::Io(Arc::new(e)),
        }
    }
}

impl From<fabric::Error> for Error {
    fn from(e: fabric::Error) -> Error {
        match e {
            fabric::Error::Timeout { .. } => Error::Timeout,
            other => Error::Fabric(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_typed_errors() {
        assert!(matches!(Error::from_status(status::KEY_NOT_FOUND), Error::NotFound));
        assert!(matches!(Error::from_status(status::KEY_EXISTS), Error::Exists));
        assert!(matches!(Error::from_status(status::VALUE_TOO_LARGE), Error::TooLarge));
        assert!(matches!(Error::from_status(status::ITEM_NOT_STORED), Error::NotStored));
        assert!(matches!(Error::from_status(status::NON_NUMERIC), Error::NonNumeric));
        assert!(matches!(Error::from_status(status::AUTH_ERROR), Error::AuthFailed));
        assert!(matches!(Error::from_status(status::OUT_OF_MEMORY), Error::ServerError(0x82)));
        assert!(matches!(Error::from_status(0x1234), Error::ServerError(0x1234)));
    }

    #[test]
    fn io_timeouts_become_timeout() {
        let e: Error = std::io::Error::from(std::io::ErrorKind::WouldBlock).into();
        assert!(matches!(e, Error::Timeout));
        let e: Error = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        assert!(matches!(e, Error::Io(_)) && e.is_connection_error());
        let e: Error = fabric::Error::Timeout { after_ms: 5 }.into();
        assert!(matches!(e, Error::Timeout));
        assert!(!Error::NotFound.is_connection_error());
    }
}
