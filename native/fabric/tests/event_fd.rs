//! Threads that wait sleep on the worker's event fd in the progress thread's place
//! (docs/fabric.md, "Who waits on the event fd"). A test binary of its own, with one test, so that
//! no other test's thread holds the fd meanwhile or moves the counter it reads (the counter and
//! the fd are per runtime, shared by the process's nodes of the same transport settings).
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Config, HandlerMode, Node};

/// `fabric-peer`'s op 3: sleep the given milliseconds, then answer "ok".
const OP_SLEEP: u16 = 3;

#[test]
fn waiters_and_pullers_sleep_on_the_event_fd() {
    // A server in another process (a puller of its own would hold this process's fd), whose
    // answers come well after any spin.
    let mut peer = Command::new(env!("CARGO_BIN_EXE_fabric-peer")).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(peer.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let peer_addr = line.trim().strip_prefix("LISTENING ").unwrap_or_else(|| panic!("peer said {line:?}")).parse().unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(peer_addr).unwrap();
    let sleep_ms = 20u64.to_le_bytes();
    assert_eq!(&endpoint.request(OP_SLEEP, &sleep_ms).unwrap().wait().unwrap()[..], b"ok");

    // 1. A caller waiting past its spin sleeps on the fd and the response wakes it; a second
    //    waiter meanwhile (the fd is one thread's at a time) is served too.
    let before = client.stats().event_fd_sleeps;
    let other = {
        let endpoint = endpoint.clone();
        std::thread::spawn(move || endpoint.request(OP_SLEEP, &sleep_ms).unwrap().wait().unwrap().to_vec())
    };
    assert_eq!(&endpoint.request(OP_SLEEP, &sleep_ms).unwrap().wait().unwrap()[..], b"ok");
    assert_eq!(other.join().unwrap(), b"ok");
    assert!(client.stats().event_fd_sleeps > before, "a waiter slept on the event fd");

    // 2. `Node::await_progress`: a callback request's waiter sleeps on the fd until it is done.
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    endpoint
        .request_with(OP_SLEEP, &sleep_ms, move |result| {
            assert!(result.is_ok());
            flag.store(true, Ordering::SeqCst);
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the callback never ran");
        // None would mean another thread holds the fd: none does in this process.
        let got = client.await_progress(Duration::ZERO, Duration::from_secs(1), || done.load(Ordering::SeqCst));
        assert_ne!(got, None, "nobody else sleeps on the fd here");
    }

    // 3. A pulling handler thread waits for requests on the fd; an idle pull ends at its timeout.
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let puller_node = Arc::new(Node::start(Config { listen, handler_mode: HandlerMode::Pull, ..Config::default() }, None).unwrap());
    let start = Instant::now();
    assert!(puller_node.next_request(Duration::from_millis(30)).is_none());
    assert!(start.elapsed() >= Duration::from_millis(30), "an idle pull ends at its timeout");
    let puller = echo_once_asleep_on_the_fd(&puller_node, true);
    let to_puller = client.endpoint(puller_node.local_addr().unwrap()).unwrap();
    assert_eq!(&to_puller.request(2, b"pulled").unwrap().wait().unwrap()[..], b"pulled");
    puller.join().unwrap();

    // 4. A pull without spin sleeps on the fd at once: an idle one costs this thread less CPU than
    //    one that spins first (~100 us, `WAITER_SPIN`), and a request still reaches it.
    let idle_pull_cpu = |spin: bool| {
        let pulls = 40u32;
        let before = thread_cpu();
        for _ in 0..pulls {
            assert!(pull(&puller_node, Duration::from_millis(2), spin).is_none());
        }
        (thread_cpu() - before) / pulls
    };
    let (spun, unspun) = (idle_pull_cpu(true), idle_pull_cpu(false));
    assert!(unspun + Duration::from_micros(40) < spun, "CPU per idle pull: {unspun:?} without spin, {spun:?} with");
    let puller = echo_once_asleep_on_the_fd(&puller_node, false);
    assert_eq!(&to_puller.request(2, b"unspun").unwrap().wait().unwrap()[..], b"unspun");
    puller.join().unwrap();
    client.close();
    puller_node.close();
    let _ = peer.kill();
    let _ = peer.wait();
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A thread that pulls one request (spinning first or not) and echoes it; returned once that
/// thread sleeps on the event fd.
fn echo_once_asleep_on_the_fd(node: &Arc<Node>, spin: bool) -> std::thread::JoinHandle<()> {
    let before = node.stats().event_fd_sleeps;
    let puller = {
        let node = node.clone();
        std::thread::spawn(move || {
            let request = pull(&node, Duration::from_secs(10), spin).expect("a request");
            let reply = request.payload().to_vec();
            request.respond(&reply);
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.stats().event_fd_sleeps == before {
        assert!(Instant::now() < deadline, "the puller (spin {spin}) never slept on the event fd");
        std::thread::sleep(Duration::from_millis(1));
    }
    puller
}

/// `next_request`, or with `spin` false `next_request_without_spin`.
fn pull(node: &Node, timeout: Duration, spin: bool) -> Option<fabric::Request> {
    if spin {
        node.next_request(timeout)
    } else {
        node.next_request_without_spin(timeout)
    }
}
