//! A raw UCX client (no fabric code on its side) sends frames that break the wire format. The
//! fabric node must close that connection, log it, count it, and keep serving everyone else.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::wire::{self, Header, Kind};
use fabric::{Config, Node, Request};

#[path = "support/raw_client.rs"]
mod raw_client;
use raw_client::RawClient;

/// Connects to `addr` with plain UCX and sends one active message with the given header and data.
/// Returns whether the server closed the connection within `wait`.
fn send_raw(addr: std::net::SocketAddr, header: &[u8], data: &[u8], wait: Duration) -> bool {
    let client = RawClient::connect(addr);
    client.send(header, data, wait);
    client.closed_within(wait)
}

fn echo_server(config: Config) -> Node {
    Node::start(
        Config { listen: Some("127.0.0.1:0".parse().unwrap()), ..config },
        Some(Arc::new(|request: Request| {
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap()
}

/// Waits (bounded) until `check` holds of the server's stats.
fn until(server: &Node, what: &str, check: impl Fn(&fabric::Stats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check(&server.stats()) {
        assert!(Instant::now() < deadline, "{what}: {:?}", server.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first chunk (of 4 KiB) of a request of `total_len` bytes cut in 4 KiB chunks (the reassembly
/// holds every chunk to the sender's cut).
fn first_chunk(request_id: u64, total_len: u64) -> [u8; wire::HEADER_LEN] {
    let chunk_count = total_len.div_ceil(CHUNK.len() as u64) as u32;
    Header { kind: Kind::Request, op: 1, status: 0, chunk_index: 0, chunk_count, request_id, total_len, offset: 0 }.encode()
}

const CHUNK: [u8; 4096] = [7u8; 4096];

#[test]
fn malformed_and_oversized_frames_close_only_that_connection() {
    let config = Config {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        max_message_bytes: 1 << 20,
        pool_cap_bytes: 16 << 20,
        ..Config::default()
    };
    let server = Node::start(
        config,
        Some(Arc::new(|request: Request| {
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    // A well-behaved client connected the whole time.
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_eq!(&endpoint.request(1, b"before").unwrap().wait().unwrap()[..], b"before");

    let good = Header { kind: Kind::Request, op: 1, status: 0, chunk_index: 0, chunk_count: 1, request_id: 1, total_len: 8, offset: 0 };
    let mut bad_magic = good.encode();
    bad_magic[0] ^= 0xff;
    let oversized = Header { total_len: (1 << 20) + 1, chunk_count: 2, ..good }.encode();
    let overrun = Header { total_len: 4, ..good }.encode();
    let cases: [(&str, Vec<u8>); 4] = [
        ("bad magic", bad_magic.to_vec()),
        ("short header", good.encode()[..10].to_vec()),
        ("oversized message", oversized.to_vec()),
        ("chunk overruns message", overrun.to_vec()),
    ];
    for (i, (name, header)) in cases.iter().enumerate() {
        let closed = send_raw(addr, header, &[0u8; 8], Duration::from_secs(5));
        assert_eq!(server.stats().protocol_errors, i as u64 + 1, "{name}: not counted as a protocol error");
        // The server forcibly closes: the raw client may or may not hear of it, depending on transport.
        let _ = closed;
        // Everyone else is still served.
        let reply = endpoint.request(1, name.as_bytes()).unwrap().wait().unwrap();
        assert_eq!(&reply[..], name.as_bytes(), "{name}: the good client was disturbed");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().connections_open != 1 {
        assert!(Instant::now() < deadline, "bad connections not closed: {:?}", server.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_served(endpoint: &fabric::Endpoint, what: &str) {
    let reply = endpoint.request(1, what.as_bytes()).unwrap().wait().unwrap();
    assert_eq!(&reply[..], what.as_bytes(), "{what}: the good client was disturbed");
}

#[test]
fn first_chunks_only_are_bounded_per_connection_and_per_node() {
    let limits = Config {
        max_message_bytes: 1 << 20,
        pool_cap_bytes: 16 << 20,
        max_reassembly_messages_per_connection: 4,
        max_reassembly_messages: 6,
        ..Config::default()
    };
    let server = echo_server(limits);
    let addr = server.local_addr().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_served(&endpoint, "before");
    // The good client's last request may still hold a buffer for a moment.
    until(&server, "nothing in use", |s| s.pool_bytes_in_use == 0);
    let baseline = 0;

    // A peer that sends only first chunks: up to the per-connection limit they are held...
    let greedy = RawClient::connect(addr);
    for id in 0..4 {
        greedy.send(&first_chunk(id, 8192), &CHUNK, Duration::from_secs(5));
    }
    until(&server, "four requests in reassembly", |s| s.pool_bytes_in_use >= baseline + 4 * 8192);
    assert!(!greedy.closed_within(Duration::from_millis(200)));
    assert_eq!(server.stats().protocol_errors, 0);
    assert_served(&endpoint, "at the per-connection limit");
    // ...one more is a protocol error: that connection closes and its buffers go back.
    greedy.send(&first_chunk(4, 8192), &CHUNK, Duration::from_secs(5));
    until(&server, "the fifth refused", |s| s.protocol_errors == 1 && s.pool_bytes_in_use == baseline && s.connections_open == 1);
    assert_served(&endpoint, "after the per-connection limit");
    drop(greedy);

    // The node's limit (6): two peers hold 4 + 2; the third of the second peer is refused.
    let first = RawClient::connect(addr);
    for id in 0..4 {
        first.send(&first_chunk(id, 8192), &CHUNK, Duration::from_secs(5));
    }
    let second = RawClient::connect(addr);
    for id in 0..2 {
        second.send(&first_chunk(id, 8192), &CHUNK, Duration::from_secs(5));
    }
    until(&server, "six requests in reassembly", |s| s.pool_bytes_in_use >= baseline + 6 * 8192 && s.connections_open == 3);
    second.send(&first_chunk(2, 8192), &CHUNK, Duration::from_secs(5));
    until(&server, "the seventh refused", |s| s.protocol_errors == 2 && s.connections_open == 2);
    assert!(!first.closed_within(Duration::from_millis(200)), "the peer within its limits stays connected");
    assert_eq!(server.stats().pool_bytes_in_use, baseline + 4 * 8192, "only the refused peer's buffers went back");
    assert_served(&endpoint, "after the node's limit");
    // Its messages can still complete: the second chunk of each finishes it (and it is answered).
    for id in 0..4 {
        let last = Header { kind: Kind::Request, op: 1, status: 0, chunk_index: 1, chunk_count: 2, request_id: id, total_len: 8192, offset: 4096 };
        first.send(&last.encode(), &CHUNK, Duration::from_secs(5));
    }
    until(&server, "the held requests completed", |s| s.pool_bytes_in_use == baseline);
    assert_eq!(server.stats().protocol_errors, 2);
}

#[test]
fn silent_messages_expire_and_idle_incoming_connections_close() {
    let server = echo_server(Config {
        max_message_bytes: 1 << 20,
        pool_cap_bytes: 16 << 20,
        reassembly_timeout: Duration::from_millis(1000),
        incoming_idle_timeout: Duration::from_millis(2500),
        ..Config::default()
    });
    let addr = server.local_addr().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_served(&endpoint, "before");
    // The good client's last request may still hold a buffer for a moment.
    until(&server, "nothing in use", |s| s.pool_bytes_in_use == 0);
    let baseline = 0;
    let silent = RawClient::connect(addr);
    for id in 0..3 {
        silent.send(&first_chunk(id, 1 << 20), &CHUNK, Duration::from_secs(5));
    }
    until(&server, "three messages in reassembly", |s| s.pool_bytes_in_use >= baseline + 3 * (1 << 20));
    // 1 s after their last chunk (checked every 500 ms) their buffers are back.
    until(&server, "reassembly expired", |s| s.pool_bytes_in_use == baseline);
    assert_eq!(server.stats().protocol_errors, 0, "expiry is no protocol error");
    assert_served(&endpoint, "after expiry");
    // Nothing more from anyone: both accepted connections (the raw one and the good client's)
    // close after the incoming idle timeout...
    until(&server, "idle incoming connections closed", |s| s.connections_open == 0);
    drop(silent);
    // ...the good client sees its connection closed (a request racing that would fail with
    // PeerFailed: docs/fabric.md), and its next request reconnects transparently.
    until(&client, "the client saw the close", |s| s.connections_open == 0);
    assert_served(&endpoint, "after the idle close");
}

#[test]
fn empty_and_duplicate_chunks_are_protocol_errors() {
    let server = echo_server(Config { max_message_bytes: 1 << 20, pool_cap_bytes: 16 << 20, ..Config::default() });
    let addr = server.local_addr().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_served(&endpoint, "before");
    // The good client's last request may still hold a buffer for a moment.
    until(&server, "nothing in use", |s| s.pool_bytes_in_use == 0);
    let baseline = 0;

    let empty = RawClient::connect(addr);
    empty.send(&first_chunk(1, 8192), &[], Duration::from_secs(5));
    until(&server, "the empty chunk refused", |s| s.protocol_errors == 1 && s.connections_open == 1);
    assert_served(&endpoint, "after an empty chunk");

    let duplicate = RawClient::connect(addr);
    duplicate.send(&first_chunk(1, 8192), &CHUNK, Duration::from_secs(5));
    duplicate.send(&first_chunk(1, 8192), &CHUNK, Duration::from_secs(5));
    until(&server, "the duplicate refused", |s| s.protocol_errors == 2 && s.connections_open == 1 && s.pool_bytes_in_use == baseline);
    assert_served(&endpoint, "after a duplicate chunk");
}

/// What a raw client announces to pass the same-host check: a nonce in this (the test's) process,
/// followed by slot words, as the fabric's own `ProcessArea` is laid out.
struct RawIdentity {
    words: &'static [std::sync::atomic::AtomicU64; 6],
    hello: wire::Hello,
}

fn raw_identity() -> RawIdentity {
    use std::sync::atomic::AtomicU64;
    let words: &'static [AtomicU64; 6] = Box::leak(Box::new([const { AtomicU64::new(0) }; 6]));
    words[0].store(0x0123_4567_89ab_cdef, Ordering::SeqCst);
    words[1].store(0xfeed_f00d_dead_beef, Ordering::SeqCst);
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&0x0123_4567_89ab_cdefu64.to_ne_bytes());
    nonce[8..].copy_from_slice(&0xfeed_f00d_dead_beefu64.to_ne_bytes());
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let hello = wire::Hello {
        boot_id: boot_id.trim().as_bytes().try_into().unwrap(),
        pid: std::process::id(),
        area_addr: words.as_ptr() as u64,
        slot_count: 4,
        nonce,
    };
    RawIdentity { words, hello }
}

fn control(op: u16, len: usize) -> [u8; wire::HEADER_LEN] {
    Header { kind: Kind::Control, op, status: 0, chunk_index: 0, chunk_count: 1, request_id: 0, total_len: len as u64, offset: 0 }.encode()
}

fn pulled_request(request_id: u64, total_len: u64) -> [u8; wire::HEADER_LEN] {
    Header { kind: Kind::PulledRequest, op: 1, status: 0, chunk_index: 0, chunk_count: 1, request_id, total_len, offset: 0 }.encode()
}

/// The same-host pull path from a raw client: descriptors before a verified hello, broken hellos,
/// descriptors that break the rules and releases of tokens never held are protocol errors that
/// close only that connection; a descriptor whose slot word does not hold its token (the sender
/// let the buffer go) fails that message only; a correct one is pulled.
#[test]
fn same_host_descriptors_and_control_messages_are_checked() {
    let server = echo_server(Config { max_message_bytes: 1 << 20, pool_cap_bytes: 16 << 20, ..Config::default() });
    let addr = server.local_addr().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_served(&endpoint, "before");
    let identity = raw_identity();
    let source: &'static [u8] = Box::leak(vec![0x5au8; 64 << 10].into_boxed_slice());
    let descriptor = |slot: u32, token: u64| wire::PullDescriptor { addr: source.as_ptr() as u64, slot, token }.encode();

    let mut errors = server.stats().protocol_errors;
    let mut expect_protocol_error = |what: &str, client: &RawClient| {
        errors += 1;
        until(&server, what, |s| s.protocol_errors == errors);
        let _ = client.closed_within(Duration::from_millis(50));
        assert_served(&endpoint, what);
    };
    // A descriptor with no hello: nobody verified this peer.
    let raw = RawClient::connect(addr);
    raw.send(&pulled_request(1, 4096), &descriptor(0, 1), Duration::from_secs(5));
    expect_protocol_error("descriptor before hello", &raw);
    // A hello of the wrong length.
    let raw = RawClient::connect(addr);
    raw.send(&control(wire::CONTROL_HELLO, 10), &[0u8; 10], Duration::from_secs(5));
    expect_protocol_error("short hello", &raw);
    // A release of a token this server never handed out.
    let raw = RawClient::connect(addr);
    raw.send(&control(wire::CONTROL_RELEASE, 8), &7u64.to_le_bytes(), Duration::from_secs(5));
    expect_protocol_error("release of a token never held", &raw);
    // Verified, then a descriptor naming a slot beyond the announced count.
    let raw = RawClient::connect(addr);
    raw.send(&control(wire::CONTROL_HELLO, wire::HELLO_LEN), &identity.hello.encode(), Duration::from_secs(5));
    raw.send(&pulled_request(2, 4096), &descriptor(9, 1), Duration::from_secs(5));
    expect_protocol_error("slot out of range", &raw);
    // Verified, then a descriptor longer than max_message_bytes.
    let raw = RawClient::connect(addr);
    raw.send(&control(wire::CONTROL_HELLO, wire::HELLO_LEN), &identity.hello.encode(), Duration::from_secs(5));
    raw.send(&pulled_request(3, (1 << 20) + 1), &descriptor(0, 1), Duration::from_secs(5));
    expect_protocol_error("pulled message above max_message_bytes", &raw);

    // Verified; the slot word does not hold the token: that message fails, the connection stays.
    let raw = RawClient::connect(addr);
    raw.send(&control(wire::CONTROL_HELLO, wire::HELLO_LEN), &identity.hello.encode(), Duration::from_secs(5));
    raw.send(&pulled_request(4, source.len() as u64), &descriptor(1, 77), Duration::from_secs(5));
    until(&server, "a pull whose token does not match fails", |s| s.same_host_pulls_failed == 1);
    // The same connection, a correct descriptor: pulled.
    identity.words[2 + 1].store(78, Ordering::SeqCst);
    raw.send(&pulled_request(5, source.len() as u64), &descriptor(1, 78), Duration::from_secs(5));
    until(&server, "a correct descriptor is pulled", |s| s.same_host_bytes_pulled == source.len() as u64);
    assert_eq!(server.stats().protocol_errors, errors, "failed pulls are not protocol errors");
    assert!(!raw.closed_within(Duration::from_millis(200)), "a failed pull must not close the connection");
    assert_served(&endpoint, "after");
}

/// Bundles (`Kind::Bundle`, sent by fabric nodes over TCP) are checked whole before any of their
/// frames is served: a bad frame anywhere closes the connection with none of the bundle served,
/// and a good bundle's requests are each served.
#[test]
fn bundles_are_checked_whole_before_any_of_their_frames_is_served() {
    let server = echo_server(Config { max_message_bytes: 1 << 20, pool_cap_bytes: 16 << 20, ..Config::default() });
    let addr = server.local_addr().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_served(&endpoint, "before");
    let frame = |kind: Kind, chunk_count: u32, payload: &[u8]| {
        let header = Header { kind, op: 1, status: 0, chunk_index: 0, chunk_count, request_id: 7, total_len: payload.len() as u64, offset: 0 };
        [&header.encode()[..], payload].concat()
    };
    let request = |payload: &[u8]| frame(Kind::Request, 1, payload);
    let bundle = |frames: &[Vec<u8>], count: usize| (Header::bundle(count as u32, frames.concat().len()).encode(), frames.concat());

    let served = server.stats().requests_served;
    let (header, data) = bundle(&[request(b"one"), request(b""), request(&[9; 5000])], 3);
    let raw = RawClient::connect(addr);
    raw.send(&header, &data, Duration::from_secs(5));
    until(&server, "the good bundle's three requests served", |s| s.requests_served == served + 3);
    drop(raw);

    let mut bad_magic = request(b"three");
    bad_magic[0] ^= 0xff;
    let mut chunked = request(&[1; 8192]);
    chunked[12] = 2; // chunk 0 of 2: not a whole message
    let nested = frame(Kind::Bundle, 1, &request(b"inner"));
    let cases: [(&str, Vec<Vec<u8>>, usize); 5] = [
        ("a bad frame after good ones", vec![request(b"one"), request(b"two"), bad_magic], 3),
        ("bytes after the last frame", vec![request(b"one"), request(b"two")], 1),
        ("fewer frames than announced", vec![request(b"one"), request(b"two")], 3),
        ("a chunk of a larger message", vec![request(b"one"), chunked], 2),
        ("a bundle in a bundle", vec![request(b"one"), nested], 2),
    ];
    let served = server.stats().requests_served;
    for (i, (name, frames, count)) in cases.iter().enumerate() {
        let (header, data) = bundle(frames, *count);
        let errors = server.stats().protocol_errors;
        let _ = send_raw(addr, &header, &data, Duration::from_secs(5));
        until(&server, name, |s| s.protocol_errors == errors + 1);
        // (The good client's request after each case is the only one served.)
        assert_eq!(server.stats().requests_served, served + i as u64, "{name}: a frame of a bad bundle was served");
        assert_served(&endpoint, name);
    }
    // Handler threads answer asynchronously: nothing of the bad bundles may be answered later either.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(server.stats().requests_served, served + cases.len() as u64);
}
