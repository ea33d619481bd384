//! Base64 for meta commands' binary keys (`b` flag), a port of memcached's base64.c: the decoder
//! skips bytes outside the alphabet, requires a multiple of four alphabet bytes, and stops after
//! the first padded block, so its answers match memcached's on malformed input too.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Marks a byte outside the alphabet (memcached's 0x80).
const INVALID: u8 = 0x80;

const fn decode_table() -> [u8; 256] {
    let mut table = [INVALID; 256];
    let mut index = 0;
    while index < 64 {
        table[ALPHABET[index] as usize] = index as u8;
        index += 1;
    }
    table[b'=' as usize] = 0;
    table
}

static DECODE: [u8; 256] = decode_table();

/// Bytes `encode` writes for `len` input bytes.
pub(crate) const fn encoded_len(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// Encodes `source` into `target`, which must hold `encoded_len(source.len())` bytes; returns the
/// bytes written.
pub(crate) fn encode(source: &[u8], target: &mut [u8]) -> usize {
    assert!(target.len() >= encoded_len(source.len()));
    let mut written = 0;
    let mut chunks = source.chunks_exact(3);
    for chunk in &mut chunks {
        target[written] = ALPHABET[usize::from(chunk[0] >> 2)];
        target[written + 1] = ALPHABET[usize::from(((chunk[0] & 0x03) << 4) | (chunk[1] >> 4))];
        target[written + 2] = ALPHABET[usize::from(((chunk[1] & 0x0f) << 2) | (chunk[2] >> 6))];
        target[written + 3] = ALPHABET[usize::from(chunk[2] & 0x3f)];
        written += 4;
    }
    match *chunks.remainder() {
        [] => {}
        [a] => {
            target[written] = ALPHABET[usize::from(a >> 2)];
            target[written + 1] = ALPHABET[usize::from((a & 0x03) << 4)];
            target[written + 2] = b'=';
            target[written + 3] = b'=';
            written += 4;
        }
        [a, b] => {
            target[written] = ALPHABET[usize::from(a >> 2)];
            target[written + 1] = ALPHABET[usize::from(((a & 0x03) << 4) | (b >> 4))];
            target[written + 2] = ALPHABET[usize::from((b & 0x0f) << 2)];
            target[written + 3] = b'=';
            written += 4;
        }
        _ => unreachable!("chunks_exact(3) leaves at most two bytes"),
    }
    assert_eq!(written, encoded_len(source.len()));
    written
}

/// Decodes `source` into `target`; `None` where memcached's decoder returns 0 (failure, or an
/// empty result, which memcached cannot tell apart). `target` must hold `source.len()` bytes.
pub(crate) fn decode(source: &[u8], target: &mut [u8]) -> Option<usize> {
    assert!(target.len() >= source.len());
    let alphabet_bytes = source.iter().filter(|&&byte| DECODE[usize::from(byte)] != INVALID).count();
    if alphabet_bytes == 0 || alphabet_bytes % 4 != 0 {
        return None;
    }
    let mut written = 0;
    let mut block = [0u8; 4];
    let mut filled = 0;
    let mut padding = 0;
    for &byte in source {
        let sextet = DECODE[usize::from(byte)];
        if sextet == INVALID {
            continue;
        }
        if byte == b'=' {
            padding += 1;
        }
        block[filled] = sextet;
        filled += 1;
        if filled == 4 {
            target[written] = (block[0] << 2) | (block[1] >> 4);
            target[written + 1] = (block[1] << 4) | (block[2] >> 2);
            target[written + 2] = (block[2] << 6) | block[3];
            written += 3;
            filled = 0;
            if padding > 0 {
                match padding {
                    1 => written -= 1,
                    2 => written -= 2,
                    _ => return None, // Invalid padding.
                }
                break;
            }
        }
    }
    if written == 0 {
        return None;
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) {
        let mut encoded = vec![0u8; encoded_len(data.len())];
        let written = encode(data, &mut encoded);
        let mut decoded = vec![0u8; written];
        let decoded_len = decode(&encoded[..written], &mut decoded).unwrap();
        assert_eq!(&decoded[..decoded_len], data);
    }

    #[test]
    fn round_trips_every_remainder() {
        for len in 1..40usize {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            round_trip(&data);
        }
    }

    #[test]
    fn known_vectors() {
        let mut target = [0u8; 16];
        assert_eq!(encode(b"foo", &mut target), 4);
        assert_eq!(&target[..4], b"Zm9v");
        assert_eq!(encode(b"fo", &mut target), 4);
        assert_eq!(&target[..4], b"Zm8=");
        let mut decoded = [0u8; 16];
        assert_eq!(decode(b"Zm9v", &mut decoded), Some(3));
        assert_eq!(decode(b"Zm8=", &mut decoded), Some(2));
        assert_eq!(&decoded[..2], b"fo");
    }

    #[test]
    fn rejects_what_memcached_rejects() {
        let mut decoded = [0u8; 16];
        assert_eq!(decode(b"!!!!", &mut decoded), None);
        assert_eq!(decode(b"Zm9", &mut decoded), None);
        assert_eq!(decode(b"====", &mut decoded), None);
        assert_eq!(decode(b"", &mut decoded), None);
        // Bytes outside the alphabet are skipped, as memcached does.
        assert_eq!(decode(b"Zm!9v", &mut decoded), Some(3));
    }
}
