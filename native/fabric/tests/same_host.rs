//! Black-box tests of the same-host pull path (docs/fabric.md, "The same-host path"): a real
//! `fabric-peer` process on this host, large messages pulled with CMA in both directions, either
//! side killed while buffers are held or pulled, and a peer whose pulls are refused by the kernel
//! (its own user namespace) falling back to UCX.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/after_kill.rs"]
mod after_kill;

use after_kill::served_after_a_kill;
use fabric::{Config, Error, Node};

const PEER: &str = env!("CARGO_BIN_EXE_fabric-peer");

struct Peer {
    child: Child,
    addr: SocketAddr,
}

impl Peer {
    fn start() -> Peer {
        let mut child = Command::new(PEER).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting fabric-peer");
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

fn client() -> Node {
    Node::start(Config { request_timeout: Duration::from_secs(15), ..Config::default() }, None).unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn check_fetched(bytes: &[u8]) {
    for (i, &b) in bytes.iter().enumerate() {
        assert_eq!(b, (i as u8).wrapping_mul(31), "byte {i}");
    }
}

/// A new request to a new peer is answered: the node survived (through a renewal of its worker
/// if the kill wedged the receive path; see support/after_kill.rs).
fn serves_a_new_peer(node: &Node) {
    let other = Peer::start();
    served_after_a_kill(node, other.addr, &pattern(1 << 20));
}

#[test]
fn large_messages_are_pulled_both_ways_and_small_ones_are_not() {
    let peer = Peer::start();
    let node = client();
    let endpoint = node.endpoint(peer.addr).unwrap();
    // The hello and its reply travel right after wire-up; the first requests may still go by UCX.
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    let min = node.config().same_host_pull_min_bytes;
    let small = endpoint.request(2, &((min - 1) as u64).to_le_bytes()).unwrap().wait().unwrap();
    check_fetched(&small);
    drop(small);
    assert_eq!(node.stats().same_host_bytes_pulled, 0, "messages below the threshold go through UCX");
    for len in [min, 100_000, 1 << 20, 9 << 20] {
        let payload = pattern(len);
        let response = endpoint.request(1, &payload).unwrap().wait().unwrap();
        assert!(response[..] == payload[..], "echo of {len} bytes");
        let fetched = endpoint.request(2, &(len as u64).to_le_bytes()).unwrap().wait().unwrap();
        assert_eq!(fetched.len(), len);
        check_fetched(&fetched);
    }
    // Many in flight, completing in any order.
    let pendings: Vec<_> = (0..64u64).map(|i| (i, endpoint.request(2, &(min as u64 + i * 7919).to_le_bytes()).unwrap())).collect();
    for (i, pending) in pendings {
        let response = pending.wait().unwrap();
        assert_eq!(response.len() as u64, min as u64 + i * 7919);
        check_fetched(&response);
    }
    let stats = node.stats();
    assert!(stats.same_host_bytes_pulled >= 2 * (9 << 20), "responses were pulled by this node: {stats:?}");
    // The responses of 1 MiB and more (two of 1 MiB, two of 9 MiB) were copied outside the worker
    // lock, on the puller thread; the smaller ones in the receive path.
    assert_eq!(stats.same_host_pulls_deferred, 4, "{stats:?}");
    assert_eq!((stats.same_host_pulls_failed, stats.same_host_pull_refused, stats.protocol_errors), (0, 0, 0), "{stats:?}");
    // Without RDMA, a same-host connection has no TCP lane, so progress never polls UCX's TCP
    // interface (`ucx.rs`, MAX_RNDV_LANES).
    assert_eq!(stats.same_host_connections_with_tcp, 0, "{stats:?}");
    // Our requests were pulled by the peer and released: nothing of ours is held any more.
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.stats().pool_bytes_in_use != 0 {
        assert!(Instant::now() < deadline, "buffers held for pulls were never released: {:?}", node.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_node_with_the_pull_path_off_moves_everything_through_ucx() {
    let peer = Peer::start();
    let node = Node::start(Config { same_host_pull: false, ..Config::default() }, None).unwrap();
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    for _ in 0..3 {
        let payload = pattern(1 << 20);
        assert!(endpoint.request(1, &payload).unwrap().wait().unwrap()[..] == payload[..]);
    }
    let stats = node.stats();
    assert_eq!(stats.same_host_bytes_pulled, 0, "{stats:?}");
    assert_eq!(stats.same_host_pull_refused, 1, "this node refused the peer's hello: {stats:?}");
}

/// The receiver (the peer) dies while this node holds the buffers of its large requests for the
/// peer's pulls (the peer is stopped first, so it pulls nothing): the requests fail with
/// `PeerFailed` in bounded time, the held buffers go back to the pool, and a new peer is served.
#[test]
fn receiver_killed_while_the_sender_holds_buffers() {
    let mut peer = Peer::start();
    let node = client();
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    endpoint.request(1, &pattern(1 << 20)).unwrap().wait().unwrap();
    assert!(node.stats().same_host_bytes_pulled >= 1 << 20, "the path is on: {:?}", node.stats());
    // SAFETY: kill(2) on our own child's pid, which has not been waited for (it is still ours).
    assert_eq!(unsafe { libc::kill(peer.child.id() as libc::pid_t, libc::SIGSTOP) }, 0);
    let payload = pattern(16 << 20);
    let pendings: Vec<_> = (0..8).map(|_| endpoint.request(1, &payload).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    assert!(node.stats().pool_bytes_in_use >= 8 * (16 << 20), "large requests held: {:?}", node.stats());
    peer.kill();
    let killed = Instant::now();
    for pending in pendings {
        match pending.wait() {
            Err(Error::PeerFailed { .. }) => {}
            other => panic!("expected PeerFailed, got {:?}", other.map(|r| r.len())),
        }
    }
    assert!(killed.elapsed() < Duration::from_secs(10), "failing took {:?}", killed.elapsed());
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.stats().pool_bytes_in_use != 0 {
        assert!(Instant::now() < deadline, "held buffers not freed with the failed connection: {:?}", node.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    serves_a_new_peer(&node);
}

/// The sender (the peer) dies while this node pulls its 32 MiB responses: every request fails with
/// `PeerFailed` or completes intact, and a new peer is served.
#[test]
fn sender_killed_mid_pull() {
    let mut peer = Peer::start();
    let node = client();
    let endpoint = node.endpoint(peer.addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    check_fetched(&endpoint.request(2, &(1u64 << 20).to_le_bytes()).unwrap().wait().unwrap());
    assert!(node.stats().same_host_bytes_pulled >= 1 << 20, "the path is on: {:?}", node.stats());
    let pendings: Vec<_> = (0..16).map(|_| endpoint.request(2, &(32u64 << 20).to_le_bytes()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(40));
    peer.kill();
    let killed = Instant::now();
    let mut failed = 0;
    for pending in pendings {
        match pending.wait() {
            Ok(response) => check_fetched(&response),
            Err(Error::PeerFailed { .. }) => failed += 1,
            Err(other) => panic!("expected PeerFailed, got {other}"),
        }
    }
    assert!(failed > 0, "the kill came after every response: make the test's transfers larger");
    assert!(killed.elapsed() < Duration::from_secs(10), "failing took {:?}", killed.elapsed());
    serves_a_new_peer(&node);
}

/// A client in its own user namespace (`unshare -U`) may not read a process outside it: its
/// `process_vm_readv` gets EPERM (no CAP_SYS_PTRACE over the outer namespace). It says so in one
/// log line, refuses, and the server's large responses reach it through UCX, intact. The other
/// direction (the server, outside, reading the client) is allowed, so its requests are pulled.
#[test]
fn a_peer_refused_by_the_kernel_falls_back_to_ucx_and_says_so() {
    let server = Peer::start();
    let mut client = Command::new("unshare")
        .args(["-U", PEER, "--client", &server.addr.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) must be installed");
    let mut stdin = client.stdin.take().unwrap();
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    assert!(ready.starts_with("READY"), "client in a user namespace did not start: {ready:?}");
    let mut ask = |command: &str| {
        writeln!(stdin, "{command}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    };
    for command in ["ECHO 8", "FETCH 1048576", "ECHO 1048576", "FETCH 9437184", "ECHO 65536"] {
        let answer = ask(command);
        assert!(answer.starts_with("OK"), "{command}: {answer}");
    }
    let stats = ask("STATS");
    assert!(stats.contains("same_host_pull_refused=1"), "{stats}");
    assert!(stats.contains("same_host_bytes_pulled=0"), "the refused client pulled nothing: {stats}");
    drop(ask);
    drop(stdin);
    let _ = client.wait();
    let mut stderr = String::new();
    client.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let refusals: Vec<&str> = stderr.lines().filter(|l| l.contains("CMA refused")).collect();
    assert_eq!(refusals.len(), 1, "one line says which path is used: {stderr}");
    assert!(refusals[0].contains("EPERM") && refusals[0].contains("UCX rendezvous"), "{}", refusals[0]);
}
