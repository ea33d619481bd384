//! The check every kill test ends with: the node still serves a new peer.
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fabric::{Error, Node};

/// After a peer was killed, `node` must serve a NEW request (type 1, answered with an echo) to a
/// new peer at `addr`; a timeout is a failure. Over shared memory, a peer killed while writing into
/// this process's receive FIFO can wedge it (UCX 1.13; docs/fabric.md, "Failures"): then no message
/// arrives until the wedge check renews the worker (`Config::wedge_timeout`, 5 s), which fails the
/// request in flight with `PeerFailed` ("renewed"); the next request must then be served. Test
/// threads of one process share the worker, so a renewal caused by one test is seen by the others.
pub fn served_after_a_kill(node: &Node, addr: SocketAddr, payload: &[u8]) {
    let asked = Instant::now();
    let ask = || node.endpoint(addr).and_then(|e| e.request(1, payload)).and_then(|p| p.wait());
    match ask() {
        Ok(response) => assert!(response[..] == payload[..], "echo of {} bytes", payload.len()),
        Err(Error::PeerFailed { reason, .. }) if reason.contains("renewed") => {
            eprintln!("UCX 1.13 shared-memory FIFO hazard hit and recovered: the worker was renewed after {:?}", asked.elapsed());
            let response = ask().unwrap_or_else(|e| panic!("the node must serve a new request after renewing its worker: {e}"));
            assert!(response[..] == payload[..], "echo of {} bytes after the renewal", payload.len());
        }
        Err(other) => panic!("the node must keep working with a new peer (a timeout is a failure): {other}"),
    }
    assert!(asked.elapsed() < Duration::from_secs(12), "serving the new peer took {:?}", asked.elapsed());
}
