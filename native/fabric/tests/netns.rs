//! Peers on separate hosts: a `fabric-peer` server and a `fabric-peer --client` on two "hosts"
//! (network, IPC, PID and mount namespaces joined by a veth pair; see support/hosts.rs), so the
//! cross-host path is what runs: TCP over the link, no shared memory, no CMA. Messaging, large
//! chunked transfers, a server killed mid-transfer, and the link taken down and brought back.
//! Needs root (CI runs as root): fails, never skips, without it.
#[path = "support/hosts.rs"]
mod hosts;

use std::time::{Duration, Instant};

use hosts::{namespace_of, HostProcess, Hosts};

const PEER: &str = env!("CARGO_BIN_EXE_fabric-peer");
const ANSWER: Duration = Duration::from_secs(30);

/// Starts a server on host 0 (on `port`, 0 for any) and returns it with its address.
fn server(hosts: &Hosts, port: u16) -> (HostProcess, String) {
    let listen = format!("{}:{port}", hosts.address(0));
    let mut server = hosts.spawn(0, PEER, &["--listen", &listen, "--devices", hosts.device(0)]);
    let line = server.line(ANSWER);
    let addr = line.strip_prefix("LISTENING ").unwrap_or_else(|| panic!("server said {line:?}")).to_string();
    (server, addr)
}

/// Starts a client on host 1 that sends to `addr`.
fn client(hosts: &Hosts, addr: &str, request_timeout_ms: u64) -> HostProcess {
    let timeout = request_timeout_ms.to_string();
    let mut client = hosts.spawn(1, PEER, &["--client", addr, "--devices", hosts.device(1), "--request-timeout-ms", &timeout]);
    assert_eq!(client.line(ANSWER), "READY");
    client
}

fn assert_ok(answer: &str, what: &str) {
    assert!(answer.starts_with("OK "), "{what}: {answer}");
}

/// `key=value` of a `DONE ...` answer.
fn field(answer: &str, key: &str) -> u64 {
    let prefix = format!("{key}=");
    answer
        .split_whitespace()
        .find_map(|word| word.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {answer:?}"))
}

#[test]
fn messaging_and_large_transfers_cross_the_link() {
    let hosts = Hosts::pair();
    let (server, addr) = server(&hosts, 0);
    let mut client = client(&hosts, &addr, 20_000);

    // Really two hosts: no namespace in common with each other or with this test, and each sees
    // its own /dev/shm.
    for kind in ["ipc", "pid", "net", "mnt"] {
        let (s, c) = (server.namespace(kind), client.namespace(kind));
        assert_ne!(s, c, "server and client share their {kind} namespace");
        assert_ne!(s, namespace_of("self", kind), "the server runs in the test's {kind} namespace");
    }
    assert_ne!(server.dev_shm_device(), client.dev_shm_device(), "server and client see the same /dev/shm");

    let (tx_before, _) = hosts.link_bytes(0);
    for command in ["ECHO 1", "ECHO 8", "ECHO 4096", "ECHO 100000", "FETCH 1048576", "ECHO 5000000", "FETCH 9437184"] {
        assert_ok(&client.ask(command, ANSWER), command);
    }
    // Many in flight at once, completing in any order.
    assert_eq!(client.ask("START 32 FETCH 300000", ANSWER), "STARTED 32");
    let done = client.ask("WAIT", ANSWER);
    assert_eq!(field(&done, "ok"), 32, "{done}");
    // The bytes went over the link: the server's end sent at least the responses' payloads
    // (1 + 5 + 9 MiB and 32 x 300 kB), so nothing took a shared-memory or CMA shortcut.
    let (tx_after, _) = hosts.link_bytes(0);
    let payload_bytes = 1_048_576 + 5_000_000 + 9_437_184 + 32 * 300_000;
    assert!(tx_after - tx_before >= payload_bytes, "the server's link sent {} bytes, the responses hold {payload_bytes}", tx_after - tx_before);
    assert_eq!(client.ask("NONSENSE", ANSWER), "BAD unknown command: NONSENSE");
    assert_ok(&client.ask("ECHO 8", ANSWER), "after a bad command");
}

#[test]
fn a_server_killed_mid_transfer_fails_its_requests_and_a_restarted_one_is_served() {
    let hosts = Hosts::pair();
    let (mut server, addr) = server(&hosts, 0);
    let mut client = client(&hosts, &addr, 20_000);
    assert_ok(&client.ask("ECHO 8", ANSWER), "warm up");
    assert_eq!(client.ask("START 8 FETCH 33554432", ANSWER), "STARTED 8");
    assert_eq!(client.ask("START 8 SLEEP 10000", ANSWER), "STARTED 8");
    std::thread::sleep(Duration::from_millis(50));
    server.kill();
    let killed = Instant::now();
    let done = client.ask("WAIT", ANSWER);
    let elapsed = killed.elapsed();
    eprintln!("server killed: {done} ({elapsed:?} after the kill)");
    // The sleeping requests cannot have been answered; the large ones may have finished (intact,
    // or the client would report them as Corrupt under "other").
    assert!(field(&done, "PeerFailed") >= 8, "{done}");
    assert_eq!(field(&done, "other"), 0, "{done}");
    assert_eq!(field(&done, "Timeout"), 0, "failures must be detected, not waited out: {done}");
    assert!(elapsed < Duration::from_secs(10), "failing the requests took {elapsed:?}");
    // A server restarted on the same address is reconnected to transparently.
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let (_restarted, _) = server_on(&hosts, port);
    let asked = Instant::now();
    assert_ok(&client.ask("ECHO 8", ANSWER), "the restarted server");
    assert_ok(&client.ask("FETCH 4194304", ANSWER), "a large transfer from the restarted server");
    assert!(asked.elapsed() < Duration::from_secs(10), "re-connecting took {:?}", asked.elapsed());
    let stats = client.ask("STATS", ANSWER);
    assert!(field(&stats, "pool_bytes_in_use") < 1 << 20, "buffers of failed requests must return to the pool: {stats}");
}

/// A server on host 0 on a given port; the port of a killed server may take a moment to free.
fn server_on(hosts: &Hosts, port: u16) -> (HostProcess, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server(hosts, port)));
        match started {
            Ok(server) => return server,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => std::panic::resume_unwind(e),
        }
    }
}

#[test]
fn a_link_taken_down_fails_requests_in_bounded_time_and_works_again_when_back() {
    let hosts = Hosts::pair();
    let (_server, addr) = server(&hosts, 0);
    let request_timeout_ms = 3000;
    let mut client = client(&hosts, &addr, request_timeout_ms);
    assert_ok(&client.ask("ECHO 8", ANSWER), "before");
    assert_ok(&client.ask("FETCH 4194304", ANSWER), "before, large");

    hosts.set_link(1, false);
    assert_eq!(client.ask("START 4 FETCH 4194304", ANSWER), "STARTED 4");
    let asked = Instant::now();
    let single = client.ask("ECHO 8", ANSWER);
    assert!(single.starts_with("ERR Timeout ") || single.starts_with("ERR PeerFailed "), "with the link down: {single}");
    let done = client.ask("WAIT", ANSWER);
    eprintln!("link down: {single}; {done} ({:?} after the first request)", asked.elapsed());
    assert_eq!(field(&done, "ok") + field(&done, "PeerFailed") + field(&done, "Timeout"), 4, "{done}");
    assert!(field(&done, "ok") < 4, "transfers cannot all complete over a link that is down: {done}");
    let bound = Duration::from_millis(request_timeout_ms) * 2;
    assert!(asked.elapsed() < bound, "failing took {:?} (request timeout {request_timeout_ms} ms)", asked.elapsed());

    hosts.set_link(1, true);
    // Back up: the same client node is served again (over the old connection once TCP retransmits,
    // or a new one if UCX gave the old one up), within a bounded time.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answer = String::new();
    while Instant::now() < deadline {
        answer = client.ask("ECHO 8", ANSWER);
        if answer.starts_with("OK ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_ok(&answer, "after the link came back");
    eprintln!("link back up: {answer}");
    assert_ok(&client.ask("FETCH 4194304", ANSWER), "a large transfer after the link came back");
}

/// The namespaces go away with the guard, also when the test using them panics, and namespaces
/// left by a test process that no longer exists are removed by the next `Hosts::pair`.
#[test]
fn namespaces_are_removed_after_a_panic_and_stale_ones_are_swept() {
    // The names this test's guard made (the other tests of this binary run in parallel and make
    // namespaces with the same process prefix).
    let names: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let existing = |names: &[String]| -> Vec<String> {
        let list = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| names.iter().any(|ours| ours == name))
            .map(str::to_string)
            .collect()
    };
    let panicked = std::panic::catch_unwind(|| {
        let hosts = Hosts::pair();
        *names.lock().unwrap() = vec![hosts.namespace(0).to_string(), hosts.namespace(1).to_string()];
        assert_eq!(existing(&names.lock().unwrap()).len(), 2, "two namespaces while the guard lives");
        let _server = server(&hosts, 0);
        panic!("a failing test");
    });
    assert!(panicked.is_err());
    let names = names.into_inner().unwrap_or_else(|e| e.into_inner());
    assert_eq!(names.len(), 2, "the guard was made");
    assert!(existing(&names).is_empty(), "left behind after a panic: {:?}", existing(&names));

    // A namespace of the same prefix whose creator is gone (pids never exceed 2^22 on Linux).
    let stale = "slipstream-t4194305-0a";
    let status = std::process::Command::new("ip").args(["netns", "add", stale]).status().unwrap();
    assert!(status.success());
    let _hosts = Hosts::pair();
    let list = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&list.stdout).contains(stale), "the stale namespace {stale} was not removed");
}
