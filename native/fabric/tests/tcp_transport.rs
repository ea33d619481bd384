//! Nodes forced to TCP (`Transport::Tcp`), in a test binary of their own: they need a UCX context
//! and worker of their own, and UCX 1.13 can abort a process running two workers while connections
//! churn (docs/fabric.md, "Several nodes in one process"); cargo runs test binaries one at a time.
use std::sync::Arc;
use std::time::Duration;

use fabric::{Config, HandlerMode, Node, Request, Transport};

fn echo(request: Request) {
    let payload = request.payload().to_vec();
    request.respond(&payload);
}

#[test]
fn echo_staged_over_tcp() {
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let server_config = Config { listen, handler_mode: HandlerMode::Staged { threads: 2 }, transport: Transport::Tcp, ..Config::default() };
    let server = Node::start(server_config, Some(Arc::new(echo))).unwrap();
    let client = Node::start(Config { transport: Transport::Tcp, request_timeout: Duration::from_secs(20), ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    // Around the chunk a TCP connection cuts (512 KiB) and UCX's receive segment (576 KiB).
    for len in [8usize, 100_000, 512 << 10, (512 << 10) + 1, (576 << 10) + 1, (1 << 20) + 3, 5 << 20] {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(3)).collect();
        let response = endpoint.request(1, &payload).unwrap().wait().unwrap();
        assert!(response[..] == payload[..], "{len} bytes over TCP corrupted");
    }
}

const PEER: &str = env!("CARGO_BIN_EXE_fabric-peer");

/// What UCX and the peer print (UCX at debug level) while a `fabric-peer` over TCP starts and stops, with `env` added.
fn ucx_debug_log_of_a_tcp_peer(env: &[(&str, &str)]) -> String {
    let output = std::process::Command::new(PEER)
        .args(["--listen", "127.0.0.1:0", "--transport", "tcp"])
        .env("UCX_LOG_LEVEL", "debug")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null()) // the peer serves until stdin closes: start, then stop
        .output()
        .unwrap();
    assert!(output.status.success(), "fabric-peer failed: {}", String::from_utf8_lossy(&output.stderr));
    // UCX logs to stdout unless told otherwise; the peer's own lines go there too.
    let log = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(log.contains("LISTENING"), "{log}");
    log
}

/// The receive segment the fabric sets on its context (576 KiB, `ucx::TCP_RX_SEG_BYTES`) reaches
/// UCX's TCP transport, which logs each transport setting it applies. Given under the name
/// `TCP_RX_SEG_SIZE`, UCX 1.13 kept it unused without an error, and every message above 64 KiB
/// still travelled in 64 KiB fragments; UCX 1.22 refuses `RX_SEG_SIZE` and applies the prefixed
/// name (`Context::new` tries it next), so either line counts. A segment the user set wins.
#[test]
fn the_tcp_receive_segment_reaches_ucx_unless_the_user_set_one() {
    let log = ucx_debug_log_of_a_tcp_peer(&[]);
    let applied = ["apply UCT configuration RX_SEG_SIZE=589824", "apply UCT configuration TCP_RX_SEG_SIZE=589824"];
    assert!(applied.iter().any(|line| log.contains(line)), "UCX did not apply the segment:\n{log}");
    let log = ucx_debug_log_of_a_tcp_peer(&[("UCX_TCP_RX_SEG_SIZE", "64K")]);
    assert!(!log.contains("RX_SEG_SIZE=589824"), "the user's UCX_TCP_RX_SEG_SIZE was overridden:\n{log}");
}

/// Over TCP, the answers an Inline server posts in one progress round to one client go out as
/// bundles (`wire::Kind::Bundle`): each request gets its own answer intact, error answers
/// included, whether it travelled in a bundle or alone (payloads above 4 KiB go alone).
#[test]
fn answers_of_one_round_travel_as_bundles_and_arrive_whole() {
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let server_config = Config { listen, handler_mode: HandlerMode::Inline, transport: Transport::Tcp, ..Config::default() };
    let server = Node::start(
        server_config,
        Some(Arc::new(|request: Request| match request.op() {
            2 => {
                let message = format!("refused {}", request.payload().len());
                request.fail(&message)
            }
            _ => echo(request),
        })),
    )
    .unwrap();
    let client = Node::start(Config { transport: Transport::Tcp, request_timeout: Duration::from_secs(20), ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let payload = |i: usize| -> Vec<u8> { (0..(i * 97) % 6000).map(|j| (i as u8).wrapping_mul(13) ^ j as u8).collect() };
    // A burst of requests in flight makes the server receive several in one progress round; a
    // few bursts in case the first ones arrive one by one.
    for _burst in 0..20 {
        let pending: Vec<_> = (0..512).map(|i| endpoint.request(if i % 7 == 3 { 2 } else { 1 }, &payload(i)).unwrap()).collect();
        for (i, p) in pending.into_iter().enumerate() {
            match (i % 7 == 3, p.wait()) {
                (false, Ok(response)) => assert!(response[..] == payload(i)[..], "answer {i} corrupted"),
                (true, Err(fabric::Error::Remote(message))) => assert_eq!(message, format!("refused {}", payload(i).len())),
                (_, other) => panic!("request {i}: {:?}", other.map(|r| r.len())),
            }
        }
        if server.stats().bundles_sent > 0 {
            break;
        }
    }
    let stats = server.stats();
    assert!(stats.bundles_sent > 0, "no bundle sent: {stats:?}");
    assert!(stats.answers_bundled >= 2 * stats.bundles_sent, "a bundle carries at least two answers: {stats:?}");
    assert_eq!((client.stats().protocol_errors, stats.protocol_errors), (0, 0));
}
