//! `wire::BundleFrames`, the parser of a bundle's frames (kind 7: whole answers, each a header and
//! its payload). The input is the bundle's data; its first byte, if any, says how many frames the
//! envelope announces (odd: the input's own count of frames plus or minus a little; even: a count
//! from the byte), so both whole bundles and lying envelopes are reached. The envelope goes
//! through `Header::decode` as the receive path does; each frame the parser yields must be a whole
//! single-chunk request, response or error response whose payload lies inside the data, and an
//! error ends the frames.
#![no_main]

use fabric::wire::{BundleFrames, Header, Kind, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

const MAX_MESSAGE_BYTES: usize = 4096;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else { return };
    let frames = if selector % 2 == 1 {
        // The count of whole frames a careless walk would find, nudged by the selector.
        let mut count = 0u32;
        let mut rest = data;
        while rest.len() >= HEADER_LEN {
            let len = u64::from_le_bytes(rest[24..32].try_into().unwrap()).min(rest.len() as u64) as usize;
            rest = &rest[(HEADER_LEN + len).min(rest.len())..];
            count += 1;
        }
        count.saturating_add(u32::from(selector >> 6)).saturating_sub(1)
    } else {
        u32::from(selector >> 1)
    };
    let envelope = Header::bundle(frames, data.len()).encode();
    let Ok(bundle) = Header::decode(&envelope, data.len(), MAX_MESSAGE_BYTES) else { return };
    assert_eq!(bundle.kind, Kind::Bundle);
    let (mut yielded, mut errors, mut payload_bytes) = (0u32, 0u32, 0usize);
    for frame in BundleFrames::new(&bundle, data, MAX_MESSAGE_BYTES) {
        assert_eq!(errors, 0, "a frame after an error");
        match frame {
            Ok((h, payload)) => {
                yielded += 1;
                assert!(matches!(h.kind, Kind::Request | Kind::Response | Kind::ErrorResponse), "{h:?}");
                assert_eq!((h.chunk_count, h.chunk_index, h.offset, payload.len() as u64), (1, 0, 0, h.total_len), "{h:?}");
                assert!(payload.len() <= MAX_MESSAGE_BYTES);
                // The payload is a slice of the data, after its own header.
                let at = payload.as_ptr() as usize - data.as_ptr() as usize;
                assert!(at >= HEADER_LEN && at + payload.len() <= data.len());
                payload_bytes += HEADER_LEN + payload.len();
            }
            Err(_) => errors += 1,
        }
    }
    assert!(yielded <= bundle.chunk_count && errors <= 1);
    if errors == 0 {
        // A clean bundle is exactly its frames: as many as announced, every byte used.
        assert_eq!((yielded, payload_bytes), (bundle.chunk_count, data.len()));
    }
});
