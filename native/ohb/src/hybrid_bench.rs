//! `ohb mem hybrid` (after OHB's `ohb_memhybrid`) and `ohb mem nb --hybrid`: the cache when the
//! data set does not fit in memory.
//!
//! `ohb mem hybrid` loads `spill_factor x -m` of data (every item set once, keys in order) into
//! four servers, one after the other, each started fresh: slipstream-cache RAM-only, slipstream-
//! cache with its SSD tier (`--ssd-path DIR --ssd-size MB`), memcached and memcached with extstore
//! (`-o ext_path=FILE:SIZEm`). Then the same seeded key sequence (uniform, or OHB's NORMAL) is read
//! from each over TCP (binary protocol, `cache-client`), one get at a time, counting hits, misses
//! and wrong values (a hit must carry exactly the bytes and flags that were set). A miss costs
//! `miss_penalty_ms` (fetching the item from the backing database): the penalty is ADDED to that
//! get's measured latency, never slept. A fit-in-memory comparison (spill 0.5) measures what the
//! SSD tier costs when nothing spills, RAM-only and hybrid interleaved in rounds, over TCP and the
//! fabric. The non-blocking part measures blocking gets against `iget`/`bget` batches on the hybrid
//! server over the fabric, with the data spilled.
//!
//! The SSD tier's flags are new: when the server refuses them (and its `--help` does not list
//! them) the hybrid rows say "not available" instead of failing the run.
//!
//! Architecture invariant (as `cache_bench`): servers are separate processes bound to 127.0.0.1,
//! killed with ohb; their temporary directories are removed after them.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cache_client::{Client, Error as ClientError, ServerAddr};
use serde_json::{json, Value};

use crate::args::format_size;
use crate::cache_bench::{
    connect, memcached_runs_as_nobody, start_cache_with, start_memcached_with, NbProgress, ServerSettings, StartExtras,
};
use crate::child::{run_captured, ChildGuard};
use crate::machine::Machine;
use crate::report::{format_rate, format_ratio, format_us, Check};
use crate::stats::{median, percentile_sorted};

/// OHB's default spill factor: data set = 1.5 x memory.
pub const SPILL_FACTOR_DEFAULT: f64 = 1.5;
/// The fit-in-memory comparison's spill factor: half of memory holds the data.
pub const FIT_SPILL_FACTOR: f64 = 0.5;
/// SSD (and extstore file) size = this x the data set size: room to spare.
pub const SSD_ROOM_FACTOR: f64 = 2.0;
/// Target: with spill 1.5 and uniform keys, the hybrid server answers every get.
pub const HYBRID_SUCCESS_PERCENT_TARGET: f64 = 100.0;
/// Target: average latency with the miss penalty at least this many times lower than RAM-only.
pub const PENALTY_SPEEDUP_TARGET: f64 = 2.0;
/// Target: data fits in memory, hybrid latency at most this times RAM-only.
pub const FIT_SLOWDOWN_MAX: f64 = 1.05;
/// Target: non-blocking gets on the hybrid server at least this times the blocking gets' rate.
pub const NB_SPEEDUP_TARGET: f64 = 2.5;
/// memcached 1.6's `ext_page_size` default (MB); a smaller file gets smaller pages (see
/// `extstore_option`).
pub const MEMCACHED_EXT_PAGE_MB_DEFAULT: u64 = 64;
/// Largest value the bench sets (the servers' default -I is 1 MiB, key and header included).
pub const VALUE_BYTES_MAX: usize = 512 << 10;
/// How long `slipstream-cache --help` may take (probe for the SSD flags).
const HELP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM before it gets SIGKILL.
const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of a server's captured stderr forwarded to ours when it stops.
const SERVER_LOG_LINES_MAX: usize = 40;

// ---------------------------------------------------------------------------------------------
// Keys, values and their distributions (pure).

/// How keys are drawn (OHB's --scanmode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Every item equally likely.
    Uniform,
    /// Normal around the middle of the key space, standard deviation items / 6, clamped.
    Normal,
}

impl Scan {
    pub fn name(self) -> &'static str {
        match self {
            Scan::Uniform => "uniform",
            Scan::Normal => "normal",
        }
    }

    pub fn parse(text: &str) -> Option<Scan> {
        [Scan::Uniform, Scan::Normal].into_iter().find(|s| s.name().eq_ignore_ascii_case(text))
    }
}

/// SplitMix64: small, seedable, and the same sequence on every machine (no crate needed).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-40 for the n used here).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A standard normal deviate (Box-Muller).
    pub fn standard_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// SplitMix64's finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// OHB's NORMAL mode: the item at `z` standard deviations from the middle of `items`, with
/// standard deviation items / 6, clamped to the key space.
pub fn normal_index(z: f64, items: usize) -> usize {
    assert!(items > 0);
    let n = items as f64;
    let x = (n / 2.0 + z * n / 6.0).floor();
    x.clamp(0.0, n - 1.0) as usize
}

/// Draws item indices: the same seed gives the same sequence for every server.
#[derive(Debug, Clone)]
pub struct KeyPicker {
    scan: Scan,
    items: usize,
    rng: Rng,
}

impl KeyPicker {
    pub fn new(scan: Scan, items: usize, seed: u64) -> KeyPicker {
        assert!(items > 0, "no items to pick from");
        KeyPicker { scan, items, rng: Rng::new(seed) }
    }

    pub fn next_index(&mut self) -> usize {
        match self.scan {
            Scan::Uniform => self.rng.below(self.items),
            Scan::Normal => normal_index(self.rng.standard_normal(), self.items),
        }
    }
}

/// The seed of client thread `thread` (threads read different sequences; servers the same ones).
pub fn thread_seed(seed: u64, thread: usize) -> u64 {
    mix64(seed ^ (thread as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Items of `value_bytes` that make `spill_factor` x `max_memory_mb` MiB of values (at least 1).
pub fn item_count(spill_factor: f64, max_memory_mb: u64, value_bytes: usize) -> usize {
    assert!(spill_factor > 0.0 && value_bytes > 0);
    let bytes = spill_factor * (max_memory_mb as f64) * (1u64 << 20) as f64;
    ((bytes / value_bytes as f64 + 1e-9).floor() as usize).max(1)
}

/// SSD tier (and extstore file) size in MB: `SSD_ROOM_FACTOR` x the data set, rounded up.
pub fn ssd_size_mb(spill_factor: f64, max_memory_mb: u64) -> u64 {
    let mb = SSD_ROOM_FACTOR * spill_factor * max_memory_mb as f64;
    // Tolerate float noise (2 x 1.1 x 10 = 22.000000000000004 is 22 MB).
    ((mb - 1e-6).ceil() as u64).max(1)
}

/// memcached's `-o` value for an extstore file of `size_mb` at `path`: `ext_path=PATH:SIZEm`,
/// with the default 64 MB pages unless the file would hold fewer than 2 of them (then pages of a
/// quarter of the file, at least 1 MB).
pub fn extstore_option(path: &Path, size_mb: u64) -> String {
    let mut option = format!("ext_path={}:{size_mb}m", path.display());
    if size_mb < 2 * MEMCACHED_EXT_PAGE_MB_DEFAULT {
        option += &format!(",ext_page_size={}", (size_mb / 4).max(1));
    }
    option
}

/// The key of item `index`.
pub fn key_of(index: usize) -> Vec<u8> {
    format!("ohb:hybrid:{index}").into_bytes()
}

/// The flags set with item `index` (checked on every hit, besides the value).
pub fn flags_of(index: usize) -> u32 {
    (index as u32).rotate_left(16) ^ 0x00A5_5A00
}

fn value_word(index: usize, word: usize) -> [u8; 8] {
    mix64((index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ word as u64).to_le_bytes()
}

/// Item `index`'s value: `len` bytes that differ from every other item's.
pub fn fill_value(index: usize, len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.resize(len, 0);
    for (word, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&value_word(index, word)[..chunk.len()]);
    }
}

/// Whether `got` is exactly item `index`'s value of `len` bytes.
pub fn value_matches(index: usize, len: usize, got: &[u8]) -> bool {
    got.len() == len && got.chunks(8).enumerate().all(|(word, chunk)| chunk == &value_word(index, word)[..chunk.len()])
}

/// Average get latency in us with `miss_penalty_ms` added for every miss.
pub fn average_with_penalty_us(raw_total_ns: u64, misses: usize, gets: usize, miss_penalty_ms: f64) -> f64 {
    assert!(gets > 0);
    (raw_total_ns as f64 / 1000.0 + misses as f64 * miss_penalty_ms * 1000.0) / gets as f64
}

// ---------------------------------------------------------------------------------------------
// Servers.

/// The four servers of the spill comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HybridServer {
    /// slipstream-cache, `-m M` only.
    CacheRam,
    /// slipstream-cache with its SSD tier: `--ssd-path DIR --ssd-size S`.
    CacheHybrid,
    /// memcached, `-m M`.
    Memcached,
    /// memcached with extstore on a file of S MB.
    MemcachedExt,
}

impl HybridServer {
    pub const ALL: [HybridServer; 4] =
        [HybridServer::CacheRam, HybridServer::CacheHybrid, HybridServer::Memcached, HybridServer::MemcachedExt];

    pub fn name(self) -> &'static str {
        match self {
            HybridServer::CacheRam => "cache-ram",
            HybridServer::CacheHybrid => "cache-hybrid",
            HybridServer::Memcached => "memcached",
            HybridServer::MemcachedExt => "memcached-ext",
        }
    }

    pub fn parse(text: &str) -> Option<HybridServer> {
        HybridServer::ALL.into_iter().find(|s| s.name() == text)
    }

    /// Whether the server has a second tier (and so gets a temporary directory).
    pub fn has_ssd(self) -> bool {
        matches!(self, HybridServer::CacheHybrid | HybridServer::MemcachedExt)
    }

    fn is_memcached(self) -> bool {
        matches!(self, HybridServer::Memcached | HybridServer::MemcachedExt)
    }

    /// The command-line flags this server gets beyond the common ones, for the header.
    pub fn describe_flags(self, memory_mb: u64, ssd_mb: u64) -> String {
        match self {
            HybridServer::CacheRam => format!("slipstream-cache -m {memory_mb}"),
            HybridServer::CacheHybrid => format!("slipstream-cache -m {memory_mb} --ssd-path DIR --ssd-size {ssd_mb}"),
            HybridServer::Memcached => format!("memcached -m {memory_mb}"),
            HybridServer::MemcachedExt => {
                format!("memcached -m {memory_mb} -o {}", extstore_option(Path::new("DIR/extstore"), ssd_mb))
            }
        }
    }
}

/// A directory under the system temp dir, removed (with its contents) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A fresh `PREFIX-PID-NANOS-N` directory. Directories of that shape left by an ohb that was
    /// killed (its pid no longer runs) are removed first.
    pub fn new(prefix: &str) -> Result<TempDir, String> {
        let base = std::env::temp_dir();
        remove_stale_dirs(&base, prefix);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        for attempt in 0..100u32 {
            let path = base.join(format!("{prefix}-{}-{nanos}-{attempt}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create a directory in {}: {e}", base.display())),
            }
        }
        Err(format!("cannot create a fresh directory in {}", base.display()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The pid in a `PREFIX-PID-NANOS-N` directory name, if `name` has exactly that shape.
pub fn temp_dir_owner(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let parts: Vec<&str> = rest.split('-').collect();
    if parts.len() != 3 || !parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    parts[0].parse().ok()
}

fn remove_stale_dirs(base: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| temp_dir_owner(n, prefix)) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() && entry.path().is_dir() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("ohb: cannot remove {}: {e}", self.path.display());
        }
    }
}

/// A started server. Dropping it kills the server, forwards its captured stderr (if any) to
/// ours, then removes its directory (fields drop in order: child before dir).
struct Running {
    server: HybridServer,
    child: ChildGuard,
    tcp: SocketAddr,
    fabric: Option<SocketAddr>,
    log: Option<PathBuf>,
    _dir: Option<TempDir>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SIGTERM first: slipstream-cache then closes its fabric node, so the client's node sees
        // the peer leave instead of failing it later (and logging that it did).
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
        unsafe { libc::kill(self.child.pid() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait_timeout(SERVER_STOP_TIMEOUT);
        self.child.kill();
        let Some(text) = self.log.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) else { return };
        for line in text.lines().filter(|l| !l.trim().is_empty()).take(SERVER_LOG_LINES_MAX) {
            eprintln!("{} (stderr): {line}", self.server.name());
        }
    }
}

/// Why a server row has no figures.
#[derive(Debug, Clone, PartialEq)]
pub enum Unmeasured {
    /// The server lacks the feature (slipstream-cache without the SSD tier's flags): not a failure.
    NotAvailable(String),
    /// The measurement failed: the run exits non-zero.
    Failed(String),
}

impl Unmeasured {
    pub fn is_failure(&self) -> bool {
        matches!(self, Unmeasured::Failed(_))
    }

    /// "not available" or "FAILED", for the target lines (the table has the reason).
    pub fn short(&self) -> &'static str {
        match self {
            Unmeasured::NotAvailable(_) => "not available",
            Unmeasured::Failed(_) => "FAILED",
        }
    }

    pub fn text(&self) -> String {
        match self {
            Unmeasured::NotAvailable(why) => format!("not available: {why}"),
            Unmeasured::Failed(why) => format!("FAILED: {why}"),
        }
    }
}

impl From<String> for Unmeasured {
    fn from(error: String) -> Unmeasured {
        Unmeasured::Failed(error)
    }
}

/// The first non-empty line of a log, for error messages.
fn first_log_line(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

/// Whether `slipstream-cache --help` lists the SSD tier's flags.
fn cache_lists_ssd_flags(cache_exe: &Path) -> Result<bool, String> {
    let mut cmd = Command::new(cache_exe);
    cmd.arg("--help");
    let out = run_captured("slipstream-cache --help", cmd, HELP_TIMEOUT)?;
    Ok(help_lists_ssd_flags(&out.stdout) || help_lists_ssd_flags(&out.stderr))
}

/// Whether a usage text names both `--ssd-path` and `--ssd-size`.
pub fn help_lists_ssd_flags(help: &str) -> bool {
    help.contains("--ssd-path") && help.contains("--ssd-size")
}

/// Gives memcached's user (`nobody`) the directory extstore writes its file in.
fn chown_to_nobody(dir: &Path) -> Result<(), String> {
    // SAFETY: getpwnam with a NUL-terminated name; the record is read before any other call.
    let (uid, gid) = unsafe {
        let pw = libc::getpwnam(c"nobody".as_ptr());
        if pw.is_null() {
            return Err("no user 'nobody' to run memcached as".into());
        }
        ((*pw).pw_uid, (*pw).pw_gid)
    };
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(|e| format!("chown {}: {e}", dir.display()))
}

/// Starts `server` fresh with `-m memory_mb` (and an SSD tier / extstore file of `ssd_mb`).
fn start_server(
    server: HybridServer,
    settings: &ServerSettings,
    memory_mb: u64,
    ssd_mb: u64,
) -> Result<Running, Unmeasured> {
    let settings = ServerSettings { memory_mib: memory_mb as usize, ..settings.clone() };
    let dir = if server.has_ssd() { Some(TempDir::new("ohb-hybrid")?) } else { None };
    let mut extras = StartExtras::default();
    if let Some(dir) = &dir {
        extras.stderr_file = Some(dir.path().join("server.log"));
    }
    match server {
        HybridServer::CacheRam | HybridServer::CacheHybrid => {
            if let (HybridServer::CacheHybrid, Some(dir)) = (server, &dir) {
                let ssd = dir.path().join("ssd");
                std::fs::create_dir(&ssd).map_err(|e| format!("{}: {e}", ssd.display()))?;
                extras.args.extend([
                    OsString::from("--ssd-path"),
                    ssd.into_os_string(),
                    OsString::from("--ssd-size"),
                    OsString::from(ssd_mb.to_string()),
                ]);
            }
            match start_cache_with(&settings, &extras) {
                Ok((child, tcp, fabric)) => {
                    Ok(Running { server, child, tcp, fabric: Some(fabric), log: extras.stderr_file, _dir: dir })
                }
                Err(e) => {
                    let said = extras.stderr_file.as_deref().and_then(first_log_line);
                    if server == HybridServer::CacheHybrid && !cache_lists_ssd_flags(&settings.cache_exe)? {
                        return Err(Unmeasured::NotAvailable(format!(
                            "slipstream-cache has no --ssd-path/--ssd-size yet ({})",
                            said.unwrap_or(e)
                        )));
                    }
                    Err(Unmeasured::Failed(match said {
                        Some(line) => format!("{e}; it said: {line}"),
                        None => e,
                    }))
                }
            }
        }
        HybridServer::Memcached | HybridServer::MemcachedExt => {
            if let (HybridServer::MemcachedExt, Some(dir)) = (server, &dir) {
                if memcached_runs_as_nobody() {
                    chown_to_nobody(dir.path())?;
                }
                extras.args.extend([
                    OsString::from("-o"),
                    OsString::from(extstore_option(&dir.path().join("extstore"), ssd_mb)),
                ]);
            }
            match start_memcached_with(&settings, &extras) {
                Ok((child, tcp)) => Ok(Running { server, child, tcp, fabric: None, log: extras.stderr_file, _dir: dir }),
                Err(e) => {
                    let said = extras.stderr_file.as_deref().and_then(first_log_line);
                    Err(Unmeasured::Failed(match said {
                        Some(line) => format!("{e}; it said: {line}"),
                        None => e,
                    }))
                }
            }
        }
    }
}

/// The stats worth showing after a run: items, evictions, hits and misses, and the second tier's
/// (`ssd_*` for slipstream-cache; `extstore_*` and `*_extstore*` for memcached).
pub fn relevant_stats(server: HybridServer, stats: &[(String, String)]) -> Vec<(String, String)> {
    const COMMON: [&str; 4] = ["curr_items", "evictions", "get_hits", "get_misses"];
    stats
        .iter()
        .filter(|(name, _)| {
            COMMON.contains(&name.as_str())
                || if server.is_memcached() {
                    name.starts_with("extstore_") || name.contains("_extstore")
                } else {
                    name.starts_with("ssd_")
                }
        })
        .cloned()
        .collect()
}

fn stat_of<'a>(stats: &'a [(String, String)], name: &str) -> Option<&'a str> {
    stats.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

fn server_stats(client: &Client) -> Result<Vec<(String, String)>, String> {
    let mut all = client.stats(None);
    match all.pop() {
        Some((_, Ok(stats))) => Ok(stats),
        Some((addr, Err(e))) => Err(format!("stats from {addr:?}: {e}")),
        None => Err("stats: no server".into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Loading and reading.

/// Sets every item once, keys in order. Refused sets (the server answered with an error status,
/// e.g. out of memory) are counted; a broken connection fails the load.
fn load(client: &Client, keys: &[Vec<u8>], value_bytes: usize) -> Result<(usize, f64), String> {
    let mut value = Vec::with_capacity(value_bytes);
    let mut refused = 0usize;
    let started = Instant::now();
    for (index, key) in keys.iter().enumerate() {
        fill_value(index, value_bytes, &mut value);
        match client.set(key, &value, flags_of(index), 0) {
            Ok(()) => {}
            Err(e) if e.is_connection_error() => return Err(format!("set item {index}: {e}")),
            Err(_) => refused += 1,
        }
    }
    Ok((refused, started.elapsed().as_secs_f64()))
}

/// Outcome counts and raw latencies of a sequence of gets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GetTally {
    pub samples_ns: Vec<u64>,
    pub hits: usize,
    pub misses: usize,
    /// Hits whose value or flags differ from what was set (a failure, never counted as a hit).
    pub wrong: usize,
    pub first_wrong: Option<usize>,
}

impl GetTally {
    fn merge(&mut self, other: GetTally) {
        self.samples_ns.extend(other.samples_ns);
        self.hits += other.hits;
        self.misses += other.misses;
        self.wrong += other.wrong;
        self.first_wrong = self.first_wrong.or(other.first_wrong);
    }

    pub fn gets(&self) -> usize {
        self.hits + self.misses + self.wrong
    }

    fn wrong_error(&self) -> Option<String> {
        (self.wrong > 0).then(|| {
            format!(
                "{} of {} gets returned a wrong value or flags (first: item {})",
                self.wrong,
                self.gets(),
                self.first_wrong.unwrap_or(0)
            )
        })
    }

    fn count(&mut self, index: usize, found: Option<u32>, value_bytes: usize, got: &[u8]) {
        match found {
            None => self.misses += 1,
            Some(flags) if flags == flags_of(index) && value_matches(index, value_bytes, got) => self.hits += 1,
            Some(_) => {
                self.wrong += 1;
                self.first_wrong.get_or_insert(index);
            }
        }
    }
}

/// `count` blocking gets of keys drawn by `picker`, each timed alone (checking the value is not
/// part of the time).
fn timed_gets(
    client: &Client,
    keys: &[Vec<u8>],
    value_bytes: usize,
    picker: &mut KeyPicker,
    count: usize,
) -> Result<GetTally, String> {
    let mut tally = GetTally { samples_ns: Vec::with_capacity(count), ..GetTally::default() };
    let mut buf = Vec::with_capacity(value_bytes);
    for _ in 0..count {
        timed_get(client, keys, picker.next_index(), value_bytes, &mut buf, &mut tally)?;
    }
    Ok(tally)
}

/// One timed get of item `index` into `tally` (the value check is not part of the time).
fn timed_get(
    client: &Client,
    keys: &[Vec<u8>],
    index: usize,
    value_bytes: usize,
    buf: &mut Vec<u8>,
    tally: &mut GetTally,
) -> Result<(), String> {
    let t0 = Instant::now();
    let result = client.get_into(&keys[index], buf);
    tally.samples_ns.push(t0.elapsed().as_nanos() as u64);
    let found = result.map_err(|e| format!("get item {index}: {e}"))?.map(|meta| meta.flags);
    tally.count(index, found, value_bytes, buf);
    Ok(())
}

/// `gets` timed gets from `clients` threads (each its own connection and key sequence).
fn timed_gets_threads(
    addr: ServerAddr,
    keys: &[Vec<u8>],
    value_bytes: usize,
    scan: Scan,
    seed: u64,
    gets: usize,
    clients: usize,
) -> Result<(GetTally, f64), String> {
    assert!(clients > 0);
    let started = Instant::now();
    let results: Vec<Result<GetTally, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|t| {
                let count = gets / clients + usize::from(t < gets % clients);
                scope.spawn(move || {
                    let client = connect(addr)?;
                    let mut picker = KeyPicker::new(scan, keys.len(), thread_seed(seed, t));
                    timed_gets(&client, keys, value_bytes, &mut picker, count)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into()))).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut tally = GetTally::default();
    for result in results {
        tally.merge(result?);
    }
    Ok((tally, seconds))
}

// ---------------------------------------------------------------------------------------------
// The spill comparison.

#[derive(Debug, Clone)]
pub struct FitRun {
    pub rounds: usize,
    pub gets_tcp: usize,
    pub gets_fabric: usize,
}

#[derive(Debug, Clone)]
pub struct NbHybridRun {
    pub ops: usize,
    pub req_thresh: usize,
    pub progress_type: NbProgress,
    pub trials: usize,
}

#[derive(Debug, Clone)]
pub struct HybridRun {
    pub scan: Scan,
    pub max_memory_mb: u64,
    pub value_bytes: usize,
    pub miss_penalty_ms: f64,
    pub spill_factor: f64,
    pub gets: usize,
    pub clients: usize,
    pub seed: u64,
    /// Servers of the spill comparison, in order (empty: skip it).
    pub servers: Vec<HybridServer>,
    pub fit: Option<FitRun>,
    pub nb: Option<NbHybridRun>,
    /// Threads and executables (`memory_mib` is replaced by `max_memory_mb`).
    pub settings: ServerSettings,
    pub progress: bool,
}

impl HybridRun {
    pub fn items(&self) -> usize {
        item_count(self.spill_factor, self.max_memory_mb, self.value_bytes)
    }

    pub fn ssd_mb(&self) -> u64 {
        ssd_size_mb(self.spill_factor, self.max_memory_mb)
    }

    /// Checks the parameters; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.spill_factor > 0.0 && self.spill_factor <= 16.0) {
            return Err("--spill-factor must be in (0, 16]".into());
        }
        if !(2..=65536).contains(&self.max_memory_mb) {
            return Err("--max-memory-mb must be in 2..=65536".into());
        }
        if self.value_bytes == 0 || self.value_bytes > VALUE_BYTES_MAX {
            return Err(format!("--value-bytes must be in 1..={VALUE_BYTES_MAX}"));
        }
        if !(self.miss_penalty_ms >= 0.0 && self.miss_penalty_ms.is_finite()) {
            return Err("--miss-penalty-ms must be a non-negative number".into());
        }
        if self.gets == 0 || self.clients == 0 || self.clients > 64 || self.clients > self.gets {
            return Err("--gets must be positive and --clients in 1..=64 (and at most --gets)".into());
        }
        if self.items() > 50_000_000 {
            return Err("more than 50 million items: lower --spill-factor or --max-memory-mb, or raise --value-bytes".into());
        }
        if let Some(fit) = &self.fit {
            if fit.rounds == 0 || fit.gets_tcp == 0 || fit.gets_fabric == 0 {
                return Err("--rounds must be positive".into());
            }
        }
        if let Some(nb) = &self.nb {
            if nb.ops == 0 || nb.req_thresh == 0 || nb.req_thresh > 4096 || nb.trials == 0 {
                return Err("--count and --trials must be positive, --req-thresh in 1..=4096".into());
            }
        }
        Ok(())
    }
}

/// One server's figures in the spill comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct SpillMeasure {
    pub items: usize,
    pub sets_refused: usize,
    pub load_seconds: f64,
    pub gets: usize,
    pub hits: usize,
    pub misses: usize,
    pub get_seconds: f64,
    pub us_p50: f64,
    pub us_p99: f64,
    pub us_avg_raw: f64,
    /// Average with the miss penalty added for every miss.
    pub us_avg_with_penalty: f64,
    /// `relevant_stats` after the gets.
    pub stats: Vec<(String, String)>,
}

impl SpillMeasure {
    pub fn success_percent(&self) -> f64 {
        100.0 * self.hits as f64 / self.gets as f64
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpillRow {
    pub server: HybridServer,
    pub outcome: Result<SpillMeasure, Unmeasured>,
}

fn measure_spill(server: HybridServer, run: &HybridRun, keys: &[Vec<u8>]) -> Result<SpillMeasure, Unmeasured> {
    let running = start_server(server, &run.settings, run.max_memory_mb, run.ssd_mb())?;
    let addr = ServerAddr::Tcp(running.tcp);
    let client = connect(addr)?;
    let (sets_refused, load_seconds) = load(&client, keys, run.value_bytes)?;
    if run.progress {
        eprintln!("ohb mem hybrid: {}: {} items set in {load_seconds:.1} s, {} gets", server.name(), keys.len(), run.gets);
    }
    let (mut tally, get_seconds) =
        timed_gets_threads(addr, keys, run.value_bytes, run.scan, run.seed, run.gets, run.clients)?;
    if let Some(error) = tally.wrong_error() {
        return Err(Unmeasured::Failed(error));
    }
    let stats = relevant_stats(server, &server_stats(&client)?);
    drop(client);
    drop(running);
    let total_ns: u64 = tally.samples_ns.iter().sum();
    let gets = tally.gets();
    tally.samples_ns.sort_unstable();
    let us = |ns: Option<u64>| ns.unwrap_or(0) as f64 / 1000.0;
    Ok(SpillMeasure {
        items: keys.len(),
        sets_refused,
        load_seconds,
        gets,
        hits: tally.hits,
        misses: tally.misses,
        get_seconds,
        us_p50: us(percentile_sorted(&tally.samples_ns, 50.0)),
        us_p99: us(percentile_sorted(&tally.samples_ns, 99.0)),
        us_avg_raw: total_ns as f64 / gets as f64 / 1000.0,
        us_avg_with_penalty: average_with_penalty_us(total_ns, tally.misses, gets, run.miss_penalty_ms),
        stats,
    })
}

// ---------------------------------------------------------------------------------------------
// Fit in memory: RAM-only vs hybrid, interleaved rounds.

/// Median over rounds of one server's figures on one transport.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSide {
    pub us_p50_rounds: Vec<f64>,
    pub us_avg_rounds: Vec<f64>,
    pub hits: usize,
    pub misses: usize,
}

impl FitSide {
    fn new() -> FitSide {
        FitSide { us_p50_rounds: Vec::new(), us_avg_rounds: Vec::new(), hits: 0, misses: 0 }
    }

    pub fn us_p50(&self) -> f64 {
        median(&self.us_p50_rounds).unwrap_or(0.0)
    }

    pub fn us_avg(&self) -> f64 {
        median(&self.us_avg_rounds).unwrap_or(0.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitTransport {
    pub transport: &'static str,
    pub ram: FitSide,
    pub hybrid: FitSide,
    /// A second RAM-only server measured like the others: control / ram is the noise floor.
    pub control: FitSide,
}

impl FitTransport {
    /// Hybrid latency / RAM-only latency (p50, avg): <= 1.05 is the target.
    pub fn slowdowns(&self) -> (f64, f64) {
        (self.hybrid.us_p50() / self.ram.us_p50(), self.hybrid.us_avg() / self.ram.us_avg())
    }

    /// The same ratios between two identical RAM-only servers (A/A): what noise alone gives.
    pub fn noise(&self) -> (f64, f64) {
        (self.control.us_p50() / self.ram.us_p50(), self.control.us_avg() / self.ram.us_avg())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitMeasure {
    pub items: usize,
    pub ssd_mb: u64,
    pub transports: Vec<FitTransport>,
}

/// Gets on a fresh connection before a fit round's measured gets.
const FIT_WARMUP_GETS: usize = 100;

/// The order of the fit servers (0 ram, 1 hybrid, 2 control) in round `round`: rotated, so
/// every server takes every position equally often over a multiple of 3 rounds.
pub fn fit_order(round: usize) -> [usize; 3] {
    let mut order = [0, 1, 2];
    order.rotate_left(round % 3);
    order
}

/// The fit servers' names, by index.
const FIT_NAMES: [&str; 3] = ["cache-ram", "cache-hybrid", "control (cache-ram)"];

fn measure_fit(run: &HybridRun, fit: &FitRun) -> Result<FitMeasure, Unmeasured> {
    let items = item_count(FIT_SPILL_FACTOR, run.max_memory_mb, run.value_bytes);
    let ssd_mb = ssd_size_mb(FIT_SPILL_FACTOR, run.max_memory_mb);
    let keys: Vec<Vec<u8>> = (0..items).map(key_of).collect();
    // All three run at once (rounds rotate between them); hybrid first, so "not available" is cheap.
    let hybrid = start_server(HybridServer::CacheHybrid, &run.settings, run.max_memory_mb, ssd_mb)?;
    let ram = start_server(HybridServer::CacheRam, &run.settings, run.max_memory_mb, ssd_mb)?;
    let control = start_server(HybridServer::CacheRam, &run.settings, run.max_memory_mb, ssd_mb)?;
    let mut transports = Vec::new();
    for transport in ["tcp", "fabric"] {
        let addr_of = |r: &Running| match transport {
            "tcp" => ServerAddr::Tcp(r.tcp),
            _ => ServerAddr::Fabric(r.fabric.expect("slipstream-cache has a fabric port")),
        };
        if transport == "tcp" {
            for server in [&ram, &hybrid, &control] {
                let (refused, _) = load(&connect(addr_of(server))?, &keys, run.value_bytes)?;
                if refused > 0 {
                    return Err(Unmeasured::Failed(format!("{refused} sets refused while the data fits in memory")));
                }
            }
        }
        let gets = if transport == "tcp" { fit.gets_tcp } else { fit.gets_fabric };
        let mut sides = [FitSide::new(), FitSide::new(), FitSide::new()];
        for round in 0..fit.rounds {
            if run.progress {
                eprintln!("ohb mem hybrid: fit in memory, {transport}, round {}/{}", round + 1, fit.rounds);
            }
            // Fresh connections every round (a connection's thread placement is a lasting mode
            // on this VM), warmed up; then the round's keys from one server after the other, the
            // order rotating per round. Blocks, not single gets in turn: an idle server's fabric
            // progress thread stops spinning after --fabric-spin-us, a busy one does not, and
            // two spinning servers plus the client overload 2 vCPUs.
            let clients = [connect(addr_of(&ram))?, connect(addr_of(&hybrid))?, connect(addr_of(&control))?];
            let mut tallies = [GetTally::default(), GetTally::default(), GetTally::default()];
            for side in fit_order(round) {
                let mut warm = KeyPicker::new(Scan::Uniform, items, !thread_seed(run.seed, round));
                timed_gets(&clients[side], &keys, run.value_bytes, &mut warm, FIT_WARMUP_GETS)?;
                let mut picker = KeyPicker::new(Scan::Uniform, items, thread_seed(run.seed, 1000 + round));
                tallies[side] = timed_gets(&clients[side], &keys, run.value_bytes, &mut picker, gets)?;
            }
            for (side, mut tally) in tallies.into_iter().enumerate() {
                if let Some(error) = tally.wrong_error() {
                    return Err(Unmeasured::Failed(format!("{} over {transport}: {error}", FIT_NAMES[side])));
                }
                let total: u64 = tally.samples_ns.iter().sum();
                tally.samples_ns.sort_unstable();
                let s = &mut sides[side];
                s.us_p50_rounds.push(percentile_sorted(&tally.samples_ns, 50.0).unwrap_or(0) as f64 / 1000.0);
                s.us_avg_rounds.push(total as f64 / tally.samples_ns.len() as f64 / 1000.0);
                s.hits += tally.hits;
                s.misses += tally.misses;
            }
        }
        let [ram_side, hybrid_side, control_side] = sides;
        transports.push(FitTransport { transport, ram: ram_side, hybrid: hybrid_side, control: control_side });
    }
    Ok(FitMeasure { items, ssd_mb, transports })
}

// ---------------------------------------------------------------------------------------------
// Non-blocking gets on the hybrid server (ohb mem nb --hybrid).

/// How a pass issues its gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbGetMode {
    /// `get`, one at a time.
    Blocking,
    /// `iget`, `req_thresh` issued before completing them.
    Iget,
    /// `bget`, likewise.
    Bget,
}

impl NbGetMode {
    pub const ALL: [NbGetMode; 3] = [NbGetMode::Blocking, NbGetMode::Iget, NbGetMode::Bget];

    pub fn name(self) -> &'static str {
        match self {
            NbGetMode::Blocking => "get (blocking)",
            NbGetMode::Iget => "iget",
            NbGetMode::Bget => "bget",
        }
    }

    fn key(self) -> &'static str {
        match self {
            NbGetMode::Blocking => "blocking",
            NbGetMode::Iget => "iget",
            NbGetMode::Bget => "bget",
        }
    }
}

/// Blocking gets on a pass's fresh connection before the measured pass (the same for every mode).
const NB_WARMUP_GETS: usize = 200;

/// The pass order of trial `trial`: rotated, so no mode always runs first after the others.
pub fn nb_order(trial: usize) -> [NbGetMode; 3] {
    let mut order = NbGetMode::ALL;
    order.rotate_left(trial % 3);
    order
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbModeResult {
    pub mode: NbGetMode,
    pub ops_per_s_trials: Vec<f64>,
    pub hits: usize,
    pub misses: usize,
}

impl NbModeResult {
    pub fn ops_per_s(&self) -> f64 {
        median(&self.ops_per_s_trials).unwrap_or(0.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbHybridMeasure {
    pub items: usize,
    pub ssd_mb: u64,
    pub modes: Vec<NbModeResult>,
    pub stats: Vec<(String, String)>,
}

impl NbHybridMeasure {
    pub fn rate(&self, mode: NbGetMode) -> Option<f64> {
        self.modes.iter().find(|m| m.mode == mode).map(NbModeResult::ops_per_s)
    }
}

/// One pass of `ops` gets in `mode`; returns ops/s. Values are checked inside the timed loop
/// in every mode alike.
fn nb_pass(
    client: &Client,
    (keys, value_bytes): (&[Vec<u8>], usize),
    nb: &NbHybridRun,
    mode: NbGetMode,
    seed: u64,
    ops: usize,
    tally: &mut GetTally,
) -> Result<f64, String> {
    let mut picker = KeyPicker::new(Scan::Uniform, keys.len(), seed);
    let started = Instant::now();
    if mode == NbGetMode::Blocking {
        let mut buf = Vec::with_capacity(value_bytes);
        for _ in 0..ops {
            let index = picker.next_index();
            let found = client.get_into(&keys[index], &mut buf).map_err(|e| format!("get: {e}"))?.map(|m| m.flags);
            tally.count(index, found, value_bytes, &buf);
        }
        return Ok(ops as f64 / started.elapsed().as_secs_f64());
    }
    let mut dests: Vec<Vec<u8>> = vec![Vec::with_capacity(value_bytes); nb.req_thresh];
    let mut indices = vec![0usize; nb.req_thresh];
    let mut found: Vec<Option<u32>> = vec![None; nb.req_thresh];
    let mut issued = 0usize;
    while issued < ops {
        let batch = nb.req_thresh.min(ops - issued);
        for index in indices.iter_mut().take(batch) {
            *index = picker.next_index();
        }
        let mut pending = Vec::with_capacity(batch);
        for (k, dest) in dests.iter_mut().take(batch).enumerate() {
            let key = &keys[indices[k]];
            let req = match mode {
                NbGetMode::Iget => client.iget(key, dest),
                _ => client.bget(key, dest),
            }
            .map_err(|e| format!("{}: {e}", mode.name()))?;
            pending.push(Some(req));
        }
        let mut left = batch;
        while left > 0 {
            for (k, slot) in pending.iter_mut().enumerate() {
                let Some(req) = slot.as_mut() else { continue };
                let outcome = match nb.progress_type {
                    NbProgress::Wait => Some(client.wait(req)),
                    NbProgress::Test => match client.test(req) {
                        std::task::Poll::Ready(r) => Some(r),
                        std::task::Poll::Pending => None,
                    },
                };
                let Some(result) = outcome else { continue };
                found[k] = match result {
                    Ok(meta) => Some(meta.flags),
                    Err(ClientError::NotFound) => None,
                    Err(e) => return Err(format!("{} completion: {e}", mode.name())),
                };
                *slot = None;
                left -= 1;
            }
        }
        drop(pending);
        for k in 0..batch {
            tally.count(indices[k], found[k], value_bytes, &dests[k]);
        }
        issued += batch;
    }
    Ok(ops as f64 / started.elapsed().as_secs_f64())
}

fn measure_nb(run: &HybridRun, nb: &NbHybridRun) -> Result<NbHybridMeasure, Unmeasured> {
    let items = run.items();
    let ssd_mb = run.ssd_mb();
    let keys: Vec<Vec<u8>> = (0..items).map(key_of).collect();
    let mut modes: Vec<NbModeResult> =
        NbGetMode::ALL.iter().map(|&mode| NbModeResult { mode, ops_per_s_trials: Vec::new(), hits: 0, misses: 0 }).collect();
    let mut stats = Vec::new();
    for trial in 0..nb.trials {
        let seed = thread_seed(run.seed, 2000 + trial);
        for mode in nb_order(trial) {
            if run.progress {
                eprintln!("ohb mem nb --hybrid: {} trial {}/{} (fresh server)", mode.name(), trial + 1, nb.trials);
            }
            // Every pass on a fresh server loaded the same way: a pass promotes the items it reads
            // from the SSD tier, so a later pass of the same keys would find a warmer cache.
            let running = start_server(HybridServer::CacheHybrid, &run.settings, run.max_memory_mb, ssd_mb)?;
            let client = connect(ServerAddr::Fabric(running.fabric.expect("slipstream-cache has a fabric port")))?;
            let (refused, _) = load(&client, &keys, run.value_bytes)?;
            if refused > 0 {
                return Err(Unmeasured::Failed(format!("{refused} sets refused by cache-hybrid while loading")));
            }
            let mut warm = GetTally::default();
            nb_pass(&client, (&keys, run.value_bytes), nb, NbGetMode::Blocking, !run.seed, NB_WARMUP_GETS, &mut warm)?;
            let mut tally = GetTally::default();
            let rate = nb_pass(&client, (&keys, run.value_bytes), nb, mode, seed, nb.ops, &mut tally)?;
            if let Some(error) = warm.wrong_error().or(tally.wrong_error()) {
                return Err(Unmeasured::Failed(format!("{}: {error}", mode.name())));
            }
            let m = modes.iter_mut().find(|m| m.mode == mode).expect("every mode");
            m.ops_per_s_trials.push(rate);
            m.hits += tally.hits;
            m.misses += tally.misses;
            stats = relevant_stats(HybridServer::CacheHybrid, &server_stats(&client)?);
        }
    }
    Ok(NbHybridMeasure { items, ssd_mb, modes, stats })
}

// ---------------------------------------------------------------------------------------------
// The run.

#[derive(Debug, Clone, PartialEq)]
pub struct HybridResult {
    pub spill: Vec<SpillRow>,
    pub fit: Option<Result<FitMeasure, Unmeasured>>,
    pub nb: Option<Result<NbHybridMeasure, Unmeasured>>,
}

impl HybridResult {
    /// Measurements that failed (a "not available" row is not one).
    pub fn failures(&self) -> usize {
        let failed = |u: &Unmeasured| usize::from(u.is_failure());
        self.spill.iter().map(|r| r.outcome.as_ref().err().map_or(0, failed)).sum::<usize>()
            + self.fit.as_ref().and_then(|f| f.as_ref().err()).map_or(0, failed)
            + self.nb.as_ref().and_then(|n| n.as_ref().err()).map_or(0, failed)
    }

    pub fn spill_measure(&self, server: HybridServer) -> Option<&SpillMeasure> {
        self.spill.iter().find(|r| r.server == server)?.outcome.as_ref().ok()
    }
}

pub fn run_hybrid(run: &HybridRun) -> Result<HybridResult, String> {
    run.validate()?;
    let keys: Vec<Vec<u8>> = (0..run.items()).map(key_of).collect();
    let mut result = HybridResult { spill: Vec::new(), fit: None, nb: None };
    for &server in &run.servers {
        if run.progress {
            eprintln!("ohb mem hybrid: {} (fresh), spill {}, {} scan", server.name(), run.spill_factor, run.scan.name());
        }
        let outcome = measure_spill(server, run, &keys);
        if let Err(u) = &outcome {
            eprintln!("ohb mem hybrid: {}: {}", server.name(), u.text());
        }
        result.spill.push(SpillRow { server, outcome });
    }
    drop(keys);
    if let Some(fit) = &run.fit {
        let outcome = measure_fit(run, fit);
        if let Err(u) = &outcome {
            eprintln!("ohb mem hybrid: fit in memory: {}", u.text());
        }
        result.fit = Some(outcome);
    }
    if let Some(nb) = &run.nb {
        let outcome = measure_nb(run, nb);
        if let Err(u) = &outcome {
            eprintln!("ohb mem nb --hybrid: {}", u.text());
        }
        result.nb = Some(outcome);
    }
    Ok(result)
}

// ---------------------------------------------------------------------------------------------
// Report.

fn mib_text(bytes: f64) -> String {
    let mib = bytes / (1u64 << 20) as f64;
    if mib >= 10.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// A latency ratio near 1 with three decimals: the fit target's 5 % needs them.
pub fn format_slowdown(x: f64) -> String {
    format!("{x:.3}x")
}

/// "1.5" for 1.5, "0.5", "2" for 2.0.
fn factor_text(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The target checks of a result (see the module's constants). `pass` is `None` when the run
/// did not measure what the target needs.
pub fn hybrid_checks(result: &HybridResult, run: &HybridRun) -> Vec<Check> {
    let mut checks = Vec::new();
    // `mem nb --hybrid` has no spill rows: only the parts that ran have targets to show.
    if !result.spill.is_empty() {
        checks.extend(spill_checks(result, run));
    }
    fit_and_nb_checks(result, &mut checks);
    checks
}

fn spill_checks(result: &HybridResult, run: &HybridRun) -> Vec<Check> {
    let conditions = if run.scan == Scan::Uniform && (run.spill_factor - SPILL_FACTOR_DEFAULT).abs() < 1e-9 {
        String::new()
    } else {
        format!(" [target defined at spill 1.5, uniform; this run: spill {}, {}]", factor_text(run.spill_factor), run.scan.name())
    };
    let hybrid = result.spill_measure(HybridServer::CacheHybrid);
    let ram = result.spill_measure(HybridServer::CacheRam);
    let ext = result.spill_measure(HybridServer::MemcachedExt);
    let spill_unmeasured = |server: HybridServer| -> String {
        match result.spill.iter().find(|r| r.server == server).map(|r| &r.outcome) {
            Some(Err(u)) => u.short().into(),
            Some(Ok(_)) => "measured".into(),
            None => "not in this run".into(),
        }
    };
    let mut checks = Vec::new();
    let ext_text = match ext {
        Some(m) => format!("memcached-ext {:.1} %", m.success_percent()),
        None => "memcached-ext not measured".into(),
    };
    checks.push(match hybrid {
        Some(h) => {
            let rate = h.success_percent();
            Check {
                name: format!("spill {} {}: cache-hybrid success rate {HYBRID_SUCCESS_PERCENT_TARGET:.0} %{conditions}", factor_text(run.spill_factor), run.scan.name()),
                ratio: Some(rate / 100.0),
                pass: Some(rate >= HYBRID_SUCCESS_PERCENT_TARGET),
                detail: format!("cache-hybrid {rate:.2} % ({} of {} gets hit; {ext_text})", h.hits, h.gets),
            }
        }
        None => Check {
            name: format!("spill {} {}: cache-hybrid success rate {HYBRID_SUCCESS_PERCENT_TARGET:.0} %{conditions}", factor_text(run.spill_factor), run.scan.name()),
            ratio: None,
            pass: None,
            detail: format!("cache-hybrid {} ({ext_text})", spill_unmeasured(HybridServer::CacheHybrid)),
        },
    });
    let penalty_name = format!(
        "average latency with a {} ms miss penalty: cache-hybrid >= {}x lower than cache-ram{conditions}",
        factor_text(run.miss_penalty_ms),
        factor_text(PENALTY_SPEEDUP_TARGET)
    );
    checks.push(match (hybrid, ram) {
        (Some(h), Some(r)) => {
            let speedup = r.us_avg_with_penalty / h.us_avg_with_penalty;
            Check {
                name: penalty_name,
                ratio: Some(speedup),
                pass: Some(speedup >= PENALTY_SPEEDUP_TARGET),
                detail: format!(
                    "cache-ram {} us vs cache-hybrid {} us: {} lower",
                    format_us(r.us_avg_with_penalty),
                    format_us(h.us_avg_with_penalty),
                    format_ratio(speedup)
                ),
            }
        }
        _ => Check {
            name: penalty_name,
            ratio: None,
            pass: None,
            detail: format!(
                "cache-hybrid {}; cache-ram {}",
                spill_unmeasured(HybridServer::CacheHybrid),
                spill_unmeasured(HybridServer::CacheRam)
            ),
        },
    });
    checks
}

fn fit_and_nb_checks(result: &HybridResult, checks: &mut Vec<Check>) {
    let fit_name = format!(
        "fit in memory (spill {}): cache-hybrid get latency <= {}x cache-ram (p50 and avg, every transport)",
        factor_text(FIT_SPILL_FACTOR),
        factor_text(FIT_SLOWDOWN_MAX)
    );
    match &result.fit {
        Some(Ok(fit)) => {
            let mut worst = 0.0f64;
            let mut parts = Vec::new();
            let mut noise_worst = 0.0f64;
            for t in &fit.transports {
                let (p50, avg) = t.slowdowns();
                let (noise_p50, noise_avg) = t.noise();
                worst = worst.max(p50).max(avg);
                noise_worst = noise_worst.max((noise_p50 - 1.0).abs()).max((noise_avg - 1.0).abs());
                parts.push(format!("{} p50 {} avg {}", t.transport, format_slowdown(p50), format_slowdown(avg)));
            }
            checks.push(Check {
                name: fit_name,
                ratio: Some(worst),
                pass: Some(worst <= FIT_SLOWDOWN_MAX),
                detail: format!(
                    "hybrid/ram: {} (worst {}; control/ram within {:.1} % of 1{})",
                    parts.join(", "),
                    format_slowdown(worst),
                    noise_worst * 100.0,
                    if worst > FIT_SLOWDOWN_MAX && worst - 1.0 <= noise_worst {
                        ": the A/A control moved as much, so this miss is within this run's noise"
                    } else {
                        ""
                    }
                ),
            });
        }
        Some(Err(u)) => checks.push(Check { name: fit_name, ratio: None, pass: None, detail: format!("cache-hybrid {}", u.short()) }),
        None => {}
    }
    let nb_name = format!("non-blocking gets on cache-hybrid over the fabric >= {}x blocking", factor_text(NB_SPEEDUP_TARGET));
    match &result.nb {
        Some(Ok(nb)) => {
            let blocking = nb.rate(NbGetMode::Blocking).unwrap_or(0.0);
            for mode in [NbGetMode::Iget, NbGetMode::Bget] {
                let rate = nb.rate(mode).unwrap_or(0.0);
                let ratio = rate / blocking;
                checks.push(Check {
                    name: format!("{nb_name} ({})", mode.name()),
                    ratio: Some(ratio),
                    pass: Some(ratio >= NB_SPEEDUP_TARGET),
                    detail: format!(
                        "{} {} ops/s vs blocking {} ops/s: {}",
                        mode.name(),
                        format_rate(rate),
                        format_rate(blocking),
                        format_ratio(ratio)
                    ),
                });
            }
        }
        Some(Err(u)) => checks.push(Check { name: nb_name, ratio: None, pass: None, detail: format!("cache-hybrid {}", u.short()) }),
        None => {}
    }
}

fn check_lines(checks: &[Check]) -> String {
    let mut out = String::from("targets:\n");
    for c in checks {
        let verdict = match c.pass {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        out += &format!("  {}: {} -> {verdict}\n", c.name, c.detail);
    }
    out
}

fn stats_block(name: &str, stats: &[(String, String)]) -> String {
    if stats.is_empty() {
        return format!("  {name}: (no matching stats)\n");
    }
    let mut out = String::new();
    let mut line = format!("  {name}:");
    for (k, v) in stats {
        let item = format!(" {k}={v}");
        if line.len() + item.len() > 110 {
            out += &line;
            out += "\n";
            line = format!("  {:width$} ", "", width = name.len());
        }
        line += &item;
    }
    out += &line;
    out += "\n";
    out
}

/// The spill table, the fit-in-memory table, the non-blocking table, server stats and targets.
pub fn render_hybrid(result: &HybridResult, run: &HybridRun, machine: &Machine) -> String {
    let mut out = String::new();
    let items = run.items();
    out += "# ohb mem hybrid: a data set larger than memory (after OHB's ohb_memhybrid)\n";
    out += &format!("# machine: {}\n", machine.describe());
    if !result.spill.is_empty() {
        out += &format!(
            "# data: {items} items of {} = {} x -m {} MiB ({}), every item set once in key order, then {} gets\n",
            format_size(run.value_bytes),
            factor_text(run.spill_factor),
            run.max_memory_mb,
            mib_text(items as f64 * run.value_bytes as f64),
            run.gets
        );
        out += &format!(
            "# keys: {} (seed {}), {} client thread(s), one get at a time over TCP (binary protocol); every server started fresh, -t {}\n",
            match run.scan {
                Scan::Uniform => "uniform".to_string(),
                Scan::Normal => "normal around the middle, sd = items / 6, clamped".to_string(),
            },
            run.seed,
            run.clients,
            run.settings.threads
        );
        out += &format!(
            concat!(
                "# a miss costs {} ms (fetching the item from the backing database): the penalty is ADDED to that get's\n",
                "#   measured latency, not slept; misses are not set back. p50/p99 are of the raw get latency.\n"
            ),
            factor_text(run.miss_penalty_ms)
        );
        out += "# servers:\n";
        for &s in &run.servers {
            out += &format!("#   {:<14} {}\n", s.name(), s.describe_flags(run.max_memory_mb, run.ssd_mb()));
        }
        out += &format!(
            "\n{:<14} | {:>9} | {:>8} | {:>8} | {:>15} | {:>8} | {:>8} | {:>9} | {:>9}\n",
            "server", "success %", "hits", "misses", "avg us +penalty", "avg raw", "p50 us", "p99 us", "evictions"
        );
        for row in &result.spill {
            match &row.outcome {
                Ok(m) => {
                    out += &format!(
                        "{:<14} | {:>9.2} | {:>8} | {:>8} | {:>15} | {:>8} | {:>8} | {:>9} | {:>9}\n",
                        row.server.name(),
                        m.success_percent(),
                        m.hits,
                        m.misses,
                        format_us(m.us_avg_with_penalty),
                        format_us(m.us_avg_raw),
                        format_us(m.us_p50),
                        format_us(m.us_p99),
                        stat_of(&m.stats, "evictions").unwrap_or("-")
                    );
                }
                Err(u) => out += &format!("{:<14} | {}\n", row.server.name(), u.text()),
            }
        }
        let refused: Vec<String> = result
            .spill
            .iter()
            .filter_map(|r| r.outcome.as_ref().ok().filter(|m| m.sets_refused > 0).map(|m| format!("{} {}", r.server.name(), m.sets_refused)))
            .collect();
        if !refused.is_empty() {
            out += &format!("sets refused by the server while loading: {}\n", refused.join(", "));
        }
        let avg = |s: HybridServer| result.spill_measure(s).map(|m| m.us_avg_with_penalty);
        let mut ratios = Vec::new();
        for (a, b) in [
            (HybridServer::CacheRam, HybridServer::CacheHybrid),
            (HybridServer::MemcachedExt, HybridServer::CacheHybrid),
            (HybridServer::Memcached, HybridServer::MemcachedExt),
            (HybridServer::Memcached, HybridServer::CacheRam),
        ] {
            if let (Some(x), Some(y)) = (avg(a), avg(b)) {
                ratios.push(format!("{} / {} {}", a.name(), b.name(), format_ratio(x / y)));
            }
        }
        if !ratios.is_empty() {
            out += &format!("avg latency with penalty, ratio (> 1: the second is faster): {}\n", ratios.join("; "));
        }
        out += "server stats after the gets:\n";
        for row in &result.spill {
            if let Ok(m) = &row.outcome {
                out += &stats_block(row.server.name(), &m.stats);
            }
        }
    }
    if let Some(fit) = &result.fit {
        let fit_run = run.fit.as_ref().expect("fit result without a fit run");
        out += &format!(
            concat!(
                "\n# fit in memory: {} items of {} = {} x -m {} MiB; cache-ram vs cache-hybrid (--ssd-size {}) and a second\n",
                "#   cache-ram as control (control/ram shows the noise alone), all three running; {} rounds of {} (tcp) /\n",
                "#   {} (fabric) uniform gets from each server in turn (order rotating per round), fresh connections per\n",
                "#   round; median of the rounds' p50 and avg (us)\n"
            ),
            item_count(FIT_SPILL_FACTOR, run.max_memory_mb, run.value_bytes),
            format_size(run.value_bytes),
            factor_text(FIT_SPILL_FACTOR),
            run.max_memory_mb,
            ssd_size_mb(FIT_SPILL_FACTOR, run.max_memory_mb),
            fit_run.rounds,
            fit_run.gets_tcp,
            fit_run.gets_fabric
        );
        match fit {
            Ok(f) => {
                out += &format!(
                    "{:>9} | {:>14} | {:>14} | {:>15} | {:>18} | {:>19} | {:>7}\n",
                    "transport", "ram p50/avg", "hybrid p50/avg", "control p50/avg", "hybrid/ram p50/avg", "control/ram p50/avg", "misses"
                );
                for t in &f.transports {
                    let (p50, avg) = t.slowdowns();
                    let (noise_p50, noise_avg) = t.noise();
                    out += &format!(
                        "{:>9} | {:>14} | {:>14} | {:>15} | {:>18} | {:>19} | {:>7}\n",
                        t.transport,
                        format!("{}/{}", format_us(t.ram.us_p50()), format_us(t.ram.us_avg())),
                        format!("{}/{}", format_us(t.hybrid.us_p50()), format_us(t.hybrid.us_avg())),
                        format!("{}/{}", format_us(t.control.us_p50()), format_us(t.control.us_avg())),
                        format!("{} / {}", format_slowdown(p50), format_slowdown(avg)),
                        format!("{} / {}", format_slowdown(noise_p50), format_slowdown(noise_avg)),
                        t.ram.misses + t.hybrid.misses + t.control.misses
                    );
                }
                out += "ratio: latency / cache-ram's latency (< 1: faster than cache-ram)\n";
            }
            Err(u) => out += &format!("{}\n", u.text()),
        }
    }
    if let Some(nb) = &result.nb {
        out += &render_nb_section(nb, run);
    }
    out += "\n";
    out += &check_lines(&hybrid_checks(result, run));
    out
}

fn render_nb_section(nb: &Result<NbHybridMeasure, Unmeasured>, run: &HybridRun) -> String {
    let nb_run = run.nb.as_ref().expect("nb result without an nb run");
    let mut out = format!(
        concat!(
            "\n# nb on cache-hybrid: {} items of {} = {} x -m {} MiB (--ssd-size {}), over the fabric; {} uniform gets\n",
            "#   per pass, blocking get one at a time vs iget/bget in batches of {} (--req-thresh) completed by {};\n",
            "#   median of {} trials; every pass on a fresh server loaded the same way, the same key sequence for\n",
            "#   every mode within a trial; values checked in every mode\n"
        ),
        run.items(),
        format_size(run.value_bytes),
        factor_text(run.spill_factor),
        run.max_memory_mb,
        run.ssd_mb(),
        nb_run.ops,
        nb_run.req_thresh,
        nb_run.progress_type.name(),
        nb_run.trials
    );
    match nb {
        Ok(m) => {
            let blocking = m.rate(NbGetMode::Blocking).unwrap_or(0.0);
            out += &format!("{:>15} | {:>9} | {:>9} | {:>11} | {:>8} | {:>8}\n", "mode", "ops/s", "us/op", "x blocking", "hits", "misses");
            for r in &m.modes {
                let rate = r.ops_per_s();
                out += &format!(
                    "{:>15} | {:>9} | {:>9} | {:>11} | {:>8} | {:>8}\n",
                    r.mode.name(),
                    format_rate(rate),
                    format_us(1e6 / rate),
                    format_ratio(rate / blocking),
                    r.hits,
                    r.misses
                );
            }
            out += "server stats after the last pass:\n";
            out += &stats_block("cache-hybrid", &m.stats);
        }
        Err(u) => out += &format!("{}\n", u.text()),
    }
    out
}

/// `ohb mem nb --hybrid`: the non-blocking section and its target only.
pub fn render_nb_hybrid(result: &HybridResult, run: &HybridRun, machine: &Machine) -> String {
    let mut out = format!("# ohb mem nb --hybrid: non-blocking gets on the hybrid cache\n# machine: {}\n", machine.describe());
    if let Some(nb) = &result.nb {
        out += &render_nb_section(nb, run);
    }
    out += "\n";
    out += &check_lines(&hybrid_checks(result, run));
    out
}

fn unmeasured_json(u: &Unmeasured) -> Value {
    match u {
        Unmeasured::NotAvailable(why) => json!({"not_available": why}),
        Unmeasured::Failed(why) => json!({"error": why}),
    }
}

fn fit_side_json(side: &FitSide) -> Value {
    json!({
        "us_p50": side.us_p50(), "us_avg": side.us_avg(), "us_p50_rounds": side.us_p50_rounds,
        "us_avg_rounds": side.us_avg_rounds, "hits": side.hits, "misses": side.misses,
    })
}

fn stats_json(stats: &[(String, String)]) -> Value {
    Value::Object(stats.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

pub fn hybrid_json(result: &HybridResult, run: &HybridRun, machine: &Machine) -> Value {
    let spill: Vec<Value> = result
        .spill
        .iter()
        .map(|row| {
            let mut v = match &row.outcome {
                Ok(m) => json!({
                    "items": m.items, "sets_refused": m.sets_refused, "load_seconds": m.load_seconds,
                    "gets": m.gets, "hits": m.hits, "misses": m.misses, "success_percent": m.success_percent(),
                    "get_seconds": m.get_seconds, "us_p50": m.us_p50, "us_p99": m.us_p99,
                    "us_avg_raw": m.us_avg_raw, "us_avg_with_penalty": m.us_avg_with_penalty,
                    "stats": stats_json(&m.stats),
                }),
                Err(u) => unmeasured_json(u),
            };
            v["server"] = json!(row.server.name());
            v["flags"] = json!(row.server.describe_flags(run.max_memory_mb, run.ssd_mb()));
            v
        })
        .collect();
    let fit = result.fit.as_ref().map(|f| match f {
        Ok(m) => json!({
            "items": m.items, "ssd_mb": m.ssd_mb,
            "rounds": run.fit.as_ref().map(|f| f.rounds),
            "transports": m.transports.iter().map(|t| json!({
                "transport": t.transport,
                "ram": fit_side_json(&t.ram),
                "hybrid": fit_side_json(&t.hybrid),
                "control": fit_side_json(&t.control),
                "slowdown_p50": t.slowdowns().0, "slowdown_avg": t.slowdowns().1,
                "noise_p50": t.noise().0, "noise_avg": t.noise().1,
            })).collect::<Vec<_>>(),
        }),
        Err(u) => unmeasured_json(u),
    });
    let nb = result.nb.as_ref().map(|n| match n {
        Ok(m) => json!({
            "items": m.items, "ssd_mb": m.ssd_mb,
            "req_thresh": run.nb.as_ref().map(|n| n.req_thresh),
            "ops": run.nb.as_ref().map(|n| n.ops),
            "progress": run.nb.as_ref().map(|n| n.progress_type.name()),
            "modes": m.modes.iter().map(|r| json!({
                "mode": r.mode.key(), "ops_per_s": r.ops_per_s(), "ops_per_s_trials": r.ops_per_s_trials,
                "hits": r.hits, "misses": r.misses,
            })).collect::<Vec<_>>(),
            "stats": stats_json(&m.stats),
        }),
        Err(u) => unmeasured_json(u),
    });
    json!({
        "test": "mem hybrid",
        "machine": machine.to_json(),
        "scan": run.scan.name(),
        "max_memory_mb": run.max_memory_mb,
        "value_bytes": run.value_bytes,
        "miss_penalty_ms": run.miss_penalty_ms,
        "miss_penalty_applied": "added to the measured latency of each missed get, not slept",
        "spill_factor": run.spill_factor,
        "items": run.items(),
        "ssd_mb": run.ssd_mb(),
        "gets": run.gets,
        "clients": run.clients,
        "seed": run.seed,
        "server_threads": run.settings.threads,
        "spill": spill,
        "fit": fit,
        "nb": nb,
        "targets": hybrid_checks(result, run).iter().map(Check::to_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_and_ssd_arithmetic() {
        // OHB's defaults: 1.5 x 64 MiB of 4 KiB values.
        assert_eq!(item_count(1.5, 64, 4096), 24576);
        assert_eq!(item_count(0.5, 64, 4096), 8192);
        assert_eq!(item_count(1.0, 1, 1000), 1048);
        assert_eq!(item_count(0.000001, 2, 4096), 1, "at least one item");
        assert_eq!(ssd_size_mb(1.5, 64), 192);
        assert_eq!(ssd_size_mb(0.5, 64), 64);
        assert_eq!(ssd_size_mb(1.1, 10), 22, "float noise does not round up");
        assert_eq!(ssd_size_mb(0.1, 64), 13, "12.8 rounds up");
        assert_eq!(ssd_size_mb(0.001, 2), 1);
    }

    #[test]
    fn extstore_option_syntax() {
        let p = Path::new("/tmp/x/extstore");
        assert_eq!(extstore_option(p, 192), "ext_path=/tmp/x/extstore:192m");
        assert_eq!(extstore_option(p, 128), "ext_path=/tmp/x/extstore:128m");
        assert_eq!(extstore_option(p, 64), "ext_path=/tmp/x/extstore:64m,ext_page_size=16");
        assert_eq!(extstore_option(p, 2), "ext_path=/tmp/x/extstore:2m,ext_page_size=1");
    }

    #[test]
    fn rng_is_seeded_and_uniform() {
        let a: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..5).scan(Rng::new(8), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut rng = Rng::new(1);
        let mut counts = [0usize; 10];
        for _ in 0..100_000 {
            let x = rng.below(10);
            counts[x] += 1;
            let f = rng.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn uniform_picker_covers_the_key_space() {
        let items = 1000;
        let mut picker = KeyPicker::new(Scan::Uniform, items, 42);
        let mut seen = vec![false; items];
        for _ in 0..20_000 {
            let i = picker.next_index();
            assert!(i < items);
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s), "20x oversampling reaches every key");
        // Same seed, same sequence (every server sees the same keys).
        let mut p1 = KeyPicker::new(Scan::Normal, items, 9);
        let mut p2 = KeyPicker::new(Scan::Normal, items, 9);
        assert!((0..1000).all(|_| p1.next_index() == p2.next_index()));
    }

    #[test]
    fn normal_picker_is_centred_with_sd_of_a_sixth() {
        let items = 6000;
        let mut picker = KeyPicker::new(Scan::Normal, items, 3);
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| picker.next_index() as f64).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let sd = (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean - 3000.0).abs() < 30.0, "mean {mean}");
        assert!((sd - 1000.0).abs() < 30.0, "sd {sd}");
        // About 68 % within one sd of the centre.
        let within = draws.iter().filter(|x| (**x - 3000.0).abs() < 1000.0).count() as f64 / n as f64;
        assert!((within - 0.6827).abs() < 0.01, "{within}");
        // Clamped at both ends.
        assert_eq!(normal_index(-10.0, items), 0);
        assert_eq!(normal_index(10.0, items), items - 1);
        assert_eq!(normal_index(0.0, items), 3000);
        assert_eq!(normal_index(0.0, 1), 0);
        assert_eq!(normal_index(1.0, 600), 400);
    }

    #[test]
    fn values_are_per_item_and_checked_exactly() {
        let mut v = Vec::new();
        fill_value(5, 4096, &mut v);
        assert_eq!(v.len(), 4096);
        assert!(value_matches(5, 4096, &v));
        assert!(!value_matches(6, 4096, &v), "another item's value");
        assert!(!value_matches(5, 4096, &v[..4095]), "short");
        let mut w = v.clone();
        w[4000] ^= 1;
        assert!(!value_matches(5, 4096, &w), "one bit flipped");
        fill_value(5, 13, &mut v);
        assert!(value_matches(5, 13, &v), "odd length");
        let mut t = GetTally::default();
        fill_value(9, 100, &mut v);
        t.count(9, Some(flags_of(9)), 100, &v);
        t.count(9, None, 100, &v);
        t.count(9, Some(flags_of(9) ^ 1), 100, &v);
        t.count(8, Some(flags_of(8)), 100, &v);
        assert_eq!((t.hits, t.misses, t.wrong, t.first_wrong), (1, 1, 2, Some(9)));
        assert_eq!(t.gets(), 4);
        assert!(t.wrong_error().unwrap().contains("2 of 4"));
        assert!(key_of(12) != key_of(21));
    }

    #[test]
    fn penalty_is_added_per_miss() {
        // 4 gets of 50 us, 1 miss with a 1.5 ms penalty: (200 + 1500) / 4 us.
        assert_eq!(average_with_penalty_us(200_000, 1, 4, 1.5), 425.0);
        assert_eq!(average_with_penalty_us(200_000, 0, 4, 1.5), 50.0);
        assert_eq!(average_with_penalty_us(0, 4, 4, 0.0), 0.0);
    }

    #[test]
    fn orders_alternate_and_rotate() {
        assert_eq!(fit_order(0), [0, 1, 2]);
        assert_eq!(fit_order(1), [1, 2, 0]);
        assert_eq!(fit_order(5), [2, 0, 1]);
        // Over 3 rounds every server is first, second and third once.
        for position in 0..3 {
            let mut seen: Vec<usize> = (0..3).map(|r| fit_order(r)[position]).collect();
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2]);
        }
        assert_eq!(nb_order(0), [NbGetMode::Blocking, NbGetMode::Iget, NbGetMode::Bget]);
        assert_eq!(nb_order(1), [NbGetMode::Iget, NbGetMode::Bget, NbGetMode::Blocking]);
        assert_eq!(nb_order(5), [NbGetMode::Bget, NbGetMode::Blocking, NbGetMode::Iget]);
        assert_ne!(thread_seed(1, 0), thread_seed(1, 1));
    }

    #[test]
    fn ssd_flags_in_help() {
        assert!(help_lists_ssd_flags("  --ssd-path <dir>  ...\n  --ssd-size <mb>  ...\n"));
        assert!(!help_lists_ssd_flags("  --ssd-path <dir>\n"));
        assert!(!help_lists_ssd_flags("usage: slipstream-cache [flags]\n"));
    }

    #[test]
    fn stats_filter() {
        let stats: Vec<(String, String)> = [
            "pid", "curr_items", "evictions", "get_hits", "ssd_reads", "extstore_pages_used", "get_extstore",
            "miss_from_extstore", "bytes",
        ]
        .iter()
        .map(|n| (n.to_string(), "1".to_string()))
        .collect();
        let names = |s: HybridServer| relevant_stats(s, &stats).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(HybridServer::CacheHybrid), ["curr_items", "evictions", "get_hits", "ssd_reads"]);
        assert_eq!(
            names(HybridServer::MemcachedExt),
            ["curr_items", "evictions", "get_hits", "extstore_pages_used", "get_extstore", "miss_from_extstore"]
        );
    }

    fn test_run() -> HybridRun {
        HybridRun {
            scan: Scan::Uniform,
            max_memory_mb: 64,
            value_bytes: 4096,
            miss_penalty_ms: 1.5,
            spill_factor: 1.5,
            gets: 1000,
            clients: 1,
            seed: 42,
            servers: HybridServer::ALL.to_vec(),
            fit: Some(FitRun { rounds: 3, gets_tcp: 100, gets_fabric: 100 }),
            nb: Some(NbHybridRun { ops: 100, req_thresh: 32, progress_type: NbProgress::Wait, trials: 1 }),
            settings: ServerSettings::default_for_this_build(),
            progress: false,
        }
    }

    fn measure(hits: usize, misses: usize, avg_penalty: f64) -> SpillMeasure {
        SpillMeasure {
            items: 24576,
            sets_refused: 0,
            load_seconds: 1.0,
            gets: hits + misses,
            hits,
            misses,
            get_seconds: 1.0,
            us_p50: 50.0,
            us_p99: 90.0,
            us_avg_raw: 55.0,
            us_avg_with_penalty: avg_penalty,
            stats: vec![("evictions".into(), "123".into())],
        }
    }

    fn side(p50: f64, avg: f64) -> FitSide {
        FitSide { us_p50_rounds: vec![p50, p50 * 3.0, p50 * 0.9], us_avg_rounds: vec![avg], hits: 10, misses: 0 }
    }

    #[test]
    fn checks_and_report() {
        let run = test_run();
        assert!(run.validate().is_ok());
        assert_eq!(run.items(), 24576);
        assert_eq!(run.ssd_mb(), 192);
        let result = HybridResult {
            spill: vec![
                SpillRow { server: HybridServer::CacheRam, outcome: Ok(measure(600, 400, 655.0)) },
                SpillRow { server: HybridServer::CacheHybrid, outcome: Ok(measure(1000, 0, 60.0)) },
                SpillRow { server: HybridServer::Memcached, outcome: Err(Unmeasured::Failed("boom".into())) },
                SpillRow { server: HybridServer::MemcachedExt, outcome: Ok(measure(300, 700, 1105.0)) },
            ],
            fit: Some(Ok(FitMeasure {
                items: 8192,
                ssd_mb: 64,
                transports: vec![
                    FitTransport {
                        transport: "tcp",
                        ram: side(50.0, 52.0),
                        hybrid: side(51.0, 53.0),
                        control: side(50.5, 52.0),
                    },
                    FitTransport {
                        transport: "fabric",
                        ram: side(2.0, 2.0),
                        hybrid: side(2.2, 2.0),
                        control: side(1.96, 2.0),
                    },
                ],
            })),
            nb: Some(Ok(NbHybridMeasure {
                items: 24576,
                ssd_mb: 192,
                modes: vec![
                    NbModeResult { mode: NbGetMode::Blocking, ops_per_s_trials: vec![100e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Iget, ops_per_s_trials: vec![300e3, 200e3, 260e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Bget, ops_per_s_trials: vec![240e3], hits: 1, misses: 0 },
                ],
                stats: vec![],
            })),
        };
        assert_eq!(result.failures(), 1);
        let checks = hybrid_checks(&result, &run);
        let pass: Vec<Option<bool>> = checks.iter().map(|c| c.pass).collect();
        // success 100 % met; 655/60 = 10.9x met; fit worst 1.1x (fabric p50) missed; iget 2.6x met, bget 2.4x missed.
        assert_eq!(pass, [Some(true), Some(true), Some(false), Some(true), Some(false)]);
        assert!(checks[0].detail.contains("memcached-ext 30.0 %"), "{}", checks[0].detail);
        assert!((checks[2].ratio.unwrap() - 1.1).abs() < 1e-9);
        let text = render_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("memcached      | FAILED: boom"), "{text}");
        assert!(text.contains("ADDED to that get's"), "{text}");
        assert!(text.contains("cache-hybrid   |    100.00 |     1000 |        0 |            60.0"), "{text}");
        assert!(text.contains("evictions=123"), "{text}");
        assert!(text.contains("cache-ram / cache-hybrid 10.92x"), "{text}");
        assert!(
            text.contains("      tcp |      50.0/52.0 |      51.0/53.0 |       50.5/52.0 |    1.020x / 1.019x |     1.010x / 1.000x |       0"),
            "{text}"
        );
        assert!(
            checks[2].detail.contains("fabric p50 1.100x avg 1.000x (worst 1.100x; control/ram within 2.0 % of 1)"),
            "{}",
            checks[2].detail
        );
        // A miss no larger than the A/A control's deviation says so (still a miss).
        let mut noisy = result.clone();
        if let Some(Ok(fit)) = &mut noisy.fit {
            fit.transports[1].control = side(2.4, 2.0);
        }
        let check = &hybrid_checks(&noisy, &run)[2];
        assert_eq!(check.pass, Some(false));
        assert!(check.detail.contains("within 20.0 % of 1: the A/A control moved as much"), "{}", check.detail);
        assert!(text.contains("-> MISSED"), "{text}");
        let json = hybrid_json(&result, &run, &Machine::default());
        assert_eq!(json["spill"][2]["error"], "boom");
        assert_eq!(json["spill"][1]["hits"], 1000);
        assert_eq!(json["nb"]["modes"][1]["ops_per_s"], 260e3);
        assert_eq!(json["targets"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn not_available_is_no_failure_and_leaves_targets_unmeasured() {
        let mut run = test_run();
        run.scan = Scan::Normal;
        let result = HybridResult {
            spill: vec![
                SpillRow { server: HybridServer::CacheRam, outcome: Ok(measure(600, 400, 655.0)) },
                SpillRow { server: HybridServer::CacheHybrid, outcome: Err(Unmeasured::NotAvailable("no flags".into())) },
            ],
            fit: Some(Err(Unmeasured::NotAvailable("no flags".into()))),
            nb: None,
        };
        assert_eq!(result.failures(), 0);
        let checks = hybrid_checks(&result, &run);
        assert_eq!(checks.len(), 3);
        assert!(checks.iter().all(|c| c.pass.is_none()));
        assert!(checks[0].name.contains("this run: spill 1.5, normal"), "{}", checks[0].name);
        let text = render_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("cache-hybrid   | not available: no flags"), "{text}");
        assert!(text.contains("-> not measured"), "{text}");
    }

    #[test]
    fn nb_only_run_shows_only_the_nb_targets() {
        let mut run = test_run();
        run.servers.clear();
        run.fit = None;
        let result = HybridResult {
            spill: Vec::new(),
            fit: None,
            nb: Some(Ok(NbHybridMeasure {
                items: 24576,
                ssd_mb: 192,
                modes: vec![
                    NbModeResult { mode: NbGetMode::Blocking, ops_per_s_trials: vec![10e3, 20e3, 30e3], hits: 3, misses: 0 },
                    NbModeResult { mode: NbGetMode::Iget, ops_per_s_trials: vec![50e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Bget, ops_per_s_trials: vec![49e3], hits: 1, misses: 0 },
                ],
                stats: vec![("ssd_reads".into(), "7".into())],
            })),
        };
        let checks = hybrid_checks(&result, &run);
        assert_eq!(checks.len(), 2, "{checks:?}");
        // Median blocking 20k: iget 2.5x exactly meets the target, bget 2.45x misses it.
        assert_eq!(checks.iter().map(|c| c.pass).collect::<Vec<_>>(), [Some(true), Some(false)]);
        let text = render_nb_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("           iget |     50.0k |      20.0 |       2.50x |        1 |        0"), "{text}");
        assert!(text.contains("ssd_reads=7"), "{text}");
        assert!(!text.contains("success rate"), "{text}");
        let failed = HybridResult { nb: Some(Err(Unmeasured::Failed("x".into()))), ..result };
        assert_eq!(failed.failures(), 1);
        assert_eq!(hybrid_checks(&failed, &run)[0].detail, "cache-hybrid FAILED");
    }

    #[test]
    fn validation_names_the_flag() {
        let mut run = test_run();
        run.spill_factor = 0.0;
        assert!(run.validate().unwrap_err().contains("--spill-factor"));
        let mut run = test_run();
        run.value_bytes = 0;
        assert!(run.validate().unwrap_err().contains("--value-bytes"));
        let mut run = test_run();
        run.clients = 0;
        assert!(run.validate().unwrap_err().contains("--clients"));
        let mut run = test_run();
        run.miss_penalty_ms = -1.0;
        assert!(run.validate().unwrap_err().contains("--miss-penalty-ms"));
    }

    #[test]
    fn stale_temp_dirs_are_recognised_by_shape_only() {
        assert_eq!(temp_dir_owner("ohb-hybrid-123-456-0", "ohb-hybrid"), Some(123));
        assert_eq!(temp_dir_owner("ohb-hybrid-123-456", "ohb-hybrid"), None);
        assert_eq!(temp_dir_owner("ohb-hybrid-123-456-0-1", "ohb-hybrid"), None);
        assert_eq!(temp_dir_owner("ohb-hybrid-abc-456-0", "ohb-hybrid"), None);
        assert_eq!(temp_dir_owner("ohb-hybrid-fake.json", "ohb-hybrid"), None);
        assert_eq!(temp_dir_owner("other-123-456-0", "ohb-hybrid"), None);
        // A directory of a pid that no longer runs goes; ours and foreign shapes stay.
        let base = TempDir::new("ohb-test-base").unwrap();
        let dead = base.path().join("ohb-stale-4000000000-1-0"); // above pid_max: never running
        let alive = base.path().join(format!("ohb-stale-{}-1-0", std::process::id()));
        let foreign = base.path().join("ohb-stale-keep");
        for d in [&dead, &alive, &foreign] {
            std::fs::create_dir(d).unwrap();
        }
        remove_stale_dirs(base.path(), "ohb-stale");
        assert!(!dead.exists());
        assert!(alive.exists() && foreign.exists());
    }

    #[test]
    fn temp_dir_is_removed() {
        let dir = TempDir::new("ohb-test").unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("f"), b"x").unwrap();
        assert!(path.is_dir());
        drop(dir);
        assert!(!path.exists());
    }
}
