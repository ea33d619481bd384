//! `ohb hdfs meta`: Hadoop's own `NNThroughputBenchmark` (hadoop-hdfs's test jar, unmodified, its own
//! arguments: `-op create|open|fileStatus|delete -threads T -files N`, plus `-fs hdfs://127.0.0.1:<port>`)
//! against a NameNode in its own process (a MiniDFSCluster without DataNodes: these operations make
//! files without blocks) served by vanilla Hadoop RPC, by the fabric engine, and by the fabric engine
//! forced to TCP, side by side in one run: ops/s per operation (the median of `--rounds` rounds, each
//! running every configuration, in rotated order), ratios of the medians against vanilla, and the
//! issue's target (open and fileStatus at least 1.5x vanilla). Why rounds: one operation over 5000
//! files lasts about half a second, and single runs of vanilla's open ranged 3.6k to 7.6k ops/s.
//! Why warm-up passes (`--warmup-passes`, 1 by default): each configuration's JVMs are fresh, and
//! the first pass of an operation ran at a third to a half of the second's in the same JVMs (vanilla
//! open 3.1k-3.6k then 6.8k-10.7k ops/s, session 40), half the NameNode's CPU samples being the JIT
//! compilers': the measured pass is the one after them, and the first pass's figure is shown too
//! ("cold").
//!
//! The JVM side is `io.slipstream.ohb.rpc.NnMetaBench` in `jvm/ohb-rpc` (the module that depends on the
//! engine): one JVM per configuration runs the tool once per operation; its NameNode process is started
//! by it. The engine is chosen from outside with `rpc.engine.ClientNamenodeProtocolPB` on both sides (the
//! DFS client's proxy carries every measured call). The path is proven by the engine's counters: per
//! operation the tool's JVM sent calls over the fabric and none over sockets, and the NameNode's client
//! server took at least that many over the fabric (`OHB_NN_SERVER`); a point without that proof fails.

use crate::child::find_repo_root;
use crate::rpc::callbench::configs;
use crate::tool_jvm::{path_error, split_tool_runs, value_after, ToolJvm};
use crate::rpc::render::TCP_TARGET_RATIO;
use crate::rpc::CONFIGS;
use crate::stats::round_order;
use crate::stats::median;
use crate::table::{format_ratio, format_rate, Check, Worst};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "Usage: ohb hdfs meta [--quick] [--ops LIST] [--files N] [--threads N] [--rounds N] [--warmup-passes N] [--configs LIST] [--json FILE]\n";
/// The operations, in the order they run, as the tool names them.
pub const OPS: [&str; 4] = ["create", "open", "fileStatus", "delete"];
/// The target: these operations at least this many times vanilla's ops/s.
pub const TARGET_OPS: [&str; 2] = ["open", "fileStatus"];
pub const TARGET_RATIO: f64 = 1.5;
const SERVER_PREFIX: &str = "OHB_NN_SERVER ";
/// Bounds one configuration's JVM: the NameNode's start plus this much per operation.
const PER_OP_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq)]
pub struct MetaRun {
    pub ops: Vec<String>,
    pub files: u64,
    pub threads: u64,
    /// Rounds of every configuration; the table shows medians (3, or 1 with `--quick`).
    pub rounds: u64,
    /// Passes of each operation before the measured one, in the same JVMs (default 1).
    pub warmup_passes: u64,
    pub configs: Vec<String>,
    pub json: Option<PathBuf>,
}

pub fn parse_args(argv: &[String]) -> Result<MetaRun, String> {
    let quick = argv.iter().any(|a| a == "--quick");
    let mut run = MetaRun {
        ops: OPS.iter().map(|o| o.to_string()).collect(),
        files: if quick { 500 } else { 5000 },
        threads: 8,
        rounds: if quick { 1 } else { 3 },
        warmup_passes: 1,
        configs: CONFIGS.iter().map(|c| c.to_string()).collect(),
        json: None,
    };
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        if matches!(flag, "--quick" | "--no-progress") {
            i += 1;
            continue;
        }
        let value = argv.get(i + 1).ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag {
            "--json" => run.json = Some(PathBuf::from(value?)),
            "--files" => run.files = bounded(flag, value?, 1, 10_000_000)?,
            "--threads" => run.threads = bounded(flag, value?, 1, 256)?,
            "--rounds" => run.rounds = bounded(flag, value?, 1, 9)?,
            "--warmup-passes" => run.warmup_passes = bounded(flag, value?, 0, 5)?,
            "--configs" => run.configs = configs(value?)?,
            "--ops" => {
                run.ops = value?.split(',').map(str::to_string).collect();
                if let Some(bad) = run.ops.iter().find(|o| !OPS.contains(&o.as_str())) {
                    return Err(format!("--ops: unknown operation {bad} (one of {})", OPS.join(", ")));
                }
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 2;
    }
    Ok(run)
}

fn bounded(flag: &str, value: &str, low: u64, high: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (low..=high).contains(&n) => Ok(n),
        _ => Err(format!("{flag}: {value} is not a number in {low}..={high}")),
    }
}

/// The tool's own arguments for one operation (`-fs` is added by the JVM side once it knows the port).
pub fn tool_args(run: &MetaRun, op: &str) -> Vec<String> {
    let (threads, files) = (run.threads.to_string(), run.files.to_string());
    ["-op", op, "-threads", &threads, "-files", &files].map(String::from).to_vec()
}

/// One operation's figures from the tool's own stats block (`--- open stats  ---`, `# operations: N`,
/// `Elapsed Time: ms`, ` Ops per sec: x`, `Average Time: ms`), whatever its log prefix.
pub fn parse_stats(output: &str, op: &str) -> Option<Value> {
    let marker = format!("--- {op} stats  ---");
    let block = &output[output.find(&marker)? + marker.len()..];
    Some(json!({
        "operations": value_after(block, "# operations:")?,
        "elapsed_ms": value_after(block, "Elapsed Time:")?,
        "ops_per_s": value_after(block, "Ops per sec:")?,
        "avg_ms": value_after(block, "Average Time:")?,
    }))
}

/// The NameNode's fabric calls (`OHB_NN_SERVER {json}`), if it reported them.
pub fn server_calls(stdout: &str) -> Option<u64> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(SERVER_PREFIX))?;
    serde_json::from_str::<Value>(line).ok()?["fabric_calls_received"].as_u64()
}

/// The tool's runs for one configuration's JVM: each operation `warmup_passes` times, then once measured.
pub fn all_tool_args(run: &MetaRun) -> Vec<Vec<String>> {
    let passes = run.warmup_passes as usize + 1;
    run.ops.iter().flat_map(|op| std::iter::repeat(tool_args(run, op)).take(passes)).collect()
}

/// One configuration's JVM output to result points (one per operation, in order): each operation's
/// last pass measured, its first pass's ops/s as `cold_ops_per_s` when there were warm-up passes.
pub fn results_of(config: &str, ops: &[String], warmup_passes: u64, stdout: &str) -> Result<Vec<Value>, String> {
    let runs = split_tool_runs(stdout)?;
    let received = server_calls(stdout);
    let sent: u64 = runs.iter().filter_map(|r| r.end.as_ref()?["fabric_calls"].as_u64()).sum();
    let passes = warmup_passes as usize + 1;
    let server_error = match (config, received) {
        (_, None) => Some("the NameNode did not report its fabric counter".to_string()),
        ("vanilla", Some(n)) if n > 0 => Some(format!("the vanilla NameNode took {n} calls over the fabric")),
        ("vanilla", _) => None,
        (_, Some(n)) if n < sent || n == 0 => Some(format!("the NameNode took {n} calls over the fabric, the tool sent {sent}")),
        _ => None,
    };
    Ok(ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let run = runs.get(i * passes + passes - 1);
            let stats = run.and_then(|r| parse_stats(&r.output, op));
            let cold = (passes > 1)
                .then(|| runs.get(i * passes).and_then(|r| parse_stats(&r.output, op)))
                .flatten()
                .map(|s| s["ops_per_s"].clone())
                .unwrap_or(Value::Null);
            let error = match run.and_then(|r| r.end.as_ref()) {
                None => Some("the JVM ended before this operation finished".to_string()),
                Some(end) if end["rc"].as_i64() != Some(0) => Some(format!("NNThroughputBenchmark failed (rc {})", end["rc"])),
                Some(_) if stats.is_none() => Some(format!("NNThroughputBenchmark printed no {op} stats")),
                Some(end) => path_error(config, end).or_else(|| server_error.clone()),
            };
            let end = run.and_then(|r| r.end.clone()).unwrap_or(Value::Null);
            let stat = |k: &str| stats.as_ref().map(|s| s[k].clone()).unwrap_or(Value::Null);
            json!({
                "config": config, "op": op, "ops_per_s": stat("ops_per_s"), "cold_ops_per_s": cold, "avg_ms": stat("avg_ms"),
                "operations": stat("operations"), "elapsed_ms": stat("elapsed_ms"),
                "fabric_calls": end["fabric_calls"], "socket_calls": end["socket_calls"],
                "namenode_fabric_calls": received, "error": error,
            })
        })
        .collect())
}

fn rate(results: &[Value], config: &str, op: &str) -> Option<f64> {
    let r = results.iter().find(|r| r["config"] == config && r["op"] == op)?;
    r["error"].is_null().then(|| r["ops_per_s"].as_f64()).flatten()
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// One point per configuration and operation from the points of every round (each with its
/// `round`): the median ops/s of the rounds that passed, the rounds' figures beside it, and the
/// first round's error if any round failed (such a point shows FAILED).
pub fn medians(configs: &[String], ops: &[String], rounds: &[Value]) -> Vec<Value> {
    let mut points = Vec::new();
    for config in configs {
        for op in ops {
            let of: Vec<&Value> = rounds.iter().filter(|r| r["config"] == config.as_str() && r["op"] == op.as_str()).collect();
            let rates: Vec<f64> = of.iter().filter(|r| r["error"].is_null()).filter_map(|r| r["ops_per_s"].as_f64()).collect();
            let colds: Vec<f64> = of.iter().filter(|r| r["error"].is_null()).filter_map(|r| r["cold_ops_per_s"].as_f64()).collect();
            let error = of.iter().find_map(|r| r["error"].as_str().map(str::to_string));
            let error = error.or_else(|| of.is_empty().then(|| "no round ran".to_string()));
            points.push(json!({
                "config": config, "op": op, "ops_per_s": median(&rates), "cold_ops_per_s": median(&colds),
                "rounds_ops_per_s": rates, "error": error, "rounds": of,
            }));
        }
    }
    points
}

/// The table (median ops/s per operation, ratios against vanilla) and the targets.
pub fn render(run: &MetaRun, results: &[Value]) -> (String, Vec<Check>) {
    let mut text = format!(
        "ohb hdfs meta: Hadoop's NNThroughputBenchmark, {} files, {} threads, NameNode in its own process (ops/s after {} warm-up pass(es) of each operation in the same JVMs, median of {} round(s), configurations in rotated order)\n",
        run.files, run.threads, run.warmup_passes, run.rounds
    );
    text += &format!("{:>10}", "op");
    for c in CONFIGS {
        text += &format!(" {c:>10}");
    }
    text += &format!(" {:>12} {:>15}\n", "fabric vs v", "fabric-tcp vs v");
    let mut checks = Vec::new();
    let mut worst_tcp = Worst::default();
    let cell = |r: Option<f64>| r.map(format_ratio).unwrap_or_else(|| "-".into());
    for op in &run.ops {
        text += &format!("{op:>10}");
        for c in CONFIGS {
            let failed = results.iter().any(|r| r["config"] == c && r["op"] == op.as_str() && !r["error"].is_null());
            let shown = if failed { "FAILED".into() } else { rate(results, c, op).map(format_rate).unwrap_or_else(|| "-".into()) };
            text += &format!(" {shown:>10}");
        }
        let fabric = ratio(rate(results, "fabric", op), rate(results, "vanilla", op));
        let tcp = ratio(rate(results, "fabric-tcp", op), rate(results, "vanilla", op));
        text += &format!(" {:>12} {:>15}\n", cell(fabric), cell(tcp));
        if TARGET_OPS.contains(&op.as_str()) {
            checks.push(Check::at_least(format!("NNThroughputBenchmark {op} >= {TARGET_RATIO}x vanilla ops/s"), fabric, TARGET_RATIO));
        }
        worst_tcp.see(tcp, op);
    }
    if run.warmup_passes > 0 {
        text += "  first pass (cold JVMs), ops/s:";
        for op in &run.ops {
            let cold = |c: &str| results.iter().find(|r| r["config"] == c && r["op"] == op.as_str()).and_then(|r| r["cold_ops_per_s"].as_f64());
            text += &format!(" {op}");
            for c in CONFIGS {
                text += &format!(" {c} {}", cold(c).map(format_rate).unwrap_or_else(|| "-".into()));
            }
            text += &format!(" ({} fabric vs v);", cell(ratio(cold("fabric"), cold("vanilla"))));
        }
        text.pop();
        text += "\n";
    }
    let name = format!("NNThroughputBenchmark fabric-tcp >= {TCP_TARGET_RATIO}x vanilla ops/s");
    checks.push(worst_tcp.check(name, TCP_TARGET_RATIO, |op| format!("worst: {op}")));
    (text, checks)
}

pub fn meta_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let run = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let tool = ToolJvm { bench: "hdfs meta", module: "ohb-rpc", main_class: "io.slipstream.ohb.rpc.NnMetaBench" };
    let runs = all_tool_args(&run);
    let timeout = PER_OP_TIMEOUT * (runs.len() as u32 + 1);
    let mut rounds = Vec::new();
    let mut failed = Vec::new();
    for round in 0..run.rounds {
        let order = round_order(&run.configs, round as usize);
        let describe = format!("round {} of {}, NameNode, then {} ({} warm-up pass(es) each)", round + 1, run.rounds, run.ops.join(", "), run.warmup_passes);
        let (points, failures) = tool.run_configs(&root, &format!("-round{}", round + 1), &order, &runs, timeout, &describe, |config, stdout| results_of(config, &run.ops, run.warmup_passes, stdout), |p| {
            format!("{} (round {})", p["op"].as_str().unwrap_or("?"), round + 1)
        })?;
        rounds.extend(points.into_iter().map(|mut p| {
            p["round"] = json!(round + 1);
            p
        }));
        failed.extend(failures);
    }
    let results = medians(&run.configs, &run.ops, &rounds);
    let (table, checks) = render(&run, &results);
    tool.finish(&root, run.json.clone(), &runs, results, (table, checks), &failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    /// NNThroughputBenchmark's own stats lines (Hadoop 3.4.2, with log4j's prefix), framed by NnMetaBench.
    fn op_run(op: &str, ops_per_s: f64, fabric_calls: u64) -> String {
        let p = "2026-11-25 09:30:15,065 INFO  [main] namenode.NNThroughputBenchmark (NNThroughputBenchmark.java:printStats(394)) - ";
        format!(
            "OHB_TOOL_BEGIN 0\n{p}Log level = ERROR\n{p}--- {op} inputs ---\n{p}nrFiles = 2000\n{p}--- {op} stats  ---\n\
             {p}# operations: 2000\n{p}Elapsed Time: 2516\n{p} Ops per sec: {ops_per_s}\n{p}Average Time: 9\n\
             OHB_TOOL_END {{\"config\":\"x\",\"rc\":0,\"fabric_calls\":{fabric_calls},\"socket_calls\":0}}\n"
        )
    }

    fn ops(list: &str) -> Vec<String> {
        list.split(',').map(str::to_string).collect()
    }

    #[test]
    fn parses_the_tools_stats_and_checks_both_counters() {
        let out = format!("{}{}OHB_NN_SERVER {{\"fabric_calls_received\":8011}}\n", op_run("create", 243.2, 2003), op_run("open", 794.9, 6008));
        let points = results_of("fabric", &ops("create,open"), 0, &out).unwrap();
        assert_eq!(points[1]["ops_per_s"], 794.9);
        assert_eq!(points[1]["avg_ms"], 9.0);
        assert_eq!(points[1]["operations"], 2000.0);
        assert!(points.iter().all(|p| p["error"].is_null()), "{points:?}");
        // The NameNode took fewer fabric calls than the tool sent: no proof.
        let short = out.replace("8011", "8000");
        assert!(results_of("fabric", &ops("create,open"), 0, &short).unwrap()[0]["error"].as_str().unwrap().contains("took 8000"));
        // No server line at all, or a vanilla NameNode that took fabric calls.
        let silent = format!("{}{}", op_run("create", 243.2, 2003), op_run("open", 794.9, 6008));
        assert!(results_of("fabric", &ops("create,open"), 0, &silent).unwrap()[0]["error"].as_str().unwrap().contains("did not report"));
        assert!(results_of("vanilla", &ops("create,open"), 0, &out).unwrap()[0]["error"].as_str().unwrap().contains("over the fabric"));
        // The stats of another operation are not this one's.
        let wrong = format!("{}OHB_NN_SERVER {{\"fabric_calls_received\":0}}\n", op_run("create", 243.2, 0));
        assert!(results_of("vanilla", &ops("open"), 0, &wrong).unwrap()[0]["error"].as_str().unwrap().contains("no open stats"));
        let fine = wrong.replace("create", "open");
        assert!(results_of("vanilla", &ops("open"), 0, &fine).unwrap()[0]["error"].is_null());
        // NnMetaBench's own layout for the tool's logger: the message alone.
        let bare = "--- fileStatus stats  ---\n# operations: 10\nElapsed Time: 5\n Ops per sec: 2000.0\nAverage Time: 0\n";
        assert_eq!(parse_stats(bare, "fileStatus").unwrap()["ops_per_s"], 2000.0);
    }

    #[test]
    fn targets_are_open_and_file_status_and_tcp_takes_the_worst() {
        let run = parse_args(&words("--quick")).unwrap();
        let p = |config: &str, op: &str, rate: f64| json!({"config": config, "op": op, "ops_per_s": rate, "error": null});
        let mut results = Vec::new();
        for (op, v, f, t) in [("create", 250.0, 240.0, 200.0), ("open", 700.0, 1400.0, 700.0), ("fileStatus", 1000.0, 1200.0, 950.0), ("delete", 900.0, 900.0, 900.0)] {
            results.extend([p("vanilla", op, v), p("fabric", op, f), p("fabric-tcp", op, t)]);
        }
        let (text, checks) = render(&run, &results);
        assert!(text.contains("2.00x") && text.contains("1.20x"), "{text}");
        assert_eq!((checks[0].ratio, checks[0].pass), (Some(2.0), Some(true)));
        assert_eq!((checks[1].ratio, checks[1].pass), (Some(1.2), Some(false)));
        assert_eq!((checks[2].ratio, checks[2].detail.as_str()), (Some(0.8), "worst: create"));
        results[1]["error"] = json!("no call went over the fabric");
        assert!(render(&run, &results).0.contains("FAILED"));
    }

    #[test]
    fn arguments_become_the_tools_own() {
        let quick = parse_args(&words("--quick")).unwrap();
        assert_eq!(tool_args(&quick, "open"), words("-op open -threads 8 -files 500"));
        let run = parse_args(&words("--ops open,fileStatus --files 100 --threads 2 --configs vanilla,fabric-tcp")).unwrap();
        assert_eq!((run.ops.clone(), run.configs.clone()), (ops("open,fileStatus"), ops("vanilla,fabric-tcp")));
        assert_eq!(tool_args(&run, "fileStatus"), words("-op fileStatus -threads 2 -files 100"));
        assert_eq!((quick.rounds, parse_args(&words("--rounds 5")).unwrap().rounds, run.rounds), (1, 5, 3));
        for bad in ["--ops mkdirs", "--files 0", "--threads 257", "--files", "--configs grpc", "--bogus 1", "--rounds 0", "--rounds 10"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_table_shows_medians_of_the_rounds_and_a_failed_round_fails_its_point() {
        let p = |config: &str, op: &str, round: u64, rate: f64| json!({"config": config, "op": op, "round": round, "ops_per_s": rate, "error": null});
        let mut rounds = vec![p("vanilla", "open", 1, 7600.0), p("vanilla", "open", 2, 3600.0), p("vanilla", "open", 3, 4800.0)];
        rounds.extend([p("fabric", "open", 1, 6500.0), p("fabric", "open", 2, 9000.0), p("fabric", "open", 3, 7200.0)]);
        let configs = ops("vanilla,fabric");
        let points = medians(&configs, &ops("open"), &rounds);
        assert_eq!((points[0]["ops_per_s"].as_f64(), points[1]["ops_per_s"].as_f64()), (Some(4800.0), Some(7200.0)));
        assert_eq!(points[0]["rounds"].as_array().unwrap().len(), 3);
        assert!(points.iter().all(|p| p["error"].is_null()));
        rounds[4]["error"] = json!("no call went over the fabric");
        let points = medians(&configs, &ops("open"), &rounds);
        assert_eq!(points[1]["error"], "no call went over the fabric");
        assert_eq!(points[1]["rounds_ops_per_s"].as_array().unwrap().len(), 2);
        let missing = medians(&ops("vanilla,fabric-tcp"), &ops("open"), &rounds);
        assert_eq!(missing[1]["error"], "no round ran");
        let run = MetaRun { ops: ops("open"), rounds: 3, ..parse_args(&[]).unwrap() };
        assert!(render(&run, &medians(&configs, &ops("open"), &rounds)).0.contains("median of 3 round(s)"));
    }

    #[test]
    fn warm_up_passes_run_first_and_the_last_pass_is_measured() {
        let run = parse_args(&words("--ops create,open --files 10")).unwrap();
        assert_eq!(run.warmup_passes, 1);
        let args = all_tool_args(&run);
        assert_eq!(args.len(), 4);
        assert_eq!((args[0][1].as_str(), args[1][1].as_str(), args[2][1].as_str(), args[3][1].as_str()), ("create", "create", "open", "open"));
        assert_eq!(all_tool_args(&parse_args(&words("--warmup-passes 0")).unwrap()).len(), OPS.len());
        assert!(parse_args(&words("--warmup-passes 6")).is_err());
        let out = format!(
            "{}{}{}{}OHB_NN_SERVER {{\"fabric_calls_received\":9000}}\n",
            op_run("create", 200.0, 2000), op_run("create", 300.0, 2000), op_run("open", 3100.0, 2000), op_run("open", 9800.0, 2000)
        );
        let points = results_of("fabric", &ops("create,open"), 1, &out).unwrap();
        assert_eq!((points[0]["ops_per_s"].as_f64(), points[0]["cold_ops_per_s"].as_f64()), (Some(300.0), Some(200.0)));
        assert_eq!((points[1]["ops_per_s"].as_f64(), points[1]["cold_ops_per_s"].as_f64()), (Some(9800.0), Some(3100.0)));
        assert!(points.iter().all(|p| p["error"].is_null()), "{points:?}");
        // Counted over every pass: the NameNode must have taken the warm-up's calls too.
        let short = out.replace("9000", "7999");
        assert!(results_of("fabric", &ops("create,open"), 1, &short).unwrap()[0]["error"].as_str().unwrap().contains("took 7999"));
        // The measured pass missing (the JVM ended after the warm-up) fails the point.
        let cut = format!("{}{}OHB_NN_SERVER {{\"fabric_calls_received\":9000}}\n", op_run("create", 200.0, 2000), op_run("create", 300.0, 2000));
        assert!(results_of("fabric", &ops("create,open"), 1, &cut).unwrap()[1]["error"].as_str().unwrap().contains("ended before"));
        let p = |config: &str, rate: f64, cold: f64| json!({"config": config, "op": "open", "ops_per_s": rate, "cold_ops_per_s": cold, "error": null});
        let table = render(&run, &medians(&ops("vanilla,fabric,fabric-tcp"), &ops("open"), &[p("vanilla", 9800.0, 3100.0), p("fabric", 19600.0, 4650.0), p("fabric-tcp", 13000.0, 4000.0)])).0;
        assert!(table.contains("after 1 warm-up pass(es)") && table.contains("first pass (cold JVMs)") && table.contains("(1.50x fabric vs v)"), "{table}");
    }
}
