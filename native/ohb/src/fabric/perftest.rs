//! `ucx_perftest`: raw UCX, the reference every fabric figure is compared with.
//!
//! For each size a server (`ucx_perftest -t TEST -s SIZE -n N -w W -p PORT`) and a client
//! (`ucx_perftest 127.0.0.1 ...` with the same arguments; host a's address with `--hosts netns`) run as separate processes; the client's
//! final line holds the figures. tag_lat reports one-way latency (half the ping-pong round trip);
//! tag_bw reports bandwidth (MB = 2^20 bytes) and message rate. The server exits by itself after
//! the test; the guard kills it otherwise. Note: `ucx_perftest` has no bind-address option, so its
//! server listens on every interface for the second or so it runs.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::{run_captured, ChildGuard};
use crate::fabric::hosts::Servers;
use crate::fabric::result::{Mode, Point};

pub const PERFTEST_BIN: &str = "ucx_perftest";

/// Iteration bounds for one `ucx_perftest` run.
pub const ITERATIONS_MIN: u64 = 100;
pub const ITERATIONS_MAX: u64 = 1_000_000;
pub const WARMUP_MAX: u64 = 1000;
/// A run that takes longer than this is killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for the server to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_ATTEMPTS_MAX: usize = 3;

/// The numbers of `ucx_perftest`'s final line, in its column order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerftestFigures {
    pub iterations: u64,
    /// tag_lat: one-way latency percentile (the `-R` rank, 50 by default); tag_bw: send overhead.
    pub us_p50: f64,
    pub us_average: f64,
    pub us_overall: f64,
    pub bw_mb_s_average: f64,
    pub bw_mb_s_overall: f64,
    pub msg_rate_average: f64,
    pub msg_rate_overall: f64,
}

/// Finds the last line made of exactly eight numbers (after an optional `Final:` label), the
/// format of both the default and the `-f` output:
/// `Final:                 10000      0.186     0.189     0.189       40.38      40.38     5292497     5292497`
pub fn parse_output(text: &str) -> Result<PerftestFigures, String> {
    for line in text.lines().rev() {
        let body = line.trim();
        let body = body.strip_prefix("Final:").unwrap_or(body);
        let words: Vec<&str> = body.split_whitespace().collect();
        if words.len() != 8 {
            continue;
        }
        let Ok(numbers) = words.iter().map(|w| w.replace(',', "").parse::<f64>()).collect::<Result<Vec<f64>, _>>()
        else {
            continue;
        };
        if numbers.iter().any(|n| !n.is_finite() || *n < 0.0) || numbers[0].fract() != 0.0 {
            continue;
        }
        return Ok(PerftestFigures {
            iterations: numbers[0] as u64,
            us_p50: numbers[1],
            us_average: numbers[2],
            us_overall: numbers[3],
            bw_mb_s_average: numbers[4],
            bw_mb_s_overall: numbers[5],
            msg_rate_average: numbers[6],
            msg_rate_overall: numbers[7],
        });
    }
    Err(format!("no result line in ucx_perftest output:\n{}", text.trim_end()))
}

/// The `ucx_perftest` test that matches a mode.
pub fn test_for(mode: Mode) -> &'static str {
    match mode {
        Mode::Lat => "tag_lat",
        Mode::Bw | Mode::Rate => "tag_bw",
    }
}

/// Iterations that take roughly `budget` for `size_bytes`, from a deliberately pessimistic cost
/// model (loopback shared memory does better), within [ITERATIONS_MIN, ITERATIONS_MAX].
pub fn default_iterations(mode: Mode, size_bytes: usize, budget: Duration) -> u64 {
    let cost_us = match mode {
        // Ping-pong: two one-way trips of 0.3 us plus the transfer at 8 GB/s (measured here:
        // 0.17 us and 12 GB/s when the machine is otherwise idle).
        Mode::Lat => 2.0 * (0.3 + size_bytes as f64 / 8000.0),
        // Streaming: 1 us per message plus the transfer at 4 GB/s.
        Mode::Bw | Mode::Rate => 1.0 + size_bytes as f64 / 4000.0,
    };
    let n = (budget.as_secs_f64() * 1e6 / cost_us) as u64;
    n.clamp(ITERATIONS_MIN, ITERATIONS_MAX)
}

pub fn default_warmup(iterations: u64) -> u64 {
    (iterations / 10).clamp(10, WARMUP_MAX)
}

/// Runs one test at one size: server and client processes on loopback.
pub fn run(test: &str, size_bytes: usize, iterations: u64, warmup: u64, servers: &Servers) -> Result<PerftestFigures, String> {
    assert!(iterations > 0 && size_bytes > 0);
    let mut last_error = String::new();
    for _attempt in 0..CONNECT_ATTEMPTS_MAX {
        let port = free_port()?;
        let common = |cmd: &mut Command| {
            cmd.args(["-t", test, "-s", &size_bytes.to_string(), "-n", &iterations.to_string()]).args([
                "-w",
                &warmup.to_string(),
                "-p",
                &port.to_string(),
                "-f",
            ]);
            // Its transports stay on loopback like ours (its out-of-band socket binds to every
            // address for the second a point takes: ucx_perftest 1.13 has no option for it).
            if std::env::var_os("UCX_NET_DEVICES").is_none() {
                cmd.env("UCX_NET_DEVICES", "lo");
            }
            // On separate hosts (--hosts netns) UCX still sees one machine (same boot id) and,
            // without error handling, picks shared memory and CMA that cannot work across the
            // namespaces: the client then never finished. TCP is what both sides can use.
            if *servers != Servers::Loopback {
                cmd.env("UCX_TLS", "tcp");
            }
        };
        let mut server_cmd = servers.command(Path::new(PERFTEST_BIN));
        common(&mut server_cmd);
        server_cmd.stderr(Stdio::null());
        let mut server = ChildGuard::spawn("ucx_perftest server", server_cmd, false)?;
        if let Err(e) = wait_listening(server.pid(), port, LISTEN_TIMEOUT) {
            last_error = e;
            continue;
        }
        let mut client_cmd = Command::new(PERFTEST_BIN);
        client_cmd.arg(servers.ip().to_string());
        common(&mut client_cmd);
        let out = run_captured("ucx_perftest client", client_cmd, RUN_TIMEOUT)?;
        // The server ends by itself once the client is done; the guard kills a straggler.
        let _ = server.wait_timeout(Duration::from_secs(2));
        if out.status.success() {
            return parse_output(&out.stdout);
        }
        last_error = format!("ucx_perftest client failed ({}): {}", out.status, out.stderr.trim());
        if !out.stderr.contains("Connection refused") {
            break;
        }
    }
    Err(last_error)
}

/// One table point for `mode`, with the latency as a round trip (2x one-way).
pub fn point(mode: Mode, size_bytes: usize, iterations: u64, warmup: u64, servers: &Servers) -> Point {
    let figures = match run(test_for(mode), size_bytes, iterations, warmup, servers) {
        Ok(f) => f,
        Err(e) => return Point::failed(size_bytes, e),
    };
    figures_to_point(mode, size_bytes, &figures)
}

pub fn figures_to_point(mode: Mode, size_bytes: usize, f: &PerftestFigures) -> Point {
    let mut p = Point { size_bytes, iterations: f.iterations, ..Point::default() };
    match mode {
        Mode::Lat => {
            p.one_way_us_p50 = Some(f.us_p50);
            p.lat_us_p50 = Some(2.0 * f.us_p50);
        }
        Mode::Bw | Mode::Rate => {
            p.bw_mb_s = Some(f.bw_mb_s_overall);
            p.msg_rate = Some(f.msg_rate_overall);
        }
    }
    p
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

/// Polls /proc/net/tcp{,6} until some socket listens on `port`.
/// Waits until the server listens on `port`, seen in the network namespace of its process `pid`
/// (with `--hosts netns` the server's host is not the caller's).
fn wait_listening(pid: u32, port: u16, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        for table in [format!("/proc/{pid}/net/tcp"), format!("/proc/{pid}/net/tcp6")] {
            if let Ok(text) = std::fs::read_to_string(&table) {
                if proc_net_tcp_listens(&text, port) {
                    return Ok(());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err(format!("ucx_perftest server did not listen on port {port} within {timeout:?}"))
}

/// Whether a /proc/net/tcp table has a LISTEN (state 0A) socket on local `port`.
pub fn proc_net_tcp_listens(table: &str, port: u16) -> bool {
    let wanted = format!("{port:04X}");
    table.lines().skip(1).any(|line| {
        let mut words = line.split_whitespace();
        let local = words.nth(1).unwrap_or("");
        let state = words.nth(1).unwrap_or("");
        state == "0A" && local.rsplit(':').next() == Some(wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "\
+--------------+--------------+------------------------------+---------------------+-----------------------+
|              |              |        latency (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
[thread 0]             10000      0.180     0.190     0.190       40.10      40.10     5200000     5200000
Final:                 10000      0.186     0.189     0.189       40.38      40.38     5292497     5292497
";

    const FINAL_ONLY: &str = "\
|     Test     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
                        2000     81.170    87.190    87.190    11469.20   11469.20       11469       11469
";

    #[test]
    fn parses_final_line() {
        let f = parse_output(FULL).unwrap();
        assert_eq!(f.iterations, 10000);
        assert_eq!(f.us_p50, 0.186);
        assert_eq!(f.bw_mb_s_overall, 40.38);
        assert_eq!(f.msg_rate_overall, 5292497.0);
        let f = parse_output(FINAL_ONLY).unwrap();
        assert_eq!(f.iterations, 2000);
        assert_eq!(f.us_p50, 81.17);
        assert_eq!(f.bw_mb_s_overall, 11469.2);
        assert!(parse_output("Waiting for connection...\n").is_err());
        assert!(parse_output("1 2 3\n").is_err());
    }

    #[test]
    fn lat_point_is_round_trip() {
        let f = parse_output(FULL).unwrap();
        let p = figures_to_point(Mode::Lat, 8, &f);
        assert_eq!(p.one_way_us_p50, Some(0.186));
        assert_eq!(p.lat_us_p50, Some(0.372));
        assert_eq!(p.bw_mb_s, None);
        let p = figures_to_point(Mode::Bw, 1 << 20, &parse_output(FINAL_ONLY).unwrap());
        assert_eq!(p.bw_mb_s, Some(11469.2));
        assert_eq!(p.lat_us_p50, None);
    }

    #[test]
    fn iterations_within_bounds() {
        let budget = Duration::from_millis(300);
        for mode in Mode::ALL {
            for size in [8usize, 4096, 1 << 20, 64 << 20] {
                let n = default_iterations(mode, size, budget);
                assert!((ITERATIONS_MIN..=ITERATIONS_MAX).contains(&n), "{n}");
            }
        }
        assert!(default_iterations(Mode::Lat, 8, budget) > default_iterations(Mode::Lat, 1 << 20, budget));
        assert_eq!(default_warmup(5), 10);
        assert_eq!(default_warmup(1_000_000), WARMUP_MAX);
    }

    #[test]
    fn proc_net_tcp() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:3419 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:D0E4 0100007F:3419 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";
        assert!(proc_net_tcp_listens(table, 13337));
        assert!(!proc_net_tcp_listens(table, 53476), "established, not listening");
        assert!(!proc_net_tcp_listens(table, 80));
    }
}
