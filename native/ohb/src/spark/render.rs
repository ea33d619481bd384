//! What a Spark run prints and writes: one table per test and its JSON.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::machine::Machine;
use crate::spark::{BUFFER_CAP_KEY, EXECUTORS, EXECUTOR_SAMPLE_INTERVAL};
use crate::spark::executors::{cpu_columns_json, CPU_COLUMNS};
use crate::spark::results::{memory_target, time_ratio, ConfigRuns, Medians, MemoryTarget, TestResult};
use crate::spark::hosts::NETNS_NOTE;
use crate::spark::run::{SparkConfig, SparkHosts, SparkRun, SparkTest};
use crate::table::{first_line, format_ratio};

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

pub(super) fn bytes_mib(bytes: u64) -> f64 {
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
        SparkTest::TeraSort => "TeraSort (HiBD's Spark workload)",
        SparkTest::PageRank => "PageRank (HiBD's Spark workload)",
        SparkTest::Sql => "Spark SQL join and aggregations (HiBD's Spark SQL workload)",
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
    if run.hosts == SparkHosts::Netns {
        let _ = writeln!(out, "# hosts: {}", NETNS_NOTE);
    }
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
        "# medians of {} run(s) per configuration, interleaved (order rotated each round); every configuration: Kryo serializer, spark.shuffle.readHostLocalDisk=false",
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
    let _ = writeln!(
        out,
        "(plugin configurations run with spark.slipstream.fallback=never, and a run fails unless the executors' fabric \
         counters carried every remote byte Spark read)"
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
        let _ = writeln!(
            out,
            "\nexecutor memory, target: no more than vanilla + {BUFFER_CAP_KEY}, as heap kept (largest after-GC heap, GC logs) \
             and fabric memory (registered, off-heap; the plugin's counters) separately:"
        );
        for config in plugins {
            let line = match memory_target(result, run, config) {
                Ok(target) => target.describe(),
                Err(e) => format!("executor memory not judged: {e}"),
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
                   "executor_heap_after_gc_mib": m.executor_heap_after_gc_mib,
                   "fabric_pool_peak_mib": m.fabric_pool_peak_mib,
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
                "executor_rss_delta_mib": target_ok.and_then(|t| t.rss_delta_mib),
                "executor_heap_delta_mib": target_ok.map(|t| t.heap_delta_mib),
                "buffer_cap_mib": buffer_cap_mib,
                "within_memory_target": target_ok.map(MemoryTarget::within),
                "memory_target_note": target.and_then(Result::err),
                "runs": c.results.iter().map(|r| {
                    let mut v = r.raw.clone();
                    v["app_s"] = json!(r.app_s);
                    v["executor_heap_after_gc_mib"] = json!(r.executor_heap.map(|h| h.after_gc_mib_max));
                    v["executor_heap_before_gc_mib"] = json!(r.executor_heap.map(|h| h.before_gc_mib_max));
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
        "hosts": run.hosts.name(),
        "executor_memory_mib": run.executor_memory_mib,
        "workload": {"mappers": w.mappers, "pairs_per_mapper": w.pairs_per_mapper, "value_bytes": w.value_bytes,
                     "reducers": w.reducers, "seed": run.seed},
        "repeats": run.repeats,
        "units": {"time": "ms (app_s: seconds)", "fetch_wait_ms": "summed over reduce tasks",
                  "ratios": "vanilla / this config, > 1: faster",
                  "executor_peak_rss_mib": format!("the largest executor's VmHWM in MiB, sampled every {} ms",
                                                   EXECUTOR_SAMPLE_INTERVAL.as_millis()),
                  "executor_cpu_s": "CPU seconds of the executors' threads over their whole lives, by role (ThreadRole)",
                  "executor_heap_after_gc_mib": "the most heap an executor kept: the largest heap after a collection in its GC log",
                  "fabric_pool_peak_mib": "the largest executor's fabric memory peak (registered, off-heap), from the plugin's counters",
                  "executor_rss_delta_mib": "this config's median peak RSS minus vanilla's (not judged)",
                  "executor_heap_delta_mib": "this config's median heap kept minus vanilla's; \
                                              within_memory_target: heap delta + fabric_pool_peak_mib <= buffer_cap_mib"},
        "configs": configs,
        "checksums_equal": result.checksums().len() <= 1,
        "failures": result.failures(w),
    })
}

#[cfg(test)]
mod tests {
    use crate::spark::EXECUTOR_THREADS_MAX;
    use crate::spark::executors::{ExecutorThreads, ThreadRole};
    use crate::spark::test_support::{app, sample_run};
    use super::*;

    #[test]
    fn tiny_fetch_waits_are_flagged() {
        let m = |job_ms: u64, fetch_wait_ms: u64| Medians::of(&[app("a", job_ms, fetch_wait_ms)]).unwrap();
        assert!(small_fetch_wait_note(&[m(8000, 79), m(8000, 10)]).is_some());
        assert!(small_fetch_wait_note(&[m(8000, 79), m(8000, 80)]).is_none());
        assert!(small_fetch_wait_note(&[]).is_none());
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
}
