//! The four servers of the spill comparison, each started fresh in its own temporary directory,
//! and what the bench reads of their statistics.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cache_client::Client;

use crate::cache::hybrid::keys::extstore_option;
use crate::cache::servers::{
    memcached_runs_as_nobody, start_cache_with, start_memcached_with, ServerSettings, StartExtras,
};
use crate::child::{run_captured, ChildGuard};

/// How long `slipstream-cache --help` may take (probe for the SSD flags).
const HELP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM before it gets SIGKILL.
const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of a server's captured stderr forwarded to ours when it stops.
const SERVER_LOG_LINES_MAX: usize = 40;

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
pub(super) struct Running {
    server: HybridServer,
    child: ChildGuard,
    pub(super) tcp: SocketAddr,
    pub(super) fabric: Option<SocketAddr>,
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
pub(super) fn start_server(
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

pub(super) fn stat_of<'a>(stats: &'a [(String, String)], name: &str) -> Option<&'a str> {
    stats.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

pub(super) fn server_stats(client: &Client) -> Result<Vec<(String, String)>, String> {
    let mut all = client.stats(None);
    match all.pop() {
        Some((_, Ok(stats))) => Ok(stats),
        Some((addr, Err(e))) => Err(format!("stats from {addr:?}: {e}")),
        None => Err("stats: no server".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
