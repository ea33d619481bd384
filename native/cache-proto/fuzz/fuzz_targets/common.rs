//! What every target checks: a session over the reference store, fed bytes at once and (a second
//! session over a second store) in pieces chosen by `seed`, must not panic, must consume no more
//! than it was given, must answer the same whatever the pieces, and must stay closed once closed.
//! Small limits (512-byte lines, 256-byte items) bring the refusal paths within the fuzzer's reach.

use std::sync::Arc;

use cache_proto::binary::{Header, HEADER_BYTES, MAGIC_RESPONSE};
use cache_proto::clock::Clock;
use cache_proto::reference::ReferenceStore;
use cache_proto::{Credentials, Session, SessionConfig};

pub const MAX_ITEM_BYTES: usize = 256;

fn session(clock: &Clock, with_credentials: bool) -> Session {
    let mut config = SessionConfig::new("1.6.18");
    config.max_line_bytes = cache_proto::session::MIN_LINE_BYTES;
    config.clock = clock.clone();
    if with_credentials {
        config.credentials = Some(Arc::new(Credentials::from_authfile("user:secret\n")));
    }
    let store = Arc::new(ReferenceStore::with_limits(clock.clone(), MAX_ITEM_BYTES, 4096));
    Session::new(store, Arc::new(config))
}

/// Feeds `input` in pieces whose sizes come from `seed` (0: all at once), as a server would:
/// unconsumed bytes are kept and resent with the next piece.
fn feed(session: &mut Session, input: &[u8], mut seed: u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0;
    while offset < input.len() {
        let piece = if seed == 0 {
            input.len()
        } else {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            1 + (seed % 23) as usize
        };
        let end = (offset + piece).min(input.len());
        pending.extend_from_slice(&input[offset..end]);
        offset = end;
        let mut processed = session.process(&pending, &mut out);
        assert!(processed.consumed <= pending.len(), "consumed more than given");
        pending.drain(..processed.consumed);
        while processed.output_full {
            processed = session.process(&pending, &mut out);
            pending.drain(..processed.consumed);
        }
        if processed.close {
            assert!(session.is_closed());
            let mut after = Vec::new();
            let again = session.process(b"version\r\n", &mut after);
            assert!(again.close && again.consumed == 0 && after.is_empty(), "a closed session stays closed");
            return (out, true);
        }
        if let Some(needed) = session.bytes_needed() {
            assert!(needed > pending.len(), "asks for bytes it already has");
        }
    }
    (out, false)
}

/// Runs the checks; returns the reply bytes.
pub fn check(input: &[u8], seed: u8, with_credentials: bool) -> Vec<u8> {
    let clock = Clock::manual(1_700_000_000);
    let mut whole = session(&clock, with_credentials);
    let mut pieces = session(&clock, with_credentials);
    let (out_whole, closed_whole) = feed(&mut whole, input, 0);
    let (out_pieces, closed_pieces) = feed(&mut pieces, input, u64::from(seed) | 1);
    assert_eq!(out_whole, out_pieces, "replies depend on how the input was cut");
    assert_eq!(closed_whole, closed_pieces);
    out_whole
}

/// Binary replies are whole, well-formed response packets.
#[allow(dead_code)] // Used by fuzz_binary only; each target compiles this file as its own module.
pub fn assert_binary_responses(mut out: &[u8]) {
    while !out.is_empty() {
        let header = Header::decode(out).expect("a whole response header");
        assert_eq!(header.magic, MAGIC_RESPONSE);
        let body = header.body_len as usize;
        assert!(usize::from(header.extras_len) + usize::from(header.key_len) <= body);
        assert!(HEADER_BYTES + body <= out.len(), "a whole response body");
        out = &out[HEADER_BYTES + body..];
    }
}
