//! `ohb spark groupby|sortby|all`: OHB's GroupByTest and SortByTest on real Spark, three shuffle
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
//! Runs interleave (vanilla, plugin, plugin-tcp, vanilla, ...) and the table shows medians. The run
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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::{parse_list, parse_size, Args};
use crate::child::{find_repo_root, run_captured, ChildGuard};
use crate::machine::Machine;
use crate::proc_mem;
use crate::report::{format_ratio, write_json};
use crate::stats::median;
use crate::suite::Progress;

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

pub const VALUE_FLAGS: &[&str] = &[
    "mappers",
    "pairs",
    "value-bytes",
    "reducers",
    "executor-memory",
    "repeats",
    "seed",
    "configs",
    "spark-home",
    "plugin-jar",
    "app-jar",
    "java",
    "timeout-s",
    "log-dir",
    "json",
];
pub const SWITCH_FLAGS: &[&str] = &["quick", "no-progress", "help"];

/// OHB's two Spark shuffle tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkTest {
    GroupBy,
    SortBy,
}

impl SparkTest {
    pub const ALL: [SparkTest; 2] = [SparkTest::GroupBy, SparkTest::SortBy];

    pub fn name(self) -> &'static str {
        match self {
            SparkTest::GroupBy => "groupby",
            SparkTest::SortBy => "sortby",
        }
    }

    pub fn parse(text: &str) -> Option<SparkTest> {
        SparkTest::ALL.into_iter().find(|t| t.name() == text)
    }

    /// The measured job, for the table's header.
    pub fn job(self, reducers: usize) -> String {
        match self {
            SparkTest::GroupBy => format!("groupByKey({reducers})"),
            SparkTest::SortBy => format!("sortByKey(true, {reducers}) (its sampling job included)"),
        }
    }
}

/// A shuffle configuration. Names are the JSON `name`s and `--configs` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkConfig {
    Vanilla,
    Plugin,
    PluginTcp,
}

impl SparkConfig {
    pub const ALL: [SparkConfig; 3] = [SparkConfig::Vanilla, SparkConfig::Plugin, SparkConfig::PluginTcp];

    pub fn name(self) -> &'static str {
        match self {
            SparkConfig::Vanilla => "vanilla",
            SparkConfig::Plugin => "plugin",
            SparkConfig::PluginTcp => "plugin-tcp",
        }
    }

    pub fn parse(text: &str) -> Option<SparkConfig> {
        SparkConfig::ALL.into_iter().find(|c| c.name() == text)
    }

    pub fn uses_plugin(self) -> bool {
        self != SparkConfig::Vanilla
    }

    pub fn describe(self) -> &'static str {
        match self {
            SparkConfig::Vanilla => "sort shuffle over Netty, readHostLocalDisk=false (the other executor's blocks over the network)",
            SparkConfig::Plugin => "spark.shuffle.manager=io.slipstream.spark.SlipstreamShuffleManager (fabric, default transports)",
            SparkConfig::PluginTcp => "the plugin with spark.slipstream.transport=tcp",
        }
    }
}

/// The data: `mappers` map tasks of `pairs_per_mapper` (int, byte[value_bytes]) pairs, `reducers` reduce tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub mappers: usize,
    pub pairs_per_mapper: usize,
    pub value_bytes: usize,
    pub reducers: usize,
}

impl Workload {
    /// 8 x 128 Ki pairs x 1000 B: 1.0e9 bytes of values, about 1.06e9 bytes of shuffle output.
    pub const DEFAULT: Workload = Workload { mappers: 8, pairs_per_mapper: 128 << 10, value_bytes: 1000, reducers: 8 };
    /// `--quick`: 4 MB, for a smoke run.
    pub const QUICK: Workload = Workload { mappers: 2, pairs_per_mapper: 2000, value_bytes: 1000, reducers: 2 };

    pub fn records(&self) -> u64 {
        self.mappers as u64 * self.pairs_per_mapper as u64
    }

    pub fn value_bytes_total(&self) -> u64 {
        self.records() * self.value_bytes as u64
    }
}

/// One `ohb spark` invocation.
#[derive(Debug, Clone)]
pub struct SparkRun {
    pub tests: Vec<SparkTest>,
    pub configs: Vec<SparkConfig>,
    pub workload: Workload,
    pub executor_memory_mib: u64,
    pub repeats: usize,
    pub seed: u64,
    pub spark_home: PathBuf,
    pub app_jar: PathBuf,
    pub plugin_jar: PathBuf,
    pub java: PathBuf,
    /// `--conf k=v`, applied after (so over) the configuration's own settings.
    pub extra_conf: Vec<(String, String)>,
    pub timeout: Duration,
    pub log_dir: PathBuf,
    pub progress: bool,
}

impl SparkRun {
    /// `local-cluster[2,1,MEM]`: each worker offers exactly the executor's memory.
    pub fn master(&self) -> String {
        format!("local-cluster[{EXECUTORS},1,{}]", self.executor_memory_mib)
    }

    pub fn validate(&self) -> Result<(), String> {
        let w = &self.workload;
        if w.mappers == 0 || w.mappers > MAPPERS_MAX {
            return Err(format!("--mappers must be in 1..={MAPPERS_MAX}"));
        }
        if w.pairs_per_mapper == 0 || w.pairs_per_mapper > PAIRS_PER_MAPPER_MAX {
            return Err(format!("--pairs must be in 1..={PAIRS_PER_MAPPER_MAX}"));
        }
        if w.reducers == 0 || w.reducers > REDUCERS_MAX {
            return Err(format!("--reducers must be in 1..={REDUCERS_MAX}"));
        }
        if self.repeats == 0 || self.repeats > REPEATS_MAX {
            return Err(format!("--repeats must be in 1..={REPEATS_MAX}"));
        }
        if !(EXECUTOR_MEMORY_MIB_MIN..=EXECUTOR_MEMORY_MIB_MAX).contains(&self.executor_memory_mib) {
            return Err(format!("--executor-memory must be in {EXECUTOR_MEMORY_MIB_MIN}m..={}g", EXECUTOR_MEMORY_MIB_MAX >> 10));
        }
        if self.tests.is_empty() || self.configs.is_empty() {
            return Err("nothing to run".into());
        }
        if self.timeout.is_zero() {
            return Err("--timeout-s must be positive".into());
        }
        Ok(())
    }

    /// What must exist before anything starts.
    pub fn check_files(&self) -> Result<(), String> {
        if !self.spark_home.join("jars").is_dir() {
            return Err(format!(
                "no Spark home at {} (a directory with jars/; make spark-homes builds build/spark/3.5.8, or pass --spark-home)",
                self.spark_home.display()
            ));
        }
        if !self.app_jar.is_file() {
            return Err(format!(
                "Spark bench jar not found: {} (build jvm/ohb-spark: mvn -f jvm/pom.xml package -pl ohb-spark, or pass --app-jar)",
                self.app_jar.display()
            ));
        }
        if self.configs.iter().any(|c| c.uses_plugin()) && !self.plugin_jar.is_file() {
            return Err(format!(
                "plugin jar not found: {} (build jvm/spark, pass --plugin-jar, or measure vanilla alone with --configs vanilla)",
                self.plugin_jar.display()
            ));
        }
        Ok(())
    }

    /// The Spark settings of a configuration, in order (later ones win).
    pub fn spark_conf(&self, config: SparkConfig) -> Vec<(String, String)> {
        let mut conf: Vec<(String, String)> = [
            ("spark.executor.memory", format!("{}m", self.executor_memory_mib)),
            ("spark.driver.host", "127.0.0.1".to_string()),
            ("spark.driver.bindAddress", "127.0.0.1".to_string()),
            ("spark.ui.enabled", "false".to_string()),
            // The executors load the applications' classes from here (the driver serves the jar).
            ("spark.jars", self.app_jar.display().to_string()),
            // As OHB's Scala tests get for (Int, Array[Byte]) pairs; the Java API would pick Java serialization.
            ("spark.serializer", "org.apache.spark.serializer.KryoSerializer".to_string()),
            // Every configuration: a plugin that hands some reads to Spark's own reader must not read the
            // other executor's files from disk either.
            ("spark.shuffle.readHostLocalDisk", "false".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if config.uses_plugin() {
            let jar = self.plugin_jar.display().to_string();
            conf.push(("spark.shuffle.manager".into(), PLUGIN_SHUFFLE_MANAGER.into()));
            conf.push(("spark.driver.extraClassPath".into(), jar.clone()));
            conf.push(("spark.executor.extraClassPath".into(), jar));
        }
        if config == SparkConfig::PluginTcp {
            conf.push(("spark.slipstream.transport".into(), "tcp".into()));
        }
        conf.extend(self.extra_conf.iter().cloned());
        conf
    }

    /// The plugin's buffer cap in a configuration: `--conf spark.slipstream.buffer.cap` or its default.
    pub fn buffer_cap_bytes(&self, config: SparkConfig) -> Result<u64, String> {
        let conf = self.spark_conf(config);
        let value = conf.iter().rev().find(|(k, _)| k == BUFFER_CAP_KEY).map_or(BUFFER_CAP_DEFAULT, |(_, v)| v.as_str());
        spark_size_bytes(value).map_err(|e| format!("{BUFFER_CAP_KEY}: {e}"))
    }

    /// The driver's class path: Spark's jars, the applications, the plugin for its configurations.
    pub fn class_path(&self, config: SparkConfig) -> String {
        let mut parts = vec![self.spark_home.join("jars").join("*").display().to_string(), self.app_jar.display().to_string()];
        if config.uses_plugin() {
            parts.push(self.plugin_jar.display().to_string());
        }
        parts.join(":")
    }

    /// The java command line (without the program).
    pub fn java_args(&self, test: SparkTest, config: SparkConfig) -> Vec<String> {
        let w = &self.workload;
        let mut args: Vec<String> = vec![DRIVER_HEAP.into()];
        args.extend(JAVA_MODULE_OPTIONS.iter().map(|s| s.to_string()));
        args.extend(["-cp".into(), self.class_path(config), MAIN_CLASS.into(), test.name().into()]);
        for (flag, value) in [
            ("--mappers", w.mappers.to_string()),
            ("--pairs", w.pairs_per_mapper.to_string()),
            ("--value-bytes", w.value_bytes.to_string()),
            ("--reducers", w.reducers.to_string()),
            ("--seed", self.seed.to_string()),
            ("--master", self.master()),
            ("--executors", EXECUTORS.to_string()),
        ] {
            args.extend([flag.to_string(), value]);
        }
        for (key, value) in self.spark_conf(config) {
            args.extend(["--conf".to_string(), format!("{key}={value}")]);
        }
        args
    }
}

/// What one application reported (its JSON line), plus its wall time as seen from here.
#[derive(Debug, Clone, PartialEq)]
pub struct AppResult {
    pub spark_version: String,
    pub shuffle_manager: String,
    pub job_ms: f64,
    pub map_stage_ms: f64,
    pub reduce_stage_ms: f64,
    pub other_stages_ms: f64,
    pub fetch_wait_ms: f64,
    pub remote_bytes_read: u64,
    pub local_bytes_read: u64,
    pub shuffle_write_bytes: u64,
    pub records_read: u64,
    pub records: u64,
    pub input_cached_partitions: u64,
    pub failed_tasks: u64,
    pub stage_attempts: u64,
    pub gc_ms: f64,
    pub generate_ms: f64,
    pub ordered: bool,
    pub checksum: String,
    /// Start of `java` to its exit, seconds (JVMs, context, generation, job, shutdown).
    pub app_s: f64,
    /// The executors' peak resident sets, as sampled from here (empty in `from_json`).
    pub executor_peaks: ExecutorPeaks,
    /// The CPU time of the executors' threads, as sampled from here (empty in `from_json`).
    pub executor_threads: ExecutorThreads,
    /// The whole JSON line, kept in the results file.
    pub raw: Value,
}

/// The JSON of the last `OHB_SPARK_RESULT ` line of a driver's stdout.
pub fn parse_result_line(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .ok_or_else(|| format!("no '{}' line on the driver's stdout", RESULT_PREFIX.trim_end()))?;
    serde_json::from_str(line.trim()).map_err(|e| format!("bad {} JSON: {e}", RESULT_PREFIX.trim_end()))
}

impl AppResult {
    pub fn from_json(v: &Value, app_s: f64) -> Result<AppResult, String> {
        let int = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(|| format!("result without \"{k}\""));
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("result without \"{k}\""));
        let ms = |k: &str| int(k).map(|x| x as f64);
        let job_ms = match v.get("job_ns").and_then(Value::as_u64) {
            Some(ns) => ns as f64 / 1e6,
            None => ms("job_ms")?,
        };
        Ok(AppResult {
            spark_version: text("spark_version")?,
            shuffle_manager: text("shuffle_manager")?,
            job_ms,
            map_stage_ms: ms("map_stage_ms")?,
            reduce_stage_ms: ms("reduce_stage_ms")?,
            other_stages_ms: ms("other_stages_ms")?,
            fetch_wait_ms: ms("fetch_wait_ms")?,
            remote_bytes_read: int("remote_bytes_read")?,
            local_bytes_read: int("local_bytes_read")?,
            shuffle_write_bytes: int("shuffle_write_bytes")?,
            records_read: int("records_read")?,
            records: int("records")?,
            input_cached_partitions: int("input_cached_partitions")?,
            failed_tasks: int("failed_tasks")?,
            stage_attempts: int("stage_attempts")?,
            gc_ms: ms("gc_ms")?,
            generate_ms: ms("generate_ms")?,
            ordered: v.get("ordered").and_then(Value::as_bool).ok_or("result without \"ordered\"")?,
            checksum: text("checksum")?,
            app_s,
            executor_peaks: ExecutorPeaks::default(),
            executor_threads: ExecutorThreads::default(),
            raw: v.clone(),
        })
    }

    /// What makes a run wrong whatever its speed: records lost or invented, a sort out of order.
    pub fn problems(&self, workload: &Workload) -> Vec<String> {
        let mut problems = Vec::new();
        if self.records != workload.records() {
            problems.push(format!("{} records at the reducers, expected {}", self.records, workload.records()));
        }
        if self.records_read != workload.records() {
            problems.push(format!("{} shuffle records read, expected {}", self.records_read, workload.records()));
        }
        if !self.ordered {
            problems.push("the sorted output is out of order".into());
        }
        problems
    }
}

/// Medians over a configuration's successful runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Medians {
    pub runs: usize,
    pub job_ms: f64,
    pub map_stage_ms: f64,
    pub reduce_stage_ms: f64,
    pub fetch_wait_ms: f64,
    pub remote_bytes_read: f64,
    pub local_bytes_read: f64,
    pub shuffle_write_bytes: f64,
    pub app_s: f64,
    /// Over the runs whose executors were seen: the largest executor's peak RSS.
    pub executor_peak_rss_mib: Option<f64>,
    /// Over the runs whose executors' threads were seen: their CPU seconds, one per [`CPU_COLUMNS`].
    pub executor_cpu_s: [Option<f64>; CPU_COLUMNS.len()],
}

impl Medians {
    pub fn of(results: &[AppResult]) -> Option<Medians> {
        let m = |f: fn(&AppResult) -> f64| median(&results.iter().map(f).collect::<Vec<_>>());
        Some(Medians {
            runs: results.len(),
            job_ms: m(|r| r.job_ms)?,
            map_stage_ms: m(|r| r.map_stage_ms)?,
            reduce_stage_ms: m(|r| r.reduce_stage_ms)?,
            fetch_wait_ms: m(|r| r.fetch_wait_ms)?,
            remote_bytes_read: m(|r| r.remote_bytes_read as f64)?,
            local_bytes_read: m(|r| r.local_bytes_read as f64)?,
            shuffle_write_bytes: m(|r| r.shuffle_write_bytes as f64)?,
            app_s: m(|r| r.app_s)?,
            executor_peak_rss_mib: median(&results.iter().filter_map(|r| r.executor_peaks.max_mib()).collect::<Vec<_>>()),
            executor_cpu_s: CPU_COLUMNS
                .map(|(_, role)| median(&results.iter().filter_map(|r| r.executor_threads.cpu_s(role)).collect::<Vec<_>>())),
        })
    }
}

/// Speed ratio of a time: reference / variant (> 1: the variant is faster). None unless both are positive.
pub fn time_ratio(reference: f64, variant: f64) -> Option<f64> {
    (reference > 0.0 && variant > 0.0).then(|| reference / variant)
}

/// A plugin configuration's executor memory against the target "no more than vanilla plus the
/// buffer cap": the medians of the largest executor's peak RSS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryTarget {
    /// This configuration's minus vanilla's.
    pub delta_mib: f64,
    pub buffer_cap_mib: f64,
}

impl MemoryTarget {
    pub fn within(&self) -> bool {
        self.delta_mib <= self.buffer_cap_mib
    }

    pub fn describe(&self) -> String {
        format!(
            "executor peak RSS: {:+.1} MiB vs vanilla (cap {} MiB): {} vanilla + cap",
            self.delta_mib,
            self.buffer_cap_mib,
            if self.within() { "within" } else { "above" }
        )
    }
}

/// The memory target of a plugin configuration in a test, or why it cannot be judged.
pub fn memory_target(result: &TestResult, run: &SparkRun, config: SparkConfig) -> Result<MemoryTarget, String> {
    debug_assert!(config.uses_plugin(), "vanilla is the reference");
    let buffer_cap_mib = bytes_mib(run.buffer_cap_bytes(config)?);
    let rss = |c: SparkConfig| result.config(c).and_then(ConfigRuns::medians).and_then(|m| m.executor_peak_rss_mib);
    let vanilla_mib = rss(SparkConfig::Vanilla).ok_or("no executor peak RSS of vanilla to compare")?;
    let config_mib = rss(config).ok_or("no executor peak RSS measured")?;
    Ok(MemoryTarget { delta_mib: config_mib - vanilla_mib, buffer_cap_mib })
}

/// The runs of one configuration in one test.
#[derive(Debug, Clone)]
pub struct ConfigRuns {
    pub config: SparkConfig,
    pub results: Vec<AppResult>,
    /// The first failure; the configuration's later runs are skipped.
    pub error: Option<String>,
}

impl ConfigRuns {
    pub fn medians(&self) -> Option<Medians> {
        Medians::of(&self.results)
    }
}

/// One test's outcome over every configuration.
#[derive(Debug, Clone)]
pub struct TestResult {
    pub test: SparkTest,
    pub configs: Vec<ConfigRuns>,
}

impl TestResult {
    pub fn config(&self, config: SparkConfig) -> Option<&ConfigRuns> {
        self.configs.iter().find(|c| c.config == config)
    }

    /// The distinct checksums of all successful runs, with the runs that produced each.
    pub fn checksums(&self) -> Vec<(String, Vec<String>)> {
        let mut seen: Vec<(String, Vec<String>)> = Vec::new();
        for c in &self.configs {
            for (i, r) in c.results.iter().enumerate() {
                let run = format!("{} #{}", c.config.name(), i + 1);
                match seen.iter_mut().find(|(sum, _)| *sum == r.checksum) {
                    Some((_, runs)) => runs.push(run),
                    None => seen.push((r.checksum.clone(), vec![run])),
                }
            }
        }
        seen
    }

    /// Everything that fails the run: failed applications, differing checksums, wrong record counts.
    pub fn failures(&self, workload: &Workload) -> Vec<String> {
        let mut failures = Vec::new();
        for c in &self.configs {
            if let Some(e) = &c.error {
                failures.push(format!("{} {}: {}", self.test.name(), c.config.name(), first_line(e)));
            }
            for (i, r) in c.results.iter().enumerate() {
                for p in r.problems(workload) {
                    failures.push(format!("{} {} run {}: {p}", self.test.name(), c.config.name(), i + 1));
                }
            }
        }
        let sums = self.checksums();
        if sums.len() > 1 {
            let listed: Vec<String> = sums.iter().map(|(sum, runs)| format!("{sum} ({})", runs.join(", "))).collect();
            failures.push(format!("{}: checksums differ: {}", self.test.name(), listed.join(" vs ")));
        }
        failures
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Runs every test: for each test, `repeats` rounds of every configuration in turn.
pub fn run_spark(run: &SparkRun) -> Result<Vec<TestResult>, String> {
    run.validate()?;
    run.check_files()?;
    prepare_log_dir(&run.log_dir)?;
    let mut progress = Progress::new(run.progress, run.tests.len() * run.configs.len() * run.repeats);
    let mut results = Vec::new();
    for &test in &run.tests {
        let mut configs: Vec<ConfigRuns> =
            run.configs.iter().map(|&config| ConfigRuns { config, results: Vec::new(), error: None }).collect();
        for repeat in 0..run.repeats {
            for runs in configs.iter_mut() {
                let label = format!("{} {} run {}/{}", test.name(), runs.config.name(), repeat + 1, run.repeats);
                progress.begin(&label);
                if runs.error.is_some() {
                    progress.end("skipped (failed before)");
                    continue;
                }
                match run_app(run, test, runs.config, repeat) {
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

/// Creates the log directory and removes the application directories of earlier runs from it
/// (nothing else: `--log-dir` may name any directory).
fn prepare_log_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let is_ours = entry.file_name().to_str().is_some_and(is_app_dir_name);
        if is_ours && entry.path().is_dir() {
            std::fs::remove_dir_all(entry.path()).map_err(|e| format!("cannot remove {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Whether `name` is `<test>-<config>-<run>`, as [`app_dir`] makes them.
pub fn is_app_dir_name(name: &str) -> bool {
    SparkTest::ALL.iter().any(|t| {
        let Some(rest) = name.strip_prefix(t.name()).and_then(|r| r.strip_prefix('-')) else { return false };
        SparkConfig::ALL.iter().any(|c| {
            rest.strip_prefix(c.name())
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

/// The directory of one application: `driver.stdout`, `driver.stderr`, `spark-home/` (a view of the
/// Spark home whose `work/` gets the executors' logs) and `local/` (shuffle files, removed after).
pub fn app_dir(log_dir: &Path, test: SparkTest, config: SparkConfig, repeat: usize) -> PathBuf {
    log_dir.join(format!("{}-{}-{}", test.name(), config.name(), repeat + 1))
}

/// Whether a /proc cmdline is one of the executors of the application in `app_dir`: Spark's executor
/// class is one argument and another names a path under the application's directory (the class
/// path has `<app_dir>/spark-home/jars/*`). `app_dir` has no trailing slash; one is required after
/// it, so `groupby-plugin-1` does not match `groupby-plugin-12`'s executors.
pub fn is_executor_of(cmdline: &[u8], app_dir: &[u8]) -> bool {
    debug_assert!(!app_dir.is_empty() && !app_dir.ends_with(b"/"));
    // Most processes fail the first, cheaper test.
    proc_mem::cmdline_args(cmdline).any(|arg| arg == EXECUTOR_MAIN_CLASS.as_bytes())
        && proc_mem::cmdline_args(cmdline)
            .any(|arg| arg.windows(app_dir.len() + 1).any(|w| w.starts_with(app_dir) && w[app_dir.len()] == b'/'))
}

/// The peak resident set of each executor process of one application (`VmHWM`, KiB), kept across
/// samples: an executor may exit between two samples, so each sample reads the kernel's peak.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorPeaks {
    /// (pid, peak KiB), in the order first seen; at most [`EXECUTOR_PROCESSES_MAX`].
    pub peak_kib: Vec<(u32, u64)>,
    pub samples: u64,
    /// Time spent sampling, to show that it stays cheap.
    pub sample_us_total: u64,
    /// The executors found by the last sample.
    pub live: Vec<u32>,
}

impl ExecutorPeaks {
    /// Keeps the larger of a process's known peak and `peak_kib`.
    pub fn record(&mut self, pid: u32, peak_kib: u64) {
        if let Some((_, known)) = self.peak_kib.iter_mut().find(|(p, _)| *p == pid) {
            *known = (*known).max(peak_kib);
        } else if self.peak_kib.len() < EXECUTOR_PROCESSES_MAX {
            self.peak_kib.push((pid, peak_kib));
        }
    }

    /// One scan of /proc: every process whose cmdline makes it an executor of `app_dir`.
    /// `cmdline` is a buffer reused between samples.
    pub fn sample(&mut self, app_dir: &[u8], cmdline: &mut Vec<u8>) {
        let started = Instant::now();
        self.live.clear();
        for pid in proc_mem::pids() {
            if proc_mem::read_cmdline(pid, cmdline) && is_executor_of(cmdline, app_dir) {
                if let Some(kib) = proc_mem::peak_rss_kib(pid) {
                    self.record(pid, kib);
                    self.live.push(pid);
                }
            }
        }
        self.samples += 1;
        self.sample_us_total += started.elapsed().as_micros() as u64;
    }

    /// The largest executor's peak, MiB; None when no executor was seen.
    pub fn max_mib(&self) -> Option<f64> {
        self.peak_kib.iter().map(|&(_, kib)| kib).max().map(|kib| kib as f64 / 1024.0)
    }

    /// The executors' peaks added up, MiB (not a peak of the sum: the peaks may fall at different times).
    pub fn sum_mib(&self) -> Option<f64> {
        (!self.peak_kib.is_empty()).then(|| self.peak_kib.iter().map(|&(_, kib)| kib).sum::<u64>() as f64 / 1024.0)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "executor_peak_rss_mib": self.max_mib(),
            "executor_peak_rss_sum_mib": self.sum_mib(),
            "executor_peaks": self.peak_kib.iter()
                .map(|&(pid, kib)| json!({"pid": pid, "peak_rss_mib": kib as f64 / 1024.0}))
                .collect::<Vec<_>>(),
            "rss_samples": self.samples,
            "rss_sample_us_mean": (self.samples > 0).then(|| self.sample_us_total / self.samples),
        })
    }
}

/// What an executor thread works on, told by its name (`comm`, cut to 15 bytes): to show where an
/// executor's CPU goes, and how much of it the shuffle's transport takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadRole {
    /// Spark's task threads ("Executor task launch worker ..."): map and reduce work, including
    /// reading shuffle blocks, deserializing, aggregating and sorting.
    Tasks,
    /// The shuffle's transport threads: Netty's `shuffle-client-*` and `shuffle-server-*` for
    /// vanilla Spark; the fabric's progress and handler threads, the plugin's Java fabric threads and
    /// its prefetcher.
    Transport,
    /// The JVM's JIT compilers.
    Jit,
    /// The garbage collector and the VM thread.
    Gc,
    Other,
}

impl ThreadRole {
    pub const ALL: [ThreadRole; 5] = [ThreadRole::Tasks, ThreadRole::Transport, ThreadRole::Jit, ThreadRole::Gc, ThreadRole::Other];

    pub fn of(name: &str) -> ThreadRole {
        const TRANSPORT: [&str; 6] =
            ["shuffle-client-", "shuffle-server-", "fabric-progress", "fabric-handler", "slipstream-fabr", "slipstream-pref"];
        if name.starts_with("Executor task") {
            ThreadRole::Tasks
        } else if TRANSPORT.iter().any(|p| name.starts_with(p)) {
            ThreadRole::Transport
        } else if name.contains("CompilerThre") {
            ThreadRole::Jit
        } else if name.starts_with("GC Thread") || name.starts_with("G1 ") || name == "VM Thread" {
            ThreadRole::Gc
        } else {
            ThreadRole::Other
        }
    }
}

/// The columns of the executors' CPU time, in the table and the JSON: all threads, then each role.
pub const CPU_COLUMNS: [(&str, Option<ThreadRole>); 1 + ThreadRole::ALL.len()] = [
    ("total", None),
    ("tasks", Some(ThreadRole::Tasks)),
    ("transport", Some(ThreadRole::Transport)),
    ("jit", Some(ThreadRole::Jit)),
    ("gc", Some(ThreadRole::Gc)),
    ("other", Some(ThreadRole::Other)),
];

/// `{"total": s, "tasks": s, ...}`: CPU seconds, one per [`CPU_COLUMNS`].
fn cpu_columns_json(seconds: [Option<f64>; CPU_COLUMNS.len()]) -> Value {
    Value::Object(CPU_COLUMNS.iter().zip(seconds).map(|((name, _), s)| (name.to_string(), json!(s))).collect())
}

/// The CPU time of each thread of one application's executors over their whole lives (generation,
/// map and reduce stages, start and shutdown), kept across samples: the last reading of each
/// thread counts, so a thread that ends between two samples loses what it used since the previous one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorThreads {
    /// (pid, tid) -> (role, CPU ticks); at most [`EXECUTOR_THREADS_MAX`] threads.
    pub ticks: HashMap<(u32, u32), (ThreadRole, u64)>,
    pub ticks_per_s: u64,
}

impl ExecutorThreads {
    pub fn record(&mut self, pid: u32, tid: u32, name: &str, ticks: u64) {
        if let Some(known) = self.ticks.get_mut(&(pid, tid)) {
            known.1 = known.1.max(ticks);
        } else if self.ticks.len() < EXECUTOR_THREADS_MAX {
            self.ticks.insert((pid, tid), (ThreadRole::of(name), ticks));
        }
    }

    /// Reads the threads of the executors `pids`; `stat` is a buffer reused between samples.
    pub fn sample(&mut self, pids: &[u32], stat: &mut String) {
        if self.ticks_per_s == 0 {
            self.ticks_per_s = proc_mem::clock_ticks_per_s();
        }
        for &pid in pids {
            proc_mem::for_each_thread_cpu(pid, stat, |tid, name, ticks| self.record(pid, tid, name, ticks));
        }
    }

    /// CPU seconds of the threads of `role` (all roles: None), over every executor.
    pub fn cpu_s(&self, role: Option<ThreadRole>) -> Option<f64> {
        if self.ticks.is_empty() || self.ticks_per_s == 0 {
            return None;
        }
        let ticks: u64 = self.ticks.values().filter(|(r, _)| role.is_none_or(|role| *r == role)).map(|(_, t)| t).sum();
        Some(ticks as f64 / self.ticks_per_s as f64)
    }

    pub fn to_json(&self) -> Value {
        let seconds = CPU_COLUMNS.map(|(_, role)| self.cpu_s(role));
        json!({"executor_cpu_s": cpu_columns_json(seconds), "executor_threads": self.ticks.len()})
    }
}

fn run_app(run: &SparkRun, test: SparkTest, config: SparkConfig, repeat: usize) -> Result<AppResult, String> {
    let dir = app_dir(&run.log_dir, test, config, repeat);
    let home = dir.join("spark-home");
    let local = dir.join("local");
    for d in [&home, &local] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    // The workers write the executors' logs to SPARK_HOME/work: a view of the Spark home keeps them
    // here, and the shared Spark home clean.
    let jars = run.spark_home.join("jars");
    std::os::unix::fs::symlink(&jars, home.join("jars")).map_err(|e| format!("cannot link {}: {e}", jars.display()))?;
    let stderr_path = dir.join("driver.stderr");
    let stderr_file = std::fs::File::create(&stderr_path).map_err(|e| format!("{}: {e}", stderr_path.display()))?;
    let mut cmd = Command::new(&run.java);
    cmd.args(run.java_args(test, config))
        .current_dir(&dir)
        .env("SPARK_HOME", &home)
        .env("SPARK_SCALA_VERSION", "2.13")
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env("SPARK_LOCAL_DIRS", &local)
        .env_remove("SPARK_CONF_DIR")
        .stderr(Stdio::from(stderr_file));
    // The driver leads a process group of its own, which its executors (started by the workers in
    // the driver's JVM) join: killing the group leaves no executor behind.
    // SAFETY: setpgid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let name = format!("spark {} {}", test.name(), config.name());
    let started = Instant::now();
    let deadline = started + run.timeout;
    let mut driver = ChildGuard::spawn(&name, cmd, true)?;
    let group = driver.pid() as libc::pid_t;
    let mut stdout = String::new();
    let mut timed_out = false;
    let mut peaks = ExecutorPeaks::default();
    let mut threads = ExecutorThreads::default();
    let mut cmdline = Vec::new();
    let mut stat = String::new();
    let mut sample_next = started;
    loop {
        if Instant::now() >= sample_next {
            peaks.sample(dir.as_os_str().as_bytes(), &mut cmdline);
            threads.sample(&peaks.live, &mut stat);
            sample_next = Instant::now() + EXECUTOR_SAMPLE_INTERVAL;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            timed_out = true;
            break;
        }
        match driver.next_line(left.min(sample_next.saturating_duration_since(Instant::now()))) {
            Ok(Some(line)) => {
                stdout.push_str(&line);
                stdout.push('\n');
            }
            Ok(None) => {}
            Err(_) => break, // stdout closed: the driver is exiting
        }
    }
    // The executors may still be running (or have grown since the last sample) as the driver exits.
    peaks.sample(dir.as_os_str().as_bytes(), &mut cmdline);
    threads.sample(&peaks.live, &mut stat);
    let status = if timed_out {
        Err(format!("{name} did not finish within {:?}; killed", run.timeout))
    } else {
        driver.wait_timeout(deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(5)))
    };
    let app_s = started.elapsed().as_secs_f64();
    // SAFETY: kill(2) on the process group our child leads; ESRCH when it is empty already.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    drop(driver);
    let _ = std::fs::write(dir.join("driver.stdout"), &stdout);
    let _ = std::fs::remove_dir_all(&local);
    let outcome = status.and_then(|status| {
        if !status.success() {
            return Err(format!("{name}: the driver exited with {status}"));
        }
        let mut result = AppResult::from_json(&parse_result_line(&stdout)?, app_s)?;
        result.executor_peaks = peaks;
        result.executor_threads = threads;
        Ok(result)
    });
    outcome.map_err(|e| format!("{e}\n{}", failure_logs(&dir)))
}

/// The tails of the driver's and the executors' stderr, for a failure's message.
fn failure_logs(dir: &Path) -> String {
    let mut out = format!("logs in {}", dir.display());
    let mut show = |path: &Path, lines_max: usize| {
        let Ok(text) = std::fs::read_to_string(path) else { return };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let _ = write!(out, "\n--- {} (last {} of {} lines)", path.display(), lines_max.min(lines.len()), lines.len());
        for line in &lines[lines.len().saturating_sub(lines_max)..] {
            let _ = write!(out, "\n  {line}");
        }
    };
    show(&dir.join("driver.stderr"), DRIVER_LOG_LINES_MAX);
    for stderr in executor_logs(&dir.join("spark-home").join("work")) {
        show(&stderr, EXECUTOR_LOG_LINES_MAX);
    }
    out
}

/// `work/app-*/N/stderr`, sorted.
fn executor_logs(work: &Path) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for app in std::fs::read_dir(work).into_iter().flatten().flatten() {
        for executor in std::fs::read_dir(app.path()).into_iter().flatten().flatten() {
            let stderr = executor.path().join("stderr");
            if stderr.is_file() {
                logs.push(stderr);
            }
        }
    }
    logs.sort();
    logs
}

/// `java -version`'s first line (it prints on stderr), for the header.
pub fn java_version(java: &Path) -> String {
    let mut cmd = Command::new(java);
    cmd.arg("-version");
    match run_captured("java -version", cmd, JAVA_VERSION_TIMEOUT) {
        Ok(out) => first_line(if out.stderr.trim().is_empty() { &out.stdout } else { &out.stderr }).trim().to_string(),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Below this share of the job, fetch wait ratios compare noise.
pub const FETCH_WAIT_SHARE_MIN: f64 = 0.01;

/// A warning when every configuration's fetch wait is a sliver of its job.
pub fn small_fetch_wait_note(medians: &[Medians]) -> Option<String> {
    let small = !medians.is_empty() && medians.iter().all(|m| m.fetch_wait_ms < FETCH_WAIT_SHARE_MIN * m.job_ms);
    small.then(|| {
        format!(
            "fetch wait is under {:.0} % of the job in every configuration: its ratios compare milliseconds",
            FETCH_WAIT_SHARE_MIN * 100.0
        )
    })
}

fn seconds(ms: f64) -> String {
    format!("{:.2}", ms / 1e3)
}

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / (1u64 << 20) as f64)
}

fn bytes_mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map(format_ratio).unwrap_or_else(|| "-".into())
}

/// The table of one test: medians per configuration, ratios, per-run job times, checksums, failures.
pub fn render_test(result: &TestResult, run: &SparkRun, machine: &Machine, java: &str) -> String {
    let w = &run.workload;
    let mut out = String::new();
    let spark = result
        .configs
        .iter()
        .flat_map(|c| c.results.first())
        .map(|r| r.spark_version.clone())
        .next()
        .unwrap_or_else(|| "?".into());
    let test_name = match result.test {
        SparkTest::GroupBy => "GroupByTest",
        SparkTest::SortBy => "SortByTest",
    };
    let _ = writeln!(
        out,
        "# ohb spark {}: OHB's {test_name} on Spark {spark} ({}), {} ({EXECUTORS} executors x 1 core, {} MiB each, separate JVMs)",
        result.test.name(),
        run.spark_home.display(),
        run.master(),
        run.executor_memory_mib
    );
    let _ = writeln!(out, "# machine: {}; {java}", machine.describe());
    let _ = writeln!(
        out,
        "# data: {} mappers x {} pairs x {} B values = {} MiB, {} reducers, seed {}; generated in the map tasks, cached and counted before the measured job",
        w.mappers,
        w.pairs_per_mapper,
        w.value_bytes,
        mib(w.value_bytes_total() as f64),
        w.reducers,
        run.seed
    );
    let _ = writeln!(
        out,
        "# measured: {} + one checksum action; job = System.nanoTime around it in the driver (no JVM or context start, no generation)",
        result.test.job(w.reducers)
    );
    let _ = writeln!(
        out,
        "# medians of {} run(s) per configuration, interleaved; every configuration: Kryo serializer, spark.shuffle.readHostLocalDisk=false",
        run.repeats
    );
    for c in &result.configs {
        let _ = writeln!(out, "#   {:<10} {}", c.config.name(), c.config.describe());
    }
    let _ = writeln!(
        out,
        "\n{:<10} | {:>5} | {:>7} | {:>8} | {:>6} | {:>10} | {:>10} | {:>9} | {:>11} | {:>5} | {:>12} | checksum",
        "config", "runs", "job s", "reduce s", "map s", "fetch wait", "remote MiB", "local MiB", "written MiB", "app s", "exec RSS MiB"
    );
    for c in &result.configs {
        match c.medians() {
            Some(m) => {
                let sums: Vec<&str> = {
                    let mut s: Vec<&str> = c.results.iter().map(|r| r.checksum.as_str()).collect();
                    s.dedup();
                    s
                };
                let _ = writeln!(
                    out,
                    "{:<10} | {:>5} | {:>7} | {:>8} | {:>6} | {:>10} | {:>10} | {:>9} | {:>11} | {:>5.0} | {:>12} | {}",
                    c.config.name(),
                    m.runs,
                    seconds(m.job_ms),
                    seconds(m.reduce_stage_ms),
                    seconds(m.map_stage_ms),
                    seconds(m.fetch_wait_ms),
                    mib(m.remote_bytes_read),
                    mib(m.local_bytes_read),
                    mib(m.shuffle_write_bytes),
                    m.app_s,
                    m.executor_peak_rss_mib.map_or_else(|| "-".into(), |x| format!("{x:.1}")),
                    sums.join(",")
                );
            }
            None => {
                let _ = writeln!(out, "{:<10} | FAILED: {}", c.config.name(), c.error.as_deref().map(first_line).unwrap_or("no run"));
            }
        }
    }
    let _ = writeln!(
        out,
        "(fetch wait: seconds, summed over reduce tasks; app s: java start to exit, as seen by ohb; exec RSS: the largest \
         executor's peak resident set, VmHWM sampled every {} ms)",
        EXECUTOR_SAMPLE_INTERVAL.as_millis()
    );
    let vanilla = result.config(SparkConfig::Vanilla).and_then(ConfigRuns::medians);
    let others: Vec<(SparkConfig, Medians)> = result
        .configs
        .iter()
        .filter(|c| c.config != SparkConfig::Vanilla)
        .filter_map(|c| Some((c.config, c.medians()?)))
        .collect();
    if let (Some(v), false) = (vanilla, others.is_empty()) {
        let _ = writeln!(out, "\nratios vanilla / config (> 1.00x: the config is faster than vanilla Spark):");
        let _ = writeln!(out, "{:<10} | {:>7} | {:>12} | {:>10}", "config", "job", "reduce stage", "fetch wait");
        for (config, m) in &others {
            let _ = writeln!(
                out,
                "{:<10} | {:>7} | {:>12} | {:>10}",
                config.name(),
                ratio_cell(time_ratio(v.job_ms, m.job_ms)),
                ratio_cell(time_ratio(v.reduce_stage_ms, m.reduce_stage_ms)),
                ratio_cell(time_ratio(v.fetch_wait_ms, m.fetch_wait_ms))
            );
        }
    }
    let plugins: Vec<SparkConfig> =
        result.configs.iter().filter(|c| c.config.uses_plugin() && !c.results.is_empty()).map(|c| c.config).collect();
    if !plugins.is_empty() {
        let _ = writeln!(out, "\nexecutor memory, target: no more than vanilla + {BUFFER_CAP_KEY} (off-heap, counted in RSS):");
        for config in plugins {
            let line = match memory_target(result, run, config) {
                Ok(target) => target.describe(),
                Err(e) => format!("executor peak RSS: not judged: {e}"),
            };
            let _ = writeln!(out, "  {:<10} {line}", config.name());
        }
    }
    if result.configs.iter().filter_map(ConfigRuns::medians).any(|m| m.executor_cpu_s[0].is_some()) {
        let _ = writeln!(
            out,
            "\nexecutor CPU seconds by thread, both executors over their whole lives (generation, map, reduce), medians:"
        );
        // The total's column is narrower than the roles'.
        let width = |column: usize| if column == 0 { 7 } else { 9 };
        let _ = write!(out, "{:<10}", "config");
        for (column, (name, _)) in CPU_COLUMNS.iter().enumerate() {
            let _ = write!(out, " | {name:>w$}", w = width(column));
        }
        let _ = writeln!(out);
        for c in &result.configs {
            let Some(m) = c.medians() else { continue };
            let _ = write!(out, "{:<10}", c.config.name());
            for (column, cpu) in m.executor_cpu_s.iter().enumerate() {
                let cell = cpu.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
                let _ = write!(out, " | {cell:>w$}", w = width(column));
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "(transport: Netty's shuffle-client/server threads for vanilla; the fabric's progress and handler threads and the \
             plugin's fabric and prefetch threads; fetching, deserializing and aggregating run in the task threads)"
        );
    }
    let all: Vec<Medians> = result.configs.iter().filter_map(ConfigRuns::medians).collect();
    if let Some(note) = small_fetch_wait_note(&all) {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "\njob s per run:");
    for c in &result.configs {
        let times: Vec<String> = c.results.iter().map(|r| seconds(r.job_ms)).collect();
        let failed = if c.error.is_some() { " (then failed)" } else { "" };
        let _ = writeln!(out, "  {:<10} {}{failed}", c.config.name(), times.join(" "));
    }
    let notes: Vec<String> = result
        .configs
        .iter()
        .flat_map(|c| c.results.iter().enumerate().map(move |(i, r)| (c.config, i, r)))
        .filter_map(|(config, i, r)| {
            let mut why = Vec::new();
            if r.failed_tasks > 0 {
                why.push(format!("{} failed task(s)", r.failed_tasks));
            }
            if r.input_cached_partitions < w.mappers as u64 {
                why.push(format!("only {} of {} input partitions cached (the rest recomputed in the job)", r.input_cached_partitions, w.mappers));
            }
            (!why.is_empty()).then(|| format!("{} run {}: {}", config.name(), i + 1, why.join(", ")))
        })
        .collect();
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
    let sums = result.checksums();
    let failures = result.failures(w);
    match sums.len() {
        0 => {}
        1 => {
            let runs: usize = sums[0].1.len();
            let _ = writeln!(out, "checksums: equal in all {runs} successful run(s): {}", sums[0].0);
        }
        _ => {}
    }
    for f in &failures {
        let _ = writeln!(out, "FAIL: {f}");
    }
    out
}

pub fn test_json(result: &TestResult, run: &SparkRun, machine: &Machine, java: &str) -> Value {
    let w = &run.workload;
    let medians_json = |m: Option<Medians>| {
        m.map(|m| {
            json!({"runs": m.runs, "job_ms": m.job_ms, "map_stage_ms": m.map_stage_ms, "reduce_stage_ms": m.reduce_stage_ms,
                   "fetch_wait_ms": m.fetch_wait_ms, "remote_bytes_read": m.remote_bytes_read,
                   "local_bytes_read": m.local_bytes_read, "shuffle_write_bytes": m.shuffle_write_bytes, "app_s": m.app_s,
                   "executor_peak_rss_mib": m.executor_peak_rss_mib,
                   "executor_cpu_s": cpu_columns_json(m.executor_cpu_s)})
        })
    };
    let vanilla = result.config(SparkConfig::Vanilla).and_then(ConfigRuns::medians);
    let configs: Vec<Value> = result
        .configs
        .iter()
        .map(|c| {
            let m = c.medians();
            let ratios = match (vanilla, m, c.config) {
                (Some(v), Some(m), config) if config != SparkConfig::Vanilla => json!({
                    "job": time_ratio(v.job_ms, m.job_ms),
                    "reduce_stage": time_ratio(v.reduce_stage_ms, m.reduce_stage_ms),
                    "fetch_wait": time_ratio(v.fetch_wait_ms, m.fetch_wait_ms),
                }),
                _ => Value::Null,
            };
            let conf: serde_json::Map<String, Value> =
                run.spark_conf(c.config).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            let target = c.config.uses_plugin().then(|| memory_target(result, run, c.config));
            let target_ok = target.as_ref().and_then(|t| t.as_ref().ok());
            let buffer_cap_mib = c.config.uses_plugin().then(|| run.buffer_cap_bytes(c.config).ok()).flatten().map(bytes_mib);
            json!({
                "name": c.config.name(),
                "conf": conf,
                "median": medians_json(m),
                "vanilla_over_this": ratios,
                "executor_rss_delta_mib": target_ok.map(|t| t.delta_mib),
                "buffer_cap_mib": buffer_cap_mib,
                "within_memory_target": target_ok.map(MemoryTarget::within),
                "memory_target_note": target.and_then(Result::err),
                "runs": c.results.iter().map(|r| {
                    let mut v = r.raw.clone();
                    v["app_s"] = json!(r.app_s);
                    for sampled in [r.executor_peaks.to_json(), r.executor_threads.to_json()] {
                        if let (Some(run_json), Value::Object(sampled)) = (v.as_object_mut(), sampled) {
                            run_json.extend(sampled);
                        }
                    }
                    v
                }).collect::<Vec<_>>(),
                "error": c.error,
            })
        })
        .collect();
    json!({
        "bench": format!("spark {}", result.test.name()),
        "machine": machine.to_json(),
        "java": java,
        "spark_home": run.spark_home.display().to_string(),
        "master": run.master(),
        "executor_memory_mib": run.executor_memory_mib,
        "workload": {"mappers": w.mappers, "pairs_per_mapper": w.pairs_per_mapper, "value_bytes": w.value_bytes,
                     "reducers": w.reducers, "seed": run.seed},
        "repeats": run.repeats,
        "units": {"time": "ms (app_s: seconds)", "fetch_wait_ms": "summed over reduce tasks",
                  "ratios": "vanilla / this config, > 1: faster",
                  "executor_peak_rss_mib": format!("the largest executor's VmHWM in MiB, sampled every {} ms",
                                                   EXECUTOR_SAMPLE_INTERVAL.as_millis()),
                  "executor_cpu_s": "CPU seconds of the executors' threads over their whole lives, by role (ThreadRole)",
                  "executor_rss_delta_mib": "this config's median minus vanilla's; within_memory_target: delta <= buffer_cap_mib"},
        "configs": configs,
        "checksums_equal": result.checksums().len() <= 1,
        "failures": result.failures(w),
    })
}

/// `4g`, `4096m`, `4096` (MiB) -> MiB.
pub fn parse_memory_mib(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t.as_str(), ""),
    };
    let n: u64 = digits.parse().map_err(|_| format!("memory '{text}' must start with a number"))?;
    let factor = match unit.trim_end_matches(['b', 'i']) {
        "" | "m" => 1,
        "g" => 1024,
        other => return Err(format!("memory '{text}': unknown unit '{other}' (use m or g)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("memory '{text}' overflows"))
}

/// A size as Spark's `getSizeAsBytes` reads it: digits and an optional unit b, k(b), m(b), g(b),
/// t(b), p(b), powers of 1024; no unit means bytes.
pub fn spark_size_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("size '{text}' must start with a whole number"))?;
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        "p" | "pb" => 50,
        other => return Err(format!("size '{text}': unknown unit '{other}'")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("size '{text}' overflows"))
}

/// Spark settings, in order.
pub type ConfPairs = Vec<(String, String)>;

/// Takes every `--conf k=v` (or `--conf=k=v`) out of `argv`: the generic parser allows a flag once.
pub fn split_conf_flags(argv: &[String]) -> Result<(Vec<String>, ConfPairs), String> {
    let mut rest = Vec::new();
    let mut conf = Vec::new();
    let mut words = argv.iter();
    while let Some(word) = words.next() {
        let pair = if word == "--conf" {
            words.next().ok_or("--conf needs key=value")?.clone()
        } else if let Some(inline) = word.strip_prefix("--conf=") {
            inline.to_string()
        } else {
            rest.push(word.clone());
            continue;
        };
        match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => conf.push((k.trim().to_string(), v.to_string())),
            _ => return Err(format!("--conf needs key=value, got '{pair}'")),
        }
    }
    Ok((rest, conf))
}

/// The run a command line describes (nothing started yet).
pub fn run_from_args(test: &str, args: &Args, extra_conf: Vec<(String, String)>) -> Result<SparkRun, String> {
    let tests = match test {
        "all" => SparkTest::ALL.to_vec(),
        other => vec![SparkTest::parse(other).ok_or_else(|| format!("unknown test 'spark {other}' (groupby, sortby or all)"))?],
    };
    let quick = args.switch("quick");
    let defaults = if quick { Workload::QUICK } else { Workload::DEFAULT };
    let mappers = args.number("mappers")?.unwrap_or(defaults.mappers);
    let workload = Workload {
        mappers,
        pairs_per_mapper: args.number("pairs")?.unwrap_or(defaults.pairs_per_mapper),
        value_bytes: match args.value("value-bytes") {
            Some(text) => parse_size(text)?,
            None => defaults.value_bytes,
        },
        // As in Spark's GroupByTest: as many reducers as mappers unless told.
        reducers: args.number("reducers")?.unwrap_or(if args.value("mappers").is_some() { mappers } else { defaults.reducers }),
    };
    let root = find_repo_root();
    let from_root = |relative: &str| root.clone().unwrap_or_else(|| PathBuf::from(".")).join(relative);
    let absolute = |path: PathBuf| -> PathBuf {
        if path.is_absolute() {
            path
        } else {
            std::env::current_dir().map(|d| d.join(&path)).unwrap_or(path)
        }
    };
    let path_flag = |flag: &str, default: &str| absolute(args.value(flag).map(PathBuf::from).unwrap_or_else(|| from_root(default)));
    let log_dir = match args.value("log-dir") {
        Some(p) => absolute(PathBuf::from(p)),
        None if root.is_some() => from_root(LOG_DIR_DEFAULT),
        None => std::env::temp_dir().join("ohb-spark"),
    };
    let run = SparkRun {
        tests,
        configs: match args.value("configs") {
            Some(text) => parse_list(text, "--configs", SparkConfig::parse)?,
            None => SparkConfig::ALL.to_vec(),
        },
        workload,
        executor_memory_mib: match args.value("executor-memory") {
            Some(text) => parse_memory_mib(text)?,
            None if quick => 1024,
            None => 4096,
        },
        repeats: args.number("repeats")?.unwrap_or(if quick { 1 } else { 3 }),
        seed: args.number("seed")?.unwrap_or(42),
        spark_home: path_flag("spark-home", SPARK_HOME_DEFAULT),
        app_jar: path_flag("app-jar", APP_JAR),
        plugin_jar: path_flag("plugin-jar", PLUGIN_JAR),
        java: args.value("java").map(PathBuf::from).unwrap_or_else(crate::jvm::default_java),
        extra_conf,
        timeout: match args.number::<u64>("timeout-s")? {
            Some(s) => Duration::from_secs(s),
            None if quick => APP_TIMEOUT_QUICK,
            None => APP_TIMEOUT_DEFAULT,
        },
        log_dir,
        progress: !args.switch("no-progress"),
    };
    run.validate()?;
    Ok(run)
}

/// `ohb spark groupby|sortby|all [options]`.
pub fn spark_main(argv: &[String]) -> Result<(), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    if matches!(test, "--help" | "-h") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if !matches!(test, "groupby" | "sortby" | "all") {
        return Err(format!("which Spark test? groupby, sortby or all (got '{test}'; see ohb --help)"));
    }
    let (rest, extra_conf) = split_conf_flags(&argv[1..])?;
    let args = Args::parse(&rest, VALUE_FLAGS, SWITCH_FLAGS)?;
    if args.switch("help") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if let Some(word) = args.positional.first() {
        return Err(format!("unexpected argument '{word}'"));
    }
    let run = run_from_args(test, &args, extra_conf)?;
    let started = Instant::now();
    let machine = Machine::detect();
    let java = java_version(&run.java);
    let results = run_spark(&run)?;
    let mut failures = Vec::new();
    let mut jsons = Vec::new();
    for result in &results {
        print!("{}", render_test(result, &run, &machine, &java));
        failures.extend(result.failures(&run.workload));
        let value = test_json(result, &run, &machine, &java);
        if args.value("json").is_none() {
            let path = find_repo_root()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("results")
                .join(format!("ohb-spark-{}.json", result.test.name()));
            write_json(&path, &value)?;
            println!("results: {}", path.display());
        }
        println!();
        jsons.push(value);
    }
    if let Some(path) = args.value("json") {
        let value = if jsons.len() == 1 { jsons.remove(0) } else { json!({"bench": "spark all", "tests": jsons}) };
        write_json(Path::new(path), &value)?;
        println!("results: {path}");
    }
    println!("ohb spark {test}: {:.0} s in all; logs in {}", started.elapsed().as_secs_f64(), run.log_dir.display());
    if !failures.is_empty() {
        return Err(format!("{} failure(s):\n  {}", failures.len(), failures.join("\n  ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn sample_run() -> SparkRun {
        SparkRun {
            tests: SparkTest::ALL.to_vec(),
            configs: SparkConfig::ALL.to_vec(),
            workload: Workload::DEFAULT,
            executor_memory_mib: 4096,
            repeats: 3,
            seed: 42,
            spark_home: PathBuf::from("/repo/build/spark/3.5.8"),
            app_jar: PathBuf::from("/repo/jvm/ohb-spark/target/slipstream-ohb-spark.jar"),
            plugin_jar: PathBuf::from("/repo/jvm/spark/target/slipstream-spark.jar"),
            java: PathBuf::from("java"),
            extra_conf: vec![],
            timeout: APP_TIMEOUT_DEFAULT,
            log_dir: PathBuf::from("/tmp/ohb-spark-test"),
            progress: false,
        }
    }

    fn result_line(checksum: &str, job_ns: u64, fetch_wait_ms: u64) -> String {
        format!(
            "{RESULT_PREFIX}{{\"test\":\"groupby\",\"spark_version\":\"3.5.8\",\"shuffle_manager\":\"sort\",\"job_ns\":{job_ns},\
             \"job_ms\":{},\"map_stage_ms\":8000,\"reduce_stage_ms\":10000,\"other_stages_ms\":0,\"fetch_wait_ms\":{fetch_wait_ms},\
             \"remote_bytes_read\":500,\"local_bytes_read\":500,\"shuffle_write_bytes\":1000,\"records_read\":16,\"records\":16,\
             \"input_cached_partitions\":2,\"failed_tasks\":0,\"stage_attempts\":2,\"gc_ms\":10,\"generate_ms\":100,\
             \"ordered\":true,\"checksum\":\"{checksum}\",\"stages\":[]}}",
            job_ns / 1_000_000
        )
    }

    fn app(checksum: &str, job_ms: u64, fetch_wait_ms: u64) -> AppResult {
        let v = parse_result_line(&result_line(checksum, job_ms * 1_000_000, fetch_wait_ms)).unwrap();
        AppResult::from_json(&v, 30.0).unwrap()
    }

    const TINY: Workload = Workload { mappers: 2, pairs_per_mapper: 8, value_bytes: 10, reducers: 2 };

    #[test]
    fn result_line_is_found_among_logs() {
        let stdout = format!("starting\n{}\nbye\n", result_line("00ff", 18_500_000_000, 1200));
        let r = AppResult::from_json(&parse_result_line(&stdout).unwrap(), 36.0).unwrap();
        assert_eq!(r.job_ms, 18_500.0, "from job_ns, not the rounded job_ms");
        assert_eq!(r.fetch_wait_ms, 1200.0);
        assert_eq!(r.checksum, "00ff");
        assert_eq!(r.app_s, 36.0);
        assert!(r.ordered);
        let e = parse_result_line("no result here\n").unwrap_err();
        assert!(e.contains("OHB_SPARK_RESULT"), "{e}");
        let e = parse_result_line("OHB_SPARK_RESULT {not json\n").unwrap_err();
        assert!(e.contains("JSON"), "{e}");
        let e = AppResult::from_json(&json!({"spark_version": "3.5.8"}), 1.0).unwrap_err();
        assert!(e.starts_with("result without"), "{e}");
    }

    #[test]
    fn medians_and_ratios() {
        let runs = vec![app("a", 20_000, 1000), app("a", 18_000, 3000), app("a", 19_000, 2000)];
        let m = Medians::of(&runs).unwrap();
        assert_eq!(m.runs, 3);
        assert_eq!(m.job_ms, 19_000.0);
        assert_eq!(m.fetch_wait_ms, 2000.0);
        assert!(Medians::of(&[]).is_none());
        assert_eq!(time_ratio(20.0, 10.0), Some(2.0));
        assert_eq!(time_ratio(10.0, 20.0), Some(0.5));
        assert_eq!(time_ratio(10.0, 0.0), None, "a zero fetch wait has no ratio");
        assert_eq!(time_ratio(0.0, 10.0), None);
    }

    #[test]
    fn tiny_fetch_waits_are_flagged() {
        let m = |job_ms: u64, fetch_wait_ms: u64| Medians::of(&[app("a", job_ms, fetch_wait_ms)]).unwrap();
        assert!(small_fetch_wait_note(&[m(8000, 79), m(8000, 10)]).is_some());
        assert!(small_fetch_wait_note(&[m(8000, 79), m(8000, 80)]).is_none());
        assert!(small_fetch_wait_note(&[]).is_none());
    }

    #[test]
    fn differing_checksums_fail_the_run() {
        let mut result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![app("aa", 10, 1), app("aa", 11, 1)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![app("aa", 5, 1), app("aa", 6, 1)], error: None },
            ],
        };
        let records_ok = Workload { mappers: 2, pairs_per_mapper: 8, ..TINY };
        assert!(result.failures(&records_ok).is_empty(), "{:?}", result.failures(&records_ok));
        assert_eq!(result.checksums().len(), 1);
        result.configs[1].results[1].checksum = "bb".into();
        let failures = result.failures(&records_ok);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("checksums differ") && failures[0].contains("plugin #2"), "{failures:?}");
        let rendered = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        assert!(rendered.contains("FAIL: groupby: checksums differ"), "{rendered}");
    }

    #[test]
    fn lost_records_unsorted_output_and_errors_fail_the_run() {
        let mut r = app("aa", 10, 1);
        assert!(r.problems(&TINY).is_empty());
        r.records = 15;
        r.ordered = false;
        let problems = r.problems(&TINY);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let result = TestResult {
            test: SparkTest::SortBy,
            configs: vec![ConfigRuns {
                config: SparkConfig::PluginTcp,
                results: vec![],
                error: Some("ClassNotFoundException: io.slipstream.spark.SlipstreamShuffleManager\nlogs".into()),
            }],
        };
        let failures = result.failures(&TINY);
        assert_eq!(failures, vec!["sortby plugin-tcp: ClassNotFoundException: io.slipstream.spark.SlipstreamShuffleManager"]);
        let rendered = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        assert!(rendered.contains("plugin-tcp | FAILED: ClassNotFoundException"), "{rendered}");
    }

    #[test]
    fn table_shows_medians_and_ratios_against_vanilla() {
        let result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![app("aa", 20_000, 1000)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![app("aa", 10_000, 0)], error: None },
                ConfigRuns { config: SparkConfig::PluginTcp, results: vec![app("aa", 16_000, 500)], error: None },
            ],
        };
        let text = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        assert!(text.contains("local-cluster[2,1,4096]"), "{text}");
        let plugin_row = text.lines().find(|l| l.starts_with("plugin     |") && l.contains('x')).unwrap();
        assert!(plugin_row.contains("2.00x") && plugin_row.trim_end().ends_with('-'), "{plugin_row}");
        let tcp_row = text.lines().find(|l| l.starts_with("plugin-tcp |") && l.contains('x')).unwrap();
        assert!(tcp_row.contains("1.25x") && tcp_row.contains("2.00x"), "{tcp_row}");
        assert!(text.contains("checksums: equal in all 3 successful run(s): aa"), "{text}");
        let v = test_json(&result, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][1]["vanilla_over_this"]["job"], json!(2.0));
        assert_eq!(v["configs"][1]["vanilla_over_this"]["fetch_wait"], Value::Null);
        assert_eq!(v["checksums_equal"], json!(true));
        assert_eq!(v["configs"][2]["conf"]["spark.slipstream.transport"], json!("tcp"));
    }

    #[test]
    fn configurations_differ_only_in_the_shuffle_settings() {
        let run = sample_run();
        let get = |c: SparkConfig, k: &str| run.spark_conf(c).into_iter().rev().find(|(key, _)| key == k).map(|(_, v)| v);
        for c in SparkConfig::ALL {
            assert_eq!(get(c, "spark.shuffle.readHostLocalDisk").as_deref(), Some("false"));
            assert_eq!(get(c, "spark.executor.memory").as_deref(), Some("4096m"));
        }
        assert_eq!(get(SparkConfig::Vanilla, "spark.shuffle.manager"), None);
        assert_eq!(get(SparkConfig::Plugin, "spark.shuffle.manager").as_deref(), Some(PLUGIN_SHUFFLE_MANAGER));
        assert_eq!(get(SparkConfig::Plugin, "spark.executor.extraClassPath").as_deref(), Some("/repo/jvm/spark/target/slipstream-spark.jar"));
        assert_eq!(get(SparkConfig::Plugin, "spark.slipstream.transport"), None);
        assert_eq!(get(SparkConfig::PluginTcp, "spark.slipstream.transport").as_deref(), Some("tcp"));
        assert!(!run.class_path(SparkConfig::Vanilla).contains("slipstream-spark.jar"));
        assert!(run.class_path(SparkConfig::Plugin).ends_with(":/repo/jvm/spark/target/slipstream-spark.jar"));
        let with_extra = SparkRun { extra_conf: vec![("spark.shuffle.readHostLocalDisk".into(), "true".into())], ..sample_run() };
        let last = with_extra.spark_conf(SparkConfig::Vanilla).into_iter().rev().find(|(k, _)| k == "spark.shuffle.readHostLocalDisk");
        assert_eq!(last.unwrap().1, "true", "--conf comes last and wins");
    }

    #[test]
    fn java_command_line() {
        let args = sample_run().java_args(SparkTest::SortBy, SparkConfig::PluginTcp).join(" ");
        assert!(args.starts_with("-Xmx1g -XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=ALL-UNNAMED"), "{args}");
        assert!(args.contains(
            " io.slipstream.ohb.spark.ShuffleBench sortby --mappers 8 --pairs 131072 --value-bytes 1000 --reducers 8 --seed 42 \
             --master local-cluster[2,1,4096] --executors 2 --conf "
        ), "{args}");
        assert!(args.ends_with("--conf spark.slipstream.transport=tcp"), "{args}");
    }

    #[test]
    fn command_line_flags() {
        let (rest, conf) = split_conf_flags(&words("--quick --conf a.b=1 --conf=c=x=y --repeats 2")).unwrap();
        assert_eq!(rest, words("--quick --repeats 2"));
        assert_eq!(conf, vec![("a.b".to_string(), "1".to_string()), ("c".to_string(), "x=y".to_string())]);
        assert!(split_conf_flags(&words("--conf")).is_err());
        assert!(split_conf_flags(&words("--conf novalue")).is_err());
        assert!(split_conf_flags(&words("--conf =1")).is_err());
        assert_eq!(parse_memory_mib("4g").unwrap(), 4096);
        assert_eq!(parse_memory_mib("4096m").unwrap(), 4096);
        assert_eq!(parse_memory_mib("2048").unwrap(), 2048);
        assert_eq!(parse_memory_mib("1GiB").unwrap(), 1024);
        assert!(parse_memory_mib("4t").is_err());
        assert!(parse_memory_mib("g").is_err());

        let args = Args::parse(&words("--quick"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        let run = run_from_args("all", &args, vec![]).unwrap();
        assert_eq!(run.workload, Workload::QUICK);
        assert_eq!((run.repeats, run.executor_memory_mib, run.tests.len(), run.configs.len()), (1, 1024, 2, 3));
        let args = Args::parse(&words("--mappers 4 --configs vanilla,plugin,vanilla --executor-memory 2g"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        let run = run_from_args("sortby", &args, vec![]).unwrap();
        assert_eq!((run.workload.mappers, run.workload.reducers), (4, 4), "reducers follow mappers");
        assert_eq!(run.configs, vec![SparkConfig::Vanilla, SparkConfig::Plugin]);
        assert_eq!(run.tests, vec![SparkTest::SortBy]);
        assert_eq!(run.master(), "local-cluster[2,1,2048]");
        assert!(run.spark_home.is_absolute() && run.app_jar.is_absolute());
        for bad in ["--repeats 0", "--mappers 0", "--configs nope", "--executor-memory 100m", "--reducers 0", "--value-bytes 0"] {
            let args = Args::parse(&words(bad), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
            assert!(run_from_args("groupby", &args, vec![]).is_err(), "{bad}");
        }
        assert!(run_from_args("join", &Args::default(), vec![]).is_err());
    }

    #[test]
    fn missing_files_are_named() {
        let run = SparkRun { spark_home: PathBuf::from("/nonexistent/spark"), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("no Spark home"));
        let home = std::env::temp_dir().join(format!("ohb-spark-unit-{}", std::process::id()));
        std::fs::create_dir_all(home.join("jars")).unwrap();
        let run = SparkRun { spark_home: home.clone(), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("Spark bench jar not found"));
        let jar = home.join("app.jar");
        std::fs::write(&jar, b"").unwrap();
        let run = SparkRun { spark_home: home.clone(), app_jar: jar.clone(), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("--configs vanilla"));
        let run = SparkRun { configs: vec![SparkConfig::Vanilla], ..run };
        assert!(run.check_files().is_ok());
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn only_application_directories_are_removed() {
        assert!(is_app_dir_name("groupby-vanilla-1"));
        assert!(is_app_dir_name("sortby-plugin-tcp-12"));
        assert!(is_app_dir_name(app_dir(Path::new("/x"), SparkTest::SortBy, SparkConfig::Plugin, 2).file_name().unwrap().to_str().unwrap()));
        for other in ["groupby-vanilla-", "groupby-vanilla-x", "sortby-plugin", "notes.txt", "groupby-nope-1", ""] {
            assert!(!is_app_dir_name(other), "{other}");
        }
        let dir = std::env::temp_dir().join(format!("ohb-spark-prepare-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("groupby-plugin-3").join("spark-home")).unwrap();
        std::fs::create_dir_all(dir.join("keep-me")).unwrap();
        prepare_log_dir(&dir).unwrap();
        assert!(!dir.join("groupby-plugin-3").exists());
        assert!(dir.join("keep-me").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An executor's /proc cmdline, as a worker of `groupby-plugin-1` starts it (from its log).
    fn executor_cmdline(app_dir: &str) -> Vec<u8> {
        let args = [
            "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
            "-cp",
            &format!("/work/main/jvm/spark/target/slipstream-spark.jar:{app_dir}/spark-home/conf:{app_dir}/spark-home/jars/*"),
            "-Xmx1024M",
            "-Dspark.driver.port=34387",
            "-XX:+IgnoreUnrecognizedVMOptions",
            "org.apache.spark.executor.CoarseGrainedExecutorBackend",
            "--driver-url",
            "spark://CoarseGrainedScheduler@127.0.0.1:34387",
            "--executor-id",
            "0",
            "--app-id",
            "app-20261121150248-0000",
        ];
        args.iter().flat_map(|a| a.bytes().chain([0])).collect()
    }

    #[test]
    fn executors_of_this_application_are_recognised() {
        let dir = b"/work/main/build/ohb-spark/groupby-plugin-1";
        assert!(is_executor_of(&executor_cmdline("/work/main/build/ohb-spark/groupby-plugin-1"), dir));
        for other in [
            "/work/main/build/ohb-spark/groupby-plugin-12", // a later repeat's directory, whose name extends ours
            "/work/main/build/ohb-spark/groupby-plugin-tcp-1",
            "/elsewhere/build/ohb-spark/groupby-plugin-1x",
        ] {
            assert!(!is_executor_of(&executor_cmdline(other), dir), "{other}");
        }
        // The driver: the application's directory is its working directory, not in its command line; and
        // a process naming the directory without being an executor.
        let driver = b"java\0-Xmx1g\0-cp\0/work/main/build/spark/3.5.8/jars/*\0io.slipstream.ohb.spark.ShuffleBench\0groupby\0";
        assert!(!is_executor_of(driver, dir));
        let tail = b"tail\0-f\0/work/main/build/ohb-spark/groupby-plugin-1/spark-home/work/app-1/0/stderr\0";
        assert!(!is_executor_of(tail, dir));
        let class_as_part =
            b"java\0-Dx=org.apache.spark.executor.CoarseGrainedExecutorBackend\0/work/main/build/ohb-spark/groupby-plugin-1/x\0";
        assert!(!is_executor_of(class_as_part, dir), "the class must be a whole argument");
        assert!(!is_executor_of(b"", dir), "kernel threads and zombies have an empty cmdline");
    }

    #[test]
    fn executor_peaks_keep_each_process_maximum() {
        let mut peaks = ExecutorPeaks::default();
        assert_eq!((peaks.max_mib(), peaks.sum_mib()), (None, None));
        peaks.record(100, 300 * 1024);
        peaks.record(200, 500 * 1024);
        peaks.record(100, 400 * 1024);
        peaks.record(200, 100 * 1024); // VmHWM never falls; a smaller value is an older reading
        assert_eq!(peaks.peak_kib, vec![(100, 400 * 1024), (200, 500 * 1024)]);
        assert_eq!(peaks.max_mib(), Some(500.0));
        assert_eq!(peaks.sum_mib(), Some(900.0));
        for pid in 0..2 * EXECUTOR_PROCESSES_MAX as u32 {
            peaks.record(1000 + pid, 1);
        }
        assert_eq!(peaks.peak_kib.len(), EXECUTOR_PROCESSES_MAX, "at the limit, new processes are not tracked");
        let v = peaks.to_json();
        assert_eq!(v["executor_peak_rss_mib"], json!(500.0));
        assert_eq!(v["executor_peaks"][0], json!({"pid": 100, "peak_rss_mib": 400.0}));
        // A sample over the real /proc finds no executor of a directory that does not exist.
        let mut cmdline = Vec::new();
        let mut none = ExecutorPeaks::default();
        none.sample(b"/nonexistent/ohb-spark/groupby-vanilla-1", &mut cmdline);
        assert_eq!((none.peak_kib.len(), none.samples), (0, 1));
    }

    #[test]
    fn executor_threads_are_told_apart_by_name() {
        // Names as /proc shows them (comm, cut to 15 bytes), seen in executors of both configurations.
        let cases = [
            ("Executor task l", ThreadRole::Tasks),
            ("shuffle-client-", ThreadRole::Transport),
            ("shuffle-server-", ThreadRole::Transport),
            ("fabric-progress", ThreadRole::Transport),
            ("fabric-handler-", ThreadRole::Transport),
            ("slipstream-fabr", ThreadRole::Transport),
            ("slipstream-pref", ThreadRole::Transport),
            ("C2 CompilerThre", ThreadRole::Jit),
            ("C1 CompilerThre", ThreadRole::Jit),
            ("GC Thread#1", ThreadRole::Gc),
            ("G1 Conc#0", ThreadRole::Gc),
            ("G1 Refine#0", ThreadRole::Gc),
            ("VM Thread", ThreadRole::Gc),
            ("VM Periodic Tas", ThreadRole::Other),
            ("rpc-client-3-1", ThreadRole::Other),
            ("java", ThreadRole::Other),
            ("", ThreadRole::Other),
        ];
        for (name, role) in cases {
            assert_eq!(ThreadRole::of(name), role, "{name:?}");
        }
        for role in ThreadRole::ALL {
            assert_eq!(CPU_COLUMNS.iter().filter(|(_, r)| *r == Some(role)).count(), 1, "{role:?} has one column");
        }
    }

    #[test]
    fn executor_cpu_is_summed_by_role_and_shown_beside_vanilla() {
        let mut threads = ExecutorThreads { ticks_per_s: 100, ..ExecutorThreads::default() };
        assert_eq!(threads.cpu_s(None), None, "nothing seen: no figure, not zero");
        threads.record(10, 11, "Executor task l", 300);
        threads.record(10, 12, "shuffle-client-", 50);
        threads.record(10, 11, "Executor task l", 500); // a later reading of the same thread
        threads.record(10, 11, "Executor task l", 400); // an older reading never lowers it
        threads.record(20, 11, "Executor task l", 100); // the same tid in another process
        threads.record(20, 21, "C2 CompilerThre", 250);
        assert_eq!(threads.cpu_s(None), Some(9.0));
        assert_eq!(threads.cpu_s(Some(ThreadRole::Tasks)), Some(6.0));
        assert_eq!(threads.cpu_s(Some(ThreadRole::Transport)), Some(0.5));
        assert_eq!(threads.cpu_s(Some(ThreadRole::Gc)), Some(0.0));
        let v = threads.to_json();
        assert_eq!(v["executor_cpu_s"]["total"], json!(9.0));
        assert_eq!(v["executor_cpu_s"]["jit"], json!(2.5));
        assert_eq!(v["executor_threads"], json!(4));
        let mut full = ExecutorThreads { ticks_per_s: 100, ..ExecutorThreads::default() };
        for tid in 0..2 * EXECUTOR_THREADS_MAX as u32 {
            full.record(1, tid, "java", 1);
        }
        assert_eq!(full.ticks.len(), EXECUTOR_THREADS_MAX, "at the limit, new threads are not tracked");
        // A sample of this process's own threads (it is no executor, but any process will do).
        let mut me = ExecutorThreads::default();
        me.sample(&[std::process::id()], &mut String::new());
        assert!(me.ticks_per_s > 0 && !me.ticks.is_empty());

        let with_cpu = |transport_ticks: u64| {
            let mut r = app("aa", 10_000, 100);
            r.executor_threads = ExecutorThreads { ticks_per_s: 100, ..ExecutorThreads::default() };
            r.executor_threads.record(1, 1, "Executor task l", 1000);
            r.executor_threads.record(1, 2, "fabric-progress", transport_ticks);
            r
        };
        let result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![with_cpu(100), with_cpu(300), with_cpu(200)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![app("aa", 10_000, 100)], error: None },
            ],
        };
        let text = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        let header = text.lines().find(|l| l.starts_with("config     |   total |")).expect("a CPU table");
        assert!(header.contains("tasks") && header.contains("transport") && header.contains("jit"), "{header}");
        let vanilla = text.lines().find(|l| l.starts_with("vanilla    |   12.00 |"));
        assert!(vanilla.is_some_and(|l| l.contains("|     10.00 |      2.00 |")), "medians per role: {text}");
        assert!(text.lines().any(|l| l.starts_with("plugin     |       - |")), "unmeasured is '-': {text}");
        let v = test_json(&result, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][0]["median"]["executor_cpu_s"]["transport"], json!(2.0));
        assert_eq!(v["configs"][1]["median"]["executor_cpu_s"]["total"], Value::Null);
        assert_eq!(v["configs"][0]["runs"][1]["executor_cpu_s"]["transport"], json!(3.0));
    }

    #[test]
    fn buffer_cap_is_read_as_spark_reads_sizes() {
        assert_eq!(spark_size_bytes("256m").unwrap(), 256 << 20);
        assert_eq!(spark_size_bytes("1G").unwrap(), 1 << 30);
        assert_eq!(spark_size_bytes("64mb").unwrap(), 64 << 20);
        assert_eq!(spark_size_bytes("512k").unwrap(), 512 << 10);
        assert_eq!(spark_size_bytes("1048576").unwrap(), 1 << 20, "no unit: bytes");
        for bad in ["", "m", "1.5g", "12x", "99999999999p"] {
            assert!(spark_size_bytes(bad).is_err(), "{bad}");
        }
        let run = sample_run();
        assert_eq!(run.buffer_cap_bytes(SparkConfig::Plugin).unwrap(), 256 << 20, "the plugin's default");
        let run = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "64m".into())], ..sample_run() };
        assert_eq!(run.buffer_cap_bytes(SparkConfig::PluginTcp).unwrap(), 64 << 20);
        let run = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "lots".into())], ..sample_run() };
        assert!(run.buffer_cap_bytes(SparkConfig::Plugin).unwrap_err().contains(BUFFER_CAP_KEY));
    }

    #[test]
    fn executor_memory_against_vanilla_plus_the_cap() {
        let with_rss = |peaks_mib: &[u64]| {
            let mut r = app("aa", 10_000, 100);
            for (i, mib) in peaks_mib.iter().enumerate() {
                r.executor_peaks.record(i as u32 + 1, mib * 1024);
            }
            r
        };
        let result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![with_rss(&[400, 380]), with_rss(&[420, 390])], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![with_rss(&[500, 480]), with_rss(&[520, 300])], error: None },
                ConfigRuns { config: SparkConfig::PluginTcp, results: vec![with_rss(&[700, 300])], error: None },
            ],
        };
        let small_cap = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "128m".into())], ..sample_run() };
        let plugin = memory_target(&result, &small_cap, SparkConfig::Plugin).unwrap();
        assert_eq!(plugin, MemoryTarget { delta_mib: 100.0, buffer_cap_mib: 128.0 }, "medians of the per-run maxima");
        assert!(plugin.within());
        let tcp = memory_target(&result, &small_cap, SparkConfig::PluginTcp).unwrap();
        assert!(!tcp.within());
        assert_eq!(tcp.describe(), "executor peak RSS: +300.0 MiB vs vanilla (cap 128 MiB): above vanilla + cap");
        let at_limit = MemoryTarget { delta_mib: 128.0, buffer_cap_mib: 128.0 };
        assert!(at_limit.within());
        let smaller = MemoryTarget { delta_mib: -2.5, buffer_cap_mib: 256.0 };
        assert_eq!(smaller.describe(), "executor peak RSS: -2.5 MiB vs vanilla (cap 256 MiB): within vanilla + cap");

        let text = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        assert!(text.contains("| exec RSS MiB |"), "{text}");
        let vanilla_row = text.lines().find(|l| l.starts_with("vanilla    |")).unwrap();
        assert!(vanilla_row.contains("|        400.0 |"), "{vanilla_row}");
        assert!(text.contains("  plugin     executor peak RSS: +100.0 MiB vs vanilla (cap 256 MiB): within vanilla + cap"), "{text}");
        assert!(text.contains("  plugin-tcp executor peak RSS: +300.0 MiB vs vanilla (cap 256 MiB): above vanilla + cap"), "{text}");
        let v = test_json(&result, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][0]["median"]["executor_peak_rss_mib"], json!(400.0));
        assert_eq!(v["configs"][0]["within_memory_target"], Value::Null, "vanilla is the reference");
        assert_eq!(v["configs"][1]["executor_rss_delta_mib"], json!(100.0));
        assert_eq!(v["configs"][1]["buffer_cap_mib"], json!(256.0));
        assert_eq!(v["configs"][1]["within_memory_target"], json!(true));
        assert_eq!(v["configs"][2]["within_memory_target"], json!(false));
        assert_eq!(v["configs"][1]["runs"][1]["executor_peak_rss_mib"], json!(520.0));
        assert_eq!(v["configs"][1]["runs"][1]["executor_peak_rss_sum_mib"], json!(820.0));
        assert_eq!(v["configs"][1]["runs"][1]["checksum"], json!("aa"), "the application's own fields stay");

        // Without executors seen (or without vanilla), the target is not judged.
        let unmeasured = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![app("aa", 10_000, 100)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![with_rss(&[500])], error: None },
            ],
        };
        assert!(memory_target(&unmeasured, &sample_run(), SparkConfig::Plugin).unwrap_err().contains("vanilla"));
        let text = render_test(&unmeasured, &sample_run(), &Machine::default(), "java 17");
        assert!(text.contains("  plugin     executor peak RSS: not judged: no executor peak RSS of vanilla"), "{text}");
        let vanilla_row = text.lines().find(|l| l.starts_with("vanilla    |")).unwrap();
        assert!(vanilla_row.contains("|            - |"), "{vanilla_row}");
        let v = test_json(&unmeasured, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][1]["within_memory_target"], Value::Null);
        assert_eq!(v["configs"][1]["buffer_cap_mib"], json!(256.0));
    }

    #[test]
    fn executor_logs_are_found() {
        let dir = std::env::temp_dir().join(format!("ohb-spark-logs-{}", std::process::id()));
        let work = dir.join("spark-home").join("work");
        for executor in ["0", "1"] {
            let d = work.join("app-1").join(executor);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stderr"), format!("line\nERROR executor {executor}\n")).unwrap();
        }
        std::fs::write(dir.join("driver.stderr"), "boom\n").unwrap();
        assert_eq!(executor_logs(&work).len(), 2);
        let text = failure_logs(&dir);
        assert!(text.contains("boom") && text.contains("ERROR executor 0") && text.contains("ERROR executor 1"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
