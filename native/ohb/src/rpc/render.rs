//! The JVM side's result lines to tables, ratios against vanilla and the targets.

use super::CONFIGS;
use crate::table::{format_rate, format_ratio, format_us, Check, Worst};
use serde_json::Value;

const RESULT_PREFIX: &str = "OHB_RPC_RESULT ";
/// Latency target: payloads up to this size at least 4x lower than vanilla (p50).
pub const LAT_TARGET_MAX_BYTES: u64 = 4096;
pub const LAT_TARGET_RATIO: f64 = 4.0;
/// Throughput target: with this many clients at least 2x vanilla calls/s.
pub const THR_TARGET_CLIENTS: u64 = 8;
pub const THR_TARGET_RATIO: f64 = 2.0;
/// Forced to TCP: never slower than vanilla by more than this.
pub const TCP_TARGET_RATIO: f64 = 0.9;

/// Every `OHB_RPC_RESULT` line of the JVM's output.
pub fn parse_results(stdout: &str) -> Result<Vec<Value>, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(RESULT_PREFIX))
        .map(|text| serde_json::from_str(text).map_err(|e| format!("bad result line {text}: {e}")))
        .collect()
}

/// The points the JVM marked failed, each with its reason.
pub fn failures(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| {
            let error = r["error"].as_str()?;
            let at = if r["test"] == "lat" { format!("{} B", r["bytes"]) } else { format!("{} clients", r["clients"]) };
            Some(format!("{} {}: {}", r["config"].as_str().unwrap_or("?"), at, error))
        })
        .collect()
}

fn find<'a>(results: &'a [Value], config: &str, key: &str, value: u64) -> Option<&'a Value> {
    results.iter().find(|r| r["config"] == config && r[key].as_u64() == Some(value))
}

fn keys(results: &[Value], key: &str) -> Vec<u64> {
    let mut values: Vec<u64> = results.iter().filter_map(|r| r[key].as_u64()).collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// `a / b` when both are positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn cell(r: Option<f64>) -> String {
    r.map(format_ratio).unwrap_or_else(|| "-".into())
}

/// The latency table (us) and its checks: per size, each configuration's p50 / p99 / min / avg and
/// vanilla p50 / this p50.
pub fn render_lat(results: &[Value]) -> (String, Vec<Check>) {
    let mut text = String::from("ohb rpc lat: Hadoop RPC echo, one client, one call at a time (us)\n");
    text += &format!("{:>8}", "bytes");
    for c in CONFIGS {
        text += &format!(" {:>30}", format!("{c} p50/p99/min/avg"));
    }
    text += &format!(" {:>12} {:>14}\n", "fabric vs v", "fabric-tcp vs v");
    let mut checks = Vec::new();
    let mut worst = Worst::default();
    let mut worst_tcp = Worst::default();
    for bytes in keys(results, "bytes") {
        text += &format!("{bytes:>8}");
        for c in CONFIGS {
            text += &format!(
                " {:>30}",
                match find(results, c, "bytes", bytes) {
                    Some(r) => ["p50_us", "p99_us", "min_us", "avg_us"]
                        .iter()
                        .map(|k| r[*k].as_f64().map(format_us).unwrap_or_else(|| "-".into()))
                        .collect::<Vec<_>>()
                        .join("/"),
                    None => "-".into(),
                }
            );
        }
        let p50 = |c: &str| find(results, c, "bytes", bytes).and_then(|r| r["p50_us"].as_f64());
        let fabric = ratio(p50("vanilla"), p50("fabric"));
        let tcp = ratio(p50("vanilla"), p50("fabric-tcp"));
        text += &format!(" {:>12} {:>14}\n", cell(fabric), cell(tcp));
        if bytes <= LAT_TARGET_MAX_BYTES {
            worst.see(fabric, bytes);
        }
        worst_tcp.see(tcp, bytes);
    }
    let at_bytes = |bytes: &str| format!("worst at {bytes} B");
    checks.push(worst.check(format!("latency 1 B-4 KiB >= {LAT_TARGET_RATIO}x lower than vanilla (p50)"), LAT_TARGET_RATIO, at_bytes));
    checks.push(worst_tcp.check(format!("fabric-tcp latency >= {TCP_TARGET_RATIO}x vanilla's speed (p50)"), TCP_TARGET_RATIO, at_bytes));
    (text, checks)
}

/// The throughput table (calls/s) and its checks.
pub fn render_thr(results: &[Value]) -> (String, Vec<Check>) {
    let bytes = results.first().and_then(|r| r["bytes"].as_u64()).unwrap_or(0);
    let mut text = format!("ohb rpc thr: Hadoop RPC echo of {bytes} B, N client threads (calls/s)\n");
    text += &format!("{:>8}", "clients");
    for c in CONFIGS {
        text += &format!(" {c:>12}");
    }
    text += &format!(" {:>12} {:>14}\n", "fabric vs v", "fabric-tcp vs v");
    let mut checks = Vec::new();
    let mut worst_tcp = Worst::default();
    for clients in keys(results, "clients") {
        let rate = |c: &str| find(results, c, "clients", clients).and_then(|r| r["calls_per_s"].as_f64());
        text += &format!("{clients:>8}");
        for c in CONFIGS {
            text += &format!(" {:>12}", rate(c).map(format_rate).unwrap_or_else(|| "-".into()));
        }
        let fabric = ratio(rate("fabric"), rate("vanilla"));
        let tcp = ratio(rate("fabric-tcp"), rate("vanilla"));
        text += &format!(" {:>12} {:>14}\n", cell(fabric), cell(tcp));
        if clients == THR_TARGET_CLIENTS {
            let name = format!("throughput with {THR_TARGET_CLIENTS} clients >= {THR_TARGET_RATIO}x vanilla");
            checks.push(Check::at_least(name, fabric, THR_TARGET_RATIO));
        }
        worst_tcp.see(tcp, clients);
    }
    let name = format!("fabric-tcp throughput >= {TCP_TARGET_RATIO}x vanilla");
    checks.push(worst_tcp.check(name, TCP_TARGET_RATIO, |clients| format!("worst at {clients} clients")));
    text += &render_thr_cpu(results);
    (text, checks)
}

/// CPU per call of each point, the clients' process and the server's (whole JVMs: JIT and GC included).
fn render_thr_cpu(results: &[Value]) -> String {
    let mut text = String::from("CPU per call (us), client process / server process, whole JVMs\n");
    text += &format!("{:>8}", "clients");
    for c in CONFIGS {
        text += &format!(" {c:>16}");
    }
    text += "\n";
    for clients in keys(results, "clients") {
        text += &format!("{clients:>8}");
        for c in CONFIGS {
            let point = find(results, c, "clients", clients);
            let us = |key: &str| point.and_then(|r| r[key].as_f64()).map(format_us).unwrap_or_else(|| "-".into());
            text += &format!(" {:>16}", format!("{}/{}", us("client_cpu_us_per_call"), us("server_cpu_us_per_call")));
        }
        text += "\n";
    }
    text
}

/// The checks under a table: `target ... ratio met|MISSED`.
pub fn render_checks(checks: &[Check]) -> String {
    let mut text = String::new();
    for c in checks {
        let verdict = match c.pass {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        text += &format!("  target: {}: {} {} {}\n", c.name, cell(c.ratio), verdict, c.detail);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lat(config: &str, bytes: u64, p50: f64) -> Value {
        json!({"test": "lat", "config": config, "bytes": bytes, "min_us": p50 / 2.0, "p50_us": p50, "p99_us": p50 * 2.0,
               "avg_us": p50, "error": null})
    }

    #[test]
    fn latency_targets_take_the_worst_small_size() {
        let results = vec![
            lat("vanilla", 1, 100.0),
            lat("fabric", 1, 20.0),
            lat("fabric-tcp", 1, 90.0),
            lat("vanilla", 4096, 120.0),
            lat("fabric", 4096, 40.0),
            lat("fabric-tcp", 4096, 200.0),
            lat("vanilla", 65536, 300.0),
            lat("fabric", 65536, 300.0),
            lat("fabric-tcp", 65536, 300.0),
        ];
        let (text, checks) = render_lat(&results);
        assert!(text.contains("5.00x"), "{text}");
        assert_eq!(checks[0].ratio, Some(3.0), "4 KiB is the worst of 1 B-4 KiB; 64 KiB is outside the target");
        assert_eq!(checks[0].pass, Some(false));
        assert_eq!(checks[1].ratio, Some(0.6));
        assert!(render_checks(&checks).contains("MISSED"));
    }

    #[test]
    fn throughput_target_is_at_eight_clients_and_failures_are_listed() {
        let thr = |config: &str, clients: u64, rate: f64, error: Option<&str>| {
            json!({"test": "thr", "config": config, "bytes": 1024, "clients": clients, "calls_per_s": rate, "error": error})
        };
        let results = vec![
            thr("vanilla", 8, 10_000.0, None),
            thr("fabric", 8, 25_000.0, None),
            thr("fabric-tcp", 8, 9_500.0, Some("only 3 of 9 calls went over the fabric")),
        ];
        let (_, checks) = render_thr(&results);
        assert_eq!(checks[0].ratio, Some(2.5));
        assert_eq!(checks[0].pass, Some(true));
        assert_eq!(checks[1].pass, Some(true));
        assert_eq!(failures(&results), vec!["fabric-tcp 8 clients: only 3 of 9 calls went over the fabric".to_string()]);
        assert!(parse_results("noise\nOHB_RPC_RESULT {\"x\":1}\n").unwrap().len() == 1);
        assert!(parse_results("OHB_RPC_RESULT {bad\n").is_err());
    }

    #[test]
    fn throughput_table_shows_each_points_cpu_per_call() {
        let results = vec![
            json!({"test": "thr", "config": "vanilla", "bytes": 1024, "clients": 8, "calls_per_s": 10_000.0,
                   "client_cpu_us_per_call": 41.5, "server_cpu_us_per_call": 60.25, "error": null}),
            json!({"test": "thr", "config": "fabric", "bytes": 1024, "clients": 8, "calls_per_s": 20_000.0, "error": null}),
        ];
        let (text, _) = render_thr(&results);
        let row = text.lines().skip_while(|l| !l.starts_with("CPU per call")).nth(2).unwrap();
        assert!(row.contains(&format!("{}/{}", format_us(41.5), format_us(60.25))), "{text}");
        assert!(row.contains("-/-"), "a point without the figures shows dashes: {text}");
    }
}
