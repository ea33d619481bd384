//! One Spark application: its directory, its process and what it prints (`OHB_SPARK_RESULT`).

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::child::{run_captured, ChildGuard};
use crate::spark::{
    DRIVER_LOG_LINES_MAX, EXECUTOR_LOG_LINES_MAX, EXECUTOR_SAMPLE_INTERVAL, JAVA_VERSION_TIMEOUT, RESULT_PREFIX,
};
use crate::spark::executors::{ExecutorPeaks, ExecutorThreads};
use crate::spark::heap::{largest_executor_heap, HeapPeaks};
use crate::spark::hosts::{check_links_carried, driver_command, Cluster, NetnsHosts};
use crate::spark::run::{SparkConfig, SparkRun, SparkTest, Workload};
use crate::table::first_line;

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
    /// Bytes the plugin's executors counted as received over the fabric during the job (`None`:
    /// no executor has the plugin's counters, as with vanilla Spark).
    pub fabric_remote_bytes: Option<u64>,
    /// The largest executor's fabric memory peak (registered, off-heap), from the plugin's
    /// counters; `None` without them.
    pub fabric_pool_peak_bytes: Option<u64>,
    /// Executors that answered the counter probe with the plugin's counters, of those probed.
    pub fabric_counting_executors: u64,
    pub executors_probed: u64,
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
    /// The heap of the executor that kept the most, from the executors' GC logs (`None` in
    /// `from_json`, or when no executor logged a collection).
    pub executor_heap: Option<HeapPeaks>,
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
            fabric_remote_bytes: v.get("fabric_remote_bytes").and_then(Value::as_u64),
            fabric_pool_peak_bytes: v.get("fabric_pool_peak_bytes").and_then(Value::as_u64),
            fabric_counting_executors: v.get("fabric_counting_executors").and_then(Value::as_u64).unwrap_or(0),
            executors_probed: v.get("executors_probed").and_then(Value::as_u64).unwrap_or(0),
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
            executor_heap: None,
            raw: v.clone(),
        })
    }

    /// What makes a run wrong whatever its speed: records lost or invented, a sort out of order,
    /// and a configuration that did not take the path it names: a plugin run must have carried every
    /// remote byte Spark read over the fabric (the executors' own counters, with fallback off), and a
    /// vanilla run none.
    pub fn problems(&self, test: SparkTest, workload: &Workload, config: SparkConfig) -> Vec<String> {
        let mut problems = Vec::new();
        if config.uses_plugin() {
            match self.fabric_remote_bytes {
                None => problems.push("no executor reported the plugin's fabric counters".into()),
                Some(fabric) if fabric != self.remote_bytes_read || fabric == 0 => problems.push(format!(
                    "the fabric carried {fabric} of the {} remote bytes Spark read",
                    self.remote_bytes_read
                )),
                Some(_) => {}
            }
            if self.fabric_counting_executors != self.executors_probed {
                problems.push(format!(
                    "{} of {} executors reported fabric counters",
                    self.fabric_counting_executors, self.executors_probed
                ));
            }
        } else if let Some(fabric) = self.fabric_remote_bytes {
            problems.push(format!("vanilla Spark reported {fabric} fabric bytes: the plugin was loaded"));
        }
        if self.records != workload.records() {
            problems.push(format!("{} records at the reducers, expected {}", self.records, workload.records()));
        }
        if test.one_shuffle_of_the_input() && self.records_read != workload.records() {
            problems.push(format!("{} shuffle records read, expected {}", self.records_read, workload.records()));
        }
        if !self.ordered {
            problems.push("the sorted output is out of order".into());
        }
        problems
    }
}

/// Creates the log directory and removes the application directories of earlier runs from it
/// (nothing else: `--log-dir` may name any directory).
pub(super) fn prepare_log_dir(dir: &Path) -> Result<(), String> {
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

pub(super) fn run_app(
    run: &SparkRun,
    hosts: Option<&NetnsHosts>,
    test: SparkTest,
    config: SparkConfig,
    repeat: usize,
) -> Result<AppResult, String> {
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
    // --hosts netns: this application's Master and Workers (killed when `cluster` drops), and the
    // Workers' links' counters before it.
    let cluster = match hosts {
        Some(hosts) => Some(Cluster::start(hosts, run, &home, &dir).map_err(|e| format!("{e}\n{}", failure_logs(&dir)))?),
        None => None,
    };
    let rx_before = hosts.map(NetnsHosts::worker_links_rx_bytes).transpose()?;
    let stderr_path = dir.join("driver.stderr");
    let stderr_file = std::fs::File::create(&stderr_path).map_err(|e| format!("{}: {e}", stderr_path.display()))?;
    let mut cmd = match hosts {
        Some(hosts) => driver_command(hosts, &run.java),
        None => Command::new(&run.java),
    };
    cmd.args(run.java_args(test, config))
        .current_dir(&dir)
        .env("SPARK_HOME", &home)
        .env("SPARK_SCALA_VERSION", "2.13")
        .env("SPARK_LOCAL_IP", run.hosts.driver_address())
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
    let rx_bytes = match (hosts, rx_before) {
        (Some(hosts), Some(before)) => Some(hosts.worker_links_rx_bytes().map(|after| after.saturating_sub(before))),
        _ => None,
    };
    drop(cluster);
    let _ = std::fs::write(dir.join("driver.stdout"), &stdout);
    let _ = std::fs::remove_dir_all(&local);
    let outcome = status.and_then(|status| {
        if !status.success() {
            return Err(format!("{name}: the driver exited with {status}"));
        }
        let mut result = AppResult::from_json(&parse_result_line(&stdout)?, app_s)?;
        if let Some(rx_bytes) = rx_bytes {
            check_links_carried(rx_bytes?, result.remote_bytes_read)?;
        }
        result.executor_peaks = peaks;
        result.executor_threads = threads;
        result.executor_heap = largest_executor_heap(&home.join("work"));
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
    // --hosts netns: the standalone cluster's daemons (absent otherwise).
    for role in std::iter::once("master".to_string()).chain((1..crate::spark::hosts::HOSTS).map(|w| format!("worker-{w}"))) {
        show(&dir.join(format!("{role}.log")), EXECUTOR_LOG_LINES_MAX);
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::spark::test_support::result_line;
    use super::*;

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
