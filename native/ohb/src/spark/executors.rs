//! Spark's executors seen from /proc: their peak memory and their threads' CPU time by role.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::proc_mem;
use crate::spark::{EXECUTOR_MAIN_CLASS, EXECUTOR_PROCESSES_MAX, EXECUTOR_THREADS_MAX};

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
pub(super) fn cpu_columns_json(seconds: [Option<f64>; CPU_COLUMNS.len()]) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
