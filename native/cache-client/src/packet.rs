//! Binary-protocol packets as the client writes and reads them: requests encoded into a caller's
//! buffer (no allocation), replies parsed in place and checked before any field is trusted.
use cache_proto::binary::{Header, HEADER_BYTES, MAGIC_REQUEST, MAGIC_RESPONSE};

use crate::error::{Error, Result};

/// memcached's key length limit.
pub const KEY_BYTES_MAX: usize = 250;

/// `exptime` of incr/decr that means "fail if missing" instead of creating the item.
pub const NO_INITIAL_VALUE: u32 = 0xffff_ffff;

/// Checks a key the way the server would, before anything is sent.
#[inline]
pub fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(Error::InvalidKey { len: key.len() });
    }
    Ok(())
}

/// The extras of a request: at most 20 bytes (incr/decr), kept inline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras {
    bytes: [u8; 20],
    len: u8,
}

impl Extras {
    pub const NONE: Extras = Extras { bytes: [0; 20], len: 0 };

    /// set/add/replace/cas: flags, exptime.
    pub fn store(flags: u32, exptime: u32) -> Extras {
        let mut e = Extras { len: 8, ..Extras::NONE };
        e.bytes[0..4].copy_from_slice(&flags.to_be_bytes());
        e.bytes[4..8].copy_from_slice(&exptime.to_be_bytes());
        e
    }

    /// incr/decr: delta, initial value, exptime (`NO_INITIAL_VALUE`: fail if missing).
    pub fn counter(delta: u64, initial: u64, exptime: u32) -> Extras {
        let mut e = Extras { len: 20, ..Extras::NONE };
        e.bytes[0..8].copy_from_slice(&delta.to_be_bytes());
        e.bytes[8..16].copy_from_slice(&initial.to_be_bytes());
        e.bytes[16..20].copy_from_slice(&exptime.to_be_bytes());
        e
    }

    /// touch, gat, flush (delay): one 32-bit time.
    pub fn time(exptime: u32) -> Extras {
        let mut e = Extras { len: 4, ..Extras::NONE };
        e.bytes[0..4].copy_from_slice(&exptime.to_be_bytes());
        e
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// One request: what `encode` writes.
#[derive(Debug, Clone, Copy)]
pub struct Req<'a> {
    pub opcode: u8,
    pub extras: Extras,
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub opaque: u32,
    pub cas: u64,
}

impl<'a> Req<'a> {
    pub fn new(opcode: u8, key: &'a [u8]) -> Req<'a> {
        Req { opcode, extras: Extras::NONE, key, value: &[], opaque: 0, cas: 0 }
    }

    /// Bytes of the whole packet (never 0: the header alone is 24).
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        HEADER_BYTES + self.extras.len as usize + self.key.len() + self.value.len()
    }

    /// Bytes of header, extras and key: everything but the value.
    #[inline]
    pub fn head_len(&self) -> usize {
        HEADER_BYTES + self.extras.len as usize + self.key.len()
    }

    fn header(&self) -> Header {
        let body = self.extras.len as usize + self.key.len() + self.value.len();
        debug_assert!(self.key.len() <= u16::MAX as usize && body <= u32::MAX as usize);
        Header {
            magic: MAGIC_REQUEST,
            opcode: self.opcode,
            key_len: self.key.len() as u16,
            extras_len: self.extras.len,
            data_type: 0,
            vbucket_or_status: 0,
            body_len: body as u32,
            opaque: self.opaque,
            cas: self.cas,
        }
    }

    /// Writes header, extras and key into `out[..head_len()]`.
    pub fn encode_head(&self, out: &mut [u8]) {
        self.header().encode(out);
        let extras = self.extras.as_slice();
        let key_at = HEADER_BYTES + extras.len();
        out[HEADER_BYTES..key_at].copy_from_slice(extras);
        out[key_at..key_at + self.key.len()].copy_from_slice(self.key);
    }

    /// Writes the whole packet into `out[..len()]`.
    pub fn encode(&self, out: &mut [u8]) {
        let head = self.head_len();
        self.encode_head(out);
        out[head..head + self.value.len()].copy_from_slice(self.value);
    }

    /// Appends the whole packet to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + self.len(), 0);
        self.encode(&mut out[at..]);
    }

    /// Appends header, extras and key to `out` (the value is sent separately).
    pub fn append_head_to(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + self.head_len(), 0);
        self.encode_head(&mut out[at..]);
    }
}

/// A reply, parsed in place.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl Reply<'_> {
    /// The item flags of a get reply (the first 4 bytes of its extras; 0 without extras).
    pub fn flags(&self) -> u32 {
        match self.extras.get(..4) {
            Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            None => 0,
        }
    }

    /// `Ok(())` on success, else the status as a typed error.
    pub fn check(&self) -> Result<()> {
        if self.status == 0 {
            Ok(())
        } else {
            Err(Error::from_status(self.status))
        }
    }

    /// The 64-bit value of an incr/decr reply.
    pub fn counter(&self) -> Result<u64> {
        self.check()?;
        let b: [u8; 8] = self
            .value
            .try_into()
            .map_err(|_| Error::Protocol(format!("counter reply of {} bytes", self.value.len())))?;
        Ok(u64::from_be_bytes(b))
    }
}

/// The header of a reply whose body may not have arrived yet: its total length, checked.
#[derive(Debug, Clone, Copy)]
pub struct ReplyHead {
    pub header: Header,
    /// Header plus body.
    pub total_len: usize,
}

/// Decodes and checks a reply header from `bytes` (at least 24 bytes). Bodies above
/// `body_bytes_max` and inconsistent lengths are protocol errors.
pub fn reply_head(bytes: &[u8], body_bytes_max: usize) -> Result<ReplyHead> {
    let header = Header::decode(bytes).expect("reply_head needs 24 bytes");
    if header.magic != MAGIC_RESPONSE {
        return Err(Error::Protocol(format!("reply magic 0x{:02x}", header.magic)));
    }
    let body = header.body_len as usize;
    if body > body_bytes_max {
        return Err(Error::Protocol(format!("reply body of {body} bytes exceeds the limit of {body_bytes_max}")));
    }
    if header.value_len().is_none() {
        return Err(Error::Protocol(format!(
            "reply extras {} + key {} exceed its body of {body} bytes",
            header.extras_len, header.key_len
        )));
    }
    Ok(ReplyHead { header, total_len: HEADER_BYTES + body })
}

/// Parses the complete reply at the start of `bytes` (`bytes.len() >= head.total_len`).
pub fn reply_at<'a>(bytes: &'a [u8], head: &ReplyHead) -> Reply<'a> {
    let h = &head.header;
    let extras_end = HEADER_BYTES + h.extras_len as usize;
    let key_end = extras_end + h.key_len as usize;
    Reply {
        opcode: h.opcode,
        status: h.vbucket_or_status,
        opaque: h.opaque,
        cas: h.cas,
        extras: &bytes[HEADER_BYTES..extras_end],
        key: &bytes[extras_end..key_end],
        value: &bytes[key_end..head.total_len],
    }
}

/// Iterates over the complete replies in `bytes` (a fabric response payload); a truncated or
/// malformed reply ends the iteration with an error.
pub struct Replies<'a> {
    bytes: &'a [u8],
    body_bytes_max: usize,
}

impl<'a> Replies<'a> {
    pub fn new(bytes: &'a [u8], body_bytes_max: usize) -> Replies<'a> {
        Replies { bytes, body_bytes_max }
    }
}

impl<'a> Iterator for Replies<'a> {
    type Item = Result<Reply<'a>>;

    fn next(&mut self) -> Option<Result<Reply<'a>>> {
        if self.bytes.is_empty() {
            return None;
        }
        if self.bytes.len() < HEADER_BYTES {
            let n = self.bytes.len();
            self.bytes = &[];
            return Some(Err(Error::Protocol(format!("truncated reply header ({n} bytes)"))));
        }
        let head = match reply_head(self.bytes, self.body_bytes_max) {
            Ok(head) => head,
            Err(e) => {
                self.bytes = &[];
                return Some(Err(e));
            }
        };
        if self.bytes.len() < head.total_len {
            let n = self.bytes.len();
            self.bytes = &[];
            return Some(Err(Error::Protocol(format!("truncated reply: {n} of {} bytes", head.total_len))));
        }
        let bytes = self.bytes;
        let reply = reply_at(bytes, &head);
        self.bytes = &bytes[head.total_len..];
        Some(Ok(reply))
    }
}

/// The single reply a one-packet request gets over the fabric.
pub fn single_reply(bytes: &[u8], body_bytes_max: usize) -> Result<Reply<'_>> {
    let mut replies = Replies::new(bytes, body_bytes_max);
    let reply = replies.next().unwrap_or_else(|| Err(Error::Protocol("empty reply".into())))?;
    if replies.bytes.is_empty() {
        Ok(reply)
    } else {
        Err(Error::Protocol(format!("{} bytes after the reply", replies.bytes.len())))
    }
}

/// The SASL PLAIN authentication request value: `\0username\0password`.
pub fn sasl_plain(username: &str, password: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + username.len() + password.len());
    v.push(0);
    v.extend_from_slice(username.as_bytes());
    v.push(0);
    v.extend_from_slice(password.as_bytes());
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cache_proto::binary::{opcode, status};

    /// A reply as a server would send it.
    pub fn reply_bytes(op: u8, status: u16, opaque: u32, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let h = Header {
            magic: MAGIC_RESPONSE,
            opcode: op,
            key_len: key.len() as u16,
            extras_len: extras.len() as u8,
            data_type: 0,
            vbucket_or_status: status,
            body_len: (extras.len() + key.len() + value.len()) as u32,
            opaque,
            cas,
        };
        let mut out = vec![0u8; HEADER_BYTES];
        h.encode(&mut out);
        out.extend_from_slice(extras);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn set_request_layout_matches_the_protocol() {
        let req = Req {
            extras: Extras::store(0xdeadbeef, 3600),
            value: b"val",
            opaque: 7,
            cas: 9,
            ..Req::new(opcode::SET, b"key")
        };
        let mut out = Vec::new();
        req.append_to(&mut out);
        assert_eq!(out.len(), 24 + 8 + 3 + 3);
        assert_eq!(out[0], MAGIC_REQUEST);
        assert_eq!(out[1], opcode::SET);
        assert_eq!(&out[2..4], &[0, 3]); // key length
        assert_eq!(out[4], 8); // extras length
        assert_eq!(&out[8..12], &14u32.to_be_bytes()); // body
        assert_eq!(&out[12..16], &7u32.to_be_bytes()); // opaque
        assert_eq!(&out[16..24], &9u64.to_be_bytes()); // cas
        assert_eq!(&out[24..28], &0xdeadbeefu32.to_be_bytes());
        assert_eq!(&out[28..32], &3600u32.to_be_bytes());
        assert_eq!(&out[32..35], b"key");
        assert_eq!(&out[35..], b"val");
        // The head alone, for vectored sends.
        let mut head = Vec::new();
        req.append_head_to(&mut head);
        assert_eq!(&head[..], &out[..35]);
    }

    #[test]
    fn counter_and_time_extras() {
        let e = Extras::counter(5, 10, NO_INITIAL_VALUE);
        assert_eq!(e.as_slice().len(), 20);
        assert_eq!(&e.as_slice()[0..8], &5u64.to_be_bytes());
        assert_eq!(&e.as_slice()[8..16], &10u64.to_be_bytes());
        assert_eq!(&e.as_slice()[16..20], &[0xff; 4]);
        assert_eq!(Extras::time(60).as_slice(), &60u32.to_be_bytes());
        assert!(Extras::NONE.as_slice().is_empty());
    }

    #[test]
    fn get_reply_parses() {
        let bytes = reply_bytes(opcode::GET, 0, 3, 77, &42u32.to_be_bytes(), b"", b"hello");
        let reply = single_reply(&bytes, 1 << 20).unwrap();
        assert_eq!((reply.opcode, reply.status, reply.opaque, reply.cas), (opcode::GET, 0, 3, 77));
        assert_eq!(reply.flags(), 42);
        assert_eq!(reply.value, b"hello");
        assert!(reply.check().is_ok());
    }

    #[test]
    fn error_status_and_counter_replies() {
        let bytes = reply_bytes(opcode::GET, status::KEY_NOT_FOUND, 0, 0, b"", b"", b"Not found");
        assert!(matches!(single_reply(&bytes, 1 << 20).unwrap().check(), Err(Error::NotFound)));
        let bytes = reply_bytes(opcode::INCREMENT, 0, 0, 1, b"", b"", &11u64.to_be_bytes());
        assert_eq!(single_reply(&bytes, 1 << 20).unwrap().counter().unwrap(), 11);
        let bytes = reply_bytes(opcode::INCREMENT, 0, 0, 1, b"", b"", b"11");
        assert!(matches!(single_reply(&bytes, 1 << 20).unwrap().counter(), Err(Error::Protocol(_))));
    }

    #[test]
    fn several_replies_in_one_payload() {
        let mut bytes = reply_bytes(opcode::GETKQ, 0, 0, 1, &0u32.to_be_bytes(), b"a", b"1");
        bytes.extend(reply_bytes(opcode::GETKQ, 0, 2, 2, &0u32.to_be_bytes(), b"c", b"333"));
        bytes.extend(reply_bytes(opcode::NOOP, 0, 9, 0, b"", b"", b""));
        let replies: Vec<_> = Replies::new(&bytes, 1 << 20).collect::<Result<_>>().unwrap();
        assert_eq!(replies.len(), 3);
        assert_eq!((replies[0].key, replies[0].value), (&b"a"[..], &b"1"[..]));
        assert_eq!((replies[1].opaque, replies[1].value), (2, &b"333"[..]));
        assert_eq!(replies[2].opcode, opcode::NOOP);
        assert!(matches!(single_reply(&bytes, 1 << 20), Err(Error::Protocol(_))));
    }

    #[test]
    fn malformed_replies_are_protocol_errors() {
        let good = reply_bytes(opcode::GET, 0, 0, 0, &0u32.to_be_bytes(), b"", b"hello");
        // Wrong magic.
        let mut bad = good.clone();
        bad[0] = MAGIC_REQUEST;
        assert!(matches!(single_reply(&bad, 1 << 20), Err(Error::Protocol(_))));
        // Truncated header, truncated body.
        assert!(matches!(single_reply(&good[..10], 1 << 20), Err(Error::Protocol(_))));
        assert!(matches!(single_reply(&good[..good.len() - 1], 1 << 20), Err(Error::Protocol(_))));
        // Extras + key beyond the body.
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&100u16.to_be_bytes());
        assert!(matches!(single_reply(&bad, 1 << 20), Err(Error::Protocol(_))));
        // Body above the limit.
        assert!(matches!(single_reply(&good, 8), Err(Error::Protocol(_))));
        assert!(matches!(single_reply(&[], 8), Err(Error::Protocol(_))));
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key(b"k").is_ok());
        assert!(check_key(&[b'k'; 250]).is_ok());
        assert!(matches!(check_key(b""), Err(Error::InvalidKey { len: 0 })));
        assert!(matches!(check_key(&[b'k'; 251]), Err(Error::InvalidKey { len: 251 })));
    }

    #[test]
    fn sasl_plain_value() {
        assert_eq!(sasl_plain("u", "pw"), b"\0u\0pw");
    }
}
