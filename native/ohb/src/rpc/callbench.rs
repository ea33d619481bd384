//! `ohb rpc callbench`: Hadoop's own `RPCCallBenchmark` (hadoop-common's test jar, unmodified, its own
//! arguments) for vanilla `ProtobufRpcEngine2`, the fabric engine (fallback never) and the fabric engine
//! forced to TCP, side by side in one run, from the tool's own output (calls/s, CPU per call on the
//! client and on the server's handlers).
//!
//! One JVM per configuration (`io.slipstream.ohb.rpc.CallBench` in `jvm/ohb-rpc`) runs the tool once per
//! client count; its server and clients share that JVM, as the tool does. The engine is chosen from
//! outside with `rpc.engine.org.apache.hadoop.ipc.TestRpcBase$TestRpcService` (the tool sets it only when
//! unset). Each run is framed by `OHB_TOOL_BEGIN` / `OHB_TOOL_END {json}`; the end line carries the
//! engine's counters for that run: a fabric point whose calls did not go over the fabric (none counted,
//! or any on the socket path) fails, and `ohb` exits non-zero.

use super::render::{TCP_TARGET_RATIO, THR_TARGET_CLIENTS, THR_TARGET_RATIO};
use super::CONFIGS;
use crate::child::find_repo_root;
use crate::tool_jvm::{path_error, split_tool_runs, value_after, ToolJvm};
use crate::table::{format_rate, format_ratio, format_us, Check, Worst};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "Usage: ohb rpc callbench [--quick] [--clients LIST] [--handlers N] [--bytes N] [--seconds N] \
                     [--configs LIST] [--json FILE]\n";
/// Per tool run on top of its own `-t` seconds: JVM start, server start, fabric sessions.
const RUN_SLACK: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, PartialEq)]
pub struct CallRun {
    pub clients: Vec<u64>,
    pub handlers: u64,
    pub bytes: u64,
    pub seconds: u64,
    pub configs: Vec<String>,
    pub json: Option<PathBuf>,
}

pub fn parse_args(argv: &[String]) -> Result<CallRun, String> {
    let quick = argv.iter().any(|a| a == "--quick");
    // The tool's defaults are 1 KiB messages and 15 s; --quick fits `make demo`.
    let mut run = CallRun {
        clients: if quick { vec![1, 8] } else { vec![1, 8, 16] },
        handlers: 16,
        bytes: 1024,
        seconds: if quick { 4 } else { 15 },
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
            "--clients" => run.clients = numbers(flag, value?, 1, 64)?,
            "--handlers" => run.handlers = number(flag, value?, 1, 256)?,
            "--bytes" => run.bytes = number(flag, value?, 1, 16 << 20)?,
            "--seconds" => run.seconds = number(flag, value?, 1, 3600)?,
            "--configs" => run.configs = configs(value?)?,
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
        i += 2;
    }
    Ok(run)
}

fn number(flag: &str, value: &str, low: u64, high: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (low..=high).contains(&n) => Ok(n),
        _ => Err(format!("{flag}: {value} is not a number in {low}..={high}")),
    }
}

fn numbers(flag: &str, value: &str, low: u64, high: u64) -> Result<Vec<u64>, String> {
    value.split(',').map(|part| number(flag, part, low, high)).collect()
}

pub fn configs(value: &str) -> Result<Vec<String>, String> {
    value
        .split(',')
        .map(|c| match CONFIGS.contains(&c) {
            true => Ok(c.to_string()),
            false => Err(format!("--configs: unknown configuration {c} (vanilla, fabric, fabric-tcp)")),
        })
        .collect()
}

/// The tool's own arguments for one point. The server binds to loopback (the tool's default is 0.0.0.0).
pub fn tool_args(run: &CallRun, clients: u64) -> Vec<String> {
    let (s, c, m, t) = (run.handlers.to_string(), clients.to_string(), run.bytes.to_string(), run.seconds.to_string());
    ["-s", &s, "-c", &c, "-m", &m, "-t", &t, "-h", "127.0.0.1"].map(String::from).to_vec()
}

/// One configuration's JVM output to result points (one per client count, in order).
pub fn results_of(config: &str, clients: &[u64], stdout: &str) -> Result<Vec<Value>, String> {
    let runs = split_tool_runs(stdout)?;
    Ok(clients
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let run = runs.get(i);
            let out = run.map(|r| r.output.as_str()).unwrap_or("");
            let rate = value_after(out, "Total calls per second:");
            let error = match run.and_then(|r| r.end.as_ref()) {
                None => Some("the JVM ended before this run finished".to_string()),
                Some(end) if end["rc"].as_i64() != Some(0) => Some(format!("RPCCallBenchmark exited with {}", end["rc"])),
                Some(_) if rate.is_none() => Some("RPCCallBenchmark printed no total (No calls!)".to_string()),
                Some(end) => path_error(config, end),
            };
            let end = run.and_then(|r| r.end.clone()).unwrap_or(Value::Null);
            json!({
                "config": config, "clients": c, "calls_per_s": rate,
                "client_cpu_ns_per_call": value_after(out, "CPU time per call on client:"),
                "server_cpu_ns_per_call": value_after(out, "CPU time per call on server:"),
                "fabric_calls": end["fabric_calls"], "socket_calls": end["socket_calls"], "error": error,
            })
        })
        .collect())
}

fn find<'a>(results: &'a [Value], config: &str, clients: u64) -> Option<&'a Value> {
    results.iter().find(|r| r["config"] == config && r["clients"].as_u64() == Some(clients))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The table (calls/s, CPU us per call client/server) and its checks.
pub fn render(run: &CallRun, results: &[Value]) -> (String, Vec<Check>) {
    let mut text = format!(
        "ohb rpc callbench: Hadoop's RPCCallBenchmark, {} B echo, {} handlers, {} s per point (calls/s; CPU us/call client/server)\n",
        run.bytes, run.handlers, run.seconds
    );
    text += &format!("{:>8}", "clients");
    for c in CONFIGS {
        text += &format!(" {c:>10} {:>13}", "cpu c/s");
    }
    text += &format!(" {:>12} {:>15}\n", "fabric vs v", "fabric-tcp vs v");
    let mut checks = Vec::new();
    let mut worst_tcp = Worst::default();
    for &clients in &run.clients {
        let rate = |c: &str| find(results, c, clients).and_then(|r| r["calls_per_s"].as_f64());
        text += &format!("{clients:>8}");
        for c in CONFIGS {
            let cpu = find(results, c, clients).map(|r| {
                let us = |k: &str| r[k].as_f64().map(|ns| format_us(ns / 1000.0)).unwrap_or_else(|| "-".into());
                format!("{}/{}", us("client_cpu_ns_per_call"), us("server_cpu_ns_per_call"))
            });
            let error = find(results, c, clients).is_some_and(|r| !r["error"].is_null());
            let rate_cell = if error { "FAILED".into() } else { rate(c).map(format_rate).unwrap_or_else(|| "-".into()) };
            text += &format!(" {rate_cell:>10} {:>13}", cpu.unwrap_or_else(|| "-".into()));
        }
        let fabric = ratio(rate("fabric"), rate("vanilla"));
        let tcp = ratio(rate("fabric-tcp"), rate("vanilla"));
        let cell = |r: Option<f64>| r.map(format_ratio).unwrap_or_else(|| "-".into());
        text += &format!(" {:>12} {:>15}\n", cell(fabric), cell(tcp));
        if clients == THR_TARGET_CLIENTS {
            let name = format!("RPCCallBenchmark with {THR_TARGET_CLIENTS} clients >= {THR_TARGET_RATIO}x vanilla calls/s");
            checks.push(Check::at_least(name, fabric, THR_TARGET_RATIO));
        }
        worst_tcp.see(tcp, clients);
    }
    let name = format!("RPCCallBenchmark fabric-tcp >= {TCP_TARGET_RATIO}x vanilla calls/s");
    checks.push(worst_tcp.check(name, TCP_TARGET_RATIO, |clients| format!("worst at {clients} clients")));
    (text, checks)
}

pub fn callbench_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let run = parse_args(argv)?;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let tool = ToolJvm { bench: "rpc callbench", module: "ohb-rpc", main_class: "io.slipstream.ohb.rpc.CallBench" };
    let runs: Vec<Vec<String>> = run.clients.iter().map(|&clients| tool_args(&run, clients)).collect();
    let timeout = (Duration::from_secs(run.seconds) + RUN_SLACK) * run.clients.len() as u32;
    let (results, failed) = tool.run_configs(&root, "", &run.configs, &runs, timeout, &format!("clients {:?}", run.clients), |config, stdout| results_of(config, &run.clients, stdout), |p| {
        format!("{} clients", p["clients"])
    })?;
    let (table, checks) = render(&run, &results);
    tool.finish(&root, run.json.clone(), &runs, results, (table, checks), &failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    /// RPCCallBenchmark's own output (Hadoop 3.4.2), framed as `CallBench` frames it, with log lines.
    const TOOL_RUN: &str = "\
OHB_TOOL_BEGIN 0
2026-11-25 09:22:25,173 INFO  [main] ipc.Server (Server.java:<init>(1438)) - Listener at 127.0.0.1:37209
Calls per second: 661.0
Calls per second: 4171.0
====== Results ======
Options:
rpcEngine=class org.apache.hadoop.ipc.ProtobufRpcEngine2
clientThreads=8
Total calls per second: 2361.0
CPU time per call on client: 89071 ns
CPU time per call on server: 115605 ns
OHB_TOOL_END {\"config\":\"fabric\",\"rc\":0,\"fabric_calls\":2966,\"socket_calls\":0}
";

    #[test]
    fn parses_the_tools_own_output_and_the_counters() {
        let points = results_of("fabric", &[8], TOOL_RUN).unwrap();
        assert_eq!(points[0]["calls_per_s"], 2361.0);
        assert_eq!(points[0]["client_cpu_ns_per_call"], 89071.0);
        assert_eq!(points[0]["server_cpu_ns_per_call"], 115605.0);
        assert_eq!(points[0]["fabric_calls"], 2966);
        assert!(points[0]["error"].is_null(), "{}", points[0]);
    }

    #[test]
    fn a_point_fails_without_proof_of_its_path_or_a_total() {
        let vanilla_counted = results_of("vanilla", &[8], TOOL_RUN).unwrap();
        assert!(vanilla_counted[0]["error"].as_str().unwrap().contains("2966 calls went over the fabric"));
        let no_fabric = TOOL_RUN.replace("\"fabric_calls\":2966", "\"fabric_calls\":0");
        assert!(results_of("fabric-tcp", &[8], &no_fabric).unwrap()[0]["error"].as_str().unwrap().contains("counter 0"));
        let sockets = TOOL_RUN.replace("\"socket_calls\":0", "\"socket_calls\":3");
        assert!(results_of("fabric", &[8], &sockets).unwrap()[0]["error"].as_str().unwrap().contains("socket path"));
        let no_calls = TOOL_RUN.replace("Total calls per second: 2361.0", "No calls!");
        assert!(results_of("fabric", &[8], &no_calls).unwrap()[0]["error"].as_str().unwrap().contains("no total"));
        let failed_rc = TOOL_RUN.replace("\"rc\":0", "\"rc\":-1");
        assert!(results_of("fabric", &[8], &failed_rc).unwrap()[0]["error"].as_str().unwrap().contains("exited with -1"));
        // The JVM died inside the second run: that point fails, the first stands.
        let died = format!("{TOOL_RUN}OHB_TOOL_BEGIN 1\nCalls per second: 5.0\n");
        let points = results_of("fabric", &[1, 8], &died).unwrap();
        assert!(points[0]["error"].is_null());
        assert!(points[1]["error"].as_str().unwrap().contains("ended before"));
    }

    #[test]
    fn table_has_ratios_from_the_same_run_and_the_targets() {
        let run = parse_args(&words("--clients 8")).unwrap();
        let point = |config: &str, rate: f64| json!({"config": config, "clients": 8, "calls_per_s": rate,
            "client_cpu_ns_per_call": 90000.0, "server_cpu_ns_per_call": 110000.0, "error": null});
        let results = vec![point("vanilla", 2000.0), point("fabric", 5000.0), point("fabric-tcp", 1700.0)];
        let (text, checks) = render(&run, &results);
        assert!(text.contains("2.50x") && text.contains("0.85x") && text.contains("90.0/110.0"), "{text}");
        assert_eq!((checks[0].ratio, checks[0].pass), (Some(2.5), Some(true)));
        assert_eq!((checks[1].ratio, checks[1].pass), (Some(0.85), Some(false)));
    }

    #[test]
    fn arguments_become_the_tools_own() {
        let quick = parse_args(&words("--quick")).unwrap();
        assert_eq!((quick.clients.clone(), quick.seconds), (vec![1, 8], 4));
        assert_eq!(tool_args(&quick, 8), words("-s 16 -c 8 -m 1024 -t 4 -h 127.0.0.1"));
        let run = parse_args(&words("--clients 2,4 --handlers 4 --bytes 10 --seconds 3 --configs vanilla,fabric")).unwrap();
        assert_eq!(tool_args(&run, 4), words("-s 4 -c 4 -m 10 -t 3 -h 127.0.0.1"));
        assert_eq!(run.configs, words("vanilla fabric"));
        for bad in ["--clients 0", "--clients 65", "--bytes", "--seconds x", "--configs grpc", "--bogus 1", "--handlers 1,2"] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }
}
