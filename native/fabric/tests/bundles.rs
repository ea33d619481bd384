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
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let config = Config { listen, handler_mode: HandlerMode::Inline, transport: Transport::Tcp, ..Config::default() };
    Node::start(
        config,
        Some(Arc::new(|request: Request| {
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap()
}

/// The request ids each message answers, and whether it was a bundle.
fn answered_ids(message: &Received) -> (Vec<u64>, bool) {
    let header = Header::decode(&message.header, message.data.len(), 1 << 20).expect("the server sent a valid frame");
    match header.kind {
        Kind::Response => (vec![header.request_id], false),
        Kind::Bundle => {
            let frames = BundleFrames::new(&header, &message.data, 1 << 20);
            (frames.map(|frame| frame.expect("the server sent a valid bundle").0.request_id).collect(), true)
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
