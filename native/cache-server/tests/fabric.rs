//! The fabric side: a fabric client (the `fabric` crate, as a cache client would use it) sending
//! binary-protocol packets with op `FABRIC_OP_BINARY`, malformed payloads, authentication, and a
//! client process killed in the middle of its requests.
mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cache_proto::FABRIC_OP_BINARY;
use common::*;
use fabric::{Config, Node, Transport};

fn client(transport: Transport) -> Node {
    Node::start(Config { transport, request_timeout: Duration::from_secs(15), ..Config::default() }, None).unwrap()
}

fn call(node: &Node, server: SocketAddr, payload: &[u8]) -> fabric::Result<Vec<BinReply>> {
    let response = node.endpoint(server)?.request(FABRIC_OP_BINARY, payload)?.wait()?;
    Ok(parse_replies(&response))
}

#[test]
fn set_and_get_small_and_large_values() {
    let server = Server::start(&[]);
    let addr = server.fabric.expect("fabric listener");
    let node = client(Transport::Auto);
    for (key, len) in [("small", 32usize), ("large", 512 << 10), ("chunked", (1 << 20) - 64)] {
        let value = pattern(len, len as u8);
        let replies = call(&node, addr, &set_packet(key.as_bytes(), &value, 0xabcd, 1)).unwrap();
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].status(), status::NO_ERROR, "set {key}");
        let replies = call(&node, addr, &get_packet(key.as_bytes(), 2)).unwrap();
        assert_eq!(replies.len(), 1);
        let got = &replies[0];
        assert_eq!((got.status(), got.header.opaque), (status::NO_ERROR, 2));
        assert_eq!(got.extras, 0xabcdu32.to_be_bytes());
        assert!(got.value == value, "get {key}: {} bytes back", got.value.len());
        // The same store serves TCP.
        assert_eq!(server.connect().get(key).unwrap(), value);
    }
    // Several packets in one request: quiet gets answer only hits, NOOP closes the batch.
    let mut batch = Vec::new();
    batch.extend(set_packet(b"a", b"1", 0, 10));
    batch.extend(packet(opcode::GETKQ, b"a", &[], &[], 11, 0));
    batch.extend(packet(opcode::GETKQ, b"missing", &[], &[], 12, 0));
    batch.extend(packet(opcode::NOOP, b"", &[], &[], 13, 0));
    let replies = call(&node, addr, &batch).unwrap();
    let opaques: Vec<u32> = replies.iter().map(|r| r.header.opaque).collect();
    assert_eq!(opaques, vec![10, 11, 13]);
    assert_eq!((replies[1].key.as_slice(), replies[1].value.as_slice()), (&b"a"[..], &b"1"[..]));
    // A miss, and a reply with no packets at all (a quiet set).
    assert_eq!(call(&node, addr, &get_packet(b"missing", 3)).unwrap()[0].status(), status::KEY_NOT_FOUND);
    let mut quiet = set_packet(b"q", b"x", 0, 4);
    quiet[1] = opcode::SETQ;
    assert!(call(&node, addr, &quiet).unwrap().is_empty());
    let stats = server.stats();
    let requests: u64 = stats.iter().find(|(k, _)| k == "fabric_requests").unwrap().1.parse().unwrap();
    assert!(requests >= 9, "fabric_requests {requests}");
}

#[test]
fn malformed_payloads_fail_alone() {
    let server = Server::start(&[]);
    let addr = server.fabric.unwrap();
    let node = client(Transport::Auto);
    let endpoint = node.endpoint(addr).unwrap();
    let fails = |op: u16, payload: &[u8]| match endpoint.request(op, payload).unwrap().wait() {
        Err(fabric::Error::Remote(message)) => message,
        other => panic!("expected a failure, got {other:?}"),
    };
    assert_eq!(fails(0x1234, b"anything"), "unknown operation");
    assert!(fails(FABRIC_OP_BINARY, b"").contains("empty payload"));
    assert!(fails(FABRIC_OP_BINARY, b"get a\r\n").contains("not binary"));
    // Broken packets: the request fails, or it is answered with an error packet; never a success.
    let refused = |payload: &[u8]| match endpoint.request(FABRIC_OP_BINARY, payload).unwrap().wait() {
        Err(fabric::Error::Remote(message)) => assert!(message.contains("malformed"), "{message}"),
        Ok(response) => {
            let replies = parse_replies(&response);
            assert!(replies.last().is_some_and(|r| r.status() != status::NO_ERROR), "{replies:?}");
        }
        Err(other) => panic!("{other}"),
    };
    refused(&pattern(4096, 0x80));
    // A packet cut short, and a header announcing a 4 GB body.
    let whole = set_packet(b"key", &pattern(1000, 1), 0, 1);
    assert!(fails(FABRIC_OP_BINARY, &whole[..30]).contains("malformed"));
    let mut huge = get_packet(b"key", 1);
    huge[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    refused(&huge);
    let mut huge_set = set_packet(b"key", b"v", 0, 1);
    huge_set[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    refused(&huge_set);
    // A bad magic after a good packet: the good one is answered.
    let mut mixed = get_packet(b"nothing", 7);
    let mut bad = get_packet(b"x", 8);
    bad[0] = 0x42;
    mixed.extend(bad);
    let replies = call(&node, addr, &mixed).unwrap();
    assert_eq!(replies[0].header.opaque, 7);
    for seed in 0..50u8 {
        let mut junk = pattern(24 + seed as usize * 7, seed);
        junk[0] = MAGIC_REQUEST;
        let _ = endpoint.request(FABRIC_OP_BINARY, &junk).unwrap().wait();
    }
    // The same connection (with a fresh session) and the server go on.
    let replies = call(&node, addr, &set_packet(b"ok", b"fine", 0, 9)).unwrap();
    assert_eq!(replies[0].status(), status::NO_ERROR);
    assert_eq!(server.connect().get("ok").as_deref(), Some(&b"fine"[..]));
    let failed: u64 = server.stat("fabric_requests_failed").unwrap().parse().unwrap();
    assert!(failed >= 4, "fabric_requests_failed {failed}");
}

#[test]
fn fabric_clients_authenticate_with_sasl_plain() {
    let file = std::env::temp_dir().join(format!("slipstream-fabric-auth-{}", std::process::id()));
    std::fs::write(&file, "carol:pw\n").unwrap();
    let server = Server::start(&["-Y", file.to_str().unwrap()]);
    let addr = server.fabric.unwrap();
    let node = client(Transport::Auto);
    let refused = call(&node, addr, &get_packet(b"k", 1)).unwrap();
    assert_eq!(refused[0].status(), status::AUTH_ERROR);
    assert_eq!(call(&node, addr, &sasl_plain_packet("carol", "nope")).unwrap()[0].status(), status::AUTH_ERROR);
    // Authenticate and use it in one request ...
    let mut batch = sasl_plain_packet("carol", "pw");
    batch.extend(set_packet(b"k", b"v", 0, 2));
    let replies = call(&node, addr, &batch).unwrap();
    assert_eq!(replies.iter().map(|r| r.status()).collect::<Vec<_>>(), vec![status::NO_ERROR, status::NO_ERROR]);
    // ... and the connection stays authenticated for its next requests.
    let got = call(&node, addr, &get_packet(b"k", 3)).unwrap();
    assert_eq!((got[0].status(), got[0].value.as_slice()), (status::NO_ERROR, &b"v"[..]));
    // Another client node (another connection) is not.
    let other = client(Transport::Auto);
    assert_eq!(call(&other, addr, &get_packet(b"k", 4)).unwrap()[0].status(), status::AUTH_ERROR);
    let _ = std::fs::remove_file(file);
}

const CHILD_ENV: &str = "SLIPSTREAM_FABRIC_CHILD_SERVER";

/// Not a test: the body of the client process `a_fabric_client_killed_mid_stream...` kills. It
/// prints "READY" once its first requests completed, then sends large sets and gets from four
/// threads until it is killed.
#[test]
#[ignore = "helper process of a_fabric_client_killed_mid_stream_leaves_the_server_serving"]
fn fabric_child_hammer() {
    let Ok(addr) = std::env::var(CHILD_ENV) else { return };
    let addr: SocketAddr = addr.parse().unwrap();
    let transport = if std::env::var("SLIPSTREAM_FABRIC_CHILD_TCP").is_ok() { Transport::Tcp } else { Transport::Auto };
    let node = client(transport);
    call(&node, addr, &set_packet(b"child", &pattern(1 << 20, 5), 0, 0)).unwrap();
    println!("READY");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let node = node.clone();
            std::thread::spawn(move || {
                let endpoint = node.endpoint(addr).unwrap();
                let value = pattern(700 << 10, t);
                for i in 0u64.. {
                    let key = format!("child-{t}-{}", i % 8);
                    let mut batch = set_packet(key.as_bytes(), &value, 0, 1);
                    batch.extend(get_packet(b"child", 2));
                    let _ = endpoint.request(FABRIC_OP_BINARY, &batch).and_then(|p| p.wait());
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

fn killed_mid_stream(child_tcp: bool) {
    let server = Server::start(&[]);
    let addr = server.fabric.unwrap();
    for round in 0..3 {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "fabric_child_hammer", "--ignored", "--nocapture", "--test-threads", "1"])
            .env(CHILD_ENV, addr.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if child_tcp {
            command.env("SLIPSTREAM_FABRIC_CHILD_TCP", "1");
        }
        let mut child = command.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0, "child exited before READY");
            if line.contains("READY") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(150 + 100 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        // Others are served: a fresh fabric client and TCP.
        let node = client(Transport::Auto);
        let started = Instant::now();
        let value = pattern(300 << 10, round as u8);
        let replies = call(&node, addr, &set_packet(b"after", &value, 0, 1)).unwrap();
        assert_eq!(replies[0].status(), status::NO_ERROR);
        let got = call(&node, addr, &get_packet(b"after", 2)).unwrap();
        assert!(got[0].value == value);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(server.connect().get("after").unwrap(), value);
    }
    // The dead clients' sessions are pruned once their connections are seen closed.
    assert!(
        eventually(Duration::from_secs(10), || server.stat("fabric_sessions").is_some_and(|s| s.parse::<u64>().unwrap() <= 3)),
        "fabric_sessions {:?}",
        server.stat("fabric_sessions")
    );
}

#[test]
fn a_fabric_client_killed_mid_stream_leaves_the_server_serving() {
    killed_mid_stream(false);
}

#[test]
fn a_fabric_client_over_tcp_killed_mid_stream_leaves_the_server_serving() {
    killed_mid_stream(true);
}
