//! Meta commands: every input line becomes a meta command (chosen by its first byte) with
//! arbitrary key, flags and data, so the fuzzer spends its time in the meta parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

const COMMANDS: [&[u8]; 6] = [b"mg ", b"ms ", b"md ", b"ma ", b"mn", b"me "];

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::with_capacity(rest.len() * 2);
    for line in rest.split(|&byte| byte == b'\n') {
        let Some((&selector, line)) = line.split_first() else {
            input.extend_from_slice(b"\r\n");
            continue;
        };
        // Odd selectors make a command; even ones pass the line through (data blocks, noise).
        if selector & 1 == 1 {
            input.extend_from_slice(COMMANDS[usize::from(selector >> 1) % COMMANDS.len()]);
        }
        input.extend_from_slice(line);
        input.extend_from_slice(b"\r\n");
    }
    common::check(&input, seed, false);
});
