//! `ohb hdfs tiers skew`: Triple-H's tiering service under a skewed read workload
//! (`io.slipstream.ohb.hdfs.TiersSkewBench` in `jvm/ohb-hdfs`). One JVM, one mini cluster in mode `hhh`
//! whose three DataNodes have an SSD directory sized to hold `--ssd-share` of all replicas and a DISK
//! directory (both on this machine's one disk, under `build/ohb-hdfs-tiers-skew-<pid>/`, removed
//! afterwards), no RAM tier; the NameNode runs the access tracking and the tiering service, and HDFS's
//! external StoragePolicySatisfier runs in the same JVM. `--files` one-block files (1 MiB) are written,
//! then read `--reads` times, each read's file drawn from a Zipf(`--zipf`) distribution over a seeded
//! shuffle of the files, at most one per `--read-interval-ms` (20). The service promotes hot files with
//! `--promote-policy` (ALL_SSD, its default: every replica on SSD; or ONE_SSD: one replica per block). Reported per
//! window of reads: the share served from SSD (the fastest tier here) and from the fastest tier holding a
//! replica of the file at that moment; the target (issue 16) is judged on the SSD share over the second
//! half of the windows ("after warm-up").

use crate::args::Args;
use crate::child::{bench_jvm, find_repo_root, run_captured};
use crate::output::write_json;
use crate::table::Check;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(900);
const RESULT_PREFIX: &str = "OHB_TIERS_SKEW_RESULT ";
/// Issue 16: after warm-up, at least 90 % of reads from the fastest tier.
const TARGET_FRACTION: f64 = 0.9;
const USAGE: &str = "Usage: ohb hdfs tiers skew [--quick] [--files N] [--reads N] [--zipf S] [--ssd-share X] [--promote-policy ONE_SSD|ALL_SSD] [--windows N] [--read-interval-ms N] [--json FILE]\n";

#[derive(Debug, Clone, PartialEq)]
pub struct SkewArgs {
    pub files: u32,
    pub reads: u32,
    pub zipf: f64,
    pub ssd_share: f64,
    pub promote_policy: String,
    pub windows: u32,
    pub read_interval_ms: u32,
    pub json: Option<PathBuf>,
}

/// Full: 40 files, 4000 reads in 10 windows; `--quick`: 20 files, 1200 reads in 6 windows. Zipf 1.2,
/// SSD for half of all replicas, promotion to ALL_SSD (the service's default).
pub fn parse_args(argv: &[String]) -> Result<SkewArgs, String> {
    let args = Args::parse(argv, &["files", "reads", "zipf", "ssd-share", "promote-policy", "windows", "read-interval-ms", "json"], &["quick"])
        .map_err(|e| format!("{e}\n{USAGE}"))?;
    if !args.positional.is_empty() {
        return Err(format!("unexpected {:?}\n{USAGE}", args.positional));
    }
    let quick = args.switch("quick");
    let a = SkewArgs {
        files: args.number("files")?.unwrap_or(if quick { 20 } else { 40 }),
        reads: args.number("reads")?.unwrap_or(if quick { 1200 } else { 4000 }),
        zipf: args.number("zipf")?.unwrap_or(1.2),
        ssd_share: args.number("ssd-share")?.unwrap_or(0.5),
        promote_policy: args.value("promote-policy").unwrap_or("ALL_SSD").to_ascii_uppercase(),
        windows: args.number("windows")?.unwrap_or(if quick { 6 } else { 10 }),
        read_interval_ms: args.number("read-interval-ms")?.unwrap_or(20),
        json: args.value("json").map(PathBuf::from),
    };
    let valid = (2..=10_000).contains(&a.files)
        && (1..=100).contains(&a.windows)
        && (a.windows..=1_000_000).contains(&a.reads)
        && a.zipf > 0.0
        && a.zipf <= 10.0
        && a.ssd_share > 0.0
        && a.ssd_share < 1.0
        && a.read_interval_ms <= 10_000
        && matches!(a.promote_policy.as_str(), "ONE_SSD" | "ALL_SSD");
    if !valid {
        return Err("files 2 to 10000, windows 1 to 100, reads from windows to 1000000, zipf 0 to 10, ssd-share between 0 and 1, promote-policy ONE_SSD or ALL_SSD, read interval at most 10000 ms".into());
    }
    Ok(a)
}

pub fn parse_result(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT_PREFIX))
        .ok_or_else(|| "no OHB_TIERS_SKEW_RESULT line".to_string())?;
    serde_json::from_str(line).map_err(|e| format!("bad result line {line}: {e}"))
}

/// The table: one line per window, then the service's counters and the target.
pub fn render(r: &Value, check: &Check) -> String {
    let column = |key: &str| r[key].as_array().cloned().unwrap_or_default();
    let (ends, secs, ssd, fastest) =
        (column("window_reads_end"), column("window_t_s"), column("window_ssd_fraction"), column("window_fastest_fraction"));
    let mut out = format!(
        "ohb hdfs tiers skew: {} files of 1 MiB, {} reads, Zipf {}, SSD {} B per DataNode ({} of them at start on SSD), promoted to {}\n",
        r["files"], r["reads"], r["zipf"], r["ssd_bytes_per_datanode"], r["files_with_ssd_replica_at_start"],
        r["promote_policy"].as_str().unwrap_or("?")
    );
    out += &format!("  {:>9} {:>8} {:>10} {:>16}\n", "reads", "t_s", "from_ssd", "from_fastest_held");
    for (i, end) in ends.iter().enumerate() {
        let pct = |v: Option<&Value>| v.and_then(Value::as_f64).map(|x| format!("{:.1} %", 100.0 * x)).unwrap_or("-".into());
        out += &format!(
            "  {:>9} {:>8.1} {:>10} {:>16}\n",
            end.as_f64().unwrap_or(0.0),
            secs.get(i).and_then(Value::as_f64).unwrap_or(0.0),
            pct(ssd.get(i)),
            pct(fastest.get(i))
        );
    }
    out += &format!(
        "  tiering service: {} batches, {} promotions ({} B), {} evictions ({} B), {} failures\n",
        r["tiering_Batches"], r["tiering_Promotions"], r["tiering_PromotedBytes"], r["tiering_Evictions"], r["tiering_EvictedBytes"],
        r["tiering_Failures"]
    );
    let verdict = match check.pass {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "no figure",
    };
    out += &format!(
        "  {}: {} ({verdict}; from the fastest tier holding a replica: {})\n",
        check.name,
        check.ratio.map(|x| format!("{:.1} %", 100.0 * x)).unwrap_or("-".into()),
        r["fastest_fraction_after_warmup"].as_f64().map(|x| format!("{:.1} %", 100.0 * x)).unwrap_or("-".into())
    );
    out
}

pub fn check(r: &Value) -> Check {
    Check::at_least(
        format!("reads from SSD after warm-up >= {:.0} %", TARGET_FRACTION * 100.0),
        r["ssd_fraction_after_warmup"].as_f64(),
        TARGET_FRACTION,
    )
}

pub fn skew_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let a = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let dir = root.join("build").join(format!("ohb-hdfs-tiers-skew-{}", std::process::id()));
    let mut cmd = bench_jvm(&root, "ohb-hdfs", "1g")?;
    cmd.arg("io.slipstream.ohb.hdfs.TiersSkewBench")
        .args(["--files", &a.files.to_string(), "--reads", &a.reads.to_string(), "--zipf", &a.zipf.to_string()])
        .args(["--ssd-share", &a.ssd_share.to_string(), "--windows", &a.windows.to_string()])
        .args(["--promote-policy", &a.promote_policy])
        .args(["--read-interval-ms", &a.read_interval_ms.to_string()])
        .arg("--disk-dir")
        .arg(&dir);
    eprintln!("ohb hdfs tiers skew: running ...");
    let captured = run_captured("ohb-hdfs-tiers-skew", cmd, RUN_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    let captured = captured?;
    let log = root.join("build").join("ohb-hdfs-tiers-skew.log");
    std::fs::write(&log, format!("{}\n--- stderr ---\n{}", captured.stdout, captured.stderr))
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let result = parse_result(&captured.stdout).map_err(|e| format!("{e}; log: {}", log.display()))?;
    if !captured.status.success() || result["ok"] != json!(true) {
        return Err(format!("ohb hdfs tiers skew failed ({}): {}; log: {}", captured.status, result["failure"], log.display()));
    }
    let check = check(&result);
    print!("{}", render(&result, &check));
    let path = a.json.clone().unwrap_or_else(|| root.join("results").join("ohb-hdfs-tiers-skew.json"));
    write_json(&path, &json!({"bench": "hdfs tiers skew", "result": result, "targets": [check.to_json()]}))?;
    println!("results: {}", path.display());
    println!("ohb hdfs tiers skew: {:.0} s in all", started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_quick_defaults_overrides_and_refuses_bad_values() {
        let q = parse_args(&words("--quick")).unwrap();
        assert_eq!((q.files, q.reads, q.windows), (20, 1200, 6));
        let a = parse_args(&words("--files 10 --reads 100 --zipf 0.9 --ssd-share 0.3 --windows 5 --json x.json")).unwrap();
        assert_eq!((a.files, a.reads, a.zipf, a.ssd_share, a.windows), (10, 100, 0.9, 0.3, 5));
        assert_eq!(a.json, Some(PathBuf::from("x.json")));
        assert_eq!(a.promote_policy, "ALL_SSD");
        assert_eq!(parse_args(&words("--promote-policy one_ssd")).unwrap().promote_policy, "ONE_SSD");
        for bad in ["--files 1", "--reads 3 --windows 4", "--zipf 0", "--ssd-share 1", "--windows 0", "--read-interval-ms 10001", "--promote-policy COLD", "extra"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_result_line_is_found_and_judged_and_shown() {
        let stdout = "log line\nOHB_TIERS_SKEW_RESULT {\"files\":20,\"reads\":4,\"zipf\":1.2,\"ssd_bytes_per_datanode\":1,\
                      \"files_with_ssd_replica_at_start\":6,\"promote_policy\":\"ONE_SSD\",\"window_reads_end\":[2,4],\"window_t_s\":[1.0,2.0],\
                      \"window_ssd_fraction\":[0.5,0.95],\"window_fastest_fraction\":[1.0,1.0],\
                      \"ssd_fraction_after_warmup\":0.95,\"fastest_fraction_after_warmup\":1.0,\"tiering_Batches\":3,\
                      \"tiering_Promotions\":2,\"tiering_PromotedBytes\":6,\"tiering_Evictions\":1,\"tiering_EvictedBytes\":3,\
                      \"tiering_Failures\":0,\"ok\":true}\nmore log\n";
        let r = parse_result(stdout).unwrap();
        let c = check(&r);
        assert_eq!(c.pass, Some(true));
        let table = render(&r, &c);
        assert!(table.contains("95.0 %") && table.contains("2 promotions") && table.contains("(met;"), "{table}");
        assert!(table.contains("promoted to ONE_SSD"), "{table}");
        let missed = parse_result(&stdout.replace("\"ssd_fraction_after_warmup\":0.95", "\"ssd_fraction_after_warmup\":0.5")).unwrap();
        assert_eq!(check(&missed).pass, Some(false));
        assert!(parse_result("no result here").is_err());
    }
}
