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
//!                          the receiver pulls the `total_len` bytes with process_vm_readv),
//!                          7 = bundle (data = whole single-chunk requests and responses, each a
//!                          header and its payload; `chunk_count` = how many: `BundleFrames`)
//!  4     2    op           caller-defined operation code (requests); echoed in responses
//!  6     2    status       0 in requests and responses; an error code in error responses
//!  8     4    chunk_index  0-based
//! 12     4    chunk_count  >= 1
//! 16     8    request_id   chosen by the requester, unique among its requests in flight; bit 63
//!                          (`REQUEST_ID_TAKES_BUNDLES`) set: the requester takes its answers in
//!                          bundles (kind 7). Answers echo it, with bit 62
//!                          (`ANSWER_ID_TAKES_BUNDLES`) set when the answerer takes bundles too.
//! 24     8    total_len    bytes of the whole message
//! 32     8    offset       where this chunk's bytes go in the message
//! ```
//! All integers little-endian. This parser sees untrusted input: it checks every field and
//! never panics (`fuzz/`: cargo-fuzz targets for every decoder here; and a stable-Rust fuzz test
//! below).
//!
//! Versions: the version byte is 1 in every fabric so far, and a fabric refuses any other (the
//! connection closes). Kind 7 came later than the others: a fabric from before it refuses it as an
//! unknown kind, so a node sends bundles only on a connection whose peer announced it takes them,
//! in its requests' ids (`REQUEST_ID_TAKES_BUNDLES`: fabrics from before bundles count their ids up
//! from 1 and never set that bit, and echo it untouched in their answers). A node bundles its
//! requests only to a peer that showed it takes kind 7 (every fabric that does serves requests in
//! it): by answering with `ANSWER_ID_TAKES_BUNDLES`, sending a bundle, or sending a request with
//! `REQUEST_ID_TAKES_BUNDLES`.
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
    /// Several whole single-chunk requests, responses and error responses to one peer in one
    /// active message, sent on connections over TCP only, where every message costs a `sendmsg`
    /// system call on the sender and a trip through the kernel's TCP stack (docs/fabric.md, "Forced
    /// to TCP: where the time goes"). Data = `chunk_count` frames, each a header and its
    /// `total_len` bytes (`BundleFrames`); the bundle's own op, status, request id and offset are 0,
    /// its `total_len` the data's length.
    Bundle = 7,
}

/// Control ops (kind 4).
pub const CONTROL_HELLO: u16 = 1;
pub const CONTROL_HELLO_REPLY: u16 = 2;
pub const CONTROL_RELEASE: u16 = 3;
/// Status of a hello reply that refuses pulling (the reason is its UTF-8 payload).
pub const STATUS_PULL_REFUSED: u16 = 5;
/// Most tokens one release message carries.
pub const RELEASE_TOKENS_MAX: usize = 512;

/// Bit 63 of a request's id: the requester takes answers in bundles (`Kind::Bundle`). A fabric
/// sets it on every request id it chooses; a responder bundles only answers to requests with it,
/// so a peer from before bundles (ids from 1 up) never receives one.
pub const REQUEST_ID_TAKES_BUNDLES: u64 = 1 << 63;

/// Bit 62 of an answer's request id: the answerer takes bundles (of requests). A fabric sets it
/// only in answers to requests with `REQUEST_ID_TAKES_BUNDLES` (whose senders clear it before they
/// match the answer to their request, and so learn that their peer takes bundles); fabrics from
/// before it echo ids untouched, so their answers never carry it.
pub const ANSWER_ID_TAKES_BUNDLES: u64 = 1 << 62;

/// Most frames a bundle carries.
pub const BUNDLE_FRAMES_MAX: u32 = 1024;
/// Most bytes (headers and payloads) a sender puts in one bundle: far below UCX's TCP receive
/// segment (`ucx::TCP_RX_SEG_BYTES`), so a bundle reaches the receiver as one fragment.
pub const BUNDLE_BYTES_MAX: usize = 64 << 10;

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
            7 => Kind::Bundle,
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
        if kind == Kind::Bundle {
            // The frames are checked one by one (`BundleFrames`), each against the length limit;
            // here the envelope: all of the data (already received: nothing is allocated for it),
            // room for a header per frame, nothing else set.
            let plain = header.op == 0 && header.status == STATUS_OK && header.request_id == 0 && header.offset == 0 && header.chunk_index == 0;
            if !plain || header.chunk_count > BUNDLE_FRAMES_MAX || header.total_len != data_len as u64 {
                return bad(format!("bundle of {} frames in {data_len} bytes (total {})", header.chunk_count, header.total_len));
            }
            if (data_len as u64) < header.chunk_count as u64 * HEADER_LEN as u64 {
                return bad(format!("bundle of {} frames in {data_len} bytes", header.chunk_count));
            }
            return Ok(header);
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

impl Header {
    /// The header of a bundle of `frames` frames in `len` bytes.
    pub fn bundle(frames: u32, len: usize) -> Header {
        Header { kind: Kind::Bundle, op: 0, status: STATUS_OK, chunk_index: 0, chunk_count: frames, request_id: 0, total_len: len as u64, offset: 0 }
    }
}

/// The frames of a bundle (`Kind::Bundle`), in order: each a header, checked by `Header::decode`
/// like a message of its own, that must be a whole single-chunk request, response or error
/// response, and its payload. An error ends the iteration; so do the bundle's last frame and
/// bytes left after it (an error too). Nothing is allocated or copied.
pub struct BundleFrames<'a> {
    rest: &'a [u8],
    left: u32,
    max_message_bytes: usize,
}

impl<'a> BundleFrames<'a> {
    /// The frames of `data`, which came with `bundle` (a header `Header::decode` accepted).
    pub fn new(bundle: &Header, data: &'a [u8], max_message_bytes: usize) -> BundleFrames<'a> {
        debug_assert_eq!(bundle.kind, Kind::Bundle);
        BundleFrames { rest: data, left: bundle.chunk_count, max_message_bytes }
    }

    fn frame(&mut self) -> Result<(Header, &'a [u8])> {
        let bad = |m: String| Err(Error::Protocol(m));
        if self.rest.len() < HEADER_LEN {
            return bad(format!("bundle frame of {} bytes, shorter than a header", self.rest.len()));
        }
        let (head, after) = self.rest.split_at(HEADER_LEN);
        let len = u64::from_le_bytes(head[24..32].try_into().unwrap());
        if len > after.len() as u64 {
            return bad(format!("bundle frame of {len} bytes overruns the bundle ({} left)", after.len()));
        }
        let (payload, rest) = after.split_at(len as usize);
        let header = Header::decode(head, payload.len(), self.max_message_bytes)?;
        if !matches!(header.kind, Kind::Request | Kind::Response | Kind::ErrorResponse) || header.chunk_count != 1 {
            return bad(format!("bundle frame of kind {:?} in {} chunks", header.kind, header.chunk_count));
        }
        self.rest = rest;
        Ok((header, payload))
    }
}

impl<'a> Iterator for BundleFrames<'a> {
    type Item = Result<(Header, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if self.rest.is_empty() {
                return None;
            }
            let left = std::mem::take(&mut self.rest).len();
            return Some(Err(Error::Protocol(format!("{left} bytes after the last frame of a bundle"))));
        }
        self.left -= 1;
        let frame = self.frame();
        if frame.is_err() {
            (self.left, self.rest) = (0, &[]);
        }
        Some(frame)
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

/// The chunk size of the cut `chunking` makes (chunks of one size back to back, the last one what
/// is left) in which `len` bytes at `header.offset` are chunk `header.chunk_index` of
/// `header.chunk_count`; None if no cut puts them there. The reassembly holds every chunk of a
/// message to its first chunk's size, so the chunks of a complete message tile it: `decode` only
/// checks that a chunk lies inside its message, and chunks that overlap could add up to its length
/// and leave a hole.
pub fn chunk_cut(header: &Header, len: usize) -> Option<u64> {
    let (index, count, len) = (u64::from(header.chunk_index), u64::from(header.chunk_count), len as u64);
    if count <= 1 {
        return (header.offset == 0 && len == header.total_len).then_some(len);
    }
    // Every chunk but the last is one size long; the last starts `count - 1` sizes in.
    let last = index + 1 == count;
    let size = if last { header.offset / (count - 1) } else { len };
    let offset = index.checked_mul(size)?;
    let len_expected = if last { header.total_len.checked_sub(offset)? } else { size };
    let fits = size > 0 && offset == header.offset && len == len_expected && header.total_len.div_ceil(size) == count;
    fits.then_some(size)
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

    /// A bundle's bytes: each frame a single-chunk message of `kind` with its payload.
    fn bundle_of(frames: &[(Kind, u64, &[u8])]) -> (Header, Vec<u8>) {
        let mut data = Vec::new();
        for &(kind, request_id, payload) in frames {
            let h = Header { kind, op: 3, status: 0, chunk_index: 0, chunk_count: 1, request_id, total_len: payload.len() as u64, offset: 0 };
            data.extend_from_slice(&h.encode());
            data.extend_from_slice(payload);
        }
        (Header::bundle(frames.len() as u32, data.len()), data)
    }

    #[test]
    fn a_bundle_round_trips_frame_by_frame() {
        let (bundle, data) = bundle_of(&[(Kind::Request, 1, b"one"), (Kind::Response, 2, b""), (Kind::Request, 3, &[7; 100])]);
        assert_eq!(Header::decode(&bundle.encode(), data.len(), 1 << 20), Ok(bundle));
        let frames: Vec<(Header, &[u8])> = BundleFrames::new(&bundle, &data, 1 << 20).map(Result::unwrap).collect();
        assert_eq!(frames.len(), 3);
        assert_eq!((frames[0].0.request_id, frames[0].1), (1, &b"one"[..]));
        assert_eq!((frames[1].0.kind, frames[1].1.len()), (Kind::Response, 0));
        assert_eq!((frames[2].0.request_id, frames[2].1), (3, &[7u8; 100][..]));
    }

    #[test]
    fn a_bundle_envelope_must_hold_all_its_data_and_nothing_else() {
        let (bundle, data) = bundle_of(&[(Kind::Request, 1, b"one"), (Kind::Request, 2, b"two")]);
        let len = data.len();
        assert!(Header::decode(&bundle.encode(), len - 1, 1 << 20).is_err(), "total_len is the data's length");
        // The length limit applies to each frame (a bundle may be longer than any one message).
        assert!(Header::decode(&bundle.encode(), len, 8).is_ok());
        assert!(BundleFrames::new(&bundle, &data, 3).all(|f| f.is_ok()));
        assert!(BundleFrames::new(&bundle, &data, 2).any(|f| f.is_err()));
        for bad in [
            Header { op: 1, ..bundle },
            Header { status: 1, ..bundle },
            Header { request_id: 9, ..bundle },
            Header { offset: 1, ..bundle },
            Header { chunk_index: 1, ..bundle },
            Header { chunk_count: BUNDLE_FRAMES_MAX + 1, ..bundle },
            Header { chunk_count: 0, ..bundle },
        ] {
            assert!(Header::decode(&bad.encode(), len, 1 << 20).is_err(), "{bad:?}");
        }
        let (tiny, tiny_data) = bundle_of(&[(Kind::Request, 1, b"")]);
        assert!(Header::decode(&Header { chunk_count: 2, ..tiny }.encode(), tiny_data.len(), 1 << 20).is_err(), "no room for two headers");
    }

    /// At the limit: `BUNDLE_FRAMES_MAX` frames are a bundle, one more is not.
    #[test]
    fn a_bundle_holds_at_most_bundle_frames_max_frames() {
        let frames: Vec<(Kind, u64, &[u8])> = (0..BUNDLE_FRAMES_MAX as u64).map(|id| (Kind::Response, id, &b""[..])).collect();
        let (bundle, data) = bundle_of(&frames);
        assert_eq!(Header::decode(&bundle.encode(), data.len(), 1 << 20), Ok(bundle));
        assert_eq!(BundleFrames::new(&bundle, &data, 1 << 20).filter(Result::is_ok).count(), BUNDLE_FRAMES_MAX as usize);
        let (more, more_data) = bundle_of(&[frames.as_slice(), &[(Kind::Response, 0, &b""[..])]].concat());
        assert!(Header::decode(&more.encode(), more_data.len(), 1 << 20).is_err());
    }

    #[test]
    fn bad_frames_end_a_bundle_with_an_error() {
        let errors = |bundle: &Header, data: &[u8]| BundleFrames::new(bundle, data, 1 << 20).filter(Result::is_err).count();
        let (bundle, data) = bundle_of(&[(Kind::Request, 1, b"one"), (Kind::Response, 2, b"two")]);
        assert_eq!(errors(&bundle, &data), 0);
        // More bytes than the frames take, fewer frames than announced.
        assert_eq!(errors(&Header { chunk_count: 1, ..bundle }, &data), 1);
        assert_eq!(errors(&Header { chunk_count: 3, ..bundle }, &data), 1);
        // A frame that overruns the bundle, a frame that is not a whole message of the three kinds.
        let (_, mut overrun) = bundle_of(&[(Kind::Request, 1, b"one")]);
        overrun[24] = 200;
        assert_eq!(errors(&Header::bundle(1, overrun.len()), &overrun), 1);
        for (kind, chunks) in [(Kind::Bundle, 1), (Kind::Control, 1), (Kind::PulledRequest, 1), (Kind::Request, 2)] {
            let inner = Header { kind, op: CONTROL_RELEASE, status: 0, chunk_index: 0, chunk_count: chunks, request_id: 0, total_len: 8192, offset: 0 };
            let mut frame = inner.encode().to_vec();
            frame.extend_from_slice(&[0; 8192]);
            assert_eq!(errors(&Header::bundle(1, frame.len()), &frame), 1, "{kind:?} in {chunks} chunks");
        }
        // The first error ends the iteration: nothing after it is read.
        let (bundle, mut data) = bundle_of(&[(Kind::Request, 1, b"one"), (Kind::Request, 2, b"two"), (Kind::Request, 3, b"three")]);
        data[HEADER_LEN + 3] = 0; // the second frame's magic
        let results: Vec<bool> = BundleFrames::new(&bundle, &data, 1 << 20).map(|f| f.is_ok()).collect();
        assert_eq!(results, [true, false]);
    }

    /// Random mutations of a valid bundle through `BundleFrames`: it never panics, and every frame
    /// it yields is a whole message of a kind a bundle may carry.
    #[test]
    fn bundle_frames_fuzz() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let payloads: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8; i * 37]).collect();
        let frames: Vec<(Kind, u64, &[u8])> = payloads.iter().enumerate().map(|(i, p)| (if i % 2 == 0 { Kind::Request } else { Kind::Response }, i as u64, &p[..])).collect();
        let (bundle, valid) = bundle_of(&frames);
        let (mut yielded, mut clean) = (0, 0);
        for _ in 0..50_000 {
            let mut data = valid.clone();
            for _ in 0..(next() % 4) {
                let i = (next() as usize) % data.len();
                data[i] = next() as u8;
            }
            if next() % 8 == 0 {
                data.truncate((next() as usize) % (data.len() + 1));
            }
            let count = if next() % 8 == 0 { (next() % 10) as u32 } else { bundle.chunk_count };
            let mut errors = 0;
            for frame in BundleFrames::new(&Header { chunk_count: count, ..bundle }, &data, 1 << 20) {
                match frame {
                    Ok((h, payload)) => {
                        yielded += 1;
                        assert!(matches!(h.kind, Kind::Request | Kind::Response | Kind::ErrorResponse));
                        assert_eq!((h.chunk_count, h.offset, payload.len() as u64), (1, 0, h.total_len));
                    }
                    Err(_) => errors += 1,
                }
            }
            assert!(errors <= 1, "an error ends the iteration");
            clean += (errors == 0) as u32;
        }
        assert!(yielded > 10_000 && clean > 1000, "the fuzzer must reach whole bundles too ({yielded} frames, {clean} clean)");
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
                assert!(h.total_len <= max as u64 || h.kind == Kind::Bundle);
                if h.kind == Kind::Bundle {
                    assert_eq!((h.total_len, h.offset), (data_len as u64, 0), "a bundle's frames are all of its data");
                    assert!(h.chunk_count as u64 * HEADER_LEN as u64 <= data_len as u64);
                } else if !matches!(h.kind, Kind::PulledRequest | Kind::PulledResponse) {
                    assert!(h.offset + data_len as u64 <= h.total_len);
                } else {
                    assert_eq!((h.offset, data_len), (0, PULL_DESCRIPTOR_LEN), "a pulled message carries its descriptor only");
                }
                assert_eq!(Header::decode(&h.encode(), data_len, max), Ok(h));
            }
        }
        assert!(accepted > 1000, "the fuzzer must also reach the accepting path ({accepted})");
    }

    #[test]
    fn chunk_cut_finds_the_cut_of_every_chunk_a_sender_makes_and_no_other() {
        for (total_len, chunk_size) in [(0usize, 4096usize), (100, 4096), (4096, 4096), (4097, 4096), (12_288, 4096), (10_000, 5000), ((10 << 20) + 3, 1 << 20)] {
            let (count, size) = chunking(total_len, chunk_size);
            for index in 0..count {
                let offset = index as usize * size;
                let len = size.min(total_len - offset);
                let header = Header { chunk_index: index, chunk_count: count, total_len: total_len as u64, offset: offset as u64, ..sample() };
                assert_eq!(chunk_cut(&header, len), Some(size as u64), "chunk {index} of {total_len} bytes cut at {chunk_size}");
                // Moved, shortened or lengthened by a byte: off this cut (a shorter first chunk
                // may fit another; the reassembly holds every chunk to its first chunk's).
                for (offset, len) in [(offset + 1, len), (offset.wrapping_sub(1), len), (offset, len.wrapping_sub(1)), (offset, len + 1)] {
                    let bent = Header { offset: offset as u64, ..header };
                    assert_ne!(chunk_cut(&bent, len), Some(size as u64), "{bent:?} with {len} bytes");
                }
            }
        }
        // Chunks that lie inside their message but overlap (both at offset 0): the second is off.
        let second = Header { chunk_index: 1, chunk_count: 2, total_len: 8192, offset: 0, ..sample() };
        assert_eq!(chunk_cut(&second, 4096), None);
    }
}
