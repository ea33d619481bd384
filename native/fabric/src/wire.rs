//! The fabric's wire format: one fixed header per active message, carried in UCX's AM header;
//! the payload (or one chunk of it) is the AM data.
//!
//! ```text
//! offset size field
//!  0     2    magic        0x5353 ("SS")
//!  2     1    version      1
//!  3     1    kind         1 = request, 2 = response, 3 = error response (payload = UTF-8 message)
//!  4     2    op           caller-defined operation code (requests); echoed in responses
//!  6     2    status       0 in requests and responses; an error code in error responses
//!  8     4    chunk_index  0-based
//! 12     4    chunk_count  >= 1
//! 16     8    request_id   chosen by the requester, unique among its requests in flight
//! 24     8    total_len    bytes of the whole message
//! 32     8    offset       where this chunk's bytes go in the message
//! ```
//! All integers little-endian. This parser sees untrusted input: it checks every field and
//! never panics (a fuzz target covers it).
use crate::error::{Error, Result};

pub const HEADER_LEN: usize = 40;
pub const MAGIC: u16 = 0x5353;
pub const VERSION: u8 = 1;
/// The single UCX active-message id the fabric registers.
pub const AM_ID: u32 = 0x55;
/// The smallest chunk a sender may cut (`Config::chunk_size_bytes` is at least this).
pub const MIN_CHUNK_BYTES: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Request = 1,
    Response = 2,
    ErrorResponse = 3,
}

/// Status codes of error responses.
pub const STATUS_OK: u16 = 0;
pub const STATUS_REMOTE: u16 = 1;
pub const STATUS_OVERLOADED: u16 = 2;
pub const STATUS_TOO_LARGE: u16 = 3;
pub const STATUS_POOL_EXHAUSTED: u16 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub op: u16,
    pub status: u16,
    pub chunk_index: u32,
    pub chunk_count: u32,
    pub request_id: u64,
    pub total_len: u64,
    pub offset: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2] = VERSION;
        out[3] = self.kind as u8;
        out[4..6].copy_from_slice(&self.op.to_le_bytes());
        out[6..8].copy_from_slice(&self.status.to_le_bytes());
        out[8..12].copy_from_slice(&self.chunk_index.to_le_bytes());
        out[12..16].copy_from_slice(&self.chunk_count.to_le_bytes());
        out[16..24].copy_from_slice(&self.request_id.to_le_bytes());
        out[24..32].copy_from_slice(&self.total_len.to_le_bytes());
        out[32..40].copy_from_slice(&self.offset.to_le_bytes());
        out
    }

    /// Parses and validates a header that arrived with `data_len` bytes of data.
    /// `max_message_bytes` bounds `total_len`, so a peer can never make us allocate more.
    pub fn decode(bytes: &[u8], data_len: usize, max_message_bytes: usize) -> Result<Header> {
        let bad = |m: String| Err(Error::Protocol(m));
        if bytes.len() != HEADER_LEN {
            return bad(format!("header of {} bytes, expected {HEADER_LEN}", bytes.len()));
        }
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        if u16_at(0) != MAGIC {
            return bad(format!("bad magic {:#06x}", u16_at(0)));
        }
        if bytes[2] != VERSION {
            return bad(format!("unsupported version {}", bytes[2]));
        }
        let kind = match bytes[3] {
            1 => Kind::Request,
            2 => Kind::Response,
            3 => Kind::ErrorResponse,
            other => return bad(format!("unknown kind {other}")),
        };
        let header = Header {
            kind,
            op: u16_at(4),
            status: u16_at(6),
            chunk_index: u32_at(8),
            chunk_count: u32_at(12),
            request_id: u64_at(16),
            total_len: u64_at(24),
            offset: u64_at(32),
        };
        if header.chunk_count == 0 || header.chunk_index >= header.chunk_count {
            return bad(format!("chunk {} of {}", header.chunk_index, header.chunk_count));
        }
        if header.total_len > max_message_bytes as u64 {
            return bad(format!("message of {} bytes exceeds the limit of {max_message_bytes}", header.total_len));
        }
        // A chunk must lie inside the message; checked without overflow.
        let end = header.offset.checked_add(data_len as u64);
        if end.is_none_or(|end| end > header.total_len) {
            return bad(format!(
                "chunk at offset {} with {data_len} bytes overruns message of {} bytes",
                header.offset, header.total_len
            ));
        }
        if header.chunk_count == 1 && (header.offset != 0 || data_len as u64 != header.total_len) {
            return bad("single-chunk message whose data is not the whole message".to_string());
        }
        // An empty chunk of a multi-chunk message carries nothing and would only count toward
        // completion: senders never cut one.
        if header.chunk_count > 1 && data_len == 0 {
            return bad(format!("empty chunk {} of {}", header.chunk_index, header.chunk_count));
        }
        // Senders cut chunks of at least MIN_CHUNK_BYTES, which bounds the reassembly bookkeeping.
        if header.chunk_count as u64 > header.total_len.div_ceil(MIN_CHUNK_BYTES).max(1) {
            return bad(format!("{} chunks for {} bytes", header.chunk_count, header.total_len));
        }
        if kind == Kind::Request && header.status != STATUS_OK {
            return bad(format!("request with status {}", header.status));
        }
        Ok(header)
    }
}

/// How a message of `total_len` bytes is cut into chunks: `(count, chunk_size)`.
pub fn chunking(total_len: usize, chunk_size: usize) -> (u32, usize) {
    debug_assert!(chunk_size > 0);
    if total_len <= chunk_size {
        return (1, total_len);
    }
    (total_len.div_ceil(chunk_size) as u32, chunk_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::Request,
            op: 7,
            status: 0,
            chunk_index: 1,
            chunk_count: 3,
            request_id: 0xdead_beef,
            total_len: 10_000,
            offset: 4096,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode(), 1024, 1 << 20).unwrap(), h);
    }

    #[test]
    fn rejects_garbage() {
        let h = sample().encode();
        let mut bad_magic = h;
        bad_magic[0] = 0;
        assert!(Header::decode(&bad_magic, 1024, 1 << 20).is_err());
        let mut bad_kind = h;
        bad_kind[3] = 9;
        assert!(Header::decode(&bad_kind, 1024, 1 << 20).is_err());
        assert!(Header::decode(&h[..39], 1024, 1 << 20).is_err());
        // chunk overruns the message
        assert!(Header::decode(&h, 6000, 1 << 20).is_err());
        // message above the limit
        assert!(Header::decode(&h, 1024, 9999).is_err());
        // more chunks than the minimum chunk size allows
        let mut many = sample();
        many.chunk_count = 4;
        assert!(Header::decode(&many.encode(), 1024, 1 << 20).is_err());
    }

    #[test]
    fn rejects_overflowing_offset() {
        let mut h = sample();
        h.offset = u64::MAX - 10;
        h.total_len = 100;
        assert!(Header::decode(&h.encode(), 1024, 1 << 20).is_err());
    }

    #[test]
    fn rejects_chunk_index_out_of_range() {
        let mut h = sample();
        h.chunk_index = 3;
        assert!(Header::decode(&h.encode(), 1024, 1 << 20).is_err());
        h.chunk_count = 0;
        h.chunk_index = 0;
        assert!(Header::decode(&h.encode(), 1024, 1 << 20).is_err());
    }

    #[test]
    fn single_chunk_must_be_whole() {
        let mut h = sample();
        h.chunk_index = 0;
        h.chunk_count = 1;
        h.offset = 0;
        assert!(Header::decode(&h.encode(), 10_000, 1 << 20).is_ok());
        assert!(Header::decode(&h.encode(), 9_999, 1 << 20).is_err());
    }

    #[test]
    fn rejects_empty_chunks_of_multi_chunk_messages() {
        let h = Header { chunk_index: 0, chunk_count: 2, total_len: 8192, offset: 0, ..sample() };
        assert!(Header::decode(&h.encode(), 0, 1 << 20).is_err());
        assert!(Header::decode(&h.encode(), 4096, 1 << 20).is_ok());
        let empty_message = Header { chunk_index: 0, chunk_count: 1, total_len: 0, offset: 0, ..sample() };
        assert!(Header::decode(&empty_message.encode(), 0, 1 << 20).is_ok(), "an empty message is one empty chunk");
    }

    #[test]
    fn chunking_covers_message() {
        assert_eq!(chunking(0, 1024), (1, 0));
        assert_eq!(chunking(1024, 1024), (1, 1024));
        assert_eq!(chunking(1025, 1024), (2, 1024));
        assert_eq!(chunking(4 << 20, 1 << 20), (4, 1 << 20));
    }

    /// Fuzzing on stable Rust: random and mutated headers through `decode`. It must never panic,
    /// and whatever it accepts must satisfy the invariants the receive path relies on.
    #[test]
    fn decode_fuzz() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = sample().encode();
        let mut accepted = 0;
        for round in 0..300_000 {
            let mut bytes = if round % 2 == 0 { valid.to_vec() } else { (0..HEADER_LEN).map(|_| next() as u8).collect() };
            for _ in 0..(next() % 4) {
                let i = (next() as usize) % bytes.len();
                bytes[i] = next() as u8;
            }
            if next() % 16 == 0 {
                bytes.truncate((next() as usize) % (HEADER_LEN + 1));
            }
            let data_len = match next() % 3 {
                0 => 1024,
                1 => (next() % 5000) as usize,
                _ => next() as usize,
            };
            let max = 1 << 20;
            if let Ok(h) = Header::decode(&bytes, data_len, max) {
                accepted += 1;
                assert!(h.chunk_count >= 1 && h.chunk_index < h.chunk_count);
                assert!(h.total_len <= max as u64);
                assert!(h.offset + data_len as u64 <= h.total_len);
                assert_eq!(Header::decode(&h.encode(), data_len, max), Ok(h));
            }
        }
        assert!(accepted > 1000, "the fuzzer must also reach the accepting path ({accepted})");
    }
}
