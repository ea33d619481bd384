//! `ohb rpc lat|thr|callbench`: OHB's RPC latency and throughput tests on Hadoop RPC 3.4 (Hadoop's own echo
//! protocol, `TestProtobufRpcProto.echo`), three configurations side by side in one run:
//!
//! - `vanilla`: Hadoop's `ProtobufRpcEngine2` over its sockets;
//! - `fabric`: `io.slipstream.hadoop.rpc.FabricRpcEngine` (`jvm/hadoop-rpc`), fallback never;
//! - `fabric-tcp`: the same engine with the fabric forced to TCP on both sides.
//!
//! The JVM side (`io.slipstream.ohb.rpc.RpcBench` in `jvm/ohb-rpc`, started with plain `java` and the
//! class path Maven wrote to `target/classpath.txt`) starts one Hadoop RPC server per configuration
//! in its own process (16 handlers, bound to 127.0.0.1) and measures from its own process, one client JVM
//! per configuration (`child::run_captured_per_config`: none measures on a client another warmed):
//! `lat`, one client and one call at a time per payload size (min / p50 / p99 / avg); `thr`, N client
//! threads for a fixed time (calls/s, and CPU time per call of the clients' JVM and of the server's, read
//! from the OS). Each point prints `OHB_RPC_RESULT {json}`; a fabric point whose
//! calls did not all go over the fabric (the engine's counter) is a failed point, and `ohb` exits
//! non-zero. The JVM's log goes to `build/ohb-rpc-<test>.log`.
//!
//! `ohb rpc callbench` (`callbench.rs`) runs Hadoop's own `RPCCallBenchmark` against the same three.

pub mod callbench;
pub mod cli;
pub mod render;

/// The configurations, in the order they run.
pub const CONFIGS: [&str; 3] = ["vanilla", "fabric", "fabric-tcp"];
