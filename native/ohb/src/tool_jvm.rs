//! Hadoop's own benchmark tools (`RPCCallBenchmark`, `NNThroughputBenchmark`), run unmodified in one
//! benchmark JVM per configuration (vanilla, fabric, fabric-tcp): the JVM runs the tool once per
//! point (`--run ARGS...`), each run framed on stdout by `OHB_TOOL_BEGIN` / `OHB_TOOL_END {json}`,
//! the end line carrying the engine's counters for that run. What a suite reads from a tool's
//! output and how it renders stay in the suite (`rpc/callbench.rs`, `hdfs/meta.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::child::{bench_jvm, run_logged};
use crate::output::{fail_if_points_failed, run_stamp, write_json};
use crate::rpc::render::render_checks;
use crate::table::Check;

const BEGIN: &str = "OHB_TOOL_BEGIN ";
const END: &str = "OHB_TOOL_END ";

/// One suite's tool JVM: `ohb <bench>` runs `main_class` from `jvm/<module>`.
pub struct ToolJvm<'a> {
    /// `rpc callbench`: the JSON's `bench`, and the name of logs and results files.
    pub bench: &'a str,
    pub module: &'a str,
    pub main_class: &'a str,
}

impl ToolJvm<'_> {
    /// `ohb-rpc-callbench`.
    fn file_stem(&self) -> String {
        format!("ohb-{}", self.bench.replace(' ', "-"))
    }

    /// Runs one JVM per configuration with every point's tool arguments (`runs`), logs each JVM's
    /// output under `build/` (`<bench>-<config><log_tag>.log`: a tag keeps rounds apart), and turns
    /// its stdout into result points with `results_of(config, stdout)`. Returns the points and the
    /// failures (a point with an `error`, named by `point_name`, or a JVM that exited badly).
    #[allow(clippy::too_many_arguments)]
    pub fn run_configs(
        &self,
        root: &Path,
        log_tag: &str,
        configs: &[String],
        runs: &[Vec<String>],
        timeout: Duration,
        describe_points: &str,
        results_of: impl Fn(&str, &str) -> Result<Vec<Value>, String>,
        point_name: impl Fn(&Value) -> String,
    ) -> Result<(Vec<Value>, Vec<String>), String> {
        std::fs::create_dir_all(root.join("build")).map_err(|e| format!("build/: {e}"))?;
        let mut results = Vec::new();
        let mut failed = Vec::new();
        for config in configs {
            eprintln!("ohb {}: {config}, {describe_points} ...", self.bench);
            let mut cmd = bench_jvm(root, self.module, "1g")?;
            cmd.arg(self.main_class).arg(config);
            for args in runs {
                cmd.arg("--run").args(args);
            }
            let log = root.join("build").join(format!("{}-{config}{log_tag}.log", self.file_stem()));
            let captured = run_logged(&self.file_stem(), cmd, timeout, &log)?;
            let points = results_of(config, &captured.stdout)?;
            for p in &points {
                if let Some(e) = p["error"].as_str() {
                    failed.push(format!("{config} {}: {e}; log: {}", point_name(p), log.display()));
                }
            }
            if !captured.status.success() && failed.is_empty() {
                failed.push(format!("{config}: the JVM exited with {}; log: {}", captured.status, log.display()));
            }
            results.extend(points);
        }
        Ok((results, failed))
    }

    /// Prints the table and the targets, writes the JSON (`json`, else `results/ohb-<bench>.json`)
    /// and fails when any point failed.
    pub fn finish(&self, root: &Path, json: Option<PathBuf>, runs: &[Vec<String>], results: Vec<Value>, (table, checks): (String, Vec<Check>), failed: &[String]) -> Result<(), String> {
        print!("{table}{}", render_checks(&checks));
        let value = json!({
            "bench": self.bench,
            "run": run_stamp(),
            "tool_args": runs.iter().map(|args| args.join(" ")).collect::<Vec<_>>(),
            "results": results,
            "targets": checks.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
        });
        let path = json.unwrap_or_else(|| root.join("results").join(format!("{}.json", self.file_stem())));
        write_json(&path, &value)?;
        println!("results: {}", path.display());
        fail_if_points_failed(&format!("ohb {}", self.bench), failed)
    }
}

/// One framed run of a tool: its output lines and the end line's JSON (`None` when the JVM died in it).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    pub output: String,
    pub end: Option<Value>,
}

/// Splits a JVM's stdout into its tool runs (`OHB_TOOL_BEGIN` .. `OHB_TOOL_END {json}`).
pub fn split_tool_runs(stdout: &str) -> Result<Vec<ToolRun>, String> {
    let mut runs: Vec<ToolRun> = Vec::new();
    let mut open = false;
    for line in stdout.lines() {
        if line.starts_with(BEGIN) {
            runs.push(ToolRun { output: String::new(), end: None });
            open = true;
        } else if let Some(text) = line.strip_prefix(END) {
            let value = serde_json::from_str(text).map_err(|e| format!("bad end line {text}: {e}"))?;
            let last = runs.last_mut().filter(|_| open).ok_or_else(|| format!("end line without a begin: {line}"))?;
            last.end = Some(value);
            open = false;
        } else if open {
            let last = runs.last_mut().expect("open implies a run");
            last.output.push_str(line);
            last.output.push('\n');
        }
    }
    Ok(runs)
}

/// The number after `label` on the first line containing it (`Total calls per second: 2361.0`,
/// `CPU time per call on client: 89071 ns`).
pub fn value_after(output: &str, label: &str) -> Option<f64> {
    output.lines().find_map(|line| {
        let rest = &line[line.find(label)? + label.len()..];
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Why a fabric (or vanilla) run's counters do not prove its path, if they do not.
pub fn path_error(config: &str, end: &Value) -> Option<String> {
    let fabric = end["fabric_calls"].as_u64().unwrap_or(0);
    let socket = end["socket_calls"].as_u64().unwrap_or(0);
    match config {
        "vanilla" if fabric > 0 => Some(format!("{fabric} calls went over the fabric in the vanilla configuration")),
        "vanilla" => None,
        _ if fabric == 0 => Some("no call went over the fabric (engine counter 0)".into()),
        _ if socket > 0 => Some(format!("{socket} calls took the socket path ({fabric} over the fabric)")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_runs_are_split_by_their_frames() {
        let runs = split_tool_runs("log\nOHB_TOOL_BEGIN 0\na\nb\nOHB_TOOL_END {\"rc\":0}\nOHB_TOOL_BEGIN 1\nc\n").unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].output.as_str(), runs[0].end.clone()), ("a\nb\n", Some(json!({"rc": 0}))));
        assert_eq!((runs[1].output.as_str(), runs[1].end.clone()), ("c\n", None), "the JVM died in the second run");
        assert!(split_tool_runs("OHB_TOOL_END {\"rc\":0}\n").is_err(), "an end without a begin");
        assert!(split_tool_runs("OHB_TOOL_BEGIN 0\nOHB_TOOL_END {bad\n").is_err());
    }

    #[test]
    fn files_are_named_after_the_bench() {
        let tool = ToolJvm { bench: "rpc callbench", module: "ohb-rpc", main_class: "X" };
        assert_eq!(tool.file_stem(), "ohb-rpc-callbench");
    }

    #[test]
    fn counters_prove_the_path_or_say_why_not() {
        assert_eq!(path_error("vanilla", &json!({"fabric_calls": 0, "socket_calls": 9})), None);
        assert!(path_error("vanilla", &json!({"fabric_calls": 1})).is_some());
        assert!(path_error("fabric", &json!({"fabric_calls": 0})).is_some());
        assert!(path_error("fabric", &json!({"fabric_calls": 5, "socket_calls": 1})).is_some());
        assert_eq!(path_error("fabric-tcp", &json!({"fabric_calls": 5, "socket_calls": 0})), None);
    }
}
