//! `ohb mapreduce avg|rand|skew|sort|all`: OHB's MR-AVG, MR-RAND and MR-SKEW (stand-alone MapReduce,
//! no HDFS) and Hadoop's Sort example on RandomWriter's output, on real Hadoop, three shuffle
//! configurations side by side in one run (`all`: avg, rand and skew).
//!
//! The JVM side (`io.slipstream.ohb.mapreduce.MapReduceBench` in `jvm/ohb-mapreduce`, started with
//! plain `java` and the class path Maven wrote to `target/classpath.txt`) runs a mini YARN cluster
//! of two NodeManagers, the reducers in their own container JVMs, and one generator job per
//! configuration and run:
//!
//! - `vanilla`: Hadoop's HTTP shuffle;
//! - `plugin`: the Slipstream consumer plugin (the fabric with default transports);
//! - `plugin-tcp`: the plugin with the fabric forced to TCP on both sides (its own cluster).
//!
//! Reducers start after the last map (`slowstart=1.0`) so the shuffle phase is the copy alone. Each
//! job prints `OHB_MAPREDUCE_RESULT {json}` (job time, the longest reducer's shuffle, merge and
//! reduce phases from the job history, shuffle bytes, the plugin's fabric bytes, a checksum); the
//! table shows medians and ratios against vanilla. The run fails when a job fails, when checksums
//! differ between configurations, or when a plugin run shuffled a byte outside the fabric (the JVM
//! side checks both and exits non-zero). The JVM's log goes to `build/ohb-mapreduce-<test>.log`.

pub mod cli;
pub mod render;

/// RandomWriter's key size in `sort` (`SortJob.KEY_BYTES` on the JVM side).
pub const SORT_KEY_BYTES: u32 = 10;

/// The configurations, in the order they run.
pub const CONFIGS: [&str; 3] = ["vanilla", "plugin", "plugin-tcp"];

/// One test's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub pattern: String,
    pub maps: u32,
    pub reduces: u32,
    pub records_per_map: u64,
    pub value_bytes: u32,
    pub runs: u32,
}

impl Workload {
    /// Default: 4 maps x 4 reducers x 2^18 records of 1000 bytes, 1.05 GB of values shuffled (the
    /// size the targets are stated for); `--quick`: 2 x 2 x 20 000 x 100 bytes (a smoke run).
    pub fn new(pattern: &str, quick: bool) -> Workload {
        let (maps, reduces, records_per_map, value_bytes) = if quick { (2, 2, 20_000, 100) } else { (4, 4, 1 << 18, 1000) };
        Workload { pattern: pattern.to_string(), maps, reduces, records_per_map, value_bytes, runs: 1 }
    }

    /// Bytes of map output: values (and `sort`'s 10-byte RandomWriter keys; the generator's 8-byte
    /// keys are not counted, as OHB counts its pairs' payload).
    pub fn shuffle_bytes(&self) -> u64 {
        let key_bytes = if self.pattern == "sort" { SORT_KEY_BYTES } else { 0 };
        self.maps as u64 * self.records_per_map * (self.value_bytes + key_bytes) as u64
    }
}
