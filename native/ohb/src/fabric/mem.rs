//! `ohb fabric mem`: resident memory of a fabric server and client under a sustained load of
//! many concurrent requests of mixed sizes, against the pool cap plus a fixed overhead.
//!
//! Three processes: `ohb` samples `VmRSS` and the kernel's peak `VmHWM` of the other two once a
//! second (the verdict is on the peak, which also holds a spike between two samples); the server
//! (`ohb __serve fabric --handler staged`) echoes or acks; the load client (`ohb __load`) runs
//! `threads` threads, each keeping `window` requests in flight. Both nodes share one pool cap and
//! print their pool statistics once a second. Every loop ends by the deadline; waits are bounded
//! by the nodes' `request_timeout`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabric::{Config, Node, Pending, Transport};
use serde_json::{json, Value};

use crate::args::{format_size, Args};
use crate::child::{rss_bytes, ChildGuard, Launcher};
use crate::fabric::node::{transport_name, OP_ACK, OP_ECHO};
use crate::machine::Machine;
use crate::fabric::suite::{loopback, SERVER_START_TIMEOUT};

const MIB: f64 = 1048576.0;
/// Longest accepted `--seconds`.
pub const SECONDS_MAX: u64 = 3600;
pub const THREADS_MAX: usize = 256;
pub const WINDOW_MAX: usize = 64;
/// Request timeout of both nodes in this test (a request waiting longer counts as an error).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Error kinds kept apart in the report; the rest are "other".
const ERROR_KINDS_MAX: usize = 16;

#[derive(Debug, Clone)]
pub struct MemRun {
    pub seconds: u64,
    pub threads: usize,
    pub window: usize,
    pub size_max_bytes: usize,
    pub pool_cap_bytes: usize,
    /// What the fabric may use beyond its pool cap (code, UCX, threads, queues).
    pub overhead_bytes: usize,
    pub transport: Transport,
    pub progress: bool,
}

impl MemRun {
    pub fn validate(&self) -> Result<(), String> {
        if self.seconds == 0 || self.seconds > SECONDS_MAX {
            return Err(format!("--seconds must be in 1..={SECONDS_MAX}"));
        }
        if self.threads == 0 || self.threads > THREADS_MAX {
            return Err(format!("--threads must be in 1..={THREADS_MAX}"));
        }
        if self.window == 0 || self.window > WINDOW_MAX {
            return Err(format!("--window must be in 1..={WINDOW_MAX}"));
        }
        if self.pool_cap_bytes < self.size_max_bytes.next_power_of_two() {
            return Err("the pool cap must hold one message of --max-size (rounded up to a power of two)".into());
        }
        Ok(())
    }

    fn node_args(&self) -> Vec<String> {
        vec![
            "--transport".into(),
            transport_name(self.transport).into(),
            "--pool-cap-mib".into(),
            (self.pool_cap_bytes >> 20).to_string(),
            "--max-message-mib".into(),
            self.size_max_bytes.div_ceil(1 << 20).to_string(),
        ]
    }
}

/// Mixed sizes: 40% 8 B..4 KiB, 30% 4 KiB..256 KiB, 20% 256 KiB..1 MiB, 10% 1 MiB..max,
/// log-uniform within each band, all clamped to `size_max_bytes`.
pub fn mixed_size(rng: &mut XorShift, size_max_bytes: usize) -> usize {
    let band = rng.next_u64() % 10;
    let (lo, hi) = match band {
        0..=3 => (8usize, 4096usize),
        4..=6 => (4096, 256 << 10),
        7..=8 => (256 << 10, 1 << 20),
        _ => (1 << 20, size_max_bytes.max(1 << 20)),
    };
    let (lo, hi) = (lo.min(size_max_bytes), hi.min(size_max_bytes));
    let (log_lo, log_hi) = ((lo as f64).ln(), (hi as f64).ln());
    let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let size = (log_lo + (log_hi - log_lo) * unit).exp() as usize;
    size.clamp(lo.max(1), hi)
}

/// A small deterministic generator (xorshift64*), so runs are repeatable.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545F4914F6CDD1D)
    }
}

/// Counters of the load client.
#[derive(Default)]
struct LoadCounters {
    requests_ok: AtomicU64,
    bytes_sent: AtomicU64,
    errors: AtomicU64,
    error_kinds: Mutex<Vec<(String, u64)>>,
}

impl LoadCounters {
    fn error(&self, e: &fabric::Error) {
        self.error_named(error_kind(e));
    }

    fn error_named(&self, kind: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut kinds = self.error_kinds.lock().unwrap();
        if let Some(k) = kinds.iter_mut().find(|(k, _)| *k == kind) {
            k.1 += 1;
        } else if kinds.len() < ERROR_KINDS_MAX {
            kinds.push((kind, 1));
        }
    }

    fn snapshot(&self, node: &Node, elapsed_s: f64, last: bool) -> Value {
        let s = node.stats();
        let kinds: serde_json::Map<String, Value> =
            self.error_kinds.lock().unwrap().iter().map(|(k, n)| (k.clone(), json!(n))).collect();
        json!({
            "load": true,
            "final": last,
            "elapsed_s": elapsed_s,
            "requests_ok": self.requests_ok.load(Ordering::Relaxed),
            "bytes_sent": self.bytes_sent.load(Ordering::Relaxed),
            "errors": self.errors.load(Ordering::Relaxed),
            "error_kinds": kinds,
            "pool_bytes_mapped": s.pool_bytes_mapped,
            "pool_bytes_in_use": s.pool_bytes_in_use,
            "pool_cap_bytes": s.pool_cap_bytes,
        })
    }
}

/// The variant name of an error, e.g. "Timeout", "PoolExhausted".
fn error_kind(e: &fabric::Error) -> String {
    let debug = format!("{e:?}");
    debug.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("Error").to_string()
}

/// `ohb __load --port P ...`: the load client process. Prints one JSON line a second and a final one.
pub fn load_main(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(
        argv,
        &["port", "seconds", "threads", "window", "max-size", "transport", "pool-cap-mib", "max-message-mib", "seed"],
        &[],
    )?;
    let port: u16 = args.number("port")?.ok_or("--port is required")?;
    let seconds: u64 = args.number("seconds")?.unwrap_or(10).min(SECONDS_MAX);
    let threads: usize = args.number::<usize>("threads")?.unwrap_or(16).clamp(1, THREADS_MAX);
    let window: usize = args.number::<usize>("window")?.unwrap_or(4).clamp(1, WINDOW_MAX);
    let size_max_bytes = crate::args::parse_size(args.value("max-size").unwrap_or("4M"))?;
    let transport =
        crate::fabric::node::parse_transport(args.value("transport").unwrap_or("auto")).ok_or("bad --transport")?;
    let mut config = Config { transport, request_timeout: REQUEST_TIMEOUT, ..Config::default() };
    if let Some(mib) = args.number::<usize>("pool-cap-mib")? {
        config.pool_cap_bytes = mib << 20;
    }
    if let Some(mib) = args.number::<usize>("max-message-mib")? {
        config.max_message_bytes = mib << 20;
    }
    let seed: u64 = args.number("seed")?.unwrap_or(0x5eed);
    crate::child::exit_when_parent_leaves(Duration::from_secs(seconds + 120));
    let node = Node::start(config, None).map_err(|e| format!("load client: {e}"))?;
    let endpoint = node.endpoint(loopback(port)).map_err(|e| format!("load client connect: {e}"))?;
    let counters = Arc::new(LoadCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut workers = Vec::new();
    for t in 0..threads {
        let (node, endpoint, counters, stop) = (node.clone(), endpoint.clone(), counters.clone(), stop.clone());
        workers.push(
            std::thread::Builder::new()
                .name(format!("ohb-load-{t}"))
                .spawn(move || {
                    let mut rng = XorShift::new(seed ^ ((t as u64 + 1) * 0x9E3779B97F4A7C15));
                    let mut in_flight: VecDeque<(Pending, u16, usize)> = VecDeque::with_capacity(window);
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        while in_flight.len() < window {
                            let size = mixed_size(&mut rng, size_max_bytes);
                            let op = if rng.next_u64() & 1 == 0 { OP_ECHO } else { OP_ACK };
                            let sent = node.alloc(size).and_then(|buffer| endpoint.request_buffer(op, buffer));
                            match sent {
                                Ok(p) => {
                                    counters.bytes_sent.fetch_add(size as u64, Ordering::Relaxed);
                                    in_flight.push_back((p, op, size));
                                }
                                Err(e) => {
                                    counters.error(&e);
                                    break;
                                }
                            }
                        }
                        let Some((pending, op, size)) = in_flight.pop_front() else {
                            std::thread::sleep(Duration::from_millis(1));
                            continue;
                        };
                        match pending.wait() {
                            Ok(response) => {
                                let expected = if op == OP_ECHO { size } else { 0 };
                                if response.len() == expected {
                                    counters.requests_ok.fetch_add(1, Ordering::Relaxed);
                                } else {
                                    counters.error_named("WrongResponseLength".into());
                                }
                            }
                            Err(e) => counters.error(&e),
                        }
                    }
                    for (pending, _, _) in in_flight {
                        match pending.wait() {
                            Ok(_) => counters.requests_ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                counters.error(&e);
                                0
                            }
                        };
                    }
                })
                .map_err(|e| format!("spawn load thread: {e}"))?,
        );
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1).min(deadline.saturating_duration_since(Instant::now())));
        println!("{}", counters.snapshot(&node, start.elapsed().as_secs_f64(), false));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().map_err(|_| "a load thread panicked")?;
    }
    println!("{}", counters.snapshot(&node, start.elapsed().as_secs_f64(), true));
    node.close();
    Ok(())
}

/// One second of the run.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub t_s: f64,
    pub server_rss_bytes: Option<u64>,
    pub client_rss_bytes: Option<u64>,
    /// `VmHWM`: the process's peak resident set so far.
    pub server_peak_bytes: Option<u64>,
    pub client_peak_bytes: Option<u64>,
    pub server_pool_mapped_bytes: Option<u64>,
    pub client_pool_mapped_bytes: Option<u64>,
    pub requests_ok: Option<u64>,
    pub errors: Option<u64>,
}

impl Sample {
    fn to_json(&self) -> Value {
        json!({
            "t_s": self.t_s,
            "server_rss_bytes": self.server_rss_bytes,
            "client_rss_bytes": self.client_rss_bytes,
            "server_peak_bytes": self.server_peak_bytes,
            "client_peak_bytes": self.client_peak_bytes,
            "server_pool_mapped_bytes": self.server_pool_mapped_bytes,
            "client_pool_mapped_bytes": self.client_pool_mapped_bytes,
            "requests_ok": self.requests_ok,
            "errors": self.errors,
        })
    }
}

/// The outcome of a memory run.
#[derive(Debug, Clone)]
pub struct MemReport {
    pub run: MemRun,
    pub machine: Machine,
    pub server_rss_idle_bytes: u64,
    pub samples: Vec<Sample>,
    pub final_load: Value,
}

impl MemReport {
    fn max_of(&self, f: fn(&Sample) -> Option<u64>) -> Option<u64> {
        self.samples.iter().filter_map(f).max()
    }

    pub fn allowed_bytes(&self) -> u64 {
        (self.run.pool_cap_bytes + self.run.overhead_bytes) as u64
    }

    /// The peak resident set: the kernel's `VmHWM` at the last sample, or the largest sampled
    /// `VmRSS` where the peak could not be read.
    pub fn server_peak(&self) -> Option<u64> {
        self.max_of(|s| s.server_peak_bytes).max(self.max_of(|s| s.server_rss_bytes))
    }

    pub fn client_peak(&self) -> Option<u64> {
        self.max_of(|s| s.client_peak_bytes).max(self.max_of(|s| s.client_rss_bytes))
    }

    /// What a process used beyond the registered memory its pool mapped at most: the measured
    /// overhead (code, UCX, threads, queues, heap), against the allowance `overhead_bytes`.
    fn measured_overhead(peak: Option<u64>, pool_mapped_max: Option<u64>) -> Option<i64> {
        Some(peak? as i64 - pool_mapped_max? as i64)
    }

    pub fn server_pass(&self) -> Option<bool> {
        self.server_peak().map(|m| m <= self.allowed_bytes())
    }

    pub fn client_pass(&self) -> Option<bool> {
        self.client_peak().map(|m| m <= self.allowed_bytes())
    }

    /// What went wrong in the run itself (not the targets): a process never sampled, requests that
    /// failed, or a load that answered nothing.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.server_pass().is_none() {
            failures.push("server: no RSS sample".to_string());
        }
        if self.client_pass().is_none() {
            failures.push("client: no RSS sample".to_string());
        }
        let count = |k: &str| self.final_load.get(k).and_then(Value::as_u64).unwrap_or(0);
        if count("errors") > 0 {
            let kinds = self.final_load.get("error_kinds").map(|k| k.to_string()).unwrap_or_default();
            failures.push(format!("load: {} request(s) failed {kinds}", count("errors")));
        }
        if count("requests_ok") == 0 {
            failures.push("load: no request answered".to_string());
        }
        failures
    }

    pub fn to_json(&self) -> Value {
        let cap = self.run.pool_cap_bytes as i64;
        let over = |m: Option<u64>| m.map(|m| m as i64 - cap);
        let server_max = self.max_of(|s| s.server_rss_bytes);
        let client_max = self.max_of(|s| s.client_rss_bytes);
        let (server_pool_max, client_pool_max) =
            (self.max_of(|s| s.server_pool_mapped_bytes), self.max_of(|s| s.client_pool_mapped_bytes));
        json!({
            "bench": "fabric mem",
            "layer": "rust",
            "machine": self.machine.to_json(),
            "config": {
                "seconds": self.run.seconds,
                "threads": self.run.threads,
                "window": self.run.window,
                "size_max_bytes": self.run.size_max_bytes,
                "pool_cap_bytes": self.run.pool_cap_bytes,
                "overhead_bytes": self.run.overhead_bytes,
                "transport": transport_name(self.run.transport),
                "sizes": "40% 8 B..4 KiB, 30% 4..256 KiB, 20% 256 KiB..1 MiB, 10% 1 MiB..max; 50% echo, 50% ack",
            },
            "summary": {
                "server_rss_idle_bytes": self.server_rss_idle_bytes,
                "server_rss_max_bytes": server_max,
                "client_rss_max_bytes": client_max,
                "server_rss_max_minus_pool_cap_bytes": over(server_max),
                "client_rss_max_minus_pool_cap_bytes": over(client_max),
                "server_peak_bytes": self.server_peak(),
                "client_peak_bytes": self.client_peak(),
                "server_peak_minus_pool_cap_bytes": over(self.server_peak()),
                "client_peak_minus_pool_cap_bytes": over(self.client_peak()),
                "server_measured_overhead_bytes": Self::measured_overhead(self.server_peak(), server_pool_max),
                "client_measured_overhead_bytes": Self::measured_overhead(self.client_peak(), client_pool_max),
                "server_pool_mapped_max_bytes": server_pool_max,
                "client_pool_mapped_max_bytes": client_pool_max,
                "allowed_bytes": self.allowed_bytes(),
                "server_pass": self.server_pass(),
                "client_pass": self.client_pass(),
            },
            "load": self.final_load,
            "samples": self.samples.iter().map(Sample::to_json).collect::<Vec<_>>(),
        })
    }

    pub fn render(&self) -> String {
        let mib = |b: Option<u64>| b.map(|b| format!("{:.1} MiB", b as f64 / MIB)).unwrap_or_else(|| "n/a".into());
        let signed_mib = |b: Option<u64>| {
            b.map(|b| format!("{:+.1} MiB", (b as f64 - self.run.pool_cap_bytes as f64) / MIB))
                .unwrap_or_else(|| "n/a".into())
        };
        let verdict = |p: Option<bool>| match p {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "n/a",
        };
        let server_max = self.max_of(|s| s.server_rss_bytes);
        let client_max = self.max_of(|s| s.client_rss_bytes);
        let (server_pool_max, client_pool_max) =
            (self.max_of(|s| s.server_pool_mapped_bytes), self.max_of(|s| s.client_pool_mapped_bytes));
        let over = |b: Option<i64>| b.map(|b| format!("{:+.1} MiB", b as f64 / MIB)).unwrap_or_else(|| "n/a".into());
        let rows: Vec<(&str, String, String)> = vec![
            ("pool cap", mib(Some(self.run.pool_cap_bytes as u64)), mib(Some(self.run.pool_cap_bytes as u64))),
            ("RSS idle (before load)", mib(Some(self.server_rss_idle_bytes)), "-".into()),
            ("RSS max (sampled)", mib(server_max), mib(client_max)),
            ("peak RSS (VmHWM)", mib(self.server_peak()), mib(self.client_peak())),
            ("peak - pool cap", signed_mib(self.server_peak()), signed_mib(self.client_peak())),
            ("pool mapped max", mib(server_pool_max), mib(client_pool_max)),
            (
                "overhead: peak - pool max",
                over(Self::measured_overhead(self.server_peak(), server_pool_max)),
                over(Self::measured_overhead(self.client_peak(), client_pool_max)),
            ),
            ("allowed: cap + overhead", mib(Some(self.allowed_bytes())), mib(Some(self.allowed_bytes()))),
            ("verdict", verdict(self.server_pass()).into(), verdict(self.client_pass()).into()),
        ];
        let mut out = format!(
            "ohb fabric mem (rust) - resident memory under load: {} s, {} client threads x {} in flight, \
             mixed sizes up to {}, transport {}\nmachine: {}\n",
            self.run.seconds,
            self.run.threads,
            self.run.window,
            format_size(self.run.size_max_bytes),
            transport_name(self.run.transport),
            self.machine.describe()
        );
        out += &format!("{:<26}{:>14}{:>14}\n", "", "server", "client");
        for (name, s, c) in rows {
            out += &format!("{name:<26}{s:>14}{c:>14}\n");
        }
        let get = |k: &str| self.final_load.get(k).and_then(Value::as_u64).unwrap_or(0);
        let seconds =
            self.final_load.get("elapsed_s").and_then(Value::as_f64).unwrap_or(self.run.seconds as f64).max(1e-3);
        out += &format!(
            "load: {} requests answered ({:.0}/s), {:.1} MiB sent, {} errors {}\n",
            get("requests_ok"),
            get("requests_ok") as f64 / seconds,
            get("bytes_sent") as f64 / MIB,
            get("errors"),
            self.final_load.get("error_kinds").map(|k| k.to_string()).unwrap_or_default()
        );
        out += &format!(
            "overhead allowance {:.0} MiB (--overhead-mib): the fabric's documented fixed overhead (docs/fabric.md) plus its small-buffer reserve; verdict on the peak (VmHWM, /proc/PID/status, read each second with VmRSS); measured overhead = peak - most pool memory mapped\n",
            self.run.overhead_bytes as f64 / MIB
        );
        out
    }
}

/// Parses a load or stats line printed by a child.
fn json_line(line: &str) -> Option<Value> {
    serde_json::from_str::<Value>(line.trim()).ok().filter(Value::is_object)
}

fn drain(child: &mut ChildGuard, latest: &mut Option<Value>) {
    while let Ok(Some(line)) = child.next_line(Duration::ZERO) {
        if let Some(v) = json_line(&line) {
            *latest = Some(v);
        }
    }
}

/// Runs the memory test.
pub fn run_mem(run: &MemRun, launcher: &Launcher) -> Result<MemReport, String> {
    run.validate()?;
    let mut server_args: Vec<String> =
        ["__serve", "fabric", "--handler", "staged", "--port", "0", "--stats-ms", "1000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    server_args.extend(run.node_args());
    let (mut server, port) = launcher.spawn_server("fabric server", &server_args, SERVER_START_TIMEOUT)?;
    std::thread::sleep(Duration::from_millis(300));
    let server_rss_idle_bytes = rss_bytes(server.pid()).ok_or("cannot read the server's RSS")?;
    let mut load_args: Vec<String> = vec![
        "__load".into(),
        "--port".into(),
        port.to_string(),
        "--seconds".into(),
        run.seconds.to_string(),
        "--threads".into(),
        run.threads.to_string(),
        "--window".into(),
        run.window.to_string(),
        "--max-size".into(),
        run.size_max_bytes.to_string(),
    ];
    load_args.extend(run.node_args());
    let mut client = launcher.spawn("load client", &load_args)?;
    let start = Instant::now();
    let hard_deadline = start + Duration::from_secs(run.seconds + 60);
    let mut samples = Vec::new();
    let (mut server_stats, mut load_stats): (Option<Value>, Option<Value>) = (None, None);
    let final_load: Value;
    let mut second = 0u64;
    loop {
        second += 1;
        let next = start + Duration::from_secs(second);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        drain(&mut server, &mut server_stats);
        drain(&mut client, &mut load_stats);
        let field = |v: &Option<Value>, k: &str| v.as_ref().and_then(|v| v.get(k)).and_then(Value::as_u64);
        let sample = Sample {
            t_s: start.elapsed().as_secs_f64(),
            server_rss_bytes: rss_bytes(server.pid()),
            client_rss_bytes: rss_bytes(client.pid()),
            server_peak_bytes: crate::proc_mem::peak_rss_kib(server.pid()).map(|k| k * 1024),
            client_peak_bytes: crate::proc_mem::peak_rss_kib(client.pid()).map(|k| k * 1024),
            server_pool_mapped_bytes: field(&server_stats, "pool_bytes_mapped"),
            client_pool_mapped_bytes: field(&load_stats, "pool_bytes_mapped"),
            requests_ok: field(&load_stats, "requests_ok"),
            errors: field(&load_stats, "errors"),
        };
        if run.progress {
            let mib = |b: Option<u64>| b.map(|b| format!("{:.1}", b as f64 / MIB)).unwrap_or_else(|| "-".into());
            eprintln!(
                "[{second}/{} s] server RSS {} MiB (pool {} MiB), client RSS {} MiB (pool {} MiB), {} requests, {} errors",
                run.seconds,
                mib(sample.server_rss_bytes),
                mib(sample.server_pool_mapped_bytes),
                mib(sample.client_rss_bytes),
                mib(sample.client_pool_mapped_bytes),
                sample.requests_ok.unwrap_or(0),
                sample.errors.unwrap_or(0)
            );
        }
        let is_final = load_stats.as_ref().and_then(|v| v.get("final")).and_then(Value::as_bool) == Some(true);
        if sample.client_rss_bytes.is_some() || !is_final {
            samples.push(sample);
        }
        if is_final {
            final_load = load_stats.clone().unwrap_or(Value::Null);
            break;
        }
        if Instant::now() >= hard_deadline {
            return Err(format!("the load client did not finish within {} s", run.seconds + 60));
        }
        if second > run.seconds {
            // Past the load: the client is joining its threads; is it still alive?
            if let Some(status) = client.try_status() {
                drain(&mut client, &mut load_stats);
                if let Some(v) = load_stats.as_ref().filter(|v| v.get("final").and_then(Value::as_bool) == Some(true)) {
                    final_load = v.clone();
                    break;
                }
                return Err(format!("the load client exited ({status}) without a final report"));
            }
        }
    }
    let _ = client.wait_timeout(Duration::from_secs(30));
    drop(server);
    Ok(MemReport { run: run.clone(), machine: Machine::detect(), server_rss_idle_bytes, samples, final_load })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_sizes_stay_in_range_and_mix() {
        let mut rng = XorShift::new(42);
        let max = 4 << 20;
        let sizes: Vec<usize> = (0..10_000).map(|_| mixed_size(&mut rng, max)).collect();
        assert!(sizes.iter().all(|&s| (8..=max).contains(&s)));
        let small = sizes.iter().filter(|&&s| s <= 4096).count();
        let large = sizes.iter().filter(|&&s| s > 1 << 20).count();
        assert!((3000..5000).contains(&small), "{small}");
        assert!((500..1500).contains(&large), "{large}");
        let mut rng = XorShift::new(1);
        assert!((0..1000).map(|_| mixed_size(&mut rng, 1000)).all(|s| (8..=1000).contains(&s)));
    }

    #[test]
    fn validation() {
        let run = MemRun {
            seconds: 60,
            threads: 16,
            window: 4,
            size_max_bytes: 4 << 20,
            pool_cap_bytes: 64 << 20,
            overhead_bytes: 64 << 20,
            transport: Transport::Auto,
            progress: false,
        };
        assert!(run.validate().is_ok());
        assert!(MemRun { seconds: 0, ..run.clone() }.validate().is_err());
        assert!(MemRun { pool_cap_bytes: 2 << 20, ..run.clone() }.validate().is_err());
        assert!(MemRun { window: 0, ..run.clone() }.validate().is_err());
        assert_eq!(run.node_args()[3], "64");
    }

    /// A one-second run of one thread, 64 MiB cap, 17 MiB overhead: the verdict tests' run.
    fn small_run() -> MemRun {
        MemRun {
            seconds: 1,
            threads: 1,
            window: 1,
            size_max_bytes: 4096,
            pool_cap_bytes: 64 << 20,
            overhead_bytes: 17 << 20,
            transport: Transport::Auto,
            progress: false,
        }
    }

    #[test]
    fn failed_requests_and_missing_samples_are_failures() {
        let run = small_run();
        let sample = Sample { server_rss_bytes: Some(1 << 20), client_rss_bytes: Some(1 << 20), ..Sample::default() };
        let mut report = MemReport {
            run,
            machine: Machine::default(),
            server_rss_idle_bytes: 0,
            samples: vec![sample],
            final_load: json!({"requests_ok": 10, "errors": 0}),
        };
        assert!(report.failures().is_empty());
        report.final_load = json!({"requests_ok": 10, "errors": 2, "error_kinds": {"Timeout": 2}});
        assert_eq!(report.failures(), vec![r#"load: 2 request(s) failed {"Timeout":2}"#.to_string()]);
        report.samples.clear();
        report.final_load = json!({});
        assert_eq!(report.failures(), ["server: no RSS sample", "client: no RSS sample", "load: no request answered"]);
    }

    #[test]
    fn the_verdict_is_on_the_peak_which_holds_a_spike_between_samples() {
        let run = small_run();
        let sample = Sample {
            server_rss_bytes: Some(70 << 20),
            client_rss_bytes: Some(70 << 20),
            server_peak_bytes: Some(90 << 20),
            client_peak_bytes: Some(80 << 20),
            server_pool_mapped_bytes: Some(60 << 20),
            ..Sample::default()
        };
        let report = MemReport {
            run,
            machine: Machine::default(),
            server_rss_idle_bytes: 0,
            samples: vec![sample],
            final_load: json!({"requests_ok": 10, "errors": 0}),
        };
        assert_eq!(report.server_peak(), Some(90 << 20));
        assert_eq!(report.server_pass(), Some(false), "a 90 MiB peak exceeds 64 + 17 MiB although no sample saw it");
        assert_eq!(report.client_pass(), Some(true));
        let summary = &report.to_json()["summary"];
        assert_eq!(summary["server_measured_overhead_bytes"], json!(30i64 << 20), "peak - pool mapped max");
        assert_eq!(summary["client_measured_overhead_bytes"], Value::Null, "no pool figure, no overhead");
    }

    #[test]
    fn error_kinds() {
        assert_eq!(error_kind(&fabric::Error::Timeout { after_ms: 5 }), "Timeout");
        assert_eq!(error_kind(&fabric::Error::Closed), "Closed");
    }
}
