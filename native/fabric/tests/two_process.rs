//! Black-box tests: a real `fabric-peer` process on the other side, over shared memory and TCP,
//! including the peer being killed in the middle of transfers.
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

#[path = "support/after_kill.rs"]
mod after_kill;

use after_kill::served_after_a_kill;
use fabric::{Config, Error, Node, Transport};

struct Peer {
    child: Child,
    addr: SocketAddr,
}

impl Peer {
    fn start(transport: &str) -> Peer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fabric-peer"))
            .args(["--transport", transport])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting fabric-peer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("LISTENING ").unwrap_or_else(|| panic!("peer said {line:?}")).parse().unwrap();
        Peer { child, addr }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A node over `Transport::Tcp` needs a UCX worker of its own (another context), and UCX 1.13 can
/// abort a process running two workers while connections churn (docs/fabric.md, "Several nodes
/// in one process"): a test over TCP has the process to itself, the others share it.
static WORKERS: RwLock<()> = RwLock::new(());

#[allow(dead_code)] // the guards are held, never read
enum WorkerGuard {
    Shared(RwLockReadGuard<'static, ()>),
    Own(RwLockWriteGuard<'static, ()>),
}

/// The test's node, holding its share of the process (dropped after the node: fields drop in order).
struct Client {
    node: Node,
    _worker: WorkerGuard,
}

impl std::ops::Deref for Client {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

fn client(transport: Transport) -> Client {
    let worker = match transport {
        Transport::Auto => WorkerGuard::Shared(WORKERS.read().unwrap_or_else(|e| e.into_inner())),
        Transport::Tcp => WorkerGuard::Own(WORKERS.write().unwrap_or_else(|e| e.into_inner())),
    };
    let node = Node::start(Config { transport, request_timeout: Duration::from_secs(15), ..Config::default() }, None).unwrap();
    Client { node, _worker: worker }
}

fn check_pattern(bytes: &[u8]) {
    for (i, &b) in bytes.iter().enumerate() {
        assert_eq!(b, (i as u8).wrapping_mul(31), "byte {i}");
    }
}

fn round_trips(transport: Transport, peer_transport: &str) {
    let peer = Peer::start(peer_transport);
    let node = client(transport);
    let endpoint = node.endpoint(peer.addr).unwrap();
    for len in [1usize, 8, 200, 8192, 100_000, 1 << 20, 9 << 20] {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let response = endpoint.request(1, &payload).unwrap().wait().unwrap();
        assert!(response[..] == payload[..], "echo of {len} bytes");
        let response = endpoint.request(2, &(len as u64).to_le_bytes()).unwrap().wait().unwrap();
        assert_eq!(response.len(), len);
        check_pattern(&response);
    }
    // Many in flight at once, completing in any order.
    let pendings: Vec<_> = (0..64u64).map(|i| endpoint.request(2, &((i * 7919) % 300_000).to_le_bytes()).unwrap()).collect();
    for (i, pending) in pendings.into_iter().enumerate() {
        let response = pending.wait().unwrap();
        assert_eq!(response.len() as u64, (i as u64 * 7919) % 300_000);
        check_pattern(&response);
    }
}

#[test]
fn round_trips_over_shared_memory() {
    round_trips(Transport::Auto, "auto");
}

#[test]
fn round_trips_over_tcp() {
    round_trips(Transport::Tcp, "tcp");
}

fn peer_killed_mid_transfer(transport: Transport, peer_transport: &str) {
    let mut peer = Peer::start(peer_transport);
    let node = client(transport);
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    // Large responses and slow requests in flight when the peer dies.
    let mut pendings: Vec<_> = (0..8).map(|_| endpoint.request(2, &(32u64 << 20).to_le_bytes()).unwrap()).collect();
    pendings.extend((0..8).map(|_| endpoint.request(3, &10_000u64.to_le_bytes()).unwrap()));
    std::thread::sleep(Duration::from_millis(30));
    peer.kill();
    let killed = Instant::now();
    let mut failures = 0;
    for pending in pendings {
        match pending.wait() {
            Ok(response) => check_pattern(&response), // finished before the kill: must be intact
            Err(Error::PeerFailed { .. }) => failures += 1,
            Err(other) => panic!("expected PeerFailed, got {other}"),
        }
    }
    let elapsed = killed.elapsed();
    assert!(failures >= 8, "the slow requests must fail, {failures} failed");
    assert!(elapsed < Duration::from_secs(10), "failing took {elapsed:?}");
    // The node keeps working: a new peer is served.
    let other = Peer::start(peer_transport);
    served_after_a_kill(&node, other.addr, b"still here");
    // A response pull under way on the puller thread when the peer died (docs/fabric.md, "The
    // same-host path") gives its buffer back when it ends, a moment after its request failed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.stats().pool_bytes_in_use >= (1 << 20) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(node.stats().pool_bytes_in_use < (1 << 20), "buffers of failed requests returned to the pool: {:?}", node.stats());
}

#[test]
fn peer_killed_mid_transfer_over_shared_memory() {
    peer_killed_mid_transfer(Transport::Auto, "auto");
}

#[test]
fn peer_killed_mid_transfer_over_tcp() {
    peer_killed_mid_transfer(Transport::Tcp, "tcp");
}

#[test]
fn restarted_peer_is_reconnected_transparently() {
    let mut peer = Peer::start("auto");
    let node = client(Transport::Auto);
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"one").unwrap().wait().unwrap();
    peer.kill();
    // Wait until the failure is noticed, then bring a peer back on the same port.
    let port = peer.addr.port();
    let deadline = Instant::now() + Duration::from_secs(10);
    while endpoint.request(1, b"x").and_then(|p| p.wait_timeout(Duration::from_millis(500))).is_ok() {
        assert!(Instant::now() < deadline, "the dead peer still answers");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_fabric-peer"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("LISTENING"), "{line}");
    let response = endpoint.request(1, b"two").unwrap().wait().unwrap();
    assert_eq!(&response[..], b"two");
    let _ = child.kill();
    let _ = child.wait();
}

/// A peer killed while many small messages are in flight through shared memory: the client fails
/// them and still reaches a new peer. (A writer killed in the middle of a shared-memory FIFO write
/// is the hazard that keeps `same_host_eager` off; see docs/fabric.md.)
#[test]
fn peer_killed_during_a_storm_of_small_requests() {
    let mut peer = Peer::start("auto");
    let node = client(Transport::Auto);
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let endpoint = endpoint.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut failures = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let window: Vec<_> = (0..16).filter_map(|_| endpoint.request(1, &[7u8; 64]).ok()).collect();
                    for pending in window {
                        if pending.wait().is_err() {
                            failures += 1;
                        }
                    }
                    if failures > 0 {
                        break;
                    }
                }
                failures
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    peer.kill();
    let killed = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for sender in senders {
        sender.join().unwrap();
    }
    assert!(killed.elapsed() < Duration::from_secs(10), "failing took {:?}", killed.elapsed());
    let other = Peer::start("auto");
    served_after_a_kill(&node, other.addr, b"still here");
}
