//! The JVM side's result lines to the table, its ratios and the targets.

use super::{is_throughput, Workload, CONFIGS};
use crate::table::format_ratio;
use serde_json::Value;

const RESULT_PREFIX: &str = "OHB_HDFS_RESULT ";

/// The `OHB_HDFS_RESULT` line of one JVM's output.
pub fn parse_result(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT_PREFIX))
        .ok_or_else(|| "no OHB_HDFS_RESULT line".to_string())?;
    serde_json::from_str(line).map_err(|e| format!("bad result line {line}: {e}"))
}

/// The measured figure of a result: latency p50 in ms (swl, srl, rrl) or MB/s (swt, srt).
pub fn figure(test: &str, result: &Value) -> Option<f64> {
    let key = if is_throughput(test) { "throughput_mb_s" } else { "latency_ms_p50" };
    result[key].as_f64()
}

/// How much better than vanilla: above 1 is better (less time, or more MB/s).
pub fn gain(test: &str, vanilla: f64, this: f64) -> f64 {
    if is_throughput(test) {
        this / vanilla
    } else {
        vanilla / this
    }
}

/// The target for a configuration, as (minimum gain over vanilla, its text).
pub fn target(test: &str, config: &str) -> Option<(f64, &'static str)> {
    match (test, config) {
        ("srt" | "swt", "plugin") => Some((1.5, ">= 1.5x vanilla")),
        ("swl" | "srl" | "rrl", "plugin") => Some((2.0, ">= 2x lower latency (1 MiB files)")),
        (_, "plugin-tcp") => Some((0.9, ">= 0.9x vanilla")),
        _ => None,
    }
}

/// The table for one test, rows in [`CONFIGS`] order.
pub fn render(workload: &Workload, results: &[Value]) -> String {
    let test = workload.test.as_str();
    let unit = if is_throughput(test) { "MB/s" } else { "ms p50" };
    let mut out = format!(
        "ohb hdfs {test}: file {} B, block {} B, readers {}, seek {} B, read {} B, iterations {}\n",
        workload.file_bytes, workload.block_bytes, workload.readers, workload.seek_bytes, workload.read_bytes, workload.iterations
    );
    out += &format!("{:<12} {:>10} {:>10} {:>10} {:>14}  target\n", "config", unit, "p99/max", "vs vanilla", "fabric bytes");
    let vanilla = results.iter().find(|r| r["config"] == "vanilla").and_then(|r| figure(test, r));
    for config in CONFIGS {
        let Some(r) = results.iter().find(|r| r["config"] == config) else { continue };
        let value = figure(test, r);
        let spread = if is_throughput(test) { r["throughput_mb_s_max"].as_f64() } else { r["latency_ms_p99"].as_f64() };
        let ratio = match (vanilla, value) {
            (Some(v), Some(x)) if v > 0.0 && x > 0.0 => Some(gain(test, v, x)),
            _ => None,
        };
        let verdict = match (target(test, config), ratio) {
            (Some((min, text)), Some(g)) => format!("{text}: {}", if g >= min { "met" } else { "MISSED" }),
            (Some((_, text)), None) => format!("{text}: no figure"),
            _ if config == "vanilla-sc" => "local-read reference".to_string(),
            _ => String::new(),
        };
        let show = |x: Option<f64>| x.map(|x| format!("{x:.2}")).unwrap_or_else(|| "failed".into());
        out += &format!(
            "{:<12} {:>10} {:>10} {:>10} {:>14}  {}\n",
            config,
            show(value),
            show(spread),
            ratio.map(format_ratio).unwrap_or_else(|| "-".into()),
            r["fabric_bytes"].as_u64().map(|b| b.to_string()).unwrap_or_default(),
            verdict
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ratios_point_the_right_way_and_targets_are_judged() {
        assert_eq!(gain("srl", 30.0, 10.0), 3.0);
        assert_eq!(gain("srt", 100.0, 150.0), 1.5);
        assert_eq!(gain("swt", 100.0, 150.0), 1.5);
        assert_eq!(gain("swl", 30.0, 10.0), 3.0);
        assert_eq!(target("swt", "plugin").map(|t| t.0), Some(1.5));
        let w = Workload::new("srl", true);
        let results = vec![
            json!({"config": "vanilla", "latency_ms_p50": 30.0, "latency_ms_p99": 40.0, "fabric_bytes": 0}),
            json!({"config": "plugin", "latency_ms_p50": 10.0, "latency_ms_p99": 12.0, "fabric_bytes": 100}),
            json!({"config": "plugin-tcp", "latency_ms_p50": 40.0, "latency_ms_p99": 50.0, "fabric_bytes": 100}),
        ];
        let table = render(&w, &results);
        assert!(table.contains("3.00x"), "{table}");
        assert!(table.contains(">= 2x lower latency (1 MiB files): met"), "{table}");
        assert!(table.contains(">= 0.9x vanilla: MISSED"), "{table}");
    }

    #[test]
    fn a_result_line_is_found_among_the_logs() {
        let r = parse_result("noise\nOHB_HDFS_RESULT {\"config\":\"plugin\",\"ok\":true}\n").unwrap();
        assert_eq!(r["config"], "plugin");
        assert!(parse_result("nothing here").is_err());
    }
}
