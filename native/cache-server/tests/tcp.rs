//! Black-box tests of the TCP side: a real server process, raw sockets.
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn ascii_set_get_delete() {
    let server = Server::start(&["--no-fabric"]);
    let mut c = server.connect();
    assert_eq!(c.set("greeting", b"hello"), "STORED");
    assert_eq!(c.get("greeting").as_deref(), Some(&b"hello"[..]));
    assert_eq!(c.command("delete greeting"), "DELETED");
    assert_eq!(c.get("greeting"), None);
    assert_eq!(c.command("delete greeting"), "NOT_FOUND");
    assert!(c.command("version").starts_with("VERSION 1.6.18-slipstream-"));
    // Large values, and several commands in one write (pipelined).
    let big = pattern(500_000, 7);
    assert_eq!(c.set("big", &big), "STORED");
    assert_eq!(c.get("big").unwrap(), big);
    c.send(b"set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nget a b\r\n");
    assert_eq!(c.line(), "STORED");
    assert_eq!(c.line(), "STORED");
    assert_eq!(c.line(), "VALUE a 0 1");
    assert_eq!(c.line(), "1");
    assert_eq!(c.line(), "VALUE b 0 1");
    assert_eq!(c.line(), "2");
    assert_eq!(c.line(), "END");
    // A command split across writes.
    c.send(b"se");
    std::thread::sleep(Duration::from_millis(20));
    c.send(b"t split 0 0 5\r\nab");
    std::thread::sleep(Duration::from_millis(20));
    c.send(b"cde\r\n");
    assert_eq!(c.line(), "STORED");
    assert_eq!(c.get("split").as_deref(), Some(&b"abcde"[..]));
}

#[test]
fn server_stats_are_reported() {
    let server = Server::start(&["-t", "2", "-c", "77"]);
    let mut c = server.connect();
    let stats = c.stats();
    let get = |name: &str| {
        stats.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no stat {name}"))
    };
    assert_eq!(get("pid"), server.pid().to_string());
    assert_eq!(get("threads"), "2");
    assert_eq!(get("max_connections"), "77");
    assert_eq!(get("pointer_size"), "64");
    assert_eq!(get("curr_connections"), "1");
    assert!(get("version").starts_with("1.6.18-slipstream-"));
    assert_eq!(get("fabric_listen"), server.fabric.unwrap().to_string());
    for name in ["uptime", "time", "total_connections", "rejected_connections", "fabric_connections", "fabric_requests"] {
        get(name).parse::<u64>().unwrap_or_else(|_| panic!("{name} is not a number"));
    }
}

#[test]
fn connection_limit_answers_the_next_one_with_an_error() {
    let server = Server::start(&["-c", "5", "--no-fabric"]);
    let mut open: Vec<Text> = (0..5).map(|_| server.connect()).collect();
    for c in &mut open {
        assert!(c.command("version").starts_with("VERSION"));
    }
    let mut sixth = server.connect();
    assert_eq!(sixth.line(), "ERROR Too many open connections");
    assert!(sixth.closed_within(Duration::from_secs(5)));
    // Closing one makes room again (the worker counts it closed once it sees the EOF).
    drop(open.pop());
    assert!(eventually(Duration::from_secs(5), || {
        let mut c = server.connect();
        c.send(b"version\r\n");
        let mut reply = String::new();
        let _ = c.reader.read_line_lossy(&mut reply);
        reply.starts_with("VERSION")
    }));
    let mut last = open.pop().unwrap();
    let rejected: u64 = last.stats().iter().find(|(k, _)| k == "rejected_connections").unwrap().1.parse().unwrap();
    assert!(rejected >= 1);
}

trait ReadLineLossy {
    fn read_line_lossy(&mut self, out: &mut String) -> std::io::Result<usize>;
}

impl<R: std::io::BufRead> ReadLineLossy for R {
    fn read_line_lossy(&mut self, out: &mut String) -> std::io::Result<usize> {
        let mut bytes = Vec::new();
        let n = self.read_until(b'\n', &mut bytes)?;
        out.push_str(&String::from_utf8_lossy(&bytes));
        Ok(n)
    }
}

/// The server keeps serving after each kind of bad input; `works` checks a fresh connection.
fn works(server: &Server) {
    let mut c = server.connect();
    assert_eq!(c.set("still", b"here"), "STORED");
    assert_eq!(c.get("still").as_deref(), Some(&b"here"[..]));
}

#[test]
fn garbage_and_overlong_lines() {
    let server = Server::start(&["--no-fabric", "--max-line-bytes", "1024"]);
    // Garbage: an error reply; the connection may stay usable or close, the server serves on.
    let mut c = server.connect();
    c.send(b"\x01\x02\xff garbage !!\r\n");
    let reply = c.line();
    assert!(reply.contains("ERROR"), "garbage got {reply:?}");
    works(&server);
    // A line far longer than --max-line-bytes, without a newline: error and/or close.
    let mut c = server.connect();
    let _ = c.stream.write_all(&vec![b'a'; 64 << 10]);
    assert!(c.closed_within(Duration::from_secs(5)), "an overlong line must close the connection");
    works(&server);
    // Many short garbage lines, pipelined.
    let mut c = server.connect();
    c.send(&b"bogus\r\n".repeat(1000));
    for _ in 0..1000 {
        assert!(c.line().contains("ERROR"));
    }
    works(&server);
}

#[test]
fn bad_binary_input() {
    let server = Server::start(&["--no-fabric"]);
    // A valid packet, then one with a bad magic: the stream is desynchronised, the server closes.
    let mut s = TcpStream::connect(server.tcp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&packet(opcode::NOOP, b"", &[], &[], 1, 0)).unwrap();
    assert_eq!(read_reply(&mut s).status(), status::NO_ERROR);
    let mut bad = packet(opcode::NOOP, b"", &[], &[], 2, 0);
    bad[0] = 0x42;
    s.write_all(&bad).unwrap();
    let mut rest = Vec::new();
    let closed = match s.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "a bad magic must close the connection");
    works(&server);
    // A header announcing a 4 GB body: refused or closed, never allocated.
    let rss_before = server.rss_bytes();
    let mut s = TcpStream::connect(server.tcp).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut huge = set_packet(b"k", b"", 0, 3);
    huge[8..12].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
    s.write_all(&huge).unwrap();
    let _ = s.write_all(&[0u8; 4096]);
    let mut buf = [0u8; 64];
    let _ = s.read(&mut buf);
    works(&server);
    assert!(server.rss_bytes() < rss_before + (64 << 20), "a huge body length must not be allocated");
    // Truncated packets from a client that then leaves.
    for cut in [1usize, 10, 23, 30] {
        let mut s = TcpStream::connect(server.tcp).unwrap();
        s.write_all(&set_packet(b"key", b"value", 0, 4)[..cut]).unwrap();
    }
    works(&server);
}

#[test]
fn oversized_value_is_refused_and_the_connection_goes_on() {
    let server = Server::start(&["--no-fabric", "-I", "1m"]);
    let mut c = server.connect();
    let too_big = vec![b'x'; 2 << 20];
    assert_eq!(c.set("huge", &too_big), "SERVER_ERROR object too large for cache");
    assert_eq!(c.set("small", b"ok"), "STORED");
    assert_eq!(c.get("small").as_deref(), Some(&b"ok"[..]));
    assert_eq!(c.get("huge"), None);
    works(&server);
}

#[test]
fn clients_killed_mid_request_leave_the_server_serving() {
    let server = Server::start(&["--no-fabric"]);
    for _ in 0..20 {
        let mut s = TcpStream::connect(server.tcp).unwrap();
        s.write_all(b"set half 0 0 100000\r\n").unwrap();
        s.write_all(&[b'v'; 50_000]).unwrap();
        // Dropped here: half a value, then the connection is gone.
    }
    for _ in 0..5 {
        let mut s = TcpStream::connect(server.tcp).unwrap();
        s.write_all(&set_packet(b"half", &[1u8; 100_000], 0, 0)[..60_000]).unwrap();
        // A reset instead of a clean close: SO_LINGER with a zero timeout.
        let linger = libc::linger { l_onoff: 1, l_linger: 0 };
        use std::os::fd::AsRawFd;
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &linger as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
    }
    // A client that asked for a large value and left without reading it.
    let mut c = server.connect();
    assert_eq!(c.set("large", &pattern(800_000, 1)), "STORED");
    for _ in 0..50 {
        c.send(b"get large\r\n");
    }
    drop(c);
    works(&server);
    assert!(eventually(Duration::from_secs(5), || server.stat("curr_connections").as_deref() == Some("1")));
    let mut c = server.connect();
    assert!(c.get("half").is_none());
}

#[test]
fn output_backpressure_bounds_server_memory() {
    let server = Server::start(&["--no-fabric", "-m", "64"]);
    let mut c = server.connect();
    let value = pattern(512 << 10, 3);
    assert_eq!(c.set("v", &value), "STORED");
    let rss_before = server.rss_bytes();
    // 400 gets of 512 KiB = 200 MiB of replies, requested at once and not read for a while.
    c.send(&b"get v\r\n".repeat(400));
    std::thread::sleep(Duration::from_millis(500));
    let rss_waiting = server.rss_bytes();
    for _ in 0..400 {
        assert_eq!(c.line(), format!("VALUE v 0 {}", value.len()));
        assert!(c.bytes(value.len()) == value);
        assert_eq!(c.bytes(2), b"\r\n");
        assert_eq!(c.line(), "END");
    }
    eprintln!("RSS before {} KiB, while the client did not read {} KiB", rss_before >> 10, rss_waiting >> 10);
    assert!(rss_waiting < rss_before + (16 << 20), "unread output must not pile up in the server");
}

#[test]
fn many_connections_on_all_workers() {
    let server = Server::start(&["--no-fabric", "-t", "3"]);
    let threads: Vec<_> = (0..12)
        .map(|t| {
            let addr = server.tcp;
            std::thread::spawn(move || {
                let mut c = Text::connect(addr);
                for i in 0..200 {
                    let key = format!("k{t}-{i}");
                    let value = pattern(100 + i * 13, t as u8);
                    assert_eq!(c.set(&key, &value), "STORED");
                    assert_eq!(c.get(&key).unwrap(), value);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(server.stat("total_connections").as_deref(), Some("13"));
}

#[test]
fn usage_errors_exit_64() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, _, err) = run(&["--bogus"]);
    assert_eq!(code, Some(64));
    assert!(err.contains("unknown flag") && err.contains("usage:"), "{err}");
    let (code, _, err) = run(&["-U", "11211"]);
    assert_eq!(code, Some(64));
    assert!(err.contains("UDP is not supported"), "{err}");
    let (code, _, err) = run(&["-I", "600m"]);
    assert_eq!(code, Some(64), "{err}");
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    let flags = ["-p, --port", "-l, --listen", "-m, --memory-limit", "-t, --threads", "-c, --conn-limit"];
    for flag in flags.into_iter().chain(["-I, --max-item-size", "-U", "-Y", "-S", "--fabric-port", "--no-fabric"]) {
        assert!(out.contains(flag), "--help lacks {flag}");
    }
    // A port in use is a start failure (exit 1), not a usage error.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let (code, _, err) = run(&["-p", &port, "--no-fabric"]);
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn sigterm_exits_cleanly_and_removes_the_pidfile() {
    let pidfile = std::env::temp_dir().join(format!("slipstream-cache-test-{}.pid", std::process::id()));
    let mut server = Server::start(&["-P", pidfile.to_str().unwrap()]);
    let written = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(written.trim(), server.pid().to_string());
    let _c = server.connect();
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit 10 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    assert!(!pidfile.exists(), "pidfile left behind");
}

#[test]
fn a_reply_beyond_the_connection_buffer_limits_is_refused() {
    // --conn-buffers-mb 8: a connection may hold max(8 MiB / 4, 1 MiB + -I) = 2 MiB of replies.
    let server = Server::start(&["--no-fabric", "--conn-buffers-mb", "8"]);
    let mut c = server.connect();
    let value = pattern(900 << 10, 5);
    assert_eq!(c.set("v", &value), "STORED");
    c.send(b"get v v\r\n");
    for _ in 0..2 {
        assert_eq!(c.line(), format!("VALUE v 0 {}", value.len()));
        assert!(c.bytes(value.len()) == value);
        assert_eq!(c.bytes(2), b"\r\n");
    }
    assert_eq!(c.line(), "END");
    // Five copies of the value in one reply: refused as memcached refuses what it cannot
    // allocate, and the connection closes (the earlier reply is delivered first).
    c.send(b"get v\r\nget v v v v v\r\n");
    assert_eq!(c.line(), format!("VALUE v 0 {}", value.len()));
    assert!(c.bytes(value.len()) == value);
    assert_eq!(c.bytes(2), b"\r\n");
    assert_eq!(c.line(), "END");
    assert_eq!(c.line(), "SERVER_ERROR out of memory writing get response");
    assert!(c.closed_within(Duration::from_secs(5)));
    works(&server);
    let refusals: u64 = server.stat("buffer_budget_refusals").unwrap().parse().unwrap();
    assert_eq!(refusals, 1);
    assert!(eventually(Duration::from_secs(5), || server.stat("conn_buffers_bytes").unwrap().parse::<u64>().unwrap() <= 8 << 20));
}
