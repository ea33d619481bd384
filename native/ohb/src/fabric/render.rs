//! What a fabric run prints and writes: the table, the ratio columns, the target checks, the JSON.
//!
//! Ratios are speed ratios: reference latency / fabric latency, or fabric bandwidth (rate) /
//! reference bandwidth (rate). 1.00x means equal, above 1 the fabric is faster.

use crate::table::first_line;
use crate::table::Check;
use crate::table::format_mb_s;
use crate::table::format_rate;
use crate::table::format_ratio;
use crate::table::format_us;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::args::format_size;
use crate::fabric::result::{BenchResult, Mode, Point};

/// The forced-TCP fabric must reach this fraction of plain sockets at every size.
pub const TCP_VS_SOCKET_RATIO_MIN: f64 = 0.9;

/// A ratio column: `variant` measured against `reference`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioColumn {
    pub label: &'static str,
    pub variant: &'static str,
    pub reference: &'static str,
}

/// Ratio columns that apply to a result (both variants present).
pub fn ratio_columns(result: &BenchResult) -> Vec<RatioColumn> {
    let candidates = [
        RatioColumn { label: "fab/pt", variant: "fabric", reference: "ucx_perftest" },
        RatioColumn { label: "fab/sock", variant: "fabric", reference: "rust-socket" },
        RatioColumn { label: "tcp/sock", variant: "fabric-tcp", reference: "rust-socket" },
        RatioColumn { label: "fab/jsock", variant: "fabric", reference: "java-socket" },
        RatioColumn { label: "tcp/jsock", variant: "fabric-tcp", reference: "java-socket" },
    ];
    candidates
        .into_iter()
        .filter(|c| result.variant(c.variant).is_some() && result.variant(c.reference).is_some())
        .collect()
}

/// The figure a mode compares: p50 round trip, MB/s, or messages/s.
pub fn headline(mode: Mode, p: &Point) -> Option<f64> {
    match mode {
        Mode::Lat => p.lat_us_p50,
        Mode::Bw => p.bw_mb_s,
        Mode::Rate => p.msg_rate,
    }
}

/// Speed ratio of `variant` over `reference` (> 1: the variant is faster).
pub fn speed_ratio(mode: Mode, variant: &Point, reference: &Point) -> Option<f64> {
    let (v, r) = (headline(mode, variant)?, headline(mode, reference)?);
    if v <= 0.0 || r <= 0.0 {
        return None;
    }
    Some(match mode {
        Mode::Lat => r / v,
        Mode::Bw | Mode::Rate => v / r,
    })
}

fn ratio_at(result: &BenchResult, mode: Mode, column: &RatioColumn, size: usize) -> Option<f64> {
    let v = result.variant(column.variant)?.point(size)?;
    let r = result.variant(column.reference)?.point(size)?;
    speed_ratio(mode, v, r)
}

fn cell(value: Option<f64>, format: fn(f64) -> String, failed: bool) -> String {
    match value {
        Some(v) => format(v),
        None if failed => "err".into(),
        None => "-".into(),
    }
}

/// Renders the result table, the legend and the target checks.
pub fn render(result: &BenchResult) -> String {
    let mode = result.mode().expect("bench names a mode");
    let ratios = ratio_columns(result);
    let mut header_top: Vec<(String, usize)> = vec![(String::new(), 1)];
    let mut header: Vec<String> = vec!["size".into()];
    if mode != Mode::Lat {
        header_top.push((String::new(), 1));
        header.push("win".into());
    }
    for v in &result.variants {
        match (mode, v.name.as_str()) {
            (Mode::Lat, "ucx_perftest") => {
                header_top.push((v.name.clone(), 1));
                header.push("RT=2x1w".into());
            }
            (Mode::Lat, _) => {
                header_top.push((v.name.clone(), 3));
                header.extend(["min".into(), "p50".into(), "p99".into()]);
            }
            (Mode::Bw, _) => {
                header_top.push((v.name.clone(), 1));
                header.push("MB/s".into());
            }
            (Mode::Rate, _) => {
                header_top.push((v.name.clone(), 1));
                header.push("msg/s".into());
            }
        }
    }
    if !ratios.is_empty() {
        header_top.push(("ratios".into(), ratios.len()));
        header.extend(ratios.iter().map(|r| r.label.to_string()));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for size in result.sizes() {
        let mut row = vec![format_size(size)];
        if mode != Mode::Lat {
            let window = result.variants.iter().filter_map(|v| v.point(size)?.window).next();
            row.push(window.map(|w| w.to_string()).unwrap_or_else(|| "-".into()));
        }
        for v in &result.variants {
            let p = v.point(size);
            let failed = p.is_some_and(|p| p.error.is_some());
            let get = |f: fn(&Point) -> Option<f64>| p.and_then(f);
            match (mode, v.name.as_str()) {
                (Mode::Lat, "ucx_perftest") => row.push(cell(get(|p| p.lat_us_p50), format_us, failed)),
                (Mode::Lat, _) => {
                    row.push(cell(get(|p| p.lat_us_min), format_us, failed));
                    row.push(cell(get(|p| p.lat_us_p50), format_us, failed));
                    row.push(cell(get(|p| p.lat_us_p99), format_us, failed));
                }
                (Mode::Bw, _) => row.push(cell(get(|p| p.bw_mb_s), format_mb_s, failed)),
                (Mode::Rate, _) => row.push(cell(get(|p| p.msg_rate), format_rate, failed)),
            }
        }
        for r in &ratios {
            row.push(ratio_at(result, mode, r, size).map(format_ratio).unwrap_or_else(|| "-".into()));
        }
        rows.push(row);
    }
    let mut widths: Vec<usize> = header.iter().map(String::len).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    // Widen groups whose title is longer than their columns.
    let mut col = 0;
    for (title, span) in &header_top {
        let inner: usize = widths[col..col + span].iter().sum::<usize>() + 2 * (span - 1);
        if title.len() > inner {
            widths[col + span - 1] += title.len() - inner;
        }
        col += span;
    }
    let mut out = String::new();
    let unit = match mode {
        Mode::Lat => "round-trip latency of an echo, us (ucx_perftest: 2x its one-way tag_lat median)",
        Mode::Bw => "bandwidth, MB/s (MB = 2^20 bytes), window = requests in flight, tiny acks",
        Mode::Rate => "message rate, messages/s, window = requests in flight, tiny acks",
    };
    let _ = writeln!(out, "ohb {} ({}) - {}", result.bench, result.layer, unit);
    let _ = writeln!(out, "machine: {}", result.machine.describe());
    let mut line = String::new();
    let mut col = 0;
    for (title, span) in &header_top {
        let inner: usize = widths[col..col + span].iter().sum::<usize>() + 2 * (span - 1);
        let _ = write!(line, "{:^inner$}  ", title);
        col += span;
    }
    let _ = writeln!(out, "{}", line.trim_end());
    let format_row = |cells: &[String]| {
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(line, "{:>w$}  ", c, w = widths[i]);
        }
        line.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", format_row(&header));
    for row in &rows {
        let _ = writeln!(out, "{}", format_row(row));
    }
    if !ratios.is_empty() {
        let legend: Vec<String> =
            ratios.iter().map(|r| format!("{} = {} vs {}", r.label, r.variant, r.reference)).collect();
        let _ = writeln!(
            out,
            "ratios are speeds vs a reference (latency: ref p50 / p50; bw, rate: value / ref); > 1.00x = faster:"
        );
        let _ = writeln!(out, "  {}", legend.join(", "));
    }
    for note in &result.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let errors: Vec<String> = result
        .variants
        .iter()
        .flat_map(|v| {
            v.points
                .iter()
                .filter_map(move |p| Some(format!("{} {}: {}", v.name, format_size(p.size_bytes), p.error.as_ref()?)))
        })
        .collect();
    for e in errors.iter().take(10) {
        let _ = writeln!(out, "error: {}", first_line(e));
    }
    let checks = targets(result);
    if !checks.is_empty() {
        let _ = writeln!(out, "targets:");
        for c in &checks {
            let verdict = match c.pass {
                Some(true) => " PASS",
                Some(false) => " FAIL",
                None => "",
            };
            let _ = writeln!(out, "  {}: {}{}", c.name, c.detail, verdict);
        }
    }
    out
}


/// The targets of a result: fabric vs ucx_perftest (8 B round trip, 1 MiB bandwidth), fabric vs
/// sockets (JVM: 8 B round trip, 1 MiB bandwidth), forced-TCP fabric vs sockets at every size.
pub fn targets(result: &BenchResult) -> Vec<Check> {
    let Some(mode) = result.mode() else { return Vec::new() };
    let socket = if result.variant("java-socket").is_some() { "java-socket" } else { "rust-socket" };
    let mut checks = Vec::new();
    let mut pair = |name: String, variant: &str, reference: &str, size: usize| {
        let v = result.variant(variant).and_then(|v| v.point(size));
        let r = result.variant(reference).and_then(|r| r.point(size));
        let (Some(v), Some(r)) = (v, r) else { return };
        let ratio = speed_ratio(mode, v, r);
        let show = |p: &Point| match mode {
            Mode::Lat => headline(mode, p).map(|x| format!("{} us", format_us(x))),
            Mode::Bw => headline(mode, p).map(|x| format!("{} MB/s", format_mb_s(x))),
            Mode::Rate => headline(mode, p).map(|x| format!("{} msg/s", format_rate(x))),
        };
        let detail = format!(
            "{} {} vs {} {} -> {}",
            variant,
            show(v).unwrap_or_else(|| "n/a".into()),
            reference,
            show(r).unwrap_or_else(|| "n/a".into()),
            ratio.map(format_ratio).unwrap_or_else(|| "n/a".into())
        );
        checks.push(Check { name, ratio, pass: None, detail });
    };
    let small = 8;
    let large = 1 << 20;
    match (mode, result.layer.as_str()) {
        (Mode::Lat, _) => {
            pair("8 B round trip, fabric vs 2x ucx_perftest tag_lat one-way".into(), "fabric", "ucx_perftest", small)
        }
        (Mode::Bw, _) => pair("1 MiB bandwidth, fabric vs ucx_perftest tag_bw".into(), "fabric", "ucx_perftest", large),
        (Mode::Rate, _) => {
            pair("8 B message rate, fabric vs ucx_perftest tag_bw".into(), "fabric", "ucx_perftest", small)
        }
    }
    if result.layer == "jvm" {
        match mode {
            Mode::Lat => pair("8 B round trip, fabric vs Java sockets".into(), "fabric", "java-socket", small),
            Mode::Bw => pair("1 MiB bandwidth, fabric vs Java sockets".into(), "fabric", "java-socket", large),
            Mode::Rate => pair("8 B message rate, fabric vs Java sockets".into(), "fabric", "java-socket", small),
        }
    }
    if let (Some(tcp), Some(sock)) = (result.variant("fabric-tcp"), result.variant(socket)) {
        let mut worst: Option<(f64, usize)> = None;
        let mut missing = Vec::new();
        for size in result.sizes() {
            match (tcp.point(size), sock.point(size)) {
                (Some(t), Some(s)) => match speed_ratio(mode, t, s) {
                    Some(r) if worst.is_none_or(|(w, _)| r < w) => worst = Some((r, size)),
                    Some(_) => {}
                    None => missing.push(format_size(size)),
                },
                _ => missing.push(format_size(size)),
            }
        }
        let pass = worst.map(|(w, _)| w >= TCP_VS_SOCKET_RATIO_MIN && missing.is_empty());
        let mut detail = match worst {
            Some((w, size)) => format!("worst {} at {}", format_ratio(w), format_size(size)),
            None => "no comparable sizes".into(),
        };
        if !missing.is_empty() {
            let _ = write!(detail, "; not measured at {}", missing.join(", "));
        }
        checks.push(Check {
            name: format!("fabric-tcp vs {socket} at every size (>= {TCP_VS_SOCKET_RATIO_MIN:.2}x)"),
            ratio: worst.map(|(w, _)| w),
            pass,
            detail,
        });
    }
    checks
}

/// The JSON written for a run: the result plus its target checks.
pub fn result_json(result: &BenchResult) -> Value {
    let mut v = result.to_json();
    v["targets"] = Value::Array(targets(result).iter().map(Check::to_json).collect());
    v
}

/// `results/ohb-fabric-<mode>-<layer>.json` under the repository root (or the current directory).
pub fn default_json_path(repo_root: Option<&Path>, mode_name: &str, layer: &str) -> PathBuf {
    let base = repo_root.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    base.join("results").join(format!("ohb-fabric-{mode_name}-{layer}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;
    use crate::fabric::result::VariantResult;

    fn lat_point(size: usize, p50: f64) -> Point {
        Point {
            size_bytes: size,
            iterations: 1000,
            lat_us_min: Some(p50 * 0.9),
            lat_us_p50: Some(p50),
            lat_us_p99: Some(p50 * 2.0),
            ..Point::default()
        }
    }

    fn sample(mode: &str, layer: &str) -> BenchResult {
        let variant = |name: &str, points: Vec<Point>| VariantResult { name: name.into(), points, error: None };
        BenchResult {
            bench: format!("fabric {mode}"),
            layer: layer.into(),
            machine: Machine { cpus: 2, model: "cpu".into(), kernel: "6.1".into(), ucx: "1.13.1".into(), tcp_congestion: String::new() },
            variants: vec![
                variant("fabric", vec![lat_point(8, 2.0), lat_point(4096, 4.0)]),
                variant("fabric-tcp", vec![lat_point(8, 20.0), lat_point(4096, 50.0)]),
                variant("rust-socket", vec![lat_point(8, 19.0), lat_point(4096, 40.0)]),
                variant(
                    "ucx_perftest",
                    vec![
                        Point { size_bytes: 8, lat_us_p50: Some(0.5), one_way_us_p50: Some(0.25), ..Point::default() },
                        Point::failed(4096, "no server\nmore".into()),
                    ],
                ),
            ],
            notes: vec!["test note".into()],
        }
    }

    #[test]
    fn ratios_are_speed_ratios() {
        let a = lat_point(8, 2.0);
        let b = lat_point(8, 1.0);
        assert_eq!(speed_ratio(Mode::Lat, &a, &b), Some(0.5));
        let bw = |x| Point { size_bytes: 8, bw_mb_s: Some(x), ..Point::default() };
        assert_eq!(speed_ratio(Mode::Bw, &bw(50.0), &bw(100.0)), Some(0.5));
        assert_eq!(speed_ratio(Mode::Rate, &bw(50.0), &bw(100.0)), None, "rate needs msg_rate");
    }

    #[test]
    fn table_and_targets() {
        let r = sample("lat", "rust");
        let text = render(&r);
        assert!(text.contains("RT=2x1w"), "{text}");
        assert!(text.contains("0.25x"), "fab/pt at 8 B: 0.5 / 2.0\n{text}");
        assert!(text.contains("err"), "{text}");
        assert!(text.contains("note: test note"), "{text}");
        let labels: Vec<&str> = ratio_columns(&r).iter().map(|c| c.label).collect();
        assert_eq!(labels, vec!["fab/pt", "fab/sock", "tcp/sock"]);
        let checks = targets(&r);
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[0].ratio, Some(0.25));
        assert_eq!(checks[1].pass, Some(false), "0.8x at 4 KiB");
        assert!(checks[1].detail.contains("worst 0.80x at 4 KiB"), "{}", checks[1].detail);
        let v = result_json(&r);
        assert_eq!(v["targets"].as_array().unwrap().len(), 2);
        for line in text.lines() {
            assert!(line.len() <= 160, "line too wide: {line}");
        }
    }

    #[test]
    fn jvm_targets_use_java_sockets() {
        let mut r = sample("lat", "jvm");
        r.variants[2].name = "java-socket".into();
        let names: Vec<String> = targets(&r).into_iter().map(|c| c.name).collect();
        assert!(names.iter().any(|n| n.contains("Java sockets")), "{names:?}");
        assert!(names.iter().any(|n| n.contains("fabric-tcp vs java-socket")), "{names:?}");
    }

    #[test]
    fn default_json_path_is_under_results() {
        assert_eq!(
            default_json_path(Some(Path::new("/repo")), "lat", "rust"),
            PathBuf::from("/repo/results/ohb-fabric-lat-rust.json")
        );
    }
}
