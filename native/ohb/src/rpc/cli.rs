//! `ohb rpc`'s flags, the JVM run and the output.

use super::render::{failures, parse_results, render_checks, render_lat, render_thr};
use super::CONFIGS;
use crate::child::{bench_jvm, find_repo_root, run_captured_per_config};
use crate::output::{fail_if_points_failed, run_stamp, write_json};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// One configuration's JVM run (its server, every point): bounded, then killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const USAGE: &str = "Usage: ohb rpc lat|thr [--quick] [--sizes LIST] [--iterations N] [--warmup N] [--clients LIST] \
                     [--thr-bytes N] [--duration-ms N] [--warmup-ms N] [--configs LIST] [--json FILE]\n";

/// What to run: the test, the configurations (each in its own client JVM) and the JVM side's other
/// arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub test: String,
    pub configs: Vec<String>,
    pub jvm_args: Vec<String>,
    pub json: Option<PathBuf>,
}

pub fn parse_args(argv: &[String]) -> Result<Run, String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    if test != "lat" && test != "thr" {
        return Err(format!("which RPC test? lat, thr or callbench (got '{test}')\n{USAGE}"));
    }
    let quick = argv.iter().any(|a| a == "--quick");
    let mut jvm_args: Vec<String> = vec![test.to_string()];
    if quick {
        jvm_args.extend(
            ["--sizes", "1,4096,65536", "--iterations", "500", "--warmup", "200", "--clients", "1,8", "--duration-ms", "500", "--warmup-ms", "500"]
                .map(String::from),
        );
    }
    let mut json = None;
    let mut configs: Vec<String> = CONFIGS.iter().map(|c| c.to_string()).collect();
    let mut i = 1;
    while i < argv.len() {
        let flag = argv[i].as_str();
        match flag {
            "--quick" | "--no-progress" => {}
            "--json" | "--sizes" | "--iterations" | "--warmup" | "--clients" | "--thr-bytes" | "--duration-ms" | "--warmup-ms"
            | "--configs" => {
                i += 1;
                let value = argv.get(i).ok_or_else(|| format!("{flag} needs a value"))?;
                if flag == "--json" {
                    json = Some(PathBuf::from(value));
                } else if flag == "--configs" {
                    configs = super::callbench::configs(value)?;
                } else {
                    validate(flag, value)?;
                    jvm_args.push(flag.to_string());
                    jvm_args.push(value.clone());
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 1;
    }
    Ok(Run { test: test.to_string(), configs, jvm_args, json })
}

fn validate(flag: &str, value: &str) -> Result<(), String> {
    let (low, high): (u64, u64) = match flag {
        "--sizes" | "--thr-bytes" => (1, 64 << 20),
        "--clients" => (1, 64),
        "--duration-ms" | "--warmup-ms" => (10, 600_000),
        _ => (0, 10_000_000),
    };
    for part in value.split(',') {
        let n: u64 = part.parse().map_err(|_| format!("{flag}: not a number: {part}"))?;
        if n < low || n > high || (value.contains(',') && !matches!(flag, "--sizes" | "--clients")) {
            return Err(format!("{flag}: {part} is outside {low}..={high} (or a list where one number goes)"));
        }
    }
    Ok(())
}

pub fn rpc_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    if argv.first().map(String::as_str) == Some("callbench") {
        return super::callbench::callbench_main(&argv[1..]);
    }
    let run = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let captured = run_captured_per_config("ohb rpc", &run.configs, RUN_TIMEOUT, |config| {
        let mut cmd = bench_jvm(&root, "ohb-rpc", "1g")?;
        cmd.arg("io.slipstream.ohb.rpc.RpcBench").args(&run.jvm_args).args(["--configs", config]);
        Ok(cmd)
    })?;
    let log = root.join("build").join(format!("ohb-rpc-{}.log", run.test));
    std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
    std::fs::write(&log, &captured.stderr).map_err(|e| format!("{}: {e}", log.display()))?;
    let results = parse_results(&captured.stdout)?;
    let (table, checks) = if run.test == "lat" { render_lat(&results) } else { render_thr(&results) };
    print!("{table}{}", render_checks(&checks));
    let value = json!({
        "bench": format!("rpc {}", run.test),
        "run": run_stamp(),
        "results": results,
        "targets": checks.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
    });
    let path = run.json.clone().unwrap_or_else(|| root.join("results").join(format!("ohb-rpc-{}.json", run.test)));
    write_json(&path, &value)?;
    println!("results: {}", path.display());
    let mut failed = failures(&results);
    if !captured.status.success() && failed.is_empty() {
        failed.push(format!("the JVM side exited with {}; log: {}", captured.status, log.display()));
    }
    if results.is_empty() && failed.is_empty() {
        failed.push(format!("no results; log: {}", log.display()));
    }
    fail_if_points_failed(&format!("ohb rpc {}", run.test), &failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_tests_and_passes_options_to_the_jvm() {
        let run = parse_args(&words("lat --sizes 1,4096 --iterations 100 --json x.json")).unwrap();
        assert_eq!(run.jvm_args, words("lat --sizes 1,4096 --iterations 100"));
        assert_eq!(run.json, Some(PathBuf::from("x.json")));
        assert_eq!(run.configs, words("vanilla fabric fabric-tcp"));
        let quick = parse_args(&words("thr --quick --configs fabric,vanilla")).unwrap();
        // Each configuration gets its own JVM (`--configs <one>`), in the order given.
        assert_eq!(quick.configs, words("fabric vanilla"));
        assert!(!quick.jvm_args.contains(&"--configs".to_string()), "{:?}", quick.jvm_args);
        for bad in ["", "bw", "lat --sizes", "lat --sizes 0", "thr --clients 65", "lat --configs fabric,grpc", "lat --bogus 1",
            "lat --iterations 1,2"]
        {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }
}
