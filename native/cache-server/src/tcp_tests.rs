//! Unit tests of `tcp.rs`.

use super::*;
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use crate::test_store::{bin_packet, bin_replies, bin_set, BinReply, SlowTierStore};

fn shared(store: Arc<SlowTierStore>) -> Arc<Shared> {
    Arc::new(Shared {
        store,
        session_config: Arc::new(SessionConfig::new("test")),
        counters: Arc::new(Counters::default()),
        conn_limit: 64,
        input_limit_bytes: (1 << 20) + (64 << 10),
        buffers: Arc::new(Budget::new(64 << 20)),
        output_cap_bytes: 16 << 20,
    })
}

fn server(store: Arc<SlowTierStore>, threads: usize) -> (SocketAddr, Arc<Shared>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = shared(store);
    start(listener, shared.clone(), threads).unwrap();
    (addr, shared)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

fn expect(stream: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
}

/// Nothing arrives for `wait`.
fn expect_silence(stream: &mut TcpStream, wait: Duration) {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
        other => panic!("expected nothing, got {other:?}"),
    }
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
}

fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn set(stream: &mut TcpStream, key: &str, value: &str) {
    stream.write_all(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).as_bytes()).unwrap();
    expect(stream, b"STORED\r\n");
}

#[test]
fn tokens_and_wake_dedup() {
    for (slot, generation) in [(0usize, 0u32), (7, 1), (u32::MAX as usize, u32::MAX)] {
        assert_eq!(token_parts(conn_token(slot, generation)), (slot, generation));
    }
    let wake_fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }).unwrap();
    let mailbox = Arc::new(WorkerMailbox::new(wake_fd));
    let conn = Arc::new(ConnWaker::new(mailbox.clone(), conn_token(3, 9)));
    let waker = Waker::from(conn.clone());
    waker.wake_by_ref();
    waker.wake_by_ref();
    assert_eq!(*mailbox.ready.lock().unwrap(), vec![conn_token(3, 9)], "queued once");
    let mut counter = 0u64;
    assert_eq!(unsafe { libc::read(wake_fd, &mut counter as *mut u64 as *mut libc::c_void, 8) }, 8, "signalled");
    mailbox.ready.lock().unwrap().clear();
    conn.taken();
    Waker::from(conn.clone()).wake(); // by value
    assert_eq!(mailbox.ready.lock().unwrap().len(), 1, "queued again once taken");
    mailbox.ready.lock().unwrap().clear();
    conn.taken();
    conn.close();
    waker.wake_by_ref();
    assert!(mailbox.ready.lock().unwrap().is_empty(), "a closed connection's waker does nothing");
    unsafe { libc::close(wake_fd) };
}

#[test]
fn a_waiting_command_runs_after_the_wake_and_in_order() {
    let store = SlowTierStore::new(false);
    let (addr, shared) = server(store.clone(), 1);
    let mut client = connect(addr);
    set(&mut client, "k", "v");
    set(&mut client, "n", "5");
    store.make_cold(b"k");
    client.write_all(b"set x 0 0 1\r\n1\r\nget k\r\nget x\r\n").unwrap();
    expect(&mut client, b"STORED\r\n"); // the command before the waiting one is answered
    expect_silence(&mut client, Duration::from_millis(150));
    client.write_all(b"incr n 1\r\n").unwrap(); // buffered behind the waiting get
    expect_silence(&mut client, Duration::from_millis(50));
    assert_eq!(store.pendings(), 1, "nothing retried before the wake (no busy loop)");
    assert_eq!(store.release(b"k"), 1);
    expect(&mut client, b"VALUE k 0 1\r\nv\r\nEND\r\nVALUE x 0 1\r\n1\r\nEND\r\n6\r\n");
    assert_eq!(shared.counters.storage_waits.load(Ordering::Relaxed), 1);
    // Arithmetic and append wait the same way.
    store.make_cold(b"n");
    client.write_all(b"incr n 10\r\nappend n 0 0 1\r\n0\r\nget n\r\n").unwrap();
    eventually("the incr to wait", || store.pendings() == 2);
    expect_silence(&mut client, Duration::from_millis(50));
    store.release(b"n");
    expect(&mut client, b"16\r\nSTORED\r\nVALUE n 0 3\r\n160\r\nEND\r\n");
}

#[test]
fn binary_requests_wait_too() {
    let store = SlowTierStore::new(false);
    let (addr, _) = server(store.clone(), 1);
    let mut client = connect(addr);
    client.write_all(&bin_set(b"k", b"vv", 1)).unwrap();
    let mut reply = [0u8; 24];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(bin_replies(&reply), vec![BinReply { opcode: 0x01, status: 0, opaque: 1, value: vec![] }]);
    store.make_cold(b"k");
    let mut batch = bin_packet(0x00, b"k", &[], &[], 2); // GET, waits
    batch.extend(bin_packet(0x0a, b"", &[], &[], 3)); // NOOP, behind it
    client.write_all(&batch).unwrap();
    expect_silence(&mut client, Duration::from_millis(100));
    store.release(b"k");
    let mut reply = vec![0u8; 24 + 4 + 2 + 24];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(
        bin_replies(&reply),
        vec![
            BinReply { opcode: 0x00, status: 0, opaque: 2, value: b"vv".to_vec() },
            BinReply { opcode: 0x0a, status: 0, opaque: 3, value: vec![] },
        ]
    );
}

#[test]
fn a_wake_before_the_worker_sees_waiting_is_not_lost() {
    // The store completes every read inside the call: the wake always comes first.
    let store = SlowTierStore::new(true);
    let (addr, _) = server(store.clone(), 2);
    let mut client = connect(addr);
    set(&mut client, "k", "v");
    for round in 0..200 {
        store.make_cold(b"k");
        if round % 2 == 0 {
            client.write_all(b"get k\r\n").unwrap();
            expect(&mut client, b"VALUE k 0 1\r\nv\r\nEND\r\n");
        } else {
            client.write_all(b"get nope\r\nget k\r\nget nope\r\n").unwrap();
            expect(&mut client, b"END\r\nVALUE k 0 1\r\nv\r\nEND\r\nEND\r\n");
        }
    }
    assert_eq!(store.pendings(), 200);
}

#[test]
fn a_stale_wake_after_the_slot_was_reused_does_nothing() {
    let store = SlowTierStore::new(false);
    let (addr, shared) = server(store.clone(), 1);
    let mut first = connect(addr);
    set(&mut first, "k", "v");
    set(&mut first, "k2", "w");
    store.make_cold(b"k");
    first.write_all(b"get k\r\n").unwrap();
    eventually("the get to wait", || store.pendings() == 1);
    // A reset (linger 0): the worker closes the connection at once, waiting or not.
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    let size = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    let linger_ptr = &linger as *const libc::linger as *const libc::c_void;
    // SAFETY: sets a socket option from a struct we own, of the size given.
    let status = unsafe { libc::setsockopt(first.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, linger_ptr, size) };
    assert_eq!(status, 0);
    drop(first);
    eventually("the connection to close", || shared.counters.curr_connections.load(Ordering::Relaxed) == 0);
    // The next connection takes the same slot (one worker, one free slot).
    let mut second = connect(addr);
    store.make_cold(b"k2");
    second.write_all(b"get k2\r\n").unwrap();
    eventually("the second get to wait", || store.pendings() == 2);
    assert_eq!(store.release(b"k"), 1, "the first connection's waker, held by the store");
    expect_silence(&mut second, Duration::from_millis(100));
    assert_eq!(store.pendings(), 2, "the stale wake did not run the second connection");
    store.release(b"k2");
    expect(&mut second, b"VALUE k2 0 1\r\nw\r\nEND\r\n");
    second.write_all(b"get k\r\n").unwrap();
    expect(&mut second, b"VALUE k 0 1\r\nv\r\nEND\r\n");
}

/// The race the generation guards against, step by step on a worker without its thread: a
/// waker that found its connection open queues the token late, after the connection closed
/// and a new one took its slot.
#[test]
fn a_late_token_for_a_reused_slot_leaves_the_new_connection_alone() {
    use std::os::fd::IntoRawFd;
    use std::os::unix::net::UnixStream;
    let store = SlowTierStore::new(false);
    let mut worker = Worker::new(shared(store.clone())).unwrap();
    let register = |worker: &mut Worker| {
        let (ours, theirs) = UnixStream::pair().unwrap();
        theirs.set_nonblocking(true).unwrap();
        worker.shared.counters.curr_connections.fetch_add(1, Ordering::Relaxed);
        worker.mailbox.incoming.lock().unwrap().push(theirs.into_raw_fd());
        worker.register_incoming();
        ours
    };
    let _first = register(&mut worker);
    let late = conn_token(0, worker.conns[0].as_ref().unwrap().generation);
    worker.close(0);
    let mut second = register(&mut worker);
    assert!(worker.conns[0].is_some(), "the second connection took slot 0");
    store.make_cold(b"k");
    second.write_all(b"get k\r\n").unwrap();
    assert!(worker.on_event(0, libc::EPOLLIN as u32) == Next::Keep);
    assert!(worker.conns[0].as_ref().unwrap().waiting);
    assert_eq!(store.pendings(), 1);
    worker.mailbox.ready.lock().unwrap().push(late);
    worker.run_ready();
    assert!(worker.conns[0].as_ref().unwrap().waiting, "a token of another generation does nothing");
    assert_eq!(store.pendings(), 1);
    // Its own token (from its waker) runs it.
    assert_eq!(store.release(b"k"), 1);
    worker.mailbox.clear_signal();
    worker.run_ready();
    assert!(!worker.conns[0].as_ref().unwrap().waiting);
    let mut reply = [0u8; 5];
    second.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"END\r\n");
    assert_eq!(store.pendings(), 1);
    worker.close(0);
}

#[test]
fn a_waiting_connection_buffers_what_fits_and_answers_a_half_closed_peer() {
    let store = SlowTierStore::new(false);
    let (addr, shared) = server(store.clone(), 1);
    let mut client = connect(addr);
    set(&mut client, "k", "v");
    store.make_cold(b"k");
    // Far more pipelined input than the 16 KiB read buffer holds, and than the input limit
    // (1 MiB + 64 KiB): the worker stops reading (it neither grows the buffer nor takes the
    // input for an oversized command).
    const GETS: usize = 150_000;
    let mut input = b"get k\r\n".to_vec();
    for _ in 0..GETS {
        input.extend_from_slice(b"get nope\r\n");
    }
    let mut writer = client.try_clone().unwrap();
    let sent = std::thread::spawn(move || {
        writer.write_all(&input).unwrap();
        writer.shutdown(Shutdown::Write).unwrap(); // and the peer closes its side
    });
    eventually("the get to wait", || store.pendings() == 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(shared.counters.curr_connections.load(Ordering::Relaxed), 1, "still open");
    assert_eq!(shared.counters.oversized_requests.load(Ordering::Relaxed), 0);
    store.release(b"k");
    let mut expected = b"VALUE k 0 1\r\nv\r\nEND\r\n".to_vec();
    for _ in 0..GETS {
        expected.extend_from_slice(b"END\r\n");
    }
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap(); // everything, then the server closes
    assert!(got == expected, "{} bytes of {}", got.len(), expected.len());
    sent.join().unwrap();
    assert_eq!(store.pendings(), 1);
    eventually("the connection to close", || shared.counters.curr_connections.load(Ordering::Relaxed) == 0);
}

#[test]
fn command_ends() {
    assert_eq!(first_command_end(b"get a\r\nget b\r\n"), Some(7));
    assert_eq!(first_command_end(b"get a"), None);
    let mut packet = vec![0x80u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
    packet.resize(24, 0);
    packet.extend_from_slice(b"kXYZ");
    assert_eq!(first_command_end(&packet), Some(25));
    assert_eq!(first_command_end(&packet[..10]), None);
    packet[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(first_command_end(&packet), Some(packet.len()));
}
