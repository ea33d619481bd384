//! `ohb hdfs tiers`: Triple-H's modes (HHH, HHH-M, HHH-L, HHH-L-BB; `jvm/hdfs-tiers`) against vanilla HDFS's storage
//! policies (HOT, the default: every replica on DISK; LAZY_PERSIST; ALL_SSD) in one run, on the same
//! directories: OHB's SWT (sequential write throughput, `writers` files at once, replication 3) and SRT
//! (the same files read back at once), each configuration in its own JVM with its own mini cluster
//! (`io.slipstream.ohb.hdfs.TiersBench` in `jvm/ohb-hdfs`) of three DataNodes with a RAM_DISK directory
//! on tmpfs (a per-run directory under `/dev/shm`), an SSD and a DISK directory on the disk
//! (`build/ohb-hdfs-tiers-<pid>/`); both are removed afterwards, as are those of killed runs. The
//! machine has one disk, so SSD and DISK stand for tiers of the same device: the run first measures
//! each directory's raw speed (sequential write + fsync, then read after dropping the file's cached
//! pages) so the reader sees what the tiers can give here.
//!
//! The JVM fails (and `ohb` exits non-zero) unless every replica is where the configuration puts it
//! (NameNode's locations and the DataNode's own volume agree), every file reads back, and every RAM
//! replica was persisted. Writes are reported twice: when every `close()` returned ("acknowledged") and
//! when HDFS's lazy writer had persisted every RAM replica ("until persisted", detected by the
//! DataNodes' `RamDiskBlocksLazyPersisted` counters reaching their `RamDiskBlocksWrite`); the same for
//! configurations without RAM replicas.
//!
//! HHH-L and HHH-L-BB give each DataNode one more directory, `pfs/dnN` on the disk, of storage type
//! ARCHIVE, standing for a parallel file system; both fail unless each block has exactly one ARCHIVE
//! replica. For HHH-L-BB `ohb` starts a real `slipstream-cache` (hybrid mode, its SSD log under the
//! run's directory; `tiers_pfs.rs`) as the burst buffer and kills it after the JVM; the JVM fails unless
//! every parallel file system replica went through it and was flushed ("until persisted" then also
//! waits for the flushes).

use super::tiers_pfs::BbSizing;
use super::tiers_run::{check_shm_room, finish, run_tiers_jvm};
use crate::args::Args;
use crate::child::{bench_jvm, find_repo_root};
use crate::table::{format_mb_s, format_ratio, Check};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The configurations, in the order they run; `hot` is the reference of every ratio.
/// `hhh-l-bb-fabric` is `hhh-l-bb` with its burst buffer reached over the fabric (`bb.transport=fabric`).
pub const CONFIGS: [&str; 8] = ["hot", "lazy-persist", "all-ssd", "hhh", "hhh-m", "hhh-l", "hhh-l-bb", "hhh-l-bb-fabric"];
/// The configurations with a burst buffer (a slipstream-cache that `ohb` starts): over TCP, then over the fabric.
pub const BURST_BUFFERED: [&str; 2] = ["hhh-l-bb", "hhh-l-bb-fabric"];

/// A configuration's figure `key` in `results`, if it ran and has one.
fn figure(results: &[Value], config: &str, key: &str) -> Option<f64> {
    results.iter().find(|r| r["config"] == config).and_then(|r| r[key].as_f64())
}

const RESULT_PREFIX: &str = "OHB_TIERS_RESULT ";
const CHUNK_BYTES: usize = 1 << 20;
const USAGE: &str = "Usage: ohb hdfs tiers skew --help | ohb hdfs tiers dfsio --help | ohb hdfs tiers [--quick] [--writers N] [--file-bytes N] [--block-bytes N] [--runs N] \
                     [--rounds N] [--raw-bytes N] [--sync-on-close] [--configs LIST] [--shm-dir DIR] [--json FILE] [--no-progress]\n";

/// The workload every configuration gets.
#[derive(Debug, Clone, PartialEq)]
pub struct TiersWorkload {
    pub writers: u32,
    pub file_bytes: u64,
    pub block_bytes: u64,
    pub runs: u32,
    /// Each configuration's JVM this many times, configurations interleaved; medians of the rounds.
    pub rounds: u32,
    /// The file written and read per tier directory for its raw speed.
    pub raw_bytes: u64,
}

impl TiersWorkload {
    /// Full: 2 writers x 128 MiB files in 64 MiB blocks, 3 runs, 3 rounds, 256 MiB raw (HHH-M then
    /// holds 3 x 1 GiB in tmpfs); `--quick`: 2 x 16 MiB in 4 MiB blocks, 3 runs, 1 round, 64 MiB raw.
    pub fn new(quick: bool) -> TiersWorkload {
        if quick {
            TiersWorkload { writers: 2, file_bytes: 16 << 20, block_bytes: 4 << 20, runs: 3, rounds: 1, raw_bytes: 64 << 20 }
        } else {
            TiersWorkload { writers: 2, file_bytes: 128 << 20, block_bytes: 64 << 20, runs: 3, rounds: 3, raw_bytes: 256 << 20 }
        }
    }

    /// Each DataNode's RAM tier as `TiersBench.ramBytesPerDataNode` sizes it: every block of the runs
    /// and the warm-up files, with a 64 KiB meta file each, within 60 % of it.
    pub fn ram_bytes_per_datanode(&self) -> u64 {
        let blocks = u64::from(self.runs + 1) * u64::from(self.writers) * self.file_bytes.div_ceil(self.block_bytes);
        ram_bytes_for_blocks(blocks, self.block_bytes)
    }
}

/// Each DataNode's RAM tier for `blocks` blocks (`TiersCluster.ramBytesPerDataNode`): every one of them with a
/// 64 KiB meta file, within 60 % of it.
pub fn ram_bytes_for_blocks(blocks: u64, block_bytes: u64) -> u64 {
    blocks * (block_bytes + (64 << 10)) * 10 / 6
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct TiersArgs {
    pub workload: TiersWorkload,
    pub configs: Vec<String>,
    pub shm_dir: PathBuf,
    pub json: Option<PathBuf>,
    /// HDFS's `dfs.datanode.synconclose` for every configuration (HDFS's default: off).
    pub sync_on_close: bool,
}

pub fn parse_args(argv: &[String]) -> Result<TiersArgs, String> {
    let args = Args::parse(
        argv,
        &["writers", "file-bytes", "block-bytes", "runs", "rounds", "raw-bytes", "configs", "shm-dir", "json"],
        &["quick", "no-progress", "sync-on-close"],
    )
    .map_err(|e| format!("{e}\n{USAGE}"))?;
    if !args.positional.is_empty() {
        return Err(format!("unexpected {:?}\n{USAGE}", args.positional));
    }
    let mut w = TiersWorkload::new(args.switch("quick"));
    w.writers = args.number("writers")?.unwrap_or(w.writers);
    w.file_bytes = args.number("file-bytes")?.unwrap_or(w.file_bytes);
    w.block_bytes = args.number("block-bytes")?.unwrap_or(w.block_bytes);
    w.runs = args.number("runs")?.unwrap_or(w.runs);
    w.rounds = args.number("rounds")?.unwrap_or(w.rounds);
    w.raw_bytes = args.number("raw-bytes")?.unwrap_or(w.raw_bytes);
    if !(1..=16).contains(&w.writers)
        || !(1 << 20..=4 << 30).contains(&w.file_bytes)
        || !(1 << 20..=1 << 30).contains(&w.block_bytes)
        || !w.block_bytes.is_multiple_of(4096)
        || !(1..=20).contains(&w.runs)
        || !(1..=10).contains(&w.rounds)
        || !(1 << 20..=4 << 30).contains(&w.raw_bytes)
    {
        return Err("writers 1 to 16, file 1 MiB to 4 GiB, block 1 MiB to 1 GiB and a multiple of 4096 (HDFS's condition \
                    for a RAM write), runs 1 to 20, rounds 1 to 10, raw bytes 1 MiB to 4 GiB"
            .into());
    }
    Ok(TiersArgs {
        workload: w,
        configs: parse_configs(&args)?,
        shm_dir: PathBuf::from(args.value("shm-dir").unwrap_or("/dev/shm")),
        json: args.value("json").map(PathBuf::from),
        sync_on_close: args.switch("sync-on-close"),
    })
}

/// `--configs` (default: all of [`CONFIGS`]), which must include `hot`: the ratios are against it.
pub(crate) fn parse_configs(args: &Args) -> Result<Vec<String>, String> {
    let configs: Vec<String> = match args.value("configs") {
        None => CONFIGS.iter().map(|c| c.to_string()).collect(),
        Some(list) => crate::args::parse_list(list, "--configs", |c| CONFIGS.contains(&c).then(|| c.to_string()))?,
    };
    if !configs.iter().any(|c| c == "hot") {
        return Err("--configs must include hot (the ratios are against it)".into());
    }
    Ok(configs)
}

/// A filesystem's name from `statfs`'s `f_type` (the ones this machine and clusters use).
pub fn fs_type_name(magic: i64) -> String {
    match magic {
        0x0102_1994 => "tmpfs".into(),
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("fs 0x{other:x}"),
    }
}

/// `statfs` of a path: (filesystem type, bytes available to us).
pub(crate) fn statfs(path: &Path) -> Result<(i64, u64), String> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| format!("{}: NUL in path", path.display()))?;
    let mut st: libc::statfs = unsafe {
        // SAFETY: statfs is plain old data; all-zero is a valid value, overwritten by the call below.
        std::mem::zeroed()
    };
    // SAFETY: c_path is a NUL-terminated string alive for the call; st is a valid, writable statfs.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(format!("statfs {}: {}", path.display(), std::io::Error::last_os_error()));
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between libc targets
    Ok((st.f_type as i64, st.f_bavail as u64 * st.f_bsize as u64))
}

/// The run's directories: the RAM tier's under tmpfs, SSD's and DISK's on the disk; removed on drop.
pub(crate) struct RunDirs {
    pub(crate) ram: PathBuf,
    pub(crate) disk: PathBuf,
}

impl RunDirs {
    pub(crate) fn create(shm_dir: &Path, root: &Path) -> Result<RunDirs, String> {
        let (magic, _) = statfs(shm_dir)?;
        if fs_type_name(magic) != "tmpfs" {
            return Err(format!("{} is {}, not tmpfs: the RAM_DISK tier needs a tmpfs directory (--shm-dir)", shm_dir.display(), fs_type_name(magic)));
        }
        let disk_parent = root.join("build");
        // Runs killed before their clean-up (SIGKILL skips `Drop`) leave their directories; a
        // run of another `ohb` still alive keeps its own.
        remove_stale(shm_dir, RUN_DIR_PREFIX);
        remove_stale(&disk_parent, RUN_DIR_PREFIX);
        let ram = shm_dir.join(format!("{RUN_DIR_PREFIX}{}", std::process::id()));
        let disk = disk_parent.join(format!("{RUN_DIR_PREFIX}{}", std::process::id()));
        for dir in [&ram, &disk] {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        Ok(RunDirs { ram, disk })
    }
}

/// The run directories' names: this prefix and the `ohb` process's id.
const RUN_DIR_PREFIX: &str = "ohb-hdfs-tiers-";

/// The pid in a run directory's name, if it is one.
fn run_dir_pid(name: &str) -> Option<u32> {
    name.strip_prefix(RUN_DIR_PREFIX)?.parse().ok()
}

/// Removes `parent`'s run directories whose process is gone.
fn remove_stale(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(pid) = name.starts_with(prefix).then(|| run_dir_pid(&name)).flatten() {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

impl Drop for RunDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.ram);
        let _ = std::fs::remove_dir_all(&self.disk);
    }
}

/// One tier directory's raw speed: (write + fsync MB/s, read MB/s).
fn raw_speed(dir: &Path, bytes: u64) -> Result<(f64, f64), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("raw-speed.bin");
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for byte in chunk.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *byte = x as u8;
    }
    let start = Instant::now();
    let mut file = std::fs::File::create(&path).map_err(io)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK_BYTES as u64) as usize;
        file.write_all(&chunk[..n]).map_err(io)?;
        left -= n as u64;
    }
    file.sync_all().map_err(io)?;
    let write_s = start.elapsed().as_secs_f64();
    drop(file);
    let mut file = std::fs::File::open(&path).map_err(io)?;
    // Drop the file's clean pages so the read comes from the device; on tmpfs the pages are the storage
    // and stay. SAFETY: the descriptor is open for the call; fadvise only gives the kernel a hint.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(format!("posix_fadvise {}: {}", path.display(), std::io::Error::from_raw_os_error(rc)));
    }
    let start = Instant::now();
    let mut read = 0u64;
    loop {
        let n = file.read(&mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let read_s = start.elapsed().as_secs_f64();
    std::fs::remove_file(&path).map_err(io)?;
    if read != bytes {
        return Err(format!("{}: read {read} of {bytes} bytes", path.display()));
    }
    Ok((bytes as f64 / 1e6 / write_s, bytes as f64 / 1e6 / read_s))
}

/// The `OHB_TIERS_RESULT` line of one JVM's output.
pub fn parse_result(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT_PREFIX))
        .ok_or_else(|| "no OHB_TIERS_RESULT line".to_string())?;
    serde_json::from_str(line).map_err(|e| format!("bad result line {line}: {e}"))
}

fn run_jvm(root: &Path, a: &TiersArgs, config: &str, dirs: &RunDirs) -> Result<Value, String> {
    let w = &a.workload;
    let mut cmd = bench_jvm(root, "ohb-hdfs", "2g")?;
    cmd.arg("io.slipstream.ohb.hdfs.TiersBench")
        .args(["--config", config, "--writers", &w.writers.to_string(), "--runs", &w.runs.to_string()])
        .args(["--file-bytes", &w.file_bytes.to_string(), "--block-bytes", &w.block_bytes.to_string()])
        .args(["--sync-on-close", &a.sync_on_close.to_string()]);
    run_tiers_jvm(root, "ohb-hdfs-tiers", config, dirs, cmd, BbSizing::for_workload(w))?.result(parse_result)
}

/// One tier directory's raw speed, for the table.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTier {
    pub tier: &'static str,
    pub dir: String,
    pub fs: String,
    pub write_mb_s: f64,
    pub read_mb_s: f64,
}

/// The figures compared across configurations.
const FIGURES: [&str; 3] = ["write_mb_s", "write_persisted_mb_s", "read_mb_s"];

/// One configuration's rounds as one result: the first round's, with each figure the median of the
/// rounds (`<figure>_rounds` lists them) and the longest persist wait; `None` without a round.
pub fn combine(rounds: &[Value]) -> Option<Value> {
    let mut combined = rounds.first()?.clone();
    for key in FIGURES {
        let values: Vec<f64> = rounds.iter().filter_map(|r| r[key].as_f64()).collect();
        combined[key] = json!(crate::stats::median(&values));
        combined[format!("{key}_rounds")] = json!(values);
    }
    combined["persist_wait_ms_max"] = json!(rounds.iter().filter_map(|r| r["persist_wait_ms_max"].as_u64()).max());
    combined["rounds"] = json!(rounds.len());
    Some(combined)
}

/// The targets, from the results (`None` ratio when a configuration has no figure).
pub fn checks(results: &[Value]) -> Vec<Check> {
    let figure = |config: &str, key: &str| figure(results, config, key);
    let ratio = |config: &str, key: &str| match (figure(config, key), figure("hot", "write_mb_s")) {
        (Some(x), Some(hot)) if hot > 0.0 => Some(x / hot),
        _ => None,
    };
    let check = |name: &str, r: Option<f64>, min: f64, detail: &str| Check {
        name: name.into(),
        ratio: r,
        pass: r.map(|r| r >= min),
        detail: detail.into(),
    };
    // HHH-L's target: local storage per block (replicas on the DataNodes' own tiers) at most (r-1)/r of
    // HOT's, which keeps all r replicas local; r is the replication the JVMs wrote with.
    let r = figure("hot", "replication").unwrap_or(3.0).round() as u32;
    let local_max = f64::from(r.saturating_sub(1)) / f64::from(r.max(1));
    let local = |config: &str| match (figure(config, "local_bytes_per_block"), figure("hot", "local_bytes_per_block")) {
        (Some(l), Some(hot)) if hot > 0.0 => Some(l / hot),
        _ => None,
    };
    let local_check = |label: &str, config: &str| Check {
        name: format!("{label} local bytes/block <= {}/{r} HOT", r.saturating_sub(1)),
        ratio: local(config),
        pass: local(config).map(|x| x <= local_max + 1e-9),
        detail: "replicas on the DataNodes' own tiers; the other is on the parallel file system (ARCHIVE)".into(),
    };
    let read = |config: &str| match (figure(config, "read_mb_s"), figure("hot", "read_mb_s")) {
        (Some(x), Some(hot)) if hot > 0.0 => Some(x / hot),
        _ => None,
    };
    vec![
        local_check("HHH-L", "hhh-l"),
        check("HHH-L read >= 1.0x HOT", read("hhh-l"), 1.0, "readers sent to local replicas first (considerStorageType)"),
        local_check("HHH-L-BB", "hhh-l-bb"),
        check(
            "HHH-L-BB read >= 1.0x HOT",
            read("hhh-l-bb"),
            1.0,
            "read after the burst buffer flushed every replica (until-persisted wait of each run)",
        ),
        local_check("HHH-L-BB (fabric)", "hhh-l-bb-fabric"),
        check(
            "HHH-L-BB (fabric) read >= 1.0x HOT",
            read("hhh-l-bb-fabric"),
            1.0,
            "the same, its burst buffer reached over the fabric",
        ),
        check("HHH-M write >= 2x HOT", ratio("hhh-m", "write_mb_s"), 2.0, "acknowledged writes; HHH-M keeps short-lived files in RAM only"),
        check(
            "HHH write >= 1.5x HOT",
            ratio("hhh", "write_mb_s"),
            1.5,
            "acknowledged writes (two replicas on SSD/DISK at close); every RAM replica persisted afterwards (checked)",
        ),
        check(
            "HHH write until persisted >= 1.5x HOT",
            ratio("hhh", "write_persisted_mb_s"),
            1.5,
            "until HDFS's lazy writer persisted every RAM replica: HOT's durability for all three replicas",
        ),
    ]
}

/// The tables: the tier directories' raw speeds, then one row per configuration with ratios to HOT,
/// then the targets.
pub fn render(w: &TiersWorkload, raw: &[RawTier], results: &[Value], checks: &[Check]) -> String {
    let mut out = format!(
        "ohb hdfs tiers: 3 DataNodes, replication 3, {} writers/readers x {} B files, block {} B, {} runs x {} rounds \
         (medians), RAM tier {} B per DataNode\n",
        w.writers,
        w.file_bytes,
        w.block_bytes,
        w.runs,
        w.rounds,
        w.ram_bytes_per_datanode()
    );
    out += &format!("raw speed of the tier directories ({} B sequential write + fsync, read after dropping cached pages):\n", w.raw_bytes);
    out += &format!("{:<9} {:<10} {:>11} {:>10}  directory\n", "tier", "fs", "write MB/s", "read MB/s");
    for t in raw {
        out += &format!("{:<9} {:<10} {:>11} {:>10}  {}\n", t.tier, t.fs, format_mb_s(t.write_mb_s), format_mb_s(t.read_mb_s), t.dir);
    }
    out += "(SSD, DISK and ARCHIVE are directories of one filesystem, standing for tiers (ARCHIVE: the parallel file \
            system of HHH-L): this machine has one disk)\n";
    let hot = results.iter().find(|r| r["config"] == "hot");
    let cell = |r: &Value, key: &str| r[key].as_f64().map(format_mb_s).unwrap_or_else(|| "failed".into());
    let vs = |r: &Value, key: &str| match (r[key].as_f64(), hot.and_then(|h| h[key].as_f64())) {
        (Some(x), Some(h)) if h > 0.0 => format_ratio(x / h),
        _ => "-".into(),
    };
    out += &format!(
        "\n{:<15} {:>10} {:>7} {:>15} {:>7} {:>10} {:>7}  {:<16} {}\n",
        "config", "write MB/s", "vs HOT", "persisted MB/s", "vs HOT", "read MB/s", "vs HOT", "replicas R/S/D/A", "persist wait ms"
    );
    for config in CONFIGS {
        let Some(r) = results.iter().find(|r| r["config"] == config) else { continue };
        let replicas = format!(
            "{}/{}/{}/{}",
            r["replicas_ram_disk"].as_u64().unwrap_or(0),
            r["replicas_ssd"].as_u64().unwrap_or(0),
            r["replicas_disk"].as_u64().unwrap_or(0),
            r["replicas_archive"].as_u64().unwrap_or(0)
        );
        out += &format!(
            "{:<15} {:>10} {:>7} {:>15} {:>7} {:>10} {:>7}  {:<16} {}\n",
            config,
            cell(r, "write_mb_s"),
            vs(r, "write_mb_s"),
            cell(r, "write_persisted_mb_s"),
            vs(r, "write_persisted_mb_s"),
            cell(r, "read_mb_s"),
            vs(r, "read_mb_s"),
            replicas,
            r["persist_wait_ms_max"].as_u64().map(|ms| ms.to_string()).unwrap_or_default()
        );
    }
    for config in BURST_BUFFERED {
        if let Some(bb) = results.iter().find(|r| r["config"] == config && r["bb_replicas_buffered"].is_u64()) {
            out += &burst_buffer_line(bb, "first round");
        }
    }
    let figure = |config: &str, key: &str| figure(results, config, key);
    let bb_fabric_vs_tcp = |key: &str| match (figure("hhh-l-bb-fabric", key), figure("hhh-l-bb", key)) {
        (Some(f), Some(t)) if t > 0.0 => format_ratio(f / t),
        _ => "-".into(),
    };
    if BURST_BUFFERED.iter().all(|c| results.iter().any(|r| r["config"] == *c)) {
        out += &format!(
            "hhh-l-bb's burst buffer over the fabric against TCP: write {}, until persisted {}, read {}\n",
            bb_fabric_vs_tcp("write_mb_s"),
            bb_fabric_vs_tcp("write_persisted_mb_s"),
            bb_fabric_vs_tcp("read_mb_s")
        );
    }
    for config in ["hot", "hhh-l", "hhh-l-bb", "hhh-l-bb-fabric"] {
        if let Some(b) = results.iter().find(|r| r["config"] == config).and_then(|r| r["local_bytes_per_block"].as_f64()) {
            out += &format!("local bytes per block, {config}: {b:.0}\n");
        }
    }
    out += "targets (one run, ratios to HOT in it):\n";
    for c in checks {
        let verdict = match c.pass {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "no figure",
        };
        let ratio = c.ratio.map(format_ratio).unwrap_or_else(|| "-".into());
        out += &format!("  {:<46} {:>7}  {:<9} {}\n", c.name, ratio, verdict, c.detail);
    }
    out
}

/// HHH-L-BB's burst buffer in one line: the cache, the DataNodes' counters of `when` (a round, say), the cache's own.
pub fn burst_buffer_line(bb: &Value, when: &str) -> String {
    let n = |key: &str| bb[key].as_u64().map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    format!(
        "{} burst buffer (slipstream-cache at {}{}, {} MB + {} MB SSD log), {when}: {} replicas buffered, \
         {} flushed ({} B), {} reads served from it, {} written straight through, {} lost; the cache: {} sets, \
         {} evictions, {} spilled to its SSD log\n",
        bb["config"].as_str().unwrap_or("hhh-l-bb"),
        bb["bb_servers"].as_str().unwrap_or("?"),
        bb["bb_cache_fabric_requests"].as_u64().map(|n| format!(" over the fabric: {n} requests")).unwrap_or_default(),
        n("bb_memory_mb"),
        n("bb_ssd_mb"),
        n("bb_replicas_buffered"),
        n("bb_replicas_flushed"),
        n("bb_bytes_flushed"),
        n("bb_reads_from_buffer"),
        n("bb_replicas_written_through"),
        n("bb_replicas_lost"),
        n("bb_cache_cmd_set"),
        n("bb_cache_evictions"),
        n("bb_cache_ssd_spills"),
    )
}

pub fn tiers_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    if argv.first().map(String::as_str) == Some("skew") {
        return super::tiers_skew::skew_main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("dfsio") {
        return super::tiers_dfsio::tiers_dfsio_main(&argv[1..]);
    }
    let a = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let dirs = RunDirs::create(&a.shm_dir, &root)?;
    check_shm_room(&a.shm_dir, a.workload.ram_bytes_per_datanode())?;
    let mut raw = Vec::new();
    let mut tiers = vec![
        ("RAM_DISK", dirs.ram.join("raw"), dirs.ram.join("<config>/dnN")),
        ("SSD", dirs.disk.join("raw-ssd"), dirs.disk.join("<config>/ssd/dnN")),
        ("DISK", dirs.disk.join("raw-disk"), dirs.disk.join("<config>/disk/dnN")),
    ];
    if a.configs.iter().any(|c| c.starts_with("hhh-l")) {
        tiers.push(("ARCHIVE", dirs.disk.join("raw-pfs"), dirs.disk.join("<config>/pfs/dnN")));
    }
    for (tier, dir, shown) in tiers {
        let (write_mb_s, read_mb_s) = raw_speed(&dir, a.workload.raw_bytes)?;
        let (magic, _) = statfs(&dir)?;
        let _ = std::fs::remove_dir_all(&dir);
        raw.push(RawTier { tier, dir: shown.display().to_string(), fs: fs_type_name(magic), write_mb_s, read_mb_s });
    }
    // Rounds interleave the configurations, so that a change of the machine's load over the run
    // falls on all of them alike.
    let mut rounds: Vec<Value> = Vec::new();
    let mut failures = Vec::new();
    for round in 0..a.workload.rounds {
        for config in &a.configs {
            match run_jvm(&root, &a, config, &dirs) {
                Ok(mut result) => {
                    result["round"] = json!(round);
                    rounds.push(result);
                }
                Err(e) => failures.push(format!("{config} round {round}: {e}")),
            }
        }
    }
    let results: Vec<Value> = a
        .configs
        .iter()
        .filter_map(|config| combine(&rounds.iter().filter(|r| r["config"] == config.as_str()).cloned().collect::<Vec<_>>()))
        .collect();
    let checks = checks(&results);
    if a.sync_on_close {
        println!("(dfs.datanode.synconclose on: every DataNode fsyncs each finished block file; HDFS's default is off)");
    }
    print!("{}", render(&a.workload, &raw, &results, &checks));

    let w = &a.workload;
    let value = json!({"bench": "hdfs tiers",
        "workload": {"writers": w.writers, "file_bytes": w.file_bytes, "block_bytes": w.block_bytes, "runs": w.runs,
            "rounds": w.rounds, "sync_on_close": a.sync_on_close, "raw_bytes": w.raw_bytes, "ram_bytes_per_datanode": w.ram_bytes_per_datanode()},
        "raw": raw.iter().map(|t| json!({"tier": t.tier, "dir": t.dir, "fs": t.fs, "write_mb_s": t.write_mb_s, "read_mb_s": t.read_mb_s})).collect::<Vec<_>>(),
        "rounds": rounds, "runs": results, "targets": checks.iter().map(Check::to_json).collect::<Vec<_>>()});
    let path = a.json.clone().unwrap_or_else(|| root.join("results").join("ohb-hdfs-tiers.json"));
    finish("ohb hdfs tiers", &path, &value, started, &failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_defaults_overrides_and_refuses_bad_values() {
        let a = parse_args(&words("--quick --writers 3 --configs hot,hhh --json x.json --no-progress")).unwrap();
        assert_eq!(a.workload.writers, 3);
        assert_eq!(a.workload.file_bytes, 16 << 20);
        assert_eq!(a.configs, vec!["hot", "hhh"]);
        assert_eq!(a.json, Some(PathBuf::from("x.json")));
        assert_eq!(a.shm_dir, PathBuf::from("/dev/shm"));
        assert!(!a.sync_on_close);
        assert!(parse_args(&words("--sync-on-close")).unwrap().sync_on_close);
        let full = parse_args(&[]).unwrap();
        assert_eq!(full.configs.len(), CONFIGS.len());
        assert!(full.workload.file_bytes > full.workload.block_bytes);
        for bad in [
            "--writers 0",
            "--writers 17",
            "--block-bytes 1048577",
            "--file-bytes 1000",
            "--runs 0",
            "--rounds 11",
            "--raw-bytes 10",
            "--configs hhh",
            "--configs hot,bogus",
            "--bogus 1",
            "extra",
        ] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn ram_tier_holds_every_block_within_sixty_percent() {
        let w = TiersWorkload { writers: 2, file_bytes: 16 << 20, block_bytes: 4 << 20, runs: 3, rounds: 1, raw_bytes: 1 << 20 };
        // (3 runs + warm-up) x 2 writers x 4 blocks, each with its meta file, at 60 %.
        assert_eq!(w.ram_bytes_per_datanode(), 32 * ((4 << 20) + (64 << 10)) * 10 / 6);
        // A file of a block and a bit takes two blocks.
        let w = TiersWorkload { file_bytes: (4 << 20) + 1, runs: 1, writers: 1, ..w };
        assert_eq!(w.ram_bytes_per_datanode(), 4 * ((4 << 20) + (64 << 10)) * 10 / 6);
    }

    #[test]
    fn filesystem_names_and_the_machines_tmpfs() {
        assert_eq!(fs_type_name(0x0102_1994), "tmpfs");
        assert_eq!(fs_type_name(0xEF53), "ext4");
        assert_eq!(fs_type_name(0x1234), "fs 0x1234");
        assert!(statfs(Path::new("/nonexistent-ohb-dir")).is_err());
        let (magic, free) = statfs(Path::new("/dev/shm")).unwrap();
        assert_eq!(fs_type_name(magic), "tmpfs", "/dev/shm is tmpfs on the machines ohb runs on");
        assert!(free > 0);
    }

    #[test]
    fn raw_speed_writes_reads_and_removes_its_file() {
        let dir = std::env::temp_dir().join(format!("ohb-tiers-raw-{}", std::process::id()));
        let (write, read) = raw_speed(&dir, 2 << 20).unwrap();
        assert!(write > 0.0 && read > 0.0);
        assert!(!dir.join("raw-speed.bin").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn result(config: &str, write: f64, persisted: f64, read: f64) -> Value {
        json!({"config": config, "write_mb_s": write, "write_persisted_mb_s": persisted, "read_mb_s": read,
               "replicas_ram_disk": 16, "replicas_ssd": 32, "replicas_disk": 0, "persist_wait_ms_max": 800})
    }

    #[test]
    fn hhh_l_targets_local_bytes_and_reads_and_the_burst_buffer_line() {
        let mut hot = result("hot", 100.0, 100.0, 200.0);
        hot["local_bytes_per_block"] = json!(3.0 * 4194304.0);
        hot["replication"] = json!(3);
        let mut l = result("hhh-l", 100.0, 100.0, 190.0);
        l["local_bytes_per_block"] = json!(2.0 * 4194304.0);
        l["replicas_archive"] = json!(16);
        let mut bb = result("hhh-l-bb", 120.0, 90.0, 210.0);
        // A block whose three replicas all stayed local (no ARCHIVE room, say) pushes it past 2/3.
        bb["local_bytes_per_block"] = json!(2.1 * 4194304.0);
        for (k, v) in [("bb_replicas_buffered", 20), ("bb_replicas_flushed", 20), ("bb_reads_from_buffer", 3), ("bb_memory_mb", 392)] {
            bb[k] = json!(v);
        }
        for (k, v) in [("bb_ssd_mb", 392), ("bb_cache_cmd_set", 160), ("bb_cache_evictions", 0), ("bb_cache_ssd_spills", 0)] {
            bb[k] = json!(v);
        }
        bb["bb_servers"] = json!("127.0.0.1:4242");
        let results = vec![hot, l, bb];
        let judged = checks(&results);
        let find = |name: &str| judged.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}: {judged:?}")).clone();
        let local = find("HHH-L local bytes/block <= 2/3 HOT");
        assert_eq!(local.pass, Some(true), "2/3 of HOT's local bytes meets the target");
        assert_eq!(find("HHH-L-BB local bytes/block <= 2/3 HOT").pass, Some(false), "0.7 of HOT's misses it");
        let read = find("HHH-L read >= 1.0x HOT");
        assert_eq!(read.ratio, Some(0.95));
        assert_eq!(read.pass, Some(false));
        assert_eq!(find("HHH-L-BB read >= 1.0x HOT").pass, Some(true), "1.05x");
        // The target follows the replication the JVMs wrote with.
        let mut r2 = results.clone();
        r2[0]["replication"] = json!(2);
        assert!(checks(&r2).iter().any(|c| c.name == "HHH-L local bytes/block <= 1/2 HOT"));
        let table = render(&TiersWorkload::new(true), &[], &results, &judged);
        assert!(table.contains("16/32/0/16"), "{table}");
        assert!(table.contains("20 replicas buffered, 20 flushed") && table.contains("127.0.0.1:4242, 392 MB + 392 MB SSD log"), "{table}");
        assert!(table.contains("160 sets, 0 evictions, 0 spilled"), "{table}");
        assert!(table.contains("local bytes per block, hhh-l: 8388608"), "{table}");
    }

    #[test]
    fn targets_are_judged_against_hot_and_shown() {
        let results = vec![result("hot", 100.0, 100.0, 200.0), result("hhh", 160.0, 120.0, 300.0), result("hhh-m", 190.0, 150.0, 400.0)];
        let judged = checks(&results);
        let find = |name: &str| judged.iter().find(|c| c.name == name).unwrap().clone();
        assert_eq!(find("HHH-M write >= 2x HOT").ratio, Some(1.9));
        assert_eq!(find("HHH-M write >= 2x HOT").pass, Some(false), "HHH-M 1.9x misses 2x");
        assert_eq!(find("HHH write >= 1.5x HOT").pass, Some(true), "HHH acknowledged 1.6x meets 1.5x");
        assert_eq!(find("HHH write until persisted >= 1.5x HOT").ratio, Some(1.2));
        assert_eq!(find("HHH write until persisted >= 1.5x HOT").pass, Some(false));
        let raw = vec![RawTier { tier: "RAM_DISK", dir: "/dev/shm/x".into(), fs: "tmpfs".into(), write_mb_s: 2000.0, read_mb_s: 4000.0 }];
        let table = render(&TiersWorkload::new(true), &raw, &results, &judged);
        assert!(table.contains("RAM_DISK  tmpfs"), "{table}");
        assert!(table.contains("1.60x"), "{table}");
        assert!(table.contains("16/32/0/0"), "{table}");
        assert!(table.contains("HHH-M write >= 2x HOT") && table.contains("MISSED"), "{table}");
        assert!(table.lines().any(|l| l.contains("HHH write >= 1.5x HOT") && l.contains(" met ")), "{table}");
        // Without HOT's figure nothing is judged.
        let alone = checks(&results[1..]);
        assert!(alone.iter().all(|c| c.pass.is_none()));
        assert!(render(&TiersWorkload::new(true), &[], &results[1..], &alone).contains("no figure"));
    }

    #[test]
    fn rounds_combine_to_medians_and_the_longest_persist_wait() {
        assert_eq!(combine(&[]), None);
        let rounds = [result("hhh", 90.0, 60.0, 300.0), result("hhh", 70.0, 50.0, 100.0), result("hhh", 80.0, 65.0, 200.0)];
        let mut slow = rounds[1].clone();
        slow["persist_wait_ms_max"] = json!(1500);
        let c = combine(&[rounds[0].clone(), slow, rounds[2].clone()]).unwrap();
        assert_eq!(c["write_mb_s"], json!(80.0));
        assert_eq!(c["write_persisted_mb_s"], json!(60.0));
        assert_eq!(c["read_mb_s"], json!(200.0));
        assert_eq!(c["write_mb_s_rounds"], json!([90.0, 70.0, 80.0]));
        assert_eq!(c["persist_wait_ms_max"], json!(1500));
        assert_eq!(c["rounds"], json!(3));
        assert_eq!(c["config"], "hhh");
    }

    #[test]
    fn stale_run_directories_go_and_live_ones_stay() {
        assert_eq!(run_dir_pid("ohb-hdfs-tiers-42"), Some(42));
        assert_eq!(run_dir_pid("ohb-hdfs-tiers-x"), None);
        assert_eq!(run_dir_pid("other-42"), None);
        let parent = std::env::temp_dir().join(format!("ohb-tiers-stale-{}", std::process::id()));
        let live = parent.join(format!("{RUN_DIR_PREFIX}{}", std::process::id()));
        // Above the kernel's pid_max (at most 2^22): no process has it.
        let dead = parent.join(format!("{RUN_DIR_PREFIX}{}", 1u32 << 23));
        let other = parent.join("keep-me");
        for dir in [&live, &dead, &other] {
            std::fs::create_dir_all(dir.join("dn0")).unwrap();
        }
        remove_stale(&parent, RUN_DIR_PREFIX);
        assert!(live.exists() && other.exists() && !dead.exists());
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_result_line_is_found_among_the_logs() {
        let r = parse_result("noise\nOHB_TIERS_RESULT {\"config\":\"hhh\",\"ok\":true}\n").unwrap();
        assert_eq!(r["config"], "hhh");
        assert!(parse_result("OHB_HDFS_RESULT {}").is_err());
        assert!(parse_result("OHB_TIERS_RESULT {bad").is_err());
    }
}
