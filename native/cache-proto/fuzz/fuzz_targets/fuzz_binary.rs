//! The binary protocol: raw bytes after a request magic, or (odd seeds) packets assembled from the
//! input with plausible lengths, so that deep paths are reached as well as the framing checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

const EXTRAS_LENGTHS: [usize; 5] = [0, 4, 8, 20, 3];

/// Packets from a byte stream: opcode, key length, extras length selector, value length, CAS
/// selector, then that many bytes of extras, key and value; a selector byte sometimes corrupts
/// the body length.
fn packets(mut data: &[u8]) -> Vec<u8> {
    let mut stream = Vec::new();
    while data.len() >= 5 {
        let (opcode, key_len, extras_selector, value_len, cas_selector) =
            (data[0], usize::from(data[1] % 12), data[2], usize::from(data[3]), data[4]);
        data = &data[5..];
        let extras_len = EXTRAS_LENGTHS[usize::from(extras_selector) % EXTRAS_LENGTHS.len()];
        let body_len = (extras_len + key_len + value_len).min(data.len());
        let body = &data[..body_len];
        data = &data[body_len..];
        let mut declared_body = body_len as u32;
        if extras_selector >= 0xf0 {
            declared_body = declared_body.wrapping_add(u32::from(extras_selector & 0x0f)).wrapping_sub(8);
        }
        stream.push(0x80);
        stream.push(opcode);
        stream.extend_from_slice(&(key_len as u16).to_be_bytes());
        stream.push(extras_len as u8);
        stream.push(0);
        stream.extend_from_slice(&[0, 0]);
        stream.extend_from_slice(&declared_body.to_be_bytes());
        stream.extend_from_slice(&u32::from(opcode).to_be_bytes());
        stream.extend_from_slice(&u64::from(cas_selector % 4).to_be_bytes());
        stream.extend_from_slice(body);
    }
    stream
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let input = if seed & 1 == 1 {
        packets(rest)
    } else {
        let mut raw = rest.to_vec();
        if let Some(first) = raw.first_mut() {
            *first = 0x80;
        }
        raw
    };
    let out = common::check(&input, seed, seed & 0x80 != 0);
    if !input.is_empty() {
        common::assert_binary_responses(&out);
    }
});
