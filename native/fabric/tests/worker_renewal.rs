//! Black-box test of the recovery from a wedged receive path (UCX 1.13's shared-memory FIFO
//! hazard, docs/fabric.md "Failures"): renewing the process's worker fails what was in flight,
//! then serves new requests in both directions, with real peer processes over shared memory. The
//! hazard itself is too rare to provoke on demand (`examples/shm_fifo_wedge.rs` measures it), so
//! this calls the same recovery through `Node::renew_worker`. A test binary of its own: renewing
//! fails the connections of every node of the process.
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Config, Error, HandlerMode, Node, Request};

struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Process {
    fn start(args: &[&str]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fabric-peer"));
        // UCX opens its sockets without close-on-exec: a child would inherit this process's
        // listening socket and keep the port bound after our listener is destroyed, so that the
        // renewed worker could not listen on it again ("Device is busy"). Children get none of
        // our descriptors beyond stdio.
        // SAFETY: the closure only calls close_range(2), which is async-signal-safe, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
                Ok(())
            });
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting fabric-peer");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Process { child, stdin, stdout }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.line()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Renewing fails the connections of every node of the process: the tests take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn echo(request: Request) {
    let payload = request.payload().to_vec();
    request.respond(&payload);
}

#[test]
fn a_renewed_worker_fails_what_was_in_flight_then_serves_both_ways_on_the_same_port() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let config = Config {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        handler_mode: HandlerMode::Staged { threads: 2 },
        request_timeout: Duration::from_secs(15),
        ..Config::default()
    };
    let node = Node::start(config, Some(Arc::new(echo))).unwrap();
    let our_addr = node.local_addr().unwrap();

    // A server process we call, and a client process that calls us.
    let mut server = Process::start(&[]);
    let server_addr: SocketAddr = server.line().strip_prefix("LISTENING ").expect("LISTENING").parse().unwrap();
    let endpoint = node.endpoint(server_addr).unwrap();
    assert_eq!(&endpoint.request(1, b"before").unwrap().wait().unwrap()[..], b"before");
    let mut client = Process::start(&["--client", &our_addr.to_string(), "--request-timeout-ms", "5000"]);
    assert_eq!(client.line(), "READY");
    assert!(client.ask("ECHO 100").starts_with("OK"), "the client process reaches us before the renewal");

    // In flight at the renewal: a slow request (3 s in the server's handler).
    let slow = endpoint.request(3, &3000u64.to_le_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let renewed_at = Instant::now();
    node.renew_worker().unwrap();
    match slow.wait() {
        Err(Error::PeerFailed { reason, .. }) => assert!(reason.contains("renewed"), "the error says why: {reason}"),
        other => panic!("a request in flight must fail with PeerFailed at the renewal, got {other:?}"),
    }
    assert!(renewed_at.elapsed() < Duration::from_secs(2), "failing took {:?}", renewed_at.elapsed());
    assert_eq!(node.worker_renewals(), 1);
    assert_eq!(node.stats().connections_open, 0, "every connection of the old worker is gone");

    // A new request opens a new connection on the new worker.
    assert_eq!(&endpoint.request(1, b"after").unwrap().wait().unwrap()[..], b"after");
    // The client process's connection failed with our old worker; its next requests reconnect to
    // the same port, where the new worker listens. (A request posted before it noticed the
    // failure fails with PeerFailed; bounded retries.)
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = client.ask("ECHO 100");
        if answer.starts_with("OK") {
            break;
        }
        assert!(answer.contains("PeerFailed"), "only the failed connection may fail a request: {answer}");
        assert!(Instant::now() < deadline, "the client process never got through again: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(client.ask("ECHO 3000000").starts_with("OK"), "a large request and response (3 chunks) over the new worker");
    assert_eq!(&endpoint.request(1, b"again").unwrap().wait().unwrap()[..], b"again");
    assert!(node.stats().pool_bytes_in_use < (1 << 20), "buffers of failed requests went back to the pool");
    node.close();
}

#[test]
fn renewing_from_an_inline_handler_is_an_error_not_a_deadlock() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // An Inline handler runs on the thread driving progress, inside a round of the worker it
    // would replace.
    let outcome = Arc::new(std::sync::Mutex::new(None));
    let node_slot: Arc<std::sync::OnceLock<Node>> = Arc::new(std::sync::OnceLock::new());
    let handler = {
        let (outcome, node_slot) = (outcome.clone(), node_slot.clone());
        move |request: Request| {
            let node = node_slot.get().expect("node set before the first request");
            *outcome.lock().unwrap() = Some(node.renew_worker().map_err(|e| e.to_string()));
            request.respond(b"done");
        }
    };
    let server = Node::start(
        Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() },
        Some(Arc::new(handler)),
    )
    .unwrap();
    node_slot.set(server.clone()).ok().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let response = client.endpoint(server.local_addr().unwrap()).unwrap().request(1, b"x").unwrap().wait().unwrap();
    assert_eq!(&response[..], b"done");
    let outcome = outcome.lock().unwrap().take().expect("the handler ran");
    assert!(outcome.as_ref().is_err_and(|e| e.contains("progress")), "{outcome:?}");
    assert_eq!(server.worker_renewals(), 0);
    client.close();
    server.close();
}
