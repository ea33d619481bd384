//! `ohb hdfs dfsio`: Hadoop's own `TestDFSIO` (the hadoop-mapreduce-client-jobclient 3.4.2 tests
//! jar, unmodified) `-write` then `-read`, for vanilla HDFS, the plugin and the plugin forced to
//! TCP side by side, each in its own JVM with its own mini cluster (a NameNode and three DataNodes,
//! replication 3, short-circuit reads off). TestDFSIO's MapReduce job runs in the LocalJobRunner
//! (`mapreduce.framework.name=local`): its map tasks are threads of that JVM, beside the cluster.
//!
//! The JVM side (`io.slipstream.ohb.hdfs.DfsioBench` in `jvm/ohb-hdfs`) prints TestDFSIO's own
//! result file (`----- TestDFSIO ----- : write` blocks) and an `OHB_HDFS_DFSIO {json}` line with
//! the plugin's counters; it exits non-zero when TestDFSIO fails or a plugin run moved fewer bytes
//! over the fabric (client or DataNodes) than TestDFSIO did. Here TestDFSIO's lines are parsed,
//! checked (both tests, every file, every byte), and set side by side with ratios against vanilla.
//! Logs go to `build/ohb-hdfs-dfsio-<config>.log`.

use crate::child::{bench_jvm, find_repo_root, run_logged};
use crate::output::write_json;
use crate::stats::{median, round_order};
use crate::table::format_ratio;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The configurations, in the order they run (no short-circuit reference: the issue names none for TestDFSIO).
pub const DFSIO_CONFIGS: [&str; 3] = ["vanilla", "plugin", "plugin-tcp"];
/// TestDFSIO's tests, in the order they run (read needs write's files).
pub const DFSIO_TESTS: [&str; 2] = ["write", "read"];
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const MIB: u64 = 1 << 20;
const USAGE: &str = "Usage: ohb hdfs dfsio [--quick] [--files N] [--file-bytes N] [--block-bytes N] [--maps N] [--rounds N] [--configs LIST] [--json FILE] [--no-progress]\n";

/// One run's parameters: TestDFSIO's `-nrFiles` and `-size`, the block size, how many map tasks
/// the LocalJobRunner runs at once (`mapreduce.local.map.tasks.maximum`), and how many rounds of
/// all configurations (each round in a rotated order; the table shows medians over the rounds).
#[derive(Debug, Clone, PartialEq)]
pub struct DfsioWorkload {
    pub files: u32,
    pub file_bytes: u64,
    pub block_bytes: u64,
    pub maps: u32,
    pub rounds: u32,
}

impl DfsioWorkload {
    /// 2 files of 256 MiB, 3 rounds (one round of 2 files of 16 MiB with `--quick`), 2 maps at once
    /// (the machine's 2 cores), 128 MiB blocks. Rounds because one run on the shared 2-core machine
    /// swung vanilla's read from 54 to 433 MB/s.
    pub fn new(quick: bool) -> DfsioWorkload {
        DfsioWorkload {
            files: 2,
            file_bytes: if quick { 16 * MIB } else { 256 * MIB },
            block_bytes: 128 * MIB,
            maps: 2,
            rounds: if quick { 1 } else { 3 },
        }
    }
}

/// One `----- TestDFSIO ----- : <test>` block of TestDFSIO's result file.
#[derive(Debug, Clone, PartialEq)]
pub struct DfsioResult {
    pub test: String,
    pub files: u64,
    pub mb_processed: f64,
    /// TestDFSIO's "Throughput mb/sec": all bytes over the sum of the map tasks' I/O times.
    pub throughput_mb_s: f64,
    /// TestDFSIO's "Average IO rate mb/sec": the mean of the map tasks' own rates.
    pub io_rate_mb_s_avg: f64,
    pub io_rate_mb_s_std_dev: f64,
    /// TestDFSIO's "Test exec time sec": the whole job, set-up included.
    pub exec_s: f64,
}

/// TestDFSIO's numbers are printed with the JVM's default locale's `DecimalFormat("#.##")`: no
/// grouping, the decimal separator '.' or ','.
fn decimal(text: &str) -> Option<f64> {
    text.trim().replace(',', ".").parse().ok()
}

/// The result blocks in `stdout`; log lines (which carry a prefix before the marker) are skipped.
/// A block missing a figure is an error: a changed TestDFSIO must not pass as zeros.
pub fn parse_dfsio(stdout: &str) -> Result<Vec<DfsioResult>, String> {
    let mut results = Vec::new();
    let mut lines = stdout.lines();
    while let Some(line) = lines.next() {
        let Some(test) = line.strip_prefix("----- TestDFSIO ----- : ") else { continue };
        let mut fields = std::collections::HashMap::new();
        for line in lines.by_ref() {
            let Some((key, value)) = line.split_once(": ") else { break };
            fields.insert(key.trim().to_string(), value.trim().to_string());
        }
        let get = |key: &str| {
            fields.get(key).and_then(|v| decimal(v)).ok_or_else(|| format!("TestDFSIO {test}: no '{key}' figure in its result block"))
        };
        results.push(DfsioResult {
            test: test.trim().to_string(),
            files: get("Number of files")? as u64,
            mb_processed: get("Total MBytes processed")?,
            throughput_mb_s: get("Throughput mb/sec")?,
            io_rate_mb_s_avg: get("Average IO rate mb/sec")?,
            io_rate_mb_s_std_dev: get("IO rate std deviation")?,
            exec_s: get("Test exec time sec")?,
        });
    }
    Ok(results)
}

/// TestDFSIO's write and read results of one run, checked against what was asked: both tests,
/// every file, every mebibyte (TestDFSIO prints MB to 2 decimals).
pub fn check_results(results: &[DfsioResult], workload: &DfsioWorkload) -> Result<(), String> {
    let expected_mb = workload.files as f64 * workload.file_bytes as f64 / MIB as f64;
    for test in DFSIO_TESTS {
        let r = results.iter().find(|r| r.test == test).ok_or_else(|| format!("no TestDFSIO {test} result"))?;
        if r.files != workload.files as u64 || (r.mb_processed - expected_mb).abs() > 0.01 {
            return Err(format!("TestDFSIO {test}: {} files, {} MB processed; asked {} files, {expected_mb} MB", r.files, r.mb_processed, workload.files));
        }
        if r.throughput_mb_s <= 0.0 || r.exec_s <= 0.0 {
            return Err(format!("TestDFSIO {test}: throughput {} MB/s in {} s", r.throughput_mb_s, r.exec_s));
        }
    }
    Ok(())
}

/// The issue's target for a configuration: (minimum ratio of TestDFSIO's throughput to vanilla's, its text).
pub fn dfsio_target(config: &str) -> Option<(f64, &'static str)> {
    match config {
        "plugin" => Some((1.5, ">= 1.5x vanilla")),
        "plugin-tcp" => Some((0.9, ">= 0.9x vanilla")),
        _ => None,
    }
}

fn parse_args(argv: &[String]) -> Result<(DfsioWorkload, Vec<String>, Option<PathBuf>), String> {
    let mut workload = DfsioWorkload::new(argv.iter().any(|a| a == "--quick"));
    let mut configs: Vec<String> = DFSIO_CONFIGS.iter().map(|c| c.to_string()).collect();
    let mut json = None;
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        let mut value = || {
            i += 1;
            argv.get(i).cloned().ok_or_else(|| format!("{flag} needs a value"))
        };
        let number = |text: String| text.parse::<u64>().map_err(|_| format!("{flag}: not a number: {text}"));
        match flag {
            "--quick" | "--no-progress" => {}
            "--json" => json = Some(PathBuf::from(value()?)),
            "--files" => workload.files = u32::try_from(number(value()?)?).map_err(|_| "--files: too large".to_string())?,
            "--file-bytes" => workload.file_bytes = number(value()?)?,
            "--block-bytes" => workload.block_bytes = number(value()?)?,
            "--maps" => workload.maps = u32::try_from(number(value()?)?).map_err(|_| "--maps: too large".to_string())?,
            "--rounds" => workload.rounds = u32::try_from(number(value()?)?).map_err(|_| "--rounds: too large".to_string())?,
            "--configs" => {
                configs = value()?.split(',').map(str::to_string).collect();
                if let Some(bad) = configs.iter().find(|c| !DFSIO_CONFIGS.contains(&c.as_str())) {
                    return Err(format!("unknown configuration {bad}; one of {}", DFSIO_CONFIGS.join(", ")));
                }
                if !configs.iter().any(|c| c == "vanilla") {
                    return Err("--configs must include vanilla (the ratios are against it)".into());
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 1;
    }
    let w = &workload;
    if !(1..=64).contains(&w.files)
        || !(MIB..=16 << 30).contains(&w.file_bytes)
        || !(64 << 10..=2 << 30).contains(&w.block_bytes)
        || w.block_bytes % 512 != 0
        || !(1..=16).contains(&w.maps)
        || !(1..=9).contains(&w.rounds)
    {
        return Err("files 1 to 64, file 1 MiB to 16 GiB, block 64 KiB to 2 GiB (a multiple of 512), maps 1 to 16, rounds 1 to 9".into());
    }
    Ok((workload, configs, json))
}

/// The JVM's `OHB_HDFS_DFSIO {json}` line: its configuration, exit codes and fabric byte counts.
fn parse_counters(stdout: &str) -> Result<Value, String> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("OHB_HDFS_DFSIO ")).ok_or("no OHB_HDFS_DFSIO line")?;
    serde_json::from_str(line).map_err(|e| format!("bad OHB_HDFS_DFSIO line {line}: {e}"))
}

fn run_jvm(root: &Path, w: &DfsioWorkload, config: &str) -> Result<(Vec<DfsioResult>, Value), String> {
    let mut cmd = bench_jvm(root, "ohb-hdfs", "2g")?;
    cmd.arg("io.slipstream.ohb.hdfs.DfsioBench")
        .args(["--config", config, "--files", &w.files.to_string(), "--file-bytes", &w.file_bytes.to_string()])
        .args(["--block-bytes", &w.block_bytes.to_string(), "--maps", &w.maps.to_string()])
        .arg("--work")
        .arg(root.join("build/ohb-hdfs"));
    eprintln!("ohb hdfs dfsio: running {config} ...");
    std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
    let log = root.join("build").join(format!("ohb-hdfs-dfsio-{config}.log"));
    let captured = run_logged("ohb-hdfs-dfsio", cmd, RUN_TIMEOUT, &log)?;
    if !captured.status.success() {
        let reasons: Vec<&str> = captured.stderr.lines().filter(|l| l.starts_with("ohb hdfs dfsio:")).collect();
        return Err(format!("{config} failed ({}); log: {}\n{}", captured.status, log.display(), reasons.join("\n")));
    }
    let counters = parse_counters(&captured.stdout).map_err(|e| format!("{e}; log: {}", log.display()))?;
    let results = parse_dfsio(&captured.stdout).map_err(|e| format!("{e}; log: {}", log.display()))?;
    check_results(&results, w).map_err(|e| format!("{e}; log: {}", log.display()))?;
    Ok((results, counters))
}

/// One configuration's figures in one round: TestDFSIO's results and the JVM's counter line.
pub struct DfsioRun {
    pub config: String,
    pub round: u32,
    pub results: Vec<DfsioResult>,
    pub counters: Value,
}

impl DfsioRun {
    /// As the JSON keeps it: TestDFSIO's blocks under `testdfsio`, the JVM's line under `counters`.
    pub fn to_json(&self) -> Value {
        let tests: Vec<Value> = self
            .results
            .iter()
            .map(|x| {
                json!({"test": x.test, "files": x.files, "mb_processed": x.mb_processed, "throughput_mb_s": x.throughput_mb_s,
                "io_rate_mb_s_avg": x.io_rate_mb_s_avg, "io_rate_mb_s_std_dev": x.io_rate_mb_s_std_dev, "exec_s": x.exec_s})
            })
            .collect();
        json!({"config": self.config, "round": self.round, "testdfsio": tests, "counters": self.counters})
    }
}

/// A configuration's medians over its rounds of one test: (TestDFSIO's throughput, its average
/// IO rate, exec s, the lowest and highest throughput), or None when no round of it passed.
pub(crate) fn medians(runs: &[DfsioRun], config: &str, test: &str) -> Option<(f64, f64, f64, f64, f64)> {
    let of = |f: fn(&DfsioResult) -> f64| -> Vec<f64> {
        runs.iter().filter(|r| r.config == config).filter_map(|r| r.results.iter().find(|x| x.test == test)).map(f).collect()
    };
    let throughput = of(|r| r.throughput_mb_s);
    let lowest = throughput.iter().cloned().fold(f64::INFINITY, f64::min);
    let highest = throughput.iter().cloned().fold(0.0, f64::max);
    Some((median(&throughput)?, median(&of(|r| r.io_rate_mb_s_avg))?, median(&of(|r| r.exec_s))?, lowest, highest))
}

/// The table: one block per TestDFSIO test, rows in [`DFSIO_CONFIGS`] order, medians over the
/// rounds and the ratio of a configuration's median "Throughput mb/sec" to vanilla's.
pub fn render_dfsio(w: &DfsioWorkload, runs: &[DfsioRun]) -> String {
    let mut out = format!(
        "ohb hdfs dfsio: Hadoop's TestDFSIO, {} files of {} B, block {} B, replication 3, {} maps at once (LocalJobRunner); \
         medians of {} round(s), configurations in rotated order\n",
        w.files, w.file_bytes, w.block_bytes, w.maps, w.rounds
    );
    for test in DFSIO_TESTS {
        let vanilla = medians(runs, "vanilla", test).map(|m| m.0);
        out += &format!(
            "TestDFSIO {test}\n{:<12} {:>10} {:>17} {:>10} {:>8} {:>10} {:>14} {:>14}  target\n",
            "config", "MB/s", "min-max", "avg rate", "exec s", "vs vanilla", "fabric client", "fabric DNs"
        );
        for config in DFSIO_CONFIGS {
            let Some(run) = runs.iter().find(|r| r.config == config) else { continue };
            let Some((throughput, rate, exec_s, lowest, highest)) = medians(runs, config, test) else {
                out += &format!("{config:<12} {:>10}\n", "failed");
                continue;
            };
            let ratio = vanilla.filter(|v| *v > 0.0).map(|v| throughput / v);
            let verdict = match (dfsio_target(config), ratio) {
                (Some((min, text)), Some(g)) => format!("{text}: {}", if g >= min { "met" } else { "MISSED" }),
                (Some((_, text)), None) => format!("{text}: no vanilla figure"),
                _ => String::new(),
            };
            let counter = |side: &str| run.counters[format!("{test}_fabric_bytes_{side}")].as_u64().map(|b| b.to_string()).unwrap_or_default();
            out += &format!(
                "{:<12} {:>10.2} {:>17} {:>10.2} {:>8.2} {:>10} {:>14} {:>14}  {}\n",
                config,
                throughput,
                format!("{lowest:.1}-{highest:.1}"),
                rate,
                exec_s,
                ratio.map(format_ratio).unwrap_or_else(|| "-".into()),
                counter("client"),
                counter("datanodes"),
                verdict
            );
        }
    }
    out
}

pub fn dfsio_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let (workload, configs, json_path) = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for round in 0..workload.rounds {
        for config in round_order(&configs, round as usize) {
            match run_jvm(&root, &workload, &config) {
                Ok((results, counters)) => runs.push(DfsioRun { config, round, results, counters }),
                Err(e) => failures.push(format!("dfsio {config} (round {}): {e}", round + 1)),
            }
        }
    }
    print!("{}", render_dfsio(&workload, &runs));
    let runs_json: Vec<Value> = runs.iter().map(DfsioRun::to_json).collect();
    let value = json!({"bench": "hdfs dfsio", "workload": {"files": workload.files, "file_bytes": workload.file_bytes,
        "block_bytes": workload.block_bytes, "maps": workload.maps, "rounds": workload.rounds}, "runs": runs_json});
    let path = json_path.unwrap_or_else(|| root.join("results").join("ohb-hdfs-dfsio.json"));
    write_json(&path, &value)?;
    println!("results: {}", path.display());
    println!("ohb hdfs dfsio: {:.0} s in all", started.elapsed().as_secs_f64());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} point(s) failed:\n{}", failures.len(), failures.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As TestDFSIO 3.4.2 prints it: a log line (prefixed) and the result file's block.
    const OUTPUT: &str = r#"2026-11-25 09:22:38,1 INFO  [main] fs.TestDFSIO - ----- TestDFSIO ----- : write
----- TestDFSIO ----- : write
            Date & time: Wed Nov 25 09:22:38 UTC 2026
        Number of files: 2
 Total MBytes processed: 32
      Throughput mb/sec: 16.58
 Average IO rate mb/sec: 16.85
  IO rate std deviation: 2.15
     Test exec time sec: 8.4

----- TestDFSIO ----- : read
            Date & time: Wed Nov 25 09:22:40 UTC 2026
        Number of files: 2
 Total MBytes processed: 32
      Throughput mb/sec: 71,27
 Average IO rate mb/sec: 71.33
  IO rate std deviation: 2.06
     Test exec time sec: 1.61

OHB_HDFS_DFSIO {"config":"vanilla"}
"#;

    fn quick() -> DfsioWorkload {
        DfsioWorkload::new(true)
    }

    #[test]
    fn parses_testdfsio_result_blocks_and_skips_its_log_lines() {
        let results = parse_dfsio(OUTPUT).unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].test, "write");
        assert_eq!(results[0].files, 2);
        assert_eq!(results[0].mb_processed, 32.0);
        assert_eq!(results[0].throughput_mb_s, 16.58);
        assert_eq!(results[0].io_rate_mb_s_avg, 16.85);
        assert_eq!(results[0].exec_s, 8.4);
        assert_eq!(results[1].test, "read");
        assert_eq!(results[1].throughput_mb_s, 71.27, "a locale's decimal comma is read too");
        check_results(&results, &quick()).unwrap();
    }

    #[test]
    fn a_block_missing_a_figure_or_bytes_is_an_error() {
        let missing = OUTPUT.replace("      Throughput mb/sec: 16.58\n", "");
        assert!(parse_dfsio(&missing).unwrap_err().contains("Throughput mb/sec"));
        let garbled = OUTPUT.replace("Test exec time sec: 8.4", "Test exec time sec: soon");
        assert!(parse_dfsio(&garbled).is_err());
        let short = parse_dfsio(&OUTPUT.replace(" Total MBytes processed: 32\n      Throughput mb/sec: 71", " Total MBytes processed: 31.5\n      Throughput mb/sec: 71")).unwrap();
        assert!(check_results(&short, &quick()).unwrap_err().contains("read"));
        let write_only = parse_dfsio(OUTPUT.split("----- TestDFSIO ----- : read").next().unwrap()).unwrap();
        assert!(check_results(&write_only, &quick()).unwrap_err().contains("no TestDFSIO read"));
        assert!(parse_dfsio("no result here").unwrap().is_empty());
    }

    #[test]
    fn table_has_ratios_against_vanilla_and_judges_targets() {
        let results = parse_dfsio(OUTPUT).unwrap();
        let faster: Vec<DfsioResult> = results.iter().map(|r| DfsioResult { throughput_mb_s: r.throughput_mb_s * 2.0, ..r.clone() }).collect();
        let slower: Vec<DfsioResult> = results.iter().map(|r| DfsioResult { throughput_mb_s: r.throughput_mb_s * 0.8, ..r.clone() }).collect();
        let counters = json!({"write_fabric_bytes_client": 33554729u64, "write_fabric_bytes_datanodes": 100664187u64});
        let runs = vec![
            DfsioRun { config: "vanilla".into(), round: 0, results, counters: json!({}) },
            DfsioRun { config: "plugin".into(), round: 0, results: faster, counters },
            DfsioRun { config: "plugin-tcp".into(), round: 0, results: slower, counters: json!({}) },
        ];
        let table = render_dfsio(&quick(), &runs);
        assert!(table.contains("TestDFSIO write") && table.contains("TestDFSIO read"), "{table}");
        assert!(table.contains("2.00x") && table.contains(">= 1.5x vanilla: met"), "{table}");
        assert!(table.contains("0.80x") && table.contains(">= 0.9x vanilla: MISSED"), "{table}");
        assert!(table.contains("100664187"), "{table}");
    }

    #[test]
    fn rounds_rotate_the_order_and_the_table_shows_medians() {
        let configs: Vec<String> = DFSIO_CONFIGS.iter().map(|c| c.to_string()).collect();
        assert_eq!(round_order(&configs, 0), configs);
        assert_eq!(round_order(&configs, 1), vec!["plugin", "plugin-tcp", "vanilla"]);
        assert_eq!(round_order(&configs, 3), configs);
        let base = parse_dfsio(OUTPUT).unwrap();
        let scaled = |k: f64| base.iter().map(|r| DfsioResult { throughput_mb_s: r.throughput_mb_s * k, ..r.clone() }).collect::<Vec<_>>();
        let run = |config: &str, round, k| DfsioRun { config: config.into(), round, results: scaled(k), counters: json!({}) };
        // vanilla 1, 1, 9 (median 1); plugin 1, 2, 3 (median 2): 2x, whatever the outlier.
        let runs = vec![run("vanilla", 0, 1.0), run("plugin", 0, 3.0), run("vanilla", 1, 9.0), run("plugin", 1, 1.0), run("vanilla", 2, 1.0), run("plugin", 2, 2.0)];
        let w = DfsioWorkload { rounds: 3, ..quick() };
        let table = render_dfsio(&w, &runs);
        assert!(table.contains("medians of 3 round(s)"), "{table}");
        assert!(table.contains("2.00x"), "{table}");
        assert!(table.contains("16.6-149.2"), "vanilla write's range: {table}");
    }

    #[test]
    fn arguments_are_bounded() {
        let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let (w, configs, json) = parse_args(&words("--quick --files 3 --maps 1 --configs vanilla,plugin --json x.json")).unwrap();
        assert_eq!((w.files, w.file_bytes, w.maps), (3, 16 << 20, 1));
        assert_eq!(configs, vec!["vanilla", "plugin"]);
        assert_eq!(json, Some(PathBuf::from("x.json")));
        assert_eq!(parse_args(&[]).unwrap().0.file_bytes, 256 << 20);
        assert_eq!((parse_args(&[]).unwrap().0.rounds, w.rounds), (3, 1));
        assert_eq!(parse_args(&words("--rounds 5")).unwrap().0.rounds, 5);
        for bad in ["--files 0", "--files 65", "--maps 0", "--file-bytes 1000", "--block-bytes 1000", "--configs plugin", "--configs vanilla,vanilla-sc", "--files", "--bogus", "--rounds 0", "--rounds 10"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }
}
