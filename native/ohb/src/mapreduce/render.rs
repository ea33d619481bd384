//! The JVM side's result lines to medians, the table and its ratios.

use super::{Workload, CONFIGS};
use crate::stats::median;
use serde_json::Value;

const RESULT_PREFIX: &str = "OHB_MAPREDUCE_RESULT ";

/// The median of each measured figure over a configuration's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Medians {
    pub job_ms: f64,
    pub shuffle_ms: f64,
    pub merge_ms: f64,
    pub shuffle_bytes: f64,
    pub fabric_bytes: f64,
}

/// Every `OHB_MAPREDUCE_RESULT` line of the JVM's output.
pub fn parse_results(stdout: &str) -> Result<Vec<Value>, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(RESULT_PREFIX))
        .map(|text| serde_json::from_str(text).map_err(|e| format!("bad result line {text}: {e}")))
        .collect()
}

pub fn medians(results: &[Value], config: &str) -> Option<Medians> {
    let of = |key: &str| -> Option<f64> {
        let values: Vec<f64> = results.iter().filter(|r| r["config"] == config).filter_map(|r| r[key].as_f64()).collect();
        median(&values)
    };
    Some(Medians {
        job_ms: of("job_ms")?,
        shuffle_ms: of("shuffle_ms")?,
        merge_ms: of("merge_ms")?,
        shuffle_bytes: of("shuffle_bytes")?,
        fabric_bytes: of("fabric_bytes")?,
    })
}

/// `vanilla / this`: above 1, this configuration is faster.
fn speedup(vanilla: f64, this: f64) -> f64 {
    if this > 0.0 {
        vanilla / this
    } else {
        f64::NAN
    }
}

pub fn render(workload: &Workload, results: &[Value]) -> String {
    let mut out = format!(
        "ohb mapreduce {}: {} maps x {} reducers, {} records of {} bytes per map ({:.1} MiB), median of {} run(s)\n",
        workload.pattern,
        workload.maps,
        workload.reduces,
        workload.records_per_map,
        workload.value_bytes,
        workload.shuffle_bytes() as f64 / (1u64 << 20) as f64,
        workload.runs
    );
    out.push_str(&format!(
        "{:<12} {:>10} {:>12} {:>10} {:>14} {:>14} {:>7} {:>10}\n",
        "config", "job ms", "shuffle ms", "merge ms", "shuffle bytes", "fabric bytes", "job x", "shuffle x"
    ));
    let vanilla = medians(results, "vanilla");
    for config in CONFIGS {
        let Some(m) = medians(results, config) else { continue };
        let (job_x, shuffle_x) = match &vanilla {
            Some(v) => (speedup(v.job_ms, m.job_ms), speedup(v.shuffle_ms, m.shuffle_ms)),
            None => (f64::NAN, f64::NAN),
        };
        out.push_str(&format!(
            "{:<12} {:>10.0} {:>12.0} {:>10.0} {:>14.0} {:>14.0} {:>7.2} {:>10.2}\n",
            config, m.job_ms, m.shuffle_ms, m.merge_ms, m.shuffle_bytes, m.fabric_bytes, job_x, shuffle_x
        ));
    }
    out.push_str(
        "(x: vanilla's time / this time, above 1 is faster; shuffle: the longest reducer's copy phase, from its start)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_give_medians_and_ratios_against_vanilla() {
        let stdout = "noise\n\
            OHB_MAPREDUCE_RESULT {\"config\":\"vanilla\",\"job_ms\":100,\"shuffle_ms\":40,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":0}\n\
            OHB_MAPREDUCE_RESULT {\"config\":\"plugin\",\"job_ms\":80,\"shuffle_ms\":20,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":10}\n\
            OHB_MAPREDUCE_RESULT {\"config\":\"plugin\",\"job_ms\":90,\"shuffle_ms\":30,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":10}\n";
        let results = parse_results(stdout).unwrap();
        assert_eq!(results.len(), 3);
        let plugin = medians(&results, "plugin").unwrap();
        assert_eq!(plugin.shuffle_ms, 20.0, "the lower median, as every ohb suite reports");
        assert!(medians(&results, "plugin-tcp").is_none());
        let table = render(&Workload::new("avg", true), &results);
        assert!(table.contains("plugin "), "{table}");
        assert!(table.contains("2.00"), "shuffle ratio 40/20 missing: {table}");
        assert!(!table.contains("plugin-tcp"), "{table}");
        assert!(parse_results("OHB_MAPREDUCE_RESULT {bad").is_err());
    }
}
