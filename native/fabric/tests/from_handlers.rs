//! Starting, closing and renewing from the thread driving progress (an Inline handler; completion
//! callbacks run there too): that thread holds the runtime's lock, which those operations take.
//! They used to deadlock the process's worker; now starting and renewing fail at once with an
//! error naming the cause, and closing happens on a thread of its own.
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fabric::{Config, HandlerMode, Node, Request};

/// A node whose Inline handler runs `action` (given the node of the test's choice) and answers
/// with what it returned.
fn inline_server(action: impl Fn() -> String + Send + Sync + 'static) -> Node {
    let handler = move |request: Request| {
        let said = action();
        request.respond(said.as_bytes());
    };
    Node::start(
        Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() },
        Some(Arc::new(handler)),
    )
    .unwrap()
}

fn ask(server: &Node) -> String {
    let client = Node::start(Config { request_timeout: Duration::from_secs(10), ..Config::default() }, None).unwrap();
    let response = client.endpoint(server.local_addr().unwrap()).unwrap().request(1, b"go").unwrap().wait();
    let said = String::from_utf8(response.expect("the handler answered: the worker is not deadlocked").to_vec()).unwrap();
    client.close();
    said
}

#[test]
fn starting_a_node_from_an_inline_handler_fails_at_once() {
    let server = inline_server(|| match Node::start(Config::default(), None) {
        Ok(_) => "started".to_string(),
        Err(e) => format!("error: {e}"),
    });
    let said = ask(&server);
    assert!(said.starts_with("error: ") && said.contains("progress"), "{said}");
    server.close();
}

#[test]
fn closing_a_node_from_an_inline_handler_closes_it_without_a_deadlock() {
    let victim = Node::start(Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap();
    let (returned_tx, returned_rx) = mpsc::channel();
    let returned_tx = Mutex::new(returned_tx);
    let to_close = victim.clone();
    let server = inline_server(move || {
        to_close.close();
        returned_tx.lock().unwrap().send(()).unwrap();
        "closing".to_string()
    });
    assert_eq!(ask(&server), "closing");
    returned_rx.recv_timeout(Duration::from_secs(5)).expect("close returned inside the handler");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !victim.is_closed() {
        assert!(Instant::now() < deadline, "the node closed from a handler never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The server still serves: its worker was not held up.
    assert_eq!(ask(&server), "closing");
    server.close();
}

#[test]
fn a_node_may_close_itself_from_its_own_inline_handler() {
    let me: Arc<OnceLock<Node>> = Arc::new(OnceLock::new());
    let server = {
        let me = me.clone();
        inline_server(move || {
            me.get().expect("set before the first request").close();
            "bye".to_string()
        })
    };
    me.set(server.clone()).ok().unwrap();
    // The answer races the close (the closing thread may end the connection before the answer
    // leaves): either is fine, a wait to the deadline is not.
    let client = Node::start(Config { request_timeout: Duration::from_secs(10), ..Config::default() }, None).unwrap();
    let asked = Instant::now();
    match client.endpoint(server.local_addr().unwrap()).unwrap().request(1, b"go").unwrap().wait() {
        Ok(response) => assert_eq!(&response[..], b"bye"),
        Err(fabric::Error::PeerFailed { .. }) => {}
        Err(other) => panic!("the request must be answered or fail with the connection, got {other}"),
    }
    assert!(asked.elapsed() < Duration::from_secs(5), "took {:?}", asked.elapsed());
    client.close();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.is_closed() {
        assert!(Instant::now() < deadline, "the node never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
}
