//! `ohb mapreduce`'s flags, the JVM run and the output.

use super::render::{parse_results, render};
use super::{Workload, CONFIGS, TERASORT_KEY_BYTES, TERASORT_VALUE_BYTES};
use crate::child::{bench_jvm, find_repo_root, run_captured};
use crate::output::write_json;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One test's JVM run (a cluster per configuration, every job): bounded, then killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(3600);
const USAGE: &str = "Usage: ohb mapreduce avg|rand|skew|sort|terasort|all [--quick] [--maps N] [--reduces N] [--records N] \
                     [--value-bytes N] [--runs N] [--json FILE] [--no-progress]\n";

fn take_value(argv: &[String], i: &mut usize) -> Result<String, String> {
    *i += 1;
    argv.get(*i).cloned().ok_or_else(|| format!("{} needs a value", argv[*i - 1]))
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{flag}: not a number: {text}"))
}

/// The tests with their workloads, and where the JSON goes.
pub fn parse_args(argv: &[String]) -> Result<(Vec<Workload>, Option<PathBuf>), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    let patterns: Vec<&str> = match test {
        "avg" | "rand" | "skew" | "sort" | "terasort" => vec![test],
        "all" => vec!["avg", "rand", "skew"],
        _ => return Err(format!("which MapReduce test? avg, rand, skew, sort, terasort or all (got '{test}')\n{USAGE}")),
    };
    let quick = argv.iter().any(|a| a == "--quick");
    let mut workloads: Vec<Workload> = patterns.iter().map(|p| Workload::new(p, quick)).collect();
    let mut json = None;
    let mut i = 1;
    while i < argv.len() {
        let flag = argv[i].clone();
        match flag.as_str() {
            "--quick" | "--no-progress" => {}
            "--json" => json = Some(PathBuf::from(take_value(argv, &mut i)?)),
            "--value-bytes" if test == "terasort" => {
                return Err(format!("--value-bytes: TeraGen's records are {TERASORT_KEY_BYTES} + {TERASORT_VALUE_BYTES} bytes, fixed"));
            }
            "--maps" | "--reduces" | "--records" | "--value-bytes" | "--runs" => {
                let value = take_value(argv, &mut i)?;
                for w in &mut workloads {
                    match flag.as_str() {
                        "--maps" => w.maps = number(&flag, &value)?,
                        "--reduces" => w.reduces = number(&flag, &value)?,
                        "--records" => w.records_per_map = number(&flag, &value)?,
                        "--value-bytes" => w.value_bytes = number(&flag, &value)?,
                        _ => w.runs = number(&flag, &value)?,
                    }
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 1;
    }
    for w in &workloads {
        if !(1..=256).contains(&w.maps) || !(1..=256).contains(&w.reduces) || w.records_per_map == 0 || !(1..=20).contains(&w.runs)
        {
            return Err("maps and reducers must be 1 to 256, runs 1 to 20, records at least 1".into());
        }
    }
    Ok((workloads, json))
}

fn run_jvm(root: &Path, workload: &Workload) -> Result<Vec<Value>, String> {
    let mut cmd = bench_jvm(root, "ohb-mapreduce", "1g")?;
    cmd
        .arg("--add-opens=java.base/java.lang=ALL-UNNAMED")
        .arg("io.slipstream.ohb.mapreduce.MapReduceBench")
        .arg(&workload.pattern)
        .args(["--maps", &workload.maps.to_string(), "--reduces", &workload.reduces.to_string()])
        .args(["--records", &workload.records_per_map.to_string(), "--value-bytes", &workload.value_bytes.to_string()])
        .args(["--runs", &workload.runs.to_string(), "--configs", &CONFIGS.join(",")])
        .arg("--work")
        .arg(root.join("build/ohb-mapreduce"));
    eprintln!("ohb mapreduce {}: running {} ...", workload.pattern, CONFIGS.join(", "));
    let captured = run_captured("ohb-mapreduce", cmd, RUN_TIMEOUT)?;
    let log = root.join("build").join(format!("ohb-mapreduce-{}.log", workload.pattern));
    std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
    std::fs::write(&log, &captured.stderr).map_err(|e| format!("{}: {e}", log.display()))?;
    let results = parse_results(&captured.stdout)?;
    if !captured.status.success() {
        let reasons: Vec<&str> = captured.stderr.lines().filter(|l| l.starts_with("ohb mapreduce")).collect();
        return Err(format!("the MapReduce runs failed ({}); log: {}\n{}", captured.status, log.display(), reasons.join("\n")));
    }
    if results.len() != CONFIGS.len() * workload.runs as usize {
        return Err(format!("{} results for {} runs; log: {}", results.len(), CONFIGS.len() * workload.runs as usize, log.display()));
    }
    Ok(results)
}

pub fn mapreduce_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let (workloads, json_path) = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let mut tests = Vec::new();
    for workload in &workloads {
        let results = run_jvm(&root, workload)?;
        print!("{}", render(workload, &results));
        println!();
        tests.push(json!({"bench": format!("mapreduce {}", workload.pattern), "runs": results}));
    }
    let value = if tests.len() == 1 { tests.remove(0) } else { json!({"bench": "mapreduce all", "tests": tests}) };
    let path = json_path.unwrap_or_else(|| root.join("results").join(format!("ohb-mapreduce-{}.json", argv[0])));
    write_json(&path, &value)?;
    println!("results: {}", path.display());
    println!("ohb mapreduce {}: {:.0} s in all", argv[0], started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_tests_and_overrides() {
        let (w, json) = parse_args(&words("all --quick --maps 3 --json x.json")).unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w[2].pattern, "skew");
        assert_eq!((w[0].maps, w[0].reduces), (3, 2));
        assert_eq!(json, Some(PathBuf::from("x.json")));
        for bad in ["terasort --value-bytes 100", "avg --maps 0", "avg --maps", "avg --bogus 1", "avg --runs 21", "avg --records x"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_default_workload_shuffles_a_gigabyte() {
        assert_eq!(Workload::new("avg", false).shuffle_bytes(), 4 * 262_144 * 1000);
        assert_eq!(Workload::new("sort", false).shuffle_bytes(), 4 * 262_144 * 1010, "RandomWriter's 10-byte keys count");
        let (sort, _) = parse_args(&words("sort --quick")).unwrap();
        assert_eq!(sort[0].pattern, "sort");
    }

    #[test]
    fn terasort_shuffles_a_gigabyte_of_teragens_records() {
        let tera = Workload::new("terasort", false);
        assert_eq!(tera.shuffle_bytes(), Workload::new("avg", false).shuffle_bytes(), "100-byte records, ten times as many");
        assert_eq!((tera.maps, tera.reduces, tera.value_bytes), (4, 4, 90));
        let (quick, _) = parse_args(&words("terasort --quick --records 1000 --reduces 3")).unwrap();
        assert_eq!(quick.len(), 1, "terasort is not in all");
        assert_eq!((quick[0].pattern.as_str(), quick[0].maps, quick[0].reduces), ("terasort", 2, 3));
        assert_eq!(quick[0].shuffle_bytes(), 2 * 1000 * 100);
        let (all, _) = parse_args(&words("all")).unwrap();
        assert!(all.iter().all(|w| w.pattern != "terasort"));
    }
}
