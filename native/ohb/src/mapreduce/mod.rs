//! `ohb mapreduce avg|rand|skew|sort|terasort|all`: OHB's MR-AVG, MR-RAND and MR-SKEW (stand-alone
//! MapReduce, no HDFS), Hadoop's Sort example on RandomWriter's output and Hadoop's TeraSort on
//! TeraGen's output (on a mini HDFS beside the cluster: TeraSort's partition file, in the distributed
//! cache, is not found by the maps with the local file system as the default), on real Hadoop, three
//! shuffle configurations side by side in one run (`all`: avg, rand and skew).
//!
//! The JVM side (`io.slipstream.ohb.mapreduce.MapReduceBench` in `jvm/ohb-mapreduce`, started with
//! plain `java` and the class path Maven wrote to `target/classpath.txt`) runs a mini YARN cluster
//! of two NodeManagers, the reducers in their own container JVMs, and one job per configuration and
//! run (`sort` and `terasort`: their input written once per invocation, not timed):
//!
//! - `vanilla`: Hadoop's HTTP shuffle;
//! - `plugin`: the Slipstream consumer plugin (the fabric with default transports);
//! - `plugin-tcp`: the plugin with the fabric forced to TCP on both sides.
//!
//! Each configuration runs on a fresh cluster (its runs are that cluster's first, second, ... jobs): a
//! cluster's first job is faster than its later ones whatever the shuffle, so a shared cluster would
//! favour whichever configuration came first.
//!
//! Reducers start after the last map (`slowstart=1.0`) so the shuffle phase is the copy alone. Each
//! job prints `OHB_MAPREDUCE_RESULT {json}` (job time, the longest reducer's shuffle, merge and
//! reduce phases from the job history, shuffle bytes, the plugin's fabric bytes, a checksum); the
//! table shows medians and ratios against vanilla. The run fails when a job fails, when checksums
//! differ between configurations (`terasort`: from the input's, TeraValidate's sum of every record's
//! CRC-32), when a sort's output is out of order, or when a plugin run shuffled a byte outside the
//! fabric (the JVM side checks these and exits non-zero). The JVM's log goes to `build/ohb-mapreduce-<test>.log`.

pub mod cli;
pub mod render;

/// RandomWriter's key size in `sort` (`SortJob.KEY_BYTES` on the JVM side).
pub const SORT_KEY_BYTES: u32 = 10;

/// TeraGen's record: a 10-byte key and a 90-byte value (`TeraSortJob.KEY_BYTES` and `VALUE_BYTES` on
/// the JVM side), fixed: `--value-bytes` does not apply to `terasort`.
pub const TERASORT_KEY_BYTES: u32 = 10;
pub const TERASORT_VALUE_BYTES: u32 = 90;

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
    /// `terasort`: TeraGen's 100-byte records, ten times as many for the same 1.05 GB (4 x 2 621 440),
    /// and 2 x 20 000 of them quick.
    pub fn new(pattern: &str, quick: bool) -> Workload {
        let (maps, reduces, records_per_map, value_bytes) = match (pattern, quick) {
            ("terasort", true) => (2, 2, 20_000, TERASORT_VALUE_BYTES),
            ("terasort", false) => (4, 4, 10 << 18, TERASORT_VALUE_BYTES),
            (_, true) => (2, 2, 20_000, 100),
            (_, false) => (4, 4, 1 << 18, 1000),
        };
        Workload { pattern: pattern.to_string(), maps, reduces, records_per_map, value_bytes, runs: 1 }
    }

    /// The key bytes counted in [`Workload::shuffle_bytes`]: `sort`'s and `terasort`'s keys are part
    /// of the records sorted; the generator's 8-byte keys are not counted, as OHB counts its pairs'
    /// payload.
    pub fn key_bytes(&self) -> u32 {
        match self.pattern.as_str() {
            "sort" => SORT_KEY_BYTES,
            "terasort" => TERASORT_KEY_BYTES,
            _ => 0,
        }
    }

    /// Bytes of map output's records: values and counted keys (Hadoop's `shuffle bytes` is more:
    /// IFile's per-record lengths, Writable framing and checksums).
    pub fn shuffle_bytes(&self) -> u64 {
        self.maps as u64 * self.records_per_map * (self.value_bytes + self.key_bytes()) as u64
    }
}
