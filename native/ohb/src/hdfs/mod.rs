//! `ohb hdfs swl|srl|rrl|swt|srt|all`: OHB's HDFS benchmarks (sequential write latency, sequential
//! and random read latency, sequential write and read throughput) on real HDFS 3.4, four
//! configurations side by side in one run, each in its own JVM with its own mini cluster (a
//! NameNode and three DataNodes, replication 3), the reader or writer in a second JVM of its own
//! as HDFS clients run (since session 38; before, in the cluster's JVM, where the client's fabric
//! node shared the DataNodes' UCX worker):
//!
//! - `vanilla`: HDFS's own TCP block reader and writer, short-circuit reads off (as for remote readers);
//! - `plugin`: the Slipstream DataNode plugin, replica accessor and `SlipstreamDistributedFileSystem`
//!   (`jvm/hdfs`), default transports;
//! - `plugin-tcp`: the plugin with the fabric forced to TCP;
//! - `vanilla-sc`: HDFS with short-circuit reads on, the local-read reference (HDFS's legacy local
//!   reader: Maven's Hadoop has no libhadoop for domain sockets); read tests only.
//!
//! The JVM side (`io.slipstream.ohb.hdfs.HdfsBench` in `jvm/ohb-hdfs`) writes the files, checks
//! every file's CRC on an untimed read (after writing, for the write tests), measures, and prints
//! `OHB_HDFS_RESULT {json}`; it exits non-zero when a read or write fails or the configuration's
//! path was not taken (plugin: every measured byte over the fabric, by the plugin's counters;
//! vanilla-sc: short-circuit bytes read). ohb then
//! exits non-zero too. Logs go to `build/ohb-hdfs-<test>-<config>.log`.
//!
//! `ohb hdfs meta` (`meta.rs`): Hadoop's own NNThroughputBenchmark against a NameNode served by each RPC engine.
//! `ohb hdfs dfsio` (`dfsio.rs`): Hadoop's own TestDFSIO for these configurations. `ohb hdfs tiers` (`tiers.rs`,
//! `tiers_pfs.rs`, `tiers_run.rs`, `tiers_skew.rs`, `tiers_dfsio.rs`): Triple-H's storage modes against vanilla HDFS's policies.

pub mod cli;
pub mod dfsio;
pub mod meta;
pub mod render;
pub mod tiers;
pub mod tiers_dfsio;
pub mod tiers_pfs;
pub mod tiers_run;
pub mod tiers_skew;

/// The configurations, in the order they run.
pub const CONFIGS: [&str; 4] = ["vanilla", "plugin", "plugin-tcp", "vanilla-sc"];

/// The tests `all` runs, in order.
pub const TESTS: [&str; 5] = ["swl", "srl", "rrl", "swt", "srt"];

/// True for the throughput tests (MB/s, higher is better); the others are latencies.
pub fn is_throughput(test: &str) -> bool {
    test == "srt" || test == "swt"
}

/// True for the write tests (no short-circuit reference: it is a read path).
pub fn is_write(test: &str) -> bool {
    test == "swl" || test == "swt"
}

/// One test's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub test: String,
    pub file_bytes: u64,
    pub block_bytes: u64,
    pub readers: u32,
    pub seek_bytes: u64,
    pub read_bytes: u32,
    pub iterations: u32,
}

impl Workload {
    /// Defaults: latency on 1 MiB files (the size the latency targets are stated for), 20 files,
    /// 4 KiB reads every 64 KiB for rrl; throughput: 2 readers or writers of 256 MiB files, 10 runs
    /// (runs of one configuration spread widely on two cores: swt with 3 runs gave 0.68x to 1.44x of
    /// vanilla from one run of ohb to the next, session 35).
    /// `--quick`: 5 iterations; throughput 2 of 16 MiB files, 2 runs.
    pub fn new(test: &str, quick: bool) -> Workload {
        let throughput = is_throughput(test);
        let (file_bytes, iterations) = match (throughput, quick) {
            (false, false) => (1 << 20, 20),
            (false, true) => (1 << 20, 5),
            (true, false) => (256 << 20, 10),
            (true, true) => (16 << 20, 2),
        };
        Workload {
            test: test.to_string(),
            file_bytes,
            block_bytes: 128 << 20,
            readers: if throughput { 2 } else { 1 },
            seek_bytes: 64 << 10,
            read_bytes: 4 << 10,
            iterations,
        }
    }
}
