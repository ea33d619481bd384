//! `ohb hbase`: HBase's own `PerformanceEvaluation` (sequentialWrite to fill, then randomRead,
//! randomWrite and scanRange100; one client, one RPC per row, several per scan) against a real
//! HBase 2.6 (HMaster, one RegionServer, ZooKeeper, HDFS) per configuration, side by side in one run:
//!
//! - `netty`: HBase's `NettyRpcServer` and `NettyRpcClient`;
//! - `fabric`: `io.slipstream.hbase.rpc.FabricRpcServer` / `FabricRpcClient` (`jvm/hbase-rpc`), fallback never;
//! - `fabric-tcp`: the same with the fabric forced to TCP on both sides.
//!
//! The JVM side (`io.slipstream.ohb.hbase.HBaseBench` in `jvm/ohb-hbase`, started with plain `java`
//! and the class path Maven wrote to `target/classpath.txt`) starts each cluster in its own process
//! and runs PerformanceEvaluation in its own (`--nomapred --latency --autoFlush=true`), one client JVM per
//! configuration (`child::run_captured_per_config`: none measures on a client another warmed), reading
//! PerformanceEvaluation's latency report (min / p50 / p99 / mean, us). Each point prints
//! `OHB_HBASE_RESULT {json}`; a fabric point whose calls did not all go over the fabric (the client's
//! counters) is a failed point, and `ohb` exits non-zero. The JVM's log goes to `build/ohb-hbase.log`.

pub mod cli;

/// The configurations, in the order they run.
pub const CONFIGS: [&str; 3] = ["netty", "fabric", "fabric-tcp"];
/// PerformanceEvaluation's tests, in the order they run (the first fills the table).
pub const TESTS: [&str; 4] = ["sequentialWrite", "randomRead", "randomWrite", "scanRange100"];
