//! The fabric's wire format: one fixed header per active message, carried in UCX's AM header;
//! the payload (or one chunk of it) is the AM data.
//!
//! ```text
//! offset size field
//!  0     2    magic        0x5353 ("SS")
//!  2     1    version      1
//!  3     1    kind         1 = request, 2 = response, 3 = error response (payload = UTF-8 message),
//!                          4 = same-host control (op: 1 hello, 2 hello reply, 3 release),
//!                          5 = pulled request, 6 = pulled response (data = a `PullDescriptor`;
//!                          the receiver pulls the `total_len` bytes with process_vm_readv)
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
    /// Same-host path control (`op` = `CONTROL_*`); docs/fabric.md, "The same-host path".
    Control = 4,
    /// A request whose bytes the receiver pulls from the sender's memory (data = `PullDescriptor`).
    PulledRequest = 5,
    /// A response whose bytes the receiver pulls (data = `PullDescriptor`).
    PulledResponse = 6,
}

/// Control ops (kind 4).
pub const CONTROL_HELLO: u16 = 1;
pub const CONTROL_HELLO_REPLY: u16 = 2;
pub const CONTROL_RELEASE: u16 = 3;
/// Status of a hello reply that refuses pulling (the reason is its UTF-8 payload).
pub const STATUS_PULL_REFUSED: u16 = 5;
/// Most tokens one release message carries.
pub const RELEASE_TOKENS_MAX: usize = 512;

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
            4 => Kind::Control,
            5 => Kind::PulledRequest,
            6 => Kind::PulledResponse,
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
        match kind {
            Kind::PulledRequest | Kind::PulledResponse => {
                // One descriptor in place of the whole message: never chunked.
                if header.chunk_count != 1 || header.offset != 0 || data_len != PULL_DESCRIPTOR_LEN {
                    return bad(format!("pulled message with {data_len} bytes of descriptor, chunk {} of {}", header.chunk_index, header.chunk_count));
                }
                if header.status != STATUS_OK {
                    return bad(format!("pulled message with status {}", header.status));
                }
                return Ok(header);
            }
            Kind::Control => {
                let known = matches!(header.op, CONTROL_HELLO | CONTROL_HELLO_REPLY | CONTROL_RELEASE);
                if !known || header.chunk_count != 1 || data_len > CONTROL_MAX_BYTES {
                    return bad(format!("control message op {} with {data_len} bytes in chunk {} of {}", header.op, header.chunk_index, header.chunk_count));
                }
            }
            _ => {}
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

/// Largest control message (a release of `RELEASE_TOKENS_MAX` tokens).
pub const CONTROL_MAX_BYTES: usize = RELEASE_TOKENS_MAX * 8;
pub const PULL_DESCRIPTOR_LEN: usize = 24;
pub const HELLO_LEN: usize = 36 + 4 + 8 + 4 + 16;

/// Where the receiver of a pulled message finds its bytes in the sender's memory.
/// `addr` u64, `slot` u32, 4 reserved bytes (0), `token` u64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullDescriptor {
    pub addr: u64,
    /// The sender's slot whose word holds `token` while the bytes are held for this pull.
    pub slot: u32,
    pub token: u64,
}

impl PullDescriptor {
    pub fn encode(&self) -> [u8; PULL_DESCRIPTOR_LEN] {
        let mut out = [0u8; PULL_DESCRIPTOR_LEN];
        out[0..8].copy_from_slice(&self.addr.to_le_bytes());
        out[8..12].copy_from_slice(&self.slot.to_le_bytes());
        out[16..24].copy_from_slice(&self.token.to_le_bytes());
        out
    }

    /// Checks the descriptor of a message of `total_len` bytes against the sender's announced
    /// slot count: the slot exists, the token is not 0 (a free slot's word), the range does not wrap.
    pub fn decode(bytes: &[u8], total_len: u64, slot_count: u32) -> Result<PullDescriptor> {
        let bad = |m: String| Err(Error::Protocol(m));
        if bytes.len() != PULL_DESCRIPTOR_LEN {
            return bad(format!("pull descriptor of {} bytes", bytes.len()));
        }
        let d = PullDescriptor {
            addr: u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
            slot: u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
            token: u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
        };
        if bytes[12..16] != [0; 4] || d.token == 0 || d.slot >= slot_count {
            return bad(format!("pull descriptor with slot {} of {slot_count}, token {}", d.slot, d.token));
        }
        if d.addr == 0 || d.addr.checked_add(total_len).is_none() {
            return bad(format!("pull descriptor at {:#x} for {total_len} bytes", d.addr));
        }
        Ok(d)
    }
}

/// A process's same-host identity, announced at connection time: the host's boot id, the pid,
/// the address of its `ProcessArea` (nonce, then the slot words) and its slot count, and the
/// nonce. The receiver reads the nonce at that address in that pid to prove it can pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub boot_id: [u8; 36],
    pub pid: u32,
    pub area_addr: u64,
    pub slot_count: u32,
    pub nonce: [u8; 16],
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[0..36].copy_from_slice(&self.boot_id);
        out[36..40].copy_from_slice(&self.pid.to_le_bytes());
        out[40..48].copy_from_slice(&self.area_addr.to_le_bytes());
        out[48..52].copy_from_slice(&self.slot_count.to_le_bytes());
        out[52..68].copy_from_slice(&self.nonce);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Hello> {
        if bytes.len() != HELLO_LEN {
            return Err(Error::Protocol(format!("hello of {} bytes, expected {HELLO_LEN}", bytes.len())));
        }
        let hello = Hello {
            boot_id: bytes[0..36].try_into().unwrap(),
            pid: u32::from_le_bytes(bytes[36..40].try_into().unwrap()),
            area_addr: u64::from_le_bytes(bytes[40..48].try_into().unwrap()),
            slot_count: u32::from_le_bytes(bytes[48..52].try_into().unwrap()),
            nonce: bytes[52..68].try_into().unwrap(),
        };
        if hello.pid == 0 || hello.pid > i32::MAX as u32 || hello.area_addr == 0 || hello.slot_count == 0 {
            return Err(Error::Protocol(format!("hello with pid {}, area {:#x}, {} slots", hello.pid, hello.area_addr, hello.slot_count)));
        }
        Ok(hello)
    }
}

/// The tokens of a release message (a multiple of 8 bytes, at most `RELEASE_TOKENS_MAX`).
pub fn decode_release(bytes: &[u8]) -> Result<Vec<u64>> {
    if bytes.is_empty() || bytes.len() % 8 != 0 || bytes.len() > CONTROL_MAX_BYTES {
        return Err(Error::Protocol(format!("release of {} bytes", bytes.len())));
    }
    Ok(bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect())
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
    fn pulled_messages_carry_exactly_one_descriptor() {
        let h = Header { kind: Kind::PulledRequest, chunk_index: 0, chunk_count: 1, offset: 0, total_len: 1 << 20, ..sample() };
        assert!(Header::decode(&h.encode(), PULL_DESCRIPTOR_LEN, 1 << 20).is_ok());
        assert!(Header::decode(&h.encode(), PULL_DESCRIPTOR_LEN + 1, 1 << 20).is_err());
        assert!(Header::decode(&h.encode(), PULL_DESCRIPTOR_LEN, (1 << 20) - 1).is_err(), "the length limit applies to pulled bytes");
        let chunked = Header { chunk_count: 2, ..h };
        assert!(Header::decode(&chunked.encode(), PULL_DESCRIPTOR_LEN, 1 << 20).is_err());
        let with_status = Header { kind: Kind::PulledResponse, status: 3, ..h };
        assert!(Header::decode(&with_status.encode(), PULL_DESCRIPTOR_LEN, 1 << 20).is_err());
    }

    #[test]
    fn descriptors_are_checked() {
        let d = PullDescriptor { addr: 0x7f00_0000_0000, slot: 3, token: 9 };
        assert_eq!(PullDescriptor::decode(&d.encode(), 4096, 4).unwrap(), d);
        assert!(PullDescriptor::decode(&d.encode(), 4096, 3).is_err(), "slot beyond the announced count");
        assert!(PullDescriptor::decode(&PullDescriptor { token: 0, ..d }.encode(), 4096, 4).is_err());
        assert!(PullDescriptor::decode(&PullDescriptor { addr: u64::MAX - 10, ..d }.encode(), 4096, 4).is_err());
        let mut reserved = d.encode();
        reserved[13] = 1;
        assert!(PullDescriptor::decode(&reserved, 4096, 4).is_err());
        assert!(PullDescriptor::decode(&d.encode()[..20], 4096, 4).is_err());
    }

    #[test]
    fn hello_and_release_round_trip_and_refuse_garbage() {
        let hello = Hello { boot_id: [b'a'; 36], pid: 42, area_addr: 0x1000, slot_count: 16, nonce: [7; 16] };
        assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
        assert!(Hello::decode(&hello.encode()[1..]).is_err());
        assert!(Hello::decode(&Hello { pid: 0, ..hello }.encode()).is_err());
        assert!(Hello::decode(&Hello { slot_count: 0, ..hello }.encode()).is_err());
        assert_eq!(decode_release(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]).unwrap(), vec![1, 2]);
        assert!(decode_release(&[]).is_err());
        assert!(decode_release(&[1, 2, 3]).is_err());
        assert!(decode_release(&vec![1; CONTROL_MAX_BYTES + 8]).is_err());
        let control = Header { kind: Kind::Control, op: CONTROL_RELEASE, chunk_index: 0, chunk_count: 1, offset: 0, total_len: 16, ..sample() };
        assert!(Header::decode(&control.encode(), 16, 1 << 20).is_ok());
        assert!(Header::decode(&Header { op: 99, ..control }.encode(), 16, 1 << 20).is_err());
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
                if !matches!(h.kind, Kind::PulledRequest | Kind::PulledResponse) {
                    assert!(h.offset + data_len as u64 <= h.total_len);
                } else {
                    assert_eq!((h.offset, data_len), (0, PULL_DESCRIPTOR_LEN), "a pulled message carries its descriptor only");
                }
                assert_eq!(Header::decode(&h.encode(), data_len, max), Ok(h));
            }
        }
        assert!(accepted > 1000, "the fuzzer must also reach the accepting path ({accepted})");
    }
}
