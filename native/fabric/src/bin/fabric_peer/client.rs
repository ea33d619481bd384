//! `fabric-peer --client ADDR`: a client node that a test drives from another process (another
//! network namespace, as on another host), one command per stdin line, one answer per stdout line.
//!
//! ```text
//! ECHO n            -> OK <us> | ERR <kind> <us> <message>    op 1 with n bytes, echo checked
//! FETCH n           -> OK <us> | ERR ...                      op 2: n pattern bytes, checked
//! SLEEP ms          -> OK <us> | ERR ...                      op 3
//! START k FETCH n   -> STARTED k                              k requests in flight, not waited for
//! START k SLEEP ms  -> STARTED k
//! WAIT              -> DONE ok=a PeerFailed=b Timeout=c other=d us=<us> [first=<kind>: <message>]
//! STATS             -> STATS pool_bytes_in_use=.. connections_open=.. peers_failed=.. same_host_...=..
//! anything else     -> BAD <why>                              and the client keeps going
//! ```
//! `<kind>` is the `fabric::Error` variant (`PeerFailed`, `Timeout`, ...). Sizes are bounded by the
//! node's `max_message_bytes`, started requests by `MAX_STARTED`.
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::Instant;

use fabric::{Config, Endpoint, Error, Node, Pending};

/// Requests a `START` may leave in flight (all `START`s until the next `WAIT` together).
const MAX_STARTED: usize = 1024;

/// What a response must look like.
#[derive(Clone, Copy)]
enum Expect {
    Echo(usize),
    Pattern(usize),
    Ok,
}

pub fn run(config: Config, server: SocketAddr) {
    let max_bytes = config.max_message_bytes;
    let node = Node::start(config, None).unwrap_or_else(|e| {
        eprintln!("fabric-peer --client: {e}");
        std::process::exit(1)
    });
    let endpoint = node.endpoint(server).unwrap_or_else(|e| {
        eprintln!("fabric-peer --client: {e}");
        std::process::exit(1)
    });
    let mut started: Vec<(Pending, Expect)> = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = client_command(&node, &endpoint, &mut started, max_bytes, &line);
        writeln!(out, "{answer}").unwrap();
        out.flush().unwrap();
    }
    drop(started);
    node.close();
}

fn client_command(node: &Node, endpoint: &Endpoint, started: &mut Vec<(Pending, Expect)>, max_bytes: usize, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| words.get(i).and_then(|w| w.parse::<usize>().ok());
    match words.as_slice() {
        ["ECHO" | "FETCH" | "SLEEP", _] => {
            let Some(arg) = number(1) else { return format!("BAD not a number: {line}") };
            let begun = Instant::now();
            match post(endpoint, words[0], arg, max_bytes).and_then(|(pending, expect)| Ok((pending.wait()?, expect))) {
                Ok((response, expect)) => match check(&response, expect) {
                    Ok(()) => format!("OK {}", begun.elapsed().as_micros()),
                    Err(why) => format!("ERR Corrupt {} {why}", begun.elapsed().as_micros()),
                },
                Err(e) => format!("ERR {} {} {e}", kind(&e), begun.elapsed().as_micros()),
            }
        }
        ["START", _, "FETCH" | "SLEEP", _] => {
            let (Some(count), Some(arg)) = (number(1), number(3)) else { return format!("BAD not a number: {line}") };
            if started.len() + count > MAX_STARTED {
                return format!("BAD at most {MAX_STARTED} requests may be started before WAIT");
            }
            for _ in 0..count {
                match post(endpoint, words[2], arg, max_bytes) {
                    Ok(posted) => started.push(posted),
                    Err(e) => return format!("ERR {} 0 {e}", kind(&e)),
                }
            }
            format!("STARTED {count}")
        }
        ["WAIT"] => {
            let begun = Instant::now();
            let (mut ok, mut peer_failed, mut timeout, mut other) = (0, 0, 0, 0);
            let mut first = String::new();
            for (pending, expect) in started.drain(..) {
                let result = pending.wait().map_err(|e| (kind(&e), e.to_string()));
                let result = result.and_then(|response| check(&response, expect).map_err(|why| ("Corrupt", why)));
                match result {
                    Ok(()) => ok += 1,
                    Err((kind, message)) => {
                        match kind {
                            "PeerFailed" => peer_failed += 1,
                            "Timeout" => timeout += 1,
                            _ => other += 1,
                        }
                        if first.is_empty() {
                            first = format!(" first={kind}: {message}");
                        }
                    }
                }
            }
            format!("DONE ok={ok} PeerFailed={peer_failed} Timeout={timeout} other={other} us={}{first}", begun.elapsed().as_micros())
        }
        ["STATS"] => {
            let stats = node.stats();
            format!(
                "STATS pool_bytes_in_use={} connections_open={} peers_failed={} same_host_bytes_pulled={} same_host_pulls_failed={} same_host_pull_refused={}",
                stats.pool_bytes_in_use,
                stats.connections_open,
                stats.peers_failed,
                stats.same_host_bytes_pulled,
                stats.same_host_pulls_failed,
                stats.same_host_pull_refused
            )
        }
        _ => format!("BAD unknown command: {line}"),
    }
}

/// Posts one request of the given command; sizes above `max_bytes` are refused before allocating.
fn post(endpoint: &Endpoint, command: &str, arg: usize, max_bytes: usize) -> fabric::Result<(Pending, Expect)> {
    match command {
        "ECHO" => {
            if arg > max_bytes {
                return Err(Error::TooLarge { len: arg, max: max_bytes });
            }
            let payload: Vec<u8> = (0..arg).map(|i| (i % 251) as u8).collect();
            Ok((endpoint.request(1, &payload)?, Expect::Echo(arg)))
        }
        "FETCH" => {
            if arg > max_bytes {
                return Err(Error::TooLarge { len: arg, max: max_bytes });
            }
            Ok((endpoint.request(2, &(arg as u64).to_le_bytes())?, Expect::Pattern(arg)))
        }
        _ => Ok((endpoint.request(3, &(arg as u64).to_le_bytes())?, Expect::Ok)),
    }
}

fn check(response: &[u8], expect: Expect) -> Result<(), String> {
    let (len, byte): (usize, fn(usize) -> u8) = match expect {
        Expect::Echo(len) => (len, |i| (i % 251) as u8),
        Expect::Pattern(len) => (len, |i| (i as u8).wrapping_mul(31)),
        Expect::Ok => return if response == b"ok" { Ok(()) } else { Err(format!("expected \"ok\", got {} bytes", response.len())) },
    };
    if response.len() != len {
        return Err(format!("expected {len} bytes, got {}", response.len()));
    }
    match response.iter().enumerate().find(|&(i, &b)| b != byte(i)) {
        Some((i, _)) => Err(format!("byte {i} differs")),
        None => Ok(()),
    }
}

fn kind(error: &Error) -> &'static str {
    match error {
        Error::Ucx { .. } => "Ucx",
        Error::PeerFailed { .. } => "PeerFailed",
        Error::Timeout { .. } => "Timeout",
        Error::Overloaded => "Overloaded",
        Error::TooLarge { .. } => "TooLarge",
        Error::PoolExhausted { .. } => "PoolExhausted",
        Error::Closed => "Closed",
        Error::Remote(_) => "Remote",
        Error::Protocol(_) => "Protocol",
        Error::Config(_) => "Config",
    }
}
