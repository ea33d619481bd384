//! Nodes in one process, on the process's one UCX worker: request/response, chunking,
//! concurrency, limits, several nodes side by side. Tests run in parallel. (Over `Transport::Tcp`,
//! which needs a worker of its own, see `tcp_transport.rs`.)
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Config, Error, HandlerMode, Node, Request, Transport};

fn echo(request: Request) {
    let payload = request.payload().to_vec();
    request.respond(&payload);
}

fn server(mode: HandlerMode, transport: Transport) -> Node {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: mode, transport, ..Config::default() };
    Node::start(config, Some(Arc::new(echo))).unwrap()
}

fn client(transport: Transport) -> Node {
    Node::start(Config { transport, request_timeout: Duration::from_secs(20), ..Config::default() }, None).unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn echo_small_and_large_inline() {
    let server = server(HandlerMode::Inline, Transport::Auto);
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    for len in [0usize, 1, 8, 4096, 65536, 1 << 20, (3 << 20) + 17] {
        let payload = pattern(len, len as u8);
        let response = endpoint.request(7, &payload).unwrap().wait().unwrap();
        assert_eq!(response.len(), len);
        assert!(response[..] == payload[..], "payload of {len} bytes corrupted");
    }
    assert_eq!(client.stats().responses_received, 7);
}

#[test]
fn many_threads_share_one_connection() {
    let server = server(HandlerMode::Staged { threads: 2 }, Transport::Auto);
    let client = client(Transport::Auto);
    let addr = server.local_addr().unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                let endpoint = client.endpoint(addr).unwrap();
                for i in 0..200 {
                    let payload = pattern(16 + (i * 37) % 3000, t as u8);
                    let response = endpoint.request(2, &payload).unwrap().wait().unwrap();
                    assert!(response[..] == payload[..]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(client.stats().connections_open, 1, "one connection per peer");
    assert_eq!(server.stats().connections_open, 1);
}

#[test]
fn async_requests_complete_out_of_order() {
    let server = server(HandlerMode::Staged { threads: 2 }, Transport::Auto);
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let sizes = [4 << 20, 8, 2 << 20, 64, 1 << 20, 1];
    for (i, &len) in sizes.iter().enumerate() {
        let done = done.clone();
        let payload = pattern(len, i as u8);
        endpoint
            .request_with(3, &payload.clone(), move |result| {
                let response = result.unwrap();
                assert!(response[..] == payload[..]);
                done.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while done.load(Ordering::SeqCst) < sizes.len() {
        assert!(Instant::now() < deadline, "async requests did not complete");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn handler_errors_reach_the_caller() {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), ..Config::default() };
    let server = Node::start(config, Some(Arc::new(|request: Request| request.fail("no such block")))).unwrap();
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let err = endpoint.request(9, b"x").unwrap().wait().unwrap_err();
    assert_eq!(err, Error::Remote("no such block".into()));
    // A dropped request is answered too.
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), ..Config::default() };
    let dropper = Node::start(config, Some(Arc::new(|_request: Request| {}))).unwrap();
    let endpoint = client.endpoint(dropper.local_addr().unwrap()).unwrap();
    let err = endpoint.request(9, b"x").unwrap().wait().unwrap_err();
    assert!(matches!(err, Error::Remote(ref m) if m.contains("dropped")), "{err}");
}

#[test]
fn pull_mode_serves_from_caller_threads() {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() };
    let server = Node::start(config, None).unwrap();
    let puller = {
        let server = server.clone();
        std::thread::spawn(move || {
            let mut served = 0;
            while served < 10 {
                if let Some(mut request) = server.next_request(Duration::from_millis(100)) {
                    let payload = request.take_payload().unwrap();
                    request.respond_buffer(payload);
                    served += 1;
                }
            }
        })
    };
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    for i in 0..10u8 {
        let response = endpoint.request(1, &[i; 100]).unwrap().wait().unwrap();
        assert_eq!(&response[..], &[i; 100]);
    }
    puller.join().unwrap();
}

#[test]
fn oversized_request_is_refused_locally() {
    let client = Node::start(Config { max_message_bytes: 1 << 20, pool_cap_bytes: 4 << 20, ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint("127.0.0.1:9".parse().unwrap()).unwrap();
    let err = endpoint.request(1, &vec![0u8; (1 << 20) + 1]).err().unwrap();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
}

#[test]
fn unreachable_peer_fails_within_bounded_time() {
    let client = Node::start(Config { request_timeout: Duration::from_secs(5), ..Config::default() }, None).unwrap();
    // Nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let result = client.endpoint(format!("127.0.0.1:{port}").parse().unwrap()).and_then(|e| e.request(1, b"x")).and_then(|p| p.wait());
    assert!(result.is_err());
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
}

#[test]
fn closed_node_fails_pending_and_new_requests() {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() };
    let server = Node::start(config, None).unwrap(); // never answers
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let pending = endpoint.request(1, b"x").unwrap();
    let closer = {
        let client = client.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            client.close();
        })
    };
    assert_eq!(pending.wait().unwrap_err(), Error::Closed);
    closer.join().unwrap();
    assert_eq!(endpoint.request(1, b"x").err().unwrap(), Error::Closed);
}

#[test]
fn slow_handler_applies_backpressure_not_memory() {
    // One handler thread that sleeps; a tiny dispatch queue; many requests in flight.
    let config = Config {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        handler_mode: HandlerMode::Staged { threads: 1 },
        dispatch_queue_depth: 4,
        ..Config::default()
    };
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let server = Node::start(
        config,
        Some(Arc::new(move |request: Request| {
            std::thread::sleep(Duration::from_millis(2));
            counter.fetch_add(1, Ordering::SeqCst);
            request.respond(b"ok");
        })),
    )
    .unwrap();
    let client = client(Transport::Auto);
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let pendings: Vec<_> = (0..200).map(|_| endpoint.request(1, &[1u8; 512]).unwrap()).collect();
    let mut ok = 0;
    let mut shed = 0;
    for p in pendings {
        match p.wait() {
            Ok(r) => {
                assert_eq!(&r[..], b"ok");
                ok += 1
            }
            Err(Error::Overloaded) => shed += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok + shed, 200);
    assert!(ok >= 8, "most requests must be served, not shed (ok {ok}, shed {shed})");
    assert_eq!(served.load(Ordering::SeqCst), ok);
    assert_eq!(server.stats().requests_shed as usize, shed);
}

#[test]
fn requests_in_flight_are_bounded_and_callers_wait() {
    // A server that answers only when told to; a client allowed 4 requests in flight.
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() };
    let server = Node::start(config, None).unwrap();
    let client = Node::start(Config { max_requests_in_flight: 4, ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let first: Vec<_> = (0..4).map(|i| endpoint.request(1, &[i]).unwrap()).collect();
    // The fifth caller waits for room instead of growing the table.
    let fifth = {
        let endpoint = endpoint.clone();
        std::thread::spawn(move || endpoint.request(1, &[9]).and_then(|p| p.wait()).map(|r| r.to_vec()))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(!fifth.is_finished(), "the fifth request went out beyond the limit");
    assert_eq!(client.stats().requests_sent, 4);
    let mut served = 0;
    while served < 5 {
        let request = server.next_request(Duration::from_secs(10)).expect("a request");
        let payload = request.payload().to_vec();
        request.respond(&payload);
        served += 1;
    }
    for (i, pending) in first.into_iter().enumerate() {
        assert_eq!(&pending.wait().unwrap()[..], &[i as u8]);
    }
    assert_eq!(fifth.join().unwrap().unwrap(), vec![9]);
}

#[test]
fn unanswered_requests_time_out_and_late_answers_are_dropped() {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() };
    let server = Node::start(config, None).unwrap();
    let client = Node::start(Config { request_timeout: Duration::from_millis(300), ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    let started = Instant::now();
    let err = endpoint.request(1, b"slow").unwrap().wait().unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    // Callback requests time out too (the progress thread's timer).
    let (sender, receiver) = std::sync::mpsc::channel();
    endpoint.request_with(1, b"slow too", move |result| sender.send(result.map(|r| r.to_vec())).unwrap()).unwrap();
    let result = receiver.recv_timeout(Duration::from_secs(5)).expect("the callback must run");
    assert!(matches!(result, Err(Error::Timeout { .. })), "{result:?}");
    // The late answers arrive at a client that forgot the requests: dropped, nothing breaks.
    for _ in 0..2 {
        server.next_request(Duration::from_secs(5)).expect("the request reached the server").respond(b"late");
    }
    assert_eq!(client.stats().requests_timed_out, 2);
    let puller = {
        let server = server.clone();
        std::thread::spawn(move || server.next_request(Duration::from_secs(5)).unwrap().respond(b"on time"))
    };
    assert_eq!(&endpoint.request(1, b"x").unwrap().wait().unwrap()[..], b"on time");
    puller.join().unwrap();
}

#[test]
fn idle_connections_close_and_reopen_on_demand() {
    let server = server(HandlerMode::Inline, Transport::Auto);
    let client = Node::start(Config { idle_timeout: Duration::from_millis(200), ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    assert_eq!(&endpoint.request(1, b"one").unwrap().wait().unwrap()[..], b"one");
    assert_eq!(client.stats().connections_open, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.stats().connections_open != 0 {
        assert!(Instant::now() < deadline, "the idle connection was not closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The same endpoint works again: a new connection is made.
    assert_eq!(&endpoint.request(1, b"two").unwrap().wait().unwrap()[..], b"two");
    assert_eq!(client.stats().connections_open, 1);
}

#[test]
fn connections_beyond_the_limit_are_refused_and_the_rest_keep_working() {
    let config = Config {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        handler_mode: HandlerMode::Inline,
        max_connections: 2,
        ..Config::default()
    };
    let server = Node::start(config, Some(Arc::new(echo))).unwrap();
    let addr = server.local_addr().unwrap();
    let clients: Vec<Node> = (0..3)
        .map(|_| Node::start(Config { request_timeout: Duration::from_secs(5), ..Config::default() }, None).unwrap())
        .collect();
    for client in &clients[..2] {
        assert_eq!(&client.endpoint(addr).unwrap().request(1, b"in").unwrap().wait().unwrap()[..], b"in");
    }
    let started = Instant::now();
    let refused = clients[2].endpoint(addr).and_then(|e| e.request(1, b"out")).and_then(|p| p.wait());
    assert!(refused.is_err(), "a third connection was accepted");
    assert!(started.elapsed() < Duration::from_secs(6), "refusal took {:?}", started.elapsed());
    assert_eq!(server.stats().connections_open, 2);
    for client in &clients[..2] {
        assert_eq!(&client.endpoint(addr).unwrap().request(1, b"still").unwrap().wait().unwrap()[..], b"still");
    }
}

#[test]
fn connection_ids_name_each_connection_and_report_when_it_closed() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = seen.clone();
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() };
    let server = Node::start(
        config,
        Some(Arc::new(move |request: Request| {
            recorder.lock().unwrap().push(request.connection_id());
            request.respond(b"ok");
        })),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let first = client(Transport::Auto);
    let second = client(Transport::Auto);
    for node in [&first, &first, &second] {
        node.endpoint(addr).unwrap().request(1, b"x").unwrap().wait().unwrap();
    }
    let ids = seen.lock().unwrap().clone();
    assert_eq!(ids[0], ids[1], "one client's requests share its connection");
    assert_ne!(ids[0], ids[2], "two clients have two connections");
    assert!(server.connection_is_open(ids[0]) && server.connection_is_open(ids[2]));
    first.close();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.connection_is_open(ids[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!server.connection_is_open(ids[0]), "the closed client's connection is gone");
    assert!(server.connection_is_open(ids[2]));
    assert!(!server.connection_is_open(u64::MAX), "an id never issued is not open");
}

/// A handler that finds the layer above's protocol broken fails the request AND closes its
/// connection: the caller gets the handler's message, the server serves nothing more on that
/// connection, another client is not disturbed, and the same client's next request opens a
/// new connection and is served.
#[test]
fn a_request_failed_with_close_answers_first_then_closes_only_its_connection() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = seen.clone();
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Staged { threads: 2 }, ..Config::default() };
    let server = Node::start(
        config,
        Some(Arc::new(move |request: Request| {
            recorder.lock().unwrap().push(request.connection_id());
            match request.op() {
                9 => request.fail_and_close("malformed frame: closing this session"),
                _ => echo(request),
            }
        })),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let bad = client(Transport::Auto);
    let good = client(Transport::Auto);
    good.endpoint(addr).unwrap().request(1, b"before").unwrap().wait().unwrap();
    let endpoint = bad.endpoint(addr).unwrap();
    endpoint.request(1, b"fine").unwrap().wait().unwrap();
    match endpoint.request(9, b"garbage").unwrap().wait() {
        Err(Error::Remote(message)) => assert!(message.contains("malformed frame"), "{message}"),
        other => panic!("expected the handler's message, got {:?}", other.map(|r| r.len())),
    }
    let closed = seen.lock().unwrap()[2];
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.connection_is_open(closed) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!server.connection_is_open(closed), "the connection that broke the protocol is closed");
    let good_id = seen.lock().unwrap()[0];
    assert!(server.connection_is_open(good_id), "the other client's connection stays");
    assert_eq!(&good.endpoint(addr).unwrap().request(1, b"after").unwrap().wait().unwrap()[..], b"after");
    // The peer sees the close (after the linger), and its next request goes on a new connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    while bad.stats().connections_open != 0 {
        assert!(Instant::now() < deadline, "the client never saw the close: {:?}", bad.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(&endpoint.request(1, b"again").unwrap().wait().unwrap()[..], b"again");
    let last = *seen.lock().unwrap().last().unwrap();
    assert_ne!(last, closed, "served on a new connection");
    assert_eq!(server.stats().protocol_errors, 0, "the fabric's own protocol was kept");
}

/// A server that answers with its own name, so a response shows which node served it.
fn named_server(name: &'static str) -> Node {
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Staged { threads: 1 }, ..Config::default() };
    Node::start(config, Some(Arc::new(move |request: Request| request.respond(name.as_bytes())))).unwrap()
}

#[test]
fn several_nodes_in_one_process_each_serve_their_own_requests() {
    // Like a mini cluster: servers and clients in one process, on one shared worker.
    let names = ["namenode", "datanode-1", "datanode-2"];
    let servers: Vec<Node> = names.iter().map(|&name| named_server(name)).collect();
    let clients: Vec<Node> = (0..3).map(|_| client(Transport::Auto)).collect();
    let threads: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(c, client)| {
            let client = client.clone();
            let addrs: Vec<_> = servers.iter().map(|s| s.local_addr().unwrap()).collect();
            std::thread::spawn(move || {
                for round in 0..50 {
                    let s = (c + round) % addrs.len();
                    let response = client.endpoint(addrs[s]).unwrap().request(1, b"who").unwrap().wait().unwrap();
                    assert_eq!(&response[..], names[s].as_bytes(), "a request reached the wrong node");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for (server, client) in servers.iter().zip(&clients) {
        assert_eq!(server.stats().requests_served, 50, "each node counts its own requests");
        assert_eq!(client.stats().responses_received, 50);
    }
    // One node closing leaves the others serving, over connections already open and new ones.
    servers[0].close();
    assert!(clients[0].endpoint(servers[0].local_addr().unwrap()).and_then(|e| e.request(1, b"x")?.wait()).is_err());
    for client in &clients {
        let response = client.endpoint(servers[1].local_addr().unwrap()).unwrap().request(1, b"x").unwrap().wait().unwrap();
        assert_eq!(&response[..], b"datanode-1");
    }
    let late = client(Transport::Auto);
    let response = late.endpoint(servers[2].local_addr().unwrap()).unwrap().request(1, b"x").unwrap().wait().unwrap();
    assert_eq!(&response[..], b"datanode-2");
}

#[test]
fn one_node_at_its_in_flight_limit_does_not_hold_up_another() {
    // Node A's requests go to a server that never answers, up to A's limit; node B, on the same
    // worker, is served meanwhile.
    let silent = Node::start(
        Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() },
        None,
    )
    .unwrap();
    let echo_server = server(HandlerMode::Inline, Transport::Auto);
    let limited = Node::start(Config { max_requests_in_flight: 4, request_timeout: Duration::from_secs(20), ..Config::default() }, None).unwrap();
    let silent_endpoint = limited.endpoint(silent.local_addr().unwrap()).unwrap();
    let held: Vec<_> = (0..4).map(|_| silent_endpoint.request(1, b"wait").unwrap()).collect();
    // A fifth request of the limited node waits for room...
    let fifth = {
        let endpoint = silent_endpoint.clone();
        std::thread::spawn(move || endpoint.request(1, b"fifth").map(|_| ()))
    };
    // ...while another node of the process is served.
    let other = client(Transport::Auto);
    let endpoint = other.endpoint(echo_server.local_addr().unwrap()).unwrap();
    let start = Instant::now();
    for _ in 0..20 {
        assert_eq!(&endpoint.request(2, b"free").unwrap().wait().unwrap()[..], b"free");
    }
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(!fifth.is_finished(), "the fifth request went out beyond the limit");
    assert_eq!(limited.stats().requests_sent, 4);
    assert_eq!(other.stats().requests_timed_out, 0);
    limited.close();
    drop(held);
    assert!(fifth.join().unwrap().is_err(), "closing the node ends the wait");
}

#[test]
fn an_inline_handler_that_waits_for_another_node_gets_an_error_at_once() {
    // A handler on the progress thread cannot wait for a response: the worker it would need is
    // the one running it (all nodes of the process share it). It gets an error, not a hang.
    let backend = server(HandlerMode::Inline, Transport::Auto);
    let backend_addr = backend.local_addr().unwrap();
    let caller = client(Transport::Auto);
    let forwarder = {
        let caller = caller.clone();
        let handler = move |request: Request| {
            match caller.endpoint(backend_addr).and_then(|e| e.request(1, b"inner")?.wait()) {
                Ok(response) => request.respond(&response),
                Err(e) => request.fail(&e.to_string()),
            }
        };
        let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() };
        Node::start(config, Some(Arc::new(handler))).unwrap()
    };
    let outer = client(Transport::Auto);
    let start = Instant::now();
    let result = outer.endpoint(forwarder.local_addr().unwrap()).unwrap().request(1, b"outer").unwrap().wait();
    match result {
        Err(Error::Remote(message)) => assert!(message.contains("progress thread"), "{message}"),
        other => panic!("expected the handler's error, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    // The same call from a thread of its own is served.
    let response = caller.endpoint(backend_addr).unwrap().request(1, b"direct").unwrap().wait().unwrap();
    assert_eq!(&response[..], b"direct");
}
