//! `ohb hdfs`'s flags, the JVM runs (one per configuration) and the output.

use super::render::{parse_result, render};
use super::{is_write, Workload, CONFIGS, TESTS};
use crate::child::{bench_jvm, find_repo_root, run_captured};
use crate::output::write_json;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One configuration's JVM run (cluster, files, measurement): bounded, then killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const USAGE: &str = "Usage: ohb hdfs dfsio [options] (ohb hdfs dfsio --help)\n       ohb hdfs swl|srl|rrl|swt|srt|all [--quick] [--file-bytes N] [--block-bytes N] [--readers N] \
                     [--seek-bytes N] [--read-bytes N] [--iterations N] [--configs LIST] [--json FILE] [--no-progress]\n";

fn take_value(argv: &[String], i: &mut usize) -> Result<String, String> {
    *i += 1;
    argv.get(*i).cloned().ok_or_else(|| format!("{} needs a value", argv[*i - 1]))
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{flag}: not a number: {text}"))
}

/// The tests with their workloads, the configurations to run, and where the JSON goes.
pub fn parse_args(argv: &[String]) -> Result<(Vec<Workload>, Vec<String>, Option<PathBuf>), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    let tests: Vec<&str> = match test {
        "swl" | "srl" | "rrl" | "swt" | "srt" => vec![test],
        "all" => TESTS.to_vec(),
        _ => return Err(format!("which HDFS test? swl, srl, rrl, swt, srt, all or dfsio (got '{test}')\n{USAGE}")),
    };
    let quick = argv.iter().any(|a| a == "--quick");
    let mut workloads: Vec<Workload> = tests.iter().map(|t| Workload::new(t, quick)).collect();
    let mut configs: Vec<String> = CONFIGS.iter().map(|c| c.to_string()).collect();
    let mut json = None;
    let mut i = 1;
    while i < argv.len() {
        let flag = argv[i].clone();
        match flag.as_str() {
            "--quick" | "--no-progress" => {}
            "--json" => json = Some(PathBuf::from(take_value(argv, &mut i)?)),
            "--configs" => {
                configs = take_value(argv, &mut i)?.split(',').map(str::to_string).collect();
                if let Some(bad) = configs.iter().find(|c| !CONFIGS.contains(&c.as_str())) {
                    return Err(format!("unknown configuration {bad}; one of {}", CONFIGS.join(", ")));
                }
                if !configs.iter().any(|c| c == "vanilla") {
                    return Err("--configs must include vanilla (the ratios are against it)".into());
                }
            }
            "--file-bytes" | "--block-bytes" | "--readers" | "--seek-bytes" | "--read-bytes" | "--iterations" => {
                let value = take_value(argv, &mut i)?;
                for w in &mut workloads {
                    match flag.as_str() {
                        "--file-bytes" => w.file_bytes = number(&flag, &value)?,
                        "--block-bytes" => w.block_bytes = number(&flag, &value)?,
                        "--readers" => w.readers = number(&flag, &value)?,
                        "--seek-bytes" => w.seek_bytes = number(&flag, &value)?,
                        "--read-bytes" => w.read_bytes = number(&flag, &value)?,
                        _ => w.iterations = number(&flag, &value)?,
                    }
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 1;
    }
    for w in &workloads {
        if !(1..=4 << 30).contains(&w.file_bytes)
            || !(64 << 10..=2 << 30).contains(&w.block_bytes)
            || w.block_bytes % 512 != 0
            || !(1..=16).contains(&w.readers)
            || !(1..=1000).contains(&w.iterations)
            || w.read_bytes == 0
            || w.seek_bytes < w.read_bytes as u64
            || w.read_bytes as u64 > w.file_bytes
        {
            return Err("file 1 B to 4 GiB, block 64 KiB to 2 GiB (a multiple of 512), readers 1 to 16, iterations 1 to 1000, \
                        read bytes at least 1 and at most the seek interval and the file"
                .into());
        }
    }
    Ok((workloads, configs, json))
}

fn run_jvm(root: &Path, workload: &Workload, config: &str) -> Result<Value, String> {
    let mut cmd = bench_jvm(root, "ohb-hdfs", "2g")?;
    cmd
        .arg("io.slipstream.ohb.hdfs.HdfsBench")
        .args(["--test", &workload.test, "--config", config])
        .args(["--file-bytes", &workload.file_bytes.to_string(), "--block-bytes", &workload.block_bytes.to_string()])
        .args(["--readers", &workload.readers.to_string(), "--iterations", &workload.iterations.to_string()])
        .args(["--seek-bytes", &workload.seek_bytes.to_string(), "--read-bytes", &workload.read_bytes.to_string()])
        .arg("--work")
        .arg(root.join("build/ohb-hdfs"));
    eprintln!("ohb hdfs {}: running {config} ...", workload.test);
    let captured = run_captured("ohb-hdfs", cmd, RUN_TIMEOUT)?;
    std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
    let log = root.join("build").join(format!("ohb-hdfs-{}-{config}.log", workload.test));
    std::fs::write(&log, &captured.stderr).map_err(|e| format!("{}: {e}", log.display()))?;
    let result = parse_result(&captured.stdout);
    if !captured.status.success() {
        let reasons: Vec<&str> = captured.stderr.lines().filter(|l| l.starts_with("ohb hdfs")).collect();
        return Err(format!("{config} failed ({}); log: {}\n{}", captured.status, log.display(), reasons.join("\n")));
    }
    result.map_err(|e| format!("{e}; log: {}", log.display()))
}

pub fn hdfs_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    if argv.first().map(String::as_str) == Some("meta") {
        return super::meta::meta_main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("dfsio") {
        return super::dfsio::dfsio_main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("tiers") {
        return super::tiers::tiers_main(&argv[1..]);
    }
    let (workloads, configs, json_path) = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let mut tests = Vec::new();
    let mut failures = Vec::new();
    for workload in &workloads {
        let mut results = Vec::new();
        for config in &configs {
            if is_write(&workload.test) && config == "vanilla-sc" {
                continue; // short-circuit is a read path
            }
            match run_jvm(&root, workload, config) {
                Ok(result) => results.push(result),
                Err(e) => failures.push(format!("{} {config}: {e}", workload.test)),
            }
        }
        print!("{}", render(workload, &results));
        println!();
        tests.push(json!({"bench": format!("hdfs {}", workload.test), "workload": {
            "file_bytes": workload.file_bytes, "block_bytes": workload.block_bytes, "readers": workload.readers,
            "seek_bytes": workload.seek_bytes, "read_bytes": workload.read_bytes, "iterations": workload.iterations},
            "runs": results}));
    }
    let value = if tests.len() == 1 { tests.remove(0) } else { json!({"bench": "hdfs all", "tests": tests}) };
    let path = json_path.unwrap_or_else(|| root.join("results").join(format!("ohb-hdfs-{}.json", argv[0])));
    write_json(&path, &value)?;
    println!("results: {}", path.display());
    println!("ohb hdfs {}: {:.0} s in all", argv[0], started.elapsed().as_secs_f64());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} point(s) failed:\n{}", failures.len(), failures.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_tests_configs_and_overrides() {
        let (w, configs, json) = parse_args(&words("all --quick --readers 3 --configs vanilla,plugin --json x.json")).unwrap();
        assert_eq!(w.len(), 5);
        assert_eq!(w[4].test, "srt");
        assert_eq!(w[3].test, "swt");
        assert_eq!(w[3].file_bytes, 16 << 20);
        assert_eq!(w[0].readers, 3);
        assert_eq!(configs, vec!["vanilla", "plugin"]);
        assert_eq!(json, Some(PathBuf::from("x.json")));
        for bad in [
            "swx",
            "srl --readers 0",
            "srl --configs plugin",
            "srl --configs vanilla,bogus",
            "srl --iterations",
            "rrl --read-bytes 100000 --seek-bytes 4096",
            "srl --block-bytes 1000",
            "srl --bogus 1",
        ] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn latency_defaults_are_the_targets_one_mebibyte_files() {
        assert_eq!(Workload::new("srl", false).file_bytes, 1 << 20);
        assert_eq!(Workload::new("rrl", true).file_bytes, 1 << 20);
        assert!(Workload::new("srt", false).file_bytes >= 64 << 20);
        assert_eq!(Workload::new("swt", false).iterations, 10, "enough runs for a median");
    }
}
