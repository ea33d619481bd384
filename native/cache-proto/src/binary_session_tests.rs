//! Unit tests of `binary_session.rs`.

use super::*;
use crate::test_support::{request, responses, Harness, Response};

fn set_extras(flags: u32, exptime: u32) -> Vec<u8> {
    [flags.to_be_bytes(), exptime.to_be_bytes()].concat()
}

fn arithmetic_extras(delta: u64, initial: u64, expiration: u32) -> Vec<u8> {
    [&delta.to_be_bytes()[..], &initial.to_be_bytes()[..], &expiration.to_be_bytes()[..]].concat()
}

fn send(h: &mut Harness, packets: &[Vec<u8>]) -> Vec<Response> {
    responses(&h.send(&packets.concat()))
}

fn ok(opcode: u8, opaque: u32, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Response {
    Response { opcode, status: 0, opaque, cas, extras: extras.to_vec(), key: key.to_vec(), value: value.to_vec() }
}

fn err(opcode: u8, opaque: u32, status: u16) -> Response {
    Response { opcode, status, opaque, cas: 0, extras: vec![], key: vec![], value: status_text(status).to_vec() }
}

#[test]
fn set_get_getk_byte_exact() {
    let mut h = Harness::new();
    let reply = h.send(&request(opcode::SET, b"a", &set_extras(7, 0), b"hello", 0x0102_0304, 0));
    assert_eq!(
        reply,
        [0x81, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 1],
        "a SET reply is a bare header with the new CAS"
    );
    let reply = h.send(&request(opcode::GETK, b"a", &[], &[], 9, 0));
    let mut expected = vec![0x81, 0x0c, 0, 1, 4, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1];
    expected.extend_from_slice(&[0, 0, 0, 7]);
    expected.extend_from_slice(b"ahello");
    assert_eq!(reply, expected);
    assert_eq!(send(&mut h, &[request(opcode::GET, b"a", &[], &[], 2, 0)]), [ok(opcode::GET, 2, 1, &[0, 0, 0, 7], b"", b"hello")]);
}

#[test]
fn misses_and_quiet_gets() {
    let mut h = Harness::new();
    h.send(&request(opcode::SET, b"a", &set_extras(0, 0), b"v", 1, 0));
    let replies = send(
        &mut h,
        &[
            request(opcode::GET, b"nope", &[], &[], 1, 0),
            request(opcode::GETK, b"nope", &[], &[], 2, 0),
            request(opcode::GETQ, b"nope", &[], &[], 3, 0),
            request(opcode::GETKQ, b"nope", &[], &[], 4, 0),
            request(opcode::GETQ, b"a", &[], &[], 5, 0),
            request(opcode::GETKQ, b"a", &[], &[], 6, 0),
            request(opcode::NOOP, &[], &[], &[], 7, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            err(opcode::GET, 1, status::KEY_NOT_FOUND),
            Response { key: b"nope".to_vec(), value: vec![], ..err(opcode::GETK, 2, status::KEY_NOT_FOUND) },
            ok(opcode::GETQ, 5, 1, &[0; 4], b"", b"v"),
            ok(opcode::GETKQ, 6, 1, &[0; 4], b"a", b"v"),
            ok(opcode::NOOP, 7, 0, &[], &[], &[]),
        ]
    );
    assert_eq!((h.config.counters.get("get_hits"), h.config.counters.get("get_misses")), (Some(2), Some(4)));
}

#[test]
fn storage_modes_and_cas() {
    let mut h = Harness::new();
    let replies = send(
        &mut h,
        &[
            request(opcode::ADD, b"a", &set_extras(1, 0), b"1", 1, 0),
            request(opcode::ADD, b"a", &set_extras(1, 0), b"2", 2, 0),
            request(opcode::REPLACE, b"a", &set_extras(2, 0), b"3", 3, 0),
            request(opcode::REPLACE, b"zz", &set_extras(2, 0), b"3", 4, 0),
            request(opcode::APPEND, b"a", &[], b"45", 5, 0),
            request(opcode::PREPEND, b"a", &[], b"01", 6, 0),
            request(opcode::APPEND, b"zz", &[], b"45", 7, 0),
            request(opcode::SET, b"a", &set_extras(0, 0), b"x", 8, 99),
            request(opcode::ADD, b"zz", &set_extras(0, 0), b"x", 9, 99),
            request(opcode::APPEND, b"a", &[], b"!", 10, 99),
            request(opcode::GET, b"a", &[], &[], 11, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            ok(opcode::ADD, 1, 1, &[], &[], &[]),
            err(opcode::ADD, 2, status::KEY_EXISTS),
            ok(opcode::REPLACE, 3, 2, &[], &[], &[]),
            err(opcode::REPLACE, 4, status::KEY_NOT_FOUND),
            ok(opcode::APPEND, 5, 3, &[], &[], &[]),
            ok(opcode::PREPEND, 6, 4, &[], &[], &[]),
            err(opcode::APPEND, 7, status::ITEM_NOT_STORED),
            err(opcode::SET, 8, status::KEY_EXISTS),
            // With a CAS, add is memcached's CAS command: no item, not found.
            err(opcode::ADD, 9, status::KEY_NOT_FOUND),
            err(opcode::APPEND, 10, status::KEY_EXISTS),
            ok(opcode::GET, 11, 4, &2u32.to_be_bytes(), b"", b"01345"),
        ]
    );
    let replies = send(&mut h, &[request(opcode::SET, b"a", &set_extras(0, 0), b"y", 1, 4)]);
    assert_eq!(replies, [ok(opcode::SET, 1, 5, &[], &[], &[])]);
}

#[test]
fn quiet_commands_answer_only_errors() {
    let mut h = Harness::new();
    let replies = send(
        &mut h,
        &[
            request(opcode::SETQ, b"a", &set_extras(0, 0), b"q", 1, 0),
            request(opcode::ADDQ, b"a", &set_extras(0, 0), b"q", 2, 0),
            request(opcode::REPLACEQ, b"zz", &set_extras(0, 0), b"q", 3, 0),
            request(opcode::APPENDQ, b"a", &[], b"q", 4, 0),
            request(opcode::PREPENDQ, b"a", &[], b"q", 5, 0),
            request(opcode::INCREMENTQ, b"n", &arithmetic_extras(1, 5, 0), &[], 6, 0),
            request(opcode::DECREMENTQ, b"n", &arithmetic_extras(1, 5, 0), &[], 7, 0),
            request(opcode::DELETEQ, b"a", &[], &[], 8, 0),
            request(opcode::DELETEQ, b"a", &[], &[], 9, 0),
            request(opcode::FLUSHQ, &[], &[], &[], 10, 0),
            request(opcode::NOOP, &[], &[], &[], 11, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            err(opcode::ADDQ, 2, status::KEY_EXISTS),
            err(opcode::REPLACEQ, 3, status::KEY_NOT_FOUND),
            err(opcode::DELETEQ, 9, status::KEY_NOT_FOUND),
            ok(opcode::NOOP, 11, 0, &[], &[], &[]),
        ]
    );
}

#[test]
fn delete_with_cas() {
    let mut h = Harness::new();
    h.send(&request(opcode::SET, b"a", &set_extras(0, 0), b"v", 1, 0));
    let replies = send(
        &mut h,
        &[
            request(opcode::DELETE, b"a", &[], &[], 1, 5),
            request(opcode::DELETE, b"a", &[], &[], 2, 1),
            request(opcode::DELETE, b"a", &[], &[], 3, 0),
        ],
    );
    assert_eq!(
        replies,
        [err(opcode::DELETE, 1, status::KEY_EXISTS), ok(opcode::DELETE, 2, 0, &[], &[], &[]), err(opcode::DELETE, 3, status::KEY_NOT_FOUND)]
    );
}

#[test]
fn incr_decr_with_initial_values() {
    let mut h = Harness::new();
    let replies = send(
        &mut h,
        &[
            request(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, ARITHMETIC_NO_CREATE), &[], 1, 0),
            request(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, 0), &[], 2, 0),
            request(opcode::INCREMENT, b"n", &arithmetic_extras(5, 10, 0), &[], 3, 0),
            request(opcode::DECREMENT, b"n", &arithmetic_extras(100, 10, 0), &[], 4, 0),
            request(opcode::INCREMENT, b"n", &arithmetic_extras(1, 0, 0), &[], 5, 77),
            request(opcode::GET, b"n", &[], &[], 6, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            err(opcode::INCREMENT, 1, status::KEY_NOT_FOUND),
            ok(opcode::INCREMENT, 2, 1, &[], &[], &10u64.to_be_bytes()),
            ok(opcode::INCREMENT, 3, 2, &[], &[], &15u64.to_be_bytes()),
            ok(opcode::DECREMENT, 4, 3, &[], &[], &0u64.to_be_bytes()),
            err(opcode::INCREMENT, 5, status::KEY_EXISTS),
            ok(opcode::GET, 6, 3, &[0; 4], b"", b"0 "),
        ]
    );
    h.send(&request(opcode::SET, b"s", &set_extras(0, 0), b"x", 1, 0));
    let replies = send(&mut h, &[request(opcode::DECREMENT, b"s", &arithmetic_extras(1, 0, 0), &[], 1, 0)]);
    assert_eq!(replies, [err(opcode::DECREMENT, 1, status::NON_NUMERIC)]);
}

#[test]
fn touch_and_gat() {
    let mut h = Harness::new();
    h.send(&request(opcode::SET, b"a", &set_extras(3, 0), b"v", 1, 0));
    let ten = 10u32.to_be_bytes();
    let replies = send(
        &mut h,
        &[
            request(opcode::TOUCH, b"a", &ten, &[], 1, 0),
            request(opcode::GAT, b"a", &ten, &[], 2, 0),
            request(opcode::GATK, b"a", &ten, &[], 3, 0),
            request(opcode::GATQ, b"a", &ten, &[], 4, 0),
            request(opcode::GATKQ, b"nope", &ten, &[], 5, 0),
            request(opcode::GATK, b"nope", &ten, &[], 6, 0),
            request(opcode::TOUCH, b"nope", &ten, &[], 7, 0),
        ],
    );
    let flags = 3u32.to_be_bytes();
    assert_eq!(
        replies,
        [
            ok(opcode::TOUCH, 1, 1, &flags, b"", b""),
            ok(opcode::GAT, 2, 1, &flags, b"", b"v"),
            ok(opcode::GATK, 3, 1, &flags, b"a", b"v"),
            ok(opcode::GATQ, 4, 1, &flags, b"", b"v"),
            Response { key: b"nope".to_vec(), value: vec![], ..err(opcode::GATK, 6, status::KEY_NOT_FOUND) },
            err(opcode::TOUCH, 7, status::KEY_NOT_FOUND),
        ]
    );
    h.clock.advance(10);
    assert_eq!(send(&mut h, &[request(opcode::GET, b"a", &[], &[], 1, 0)]), [err(opcode::GET, 1, status::KEY_NOT_FOUND)]);
    assert_eq!((h.config.counters.get("touch_hits"), h.config.counters.get("touch_misses")), (Some(4), Some(3)));
}

#[test]
fn flush_with_and_without_delay() {
    let mut h = Harness::new();
    h.send(&request(opcode::SET, b"a", &set_extras(0, 0), b"v", 1, 0));
    let replies = send(&mut h, &[request(opcode::FLUSH, &[], &5u32.to_be_bytes(), &[], 1, 0), request(opcode::GET, b"a", &[], &[], 2, 0)]);
    assert_eq!(replies[0], ok(opcode::FLUSH, 1, 0, &[], &[], &[]));
    assert_eq!(replies[1].status, status::NO_ERROR);
    h.clock.advance(5);
    assert_eq!(send(&mut h, &[request(opcode::GET, b"a", &[], &[], 3, 0)]), [err(opcode::GET, 3, status::KEY_NOT_FOUND)]);
    h.send(&request(opcode::SET, b"a", &set_extras(0, 0), b"v", 1, 0));
    let replies = send(&mut h, &[request(opcode::FLUSH, &[], &[], &[], 4, 0), request(opcode::GET, b"a", &[], &[], 5, 0)]);
    assert_eq!(replies, [ok(opcode::FLUSH, 4, 0, &[], &[], &[]), err(opcode::GET, 5, status::KEY_NOT_FOUND)]);
}

#[test]
fn noop_version_verbosity_quit() {
    let mut h = Harness::new();
    let replies = send(
        &mut h,
        &[
            request(opcode::NOOP, &[], &[], &[], 1, 0),
            request(opcode::VERSION, &[], &[], &[], 2, 0),
            request(opcode::VERBOSITY, &[], &1u32.to_be_bytes(), &[], 3, 0),
            request(opcode::QUIT, &[], &[], &[], 4, 0),
            request(opcode::NOOP, &[], &[], &[], 5, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            ok(opcode::NOOP, 1, 0, &[], &[], &[]),
            ok(opcode::VERSION, 2, 0, &[], &[], b"1.6.18"),
            ok(opcode::VERBOSITY, 3, 0, &[], &[], &[]),
            ok(opcode::QUIT, 4, 0, &[], &[], &[]),
        ]
    );
    assert!(h.closed);
    let mut h = Harness::new();
    assert_eq!(h.send(&request(opcode::QUITQ, &[], &[], &[], 1, 0)), b"");
    assert!(h.closed);
}

#[test]
fn stat_packets() {
    let mut h = Harness::new();
    let replies = send(&mut h, &[request(opcode::STAT, &[], &[], &[], 9, 0)]);
    let terminator = replies.last().unwrap();
    assert_eq!(*terminator, ok(opcode::STAT, 9, 0, &[], &[], &[]));
    let find = |name: &str| replies.iter().find(|r| r.key == name.as_bytes()).map(|r| r.value.clone());
    assert_eq!(find("version"), Some(b"1.6.18".to_vec()));
    assert_eq!(find("cmd_get"), Some(b"0".to_vec()));
    assert_eq!(find("curr_items"), Some(b"0".to_vec()));
    assert!(replies.iter().all(|r| r.opaque == 9 && r.status == 0));
    assert_eq!(send(&mut h, &[request(opcode::STAT, b"reset", &[], &[], 1, 0)]), [ok(opcode::STAT, 1, 0, &[], &[], &[])]);
    assert_eq!(send(&mut h, &[request(opcode::STAT, b"nosuch", &[], &[], 2, 0)]), [err(opcode::STAT, 2, status::KEY_NOT_FOUND)]);
    let settings = send(&mut h, &[request(opcode::STAT, b"settings", &[], &[], 3, 0)]);
    assert!(settings.iter().any(|r| r.key == b"item_size_max"));
    // A body part STAT does not use is skipped, not read as the next packet.
    let replies = send(&mut h, &[request(opcode::STAT, b"items", &[], b"junk", 4, 0), request(opcode::NOOP, &[], &[], &[], 5, 0)]);
    assert_eq!(replies, [ok(opcode::STAT, 4, 0, &[], &[], &[]), ok(opcode::NOOP, 5, 0, &[], &[], &[])]);
}

#[test]
fn unknown_opcodes_and_sasl_without_credentials() {
    let mut h = Harness::new();
    let replies = send(
        &mut h,
        &[
            request(0x50, b"key", &[], b"value", 1, 0),
            request(opcode::SASL_LIST_MECHS, &[], &[], &[], 2, 0),
            request(opcode::SASL_AUTH, b"PLAIN", &[], b"\0user\0secret", 3, 0),
            request(opcode::NOOP, &[], &[], &[], 4, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            err(0x50, 1, status::UNKNOWN_COMMAND),
            err(opcode::SASL_LIST_MECHS, 2, status::UNKNOWN_COMMAND),
            err(opcode::SASL_AUTH, 3, status::UNKNOWN_COMMAND),
            ok(opcode::NOOP, 4, 0, &[], &[], &[]),
        ]
    );
}

#[test]
fn sasl_plain() {
    let mut h = Harness::with_credentials();
    let replies = send(
        &mut h,
        &[
            request(opcode::VERSION, &[], &[], &[], 1, 0),
            request(opcode::SASL_LIST_MECHS, &[], &[], &[], 2, 0),
            request(opcode::SASL_AUTH, b"PLAIN", &[], b"\0user\0wrong", 3, 0),
            request(opcode::SASL_AUTH, b"CRAM-MD5", &[], b"\0user\0secret", 4, 0),
            request(opcode::SASL_STEP, b"PLAIN", &[], b"\0user\0secret", 5, 0),
            request(opcode::SASL_AUTH, b"PLAIN", &[], b"user", 6, 0),
            request(opcode::SASL_AUTH, b"PLAIN", &[], b"\0user\0secret", 7, 0),
            request(opcode::GET, b"a", &[], &[], 8, 0),
        ],
    );
    assert_eq!(
        replies,
        [
            ok(opcode::VERSION, 1, 0, &[], &[], b"1.6.18"),
            ok(opcode::SASL_LIST_MECHS, 2, 0, &[], &[], b"PLAIN"),
            err(opcode::SASL_AUTH, 3, status::AUTH_ERROR),
            err(opcode::SASL_AUTH, 4, status::AUTH_ERROR),
            err(opcode::SASL_STEP, 5, status::AUTH_ERROR),
            err(opcode::SASL_AUTH, 6, status::AUTH_ERROR),
            ok(opcode::SASL_AUTH, 7, 0, &[], &[], b"Authenticated"),
            err(opcode::GET, 8, status::KEY_NOT_FOUND),
        ]
    );
    assert_eq!((h.config.counters.get("auth_cmds"), h.config.counters.get("auth_errors")), (Some(5), Some(4)));
    // The password may hold NUL-free bytes of any kind, the authzid is ignored.
    let mut h = Harness::with_credentials();
    let replies = send(&mut h, &[request(opcode::SASL_AUTH, b"PLAIN", &[], b"admin\0other\0pass:word", 1, 0)]);
    assert_eq!(replies[0].status, status::NO_ERROR);
}

#[test]
fn unauthenticated_commands_are_refused_and_closed() {
    let mut h = Harness::with_credentials();
    let replies = send(&mut h, &[request(opcode::GET, b"a", &[], &[], 1, 0), request(opcode::NOOP, &[], &[], &[], 2, 0)]);
    assert_eq!(replies, [err(opcode::GET, 1, status::AUTH_ERROR)]);
    assert!(h.closed);
}

#[test]
fn malformed_packets_close() {
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (request(opcode::GET, b"a", &[1, 2, 3, 4], &[], 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::SET, b"a", &[], b"v", 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::NOOP, b"a", &[], &[], 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::INCREMENT, b"n", &[0; 8], &[], 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::GET, &[b'k'; 251], &[], &[], 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::FLUSH, &[], &[0; 8], &[], 1, 0), status::INVALID_ARGUMENTS),
        (request(opcode::VERBOSITY, &[], &[], &[], 1, 0), status::INVALID_ARGUMENTS),
        (
            {
                let mut bad = request(opcode::GET, b"abc", &[], &[], 1, 0);
                bad[8..12].copy_from_slice(&2u32.to_be_bytes());
                bad
            },
            status::UNKNOWN_COMMAND,
        ),
    ];
    for (packet, code) in cases {
        let mut h = Harness::new();
        let noop = request(opcode::NOOP, &[], &[], &[], 2, 0);
        let replies = responses(&h.send(&[packet.clone(), noop].concat()));
        assert_eq!(replies, [err(packet[1], 1, code)], "{packet:?}");
        assert!(h.closed);
    }
    // A bad magic closes without a reply.
    let mut h = Harness::new();
    let mut bad = request(opcode::NOOP, &[], &[], &[], 1, 0);
    bad[0] = 0x81;
    assert_eq!(h.send(&[request(opcode::NOOP, &[], &[], &[], 1, 0), bad].concat()).len(), HEADER_BYTES);
    assert!(h.closed);
}

#[test]
fn too_large_values_are_refused_and_skipped_as_they_arrive() {
    let mut h = Harness::with_max_item_bytes(100);
    h.send(&request(opcode::SET, b"a", &set_extras(0, 0), b"v", 1, 0));
    let packet = request(opcode::SET, b"a", &set_extras(0, 0), &[b'x'; 1000], 2, 0);
    // The refusal comes as soon as the header, extras and key are in; the value is not buffered.
    let replies = responses(&h.send(&packet[..40]));
    assert_eq!(replies, [err(opcode::SET, 2, status::VALUE_TOO_LARGE)]);
    assert_eq!(h.pending(), 0);
    assert_eq!(h.send(&packet[40..500]), b"");
    assert_eq!(h.pending(), 0);
    let rest = [&packet[500..], &request(opcode::GET, b"a", &[], &[], 3, 0)[..]].concat();
    assert_eq!(responses(&h.send(&rest)), [err(opcode::GET, 3, status::KEY_NOT_FOUND)]);
    // At the limit: key and value of 100 bytes.
    let packet = request(opcode::APPEND, b"a", &[], &[b'x'; 99], 4, 0);
    assert_eq!(responses(&h.send(&packet)), [err(opcode::APPEND, 4, status::ITEM_NOT_STORED)]);
    assert_eq!(h.config.counters.get("store_too_large"), Some(1));
}

#[test]
fn packets_arrive_byte_by_byte() {
    let mut h = Harness::new();
    let packets = [
        request(opcode::SET, b"key", &set_extras(1, 0), b"value", 1, 0),
        request(opcode::GETK, b"key", &[], &[], 2, 0),
    ]
    .concat();
    let mut out = Vec::new();
    for (index, byte) in packets.iter().enumerate() {
        out.extend(h.send(&[*byte]));
        if index == 10 {
            assert_eq!(h.session.bytes_needed(), Some(HEADER_BYTES));
        }
        if index == 30 {
            assert_eq!(h.session.bytes_needed(), Some(HEADER_BYTES + 8 + 3));
        }
        if index == 36 {
            assert_eq!(h.session.bytes_needed(), Some(HEADER_BYTES + 8 + 3 + 5));
        }
    }
    let replies = responses(&out);
    assert_eq!(replies, [ok(opcode::SET, 1, 1, &[], &[], &[]), ok(opcode::GETK, 2, 1, &1u32.to_be_bytes(), b"key", b"value")]);
}
