//! Results of the repeated applications: medians, ratios, checksums and the memory target.

use crate::spark::app::AppResult;
use crate::spark::executors::CPU_COLUMNS;
use crate::spark::render::bytes_mib;
use crate::spark::run::{SparkConfig, SparkRun, SparkTest, Workload};
use crate::stats::median;
use crate::table::first_line;

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
    /// Over the runs whose executors logged collections: the most heap an executor kept (after a GC).
    pub executor_heap_after_gc_mib: Option<f64>,
    /// Over the runs with the plugin's counters: the largest executor's fabric memory peak.
    pub fabric_pool_peak_mib: Option<f64>,
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
            executor_heap_after_gc_mib: median(
                &results.iter().filter_map(|r| r.executor_heap.map(|h| h.after_gc_mib_max)).collect::<Vec<_>>(),
            ),
            fabric_pool_peak_mib: median(
                &results.iter().filter_map(|r| r.fabric_pool_peak_bytes.map(bytes_mib)).collect::<Vec<_>>(),
            ),
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
/// buffer cap", measured as heap and off-heap separately: the heap an executor kept (the largest
/// after-GC heap, from the GC logs) against vanilla's, plus the fabric's registered memory at its
/// peak (the plugin's counters); medians over the runs. The resident set is reported beside it but
/// not judged: it is mostly heap pages the collector chose to touch (`spark::heap`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryTarget {
    /// This configuration's kept heap minus vanilla's.
    pub heap_delta_mib: f64,
    /// This configuration's fabric memory peak (vanilla has none).
    pub fabric_peak_mib: f64,
    /// This configuration's peak RSS minus vanilla's, when both were sampled (not judged).
    pub rss_delta_mib: Option<f64>,
    pub buffer_cap_mib: f64,
}

impl MemoryTarget {
    /// What the plugin adds to an executor: its extra heap and its off-heap memory.
    pub fn added_mib(&self) -> f64 {
        self.heap_delta_mib + self.fabric_peak_mib
    }

    pub fn within(&self) -> bool {
        self.added_mib() <= self.buffer_cap_mib
    }

    pub fn describe(&self) -> String {
        format!(
            "heap kept {:+.1} MiB vs vanilla + fabric memory peak {:.1} MiB = {:+.1} MiB (cap {} MiB): {} vanilla + cap; \
             peak RSS {} vs vanilla (not judged)",
            self.heap_delta_mib,
            self.fabric_peak_mib,
            self.added_mib(),
            self.buffer_cap_mib,
            if self.within() { "within" } else { "above" },
            self.rss_delta_mib.map_or_else(|| "not sampled".into(), |d| format!("{d:+.1} MiB"))
        )
    }
}

/// The memory target of a plugin configuration in a test, or why it cannot be judged.
pub fn memory_target(result: &TestResult, run: &SparkRun, config: SparkConfig) -> Result<MemoryTarget, String> {
    debug_assert!(config.uses_plugin(), "vanilla is the reference");
    let buffer_cap_mib = bytes_mib(run.buffer_cap_bytes(config)?);
    let medians = |c: SparkConfig| result.config(c).and_then(ConfigRuns::medians);
    let (vanilla, this) = (medians(SparkConfig::Vanilla), medians(config));
    let heap = |m: Option<Medians>| m.and_then(|m| m.executor_heap_after_gc_mib);
    let vanilla_heap = heap(vanilla).ok_or("no GC log of vanilla's executors to compare")?;
    let heap_mib = heap(this).ok_or("no GC log of the executors")?;
    let fabric_peak_mib = this.and_then(|m| m.fabric_pool_peak_mib).ok_or("no fabric memory peak from the plugin's counters")?;
    let rss = |m: Option<Medians>| m.and_then(|m| m.executor_peak_rss_mib);
    let rss_delta_mib = rss(this).zip(rss(vanilla)).map(|(c, v)| c - v);
    Ok(MemoryTarget { heap_delta_mib: heap_mib - vanilla_heap, fabric_peak_mib, rss_delta_mib, buffer_cap_mib })
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
                for p in r.problems(self.test, workload, c.config) {
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


#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::machine::Machine;
    use crate::spark::BUFFER_CAP_KEY;
    use crate::spark::heap::HeapPeaks;
    use crate::spark::render::{render_test, test_json};
    use crate::spark::test_support::{app, plugin_app, sample_run, TINY};
    use super::*;

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
    fn differing_checksums_fail_the_run() {
        let mut result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![app("aa", 10, 1), app("aa", 11, 1)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![plugin_app("aa", 5, 1), plugin_app("aa", 6, 1)], error: None },
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
    fn shuffle_records_read_are_checked_only_where_the_input_passes_one_shuffle() {
        let mut r = app("aa", 10, 1);
        r.records_read += 7;
        let groupby = r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Vanilla);
        assert!(groupby.iter().any(|p| p.contains("shuffle records read")), "{groupby:?}");
        for test in [SparkTest::PageRank, SparkTest::Sql] {
            assert!(r.problems(test, &TINY, SparkConfig::Vanilla).is_empty(), "{test:?}: several shuffles, other counts");
        }
        r.records += 1;
        assert!(!r.problems(SparkTest::Sql, &TINY, SparkConfig::Vanilla).is_empty(), "the records at the end still count");
    }

    #[test]
    fn a_plugin_run_fails_unless_the_fabric_carried_every_remote_byte() {
        let mut r = app("aa", 10, 1);
        let problems = r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Plugin);
        assert!(problems.iter().any(|p| p.contains("no executor reported")), "{problems:?}");
        r.fabric_remote_bytes = Some(300);
        r.fabric_counting_executors = 2;
        r.executors_probed = 2;
        let problems = r.problems(SparkTest::GroupBy, &TINY, SparkConfig::PluginTcp);
        assert_eq!(problems, vec!["the fabric carried 300 of the 500 remote bytes Spark read"]);
        r.fabric_remote_bytes = Some(500);
        assert!(r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Plugin).is_empty());
        r.fabric_counting_executors = 1;
        assert_eq!(r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Plugin), vec!["1 of 2 executors reported fabric counters"]);
        let problems = r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Vanilla);
        assert!(problems[0].contains("vanilla Spark reported 500 fabric bytes"), "{problems:?}");
    }

    #[test]
    fn lost_records_unsorted_output_and_errors_fail_the_run() {
        let mut r = app("aa", 10, 1);
        assert!(r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Vanilla).is_empty());
        r.records = 15;
        r.ordered = false;
        let problems = r.problems(SparkTest::GroupBy, &TINY, SparkConfig::Vanilla);
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
    fn executor_memory_against_vanilla_plus_the_cap() {
        // A run: executors' peak RSS (MiB), the heap kept by the largest (MiB), the fabric's peak (MiB).
        let run_of = |peaks_mib: &[u64], heap_mib: f64, fabric_mib: Option<u64>| {
            let mut r = app("aa", 10_000, 100);
            for (i, mib) in peaks_mib.iter().enumerate() {
                r.executor_peaks.record(i as u32 + 1, mib * 1024);
            }
            r.executor_heap = Some(HeapPeaks { after_gc_mib_max: heap_mib, before_gc_mib_max: heap_mib * 2.0, collections: 3 });
            r.fabric_pool_peak_bytes = fabric_mib.map(|m| m << 20);
            r
        };
        let result = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns {
                    config: SparkConfig::Vanilla,
                    results: vec![run_of(&[400, 380], 1000.0, None), run_of(&[420, 390], 1020.0, None)],
                    error: None,
                },
                ConfigRuns {
                    config: SparkConfig::Plugin,
                    results: vec![run_of(&[900, 480], 1030.0, Some(60)), run_of(&[520, 300], 1050.0, Some(80))],
                    error: None,
                },
                ConfigRuns { config: SparkConfig::PluginTcp, results: vec![run_of(&[300, 300], 1200.0, Some(100))], error: None },
            ],
        };
        let small_cap = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "128m".into())], ..sample_run() };
        let plugin = memory_target(&result, &small_cap, SparkConfig::Plugin).unwrap();
        assert_eq!(
            plugin,
            MemoryTarget { heap_delta_mib: 30.0, fabric_peak_mib: 60.0, rss_delta_mib: Some(120.0), buffer_cap_mib: 128.0 },
            "medians of the per-run values (the lower of two)"
        );
        assert!(plugin.within(), "an RSS far above the cap is not judged");
        let tcp = memory_target(&result, &small_cap, SparkConfig::PluginTcp).unwrap();
        assert!(!tcp.within(), "heap +200 and fabric 100 exceed 128");
        assert_eq!(
            tcp.describe(),
            "heap kept +200.0 MiB vs vanilla + fabric memory peak 100.0 MiB = +300.0 MiB (cap 128 MiB): above vanilla + cap; \
             peak RSS -100.0 MiB vs vanilla (not judged)"
        );
        let at_limit = MemoryTarget { heap_delta_mib: 28.0, fabric_peak_mib: 100.0, rss_delta_mib: None, buffer_cap_mib: 128.0 };
        assert!(at_limit.within());
        assert!(at_limit.describe().ends_with("peak RSS not sampled vs vanilla (not judged)"), "{}", at_limit.describe());

        let text = render_test(&result, &sample_run(), &Machine::default(), "java 17");
        assert!(text.contains("| exec RSS MiB |"), "{text}");
        let vanilla_row = text.lines().find(|l| l.starts_with("vanilla    |")).unwrap();
        assert!(vanilla_row.contains("|        400.0 |"), "{vanilla_row}");
        assert!(text.contains("  plugin     heap kept +30.0 MiB vs vanilla + fabric memory peak 60.0 MiB = +90.0 MiB (cap 256 MiB): within"), "{text}");
        assert!(text.contains("  plugin-tcp heap kept +200.0 MiB vs vanilla + fabric memory peak 100.0 MiB = +300.0 MiB (cap 256 MiB): above"), "{text}");
        let v = test_json(&result, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][0]["median"]["executor_peak_rss_mib"], json!(400.0));
        assert_eq!(v["configs"][0]["median"]["executor_heap_after_gc_mib"], json!(1000.0));
        assert_eq!(v["configs"][0]["within_memory_target"], Value::Null, "vanilla is the reference");
        assert_eq!(v["configs"][1]["executor_rss_delta_mib"], json!(120.0));
        assert_eq!(v["configs"][1]["executor_heap_delta_mib"], json!(30.0));
        assert_eq!(v["configs"][1]["median"]["fabric_pool_peak_mib"], json!(60.0));
        assert_eq!(v["configs"][1]["buffer_cap_mib"], json!(256.0));
        assert_eq!(v["configs"][1]["within_memory_target"], json!(true));
        assert_eq!(v["configs"][2]["within_memory_target"], json!(false), "300 > 256");
        assert_eq!(v["configs"][1]["runs"][1]["executor_peak_rss_mib"], json!(520.0));
        assert_eq!(v["configs"][1]["runs"][1]["executor_peak_rss_sum_mib"], json!(820.0));
        assert_eq!(v["configs"][1]["runs"][1]["executor_heap_after_gc_mib"], json!(1050.0));
        assert_eq!(v["configs"][1]["runs"][1]["checksum"], json!("aa"), "the application's own fields stay");

        // Without GC logs of vanilla, or without the plugin's fabric peak, the target is not judged.
        let unmeasured = TestResult {
            test: SparkTest::GroupBy,
            configs: vec![
                ConfigRuns { config: SparkConfig::Vanilla, results: vec![app("aa", 10_000, 100)], error: None },
                ConfigRuns { config: SparkConfig::Plugin, results: vec![run_of(&[500], 900.0, Some(10))], error: None },
                ConfigRuns { config: SparkConfig::PluginTcp, results: vec![run_of(&[500], 900.0, None)], error: None },
            ],
        };
        assert!(memory_target(&unmeasured, &sample_run(), SparkConfig::Plugin).unwrap_err().contains("vanilla"));
        let text = render_test(&unmeasured, &sample_run(), &Machine::default(), "java 17");
        assert!(text.contains("  plugin     executor memory not judged: no GC log of vanilla"), "{text}");
        let vanilla_row = text.lines().find(|l| l.starts_with("vanilla    |")).unwrap();
        assert!(vanilla_row.contains("|            - |"), "{vanilla_row}");
        let v = test_json(&unmeasured, &sample_run(), &Machine::default(), "java 17");
        assert_eq!(v["configs"][1]["within_memory_target"], Value::Null);
        assert_eq!(v["configs"][1]["buffer_cap_mib"], json!(256.0));
        let no_fabric = TestResult { configs: vec![ConfigRuns { results: vec![run_of(&[400], 800.0, None)], ..unmeasured.configs[0].clone() },
                                                   unmeasured.configs[2].clone()], ..unmeasured };
        assert!(memory_target(&no_fabric, &sample_run(), SparkConfig::PluginTcp).unwrap_err().contains("fabric memory peak"));
    }
}
