//! The JVM side's result lines to medians, the table and its ratios.

use super::{Workload, CONFIGS};
use crate::stats::median;
use serde_json::Value;

const RESULT_PREFIX: &str = "OHB_MAPREDUCE_RESULT ";
/// `slipstream.mapreduce.buffer.cap`'s default (the bench does not change it): the memory target
/// allows the plugin this much above vanilla, per process.
const BUFFER_CAP_DEFAULT_MIB: f64 = 256.0;

/// The median of each measured figure over a configuration's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Medians {
    pub job_ms: f64,
    pub shuffle_ms: f64,
    pub merge_ms: f64,
    pub shuffle_bytes: f64,
    pub fabric_bytes: f64,
    /// The largest reduce task's peak RSS (VmHWM), MiB; `None` in results of before it was sampled.
    pub reducer_peak_rss_mib: Option<f64>,
    /// The mini cluster's JVM (both NodeManagers, their shuffle handlers and fabric node, the
    /// ResourceManager): its peak RSS during the job, MiB.
    pub cluster_peak_rss_mib: Option<f64>,
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
        reducer_peak_rss_mib: of("reducer_peak_rss_mib").filter(|m| *m > 0.0),
        cluster_peak_rss_mib: of("cluster_peak_rss_mib").filter(|m| *m > 0.0),
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
    // sort's and terasort's records are a key and a value, both counted in the MiB.
    let record = match workload.key_bytes() {
        0 => format!("{} bytes", workload.value_bytes),
        key => format!("{key} + {} bytes", workload.value_bytes),
    };
    let mut out = format!(
        "ohb mapreduce {}: {} maps x {} reducers, {} records of {record} per map ({:.1} MiB), median of {} run(s)\n",
        workload.pattern,
        workload.maps,
        workload.reduces,
        workload.records_per_map,
        workload.shuffle_bytes() as f64 / (1u64 << 20) as f64,
        workload.runs
    );
    out.push_str(&format!(
        "{:<12} {:>10} {:>12} {:>10} {:>14} {:>14} {:>7} {:>10} {:>12} {:>12}\n",
        "config", "job ms", "shuffle ms", "merge ms", "shuffle bytes", "fabric bytes", "job x", "shuffle x", "reducer MiB", "cluster MiB"
    ));
    let vanilla = medians(results, "vanilla");
    for config in CONFIGS {
        let Some(m) = medians(results, config) else { continue };
        let (job_x, shuffle_x) = match &vanilla {
            Some(v) => (speedup(v.job_ms, m.job_ms), speedup(v.shuffle_ms, m.shuffle_ms)),
            None => (f64::NAN, f64::NAN),
        };
        let mib = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
        out.push_str(&format!(
            "{:<12} {:>10.0} {:>12.0} {:>10.0} {:>14.0} {:>14.0} {:>7.2} {:>10.2} {:>12} {:>12}\n",
            config,
            m.job_ms,
            m.shuffle_ms,
            m.merge_ms,
            m.shuffle_bytes,
            m.fabric_bytes,
            job_x,
            shuffle_x,
            mib(m.reducer_peak_rss_mib),
            mib(m.cluster_peak_rss_mib)
        ));
    }
    // terasort's HDFS (NameNode and DataNode) runs in the same JVM as the YARN mini cluster.
    let hdfs = if workload.pattern == "terasort" { ", HDFS's NameNode and DataNode" } else { "" };
    out.push_str(&format!(
        "(x: vanilla's time / this time, above 1 is faster; shuffle: the longest reducer's copy phase, from its start;\n \
         reducer MiB: the largest reduce task's peak RSS; cluster MiB: the JVM of both NodeManagers and the ResourceManager{hdfs}, \
         its peak during the job)\n",
    ));
    if let (Some(v), Some(p)) = (&vanilla, medians(results, "plugin")) {
        for (what, vanilla_mib, plugin_mib) in [
            ("reducer", v.reducer_peak_rss_mib, p.reducer_peak_rss_mib),
            ("NodeManagers' JVM", v.cluster_peak_rss_mib, p.cluster_peak_rss_mib),
        ] {
            if let (Some(v), Some(p)) = (vanilla_mib, plugin_mib) {
                let verdict = if p - v <= BUFFER_CAP_DEFAULT_MIB { "PASS" } else { "MISS" };
                out.push_str(&format!(
                    "memory target, {what}: plugin {p:.0} MiB - vanilla {v:.0} MiB = {:+.0} MiB <= buffer cap {BUFFER_CAP_DEFAULT_MIB:.0} MiB: {verdict}\n",
                    p - v
                ));
            }
        }
    }
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
        assert!(!table.contains("memory target"), "no memory figures, no verdict: {table}");
    }

    #[test]
    fn sorts_name_their_records_key_and_value() {
        let stdout = "OHB_MAPREDUCE_RESULT {\"config\":\"vanilla\",\"job_ms\":100,\"shuffle_ms\":40,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":0}\n";
        let results = parse_results(stdout).unwrap();
        let tera = render(&Workload::new("terasort", true), &results);
        assert!(tera.starts_with("ohb mapreduce terasort: 2 maps x 2 reducers, 20000 records of 10 + 90 bytes per map (3.8 MiB)"), "{tera}");
        assert!(tera.contains("HDFS's NameNode and DataNode"), "{tera}");
        let sort = render(&Workload::new("sort", true), &results);
        assert!(sort.contains("records of 10 + 100 bytes per map"), "{sort}");
        assert!(!sort.contains("HDFS"), "{sort}");
        let avg = render(&Workload::new("avg", true), &results);
        assert!(avg.contains("records of 100 bytes per map"), "{avg}");
    }

    #[test]
    fn memory_peaks_give_a_verdict_against_the_buffer_cap() {
        let stdout = "OHB_MAPREDUCE_RESULT {\"config\":\"vanilla\",\"job_ms\":100,\"shuffle_ms\":40,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":0,\"reducer_peak_rss_mib\":400.0,\"cluster_peak_rss_mib\":900.0}\n\
            OHB_MAPREDUCE_RESULT {\"config\":\"plugin\",\"job_ms\":80,\"shuffle_ms\":20,\"merge_ms\":5,\"shuffle_bytes\":10,\"fabric_bytes\":10,\"reducer_peak_rss_mib\":500.0,\"cluster_peak_rss_mib\":1300.0}\n";
        let table = render(&Workload::new("avg", true), &parse_results(stdout).unwrap());
        assert!(table.contains("memory target, reducer: plugin 500 MiB - vanilla 400 MiB = +100 MiB <= buffer cap 256 MiB: PASS"), "{table}");
        assert!(table.contains("NodeManagers' JVM: plugin 1300 MiB - vanilla 900 MiB = +400 MiB <= buffer cap 256 MiB: MISS"), "{table}");
    }
}
