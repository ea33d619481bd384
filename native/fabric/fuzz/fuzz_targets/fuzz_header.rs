//! `wire::Header::decode`, the check of every active message's header: the input's first 40 bytes
//! (fewer: a short header) are the header, the next 4 the data length that came with it, the byte
//! after them picks the receiver's `max_message_bytes`. Whatever it accepts must satisfy what the
//! receive path relies on, and encode back to the same header.
#![no_main]

use fabric::wire::{Header, Kind, BUNDLE_FRAMES_MAX, CONTROL_MAX_BYTES, HEADER_LEN, MIN_CHUNK_BYTES, PULL_DESCRIPTOR_LEN};
use libfuzzer_sys::fuzz_target;

const LIMITS: [usize; 6] = [0, 1, 4096, 1 << 20, 1 << 30, usize::MAX];

fuzz_target!(|input: &[u8]| {
    let (bytes, rest) = input.split_at(input.len().min(HEADER_LEN));
    let data_len = rest.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let max = rest.get(4).map_or(1 << 20, |&s| LIMITS[usize::from(s) % LIMITS.len()]);
    let Ok(h) = Header::decode(bytes, data_len, max) else { return };
    assert_eq!(bytes.len(), HEADER_LEN);
    assert!(h.chunk_count >= 1 && h.chunk_index < h.chunk_count, "{h:?}");
    match h.kind {
        Kind::Bundle => {
            // Nothing of a bundle is allocated from its header: it is all data already received.
            assert_eq!((h.total_len, h.offset, h.chunk_index, h.op, h.status, h.request_id), (data_len as u64, 0, 0, 0, 0, 0), "{h:?}");
            assert!(h.chunk_count <= BUNDLE_FRAMES_MAX);
            assert!(h.chunk_count as u64 * HEADER_LEN as u64 <= data_len as u64, "{h:?}");
        }
        Kind::PulledRequest | Kind::PulledResponse => {
            assert!(h.total_len <= max as u64, "{h:?}");
            assert_eq!((h.offset, h.chunk_count, data_len, h.status), (0, 1, PULL_DESCRIPTOR_LEN, 0), "a pulled message carries its descriptor only");
        }
        _ => {
            // total_len sizes the reassembly buffer: bounded by the receiver's limit.
            assert!(h.total_len <= max as u64, "{h:?}");
            assert!(h.offset.checked_add(data_len as u64).is_some_and(|end| end <= h.total_len), "{h:?} with {data_len} bytes");
            assert!(h.chunk_count as u64 <= h.total_len.div_ceil(MIN_CHUNK_BYTES).max(1), "{h:?}");
            if h.chunk_count == 1 {
                assert_eq!((h.offset, data_len as u64), (0, h.total_len), "{h:?}");
            } else {
                assert!(data_len > 0, "an empty chunk of {h:?}");
            }
            if h.kind == Kind::Control {
                assert!(data_len <= CONTROL_MAX_BYTES && h.chunk_count == 1, "{h:?}");
            }
            if h.kind == Kind::Request {
                assert_eq!(h.status, 0, "{h:?}");
            }
        }
    }
    assert_eq!(Header::decode(&h.encode(), data_len, max), Ok(h));
});
