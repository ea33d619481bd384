//! `ohb mem lat|thr|nb`: the cache benchmarks (after OHB's `ohb_memlat`, `ohb_memlat_nb` and a
//! throughput test). Each run starts, side by side: memcached 1.6 from Debian over TCP, slipstream-
//! cache over TCP and slipstream-cache over the fabric, all through the same client library
//! (`cache-client`, binary protocol), and measures them one after the other at every point.
//!
//! Architecture invariant: servers are separate processes bound to 127.0.0.1, killed with ohb;
//! the measuring clients run in ohb, as an application would use them.

use std::ffi::OsString;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cache_client::{Client, ClientConfig, ServerAddr};
use serde_json::{json, Value};

use crate::args::format_size;
use crate::child::{rss_bytes, ChildGuard};
use crate::machine::Machine;
use crate::report::{format_rate, format_ratio, format_us};
use crate::stats::{median, percentile_sorted};

/// How long a server may take to start listening.
const SERVER_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Keys each point reads from (preloaded), so GETs hit and the working set stays in cache.
const KEYS_PER_POINT: usize = 64;

/// The three things measured side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheVariant {
    /// memcached 1.6 (Debian) over TCP: the reference.
    Memcached,
    /// slipstream-cache over TCP.
    CacheTcp,
    /// slipstream-cache over the fabric.
    CacheFabric,
}

impl CacheVariant {
    pub const ALL: [CacheVariant; 3] = [CacheVariant::Memcached, CacheVariant::CacheTcp, CacheVariant::CacheFabric];

    pub fn name(self) -> &'static str {
        match self {
            CacheVariant::Memcached => "memcached",
            CacheVariant::CacheTcp => "cache-tcp",
            CacheVariant::CacheFabric => "cache-fabric",
        }
    }

    pub fn parse(text: &str) -> Option<CacheVariant> {
        CacheVariant::ALL.into_iter().find(|v| v.name() == text)
    }
}

/// The operation mix of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Get,
    Set,
    /// 90 % GET, 10 % SET (OHB's MIX).
    Mix,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Get, Workload::Set, Workload::Mix];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Get => "GET",
            Workload::Set => "SET",
            Workload::Mix => "MIX",
        }
    }

    pub fn parse(text: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name().eq_ignore_ascii_case(text))
    }

    /// Whether operation number `i` of this workload is a SET.
    fn is_set(self, i: u64) -> bool {
        match self {
            Workload::Get => false,
            Workload::Set => true,
            Workload::Mix => i % 10 == 9,
        }
    }
}

/// The servers of one run, started once and shared by every point.
pub struct CacheServers {
    memcached: Option<(ChildGuard, SocketAddr)>,
    cache: Option<(ChildGuard, SocketAddr, SocketAddr)>,
}

/// How the servers are started.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub threads: usize,
    pub memory_mib: usize,
    pub connections_max: usize,
    /// slipstream-cache's executable.
    pub cache_exe: PathBuf,
    pub memcached_exe: PathBuf,
}

impl ServerSettings {
    /// The slipstream-cache built next to this ohb, and Debian's memcached.
    pub fn default_for_this_build() -> ServerSettings {
        let exe_dir = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_default();
        ServerSettings {
            threads: 2,
            memory_mib: 1024,
            connections_max: 1024,
            cache_exe: exe_dir.join("slipstream-cache"),
            memcached_exe: PathBuf::from("memcached"),
        }
    }
}

impl CacheServers {
    pub fn start(settings: &ServerSettings, variants: &[CacheVariant]) -> Result<CacheServers, String> {
        let mut servers = CacheServers { memcached: None, cache: None };
        if variants.contains(&CacheVariant::Memcached) {
            servers.memcached = Some(start_memcached(settings)?);
        }
        if variants.iter().any(|v| *v != CacheVariant::Memcached) {
            servers.cache = Some(start_cache(settings)?);
        }
        Ok(servers)
    }

    pub fn addr(&self, variant: CacheVariant) -> ServerAddr {
        match variant {
            CacheVariant::Memcached => ServerAddr::Tcp(self.memcached.as_ref().expect("memcached started").1),
            CacheVariant::CacheTcp => ServerAddr::Tcp(self.cache.as_ref().expect("cache started").1),
            CacheVariant::CacheFabric => ServerAddr::Fabric(self.cache.as_ref().expect("cache started").2),
        }
    }

    /// Resident memory of the server behind `variant`, in bytes.
    pub fn rss_bytes(&self, variant: CacheVariant) -> Option<u64> {
        let pid = match variant {
            CacheVariant::Memcached => self.memcached.as_ref()?.0.pid(),
            _ => self.cache.as_ref()?.0.pid(),
        };
        rss_bytes(pid)
    }
}

fn free_loopback_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn start_memcached(settings: &ServerSettings) -> Result<(ChildGuard, SocketAddr), String> {
    start_memcached_with(settings, &StartExtras::default())
}

fn start_cache(settings: &ServerSettings) -> Result<(ChildGuard, SocketAddr, SocketAddr), String> {
    start_cache_with(settings, &StartExtras::default())
}

/// What a server start adds to the settings' command line (the hybrid bench's SSD tier and
/// extstore options), and where its stderr goes.
#[derive(Debug, Clone, Default)]
pub(crate) struct StartExtras {
    /// Appended after the common flags.
    pub args: Vec<OsString>,
    /// `None`: inherited; `Some(path)`: written to that file (created or truncated).
    pub stderr_file: Option<PathBuf>,
}

impl StartExtras {
    fn apply(&self, cmd: &mut Command) -> Result<(), String> {
        cmd.args(&self.args);
        if let Some(path) = &self.stderr_file {
            let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            cmd.stderr(file);
        }
        Ok(())
    }
}

/// memcached with the settings' -t/-m/-c (and -u nobody as root), plus `extras`.
pub(crate) fn start_memcached_with(
    settings: &ServerSettings,
    extras: &StartExtras,
) -> Result<(ChildGuard, SocketAddr), String> {
    let port = free_loopback_port()?;
    let mut cmd = Command::new(&settings.memcached_exe);
    cmd.args(["-l", "127.0.0.1", "-U", "0"])
        .args(["-p", &port.to_string()])
        .args(["-t", &settings.threads.to_string()])
        .args(["-m", &settings.memory_mib.to_string()])
        .args(["-c", &settings.connections_max.to_string()]);
    // memcached refuses to run as root without -u.
    if memcached_runs_as_nobody() {
        cmd.args(["-u", "nobody"]);
    }
    extras.apply(&mut cmd)?;
    let mut child = ChildGuard::spawn("memcached", cmd, false)
        .map_err(|e| format!("{e} (memcached 1.6 from Debian: apt-get install memcached)"))?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + SERVER_START_TIMEOUT;
    while TcpStream::connect(addr).is_err() {
        if let Some(status) = child.try_status() {
            return Err(format!("memcached exited ({status}) before listening on {addr}"));
        }
        if Instant::now() > deadline {
            return Err(format!("memcached did not listen on {addr} within {SERVER_START_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((child, addr))
}

/// Whether memcached is started with `-u nobody` (ohb runs as root): files it must open, such as
/// extstore's, have to be accessible to that user.
pub(crate) fn memcached_runs_as_nobody() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// slipstream-cache with the settings' -t/-m/-c on free TCP and fabric ports, plus `extras`.
pub(crate) fn start_cache_with(
    settings: &ServerSettings,
    extras: &StartExtras,
) -> Result<(ChildGuard, SocketAddr, SocketAddr), String> {
    let mut cmd = Command::new(&settings.cache_exe);
    cmd.args(["-l", "127.0.0.1", "-p", "0", "--fabric-port", "0"])
        .args(["-t", &settings.threads.to_string()])
        .args(["-m", &settings.memory_mib.to_string()])
        .args(["-c", &settings.connections_max.to_string()]);
    extras.apply(&mut cmd)?;
    let mut child = ChildGuard::spawn("slipstream-cache", cmd, true)
        .map_err(|e| format!("{e} (build it with `make native`)"))?;
    let deadline = Instant::now() + SERVER_START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = child
            .next_line(left)?
            .ok_or_else(|| format!("slipstream-cache did not announce its ports within {SERVER_START_TIMEOUT:?}"))?;
        if let Some((tcp, fabric)) = parse_cache_announcement(&line) {
            return Ok((child, tcp, fabric));
        }
    }
}

/// Parses `slipstream-cache listening tcp=127.0.0.1:P fabric=127.0.0.1:Q`.
pub fn parse_cache_announcement(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.trim().strip_prefix("slipstream-cache listening")?;
    let mut tcp = None;
    let mut fabric = None;
    for word in rest.split_whitespace() {
        if let Some(v) = word.strip_prefix("tcp=") {
            tcp = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("fabric=") {
            fabric = v.parse().ok();
        }
    }
    Some((tcp?, fabric?))
}

pub(crate) fn connect(addr: ServerAddr) -> Result<Client, String> {
    let client = Client::new(ClientConfig::default()).map_err(|e| format!("client: {e}"))?;
    client.add_server(addr).map_err(|e| format!("client: {e}"))?;
    Ok(client)
}

fn key_for(size_bytes: usize, index: usize) -> Vec<u8> {
    format!("ohb:{size_bytes}:{index}").into_bytes()
}

fn value_of(size_bytes: usize) -> Vec<u8> {
    (0..size_bytes).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Loads the keys a point reads.
fn preload(client: &Client, size_bytes: usize) -> Result<(), String> {
    let value = value_of(size_bytes);
    for i in 0..KEYS_PER_POINT {
        client.set(&key_for(size_bytes, i), &value, 0, 0).map_err(|e| format!("preload: {e}"))?;
    }
    Ok(())
}

/// One GET or SET; a GET must hit with the full value (a miss is a benchmark error, not a figure).
fn one_op(
    client: &Client,
    workload: Workload,
    i: u64,
    keys: &[Vec<u8>],
    value: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let key = &keys[i as usize % keys.len()];
    if workload.is_set(i) {
        client.set(key, value, 0, 0).map_err(|e| format!("set: {e}"))
    } else {
        match client.get_into(key, scratch).map_err(|e| format!("get: {e}"))? {
            Some(_) if scratch.len() == value.len() => Ok(()),
            Some(_) => Err(format!("get returned {} bytes, expected {}", scratch.len(), value.len())),
            None => Err("get missed a preloaded key (evicted?)".into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Latency.

/// Latency of one (variant, workload, size) point, microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyPoint {
    pub variant: CacheVariant,
    pub workload: Workload,
    pub size_bytes: usize,
    pub ops: usize,
    pub us_p50: f64,
    pub us_p99: f64,
    pub us_avg: f64,
    pub ops_per_s: f64,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LatencyRun {
    pub workloads: Vec<Workload>,
    pub sizes: Vec<usize>,
    pub iterations: usize,
    pub warmup: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

pub fn run_latency(run: &LatencyRun) -> Result<Vec<LatencyPoint>, String> {
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut clients = Vec::new();
    for &variant in &run.variants {
        clients.push((variant, connect(servers.addr(variant))?));
    }
    let mut points = Vec::new();
    let mut samples_ns = vec![0u64; run.iterations];
    let mut scratch = Vec::new();
    for &workload in &run.workloads {
        for &size_bytes in &run.sizes {
            let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
            let value = value_of(size_bytes);
            for (variant, client) in clients.iter_mut() {
                if run.progress {
                    eprintln!("ohb mem lat: {} {} {}", variant.name(), workload.name(), format_size(size_bytes));
                }
                let result = (|| -> Result<LatencyPoint, String> {
                    preload(client, size_bytes)?;
                    for i in 0..run.warmup as u64 {
                        one_op(client, workload, i, &keys, &value, &mut scratch)?;
                    }
                    let started = Instant::now();
                    for (i, sample) in samples_ns.iter_mut().enumerate() {
                        let t0 = Instant::now();
                        one_op(client, workload, i as u64, &keys, &value, &mut scratch)?;
                        *sample = t0.elapsed().as_nanos() as u64;
                    }
                    let seconds = started.elapsed().as_secs_f64();
                    let total_ns: u64 = samples_ns.iter().sum();
                    samples_ns.sort_unstable();
                    let us = |ns: u64| ns as f64 / 1000.0;
                    Ok(LatencyPoint {
                        variant: *variant,
                        workload,
                        size_bytes,
                        ops: samples_ns.len(),
                        us_p50: us(percentile_sorted(&samples_ns, 50.0).unwrap_or(0)),
                        us_p99: us(percentile_sorted(&samples_ns, 99.0).unwrap_or(0)),
                        us_avg: total_ns as f64 / samples_ns.len() as f64 / 1000.0,
                        ops_per_s: samples_ns.len() as f64 / seconds,
                        error: None,
                    })
                })();
                points.push(result.unwrap_or_else(|error| LatencyPoint {
                    variant: *variant,
                    workload,
                    size_bytes,
                    ops: 0,
                    us_p50: 0.0,
                    us_p99: 0.0,
                    us_avg: 0.0,
                    ops_per_s: 0.0,
                    error: Some(error),
                }));
            }
        }
    }
    drop(servers);
    Ok(points)
}

fn latency_point(
    points: &[LatencyPoint],
    variant: CacheVariant,
    workload: Workload,
    size: usize,
) -> Option<&LatencyPoint> {
    points
        .iter()
        .find(|p| p.variant == variant && p.workload == workload && p.size_bytes == size && p.error.is_none())
}

pub fn render_latency(points: &[LatencyPoint], run: &LatencyRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!("# ohb mem lat: latency per operation, one client thread, one request at a time\n# machine: {}\n", machine.describe());
    out += &format!(
        "# servers: {} threads, -m {} MiB; {} measured ops per point after {} warm-up; p50 / p99 / avg in us\n",
        run.servers.threads, run.servers.memory_mib, run.iterations, run.warmup
    );
    for &workload in &run.workloads {
        out += &format!("\n{}\n", workload.name());
        let mut header = format!("{:>8}", "size");
        for v in &run.variants {
            header += &format!(" | {:>24}", format!("{} p50/p99/avg", v.name()));
        }
        for v in run.variants.iter().filter(|v| **v != CacheVariant::Memcached) {
            header += &format!(" | {:>16}", format!("p50 x vs mc ({})", short(*v)));
        }
        out += &header;
        out += "\n";
        for &size in &run.sizes {
            let mut row = format!("{:>8}", format_size(size));
            for &v in &run.variants {
                let cell = match latency_point(points, v, workload, size) {
                    Some(p) => format!("{}/{}/{}", format_us(p.us_p50), format_us(p.us_p99), format_us(p.us_avg)),
                    None => "err".into(),
                };
                row += &format!(" | {cell:>24}");
            }
            for v in run.variants.iter().copied().filter(|v| *v != CacheVariant::Memcached) {
                let ratio = latency_point(points, CacheVariant::Memcached, workload, size)
                    .zip(latency_point(points, v, workload, size))
                    .map(|(mc, p)| mc.us_p50 / p.us_p50);
                row += &format!(" | {:>16}", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
            }
            out += &row;
            out += "\n";
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.workload.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out += "\nratio: memcached's p50 / this variant's p50 (higher is better).\n";
    out += "target: over the fabric, GET p50 at least 4x lower than memcached over TCP at 32 B and 4 KB\n";
    for size in [32usize, 4096] {
        let ratio = latency_point(points, CacheVariant::Memcached, Workload::Get, size)
            .zip(latency_point(points, CacheVariant::CacheFabric, Workload::Get, size))
            .map(|(mc, f)| mc.us_p50 / f.us_p50);
        out += &match ratio {
            Some(r) => format!("  GET {}: {} -> {}\n", format_size(size), format_ratio(r), if r >= 4.0 { "met" } else { "MISSED" }),
            None => format!("  GET {}: not measured in this run\n", format_size(size)),
        };
    }
    out
}

fn short(v: CacheVariant) -> &'static str {
    match v {
        CacheVariant::Memcached => "mc",
        CacheVariant::CacheTcp => "tcp",
        CacheVariant::CacheFabric => "fabric",
    }
}

pub fn latency_json(points: &[LatencyPoint], run: &LatencyRun, machine: &Machine) -> Value {
    json!({
        "test": "mem lat",
        "machine": machine.to_json(),
        "server_threads": run.servers.threads,
        "memory_mib": run.servers.memory_mib,
        "iterations": run.iterations,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "workload": p.workload.name(), "size_bytes": p.size_bytes,
            "ops": p.ops, "us_p50": p.us_p50, "us_p99": p.us_p99, "us_avg": p.us_avg,
            "ops_per_s": p.ops_per_s, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------
// Throughput.

#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputPoint {
    pub variant: CacheVariant,
    pub workload: Workload,
    pub size_bytes: usize,
    /// Operations per second of every trial; the median is reported.
    pub ops_per_s_trials: Vec<f64>,
    pub error: Option<String>,
}

impl ThroughputPoint {
    pub fn ops_per_s(&self) -> Option<f64> {
        if self.error.is_some() {
            return None;
        }
        median(&self.ops_per_s_trials)
    }
}

#[derive(Debug, Clone)]
pub struct ThroughputRun {
    pub workloads: Vec<Workload>,
    pub sizes: Vec<usize>,
    pub client_threads: usize,
    pub seconds_per_trial: f64,
    pub trials: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

/// `threads` clients, each with its own connection, run `workload` for `seconds`; operations/s.
fn throughput_trial(addr: ServerAddr, workload: Workload, size_bytes: usize, threads: usize, seconds: f64) -> Result<f64, String> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let total_ops = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (barrier, stop, total_ops) = (barrier.clone(), stop.clone(), total_ops.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let setup = (|| -> Result<_, String> {
                let client = connect(addr)?;
                if t == 0 {
                    preload(&client, size_bytes)?;
                }
                Ok(client)
            })();
            barrier.wait(); // every thread connected (or failed)
            let client = setup?;
            barrier.wait(); // start
            let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
            let value = value_of(size_bytes);
            let mut scratch = Vec::new();
            let mut i = t as u64 * 7919;
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                one_op(&client, workload, i, &keys, &value, &mut scratch)?;
                i += 1;
                ops += 1;
            }
            total_ops.fetch_add(ops, Ordering::Relaxed);
            Ok(())
        }));
    }
    barrier.wait();
    barrier.wait();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for h in handles {
        if let Err(e) = h.join().unwrap_or_else(|_| Err("client thread panicked".into())) {
            first_error.get_or_insert(e);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    match first_error {
        Some(e) => Err(e),
        None => Ok(total_ops.load(Ordering::Relaxed) as f64 / elapsed),
    }
}

pub fn run_throughput(run: &ThroughputRun) -> Result<Vec<ThroughputPoint>, String> {
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut points: Vec<ThroughputPoint> = Vec::new();
    for &workload in &run.workloads {
        for &size_bytes in &run.sizes {
            let start = points.len();
            for &variant in &run.variants {
                points.push(ThroughputPoint { variant, workload, size_bytes, ops_per_s_trials: Vec::new(), error: None });
            }
            // Trials interleave the variants, so a noisy second hurts all of them alike.
            for trial in 0..run.trials {
                for (k, &variant) in run.variants.iter().enumerate() {
                    let point = &mut points[start + k];
                    if point.error.is_some() {
                        continue;
                    }
                    if run.progress {
                        eprintln!(
                            "ohb mem thr: {} {} {} trial {}/{}",
                            variant.name(),
                            workload.name(),
                            format_size(size_bytes),
                            trial + 1,
                            run.trials
                        );
                    }
                    match throughput_trial(servers.addr(variant), workload, size_bytes, run.client_threads, run.seconds_per_trial) {
                        Ok(rate) => point.ops_per_s_trials.push(rate),
                        Err(e) => point.error = Some(e),
                    }
                }
            }
        }
    }
    Ok(points)
}

fn throughput_of(points: &[ThroughputPoint], variant: CacheVariant, workload: Workload, size: usize) -> Option<f64> {
    points.iter().find(|p| p.variant == variant && p.workload == workload && p.size_bytes == size)?.ops_per_s()
}

pub fn render_throughput(points: &[ThroughputPoint], run: &ThroughputRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!(
        "# ohb mem thr: operations per second, {} client threads with one connection each\n# machine: {}\n",
        run.client_threads,
        machine.describe()
    );
    out += &format!(
        "# servers: {} threads, -m {} MiB; median of {} trials of {:.1} s, variants interleaved\n",
        run.servers.threads, run.servers.memory_mib, run.trials, run.seconds_per_trial
    );
    let mut header = format!("{:>4} {:>8}", "op", "size");
    for v in &run.variants {
        header += &format!(" | {:>12}", v.name());
    }
    for v in run.variants.iter().filter(|v| **v != CacheVariant::Memcached) {
        header += &format!(" | {:>12}", format!("x vs mc ({})", short(*v)));
    }
    out += &header;
    out += "\n";
    for &workload in &run.workloads {
        for &size in &run.sizes {
            let mut row = format!("{:>4} {:>8}", workload.name(), format_size(size));
            for &v in &run.variants {
                row += &format!(" | {:>12}", throughput_of(points, v, workload, size).map(format_rate).unwrap_or_else(|| "err".into()));
            }
            for v in run.variants.iter().copied().filter(|v| *v != CacheVariant::Memcached) {
                let ratio = throughput_of(points, v, workload, size)
                    .zip(throughput_of(points, CacheVariant::Memcached, workload, size))
                    .map(|(x, mc)| x / mc);
                row += &format!(" | {:>12}", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
            }
            out += &row;
            out += "\n";
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.workload.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out += "\ntargets: over TCP >= 1.0x memcached for GET and SET at 32 B and 4 KB; over the fabric >= 2x memcached\n";
    for workload in [Workload::Get, Workload::Set] {
        for size in [32usize, 4096] {
            let mc = throughput_of(points, CacheVariant::Memcached, workload, size);
            for (v, target) in [(CacheVariant::CacheTcp, 1.0), (CacheVariant::CacheFabric, 2.0)] {
                let line = match mc.zip(throughput_of(points, v, workload, size)) {
                    Some((mc, x)) => {
                        let r = x / mc;
                        format!("{} -> {}", format_ratio(r), if r >= target { "met" } else { "MISSED" })
                    }
                    None => "not measured in this run".into(),
                };
                out += &format!("  {} {} {} (>= {target}x): {line}\n", workload.name(), format_size(size), v.name());
            }
        }
    }
    out
}

pub fn throughput_json(points: &[ThroughputPoint], run: &ThroughputRun, machine: &Machine) -> Value {
    json!({
        "test": "mem thr",
        "machine": machine.to_json(),
        "server_threads": run.servers.threads,
        "client_threads": run.client_threads,
        "seconds_per_trial": run.seconds_per_trial,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "workload": p.workload.name(), "size_bytes": p.size_bytes,
            "ops_per_s": p.ops_per_s(), "ops_per_s_trials": p.ops_per_s_trials, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------
// Non-blocking (OHB's ohb_memlat_nb).

/// HiBD's non-blocking calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbRequest {
    Iset,
    Iget,
    Bset,
    Bget,
}

impl NbRequest {
    pub const ALL: [NbRequest; 4] = [NbRequest::Iset, NbRequest::Iget, NbRequest::Bset, NbRequest::Bget];

    pub fn name(self) -> &'static str {
        match self {
            NbRequest::Iset => "iset",
            NbRequest::Iget => "iget",
            NbRequest::Bset => "bset",
            NbRequest::Bget => "bget",
        }
    }

    pub fn parse(text: &str) -> Option<NbRequest> {
        NbRequest::ALL.into_iter().find(|r| r.name().eq_ignore_ascii_case(text))
    }

    fn is_get(self) -> bool {
        matches!(self, NbRequest::Iget | NbRequest::Bget)
    }
}

/// How completions are found: `wait` on each request, or `test` them round-robin until done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbProgress {
    Wait,
    Test,
}

impl NbProgress {
    pub fn name(self) -> &'static str {
        match self {
            NbProgress::Wait => "wait",
            NbProgress::Test => "test",
        }
    }

    pub fn parse(text: &str) -> Option<NbProgress> {
        [NbProgress::Wait, NbProgress::Test].into_iter().find(|p| p.name().eq_ignore_ascii_case(text))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbPoint {
    pub variant: CacheVariant,
    pub request: NbRequest,
    pub size_bytes: usize,
    /// The same operations through the blocking calls (set/get), one at a time.
    pub blocking_ops_per_s: f64,
    pub nonblocking_ops_per_s: f64,
    /// Time per operation when `req_thresh` are issued before completing them, microseconds.
    pub nonblocking_us_avg: f64,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NbRun {
    pub requests: Vec<NbRequest>,
    pub sizes: Vec<usize>,
    pub progress_type: NbProgress,
    /// Requests issued before the batch is completed (OHB's --reqthresh, default 32).
    pub req_thresh: usize,
    pub ops: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

/// Issues `ops` requests in batches of `req_thresh`, completing each batch by wait or test.
fn nonblocking_pass(client: &Client, run: &NbRun, request: NbRequest, size_bytes: usize) -> Result<f64, String> {
    let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
    let value = value_of(size_bytes);
    let mut dests: Vec<Vec<u8>> = vec![Vec::with_capacity(size_bytes); run.req_thresh];
    let started = Instant::now();
    let mut issued = 0usize;
    while issued < run.ops {
        let batch = run.req_thresh.min(run.ops - issued);
        let mut pending = Vec::with_capacity(batch);
        for (k, dest) in dests.iter_mut().take(batch).enumerate() {
            let key = &keys[(issued + k) % keys.len()];
            let req = match request {
                NbRequest::Iset => client.iset(key, &value, 0, 0),
                NbRequest::Bset => client.bset(key, &value, 0, 0),
                NbRequest::Iget => client.iget(key, dest),
                NbRequest::Bget => client.bget(key, dest),
            }
            .map_err(|e| format!("{}: {e}", request.name()))?;
            pending.push(Some(req));
        }
        let mut left = batch;
        while left > 0 {
            for slot in pending.iter_mut() {
                let Some(req) = slot.as_mut() else { continue };
                let outcome = match run.progress_type {
                    NbProgress::Wait => Some(client.wait(req)),
                    NbProgress::Test => match client.test(req) {
                        std::task::Poll::Ready(r) => Some(r),
                        std::task::Poll::Pending => None,
                    },
                };
                if let Some(result) = outcome {
                    result.map_err(|e| format!("{} completion: {e}", request.name()))?;
                    *slot = None;
                    left -= 1;
                }
            }
        }
        drop(pending);
        if request.is_get() {
            if let Some(bad) = dests.iter().take(batch).find(|d| d.len() != size_bytes) {
                return Err(format!("{} returned {} bytes, expected {size_bytes}", request.name(), bad.len()));
            }
        }
        issued += batch;
    }
    Ok(run.ops as f64 / started.elapsed().as_secs_f64())
}

fn blocking_pass(client: &Client, run: &NbRun, request: NbRequest, size_bytes: usize) -> Result<f64, String> {
    let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
    let value = value_of(size_bytes);
    let workload = if request.is_get() { Workload::Get } else { Workload::Set };
    let mut scratch = Vec::new();
    let started = Instant::now();
    for i in 0..run.ops as u64 {
        one_op(client, workload, i, &keys, &value, &mut scratch)?;
    }
    Ok(run.ops as f64 / started.elapsed().as_secs_f64())
}

pub fn run_nonblocking(run: &NbRun) -> Result<Vec<NbPoint>, String> {
    assert!(run.req_thresh > 0 && run.ops > 0);
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut clients = Vec::new();
    for &variant in &run.variants {
        clients.push((variant, connect(servers.addr(variant))?));
    }
    let mut points = Vec::new();
    for &request in &run.requests {
        for &size_bytes in &run.sizes {
            for (variant, client) in clients.iter_mut() {
                if run.progress {
                    eprintln!("ohb mem nb: {} {} {} ({})", variant.name(), request.name(), format_size(size_bytes), run.progress_type.name());
                }
                let measured = (|| -> Result<(f64, f64), String> {
                    preload(client, size_bytes)?;
                    // A short warm-up of both paths, then the measured passes.
                    let warm = NbRun { ops: run.ops.min(200), ..run.clone() };
                    blocking_pass(client, &warm, request, size_bytes)?;
                    nonblocking_pass(client, &warm, request, size_bytes)?;
                    let blocking = blocking_pass(client, run, request, size_bytes)?;
                    let nonblocking = nonblocking_pass(client, run, request, size_bytes)?;
                    Ok((blocking, nonblocking))
                })();
                points.push(match measured {
                    Ok((blocking, nonblocking)) => NbPoint {
                        variant: *variant,
                        request,
                        size_bytes,
                        blocking_ops_per_s: blocking,
                        nonblocking_ops_per_s: nonblocking,
                        nonblocking_us_avg: 1e6 / nonblocking,
                        error: None,
                    },
                    Err(error) => NbPoint {
                        variant: *variant,
                        request,
                        size_bytes,
                        blocking_ops_per_s: 0.0,
                        nonblocking_ops_per_s: 0.0,
                        nonblocking_us_avg: 0.0,
                        error: Some(error),
                    },
                });
            }
        }
    }
    drop(servers);
    Ok(points)
}

pub fn render_nonblocking(points: &[NbPoint], run: &NbRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!(
        "# ohb mem nb: non-blocking calls, {} requests in batches of {} (--reqthresh), completed by {}\n# machine: {}\n",
        run.ops,
        run.req_thresh,
        run.progress_type.name(),
        machine.describe()
    );
    out += "# blocking: the same operations through set/get, one at a time; ops/s and us per op\n";
    out += &format!("{:>5} {:>8}", "req", "size");
    for v in &run.variants {
        out += &format!(" | {:>30}", format!("{} blocking / nb (us/op)", v.name()));
    }
    out += &format!(" | {:>14}\n", "fabric nb x mc");
    for &request in &run.requests {
        for &size in &run.sizes {
            out += &format!("{:>5} {:>8}", request.name(), format_size(size));
            for &v in &run.variants {
                let p = points.iter().find(|p| p.variant == v && p.request == request && p.size_bytes == size);
                let cell = match p {
                    Some(p) if p.error.is_none() => format!(
                        "{} / {} ({})",
                        format_rate(p.blocking_ops_per_s),
                        format_rate(p.nonblocking_ops_per_s),
                        format_us(p.nonblocking_us_avg)
                    ),
                    _ => "err".into(),
                };
                out += &format!(" | {cell:>30}");
            }
            let rate = |v: CacheVariant| {
                points
                    .iter()
                    .find(|p| p.variant == v && p.request == request && p.size_bytes == size && p.error.is_none())
                    .map(|p| p.nonblocking_ops_per_s)
            };
            let ratio = rate(CacheVariant::CacheFabric).zip(rate(CacheVariant::Memcached)).map(|(f, m)| f / m);
            out += &format!(" | {:>14}\n", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.request.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out
}

pub fn nonblocking_json(points: &[NbPoint], run: &NbRun, machine: &Machine) -> Value {
    json!({
        "test": "mem nb",
        "machine": machine.to_json(),
        "progress": run.progress_type.name(),
        "req_thresh": run.req_thresh,
        "ops": run.ops,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "request": p.request.name(), "size_bytes": p.size_bytes,
            "blocking_ops_per_s": p.blocking_ops_per_s, "nonblocking_ops_per_s": p.nonblocking_ops_per_s,
            "nonblocking_us_avg": p.nonblocking_us_avg, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}

/// Writes `value` as pretty JSON, creating the directory.
pub fn write_json_file(path: &Path, value: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(file, "{}", serde_json::to_string_pretty(value).expect("JSON")).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcement_parses() {
        let (tcp, fabric) =
            parse_cache_announcement("slipstream-cache listening tcp=127.0.0.1:4000 fabric=127.0.0.1:4001").unwrap();
        assert_eq!(tcp.port(), 4000);
        assert_eq!(fabric.port(), 4001);
        assert!(parse_cache_announcement("something else").is_none());
        assert!(parse_cache_announcement("slipstream-cache listening tcp=127.0.0.1:4000").is_none());
    }

    #[test]
    fn mix_is_one_set_in_ten() {
        let sets = (0..1000).filter(|&i| Workload::Mix.is_set(i)).count();
        assert_eq!(sets, 100);
        assert!((0..100).all(|i| !Workload::Get.is_set(i) && Workload::Set.is_set(i)));
    }

    #[test]
    fn names_round_trip() {
        for v in CacheVariant::ALL {
            assert_eq!(CacheVariant::parse(v.name()), Some(v));
        }
        for w in Workload::ALL {
            assert_eq!(Workload::parse(&w.name().to_lowercase()), Some(w));
        }
    }
}
