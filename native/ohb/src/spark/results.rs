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
                for p in r.problems(workload, c.config) {
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
    fn a_plugin_run_fails_unless_the_fabric_carried_every_remote_byte() {
        let mut r = app("aa", 10, 1);
        let problems = r.problems(&TINY, SparkConfig::Plugin);
        assert!(problems.iter().any(|p| p.contains("no executor reported")), "{problems:?}");
        r.fabric_remote_bytes = Some(300);
        r.fabric_counting_executors = 2;
        r.executors_probed = 2;
        let problems = r.problems(&TINY, SparkConfig::PluginTcp);
        assert_eq!(problems, vec!["the fabric carried 300 of the 500 remote bytes Spark read"]);
        r.fabric_remote_bytes = Some(500);
        assert!(r.problems(&TINY, SparkConfig::Plugin).is_empty());
        r.fabric_counting_executors = 1;
        assert_eq!(r.problems(&TINY, SparkConfig::Plugin), vec!["1 of 2 executors reported fabric counters"]);
        let problems = r.problems(&TINY, SparkConfig::Vanilla);
        assert!(problems[0].contains("vanilla Spark reported 500 fabric bytes"), "{problems:?}");
    }

    #[test]
    fn lost_records_unsorted_output_and_errors_fail_the_run() {
        let mut r = app("aa", 10, 1);
        assert!(r.problems(&TINY, SparkConfig::Vanilla).is_empty());
        r.records = 15;
        r.ordered = false;
        let problems = r.problems(&TINY, SparkConfig::Vanilla);
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
}
