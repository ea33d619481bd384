//! From the JSON files the suites write to [`Run`]s: which charts each kind of result gets.
//!
//! Each suite's JSON is read as that suite writes it (`fabric/result.rs`, `cache/*`, `spark/render.rs`);
//! a file no extractor recognises is an error naming the file, never skipped silently.

use serde_json::Value;

use crate::fabric::render::{ratio_columns, speed_ratio};
use crate::fabric::result::{BenchResult, Mode};
use crate::machine::Machine;
use crate::report::model::{slug, Chart, ChartKind, Run, Series, Table, Target, XFormat};

const MIB: f64 = 1048576.0;

/// One run from one file's JSON.
pub fn run_of(file: &str, v: &Value) -> Result<Run, String> {
    let bench = v.get("bench").or_else(|| v.get("test")).and_then(Value::as_str).unwrap_or("").to_string();
    let machine = match v.get("machine") {
        Some(m) => Machine::from_json(m).describe(),
        None => "unknown machine".into(),
    };
    let stamp = |k: &str| v.pointer(&format!("/run/{k}")).and_then(Value::as_str).map(str::to_string);
    let mut run = Run {
        file: file.to_string(),
        bench: bench.clone(),
        machine,
        commit: stamp("commit").unwrap_or_else(|| "unknown commit".into()),
        written_utc: stamp("written_utc").unwrap_or_default(),
        command: stamp("command").unwrap_or_default(),
        load_average: stamp("load_average").unwrap_or_default(),
        charts: Vec::new(),
        tables: Vec::new(),
        targets: targets_of(v),
    };
    let id = |suffix: &str| slug(&format!("{} {suffix}", file.trim_end_matches(".json")));
    match bench.as_str() {
        "fabric lat" | "fabric bw" | "fabric rate" => fabric_charts(&mut run, v, &id)?,
        "fabric mem" => fabric_mem_chart(&mut run, v, &id),
        "mem lat" => cache_charts(&mut run, v, &id, "workload", &[("us_p50", "p50 latency, us", true)]),
        "mem thr" => cache_charts(&mut run, v, &id, "workload", &[("ops_per_s", "operations/s", false)]),
        "mem nb" => cache_charts(
            &mut run,
            v,
            &id,
            "request",
            &[("nonblocking_ops_per_s", "operations/s, non-blocking", false), ("blocking_ops_per_s", "operations/s, blocking", false)],
        ),
        "mem hybrid" => hybrid_charts(&mut run, v, &id),
        "spark groupby" | "spark sortby" | "spark terasort" | "spark pagerank" | "spark sql" => spark_charts(&mut run, v, &id),
        "spark all" => {
            for test in v.get("tests").and_then(Value::as_array).into_iter().flatten() {
                spark_charts(&mut run, test, &id);
            }
        }
        "mapreduce avg" | "mapreduce rand" | "mapreduce skew" | "mapreduce sort" | "mapreduce terasort" => mapreduce_charts(&mut run, v, &id),
        "mapreduce all" => {
            for test in v.get("tests").and_then(Value::as_array).into_iter().flatten() {
                mapreduce_charts(&mut run, test, &id);
            }
        }
        "rpc lat" => rpc_chart(&mut run, v, &id, "bytes", "p50_us", "payload", "p50 latency, us", true),
        "rpc thr" => rpc_chart(&mut run, v, &id, "clients", "calls_per_s", "client threads", "calls/s", false),
        "rpc callbench" => rpc_chart(&mut run, v, &id, "clients", "calls_per_s", "client threads", "calls/s", false),
        "hdfs meta" => hdfs_meta_charts(&mut run, v, &id),
        "hdfs swl" | "hdfs srl" | "hdfs rrl" | "hdfs swt" | "hdfs srt" => hdfs_charts(&mut run, v, &id),
        "hdfs all" => {
            for test in v.get("tests").and_then(Value::as_array).into_iter().flatten() {
                hdfs_charts(&mut run, test, &id);
            }
        }
        "hbase pe" => hbase_charts(&mut run, v, &id),
        "hdfs dfsio" => dfsio_charts(&mut run, v, &id, "hdfs dfsio", &crate::hdfs::dfsio::DFSIO_CONFIGS),
        "hdfs tiers dfsio" => dfsio_charts(&mut run, v, &id, "hdfs tiers dfsio", &crate::hdfs::tiers::CONFIGS),
        "hdfs tiers" => hdfs_tiers_charts(&mut run, v, &id),
        "hdfs tiers skew" => hdfs_tiers_skew_chart(&mut run, v, &id),
        other => return Err(format!("{file}: not a result ohb report knows (bench '{other}')")),
    }
    Ok(run)
}

fn targets_of(v: &Value) -> Vec<Target> {
    let list = v.get("targets").and_then(Value::as_array).cloned().unwrap_or_default();
    list.iter()
        .map(|t| Target {
            name: t.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
            verdict: match t.get("pass").and_then(Value::as_bool) {
                Some(true) => "PASS".into(),
                Some(false) => "FAIL".into(),
                None => "reported".into(),
            },
            detail: t.get("detail").and_then(Value::as_str).unwrap_or("").to_string(),
        })
        .collect()
}

fn lines(id: String, title: String, x_label: &str, y_label: &str, y_log: bool, series: Vec<Series>) -> Chart {
    Chart {
        id,
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        y_log,
        kind: ChartKind::Lines { series, x_format: XFormat::Size, x_log: true },
    }
}

/// Latency, bandwidth or rate against size per variant, and the ratio columns of the table as
/// their own chart (the point of those tests: the fabric against the default it replaces).
fn fabric_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) -> Result<(), String> {
    let result = BenchResult::from_json(v).map_err(|e| format!("{}: {e}", run.file))?;
    let mode = result.mode().ok_or_else(|| format!("{}: no test mode in '{}'", run.file, result.bench))?;
    let (metric, y_label): (fn(&crate::fabric::result::Point) -> Option<f64>, &str) = match mode {
        Mode::Lat => (|p| p.lat_us_p50, "round trip p50, us"),
        Mode::Bw => (|p| p.bw_mb_s, "bandwidth, MB/s (2^20)"),
        Mode::Rate => (|p| p.msg_rate, "messages/s"),
    };
    let series = result
        .variants
        .iter()
        .map(|variant| Series {
            name: variant.name.clone(),
            points: variant.points.iter().filter_map(|p| Some((p.size_bytes as f64, metric(p)?))).collect(),
        })
        .collect();
    let layer = &result.layer;
    run.charts.push(lines(id("values"), format!("{} ({layer})", result.bench), "message size", y_label, true, series));
    let columns = ratio_columns(&result);
    if !columns.is_empty() {
        let sizes = result.sizes();
        let mut series: Vec<Series> = columns
            .iter()
            .map(|c| Series {
                name: format!("{} vs {}", c.variant, c.reference),
                points: sizes
                    .iter()
                    .filter_map(|&size| {
                        let variant = result.variant(c.variant)?.point(size)?;
                        let reference = result.variant(c.reference)?.point(size)?;
                        Some((size as f64, speed_ratio(mode, variant, reference)?))
                    })
                    .collect(),
            })
            .collect();
        let (first, last) = (sizes.first().copied().unwrap_or(1) as f64, sizes.last().copied().unwrap_or(1) as f64);
        series.push(Series { name: "equal (1.00x)".into(), points: vec![(first, 1.0), (last, 1.0)] });
        let title = format!("{} ({layer}): speed ratios", result.bench);
        run.charts.push(lines(id("ratios"), title, "message size", "speed ratio, > 1: faster", true, series));
    }
    Ok(())
}

/// Resident memory of both processes over the run against the allowance.
fn fabric_mem_chart(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let samples = v.get("samples").and_then(Value::as_array).cloned().unwrap_or_default();
    let curve = |key: &str| -> Vec<(f64, f64)> {
        samples.iter().filter_map(|s| Some((s.get("t_s")?.as_f64()?, s.get(key)?.as_f64()? / MIB))).collect()
    };
    let mut series = vec![
        Series { name: "server RSS".into(), points: curve("server_rss_bytes") },
        Series { name: "client RSS".into(), points: curve("client_rss_bytes") },
    ];
    if let (Some(allowed), Some(first), Some(last)) = (
        v.pointer("/summary/allowed_bytes").and_then(Value::as_f64),
        series[0].points.first().map(|p| p.0),
        series[0].points.last().map(|p| p.0),
    ) {
        series.push(Series { name: "allowed (pool cap + overhead)".into(), points: vec![(first, allowed / MIB), (last, allowed / MIB)] });
    }
    run.charts.push(Chart {
        id: id("rss"),
        title: "fabric mem: resident memory under load".into(),
        x_label: "seconds".into(),
        y_label: "RSS, MiB".into(),
        y_log: false,
        kind: ChartKind::Lines { series, x_format: XFormat::Number, x_log: false },
    });
}

/// The cache suite's points: one chart per operation (GET, SET, MIX; iget, bget, ...) and metric,
/// one line per server.
fn cache_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String, group_key: &str, metrics: &[(&str, &str, bool)]) {
    let points = v.get("points").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut groups: Vec<String> = Vec::new();
    let mut variants: Vec<String> = Vec::new();
    for p in &points {
        let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        if !groups.contains(&text(group_key)) {
            groups.push(text(group_key));
        }
        if !variants.contains(&text("variant")) {
            variants.push(text("variant"));
        }
    }
    for group in &groups {
        for &(metric, y_label, y_log) in metrics {
            let series = variants
                .iter()
                .map(|variant| Series {
                    name: variant.clone(),
                    points: points
                        .iter()
                        .filter(|p| p[group_key] == group.as_str() && p["variant"] == variant.as_str() && p["error"].is_null())
                        .filter_map(|p| Some((p.get("size_bytes")?.as_f64()?, p.get(metric)?.as_f64()?)))
                        .collect(),
                })
                .collect();
            let title = format!("{} {group}: {y_label}", run.bench);
            run.charts.push(lines(id(&format!("{group} {metric}")), title, "value size", y_label, y_log, series));
        }
    }
}

fn bars(id: String, title: String, x_label: &str, y_label: &str, bars: Vec<(String, f64)>) -> Chart {
    Chart { id, title, x_label: x_label.into(), y_label: y_label.into(), y_log: false, kind: ChartKind::Bars { bars } }
}

/// Data larger than memory: average latency with the miss penalty and the share of gets answered,
/// one bar per server.
fn hybrid_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let spill = v.get("spill").and_then(Value::as_array).cloned().unwrap_or_default();
    let bar_of = |key: &str| -> Vec<(String, f64)> {
        spill
            .iter()
            .filter_map(|s| Some((s.get("server")?.as_str()?.to_string(), s.get(key)?.as_f64()?)))
            .collect()
    };
    let latency = bar_of("us_avg_with_penalty");
    if !latency.is_empty() {
        let title = "mem hybrid: average get latency with the miss penalty".to_string();
        run.charts.push(bars(id("latency"), title, "server", "us, average incl. penalty", latency));
        let title = "mem hybrid: gets answered".to_string();
        run.charts.push(bars(id("success"), title, "server", "% of gets that hit", bar_of("success_percent")));
    }
    let modes = v.pointer("/nb/modes").and_then(Value::as_array).cloned().unwrap_or_default();
    let nb: Vec<(String, f64)> =
        modes.iter().filter_map(|m| Some((m.get("mode")?.as_str()?.to_string(), m.get("ops_per_s")?.as_f64()?))).collect();
    if !nb.is_empty() {
        let title = "mem nb --hybrid: gets/s, blocking vs iget / bget".to_string();
        run.charts.push(bars(id("nb"), title, "mode", "gets/s", nb));
    }
}

/// Job time (median) per shuffle configuration, and executors' peak memory.
fn spark_charts(run: &mut Run, test: &Value, id: &dyn Fn(&str) -> String) {
    let bench = test.get("bench").and_then(Value::as_str).unwrap_or("spark");
    let configs = test.get("configs").and_then(Value::as_array).cloned().unwrap_or_default();
    let bar_of = |pointer: &str, scale: f64| -> Vec<(String, f64)> {
        configs
            .iter()
            .filter_map(|c| Some((c.get("name")?.as_str()?.to_string(), c.pointer(pointer)?.as_f64()? * scale)))
            .collect()
    };
    let job = bar_of("/median/job_ms", 1e-3);
    if !job.is_empty() {
        run.charts.push(bars(id(&format!("{bench} job")), format!("{bench}: job time (median)"), "configuration", "seconds", job));
    }
    let rss = bar_of("/median/executor_peak_rss_mib", 1.0);
    if !rss.is_empty() {
        let title = format!("{bench}: largest executor's peak RSS (median)");
        run.charts.push(bars(id(&format!("{bench} rss")), title, "configuration", "MiB", rss));
    }
    let failures: Vec<Vec<String>> = test
        .get("failures")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| Some(vec![f.as_str()?.to_string()]))
        .collect();
    if !failures.is_empty() {
        let table_id = id(&format!("{bench} failures"));
        run.tables.push(Table { id: table_id, title: format!("{bench}: failures"), header: vec!["failure".into()], rows: failures });
    }
}

/// `ohb rpc lat|thr` (`rpc/cli.rs`): one line per configuration, failed points left out.
#[allow(clippy::too_many_arguments)]
fn rpc_chart(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String, x: &str, y: &str, x_label: &str, y_label: &str, y_log: bool) {
    let results = v.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    let series = crate::rpc::CONFIGS
        .iter()
        .map(|config| Series {
            name: config.to_string(),
            points: results
                .iter()
                .filter(|r| r["config"] == *config && r["error"].is_null())
                .filter_map(|r| Some((r.get(x)?.as_f64()?, r.get(y)?.as_f64()?)))
                .collect(),
        })
        .collect();
    let mut chart = lines(id(y), format!("{}: {y_label}", run.bench), x_label, y_label, y_log, series);
    if x == "clients" {
        if let ChartKind::Lines { x_format, .. } = &mut chart.kind {
            *x_format = XFormat::Number;
        }
    }
    run.charts.push(chart);
}

/// Job time, the longest reducer's shuffle phase and the largest reducer's peak memory per shuffle
/// configuration (medians over the runs, as `mapreduce/render.rs` shows them), per test.
fn mapreduce_charts(run: &mut Run, test: &Value, id: &dyn Fn(&str) -> String) {
    let bench = test.get("bench").and_then(Value::as_str).unwrap_or("mapreduce");
    let runs = test.get("runs").and_then(Value::as_array).cloned().unwrap_or_default();
    // The medians the suite's own table shows (`mapreduce/render.rs`), one bar per configuration.
    let medians: Vec<(&str, crate::mapreduce::render::Medians)> = crate::mapreduce::CONFIGS
        .iter()
        .filter_map(|config| Some((*config, crate::mapreduce::render::medians(&runs, config)?)))
        .collect();
    let bar_of = |figure: fn(&crate::mapreduce::render::Medians) -> Option<f64>, scale: f64| -> Vec<(String, f64)> {
        medians.iter().filter_map(|(config, m)| Some((config.to_string(), figure(m)? * scale))).collect()
    };
    let job = bar_of(|m| Some(m.job_ms), 1e-3);
    if !job.is_empty() {
        run.charts.push(bars(id(&format!("{bench} job")), format!("{bench}: job time (median)"), "configuration", "seconds", job));
        let title = format!("{bench}: longest reducer's shuffle phase (median)");
        run.charts.push(bars(id(&format!("{bench} shuffle")), title, "configuration", "seconds", bar_of(|m| Some(m.shuffle_ms), 1e-3)));
    }
    let reducer = bar_of(|m| m.reducer_peak_rss_mib, 1.0);
    if !reducer.is_empty() {
        let title = format!("{bench}: largest reduce task's peak RSS (median)");
        run.charts.push(bars(id(&format!("{bench} reducer rss")), title, "configuration", "MiB", reducer));
    }
}

/// One bar per HDFS configuration: the figure `hdfs/render.rs` shows (p50 latency, or MB/s for swt and srt).
fn hdfs_charts(run: &mut Run, test: &Value, id: &dyn Fn(&str) -> String) {
    let bench = test.get("bench").and_then(Value::as_str).unwrap_or("hdfs");
    let name = bench.trim_start_matches("hdfs ");
    let runs = test.get("runs").and_then(Value::as_array).cloned().unwrap_or_default();
    let values: Vec<(String, f64)> = crate::hdfs::CONFIGS
        .iter()
        .filter_map(|config| {
            let r = runs.iter().find(|r| r["config"] == *config)?;
            Some((config.to_string(), crate::hdfs::render::figure(name, r)?))
        })
        .collect();
    if !values.is_empty() {
        let kind = if crate::hdfs::is_write(name) { "write" } else { "read" };
        let (title, unit) = if crate::hdfs::is_throughput(name) {
            (format!("{kind} throughput (median)"), "MB/s")
        } else {
            (format!("{kind} latency (p50)"), "ms")
        };
        run.charts.push(bars(id(bench), format!("{bench}: {title}"), "configuration", unit, values));
    }
}

/// NNThroughputBenchmark: ops/s per configuration, one bar chart per operation (failed points left out).
fn hdfs_meta_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let results = v.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    for op in crate::hdfs::meta::OPS {
        let values: Vec<(String, f64)> = crate::rpc::CONFIGS
            .iter()
            .filter_map(|config| {
                let r = results.iter().find(|r| r["config"] == *config && r["op"] == op && r["error"].is_null())?;
                Some((config.to_string(), r["ops_per_s"].as_f64()?))
            })
            .collect();
        if !values.is_empty() {
            run.charts.push(bars(id(&format!("meta {op}")), format!("hdfs meta: NNThroughputBenchmark {op}"), "configuration", "ops/s", values));
        }
    }
}

/// Hadoop's TestDFSIO (`ohb hdfs dfsio`, `ohb hdfs tiers dfsio`: `bench`, with its `configs`): its
/// "Throughput mb/sec" per configuration (the median of its rounds), one bar chart for write, one for read.
fn dfsio_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String, bench: &str, configs: &[&str]) {
    let runs = v.get("runs").and_then(Value::as_array).cloned().unwrap_or_default();
    for test in crate::hdfs::dfsio::DFSIO_TESTS {
        let values: Vec<(String, f64)> = configs
            .iter()
            .filter_map(|config| {
                let rounds: Vec<f64> = runs
                    .iter()
                    .filter(|r| r["config"] == *config)
                    .filter_map(|r| r["testdfsio"].as_array()?.iter().find(|x| x["test"] == test)?["throughput_mb_s"].as_f64())
                    .collect();
                Some((config.to_string(), crate::stats::median(&rounds)?))
            })
            .collect();
        if !values.is_empty() {
            let title = format!("{bench}: TestDFSIO {test} throughput");
            run.charts.push(bars(id(&format!("{bench} {test}")), title, "configuration", "MB/s", values));
        }
    }
}

/// `ohb hdfs tiers`: write (acknowledged, until persisted) and read MB/s per configuration.
fn hdfs_tiers_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let runs = v.get("runs").and_then(Value::as_array).cloned().unwrap_or_default();
    for (key, title) in [
        ("write_mb_s", "write throughput, acknowledged (median)"),
        ("write_persisted_mb_s", "write throughput until every RAM replica is persisted (median)"),
        ("read_mb_s", "read throughput (median)"),
    ] {
        let values: Vec<(String, f64)> = crate::hdfs::tiers::CONFIGS
            .iter()
            .filter_map(|config| Some((config.to_string(), runs.iter().find(|r| r["config"] == *config)?[key].as_f64()?)))
            .collect();
        if !values.is_empty() {
            run.charts.push(bars(id(&format!("hdfs tiers {key}")), format!("hdfs tiers: {title}"), "configuration", "MB/s", values));
        }
    }
}

/// `ohb hdfs tiers skew`: the share of reads served from SSD per window of reads (the tiering service at work).
fn hdfs_tiers_skew_chart(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let column = |key: &str| v["result"][key].as_array().cloned().unwrap_or_default();
    let values: Vec<(String, f64)> = column("window_reads_end")
        .iter()
        .zip(column("window_ssd_fraction"))
        .filter_map(|(end, share)| Some((format!("reads to {}", end.as_f64()?), 100.0 * share.as_f64()?)))
        .collect();
    if !values.is_empty() {
        run.charts.push(bars(id("hdfs tiers skew"), "hdfs tiers skew: reads served from SSD, per window".into(), "window", "%", values));
    }
}

/// HBase's PerformanceEvaluation: p50 latency per configuration, one bar chart per test.
fn hbase_charts(run: &mut Run, v: &Value, id: &dyn Fn(&str) -> String) {
    let results = v.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    for test in crate::hbase::TESTS {
        let values: Vec<(String, f64)> = crate::hbase::CONFIGS
            .iter()
            .filter_map(|config| {
                let r = results.iter().find(|r| r["config"] == *config && r["test"] == test)?;
                Some((config.to_string(), r["p50_us"].as_f64()?))
            })
            .collect();
        if !values.is_empty() {
            run.charts.push(bars(id(&format!("hbase {test}")), format!("hbase {test}: p50 latency"), "configuration", "us", values));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The shape `spark/render.rs`'s `test_json` writes, cut to what the report reads.
    #[test]
    fn spark_all_gives_job_time_and_memory_bars_per_test() {
        let test = |name: &str| {
            json!({"bench": format!("spark {name}"), "configs": [
                {"name": "vanilla", "median": {"job_ms": 12000.0, "executor_peak_rss_mib": 900.0}},
                {"name": "plugin", "median": {"job_ms": 10000.0, "executor_peak_rss_mib": 1000.0}},
                {"name": "plugin-tcp", "median": null, "error": "boom"}],
              "failures": ["plugin-tcp: boom"]})
        };
        let v = json!({"bench": "spark all", "tests": [test("groupby"), test("sortby")]});
        let run = run_of("ohb-spark-all.json", &v).unwrap();
        assert_eq!(run.commit, "unknown commit");
        assert_eq!(run.machine, "unknown machine");
        let ids: Vec<&str> = run.charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["ohb-spark-all-spark-groupby-job", "ohb-spark-all-spark-groupby-rss", "ohb-spark-all-spark-sortby-job", "ohb-spark-all-spark-sortby-rss"]);
        assert_eq!(run.charts[0].kind, ChartKind::Bars { bars: vec![("vanilla".into(), 12.0), ("plugin".into(), 10.0)] });
        assert_eq!(run.tables.len(), 2);
        assert_eq!(run.tables[0].rows, [vec!["plugin-tcp: boom".to_string()]]);
    }

    /// `ohb spark all` also writes each test's own file: every Spark workload's is known (the demo's
    /// `ohb report` failed on `ohb-spark-pagerank.json` in session 39).
    #[test]
    fn every_spark_workloads_own_file_is_charted() {
        for name in ["groupby", "sortby", "terasort", "pagerank", "sql"] {
            let v = json!({"bench": format!("spark {name}"), "configs": [
                {"name": "vanilla", "median": {"job_ms": 12000.0, "executor_peak_rss_mib": 900.0}}]});
            let run = run_of(&format!("ohb-spark-{name}.json"), &v).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(run.charts.len(), 2, "{name}");
        }
    }

    /// The shape `hdfs/cli.rs` writes: one result line per configuration under "runs".
    #[test]
    fn hdfs_all_gives_one_bar_chart_per_test() {
        let test = |name: &str| {
            json!({"bench": format!("hdfs {name}"), "runs": [
                {"config": "vanilla", "latency_ms_p50": 30.0, "throughput_mb_s": 100.0},
                {"config": "plugin", "latency_ms_p50": 10.0, "throughput_mb_s": 300.0}]})
        };
        let v = json!({"bench": "hdfs all", "tests": [test("srl"), test("srt")]});
        let run = run_of("ohb-hdfs-all.json", &v).unwrap();
        assert_eq!(run.charts.len(), 2);
    }

    /// The shape `hdfs/dfsio.rs` writes: TestDFSIO's results per configuration under "runs".
    #[test]
    fn hdfs_dfsio_gives_write_and_read_bars() {
        let run_json = |config: &str, mb_s: f64| {
            json!({"config": config, "testdfsio": [{"test": "write", "throughput_mb_s": mb_s}, {"test": "read", "throughput_mb_s": mb_s * 3.0}]})
        };
        let v = json!({"bench": "hdfs dfsio", "runs": [run_json("vanilla", 20.0), run_json("plugin", 30.0), run_json("vanilla", 25.0),
            run_json("plugin", 90.0), run_json("vanilla", 21.0), run_json("plugin", 31.0)]});
        let run = run_of("ohb-hdfs-dfsio.json", &v).unwrap();
        assert_eq!(run.charts.len(), 2);
        let ChartKind::Bars { bars } = &run.charts[0].kind else { panic!("bars") };
        assert_eq!(bars, &vec![("vanilla".to_string(), 21.0), ("plugin".to_string(), 31.0)], "one bar per configuration, its median");
        assert!(run.charts[1].id.contains("read"), "{}", run.charts[1].id);
    }

    /// The shape `hdfs/tiers_dfsio.rs` writes: `dfsio.rs`'s runs, with the tiers configurations.
    #[test]
    fn hdfs_tiers_dfsio_gives_write_and_read_bars_per_storage_configuration() {
        let run_json = |config: &str, mb_s: f64| {
            json!({"config": config, "round": 0, "testdfsio": [{"test": "write", "throughput_mb_s": mb_s}, {"test": "read", "throughput_mb_s": mb_s * 2.0}],
                   "counters": {"replicas_ram_disk": 8}})
        };
        let v = json!({"bench": "hdfs tiers dfsio", "runs": [run_json("hhh", 30.0), run_json("hot", 20.0), run_json("hhh-l-bb", 10.0)]});
        let run = run_of("ohb-hdfs-tiers-dfsio.json", &v).unwrap();
        assert_eq!(run.charts.len(), 2);
        let ChartKind::Bars { bars } = &run.charts[1].kind else { panic!("bars") };
        assert_eq!(bars, &vec![("hot".to_string(), 40.0), ("hhh".to_string(), 60.0), ("hhh-l-bb".to_string(), 20.0)], "in the tiers' order");
        assert!(run.charts[0].title.starts_with("hdfs tiers dfsio: TestDFSIO write"), "{}", run.charts[0].title);
    }

    /// The shape `hdfs/tiers.rs` writes: one result per configuration under "runs", the targets.
    #[test]
    fn hdfs_tiers_gives_write_persisted_and_read_bars_and_its_targets() {
        let v = json!({"bench": "hdfs tiers", "runs": [
            {"config": "hot", "write_mb_s": 90.0, "write_persisted_mb_s": 90.0, "read_mb_s": 300.0},
            {"config": "hhh", "write_mb_s": 80.0, "write_persisted_mb_s": 40.0, "read_mb_s": 350.0}],
            "targets": [{"name": "HHH write >= 1.5x HOT", "ratio": 0.89, "pass": false, "detail": "acknowledged"}]});
        let run = run_of("ohb-hdfs-tiers.json", &v).unwrap();
        assert_eq!(run.charts.len(), 3);
        assert_eq!(run.charts[1].kind, ChartKind::Bars { bars: vec![("hot".into(), 90.0), ("hhh".into(), 40.0)] });
        assert_eq!(run.targets.len(), 1);
        assert_eq!(run.targets[0].verdict, "FAIL");
    }

    /// The shape `hdfs/tiers_skew.rs` writes: the JVM's result under "result", the target.
    #[test]
    fn hdfs_tiers_skew_gives_the_ssd_share_per_window_and_its_target() {
        let v = json!({"bench": "hdfs tiers skew", "result": {"window_reads_end": [200.0, 400.0], "window_ssd_fraction": [0.125, 0.76]},
            "targets": [{"name": "reads from SSD after warm-up >= 90 %", "ratio": 0.67, "pass": false, "detail": ""}]});
        let run = run_of("ohb-hdfs-tiers-skew.json", &v).unwrap();
        assert_eq!(run.charts.len(), 1);
        assert_eq!(run.charts[0].kind, ChartKind::Bars { bars: vec![("reads to 200".into(), 12.5), ("reads to 400".into(), 76.0)] });
        assert_eq!(run.targets[0].verdict, "FAIL");
    }

    /// The shape `mapreduce/cli.rs` writes: the JVM's result lines under "runs".
    #[test]
    fn mapreduce_all_gives_job_and_shuffle_bars_per_test() {
        let test = |name: &str| {
            json!({"bench": format!("mapreduce {name}"), "runs": [
                {"config": "vanilla", "job_ms": 30000, "shuffle_ms": 9000, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 0},
                {"config": "plugin", "job_ms": 20000, "shuffle_ms": 4000, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 10},
                {"config": "plugin", "job_ms": 24000, "shuffle_ms": 5000, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 10},
                {"config": "plugin-tcp", "job_ms": 28000, "shuffle_ms": 8000, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 10}]})
        };
        let v = json!({"bench": "mapreduce all", "tests": [test("avg"), test("skew")]});
        let run = run_of("ohb-mapreduce-all.json", &v).unwrap();
        let ids: Vec<&str> = run.charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert!(ids[0].contains("avg-job") && ids[3].contains("skew-shuffle"), "{ids:?}");
        assert_eq!(
            run.charts[0].kind,
            ChartKind::Bars { bars: vec![("vanilla".into(), 30.0), ("plugin".into(), 20.0), ("plugin-tcp".into(), 28.0)] }
        );
        let sort = run_of("s.json", &test("sort")).unwrap();
        assert_eq!(sort.charts.len(), 2, "no memory figures, no memory chart");
        let with_memory = json!({"bench": "mapreduce avg", "runs": [
            {"config": "vanilla", "job_ms": 3000, "shuffle_ms": 900, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 0, "reducer_peak_rss_mib": 400.0},
            {"config": "plugin", "job_ms": 2000, "shuffle_ms": 400, "merge_ms": 1, "shuffle_bytes": 10, "fabric_bytes": 10, "reducer_peak_rss_mib": -1.0}]});
        let run = run_of("m.json", &with_memory).unwrap();
        assert_eq!(run.charts[2].kind, ChartKind::Bars { bars: vec![("vanilla".into(), 400.0)] }, "-1: not sampled");
    }

    #[test]
    fn rpc_results_draw_one_line_per_configuration_without_failed_points() {
        let point = |config: &str, clients: u64, error: Option<&str>| {
            json!({"test": "thr", "config": config, "clients": clients, "calls_per_s": 1000.0 * clients as f64, "error": error})
        };
        let v = json!({"bench": "rpc thr", "results": [point("vanilla", 1, None), point("vanilla", 8, None),
            point("fabric", 1, None), point("fabric", 8, Some("only 3 of 9 calls went over the fabric"))],
            "targets": [{"name": "throughput with 8 clients >= 2x vanilla", "pass": false, "detail": ""}]});
        let run = run_of("ohb-rpc-thr.json", &v).unwrap();
        assert_eq!(run.targets[0].verdict, "FAIL");
        let ChartKind::Lines { series, x_format, .. } = &run.charts[0].kind else { panic!("lines") };
        assert_eq!(*x_format, XFormat::Number);
        assert_eq!(series[0].points, vec![(1.0, 1000.0), (8.0, 8000.0)]);
        assert_eq!(series[1].points, vec![(1.0, 1000.0)], "the failed point is left out");
    }

    #[test]
    fn hdfs_meta_gives_an_ops_bar_chart_per_operation() {
        let point = |config: &str, op: &str, error: Option<&str>| json!({"config": config, "op": op, "ops_per_s": 700.0, "error": error});
        let v = json!({"bench": "hdfs meta", "results": [point("vanilla", "open", None), point("fabric", "open", Some("no proof")),
            point("vanilla", "delete", None)]});
        let run = run_of("ohb-hdfs-meta.json", &v).unwrap();
        assert_eq!(run.charts.len(), 2);
        assert_eq!(run.charts[0].kind, ChartKind::Bars { bars: vec![("vanilla".into(), 700.0)] }, "the failed point is left out");
    }

    #[test]
    fn unknown_results_are_an_error_naming_the_file() {
        let e = run_of("x.json", &json!({"bench": "hbase ycsb"})).unwrap_err();
        assert!(e.contains("x.json") && e.contains("hbase ycsb"), "{e}");
    }

    #[test]
    fn targets_keep_their_verdict() {
        let v = json!({"targets": [{"name": "a", "pass": true, "detail": "d"}, {"name": "b", "pass": null, "detail": ""}]});
        let verdicts: Vec<String> = targets_of(&v).into_iter().map(|t| t.verdict).collect();
        assert_eq!(verdicts, ["PASS", "reported"]);
    }

    /// The shape `hbase/cli.rs` writes: one result line per configuration and test under "results".
    #[test]
    fn hbase_gives_a_p50_bar_chart_per_test() {
        let v = json!({"bench": "hbase pe", "results": [
            {"config": "netty", "test": "randomRead", "p50_us": 1900.0},
            {"config": "fabric", "test": "randomRead", "p50_us": 1400.0},
            {"config": "fabric-tcp", "test": "randomWrite", "error": "boom"}]});
        let run = run_of("ohb-hbase-pe.json", &v).unwrap();
        let ids: Vec<&str> = run.charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["ohb-hbase-pe-hbase-randomread"]);
        assert_eq!(run.charts[0].kind, ChartKind::Bars { bars: vec![("netty".into(), 1900.0), ("fabric".into(), 1400.0)] });
    }
}
