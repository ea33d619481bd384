//! Child processes: every measured server runs in its own process. A `ChildGuard` kills its
//! process on drop (also while unwinding from a panic), and children get SIGKILL from the kernel
//! if `ohb` itself dies (PR_SET_PDEATHSIG), so no server outlives a run.
//!
//! Our own servers (`ohb __serve ...`) announce themselves with one stdout line,
//! `ohb-serve port=PORT pid=PID`, and exit when their stdin reaches end of file.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The prefix of the line a server prints once it listens.
pub const ANNOUNCE_PREFIX: &str = "ohb-serve port=";

/// Lines a child may print before its announcement (anything else is diagnostics).
const LINES_BEFORE_ANNOUNCE_MAX: usize = 1000;

/// How `ohb` starts itself again: the path of the `ohb` executable.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub exe: PathBuf,
}

impl Launcher {
    pub fn current() -> Result<Launcher, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the ohb executable: {e}"))?;
        Ok(Launcher { exe })
    }

    /// Starts `ohb <args...>` with piped stdin/stdout (stderr inherited).
    pub fn spawn(&self, name: &str, args: &[String]) -> Result<ChildGuard, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args);
        ChildGuard::spawn(name, cmd, true)
    }

    /// Starts a server subcommand and waits for its announced port.
    pub fn spawn_server(&self, name: &str, args: &[String], timeout: Duration) -> Result<(ChildGuard, u16), String> {
        let mut child = self.spawn(name, args)?;
        let port = child.wait_for_port(timeout)?;
        Ok((child, port))
    }
}

/// Owns a child process; kills and reaps it on drop.
pub struct ChildGuard {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Option<Receiver<String>>,
}

impl ChildGuard {
    /// Spawns `cmd`. With `capture_stdout` a reader thread turns its stdout into lines (see `next_line`).
    pub fn spawn(name: &str, mut cmd: Command, capture_stdout: bool) -> Result<ChildGuard, String> {
        cmd.stdin(Stdio::piped());
        cmd.stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() });
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
        let stdin = child.stdin.take();
        let lines = child.stdout.take().map(|out| {
            let (tx, rx) = mpsc::channel();
            std::thread::Builder::new()
                .name(format!("ohb-{name}-stdout"))
                .spawn(move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                })
                .expect("spawn stdout reader");
            rx
        });
        Ok(ChildGuard { name: name.to_string(), child, stdin, lines })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stdout line, or `None` at end of output or after `timeout`.
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<String>, String> {
        let rx = self.lines.as_ref().ok_or("stdout not captured")?;
        match rx.recv_timeout(timeout) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(format!("{} closed its output", self.name)),
        }
    }

    /// Reads lines until the server announcement and returns its port.
    pub fn wait_for_port(&mut self, timeout: Duration) -> Result<u16, String> {
        let deadline = Instant::now() + timeout;
        for _ in 0..LINES_BEFORE_ANNOUNCE_MAX {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.next_line(left) {
                Ok(Some(line)) => {
                    if let Some(port) = parse_announce(&line) {
                        return Ok(port);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!("{e} before announcing a port ({status})"));
                }
            }
        }
        Err(format!("{} did not announce a port within {:?}", self.name, timeout))
    }

    /// Waits for the child to exit by itself, up to `timeout`; kills it after that.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() >= deadline => {
                    self.kill();
                    return Err(format!("{} did not finish within {:?}; killed", self.name, timeout));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("waiting for {}: {e}", self.name)),
            }
        }
    }

    /// The exit status if the child has exited, without waiting or killing.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills (SIGKILL) and reaps the child; idempotent.
    pub fn kill(&mut self) {
        self.stdin.take();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a finished command printed.
#[derive(Debug)]
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// `java -Xmx<heap> -cp <jvm/<module>/target/slipstream-<module>.jar>:<its classpath.txt>`: the
/// command line of one of the JVM benchmark modules (`ohb-mapreduce`, `ohb-rpc`, `ohb-hdfs`,
/// `ohb-hbase`), whose Maven build writes its dependencies' class path to `target/classpath.txt`.
/// The caller adds further JVM options, the main class and its arguments.
pub fn bench_jvm(root: &Path, module: &str, heap: &str) -> Result<Command, String> {
    let target = root.join("jvm").join(module).join("target");
    let classpath_file = target.join("classpath.txt");
    let classpath = std::fs::read_to_string(&classpath_file)
        .map_err(|e| format!("{}: {e} (build it: make jvm)", classpath_file.display()))?;
    let mut cmd = Command::new(default_java());
    cmd.arg(format!("-Xmx{heap}"))
        .arg("-cp")
        .arg(format!("{}:{}", target.join(format!("slipstream-{module}.jar")).display(), classpath.trim()));
    Ok(cmd)
}

/// Runs `cmd` to completion with both outputs captured, killing it after `timeout`.
/// `run_captured`, then both outputs kept in `log` (stdout first: Hadoop's log4j writes there).
pub fn run_logged(name: &str, cmd: Command, timeout: Duration, log: &Path) -> Result<Captured, String> {
    let captured = run_captured(name, cmd, timeout)?;
    std::fs::write(log, format!("{}\n--- stderr ---\n{}", captured.stdout, captured.stderr))
        .map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(captured)
}

pub fn run_captured(name: &str, mut cmd: Command, timeout: Duration) -> Result<Captured, String> {
    cmd.stderr(Stdio::piped());
    let mut guard = ChildGuard::spawn(name, cmd, true)?;
    let stderr_reader = guard.child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        })
    });
    let status = guard.wait_timeout(timeout)?;
    let mut stdout = String::new();
    // The process has exited: its stdout reader finishes once the pipe drains.
    while let Ok(Some(line)) = guard.next_line(Duration::from_secs(5)) {
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let stderr = stderr_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Captured { status, stdout, stderr })
}

/// Runs one process per configuration, `command_for(config)` giving each its command line, each
/// bounded by `timeout`, one after the other in the order given. A benchmark's client JVM measures
/// one configuration only: in one JVM for all, the later configurations ran on a client whose JIT,
/// classes and heap the earlier ones had warmed (`ohb hbase --quick`: randomRead 1.08x Netty-first,
/// 0.98x fabric-first; session 42). Returns the runs' stdout in order, their stderr each under a
/// `--- <config> ---` line, and the first unsuccessful exit status (else the last one's).
pub fn run_captured_per_config(
    name: &str,
    configs: &[String],
    timeout: Duration,
    command_for: impl Fn(&str) -> Result<Command, String>,
) -> Result<Captured, String> {
    assert!(!configs.is_empty(), "{name}: no configuration to run");
    let (mut stdout, mut stderr, mut status) = (String::new(), String::new(), None);
    for config in configs {
        eprintln!("{name}: {config} in its own JVM ...");
        let run = run_captured(&format!("{name}-{config}"), command_for(config)?, timeout)?;
        stdout.push_str(&run.stdout);
        stderr.push_str(&format!("--- {config} ---\n{}", run.stderr));
        if status.is_none_or(|kept: ExitStatus| kept.success()) {
            status = Some(run.status);
        }
    }
    Ok(Captured { status: status.expect("at least one configuration ran"), stdout, stderr })
}

fn parse_announce(line: &str) -> Option<u16> {
    line.trim().strip_prefix(ANNOUNCE_PREFIX)?.split_whitespace().next()?.parse().ok()
}

/// Server side: announce the bound port on stdout.
pub fn announce_port(port: u16) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ANNOUNCE_PREFIX}{port} pid={}", std::process::id()).expect("stdout");
    out.flush().expect("stdout");
}

/// Server side: exit the process when stdin closes (the parent is gone or done) or after
/// `lifetime_max`, whichever comes first. Runs on a thread that sleeps in `read`.
pub fn exit_when_parent_leaves(lifetime_max: Duration) {
    std::thread::Builder::new()
        .name("ohb-stdin-watch".into())
        .spawn(|| {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while let Ok(n) = stdin.read(&mut sink) {
                if n == 0 {
                    break;
                }
            }
            std::process::exit(0);
        })
        .expect("spawn stdin watcher");
    std::thread::Builder::new()
        .name("ohb-lifetime".into())
        .spawn(move || {
            std::thread::sleep(lifetime_max);
            eprintln!("ohb server: lifetime limit {lifetime_max:?} reached, exiting");
            std::process::exit(3);
        })
        .expect("spawn lifetime timer");
}

/// Resident set size of a process in bytes (`VmRSS` of /proc/PID/status).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss_bytes(&status)
}

pub fn parse_vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(value * 1024),
        _ => None,
    }
}

/// The repository root: the first ancestor of the current directory, then of the executable,
/// that holds `native/Cargo.toml`.
pub fn find_repo_root() -> Option<PathBuf> {
    let from_cwd = std::env::current_dir().ok();
    let from_exe = std::env::current_exe().ok();
    [from_cwd, from_exe].into_iter().flatten().find_map(|start| repo_root_above(&start))
}

pub fn repo_root_above(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| dir.join("native").join("Cargo.toml").is_file()).map(Path::to_path_buf)
}

/// `$JAVA_HOME/bin/java` if set, else `java` from PATH.
pub fn default_java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_configuration_runs_in_its_own_process() {
        let configs: Vec<String> = ["a", "bad", "c"].map(String::from).to_vec();
        let run = run_captured_per_config("per-config-test", &configs, Duration::from_secs(30), |config| {
            let mut cmd = Command::new("sh");
            // The pid tells the processes apart; `bad` exits 3, the others 0.
            cmd.args(["-c", "echo \"$1 $$\"; echo \"err $1\" >&2; [ \"$1\" != bad ] || exit 3", "sh", config]);
            Ok(cmd)
        })
        .unwrap();
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.iter().map(|l| l.split(' ').next().unwrap()).collect::<Vec<_>>(), ["a", "bad", "c"]);
        let pids: std::collections::HashSet<&str> = lines.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(pids.len(), 3, "{}", run.stdout);
        assert_eq!(run.status.code(), Some(3), "the failed run's status is kept");
        assert_eq!(run.stderr, "--- a ---\nerr a\n--- bad ---\nerr bad\n--- c ---\nerr c\n");
        let failed = run_captured_per_config("per-config-test", &configs, Duration::from_secs(30), |config| {
            Err(format!("no command for {config}"))
        });
        assert_eq!(failed.unwrap_err(), "no command for a");
    }

    #[test]
    fn announce_line() {
        assert_eq!(parse_announce("ohb-serve port=4321 pid=7"), Some(4321));
        assert_eq!(parse_announce("  ohb-serve port=80\n"), Some(80));
        assert_eq!(parse_announce("ohb-serve port=x"), None);
        assert_eq!(parse_announce("hello"), None);
    }

    #[test]
    fn vm_rss() {
        let status = "Name:\tohb\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\nThreads: 3\n";
        assert_eq!(parse_vm_rss_bytes(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss_bytes("Name: x\n"), None);
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn child_killed_on_drop() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let guard = ChildGuard::spawn("sleep", cmd, false).unwrap();
        let pid = guard.pid();
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        drop(guard);
        // Reaped: the pid is gone (or reused by an unrelated process, which is rare enough here).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(!stat.contains("(sleep)"), "{stat}");
    }
}
