//! `ohb hdfs tiers`' burst buffer for `hhh-l-bb`: a real `slipstream-cache` in hybrid mode (memory and
//! an SSD log under the run's directory) on a free loopback port, started by `ohb` before the
//! configuration's JVM and killed after it (also when the JVM fails or times out, and by the kernel if
//! `ohb` itself dies: `ChildGuard`), so that no cache outlives its configuration. The JVM gets its
//! address and the DataNodes' pending limit as arguments.
//!
//! Sized so that the whole workload fits (every block's parallel file system replica at once, none
//! flushed yet): the benchmark measures the burst buffer absorbing the writes, not its overflow. The
//! cache's own counters (`stats`, read after the JVM) show whether it had to evict or spill.

use super::tiers::TiersWorkload;
use crate::child::ChildGuard;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the cache may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// HHH-L-BB's `bb.chunk.bytes` (its default, which TiersBench keeps): one cache item per chunk.
const CHUNK_BYTES: u64 = 511 << 10;
/// The cache's memory segment (`max(1 MiB, -I)`, `-I` left at its 1 MiB default). A 511 KiB chunk
/// with its 32-byte header, its key (~100 bytes) and the SSD descriptor is just under half a segment,
/// so two chunks share a segment (the default was 512 KiB until this was seen: a segment each, half
/// empty); memory is sized in half segments.
const SEGMENT_BYTES: u64 = 1 << 20;
/// The cache counters kept in the result (`bb_cache_<name>`).
const STATS_KEPT: [&str; 5] = ["cmd_set", "curr_items", "evictions", "ssd_spills", "ssd_items_lost"];

/// The burst buffer's size for a workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbSizing {
    /// The cache's `-m`, and its SSD log's `--ssd-size` (as large again: room for a second copy).
    pub memory_mb: u64,
    /// Each DataNode's `bb.maxPending.bytes`: a replica being written reserves a whole block, and at
    /// worst every parallel file system replica of the run lands on one DataNode.
    pub max_pending_bytes: u64,
}

impl BbSizing {
    pub fn for_workload(w: &TiersWorkload) -> BbSizing {
        // TiersBench's files: one warm-up file per writer, then `runs` files per writer.
        BbSizing::for_files(u64::from(w.runs + 1) * u64::from(w.writers), w.file_bytes, w.block_bytes, 0)
    }

    /// For `files` files of `file_bytes` in `block_bytes` blocks, and `small_files` files of at most one chunk
    /// (a job's own files beside the measured ones: each reserves a whole block while it is written).
    pub fn for_files(files: u64, file_bytes: u64, block_bytes: u64, small_files: u64) -> BbSizing {
        let full_blocks = file_bytes / block_bytes;
        let tail = file_bytes % block_bytes;
        let chunks_per_file = full_blocks * block_bytes.div_ceil(CHUNK_BYTES) + tail.div_ceil(CHUNK_BYTES);
        let blocks = files * file_bytes.div_ceil(block_bytes) + small_files;
        let chunks = files * chunks_per_file + small_files;
        // A quarter more for the index tables (paid out of -m) and the segments a deleted chunk leaves
        // behind until they are recycled, plus each shard's active segment (4 shards per CPU).
        let cpus = std::thread::available_parallelism().map_or(8, |n| n.get() as u64);
        let memory_bytes = chunks * (SEGMENT_BYTES / 2) * 5 / 4 + (64 << 20) + 4 * cpus * SEGMENT_BYTES;
        BbSizing { memory_mb: memory_bytes.div_ceil(1 << 20), max_pending_bytes: blocks * block_bytes }
    }
}

/// `slipstream-cache` next to this `ohb` (both built by `make native`).
pub fn cache_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the ohb executable: {e}"))?;
    Ok(exe.with_file_name("slipstream-cache"))
}

/// A running burst buffer; killed on drop.
pub struct BurstBufferCache {
    child: ChildGuard,
    pub addr: SocketAddr,
    /// The fabric's address when the cache was started with the fabric (`hhh-l-bb-fabric`).
    pub fabric_addr: Option<SocketAddr>,
    pub sizing: BbSizing,
    log: PathBuf,
}

impl BurstBufferCache {
    /// Starts the cache with its SSD log in `ssd_dir` and its stderr in `log`. A missing binary fails
    /// (the configuration then fails: it is never skipped).
    pub fn start(binary: &Path, ssd_dir: &Path, log: &Path, sizing: BbSizing, fabric: bool) -> Result<BurstBufferCache, String> {
        if !binary.is_file() {
            return Err(format!("hhh-l-bb needs slipstream-cache as its burst buffer: {} not found (build it with `make native`)", binary.display()));
        }
        std::fs::create_dir_all(ssd_dir).map_err(|e| format!("{}: {e}", ssd_dir.display()))?;
        let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(binary);
        cmd.args(["-l", "127.0.0.1", "-p", "0", "-m", &sizing.memory_mb.to_string()])
            .args(if fabric { ["--fabric-port", "0"].as_slice() } else { ["--no-fabric"].as_slice() })
            .arg("--ssd-path")
            .arg(ssd_dir)
            .args(["--ssd-size", &format!("{}m", sizing.memory_mb)])
            .stderr(Stdio::from(stderr));
        let mut child = ChildGuard::spawn("slipstream-cache", cmd, true)?;
        let log_text = || std::fs::read_to_string(log).unwrap_or_default();
        let deadline = Instant::now() + START_TIMEOUT;
        let (addr, fabric_addr) = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match child.next_line(left) {
                Ok(Some(line)) => {
                    if let Some(addr) = parse_announcement(&line) {
                        let fabric_addr = parse_fabric_announcement(&line);
                        if fabric && fabric_addr.is_none() {
                            return Err(format!("slipstream-cache started without its fabric: {line}"));
                        }
                        break (addr, fabric_addr);
                    }
                }
                Ok(None) => return Err(format!("slipstream-cache did not listen within {START_TIMEOUT:?}; its log:\n{}", log_text())),
                Err(e) => return Err(format!("slipstream-cache did not start ({e}); its log:\n{}", log_text())),
            }
        };
        Ok(BurstBufferCache { child, addr, fabric_addr, sizing, log: log.to_path_buf() })
    }

    /// After the JVM: the cache still running (it died under the DataNodes otherwise), and its counters
    /// and size as `bb_*` fields for the result.
    pub fn report(&mut self) -> Result<Value, String> {
        if let Some(status) = self.child.try_status() {
            return Err(format!("slipstream-cache exited during the run ({status}); its log: {}", self.log.display()));
        }
        let stats = stats(self.addr)?;
        let mut fields = json!({"bb_memory_mb": self.sizing.memory_mb, "bb_ssd_mb": self.sizing.memory_mb,
            "bb_max_pending_bytes": self.sizing.max_pending_bytes});
        for name in STATS_KEPT {
            let value = stats.iter().find(|(k, _)| k == name).map(|(_, v)| *v).ok_or_else(|| format!("slipstream-cache stats: no {name}"))?;
            fields[format!("bb_cache_{name}")] = json!(value);
        }
        if let Some(fabric_addr) = self.fabric_addr {
            // The path's proof: every set the cache took came over the fabric (ohb's own stats
            // connection sets nothing).
            let requests = stats.iter().find(|(k, _)| k == "fabric_requests").map(|(_, v)| *v).ok_or("slipstream-cache stats: no fabric_requests")?;
            let sets = fields["bb_cache_cmd_set"].as_u64().unwrap_or(0);
            if requests < sets {
                return Err(format!("the burst buffer's fabric carried {requests} requests for {sets} sets: not every chunk went over the fabric"));
            }
            fields["bb_cache_fabric_requests"] = json!(requests);
            fields["bb_fabric_addr"] = json!(fabric_addr.to_string());
        }
        Ok(fields)
    }
}

/// `slipstream-cache listening tcp=127.0.0.1:P fabric=off ssd=...`: the TCP address (this cache runs
/// without the fabric, which `cache::servers::parse_cache_announcement` requires).
pub fn parse_announcement(line: &str) -> Option<SocketAddr> {
    let rest = line.trim().strip_prefix("slipstream-cache listening")?;
    rest.split_whitespace().find_map(|word| word.strip_prefix("tcp=")?.parse().ok())
}

/// `... fabric=127.0.0.1:Q ...`: the fabric's address, or None (`fabric=off`).
pub fn parse_fabric_announcement(line: &str) -> Option<SocketAddr> {
    let rest = line.trim().strip_prefix("slipstream-cache listening")?;
    rest.split_whitespace().find_map(|word| word.strip_prefix("fabric=")?.parse().ok())
}

/// The numeric counters of a memcached `stats` reply.
pub fn stats(addr: SocketAddr) -> Result<Vec<(String, u64)>, String> {
    let err = |e: std::io::Error| format!("slipstream-cache stats at {addr}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(err)?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(err)?;
    stream.write_all(b"stats\r\n").map_err(err)?;
    let mut counters = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = line.map_err(err)?;
        let line = line.trim_end();
        if line == "END" {
            return Ok(counters);
        }
        let mut words = line.split(' ');
        if let (Some("STAT"), Some(name), Some(value), None) = (words.next(), words.next(), words.next(), words.next()) {
            if let Ok(v) = value.parse() {
                counters.push((name.to_string(), v));
            }
        }
    }
    Err(format!("slipstream-cache stats at {addr}: the reply ended before END"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn sizing_holds_every_parallel_file_system_replica_at_once() {
        let quick = TiersWorkload::new(true);
        let s = BbSizing::for_workload(&quick);
        // (3 runs + warm-up) x 2 writers x 4 blocks of 4 MiB: 32 blocks of 9 chunks of 511 KiB (the
        // ninth 8 KiB), two per segment.
        assert_eq!(s.max_pending_bytes, 32 * (4 << 20));
        assert!(s.memory_mb >= 288 / 2 * 5 / 4 + 64, "288 chunks, two per segment, and the margin: {s:?}");
        // A file of a block and a bit: the tail block's one chunk counts too.
        let w = TiersWorkload { file_bytes: (4 << 20) + 1, runs: 1, writers: 1, ..quick };
        let tail = BbSizing::for_workload(&w);
        assert_eq!(tail.max_pending_bytes, 2 * 2 * (4 << 20));
        // 2 files x (9 + 1) chunks = 10 segments (12.5 MiB with the quarter) against 144 (180 MiB).
        assert_eq!(s.memory_mb - tail.memory_mb, 180 - 13);
        // Four small files more: four blocks pending at worst, four chunks (two segments, 2.5 MiB).
        let small = BbSizing::for_files(8, 16 << 20, 4 << 20, 4);
        assert_eq!(small.max_pending_bytes, s.max_pending_bytes + 4 * (4 << 20));
        assert_eq!(small.memory_mb - s.memory_mb, 3, "2.5 MiB, rounded up: {small:?} {s:?}");
    }

    #[test]
    fn the_announcement_gives_the_tcp_address() {
        let addr = parse_announcement("slipstream-cache listening tcp=127.0.0.1:4242 fabric=off ssd=392m").unwrap();
        assert_eq!(addr, "127.0.0.1:4242".parse().unwrap());
        assert_eq!(parse_announcement("slipstream-cache listening fabric=off"), None);
        assert_eq!(parse_fabric_announcement("slipstream-cache listening tcp=127.0.0.1:4242 fabric=off ssd=392m"), None);
        let fabric = parse_fabric_announcement("slipstream-cache listening tcp=127.0.0.1:4242 fabric=127.0.0.1:4343 ssd=392m");
        assert_eq!(fabric, Some("127.0.0.1:4343".parse().unwrap()));
        assert_eq!(parse_announcement("something tcp=127.0.0.1:1"), None);
    }

    #[test]
    fn a_missing_binary_fails_with_how_to_build_it() {
        let dir = std::env::temp_dir().join(format!("ohb-tiers-bb-{}", std::process::id()));
        let s = BbSizing::for_workload(&TiersWorkload::new(true));
        let e = BurstBufferCache::start(&dir.join("no-such-cache"), &dir.join("ssd"), &dir.join("log"), s, false).err().unwrap();
        assert!(e.contains("make native") && e.contains("no-such-cache"), "{e}");
        assert!(!dir.exists(), "nothing created before the binary is found");
    }

    #[test]
    fn stats_reads_the_numeric_counters_up_to_end() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 7];
            conn.read_exact(&mut request).unwrap();
            assert_eq!(&request, b"stats\r\n");
            conn.write_all(b"STAT pid 12\r\nSTAT version 1.0.0\r\nSTAT evictions 0\r\nSTAT ssd_spills 3\r\nEND\r\n").unwrap();
        });
        let counters = stats(addr).unwrap();
        server.join().unwrap();
        assert_eq!(counters, vec![("pid".to_string(), 12), ("evictions".to_string(), 0), ("ssd_spills".to_string(), 3)]);
    }
}
