//! `ohb hbase`'s flags, the JVM run, the table and the targets.

use super::{CONFIGS, TESTS};
use crate::child::{bench_jvm, find_repo_root, run_captured_per_config};
use crate::output::{fail_if_points_failed, run_stamp, write_json};
use crate::table::{format_ratio, format_us, Check};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// One configuration's run (its cluster, every test): bounded, then killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const RESULT_PREFIX: &str = "OHB_HBASE_RESULT ";
const USAGE: &str = "Usage: ohb hbase [--quick] [--rows N] [--warmup N] [--configs LIST] [--json FILE]\n";
/// randomRead p50: at least this many times lower than Netty's.
pub const READ_TARGET_RATIO: f64 = 2.0;
/// Forced to TCP: never slower than Netty by more than this.
pub const TCP_TARGET_RATIO: f64 = 0.9;

#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Each in its own client JVM, in this order.
    pub configs: Vec<String>,
    pub jvm_args: Vec<String>,
    pub json: Option<PathBuf>,
}

pub fn parse_args(argv: &[String]) -> Result<Run, String> {
    let mut jvm_args = Vec::new();
    let mut rows = None;
    let mut warmup = None;
    let mut json = None;
    let mut configs: Vec<String> = CONFIGS.iter().map(|c| c.to_string()).collect();
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        match flag {
            "--quick" => {
                rows = rows.or(Some("1000".to_string()));
                warmup = warmup.or(Some("1000".to_string()));
            }
            "--no-progress" => {}
            "--rows" | "--warmup" | "--configs" | "--json" => {
                i += 1;
                let value = argv.get(i).ok_or_else(|| format!("{flag} needs a value"))?;
                match flag {
                    "--json" => json = Some(PathBuf::from(value)),
                    "--rows" => rows = Some(row_count(flag, value, 100)?),
                    "--warmup" => warmup = Some(row_count(flag, value, 0)?),
                    _ => {
                        if let Some(bad) = value.split(',').find(|c| !CONFIGS.contains(c)) {
                            return Err(format!("--configs: unknown configuration {bad} (netty, fabric, fabric-tcp)"));
                        }
                        configs = value.split(',').map(str::to_string).collect();
                    }
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 1;
    }
    // 20 000 measured after 20 000 of warm-up (PerformanceEvaluation's --measureAfter): with 5000 rows and no
    // warm-up the median was the JVMs' warm-up (randomRead p50 700-900 us on either transport; session 34), and
    // with 20 000 still the slope of it (each 2000 rows' mean fell from about 700 to 120 us; session 37).
    jvm_args.extend(["--rows".to_string(), rows.unwrap_or_else(|| "20000".to_string())]);
    jvm_args.extend(["--warmup".to_string(), warmup.unwrap_or_else(|| "20000".to_string())]);
    Ok(Run { configs, jvm_args, json })
}

/// A row count for PerformanceEvaluation: a number from `low` to 10 000 000, passed on as written.
fn row_count(flag: &str, value: &str, low: u64) -> Result<String, String> {
    let n: u64 = value.parse().map_err(|_| format!("{flag}: not a number: {value}"))?;
    if !(low..=10_000_000).contains(&n) {
        return Err(format!("{flag}: {n} is outside {low}..=10000000"));
    }
    Ok(value.to_string())
}

pub fn hbase_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let run = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    // HBase's mini cluster keeps its data under `target/test-data` of the working directory: under build/,
    // not the checkout (nor wherever ohb was started).
    let workdir = root.join("build").join("ohb-hbase");
    std::fs::create_dir_all(&workdir).map_err(|e| format!("{}: {e}", workdir.display()))?;
    let captured = run_captured_per_config("ohb hbase", &run.configs, RUN_TIMEOUT, |config| {
        let mut cmd = bench_jvm(&root, "ohb-hbase", "1g")?;
        cmd.current_dir(&workdir)
            .arg("io.slipstream.ohb.hbase.HBaseBench")
            .args(&run.jvm_args)
            .args(["--configs", config]);
        Ok(cmd)
    })?;
    let log = root.join("build").join("ohb-hbase.log");
    std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
    std::fs::write(&log, &captured.stderr).map_err(|e| format!("{}: {e}", log.display()))?;
    let results = parse_results(&captured.stdout)?;
    let (table, checks) = render(&results);
    print!("{table}");
    for c in &checks {
        let verdict = match c.pass {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let ratio = c.ratio.map(format_ratio).unwrap_or_else(|| "-".into());
        println!("  target: {}: {ratio} {verdict} {}", c.name, c.detail);
    }
    let value = json!({
        "bench": "hbase pe",
        "run": run_stamp(),
        "results": results,
        "targets": checks.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
    });
    let path = run.json.clone().unwrap_or_else(|| root.join("results").join("ohb-hbase-pe.json"));
    write_json(&path, &value)?;
    println!("results: {}", path.display());
    let mut failed: Vec<String> = results
        .iter()
        .filter_map(|r| Some(format!("{} {}: {}", r["config"].as_str()?, r["test"].as_str()?, r["error"].as_str()?)))
        .collect();
    if !captured.status.success() && failed.is_empty() {
        failed.push(format!("the JVM side exited with {}; log: {}", captured.status, log.display()));
    }
    if results.is_empty() && failed.is_empty() {
        failed.push(format!("no results; log: {}", log.display()));
    }
    fail_if_points_failed("ohb hbase", &failed)
}

/// Every `OHB_HBASE_RESULT` line of the JVM's output.
pub fn parse_results(stdout: &str) -> Result<Vec<Value>, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(RESULT_PREFIX))
        .map(|text| serde_json::from_str(text).map_err(|e| format!("bad result line {text}: {e}")))
        .collect()
}

fn value(results: &[Value], config: &str, test: &str, key: &str) -> Option<f64> {
    results.iter().find(|r| r["config"] == config && r["test"] == test).and_then(|r| r[key].as_f64())
}

/// `netty / other` of a latency (higher is better for the other).
fn speedup(netty: Option<f64>, other: Option<f64>) -> Option<f64> {
    match (netty, other) {
        (Some(n), Some(o)) if n > 0.0 && o > 0.0 => Some(n / o),
        _ => None,
    }
}

/// The table (us) and the targets: randomRead p50 at least 2x lower than Netty's; fabric-tcp never
/// slower than 0.9x Netty.
pub fn render(results: &[Value]) -> (String, Vec<Check>) {
    let mut text = String::from("ohb hbase: HBase PerformanceEvaluation, one client, one RPC per row (us)");
    if let Some(r) = results.first() {
        let (rows, warmup) = (r["rows"].as_u64().unwrap_or(0), r["warmup_rows"].as_u64().unwrap_or(0));
        text += &format!(", {rows} rows measured per test after {warmup} of warm-up");
    }
    text += "\n";
    text += &format!("{:>16}", "test");
    for c in CONFIGS {
        text += &format!(" {:>30}", format!("{c} p50/p99/min/avg"));
    }
    text += &format!(" {:>14} {:>16}\n", "fabric vs n", "fabric-tcp vs n");
    for test in TESTS {
        text += &format!("{test:>16}");
        for c in CONFIGS {
            let cells: Vec<String> = ["p50_us", "p99_us", "min_us", "avg_us"]
                .iter()
                .map(|k| value(results, c, test, k).map(format_us).unwrap_or_else(|| "-".into()))
                .collect();
            text += &format!(" {:>30}", cells.join("/"));
        }
        for c in ["fabric", "fabric-tcp"] {
            let r = speedup(value(results, "netty", test, "p50_us"), value(results, c, test, "p50_us"));
            text += &format!(" {:>15}", r.map(format_ratio).unwrap_or_else(|| "-".into()));
        }
        text += "\n";
    }
    let read = speedup(value(results, "netty", "randomRead", "p50_us"), value(results, "fabric", "randomRead", "p50_us"));
    let tcp = TESTS
        .iter()
        .filter_map(|t| speedup(value(results, "netty", t, "p50_us"), value(results, "fabric-tcp", t, "p50_us")))
        .fold(None, |worst: Option<f64>, r| Some(worst.map_or(r, |w| w.min(r))));
    let checks = vec![
        Check {
            name: "randomRead p50 vs Netty".into(),
            ratio: read,
            pass: read.map(|r| r >= READ_TARGET_RATIO),
            detail: format!("(Netty p50 / fabric p50; target >= {READ_TARGET_RATIO}x)"),
        },
        Check {
            name: "fabric-tcp vs Netty".into(),
            ratio: tcp,
            pass: tcp.map(|r| r >= TCP_TARGET_RATIO),
            detail: format!("(worst test, p50; target >= {TCP_TARGET_RATIO}x)"),
        },
    ];
    (text, checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_options_and_passes_them_to_the_jvm() {
        assert_eq!(parse_args(&[]).unwrap().jvm_args, words("--rows 20000 --warmup 20000"));
        assert_eq!(parse_args(&[]).unwrap().configs, words("netty fabric fabric-tcp"));
        let run = parse_args(&words("--quick --configs fabric,netty --json x.json")).unwrap();
        // Each configuration gets its own JVM (`--configs <one>`), in the order given.
        assert_eq!(run.configs, words("fabric netty"));
        assert_eq!(run.jvm_args, words("--rows 1000 --warmup 1000"));
        assert_eq!(run.json, Some(PathBuf::from("x.json")));
        assert_eq!(parse_args(&words("--rows 200 --quick")).unwrap().jvm_args, words("--rows 200 --warmup 1000"));
        assert_eq!(parse_args(&words("--warmup 0")).unwrap().jvm_args, words("--rows 20000 --warmup 0"));
        for bad in ["--rows", "--rows 10", "--rows x", "--warmup", "--warmup -1", "--warmup 20000000", "--configs netty,grpc", "--bogus", "lat"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    fn point(config: &str, test: &str, p50: f64) -> Value {
        json!({"config": config, "test": test, "p50_us": p50, "p99_us": p50 * 3.0, "min_us": p50 / 2.0, "avg_us": p50})
    }

    #[test]
    fn targets_compare_p50_with_netty() {
        let mut results = Vec::new();
        for t in TESTS {
            results.push(point("netty", t, 1000.0));
            results.push(point("fabric", t, 400.0));
            results.push(point("fabric-tcp", t, if t == "randomWrite" { 1250.0 } else { 900.0 }));
        }
        let (text, checks) = render(&results);
        assert!(text.contains("randomRead"), "{text}");
        assert_eq!(checks[0].ratio, Some(2.5));
        assert_eq!(checks[0].pass, Some(true));
        assert_eq!(checks[1].ratio, Some(0.8));
        assert_eq!(checks[1].pass, Some(false));
        let (_, none) = render(&[point("netty", "randomRead", 1000.0)]);
        assert_eq!(none[0].pass, None);
        let mut warm = point("netty", "randomRead", 1000.0);
        warm["rows"] = json!(20000);
        warm["warmup_rows"] = json!(5000);
        let (text, _) = render(&[warm]);
        assert!(text.contains("20000 rows measured per test after 5000 of warm-up"), "{text}");
    }

    #[test]
    fn result_lines_are_parsed_and_others_ignored() {
        let out = "noise\nOHB_HBASE_RESULT {\"config\":\"netty\",\"test\":\"randomRead\",\"p50_us\":1.0}\n";
        assert_eq!(parse_results(out).unwrap().len(), 1);
        assert!(parse_results("OHB_HBASE_RESULT {bad").is_err());
    }
}
