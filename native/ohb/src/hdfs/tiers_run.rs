//! What `ohb hdfs tiers`' benchmarks (`tiers.rs`: OHB's SWT/SRT; `tiers_dfsio.rs`: Hadoop's TestDFSIO) share
//! around their JVMs: the room check of the RAM tier's tmpfs, one configuration's JVM run in the run's
//! directories with HHH-L-BB's burst buffer around it, and the end of a run.

use super::tiers::{statfs, RunDirs};
use super::tiers_pfs::{cache_binary, BbSizing, BurstBufferCache};
use crate::child::run_captured;
use crate::output::{fail_if_points_failed, write_json};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One configuration's JVM run (cluster, files, checks): bounded, then killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
/// The share of the RAM tier's free space one run may plan to use (all configurations' RAM replicas
/// at once in the worst case: each JVM's directory is removed after it).
const SHM_SHARE_MAX: f64 = 0.5;

/// Fails unless the three DataNodes' RAM tiers, `ram_bytes_per_datanode` each, fit in the tmpfs's share
/// [`SHM_SHARE_MAX`] of its free space.
pub(crate) fn check_shm_room(shm_dir: &Path, ram_bytes_per_datanode: u64) -> Result<(), String> {
    let (_, shm_free) = statfs(shm_dir)?;
    let ram_planned = 3 * ram_bytes_per_datanode;
    if ram_planned as f64 > shm_free as f64 * SHM_SHARE_MAX {
        return Err(format!(
            "the RAM tier would take up to {ram_planned} B of {}, which has {shm_free} B free (at most {:.0} % of it): fewer or smaller files",
            shm_dir.display(),
            SHM_SHARE_MAX * 100.0
        ));
    }
    Ok(())
}

/// What one configuration's JVM left: its stdout, its log, and for hhh-l-bb the cache's `bb_*` fields.
pub(crate) struct TiersJvmRun {
    pub(crate) stdout: String,
    pub(crate) log: PathBuf,
    pub(crate) burst_buffer: Value,
}

impl TiersJvmRun {
    /// The JVM's result line (found by `parse`) with the cache's `bb_*` fields added; an error names the log.
    pub(crate) fn result(&self, parse: fn(&str) -> Result<Value, String>) -> Result<Value, String> {
        let mut result = parse(&self.stdout).map_err(|e| format!("{e}; log: {}", self.log.display()))?;
        for (key, value) in self.burst_buffer.as_object().into_iter().flatten() {
            result[key] = value.clone();
        }
        Ok(result)
    }
}

/// Runs one configuration's JVM of a tiers benchmark (`cmd`: the class and its own arguments), given the
/// configuration's RAM and disk directories under `dirs` and, for hhh-l-bb, a burst buffer started for it
/// (sized `sizing`) and killed after it, whatever the JVM did. The configuration's directories go at once
/// afterwards (its burst buffer is stopped by then): the RAM tier's bytes are memory. Both outputs are kept in `build/<name>-<config>.log`; a JVM
/// that exits non-zero is an error quoting its `ohb hdfs tiers...` stderr lines.
pub(crate) fn run_tiers_jvm(root: &Path, name: &str, config: &str, dirs: &RunDirs, cmd: Command, sizing: BbSizing) -> Result<TiersJvmRun, String> {
    let run = run_in_dirs(root, name, config, dirs, cmd, sizing);
    let _ = std::fs::remove_dir_all(dirs.ram.join(config));
    let _ = std::fs::remove_dir_all(dirs.disk.join(config));
    run
}

fn run_in_dirs(root: &Path, name: &str, config: &str, dirs: &RunDirs, mut cmd: Command, sizing: BbSizing) -> Result<TiersJvmRun, String> {
    cmd.arg("--ram-dir").arg(dirs.ram.join(config)).arg("--disk-dir").arg(dirs.disk.join(config));
    // Killed when dropped: at the end of this function, whatever the JVM did.
    let mut cache = None;
    if super::tiers::BURST_BUFFERED.contains(&config) {
        let fabric = config == "hhh-l-bb-fabric";
        let log = root.join("build").join(format!("{name}-{config}-cache.log"));
        let started = BurstBufferCache::start(&cache_binary()?, &dirs.disk.join(config).join("bb-ssd"), &log, sizing, fabric)?;
        // hhh-l-bb-fabric's DataNodes reach the cache at its fabric address (bb.transport=fabric).
        let servers = if fabric { started.fabric_addr.expect("checked at start") } else { started.addr };
        cmd.args(["--bb-servers", &servers.to_string(), "--bb-max-pending-bytes", &sizing.max_pending_bytes.to_string()]);
        cache = Some(started);
    }
    eprintln!("{}: running {config} ...", name.replace('-', " "));
    let captured = run_captured(name, cmd, RUN_TIMEOUT)?;
    let log = root.join("build").join(format!("{name}-{config}.log"));
    // Hadoop's log4j writes to stdout, the bench's own failures go to stderr: the log keeps both.
    std::fs::write(&log, format!("{}{}", captured.stdout, captured.stderr)).map_err(|e| format!("{}: {e}", log.display()))?;
    if !captured.status.success() {
        let reasons: Vec<&str> = captured.stderr.lines().filter(|l| l.starts_with("ohb hdfs tiers")).collect();
        return Err(format!("{config} failed ({}); log: {}\n{}", captured.status, log.display(), reasons.join("\n")));
    }
    let burst_buffer = match cache.as_mut() {
        Some(cache) => cache.report()?,
        None => json!({}),
    };
    Ok(TiersJvmRun { stdout: captured.stdout, log, burst_buffer })
}

/// The end of a tiers benchmark's run: its JSON written to `path`, where it went and how long the run took
/// printed, and `Err` naming every failed point when any failed.
pub(crate) fn finish(name: &str, path: &Path, value: &Value, started: Instant, failures: &[String]) -> Result<(), String> {
    write_json(path, value)?;
    println!("results: {}", path.display());
    println!("{name}: {:.0} s in all", started.elapsed().as_secs_f64());
    fail_if_points_failed(name, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_ram_tiers_must_fit_in_half_of_the_tmpfs() {
        let shm = Path::new("/dev/shm");
        assert_eq!(check_shm_room(shm, 1 << 20), Ok(()));
        let (_, free) = statfs(shm).unwrap();
        // Three DataNodes' tiers of a fifth of the free space each: 60 % of it (a margin for other runs' use).
        let e = check_shm_room(shm, free / 5).unwrap_err();
        assert!(e.contains("fewer or smaller files") && e.contains("/dev/shm"), "{e}");
        assert!(check_shm_room(Path::new("/nonexistent-ohb-dir"), 1).is_err());
    }
}
