//! `slipstream-cache`: a memcached-compatible cache server for TCP clients (text, meta and binary
//! protocols) and fabric clients (binary protocol packets over UCX) at once, on one store.
//!
//! Threads:
//! - **main** (control): parses flags, starts everything, prints the listening line, then waits
//!   for SIGTERM/SIGINT, pruning fabric sessions of closed connections once a second;
//! - **tcp-acceptor**: accepts, enforces `-c`, hands sockets round-robin to the workers;
//! - **tcp-worker-N** (`-t`): one epoll loop each over its own connections (`tcp.rs`);
//! - the **fabric** node's progress thread, which also executes fabric requests (Inline mode;
//!   `--fabric-threads N` moves them to N handler threads instead) (`fabric_server.rs`);
//! - in hybrid mode (`--ssd-path`), the store's SSD I/O threads (`--ssd-io-threads`), and
//!   **fabric-resume-N** (one, or `--fabric-threads`), which go on with fabric requests that
//!   waited for the SSD (`fabric_server.rs`). No worker or fabric thread waits for the SSD:
//!   a command that needs a value being read from it waits, and the store's waker resumes it.
//!
//! All of them share one store (`cache_store::Store`), which does its own locking.
//!
//! Memory: resident memory stays within the store's bound (`-m`, plus its index and bookkeeping),
//! plus the idle process (about 4 MiB; 10 MiB with the fabric's UCX context), plus two 16 KiB
//! buffers per TCP connection, plus `--conn-buffers-mb` (large values in flight over TCP, all
//! connections together), plus the fabric's registered pool (`--fabric-pool-mb`), each bounded by
//! its flag.

mod buffers;
mod copy;
mod fabric_server;
mod flags;
mod log;
mod stats;
mod tcp;
#[cfg(test)]
mod test_store;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use cache_proto::session::{Credentials, SessionConfig};
use cache_proto::storage::Storage;

use crate::flags::{Command, Flags, USAGE};
use crate::stats::{Counters, ServerFacts};

/// What `version` answers: the memcached release whose protocol this server speaks, then ours.
pub const VERSION: &str = concat!("1.6.18-slipstream-", env!("CARGO_PKG_VERSION"));
/// Room in a read buffer beyond the largest item: a binary header with extras, a storage line.
const INPUT_SLACK_BYTES: usize = 4096;
/// Fabric messages: at least this large, and large enough for two of the largest item.
const FABRIC_MESSAGE_BYTES_MIN: usize = 8 << 20;
/// File descriptors kept for everything but connections (UCX, epoll, eventfds, files).
const FDS_RESERVED: u64 = 256;

fn main() -> ExitCode {
    let flags = match flags::parse(std::env::args().skip(1)) {
        Ok(Command::Serve(flags)) => flags,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("slipstream-cache {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("slipstream-cache: {message}\n");
            eprint!("{USAGE}");
            return ExitCode::from(64);
        }
    };
    log::set_verbosity(flags.verbosity);
    match serve(&flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("slipstream-cache: {message}");
            ExitCode::from(1)
        }
    }
}

fn serve(flags: &Flags) -> Result<(), String> {
    // Every thread inherits this mask, so only `wait_for_signal` sees SIGTERM/SIGINT.
    let signals = block_termination_signals();
    raise_fd_limit(flags.conn_limit as u64 * 2 + FDS_RESERVED);

    let credentials = match &flags.auth_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("-Y {}: {e}", path.display()))?;
            let users = flags::parse_auth_file(&text).map_err(|e| format!("-Y {}: {e}", path.display()))?;
            Some(Arc::new(Credentials { users }))
        }
        None => None,
    };

    let ssd = match &flags.ssd {
        Some(ssd) => {
            if ssd.dir.exists() && !ssd.dir.is_dir() {
                return Err(format!("--ssd-path {}: not a directory", ssd.dir.display()));
            }
            std::fs::create_dir_all(&ssd.dir).map_err(|e| format!("--ssd-path {}: {e}", ssd.dir.display()))?;
            Some(cache_store::SsdConfig { dir: ssd.dir.clone(), size_bytes: ssd.size_bytes, io_threads: ssd.io_threads })
        }
        None => None,
    };
    let store = cache_store::Store::new(cache_store::StoreConfig {
        memory_limit_bytes: flags.memory_limit_bytes(),
        max_item_bytes: flags.max_item_bytes,
        ssd,
        ..cache_store::StoreConfig::default()
    })
    .map_err(|e| match &flags.ssd {
        Some(ssd) => format!(
            "-m {} / -I {} / --ssd-path {} --ssd-size {}: {e}",
            flags.memory_limit_mb,
            flags.max_item_bytes,
            ssd.dir.display(),
            ssd.size_bytes
        ),
        None => format!("-m {} / -I {}: {e}", flags.memory_limit_mb, flags.max_item_bytes),
    })?;
    let store: Arc<dyn Storage> = Arc::new(store);
    let ssd_on = flags.ssd.is_some() && store.may_wait();
    if let Some(ssd) = &flags.ssd {
        if ssd_on {
            log::notice(format_args!(
                "SSD tier on: a log of {} MiB in {} ({} I/O threads)",
                ssd.size_bytes >> 20,
                ssd.dir.display(),
                ssd.io_threads
            ));
        } else {
            log::warn(format_args!(
                "--ssd-path {}: this store has no SSD tier; serving from memory only",
                ssd.dir.display()
            ));
        }
    }

    let counters = Arc::new(Counters::default());
    let buffers = Arc::new(buffers::Budget::new(flags.conn_buffers_bytes()));
    let fabric_cell: Arc<OnceLock<fabric::Node>> = Arc::new(OnceLock::new());
    let facts = ServerFacts {
        version: VERSION.to_string(),
        threads: flags.threads,
        conn_limit: flags.conn_limit,
        started: Instant::now(),
        fabric: fabric_cell.clone(),
        buffers: buffers.clone(),
    };
    let stats_counters = counters.clone();
    let session_config = Arc::new(SessionConfig {
        max_line_bytes: flags.max_line_bytes,
        credentials,
        server_stats: Some(Arc::new(move || stats::server_stats(&facts, &stats_counters))),
        ..SessionConfig::new(VERSION)
    });

    let listener = TcpListener::bind(SocketAddr::new(flags.listen, flags.port))
        .map_err(|e| format!("cannot listen on {}:{} (TCP): {e}", flags.listen, flags.port))?;
    let tcp_addr = listener.local_addr().map_err(|e| e.to_string())?;

    let fabric = match flags.fabric_port {
        Some(port) => {
            let max_message_bytes = (2 * flags.max_item_bytes + (1 << 20)).max(FABRIC_MESSAGE_BYTES_MIN);
            let pool_cap_bytes = ((flags.fabric_pool_mb as usize) << 20).max(2 * max_message_bytes.next_power_of_two());
            let settings = fabric_server::FabricSettings {
                listen: SocketAddr::new(flags.listen, port),
                tcp_only: flags.fabric_tcp_only,
                threads: flags.fabric_threads,
                conn_limit: flags.conn_limit,
                devices: flags.fabric_devices.clone(),
                pool_cap_bytes,
                max_message_bytes,
                spin_us: flags.fabric_spin_us,
            };
            let started = fabric_server::start(&settings, store.clone(), session_config.clone(), counters.clone(), fabric_cell);
            Some(started.map_err(|e| {
                let listen = settings.listen;
                format!("cannot start the fabric on {listen}: {e} (use --fabric-port to pick another port, or --no-fabric)")
            })?)
        }
        None => None,
    };

    let shared = Arc::new(tcp::Shared {
        store,
        session_config,
        counters,
        conn_limit: flags.conn_limit,
        input_limit_bytes: flags.max_item_bytes + flags.max_line_bytes + INPUT_SLACK_BYTES,
        output_cap_bytes: (flags.conn_buffers_bytes() / 4).max(tcp::OUTPUT_HIGH_BYTES + flags.max_item_bytes),
        buffers,
    });
    tcp::start(listener, shared, flags.threads).map_err(|e| format!("starting TCP threads: {e}"))?;

    if let Some(path) = &flags.pidfile {
        std::fs::write(path, format!("{}\n", std::process::id())).map_err(|e| format!("-P {}: {e}", path.display()))?;
    }
    let fabric_addr = fabric.as_ref().and_then(|(node, _)| node.local_addr()).map_or("off".to_string(), |a| a.to_string());
    // `ssd=` names the log's size only: a directory may hold spaces, and the line is parsed by words.
    let ssd_field = match &flags.ssd {
        Some(ssd) if ssd_on => format!(" ssd={}m", ssd.size_bytes >> 20),
        _ => String::new(),
    };
    println!("slipstream-cache listening tcp={tcp_addr} fabric={fabric_addr}{ssd_field}");
    let _ = std::io::stdout().flush();

    // Control loop: housekeeping once a second until a termination signal.
    loop {
        match wait_for_signal(&signals, 1) {
            Some(signal) => {
                log::info(format_args!("signal {signal}: exiting"));
                break;
            }
            None => {
                if let Some((_, server)) = &fabric {
                    server.prune();
                }
            }
        }
    }
    if let Some((node, _)) = &fabric {
        node.close();
    }
    if let Some(path) = &flags.pidfile {
        remove_pidfile(path);
    }
    Ok(())
}

fn remove_pidfile(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        log::warn(format_args!("removing -P {}: {e}", path.display()));
    }
}

fn block_termination_signals() -> libc::sigset_t {
    // SAFETY: plain signal-set manipulation on a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// A pending SIGTERM/SIGINT, waiting at most `timeout_s`.
fn wait_for_signal(set: &libc::sigset_t, timeout_s: i64) -> Option<i32> {
    let timeout = libc::timespec { tv_sec: timeout_s, tv_nsec: 0 };
    // SAFETY: sigtimedwait reads the set and the timeout we own.
    let signal = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}

/// Raises the soft limit on open files towards `wanted` (connections need one each).
fn raise_fd_limit(wanted: u64) {
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 || limit.rlim_cur >= wanted {
            return;
        }
        let target = wanted.min(limit.rlim_max);
        limit.rlim_cur = target;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 || target < wanted {
            log::warn(format_args!(
                "open files limited to {target} (wanted {wanted} for -c); connections beyond it wait in the accept queue"
            ));
        }
    }
}
