//! Session scenarios with expected replies, run against any `Storage` (tests/against_store.rs runs
//! them against the reference store and cache-store's `Store`). Expected text may hold `{#}` (any
//! decimal number, e.g. a CAS the store chose) and `{name}` (a number remembered under `name`;
//! `{name}` in a later request is replaced by it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cache_proto::binary::{opcode, Header, HEADER_BYTES, MAGIC_REQUEST};
use cache_proto::clock::Clock;
use cache_proto::storage::Storage;
use cache_proto::{Session, SessionConfig};

/// The scenarios' start time (shared by the session's and the store's manual clocks).
pub const START_UNIX_S: u64 = 1_700_000_000;

/// A binary response as the scenarios compare it: (status, extras, key, value), CAS aside.
pub type Response = (u16, Vec<u8>, Vec<u8>, Vec<u8>);

pub enum Step {
    /// Send text, expect this reply pattern.
    Text(String, String),
    /// Send binary packets, expect responses with these (status, extras, key, value), CAS aside.
    Binary(Vec<u8>, Vec<Response>),
    /// Move both clocks forward.
    Advance(u64),
}

pub struct Scenario {
    pub name: &'static str,
    pub steps: Vec<Step>,
}

fn text(input: impl Into<String>, expected: impl Into<String>) -> Step {
    Step::Text(input.into(), expected.into())
}

pub fn packet(op: u8, key: &[u8], extras: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let header = Header {
        magic: MAGIC_REQUEST,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        vbucket_or_status: 0,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque: 0xabcd,
        cas,
    };
    let mut bytes = vec![0u8; HEADER_BYTES];
    header.encode(&mut bytes);
    [bytes, extras.to_vec(), key.to_vec(), value.to_vec()].concat()
}

fn set_extras(flags: u32, exptime: u32) -> Vec<u8> {
    [flags.to_be_bytes(), exptime.to_be_bytes()].concat()
}

fn arithmetic_extras(delta: u64, initial: u64, expiration: u32) -> Vec<u8> {
    [&delta.to_be_bytes()[..], &initial.to_be_bytes()[..], &expiration.to_be_bytes()[..]].concat()
}

fn ok(extras: &[u8], key: &[u8], value: &[u8]) -> Response {
    (0, extras.to_vec(), key.to_vec(), value.to_vec())
}

fn error(status: u16, text: &str) -> Response {
    (status, vec![], vec![], text.as_bytes().to_vec())
}

pub fn scenarios() -> Vec<Scenario> {
    let value_1k = "v".repeat(1000);
    vec![
        Scenario {
            name: "set, get, gets, multi-get",
            steps: vec![
                text("set a 5 0 3\r\nabc\r\n", "STORED\r\n"),
                text("get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n"),
                text("gets a\r\n", "VALUE a 5 3 {#}\r\nabc\r\nEND\r\n"),
                text("set b 0 0 0\r\n\r\nget a nope b\r\n", "STORED\r\nVALUE a 5 3\r\nabc\r\nVALUE b 0 0\r\n\r\nEND\r\n"),
                text(format!("set big 1 0 1000\r\n{value_1k}\r\nget big\r\n"), format!("STORED\r\nVALUE big 1 1000\r\n{value_1k}\r\nEND\r\n")),
            ],
        },
        Scenario {
            name: "storage modes",
            steps: vec![
                text("add a 0 0 1\r\n1\r\nadd a 0 0 1\r\n2\r\n", "STORED\r\nNOT_STORED\r\n"),
                text("replace a 3 0 1\r\n3\r\nreplace zz 0 0 1\r\n3\r\n", "STORED\r\nNOT_STORED\r\n"),
                text("append a 9 0 2\r\n45\r\nprepend a 9 0 2\r\n01\r\n", "STORED\r\nSTORED\r\n"),
                text("append zz 0 0 1\r\n1\r\nprepend zz 0 0 1\r\n1\r\n", "NOT_STORED\r\nNOT_STORED\r\n"),
                text("get a\r\n", "VALUE a 3 5\r\n01345\r\nEND\r\n"),
            ],
        },
        Scenario {
            name: "cas",
            steps: vec![
                text("cas a 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"),
                text("set a 0 0 1\r\nx\r\ngets a\r\n", "STORED\r\nVALUE a 0 1 {cas}\r\nx\r\nEND\r\n"),
                text("cas a 0 0 1 999999\r\ny\r\n", "EXISTS\r\n"),
                text("cas a 0 0 1 {cas}\r\ny\r\ncas a 0 0 1 {cas}\r\nz\r\n", "STORED\r\nEXISTS\r\n"),
                text("get a\r\n", "VALUE a 0 1\r\ny\r\nEND\r\n"),
            ],
        },
        Scenario {
            name: "delete",
            steps: vec![
                text("set a 0 0 1\r\nx\r\ndelete a\r\ndelete a\r\nget a\r\n", "STORED\r\nDELETED\r\nNOT_FOUND\r\nEND\r\n"),
                text("set a 0 0 1\r\nx\r\ndelete a noreply\r\nget a\r\n", "STORED\r\nEND\r\n"),
            ],
        },
        Scenario {
            name: "incr and decr",
            steps: vec![
                text("incr n 1\r\nset n 0 0 2\r\n10\r\n", "NOT_FOUND\r\nSTORED\r\n"),
                text("decr n 5\r\nget n\r\n", "5\r\nVALUE n 0 2\r\n5 \r\nEND\r\n"),
                text("incr n 100\r\nget n\r\n", "105\r\nVALUE n 0 3\r\n105\r\nEND\r\n"),
                text("decr n 1000\r\nincr n 18446744073709551615\r\nincr n 1\r\n", "0\r\n18446744073709551615\r\n0\r\n"),
                text("set s 0 0 1\r\nx\r\nincr s 1\r\n", "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
                text("set e 0 0 0\r\n\r\nincr e 1\r\n", "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            ],
        },
        Scenario {
            name: "expiry, touch, gat",
            steps: vec![
                text("set a 0 10 1\r\nx\r\nset b 0 -1 1\r\nx\r\nset c 0 2592001 1\r\nx\r\n", "STORED\r\nSTORED\r\nSTORED\r\n"),
                text(format!("set d 0 {} 1\r\nx\r\nget b c\r\n", START_UNIX_S + 20), "STORED\r\nEND\r\n"),
                Step::Advance(5),
                text("touch a 100\r\ntouch nope 100\r\n", "TOUCHED\r\nNOT_FOUND\r\n"),
                Step::Advance(50),
                text("gat 200 a\r\nget d\r\n", "VALUE a 0 1\r\nx\r\nEND\r\nEND\r\n"),
                Step::Advance(150),
                text("get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n"),
                Step::Advance(60),
                text("get a\r\n", "END\r\n"),
            ],
        },
        Scenario {
            name: "flush_all now and later",
            steps: vec![
                text("set a 0 0 1\r\nx\r\nflush_all\r\nget a\r\n", "STORED\r\nOK\r\nEND\r\n"),
                text("set a 0 0 1\r\nx\r\nflush_all 10\r\nget a\r\n", "STORED\r\nOK\r\nVALUE a 0 1\r\nx\r\nEND\r\n"),
                Step::Advance(10),
                text("get a\r\n", "END\r\n"),
                Step::Advance(1),
                text("set a 0 0 1\r\ny\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\ny\r\nEND\r\n"),
            ],
        },
        Scenario {
            name: "too large: refused before or by the store, old value dropped",
            steps: vec![
                text("set a 0 0 1\r\nx\r\n", "STORED\r\n"),
                text(format!("set a 0 0 2000000\r\n{}\r\nget a\r\n", "x".repeat(2_000_000)), "SERVER_ERROR object too large for cache\r\nEND\r\n"),
                text("set a 0 0 1\r\nx\r\n", "STORED\r\n"),
                // Within the session's limit, beyond the store's (its limit counts a header).
                text(format!("set a 0 0 1048570\r\n{}\r\nget a\r\n", "x".repeat(1_048_570)), "SERVER_ERROR object too large for cache\r\nEND\r\n"),
            ],
        },
        Scenario {
            name: "meta get flags",
            steps: vec![
                text("set a 3 0 1\r\nx\r\n", "STORED\r\n"),
                text("mg a s v f k O123 h t\r\n", "VA 1 s1 f3 ka O123 h0 t-1\r\nx\r\n"),
                text("mg a h c\r\nmg missing k O1\r\nmg missing q k\r\nmn\r\n", "HD h1 c{#}\r\nEN kmissing O1\r\nMN\r\n"),
                Step::Advance(3),
                text("mg a l u\r\nmg a l\r\nmg a l\r\n", "HD l3\r\nHD l3\r\nHD l0\r\n"),
                text("mg a T30 t\r\nmg a t v q\r\n", "HD t30\r\nVA 1 t30\r\nx\r\n"),
            ],
        },
        Scenario {
            name: "meta recache: N, R, md I",
            steps: vec![
                text("mg b N30 v t\r\nmg b N30 v\r\n", "VA 0 t30 W\r\n\r\nVA 0 Z\r\n\r\n"),
                text("set a 0 100 1\r\nx\r\nmg a R10 v\r\nmg a R200 v\r\nmg a R200 v\r\n", "STORED\r\nVA 1\r\nx\r\nVA 1 W\r\nx\r\nVA 1 Z\r\nx\r\n"),
                text("set c 0 0 1\r\nx\r\nmd c I T30\r\nmg c v t\r\nmg c v\r\n", "STORED\r\nHD\r\nVA 1 t30 X W\r\nx\r\nVA 1 Z X\r\nx\r\n"),
                text("ms c 1\r\ny\r\nmg c v\r\n", "HD\r\nVA 1\r\ny\r\n"),
            ],
        },
        Scenario {
            name: "meta set modes and cas",
            steps: vec![
                text("ms b 3 T0 F5 k O9\r\nabc\r\nms b 3 q\r\nabc\r\nmn\r\n", "HD kb O9\r\nMN\r\n"),
                text("ms a 2 ME\r\nhi\r\nms a 2 ME\r\nho\r\n", "HD\r\nNS\r\n"),
                text("ms a 2 MR\r\nho\r\nms z 2 MR\r\nho\r\n", "HD\r\nNS\r\n"),
                text("ms a 2 MA\r\n!!\r\nms a 2 MP\r\n<<\r\nms z 2 MA\r\nho\r\nmg a v\r\n", "HD\r\nHD\r\nNS\r\nVA 6\r\n<<ho!!\r\n"),
                text("ms c 2 c\r\nhi\r\n", "HD c{cas}\r\n"),
                text("ms c 2 C999999 c\r\nho\r\nms zz 2 C5\r\nho\r\nms c 2 C{cas}\r\nho\r\nmg c v\r\n", "EX c0\r\nNF\r\nHD\r\nVA 2\r\nho\r\n"),
                text("ms e 1 E77 c\r\nx\r\nmg e c\r\n", "HD c77\r\nHD c77\r\n"),
                text("ms v 2 MA N30\r\nhi\r\nmg v v t\r\n", "HD\r\nVA 2 t30\r\nhi\r\n"),
                text("ms t 2 T-1\r\nhi\r\nmg t v\r\n", "HD\r\nEN\r\n"),
            ],
        },
        Scenario {
            name: "meta delete and arithmetic",
            steps: vec![
                text("md b q\r\nmd b k O5\r\n", "NF\r\nNF kb O5\r\n"),
                text("set a 0 0 1\r\nx\r\nmd a C999999 k\r\nmd a q\r\nmd a\r\n", "STORED\r\nEX ka\r\nNF\r\n"),
                text("ma c\r\nma c N0 J10 v\r\nma c v t\r\n", "NF\r\nVA 2\r\n10\r\nVA 2 t-1\r\n11\r\n"),
                text("ma c MD D100 v\r\nma c q\r\nma c M+ D5 v k O7\r\n", "VA 1\r\n0\r\nVA 1 kc O7\r\n6\r\n"),
                text("ma c T30 t c\r\n", "HD t30 c{#}\r\n"),
                text("set s 0 0 1\r\nx\r\nma s\r\n", "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
                text("ma e N30 J5 E99 c t\r\n", "HD c99 t30\r\n"),
            ],
        },
        Scenario {
            name: "meta base64 keys and me",
            steps: vec![
                text("ms Zm9v 2 b k\r\nhi\r\nmg Zm9v b k v\r\nmg foo v\r\n", "HD kZm9v b\r\nVA 2 kZm9v b\r\nhi\r\nVA 2\r\nhi\r\n"),
                text("ms AAEC/w== 1 b\r\nx\r\nmg AAEC/w== b k s\r\n", "HD\r\nHD kAAEC/w== b s1\r\n"),
                text("set s 0 0 1\r\nx\r\nme s\r\nme nope\r\n", "STORED\r\nME s exp=-1 la=0 cas={#} fetch=no cls=1 size=61\r\nEN\r\n"),
            ],
        },
        Scenario {
            name: "binary storage and retrieval",
            steps: vec![Step::Binary(
                [
                    packet(opcode::SET, b"a", &set_extras(7, 0), b"hello", 0),
                    packet(opcode::GET, b"a", &[], &[], 0),
                    packet(opcode::GETK, b"a", &[], &[], 0),
                    packet(opcode::GETQ, b"nope", &[], &[], 0),
                    packet(opcode::GETK, b"nope", &[], &[], 0),
                    packet(opcode::ADD, b"a", &set_extras(0, 0), b"x", 0),
                    packet(opcode::REPLACE, b"nope", &set_extras(0, 0), b"x", 0),
                    packet(opcode::APPEND, b"a", &[], b"!", 0),
                    packet(opcode::PREPEND, b"nope", &[], b"!", 0),
                    packet(opcode::SETQ, b"b", &set_extras(0, 0), b"q", 0),
                    packet(opcode::GETKQ, b"b", &[], &[], 0),
                    packet(opcode::SET, b"a", &set_extras(0, 0), b"w", 999_999),
                    packet(opcode::DELETE, b"a", &[], &[], 0),
                    packet(opcode::DELETE, b"a", &[], &[], 0),
                    packet(opcode::NOOP, &[], &[], &[], 0),
                ]
                .concat(),
                vec![
                    ok(&[], b"", b""),
                    ok(&7u32.to_be_bytes(), b"", b"hello"),
                    ok(&7u32.to_be_bytes(), b"a", b"hello"),
                    (1, vec![], b"nope".to_vec(), vec![]),
                    error(2, "Data exists for key."),
                    error(1, "Not found"),
                    ok(&[], b"", b""),
                    error(5, "Not stored."),
                    ok(&[0; 4], b"b", b"q"),
                    error(2, "Data exists for key."),
                    ok(&[], b"", b""),
                    error(1, "Not found"),
                    ok(&[], b"", b""),
                ],
            )],
        },
        Scenario {
            name: "binary arithmetic, touch, flush",
            steps: vec![Step::Binary(
                [
                    packet(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, 0xffff_ffff), &[], 0),
                    packet(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, 0), &[], 0),
                    packet(opcode::INCREMENT, b"n", &arithmetic_extras(5, 10, 0), &[], 0),
                    packet(opcode::DECREMENT, b"n", &arithmetic_extras(100, 10, 0), &[], 0),
                    packet(opcode::SET, b"t", &set_extras(3, 0), b"v", 0),
                    packet(opcode::TOUCH, b"t", &10u32.to_be_bytes(), &[], 0),
                    packet(opcode::GATK, b"t", &10u32.to_be_bytes(), &[], 0),
                    packet(opcode::FLUSH, &[], &[], &[], 0),
                    packet(opcode::GET, b"t", &[], &[], 0),
                ]
                .concat(),
                vec![
                    error(1, "Not found"),
                    ok(&[], b"", &10u64.to_be_bytes()),
                    ok(&[], b"", &15u64.to_be_bytes()),
                    ok(&[], b"", &0u64.to_be_bytes()),
                    ok(&[], b"", b""),
                    ok(&3u32.to_be_bytes(), b"", b""),
                    ok(&3u32.to_be_bytes(), b"t", b"v"),
                    ok(&[], b"", b""),
                    error(1, "Not found"),
                ],
            )],
        },
    ]
}

/// Matches `actual` against `pattern`, recording `{name}` numbers in `captures`.
fn matches(pattern: &str, actual: &str, captures: &mut HashMap<String, String>) -> bool {
    let (mut pattern, mut actual) = (pattern, actual);
    loop {
        let Some(open) = pattern.find('{') else {
            return pattern == actual;
        };
        let close = open + pattern[open..].find('}').expect("placeholders are closed");
        if !actual.starts_with(&pattern[..open]) {
            return false;
        }
        actual = &actual[open..];
        let digits = actual.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let name = &pattern[open + 1..close];
        if name != "#" {
            captures.insert(name.to_string(), actual[..digits].to_string());
        }
        actual = &actual[digits..];
        pattern = &pattern[close + 1..];
    }
}

fn substitute(input: &str, captures: &HashMap<String, String>) -> String {
    let mut result = input.to_string();
    for (name, value) in captures {
        result = result.replace(&format!("{{{name}}}"), value);
    }
    result
}

fn decode(mut bytes: &[u8]) -> Vec<Response> {
    let mut responses = Vec::new();
    while let Some(header) = Header::decode(bytes) {
        let extras_end = HEADER_BYTES + header.extras_len as usize;
        let key_end = extras_end + header.key_len as usize;
        let end = HEADER_BYTES + header.body_len as usize;
        assert_eq!(header.opaque, 0xabcd);
        responses.push((header.vbucket_or_status, bytes[HEADER_BYTES..extras_end].to_vec(), bytes[extras_end..key_end].to_vec(), bytes[key_end..end].to_vec()));
        bytes = &bytes[end..];
    }
    assert!(bytes.is_empty(), "whole responses only");
    responses
}

/// Runs `scenario` on a fresh store; `now_unix_s` is the time both the store and the session read.
pub fn run(scenario: &Scenario, store: Arc<dyn Storage>, now_unix_s: Arc<AtomicU64>) -> Result<(), String> {
    let mut config = SessionConfig::new("1.6.18");
    config.clock = Clock::manual_shared(now_unix_s.clone());
    let config = Arc::new(config);
    let mut text_session = Session::new(store.clone(), config.clone());
    let mut binary_session = Session::new(store, config);
    let mut captures = HashMap::new();
    for (index, step) in scenario.steps.iter().enumerate() {
        match step {
            Step::Advance(seconds) => {
                now_unix_s.fetch_add(*seconds, Ordering::Relaxed);
            }
            Step::Text(input, expected) => {
                let input = substitute(input, &captures);
                let mut out = Vec::new();
                let processed = text_session.process(input.as_bytes(), &mut out);
                assert!(!processed.output_full, "scenarios stay within the reply budget");
                let actual = String::from_utf8_lossy(&out).into_owned();
                if processed.consumed != input.len() || !matches(expected, &actual, &mut captures) {
                    let shown = |text: &str| format!("{:?}", &text[..text.len().min(300)]);
                    return Err(format!(
                        "{}: step {index}: sent {}\n  expected {}\n  received {}",
                        scenario.name,
                        shown(&input),
                        shown(expected),
                        shown(&actual)
                    ));
                }
            }
            Step::Binary(input, expected) => {
                let mut out = Vec::new();
                let processed = binary_session.process(input, &mut out);
                let actual = decode(&out);
                if processed.consumed != input.len() || actual != *expected {
                    return Err(format!("{}: step {index}:\n  expected {expected:?}\n  received {actual:?}", scenario.name));
                }
            }
        }
    }
    Ok(())
}
