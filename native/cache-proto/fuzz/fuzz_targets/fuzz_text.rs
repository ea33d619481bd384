//! The text protocol (classic and meta commands, authentication) on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    // Keep the session on the text protocol: a leading 0x80 would select binary.
    let mut input = input.to_vec();
    if input.first() == Some(&0x80) {
        input[0] = b' ';
    }
    common::check(&input, seed, seed & 0x80 != 0);
});
