//! `ohb spark ... --hosts netns`: each application on a Spark standalone cluster whose executors are on
//! separate "hosts", so that the shuffle crosses a network as between machines.
//!
//! The hosts are network namespaces: host 0 runs the Master and the driver, hosts 1 and 2 one Worker
//! of one core each (and so one executor each). Each host has one end of a veth pair (`veth0`,
//! 198.18.79.(i+1)/24) whose other end is a port of a Linux bridge in a hub namespace of its own:
//! nothing is added to the caller's namespace. Every process started on a host also gets fresh IPC,
//! PID and mount namespaces with a private `/dev/shm` (the fabric's tests' launcher, as `ohb fabric
//! --hosts netns` uses it): no shared memory, no CMA, no loopback between executors, so the plugin's
//! UCX (which the plugin points at the device of the executor's address, `veth0`) and Spark's Netty
//! both run over TCP on the links.
//! Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range) and exist only inside the
//! namespaces. The file system is shared (the application's directory: logs, work and local
//! directories). The Java tests build the same hosts (`jvm/spark-it`'s `NetnsHosts`).
//!
//! The namespaces live for the whole run; each application gets its own Master and Workers (a few
//! seconds to start, outside the measured job), whose SPARK_HOME is the application's private one, so
//! the executors' logs, GC logs and /proc sampling are found exactly as with `local-cluster`. After
//! each application, the bytes the Workers' links received must be at least the remote bytes Spark
//! read: otherwise the shuffle did not cross the links and the run fails.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::child::ChildGuard;
use crate::fabric::hosts::command_in;
use crate::spark::run::SparkRun;
use crate::spark::{EXECUTORS, JAVA_MODULE_OPTIONS};

/// Namespaces are named `slipstream-o<pid>-<n><hub|h<i>>`; those of a process that is gone are
/// removed before new ones are made.
pub const PREFIX: &str = "slipstream-o";
/// The Master's host, then one host per Worker.
pub const HOSTS: usize = 1 + EXECUTORS;
/// Sets of hosts one process may create (one per run).
const SETS_PER_PROCESS_MAX: usize = 4;
pub const DEVICE: &str = "veth0";
const BRIDGE: &str = "br0";
pub const MASTER_PORT: u16 = 7077;
const MASTER_WEBUI_PORT: u16 = 8080;
const WORKER_PORT: u16 = 7078;
const WORKER_WEBUI_PORT: u16 = 8081;
const DAEMON_HEAP: &str = "-Xmx256m";
/// How long a Worker may take to register with the Master (seconds on an idle machine).
pub const REGISTRATION_WAIT: Duration = Duration::from_secs(90);
const LINK_UP_WAIT: Duration = Duration::from_secs(10);
const REGISTERED: &str = "Successfully registered with master";

/// The header line of a run on these hosts.
pub const NETNS_NOTE: &str = "--hosts netns: a standalone cluster per application, Master and driver on host 0, one Worker \
     of 1 core on each of hosts 1 and 2 (network, IPC, PID and mount namespaces joined by a bridge, private /dev/shm): \
     no shared memory, CMA or loopback between executors; the plugin and Netty run over TCP on veth links";

static CREATED: AtomicUsize = AtomicUsize::new(0);

/// The hosts of a run; removed when dropped.
pub struct NetnsHosts {
    hub: String,
    namespaces: Vec<String>,
}

/// Runs a command to completion; its stdout, or an error with its output.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program).args(args).output().map_err(|e| {
        format!("cannot run {program}: {e} (--hosts netns needs iproute2 and util-linux, installed by `make deps`)")
    })?;
    if !output.status.success() {
        return Err(format!("{program} {} failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Host i's address (on its end of the link).
pub fn address(host: usize) -> Ipv4Addr {
    assert!(host < HOSTS, "host {host} of {HOSTS}");
    Ipv4Addr::new(198, 18, 79, host as u8 + 1)
}

/// The pid in a namespace name of this module (`slipstream-o<pid>-...`).
fn creator_pid(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Removes namespaces of this module whose creating process is gone.
fn remove_stale_namespaces() -> Result<(), String> {
    for line in run("ip", &["netns", "list"])?.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = creator_pid(name) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            run("ip", &["netns", "del", name])?;
        }
    }
    Ok(())
}

impl NetnsHosts {
    /// Creates the hosts and their links, every link up. Needs root.
    pub fn create() -> Result<NetnsHosts, String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("--hosts netns needs root: it creates network namespaces".into());
        }
        let n = CREATED.fetch_add(1, Ordering::SeqCst);
        if n >= SETS_PER_PROCESS_MAX {
            return Err(format!("more than {SETS_PER_PROCESS_MAX} sets of hosts in one run"));
        }
        remove_stale_namespaces()?;
        let stem = format!("{PREFIX}{}-{n}", std::process::id());
        let hosts = NetnsHosts { hub: format!("{stem}hub"), namespaces: (0..HOSTS).map(|i| format!("{stem}h{i}")).collect() };
        run("ip", &["netns", "add", &hosts.hub])?;
        run("ip", &["-n", &hosts.hub, "link", "add", BRIDGE, "type", "bridge"])?;
        run("ip", &["-n", &hosts.hub, "link", "set", BRIDGE, "up"])?;
        for (i, ns) in hosts.namespaces.iter().enumerate() {
            run("ip", &["netns", "add", ns])?;
            // Both ends are created inside their namespaces: nothing appears in the caller's.
            let port = format!("port{i}");
            run("ip", &["link", "add", "name", &port, "netns", &hosts.hub, "type", "veth", "peer", "name", DEVICE, "netns", ns])?;
            run("ip", &["-n", &hosts.hub, "link", "set", &port, "master", BRIDGE])?;
            run("ip", &["-n", &hosts.hub, "link", "set", &port, "up"])?;
            run("ip", &["-n", ns, "addr", "add", &format!("{}/24", address(i)), "dev", DEVICE])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            run("ip", &["-n", ns, "link", "set", DEVICE, "up"])?;
        }
        for (i, ns) in hosts.namespaces.iter().enumerate() {
            await_link_up(ns, DEVICE)?;
            await_link_up(&hosts.hub, &format!("port{i}"))?;
        }
        Ok(hosts)
    }

    /// A command that runs `program` on host i, in fresh IPC, PID and mount namespaces with a private
    /// `/dev/shm`; killing it (unshare) kills everything in its PID namespace.
    pub fn command(&self, host: usize, program: &Path) -> Command {
        command_in(&self.namespaces[host], &program.to_string_lossy())
    }

    /// Bytes the Workers' links have received so far, summed.
    pub fn worker_links_rx_bytes(&self) -> Result<u64, String> {
        let mut total = 0;
        for ns in &self.namespaces[1..] {
            let path = format!("/sys/class/net/{DEVICE}/statistics/rx_bytes");
            let text = run("ip", &["netns", "exec", ns, "cat", &path])?;
            total += text.trim().parse::<u64>().map_err(|e| format!("{path} in {ns}: {e}"))?;
        }
        Ok(total)
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().chain(std::iter::once(&self.hub)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// Waits (bounded) until the device reports up: UCX's TCP transport ignores a device that is not up
/// yet, and the kernel announces a carrier change up to a second after `ip link set up`.
fn await_link_up(ns: &str, device: &str) -> Result<(), String> {
    let deadline = Instant::now() + LINK_UP_WAIT;
    loop {
        let state = run("ip", &["netns", "exec", ns, "cat", &format!("/sys/class/net/{device}/operstate")])?;
        if state.trim() == "up" {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{device} in {ns} still {} after {LINK_UP_WAIT:?}", state.trim()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The standalone cluster of one application: the Master on host 0, a Worker on each other host;
/// every process (and the Workers' executors) killed when dropped.
pub struct Cluster {
    processes: Vec<ChildGuard>,
}

/// What every daemon of a cluster is started with.
#[derive(Clone, Copy)]
struct Daemons<'a> {
    hosts: &'a NetnsHosts,
    run: &'a SparkRun,
    /// SPARK_HOME: its `jars/`, and `work/` for the executors.
    home: &'a Path,
    /// The application's directory: the daemons' logs and local directories.
    dir: &'a Path,
}

/// `spark://<host 0>:7077`.
pub fn master_url() -> String {
    format!("spark://{}:{MASTER_PORT}", address(0))
}

/// The JAVA_HOME of a `.../bin/java` path (the Workers start executors with `$JAVA_HOME/bin/java`).
fn java_home(java: &Path) -> Option<PathBuf> {
    let bin = java.parent()?;
    (java.is_absolute() && bin.file_name()? == "bin").then(|| bin.parent().map(Path::to_path_buf)).flatten()
}

impl Cluster {
    /// Starts the Master and the Workers with `home` as SPARK_HOME (its `work/` gets the executors'
    /// logs) and their logs in `dir`; waits until every Worker registered.
    pub fn start(hosts: &NetnsHosts, run: &SparkRun, home: &Path, dir: &Path) -> Result<Cluster, String> {
        let mut cluster = Cluster { processes: Vec::new() };
        let master = address(0).to_string();
        let master_args = vec![
            "org.apache.spark.deploy.master.Master".to_string(),
            "--host".into(),
            master.clone(),
            "--port".into(),
            MASTER_PORT.to_string(),
            "--webui-port".into(),
            MASTER_WEBUI_PORT.to_string(),
        ];
        let daemons = Daemons { hosts, run, home, dir };
        cluster.launch(&daemons, 0, "master", master_args)?;
        for worker in 1..HOSTS {
            let args = vec![
                "org.apache.spark.deploy.worker.Worker".to_string(),
                "--host".into(),
                address(worker).to_string(),
                "--port".into(),
                WORKER_PORT.to_string(),
                "--webui-port".into(),
                WORKER_WEBUI_PORT.to_string(),
                "--cores".into(),
                "1".into(),
                // Exactly one executor's memory: one executor per Worker.
                "--memory".into(),
                format!("{}m", run.executor_memory_mib),
                "--work-dir".into(),
                home.join("work").display().to_string(),
                master_url(),
            ];
            cluster.launch(&daemons, worker, &format!("worker-{worker}"), args)?;
        }
        let deadline = Instant::now() + REGISTRATION_WAIT;
        for worker in 1..HOSTS {
            let log = dir.join(format!("worker-{worker}.log"));
            loop {
                if std::fs::read_to_string(&log).is_ok_and(|text| text.contains(REGISTERED)) {
                    break;
                }
                for process in cluster.processes.iter_mut() {
                    if let Some(status) = process.try_status() {
                        let name = &process.name;
                        return Err(format!("the standalone cluster's {name} exited ({status}); logs in {}", dir.display()));
                    }
                }
                if Instant::now() > deadline {
                    let log = log.display();
                    return Err(format!("worker {worker} did not register within {REGISTRATION_WAIT:?}; its log: {log}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(cluster)
    }

    /// Starts `java <args>` on `host` as `role` (its log: `<dir>/<role>.log`).
    fn launch(&mut self, daemons: &Daemons, host: usize, role: &str, args: Vec<String>) -> Result<(), String> {
        let Daemons { hosts, run, home, dir } = *daemons;
        let log_path = dir.join(format!("{role}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let local = dir.join("local").join(role);
        std::fs::create_dir_all(&local).map_err(|e| format!("cannot create {}: {e}", local.display()))?;
        let mut cmd = hosts.command(host, &run.java);
        cmd.arg(DAEMON_HEAP)
            .args(JAVA_MODULE_OPTIONS)
            .args(["-cp", &home.join("jars").join("*").display().to_string()])
            .args(&args)
            .current_dir(dir)
            .env("SPARK_HOME", home)
            .env("SPARK_SCALA_VERSION", "2.13")
            .env("SPARK_LOCAL_IP", address(host).to_string())
            .env("SPARK_LOCAL_DIRS", &local)
            .env_remove("SPARK_CONF_DIR")
            // UCX logs to stdout by default; here stdout is discarded.
            .env("UCX_LOG_FILE", "stderr")
            .stderr(Stdio::from(log));
        if let Some(java_home) = java_home(&run.java) {
            cmd.env("JAVA_HOME", java_home);
        }
        self.processes.push(ChildGuard::spawn(&format!("spark {role}"), cmd, false)?);
        Ok(())
    }
}

/// What a driver's process on host 0 needs: its launcher and its address.
pub fn driver_command(hosts: &NetnsHosts, java: &Path) -> Command {
    let mut cmd = hosts.command(0, java);
    cmd.env("UCX_LOG_FILE", "stderr");
    cmd
}

/// The bytes the Workers' links received during an application must cover every remote byte Spark
/// read: otherwise the executors found another path than the links.
pub fn check_links_carried(rx_bytes: u64, remote_bytes_read: u64) -> Result<(), String> {
    if rx_bytes < remote_bytes_read {
        return Err(format!(
            "--hosts netns: the Workers' links received {rx_bytes} bytes during the application, less than the \
             {remote_bytes_read} remote bytes Spark read: the shuffle did not cross the links"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_addresses_and_the_links_check() {
        assert_eq!(creator_pid("slipstream-o1234-0hub"), Some(1234));
        assert_eq!(creator_pid("slipstream-o1234-0h2"), Some(1234));
        assert_eq!(creator_pid("slipstream-t1234-0a"), None, "the fabric tests' namespaces are theirs to clean");
        assert_eq!(creator_pid("slipstream-ox-0hub"), None);
        assert_eq!(address(0), Ipv4Addr::new(198, 18, 79, 1));
        assert_eq!(address(HOSTS - 1), Ipv4Addr::new(198, 18, 79, HOSTS as u8));
        assert_eq!(master_url(), "spark://198.18.79.1:7077");
        assert_eq!(java_home(Path::new("/usr/lib/jvm/java-17/bin/java")), Some(PathBuf::from("/usr/lib/jvm/java-17")));
        assert_eq!(java_home(Path::new("java")), None);
        assert!(check_links_carried(1000, 999).is_ok());
        assert!(check_links_carried(1000, 1001).unwrap_err().contains("did not cross the links"));
    }

    /// Needs root, as `make test` has: the hosts exist, reach each other over the bridge, count
    /// their bytes, and go when dropped; a dead process's namespaces go first.
    #[test]
    fn hosts_are_made_joined_and_removed() {
        let mut gone = Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let stale = format!("{PREFIX}{}-0hub", gone.id());
        run("ip", &["netns", "add", &stale]).unwrap();
        let hosts = NetnsHosts::create().unwrap();
        let list = run("ip", &["netns", "list"]).unwrap();
        assert!(!list.contains(&stale), "a dead process's namespace is still there:\n{list}");
        let names: Vec<String> = hosts.namespaces.iter().chain(std::iter::once(&hosts.hub)).cloned().collect();
        for name in &names {
            assert!(list.contains(name.as_str()), "{name} missing:\n{list}");
        }
        // Nothing listens on port 9 of host 2: its refusal comes back over the links (not "unreachable").
        let probe = format!("readlink /proc/self/ns/ipc; (echo > /dev/tcp/{}/9) 2>&1 || true", address(2));
        let output = hosts.command(1, Path::new("bash")).args(["-c", &probe]).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("Connection refused"), "{text}");
        assert_ne!(text.lines().next().unwrap(), std::fs::read_link("/proc/self/ns/ipc").unwrap().to_string_lossy(), "{text}");
        assert!(hosts.worker_links_rx_bytes().unwrap() > 0);
        drop(hosts);
        let list = run("ip", &["netns", "list"]).unwrap();
        for name in &names {
            assert!(!list.contains(name.as_str()), "{name} left after drop:\n{list}");
        }
    }
}
