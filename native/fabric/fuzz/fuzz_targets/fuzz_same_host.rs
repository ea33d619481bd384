//! The same-host path's parsers of network bytes (docs/fabric.md, "The same-host path"): a hello
//! (`Hello::decode`), a pulled message's descriptor (`PullDescriptor::decode`, against a
//! `total_len` and a slot count from the input) and a release's tokens (`decode_release`). The
//! input's first byte picks the parser; what is accepted must hold what the pull relies on.
#![no_main]

use fabric::wire::{decode_release, Hello, PullDescriptor, CONTROL_MAX_BYTES, HELLO_LEN, PULL_DESCRIPTOR_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, bytes)) = input.split_first() else { return };
    match selector % 3 {
        0 => {
            if let Ok(hello) = Hello::decode(bytes) {
                assert_eq!(bytes.len(), HELLO_LEN);
                assert!(hello.pid > 0 && hello.pid <= i32::MAX as u32 && hello.area_addr != 0 && hello.slot_count > 0);
                assert_eq!(Hello::decode(&hello.encode()), Ok(hello));
            }
        }
        1 => {
            // total_len (8 bytes) and slot count (4 bytes) first, the descriptor after them.
            if bytes.len() < 12 {
                return;
            }
            let total_len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            let slot_count = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
            let descriptor = &bytes[12..];
            if let Ok(d) = PullDescriptor::decode(descriptor, total_len, slot_count) {
                assert_eq!(descriptor.len(), PULL_DESCRIPTOR_LEN);
                assert!(d.slot < slot_count && d.token != 0 && d.addr != 0);
                assert!(d.addr.checked_add(total_len).is_some(), "the pulled range must not wrap");
                assert_eq!(PullDescriptor::decode(&d.encode(), total_len, slot_count), Ok(d));
            }
        }
        _ => {
            if let Ok(tokens) = decode_release(bytes) {
                assert!(!tokens.is_empty() && bytes.len() <= CONTROL_MAX_BYTES);
                assert_eq!(tokens.len() * 8, bytes.len());
            }
        }
    }
});
