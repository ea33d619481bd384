//! Reproduces UCX 1.13's shared-memory FIFO hazard and measures its rate: a `fabric-peer` streams
//! large responses to this process and is killed in the middle; then a second peer is asked for
//! one small echo. When the killed writer left a half-written element in this process's
//! shared-memory receive FIFO, nothing behind that element is ever read and the echo never comes
//! (docs/fabric.md, "Failures") until the wedge check renews the worker (`Config::wedge_timeout`).
//!
//! `cargo run --release -p fabric --example shm_fifo_wedge -- TRIALS [eager|default]`
//! Each trial runs in a fresh child process (a wedged worker stays wedged). `eager` starts the
//! killed peer with `--same-host-eager` (its 32 MiB responses go through the FIFO, the worst case);
//! `default` leaves them to rendezvous. Prints one line per trial and a summary; exits non-zero
//! if any trial wedged.
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fabric::{Config, Error, Node};

fn peer_binary() -> std::path::PathBuf {
    // target/<profile>/examples/shm_fifo_wedge -> target/<profile>/fabric-peer
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe.parent().and_then(|p| p.parent()).expect("target dir").join("fabric-peer");
    assert!(path.exists(), "{} is missing: build it first (cargo build --release -p fabric)", path.display());
    path
}

fn start_peer(eager: bool) -> (Child, SocketAddr) {
    let mut command = Command::new(peer_binary());
    if eager {
        command.arg("--same-host-eager");
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting fabric-peer");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("LISTENING ").unwrap_or_else(|| panic!("peer said {line:?}")).parse().unwrap();
    (child, addr)
}

/// One trial: 0 = the second peer was served, 2 = the worker was wedged, renewed, and then the
/// second peer was served, 3 = its echo never came (wedged, not recovered), 4 = anything else.
fn trial(eager: bool, kill_after: Duration) -> i32 {
    let node = Node::start(Config { request_timeout: Duration::from_secs(10), ..Config::default() }, None).unwrap();
    let (mut first, first_addr) = start_peer(eager);
    let endpoint = node.endpoint(first_addr).unwrap();
    endpoint.request(1, b"warm up").unwrap().wait().unwrap();
    let pendings: Vec<_> = (0..8).map(|_| endpoint.request(2, &(32u64 << 20).to_le_bytes()).unwrap()).collect();
    std::thread::sleep(kill_after);
    let _ = first.kill();
    let _ = first.wait();
    for pending in pendings {
        let _ = pending.wait();
    }
    let (mut second, second_addr) = start_peer(false);
    let asked = Instant::now();
    let ask = || node.endpoint(second_addr).and_then(|e| e.request(1, b"still here")).and_then(|p| p.wait());
    let code = match ask() {
        Ok(_) => 0,
        // The wedge check renewed the worker (`Config::wedge_timeout`): the next request must pass.
        Err(Error::PeerFailed { reason, .. }) if reason.contains("renewed") => match ask() {
            Ok(_) => 2,
            Err(e) => {
                eprintln!("second peer, after the renewal: {e}");
                4
            }
        },
        Err(Error::Timeout { .. }) => 3,
        Err(e) => {
            eprintln!("second peer: {e}");
            4
        }
    };
    eprintln!("second peer answered or gave up after {:?}", asked.elapsed());
    let _ = second.kill();
    let _ = second.wait();
    node.close();
    code
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next().unwrap_or_else(|| "20".into());
    if first == "--one" {
        let eager = args.next().as_deref() == Some("eager");
        let kill_after_ms: u64 = args.next().map(|s| s.parse().expect("kill-after ms")).unwrap_or(30);
        std::process::exit(trial(eager, Duration::from_millis(kill_after_ms)));
    }
    let trials: u32 = first.parse().expect("TRIALS");
    let mode = args.next().unwrap_or_else(|| "eager".into());
    let started = Instant::now();
    let (mut recovered, mut wedged, mut other) = (0, 0, 0);
    for i in 0..trials {
        // Vary the moment of the kill so that it falls at different points of the stream.
        let kill_after_ms = 10 + (i * 7) % 60;
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["--one", &mode, &kill_after_ms.to_string()])
            .stderr(Stdio::piped())
            .output()
            .expect("running a trial");
        let status = output.status;
        let outcome = match status.code() {
            Some(0) => "served",
            Some(2) => {
                recovered += 1;
                "wedged, worker renewed, then served"
            }
            Some(3) => {
                wedged += 1;
                "WEDGED"
            }
            _ => {
                other += 1;
                "failed otherwise"
            }
        };
        println!("trial {i} (kill after {kill_after_ms} ms): {outcome}");
        if status.code() != Some(0) {
            // The trial's log (SLIPSTREAM_LOG=debug for more), without UCX's endpoint dumps.
            for line in String::from_utf8_lossy(&output.stderr).lines().filter(|l| !l.starts_with('#')) {
                println!("    {line}");
            }
        }
    }
    println!(
        "{mode}: {} of {trials} trials wedged ({recovered} recovered by renewing the worker, {wedged} not), {other} failed otherwise, in {:?}",
        recovered + wedged,
        started.elapsed()
    );
    std::process::exit(if wedged + other > 0 { 1 } else { 0 });
}
