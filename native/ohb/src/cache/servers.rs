//! The servers a cache test measures: memcached and slipstream-cache, each its own process on
//! 127.0.0.1, and a client connected to one of them.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cache_client::{Client, ClientConfig, ServerAddr};

use crate::cache::CacheVariant;
use crate::child::{rss_bytes, ChildGuard};

/// How long a server may take to start listening.
const SERVER_START_TIMEOUT: Duration = Duration::from_secs(20);

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
}
