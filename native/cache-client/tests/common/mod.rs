//! Servers for the integration tests: the real memcached (installed, required) and
//! slipstream-cache (skipped with a message while its binary does not exist).
#![allow(dead_code)]
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cache_client::{Client, ClientConfig, ServerAddr};

/// Ports this crate's tests may use.
const PORT_FIRST: u16 = 22000;
const PORT_COUNT: u16 = 100;

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the process-wide test lock: fabric tests run one at a time. Every fabric node has a
/// progress thread that spins after activity; several servers and clients at once on a 2-core
/// machine turn microseconds into seconds and make timeouts flaky.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A port in 22000..22100 that nothing listens on right now.
pub fn free_port() -> u16 {
    let start = (std::process::id() % PORT_COUNT as u32) as u16;
    for _ in 0..PORT_COUNT {
        let offset = (start + NEXT_PORT.fetch_add(1, Ordering::SeqCst)) % PORT_COUNT;
        let port = PORT_FIRST + offset;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {PORT_FIRST}..{}", PORT_FIRST + PORT_COUNT);
}

fn wait_listening(addr: SocketAddr, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server on {addr} exited before listening: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("server on {addr} did not listen within 10 s");
}

/// A memcached 1.6 child process on a free loopback port, killed when dropped.
pub struct Memcached {
    child: Child,
    pub addr: SocketAddr,
}

impl Memcached {
    pub fn start() -> Memcached {
        Memcached::start_with(&[])
    }

    /// On a given port (a restart on the port of a killed one).
    pub fn start_on(port: u16) -> Memcached {
        Memcached::start_on_ports(&mut std::iter::repeat_n(port, 50), &[])
    }

    pub fn start_with(extra: &[&str]) -> Memcached {
        Memcached::start_on_ports(&mut std::iter::repeat_with(free_port).take(5), extra)
    }

    fn start_on_ports(ports: &mut dyn Iterator<Item = u16>, extra: &[&str]) -> Memcached {
        for port in ports {
            let mut child = Command::new("memcached")
                .args(["-u", "nobody", "-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-t", "2", "-m", "256"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("memcached must be installed (apt-get install memcached)");
            std::thread::sleep(Duration::from_millis(20));
            if let Ok(Some(_)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                continue; // port taken meanwhile (or not yet released): try again
            }
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            wait_listening(addr, &mut child);
            return Memcached { child, addr };
        }
        panic!("could not start memcached");
    }

    pub fn server(&self) -> ServerAddr {
        ServerAddr::Tcp(self.addr)
    }

    /// Stops the server now (the next operations see a dead peer).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The slipstream-cache binary: `SLIPSTREAM_CACHE_BIN`, else the workspace's release build.
pub fn slipstream_binary() -> Option<PathBuf> {
    let path = match std::env::var_os("SLIPSTREAM_CACHE_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/slipstream-cache"),
    };
    path.exists().then_some(path)
}

/// A slipstream-cache child process (TCP and fabric on free ports), killed when dropped.
pub struct Slipstream {
    child: Child,
    pub tcp: SocketAddr,
    pub fabric: SocketAddr,
}

impl Slipstream {
    /// Starts the binary; fails the test (never skips it) when the binary is missing or does not start.
    pub fn start() -> Slipstream {
        Slipstream::start_with(&[])
    }

    /// With extra flags.
    pub fn start_with(extra: &[&str]) -> Slipstream {
        let Some(binary) = slipstream_binary() else {
            panic!(
                "slipstream-cache is not built \
                 (cargo build --release -p cache-server, or set SLIPSTREAM_CACHE_BIN)"
            );
        };
        let mut child = Command::new(&binary)
            .args(["-p", "0", "--fabric-port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("listening") {
                    let _ = tx.send(line);
                }
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} printed no 'listening tcp=... fabric=...' line within 15 s", binary.display());
            }
        };
        let field = |name: &str| -> SocketAddr {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name}ADDR in {line:?}"))
        };
        let (tcp, fabric) = (field("tcp="), field("fabric="));
        wait_listening(tcp, &mut child);
        Slipstream { child, tcp, fabric }
    }
}

impl Drop for Slipstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn client_for(servers: &[ServerAddr]) -> Client {
    client_with(ClientConfig::default(), servers)
}

pub fn client_with(config: ClientConfig, servers: &[ServerAddr]) -> Client {
    let client = Client::new(config).unwrap();
    for &s in servers {
        client.add_server(s).unwrap();
    }
    client
}

/// A value of `len` bytes that differs by `seed`.
pub fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}
pub mod mock_fabric;
pub mod suite;
