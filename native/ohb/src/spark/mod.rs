//! `ohb spark groupby|sortby|terasort|pagerank|sql|all`: OHB's GroupByTest and SortByTest, and HiBD's
//! TeraSort, PageRank and Spark SQL workloads, on real Spark, three shuffle
//! configurations side by side in one run.
//!
//! Each run is one Spark application (`io.slipstream.ohb.spark.ShuffleBench` in `jvm/ohb-spark`),
//! a driver started with plain `java` and master `local-cluster[2,1,MEM]`: two executors of one core
//! each, in their own JVMs. The application generates and caches its input, then times the
//! measured job itself and prints one line, `OHB_SPARK_RESULT {json}` (job time, stage times,
//! shuffle metrics, checksum). Configurations:
//!
//! - `vanilla`: Spark's sort shuffle over Netty, with `spark.shuffle.readHostLocalDisk=false` so the
//!   other executor's blocks travel over the network as they would across hosts;
//! - `plugin`: `spark.shuffle.manager=io.slipstream.spark.SlipstreamShuffleManager` (the fabric with
//!   default transports), its jar on the driver's class path and `spark.*.extraClassPath`;
//! - `plugin-tcp`: the plugin with `spark.slipstream.transport=tcp`.
//!
//! With `--hosts netns` each application runs instead on a standalone cluster of its own whose Master
//! and driver share one "host" and whose two Workers (one executor each) have one each: network,
//! IPC, PID and mount namespaces joined by a bridge (`hosts.rs`), so every remote block crosses a
//! TCP link, and a run fails unless the Workers' links received at least the remote bytes Spark read.
//!
//! Runs interleave (vanilla, plugin, plugin-tcp, then plugin, plugin-tcp, vanilla, ...: the order
//! rotates each round, `stats::round_order`) and the table shows medians. The run
//! fails when the configurations' checksums differ, a sort comes back unsorted, or an application
//! fails (its logs are shown). Every application is bounded in time and killed after it; its
//! driver's output and its executors' logs stay in the log directory (`build/ohb-spark/`).
//!
//! Executor memory: while an application runs, ohb samples its executors (the processes whose
//! command line has Spark's executor class and the application's directory) every 250 ms and keeps
//! each one's peak resident set (`VmHWM`). Against the target "no more than vanilla plus the
//! configured buffer cap" (`spark.slipstream.buffer.cap`: registered memory, off-heap, so it counts
//! in RSS, not in the Java heap), each plugin configuration's largest executor is compared with
//! vanilla's. A result above the target is reported, not failed: RSS also follows the heap's growth.

use std::time::Duration;

use crate::progress::Progress;
use crate::spark::app::{prepare_log_dir, run_app};
use crate::spark::results::{ConfigRuns, TestResult};
use crate::spark::run::SparkRun;
use crate::stats::round_order;
use crate::table::first_line;

pub mod app;
pub mod cli;
pub mod executors;
pub mod heap;
pub mod hosts;
pub mod render;
pub mod results;
pub mod run;
#[cfg(test)]
mod test_support;

/// The Spark applications' jar, relative to the repository root.
pub const APP_JAR: &str = "jvm/ohb-spark/target/slipstream-ohb-spark.jar";
/// The plugin's shaded jar, relative to the repository root.
pub const PLUGIN_JAR: &str = "jvm/spark/target/slipstream-spark.jar";
/// The Spark home (a directory with `jars/`), relative to the repository root.
pub const SPARK_HOME_DEFAULT: &str = "build/spark/3.5.8";
/// Where the applications' logs go, relative to the repository root (earlier runs' are removed first).
pub const LOG_DIR_DEFAULT: &str = "build/ohb-spark";
pub const MAIN_CLASS: &str = "io.slipstream.ohb.spark.ShuffleBench";
pub const RESULT_PREFIX: &str = "OHB_SPARK_RESULT ";
pub const PLUGIN_SHUFFLE_MANAGER: &str = "io.slipstream.spark.SlipstreamShuffleManager";
/// The main class of an executor's JVM, one argument of its command line.
pub const EXECUTOR_MAIN_CLASS: &str = "org.apache.spark.executor.CoarseGrainedExecutorBackend";
/// How often `run_app` samples its executors' peak RSS and their threads' CPU time.
pub const EXECUTOR_SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
/// Executor processes one application may start, replacements included; more are not tracked.
pub const EXECUTOR_PROCESSES_MAX: usize = 64;
/// Executor threads one application's CPU accounting tracks (an executor runs about 80); more are not tracked.
pub const EXECUTOR_THREADS_MAX: usize = 8192;
/// The plugin's `spark.slipstream.buffer.cap` and its default (SlipstreamConf).
pub const BUFFER_CAP_KEY: &str = "spark.slipstream.buffer.cap";
pub const BUFFER_CAP_DEFAULT: &str = "256m";
/// Executors of the local cluster, one core each.
pub const EXECUTORS: usize = 2;
pub const DRIVER_HEAP: &str = "-Xmx1g";
/// Spark's `JavaModuleOptions` (3.5.8, printed by its launcher), which spark-submit adds for Java 17,
/// plus 4.x's Netty flag. Spark adds them to the executors itself.
pub const JAVA_MODULE_OPTIONS: &[&str] = &[
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
    "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
];
/// An application that takes longer is killed (`--timeout-s`).
pub const APP_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);
pub const APP_TIMEOUT_QUICK: Duration = Duration::from_secs(180);
/// Lines of the driver's stderr, and of each executor's, shown when an application fails.
const DRIVER_LOG_LINES_MAX: usize = 40;
const EXECUTOR_LOG_LINES_MAX: usize = 15;
const JAVA_VERSION_TIMEOUT: Duration = Duration::from_secs(20);

pub const REPEATS_MAX: usize = 20;
pub const MAPPERS_MAX: usize = 10_000;
pub const REDUCERS_MAX: usize = 100_000;
pub const PAIRS_PER_MAPPER_MAX: usize = 100_000_000;
pub const EXECUTOR_MEMORY_MIB_MIN: u64 = 512;
pub const EXECUTOR_MEMORY_MIB_MAX: u64 = 256 << 10;

/// Runs every test: for each test, `repeats` rounds of every configuration, in an order rotated
/// each round (`stats::round_order`).
pub fn run_spark(run: &SparkRun) -> Result<Vec<TestResult>, String> {
    run.validate()?;
    run.check_files()?;
    prepare_log_dir(&run.log_dir)?;
    // The namespaces live for the whole run (removed when `hosts` drops); clusters, per application.
    let hosts = match run.hosts {
        crate::spark::run::SparkHosts::Loopback => None,
        crate::spark::run::SparkHosts::Netns => Some(hosts::NetnsHosts::create()?),
    };
    let mut progress = Progress::new(run.progress, run.tests.len() * run.configs.len() * run.repeats);
    let mut results = Vec::new();
    for &test in &run.tests {
        let mut configs: Vec<ConfigRuns> =
            run.configs.iter().map(|&config| ConfigRuns { config, results: Vec::new(), error: None }).collect();
        // Rotated each round (`stats::round_order`): in session 42's `make demo` the plugin, always
        // third, was behind vanilla and forced TCP in all five workloads, and first in an A/B right
        // after it was ahead of forced TCP.
        let indices: Vec<usize> = (0..configs.len()).collect();
        for repeat in 0..run.repeats {
            for index in round_order(&indices, repeat) {
                let runs = &mut configs[index];
                let label = format!("{} {} run {}/{}", test.name(), runs.config.name(), repeat + 1, run.repeats);
                progress.begin(&label);
                if runs.error.is_some() {
                    progress.end("skipped (failed before)");
                    continue;
                }
                match run_app(run, hosts.as_ref(), test, runs.config, repeat) {
                    Ok(r) => {
                        progress.end(&format!(
                            "job {:.2} s, reduce stage {:.2} s, fetch wait {:.2} s (application {:.0} s)",
                            r.job_ms / 1e3,
                            r.reduce_stage_ms / 1e3,
                            r.fetch_wait_ms / 1e3,
                            r.app_s
                        ));
                        runs.results.push(r);
                    }
                    Err(e) => {
                        progress.end(&format!("FAILED: {}", first_line(&e)));
                        // With the logs' tails, whatever --no-progress says.
                        eprintln!("ohb: {label} failed: {e}");
                        runs.error = Some(e);
                    }
                }
            }
        }
        results.push(TestResult { test, configs });
    }
    Ok(results)
}
