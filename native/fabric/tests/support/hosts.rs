//! Separate "hosts" on one machine, for tests that must cross a network: each host is a network
//! namespace created (and removed) by the test, the hosts are joined by a veth pair, and every
//! process started on a host also gets its own IPC, PID and mount namespaces with a private
//! `/dev/shm`. So no shared memory, no CMA (no common PID space) and no loopback between hosts:
//! UCX can only reach the other side over TCP on the veth, as between two machines.
//!
//! Addresses come from 198.18.0.0/15, the range reserved for benchmarking network devices (RFC 2544,
//! RFC 6815: never routed on the Internet), and exist only inside these namespaces, so no test
//! traffic can reach a real host. Not link-local 169.254/16: UCX 1.22's TCP transport ignores a
//! device whose only IPv4 address is link-local ("network device 'veth0' is not available"), 1.13
//! does not. IPv4 rather than IPv6 (fd00::/8) because a link taken down keeps its IPv4 address
//! (IPv6 drops it), so the "cable pulled and put back" test finds the same address afterwards.
//!
//! Needs root and iproute2 (`ip`) and util-linux (`unshare`); without them the tests fail with a
//! message saying so. Namespaces are named `slipstream-t<pid>-<n><host letter>`; any left by a
//! process that no longer exists (a test run killed before its cleanup) are removed first.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const PREFIX: &str = "slipstream-t";
/// Namespaces one test process may create (each `Hosts` makes two).
const MAX_HOSTS_PER_PROCESS: usize = 32;
static CREATED: AtomicUsize = AtomicUsize::new(0);
/// One pair of hosts at a time per process: the test harness runs tests in parallel, and a test
/// that counts this process's namespaces (or a 2-core machine running several pairs of UCX peers
/// over veths) must not see another test's hosts.
static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Two hosts joined by one veth pair: host 0 is 198.18.77.1, host 1 is 198.18.77.2.
pub struct Hosts {
    namespaces: [String; 2],
    /// Released after `drop` has removed the namespaces (fields drop after `Drop::drop`).
    _one_at_a_time: MutexGuard<'static, ()>,
}

/// Runs a command to completion; panics with its output if it fails.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {program}: {e} (the netns tests need iproute2 and util-linux, installed by `make deps`)")
    });
    if !output.status.success() {
        panic!("{program} {} failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    }
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Removes namespaces of this helper whose creating process is gone.
fn remove_stale_namespaces() {
    for line in run("ip", &["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

impl Hosts {
    /// Creates two hosts and the link between them. Fails (never skips) without root.
    pub fn pair() -> Hosts {
        // SAFETY: geteuid has no preconditions and cannot fail.
        assert_eq!(unsafe { libc::geteuid() }, 0, "the netns tests need root to create network namespaces (CI runs as root)");
        // A test that panicked while holding the lock poisoned it; its namespaces are gone anyway.
        let one_at_a_time = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let n = CREATED.fetch_add(2, Ordering::SeqCst);
        assert!(n + 2 <= MAX_HOSTS_PER_PROCESS, "more than {MAX_HOSTS_PER_PROCESS} test hosts in one process");
        remove_stale_namespaces();
        let pid = std::process::id();
        let namespaces = [format!("{PREFIX}{pid}-{n}a"), format!("{PREFIX}{pid}-{n}b")];
        let hosts = Hosts { namespaces, _one_at_a_time: one_at_a_time };
        for ns in &hosts.namespaces {
            run("ip", &["netns", "add", ns]);
        }
        // Both ends are created inside their namespaces: nothing appears in the caller's namespace.
        let (a, b) = (&hosts.namespaces[0], &hosts.namespaces[1]);
        run("ip", &["link", "add", "name", "veth0", "netns", a, "type", "veth", "peer", "name", "veth1", "netns", b]);
        for host in 0..2 {
            let ns = &hosts.namespaces[host];
            let address = format!("{}/24", hosts.address(host));
            run("ip", &["-n", ns, "addr", "add", &address, "dev", hosts.device(host)]);
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
            run("ip", &["-n", ns, "link", "set", hosts.device(host), "up"]);
        }
        hosts.wait_for_link(0, true);
        hosts.wait_for_link(1, true);
        hosts
    }

    /// Waits (bounded) until the host's end of the link reports the state: the kernel announces a
    /// carrier change up to a second after `ip link set up`, and UCX's TCP transport ignores a
    /// device that is not up yet when a node starts ("device veth1 is not enabled").
    fn wait_for_link(&self, host: usize, up: bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let wanted = if up { "up" } else { "down" };
        let path = format!("/sys/class/net/{}/operstate", self.device(host));
        loop {
            let state = run("ip", &["netns", "exec", &self.namespaces[host], "cat", &path]);
            if state.trim() == wanted {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "link of host {host} still {} after 10 s", state.trim());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn address(&self, host: usize) -> Ipv4Addr {
        host_address(host)
    }

    /// The host's end of the link (the name UCX_NET_DEVICES / `--devices` wants).
    pub fn device(&self, host: usize) -> &'static str {
        host_device(host)
    }

    pub fn namespace(&self, host: usize) -> &str {
        &self.namespaces[host]
    }

    /// Takes the host's end of the link down (as if its cable were pulled) or brings it back.
    pub fn set_link(&self, host: usize, up: bool) {
        run("ip", &["-n", &self.namespaces[host], "link", "set", self.device(host), if up { "up" } else { "down" }]);
        self.wait_for_link(host, up);
    }

    /// Bytes the host's end of the link has sent and received (`tx`, `rx`).
    pub fn link_bytes(&self, host: usize) -> (u64, u64) {
        let read = |counter: &str| {
            let path = format!("/sys/class/net/{}/statistics/{counter}", self.device(host));
            run("ip", &["netns", "exec", &self.namespaces[host], "cat", &path]).trim().parse::<u64>().unwrap()
        };
        (read("tx_bytes"), read("rx_bytes"))
    }

    /// Starts `program args...` on the host, in fresh IPC, PID and mount namespaces with a private
    /// `/dev/shm`; its stdin and stdout are pipes to the test.
    pub fn spawn(&self, host: usize, program: &str, args: &[&str]) -> HostProcess {
        let mut command = command_in(&self.namespaces[host], program);
        command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        if std::env::var_os("UCX_LOG_FILE").is_none() {
            // UCX logs to stdout by default, which is the process's answer channel here.
            command.env("UCX_LOG_FILE", "stderr");
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start a process on host {host}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::sync_channel(64);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        HostProcess { child, stdin, lines }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A process on a test host; killed (with everything in its PID namespace) when dropped.
pub struct HostProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl HostProcess {
    /// The next line the process prints; panics if none comes within `timeout`.
    pub fn line(&mut self, timeout: Duration) -> String {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no output from the host process within {timeout:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the host process ended: {:?}", self.child.try_wait()),
        }
    }

    /// Sends one command line and returns the answer line.
    pub fn ask(&mut self, command: &str, timeout: Duration) -> String {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.line(timeout)
    }

    /// The pid (in the caller's PID namespace) of the program itself: unshare's only child.
    pub fn program_pid(&self) -> u32 {
        let unshare = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap_or_default();
        children.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no child of unshare {unshare}"))
    }

    /// The program's namespace of `kind` (`ipc`, `pid`, `net`, `mnt`), as `kind:[inode]`.
    pub fn namespace(&self, kind: &str) -> String {
        namespace_of(&self.program_pid().to_string(), kind)
    }

    /// Device number of the file system the program sees at /dev/shm.
    pub fn dev_shm_device(&self) -> u64 {
        std::fs::metadata(format!("/proc/{}/root/dev/shm", self.program_pid())).unwrap().dev()
    }

    /// Kills the process and everything in its PID namespace, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The address of host 0 or 1 (the same for every `Hosts`: each pair is a network of its own).
pub fn host_address(host: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 77, host as u8 + 1)
}

/// Host 0's or 1's end of the link.
pub fn host_device(host: usize) -> &'static str {
    ["veth0", "veth1"][host]
}

/// A command that runs `program` (arguments to be added) on the host of network namespace
/// `namespace`, in fresh IPC, PID and mount namespaces with a private `/dev/shm`. Killing the
/// command's process (unshare) kills the program and its PID namespace (`--kill-child`).
pub fn command_in(namespace: &str, program: &str) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", namespace])
        .args(["unshare", "--ipc", "--pid", "--mount", "--fork", "--kill-child", "--mount-proc"])
        .args(["sh", "-c", "mount -t tmpfs -o size=64m slipstream-shm /dev/shm && exec \"$0\" \"$@\"", program]);
    command
}

/// `kind:[inode]` of `/proc/<pid>/ns/<kind>` (`pid` may be `self`).
pub fn namespace_of(pid: &str, kind: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap().to_string_lossy().into_owned()
}
