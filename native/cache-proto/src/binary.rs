//! memcached's binary protocol: the 24-byte header, opcodes and status codes shared by the server's
//! parser and the client's encoder. Layout (network byte order):
//!
//! ```text
//! 0 magic  1 opcode  2-3 key length  4 extras length  5 data type  6-7 vbucket (request) / status
//! 8-11 total body length (extras + key + value)  12-15 opaque  16-23 cas
//! ```

pub const HEADER_BYTES: usize = 24;
pub const MAGIC_REQUEST: u8 = 0x80;
pub const MAGIC_RESPONSE: u8 = 0x81;

/// Opcodes (memcached's `protocol_binary.h`).
pub mod opcode {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// Response status codes.
pub mod status {
    pub const NO_ERROR: u16 = 0x0000;
    pub const KEY_NOT_FOUND: u16 = 0x0001;
    pub const KEY_EXISTS: u16 = 0x0002;
    pub const VALUE_TOO_LARGE: u16 = 0x0003;
    pub const INVALID_ARGUMENTS: u16 = 0x0004;
    pub const ITEM_NOT_STORED: u16 = 0x0005;
    pub const NON_NUMERIC: u16 = 0x0006;
    pub const VBUCKET_ELSEWHERE: u16 = 0x0007;
    pub const AUTH_ERROR: u16 = 0x0020;
    pub const AUTH_CONTINUE: u16 = 0x0021;
    pub const UNKNOWN_COMMAND: u16 = 0x0081;
    pub const OUT_OF_MEMORY: u16 = 0x0082;
    pub const NOT_SUPPORTED: u16 = 0x0083;
    pub const INTERNAL_ERROR: u16 = 0x0084;
    pub const BUSY: u16 = 0x0085;
    pub const TEMPORARY_FAILURE: u16 = 0x0086;
}

/// A decoded header, request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub key_len: u16,
    pub extras_len: u8,
    pub data_type: u8,
    /// vbucket id in requests, status in responses.
    pub vbucket_or_status: u16,
    pub body_len: u32,
    pub opaque: u32,
    pub cas: u64,
}

impl Header {
    /// Decodes the first 24 bytes of `bytes`; `None` if fewer are present. Does not validate.
    pub fn decode(bytes: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_BYTES] = bytes.get(..HEADER_BYTES)?.try_into().ok()?;
        Some(Header {
            magic: b[0],
            opcode: b[1],
            key_len: u16::from_be_bytes([b[2], b[3]]),
            extras_len: b[4],
            data_type: b[5],
            vbucket_or_status: u16::from_be_bytes([b[6], b[7]]),
            body_len: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
        })
    }

    pub fn encode(&self, out: &mut [u8]) {
        let out: &mut [u8; HEADER_BYTES] = (&mut out[..HEADER_BYTES]).try_into().unwrap();
        out[0] = self.magic;
        out[1] = self.opcode;
        out[2..4].copy_from_slice(&self.key_len.to_be_bytes());
        out[4] = self.extras_len;
        out[5] = self.data_type;
        out[6..8].copy_from_slice(&self.vbucket_or_status.to_be_bytes());
        out[8..12].copy_from_slice(&self.body_len.to_be_bytes());
        out[12..16].copy_from_slice(&self.opaque.to_be_bytes());
        out[16..24].copy_from_slice(&self.cas.to_be_bytes());
    }

    /// Bytes of the value: body minus extras and key; `None` if the lengths are inconsistent.
    pub fn value_len(&self) -> Option<usize> {
        (self.body_len as usize).checked_sub(self.extras_len as usize + self.key_len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header {
            magic: MAGIC_REQUEST,
            opcode: opcode::SET,
            key_len: 5,
            extras_len: 8,
            data_type: 0,
            vbucket_or_status: 0,
            body_len: 8 + 5 + 3,
            opaque: 0xdead_beef,
            cas: 42,
        };
        let mut bytes = [0u8; HEADER_BYTES];
        h.encode(&mut bytes);
        assert_eq!(Header::decode(&bytes), Some(h));
        assert_eq!(h.value_len(), Some(3));
        assert_eq!(Header::decode(&bytes[..23]), None);
    }

    #[test]
    fn inconsistent_lengths_have_no_value_length() {
        let h = Header { key_len: 10, extras_len: 8, body_len: 17, ..Header::default() };
        assert_eq!(h.value_len(), None);
    }
}
