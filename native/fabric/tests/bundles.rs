//! Bundles (`wire::Kind::Bundle`) and peers from before them: a server forced to TCP bundles the
//! answers of one round only for a peer whose requests announce it takes them
//! (`wire::REQUEST_ID_TAKES_BUNDLES`). A fabric from before bundles refuses kind 7 as an unknown
//! kind and closes the connection; it never sets that bit (its ids count up from 1), so it must
//! never receive one. A test binary of its own: a node forced to TCP needs a UCX worker of its own
//! (tcp_transport.rs says why).
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use fabric::wire::{self, BundleFrames, Header, Kind};
use fabric::{Config, HandlerMode, Node, Request, Transport};

#[path = "support/raw_client.rs"]
mod raw_client;
use raw_client::{RawClient, Received};

/// Requests per burst: enough that the server receives several in one progress round.
const BURST: u64 = 64;

/// A server forced to TCP whose Inline handler echoes: the answers to the requests received in
/// one progress round are posted in the next round together, the case bundles are for.
fn inline_echo_server_over_tcp() -> Node {
    echo_server_over_tcp(HandlerMode::Inline, true)
}

/// A server forced to TCP that echoes, in `handler_mode` (Staged: each answer posted from a handler
/// thread, not in a progress round), with `cork_over_tcp` as given.
fn echo_server_over_tcp(handler_mode: HandlerMode, cork_over_tcp: bool) -> Node {
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let config = Config { listen, handler_mode, transport: Transport::Tcp, cork_over_tcp, ..Config::default() };
    Node::start(
        config,
        Some(Arc::new(|request: Request| {
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap()
}

/// The request ids each message answers, as sent (`wire::ANSWER_ID_TAKES_BUNDLES` cleared), and
/// whether it was a bundle. The server sets that bit exactly in answers to requests that announced
/// they take bundles (`REQUEST_ID_TAKES_BUNDLES`): a peer from before bundles never sees it.
fn answered_ids(message: &Received) -> (Vec<u64>, bool) {
    let header = Header::decode(&message.header, message.data.len(), 1 << 20).expect("the server sent a valid frame");
    let sent = |id: u64| {
        let announced = id & wire::REQUEST_ID_TAKES_BUNDLES != 0;
        assert_eq!(id & wire::ANSWER_ID_TAKES_BUNDLES != 0, announced, "answer id {id:#x}");
        id & !wire::ANSWER_ID_TAKES_BUNDLES
    };
    match header.kind {
        Kind::Response => (vec![sent(header.request_id)], false),
        Kind::Bundle => {
            let frames = BundleFrames::new(&header, &message.data, 1 << 20);
            (frames.map(|frame| sent(frame.expect("the server sent a valid bundle").0.request_id)).collect(), true)
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Sends `BURST` requests back to back with ids `first..` (with `flags`), waits for every answer,
/// checks each came once; returns how many came in bundles.
fn burst(raw: &RawClient, first: u64, flags: u64) -> usize {
    let ids: Vec<u64> = (first..first + BURST).map(|id| id | flags).collect();
    for &request_id in &ids {
        let payload = request_id.to_le_bytes();
        let header = Header { kind: Kind::Request, op: 1, status: 0, chunk_index: 0, chunk_count: 1, request_id, total_len: 8, offset: 0 };
        raw.send(&header.encode(), &payload, Duration::from_secs(5));
    }
    let count_answers = |received: &[Received]| received.iter().map(|m| answered_ids(m).0.len()).sum::<usize>();
    assert!(raw.progress_until(Duration::from_secs(10), |received| count_answers(received) >= ids.len()), "answers missing");
    let mut seen = HashSet::new();
    let mut bundles = 0;
    for message in raw.take_received() {
        let (answered, bundle) = answered_ids(&message);
        bundles += bundle as usize;
        for id in answered {
            assert!(ids.contains(&id) && seen.insert(id), "answer to {id:#x}: not asked, or twice");
        }
    }
    assert_eq!(seen.len(), ids.len());
    bundles
}

#[test]
fn a_peer_that_never_announced_bundles_never_receives_one() {
    let server = inline_echo_server_over_tcp();
    let raw = RawClient::connect(server.local_addr().unwrap());
    let (mut bundles_unannounced, mut bundles_announced) = (0, 0);
    // Alternating: the bursts with the bit show that these bursts do make bundles (else the test
    // would prove nothing), the bursts without it that none reaches a peer from before bundles.
    for round in 0..20 {
        bundles_unannounced += burst(&raw, 1 + 2 * round * BURST, 0);
        bundles_announced += burst(&raw, 1 + (2 * round + 1) * BURST, wire::REQUEST_ID_TAKES_BUNDLES);
        if bundles_announced > 0 && round >= 4 {
            break;
        }
    }
    assert_eq!(bundles_unannounced, 0, "a peer that never set REQUEST_ID_TAKES_BUNDLES received bundles");
    assert!(bundles_announced > 0, "no bundle even with REQUEST_ID_TAKES_BUNDLES: the test proves nothing ({:?})", server.stats());
    assert!(!raw.closed_within(Duration::from_millis(10)));
    assert_eq!(server.stats().protocol_errors, 0);
}

/// A fabric client announces it in every request: its answers do come in bundles, intact.
#[test]
fn fabric_clients_announce_that_they_take_bundles() {
    let server = inline_echo_server_over_tcp();
    let client = Node::start(Config { transport: Transport::Tcp, ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    for _burst in 0..20 {
        let pending: Vec<_> = (0..BURST).map(|i| endpoint.request(1, &i.to_le_bytes()).unwrap()).collect();
        for (i, p) in pending.into_iter().enumerate() {
            assert_eq!(&p.wait().unwrap()[..], &(i as u64).to_le_bytes(), "answer {i}");
        }
        if server.stats().bundles_sent > 0 {
            break;
        }
    }
    assert!(server.stats().bundles_sent > 0, "{:?}", server.stats());
}

/// A client forced to TCP, with `cork_over_tcp` as given.
fn tcp_client(cork_over_tcp: bool) -> Node {
    let config = Config { transport: Transport::Tcp, cork_over_tcp, request_timeout: Duration::from_secs(20), ..Config::default() };
    Node::start(config, None).unwrap()
}

/// Bursts of `BURST` requests in flight (each answer checked) until `until(client stats)` holds,
/// at most 50 bursts; returns whether it did.
fn bursts_until(client: &Node, endpoint: &fabric::Endpoint, mut until: impl FnMut(&fabric::Stats) -> bool) -> bool {
    for burst in 0..50u64 {
        let pending: Vec<_> = (0..BURST).map(|i| endpoint.request(1, &(burst * BURST + i).to_le_bytes()).unwrap()).collect();
        for (i, p) in pending.into_iter().enumerate() {
            assert_eq!(&p.wait().unwrap()[..], &(burst * BURST + i as u64).to_le_bytes(), "answer {i} of burst {burst}");
        }
        if until(&client.stats()) {
            return true;
        }
    }
    false
}

/// Requests posted while others to the same peer are in flight travel in bundles once the peer
/// has shown it takes them (its answers' ids), and each gets its own answer intact.
#[test]
fn requests_in_flight_together_travel_as_bundles_to_a_peer_that_takes_them() {
    let server = inline_echo_server_over_tcp();
    let client = tcp_client(true);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    assert!(bursts_until(&client, &endpoint, |stats| stats.requests_bundled > 0), "no request bundle: {:?}", client.stats());
    let stats = client.stats();
    assert!(stats.requests_bundled >= 2 * stats.bundles_sent, "a bundle carries at least two requests: {stats:?}");
    assert_eq!((stats.protocol_errors, server.stats().protocol_errors), (0, 0));
    // A lone request (nothing else in flight) goes at once, never corked.
    let corked = client.stats().corked;
    for i in 0..100u64 {
        assert_eq!(&endpoint.request(1, &i.to_le_bytes()).unwrap().wait().unwrap()[..], &i.to_le_bytes());
    }
    assert_eq!(client.stats().corked, corked, "a lone request was corked");
}

/// At the limit: requests of up to 16 KiB are corked (each still answered intact), one byte more
/// goes alone.
#[test]
fn requests_up_to_16_kib_are_corked_and_larger_ones_go_alone() {
    const LIMIT: usize = 16 << 10;
    let server = inline_echo_server_over_tcp();
    let client = tcp_client(true);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    // The peer shows it takes bundles with its first answers.
    assert!(bursts_until(&client, &endpoint, |stats| stats.requests_bundled > 0), "no request bundle: {:?}", client.stats());
    let burst_of = |len: usize| {
        let payloads: Vec<Vec<u8>> = (0..BURST).map(|i| (0..len).map(|b| (b as u64 * 7 + i) as u8).collect()).collect();
        let pending: Vec<_> = payloads.iter().map(|p| endpoint.request(1, p).unwrap()).collect();
        for (p, sent) in pending.into_iter().zip(&payloads) {
            assert!(p.wait().unwrap()[..] == sent[..], "an answer of {len} bytes differs");
        }
    };
    let before = client.stats().requests_bundled;
    for _ in 0..20 {
        burst_of(LIMIT);
        if client.stats().requests_bundled > before {
            break;
        }
    }
    assert!(client.stats().requests_bundled > before, "no 16 KiB request was bundled: {:?}", client.stats());
    let corked = client.stats().corked;
    for _ in 0..5 {
        burst_of(LIMIT + 1);
    }
    assert_eq!(client.stats().corked, corked, "a request above 16 KiB was corked");
    assert_eq!((client.stats().protocol_errors, server.stats().protocol_errors), (0, 0));
}

#[test]
fn requests_are_not_bundled_when_the_setting_is_off() {
    let server = inline_echo_server_over_tcp();
    let client = tcp_client(false);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    bursts_until(&client, &endpoint, |_| false);
    assert_eq!((client.stats().requests_bundled, client.stats().corked), (0, 0), "{:?}", client.stats());
}

/// A corked request waits for the next progress round, not for the answers of the requests in
/// flight before it: here one of those takes 3 s to answer, the caller of the second does not
/// wait on the fabric (a completion callback), and the second's answer must come long before.
#[test]
fn a_corked_request_does_not_wait_for_a_slow_one_in_flight() {
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let config = Config { listen, handler_mode: HandlerMode::Staged { threads: 2 }, transport: Transport::Tcp, ..Config::default() };
    let server = Node::start(
        config,
        Some(Arc::new(|request: Request| {
            if request.op() == 9 {
                std::thread::sleep(Duration::from_secs(3));
            }
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap();
    let client = tcp_client(true);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    // Until requests do get corked on this connection.
    assert!(bursts_until(&client, &endpoint, |stats| stats.requests_bundled > 0), "no request bundle: {:?}", client.stats());
    for round in 0..5u64 {
        let slow = endpoint.request(9, b"slow").unwrap();
        let bundled_before = client.stats().requests_bundled;
        let (sender, receiver) = std::sync::mpsc::channel();
        let started = std::time::Instant::now();
        // Three behind the slow one: corked (it is in flight), answered through callbacks.
        for i in 0..3u64 {
            let sender = sender.clone();
            endpoint.request_with(1, &(round * 3 + i).to_le_bytes(), move |result| sender.send(result.map(|r| r.to_vec())).unwrap()).unwrap();
        }
        for i in 0..3u64 {
            let answer = receiver.recv_timeout(Duration::from_secs(2)).expect("a corked request waited for the slow one");
            assert_eq!(answer.unwrap().len(), 8, "answer {i}");
        }
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(1), "round {round}: corked requests answered after {waited:?}");
        assert_eq!(&slow.wait().unwrap()[..], b"slow");
        // The server corks their answers likewise (the slow one is in service on the connection).
        if client.stats().requests_bundled > bundled_before && server.stats().corked > 0 {
            return; // they were corked, and still came quickly
        }
    }
    panic!("the requests behind the slow one were never corked: the test proves nothing ({:?})", client.stats());
}

/// Answers posted by handler threads while other requests of the same connection are still being
/// served are corked too, and every answer arrives intact; with the setting off, none is.
#[test]
fn answers_of_handler_threads_are_corked_while_their_connection_has_more_in_service() {
    for cork_over_tcp in [true, false] {
        let server = echo_server_over_tcp(HandlerMode::Staged { threads: 2 }, cork_over_tcp);
        let client = tcp_client(true);
        let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
        let corked = bursts_until(&client, &endpoint, |_| server.stats().corked > 0);
        assert_eq!(corked, cork_over_tcp, "cork_over_tcp {cork_over_tcp}: {:?}", server.stats());
        assert_eq!((server.stats().protocol_errors, client.stats().protocol_errors), (0, 0));
    }
}
