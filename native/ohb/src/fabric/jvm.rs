//! `--jvm`: the same tests through the JVM bridge. The JVM bench (`io.slipstream.ohb.FabricBench`
//! in `jvm/ohb`) measures the fabric, the forced-TCP fabric and blocking Java sockets, and writes
//! the shared JSON schema (see `result`); `ohb` adds `ucx_perftest` and prints the same table.
//!
//! Command: `java -cp JAR io.slipstream.ohb.FabricBench <lat|bw|rate> --sizes 8,64,.. --iterations N
//! --warmup N --json TMPFILE`, with stdout and stderr passed through (its progress shows).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::child::ChildGuard;
use crate::machine::Machine;
use crate::fabric::measure::Plan;
use crate::fabric::result::{BenchResult, Mode, Point, Variant, VariantResult};
use crate::fabric::hosts::Servers;
use crate::fabric::suite::perftest_points;
use crate::progress::Progress;

pub const MAIN_CLASS: &str = "io.slipstream.ohb.FabricBench";
/// The jar, relative to the repository root.
pub const DEFAULT_JAR: &str = "jvm/ohb/target/slipstream-ohb.jar";
/// The JVM bench's exit status when variants failed after it wrote its JSON (`FabricBench.POINTS_FAILED_EXIT`).
pub const POINTS_FAILED_EXIT: i32 = 3;
/// A JVM run that takes longer than this is killed.
pub const JVM_TIMEOUT_DEFAULT: Duration = Duration::from_secs(15 * 60);

/// Iterations and warm-up passed to the JVM bench unless given (it takes fixed counts).
pub fn default_counts(mode: Mode, quick: bool) -> (u64, u64) {
    match (mode, quick) {
        (Mode::Lat, false) => (5000, 2000),
        (Mode::Lat, true) => (1000, 500),
        (Mode::Bw, false) => (2000, 500),
        (Mode::Bw, true) => (500, 200),
        (Mode::Rate, false) => (50_000, 10_000),
        (Mode::Rate, true) => (10_000, 2000),
    }
}

/// The most a variant of the JVM bench warms up while its rate still rises, seconds (its least: 2).
pub fn warmup_max_seconds(quick: bool) -> u64 {
    if quick {
        2
    } else {
        10
    }
}

#[derive(Debug, Clone)]
pub struct JvmRun {
    pub mode: Mode,
    pub sizes: Vec<usize>,
    pub plan: Plan,
    pub quick: bool,
    pub jar: PathBuf,
    pub java: PathBuf,
    pub timeout: Duration,
    pub perftest: bool,
    /// Variants for the JVM bench (`--variants`), `None` for its default set.
    pub jvm_variants: Option<Vec<String>>,
    pub progress: bool,
}

/// The java command line (without the program).
pub fn java_args(run: &JvmRun, json_path: &Path) -> Vec<String> {
    let (iterations, warmup) = default_counts(run.mode, run.quick);
    let sizes: Vec<String> = run.sizes.iter().map(|s| s.to_string()).collect();
    let mut args = vec![
        "-cp".into(),
        run.jar.display().to_string(),
        MAIN_CLASS.into(),
        run.mode.name().into(),
        "--sizes".into(),
        sizes.join(","),
        "--iterations".into(),
        run.plan.iterations.unwrap_or(iterations).to_string(),
        "--warmup".into(),
        run.plan.warmup.unwrap_or(warmup).to_string(),
        "--json".into(),
        json_path.display().to_string(),
    ];
    // Each variant warms up until its rate stops rising: the fabric's JVM code reaches C2 seconds
    // after the JVM starts on two cores (docs/fabric.md, "The JVM bench's warm-up"). `--quick` keeps
    // the fixed 2 s.
    args.extend(["--variant-warmup-max-seconds".into(), warmup_max_seconds(run.quick).to_string()]);
    if let Some(window) = run.plan.window {
        args.extend(["--window".into(), window.to_string()]);
    }
    if run.mode != Mode::Lat {
        // The median of several timed runs, as the Rust points: one run through the JVM swings by 2x
        // to 3x (docs/fabric.md, "Where the JVM bridge's time goes").
        args.extend(["--trials".into(), run.plan.trials.to_string()]);
    }
    if let Some(variants) = &run.jvm_variants {
        args.extend(["--variants".into(), variants.join(",")]);
    }
    args
}

pub fn run_jvm(run: &JvmRun) -> Result<BenchResult, String> {
    if !run.jar.is_file() {
        return Err(format!("JVM bench jar not found: {} (build jvm/ohb first, or pass --jvm-jar)", run.jar.display()));
    }
    let json_path = std::env::temp_dir().join(format!("ohb-jvm-{}-{}.json", std::process::id(), run.mode.name()));
    let _ = std::fs::remove_file(&json_path);
    let mut cmd = Command::new(&run.java);
    cmd.args(java_args(run, &json_path));
    // libucs installs signal handlers at load time that would take the JVM's own SIGSEGVs.
    cmd.env("UCX_ERROR_SIGNALS", "");
    if run.progress {
        eprintln!("ohb: {} {}", run.java.display(), java_args(run, &json_path).join(" "));
    }
    let mut java = ChildGuard::spawn("JVM bench", cmd, false)?;
    let status = java.wait_timeout(run.timeout)?;
    drop(java);
    // POINTS_FAILED_EXIT: the bench wrote its JSON and failed variants carry their errors (shown in the
    // table, counted by the caller); any other failure leaves nothing to show.
    if !status.success() && status.code() != Some(POINTS_FAILED_EXIT) {
        return Err(format!("JVM bench failed ({status})"));
    }
    let text = std::fs::read_to_string(&json_path).map_err(|e| format!("read {}: {e}", json_path.display()))?;
    let _ = std::fs::remove_file(&json_path);
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("JVM bench JSON: {e}"))?;
    let mut result = BenchResult::from_json(&value)?;
    let bw_unit = value.pointer("/units/bw").and_then(serde_json::Value::as_str).unwrap_or("");
    let units_note = normalize_bw_units(&mut result, bw_unit);
    result.notes.push(units_note);
    result.notes.push("JVM bench: io.slipstream.ohb.FabricBench, its servers in a second JVM on 127.0.0.1".into());
    result.notes.push(format!(
        "JVM bench: each variant warms up on the first size until its rate stops rising (2 s to {} s)",
        warmup_max_seconds(run.quick)
    ));
    if run.mode != Mode::Lat {
        result.notes.push(format!("JVM bw/rate points: the median of {} timed runs", run.plan.trials));
    }
    check_jvm_result(&result, run.mode)?;
    // A variant that stopped early carries an error: its missing sizes become failed points.
    for variant in &mut result.variants {
        if let Some(error) = variant.error.clone() {
            for &size in &run.sizes {
                if variant.point(size).is_none() {
                    variant.points.push(Point::failed(size, error.clone()));
                }
            }
        }
    }
    if result.machine.cpus == 0 || result.machine.ucx.is_empty() {
        result.machine = Machine::detect();
    }
    if run.perftest && result.variant(Variant::UcxPerftest.name()).is_none() {
        let mut progress = Progress::new(run.progress, run.sizes.len());
        let points = perftest_points(run.mode, &run.sizes, &run.plan, &Servers::Loopback, &mut progress);
        result.variants.push(VariantResult { name: Variant::UcxPerftest.name().into(), points, error: None });
    }
    Ok(result)
}

/// Brings JVM bandwidths to MB = 2^20 bytes (ucx_perftest's unit) when the JSON declares MB = 10^6
/// (`"units":{"bw":"MB/s, MB = 10^6 bytes"}`); returns a note saying what was assumed.
pub fn normalize_bw_units(result: &mut BenchResult, bw_unit: &str) -> String {
    if bw_unit.contains("10^6") || bw_unit.contains("1e6") || bw_unit.contains("1000000") {
        for p in result.variants.iter_mut().flat_map(|v| v.points.iter_mut()) {
            p.bw_mb_s = p.bw_mb_s.map(|bw| bw * 1e6 / crate::stats::MB_BYTES);
        }
        "JVM bandwidths converted from MB = 10^6 to MB = 2^20 bytes".into()
    } else if bw_unit.is_empty() {
        "JVM bench JSON declares no bandwidth unit: taken as MB = 2^20 bytes".into()
    } else {
        format!("JVM bench bandwidth unit: {bw_unit}")
    }
}

/// The JVM's JSON must be the JVM layer of the test we asked for.
pub fn check_jvm_result(result: &BenchResult, mode: Mode) -> Result<(), String> {
    if result.layer != "jvm" {
        return Err(format!("JVM bench wrote layer '{}', expected 'jvm'", result.layer));
    }
    if result.mode() != Some(mode) {
        return Err(format!("JVM bench wrote bench '{}', expected 'fabric {}'", result.bench, mode.name()));
    }
    if result.variants.is_empty() {
        return Err("JVM bench wrote no variants".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> JvmRun {
        JvmRun {
            mode: Mode::Bw,
            sizes: vec![8, 1 << 20],
            plan: Plan {
                budget: Duration::from_millis(100),
                iterations: None,
                warmup: Some(7),
                window: None,
                trials: 3,
            },
            quick: false,
            jar: PathBuf::from("/repo/jvm/ohb/target/slipstream-ohb.jar"),
            java: PathBuf::from("java"),
            timeout: JVM_TIMEOUT_DEFAULT,
            perftest: true,
            jvm_variants: None,
            progress: false,
        }
    }

    #[test]
    fn command_line() {
        let args = java_args(&run(), Path::new("/tmp/x.json"));
        assert_eq!(
            args.join(" "),
            "-cp /repo/jvm/ohb/target/slipstream-ohb.jar io.slipstream.ohb.FabricBench bw --sizes 8,1048576 \
             --iterations 2000 --warmup 7 --json /tmp/x.json --variant-warmup-max-seconds 10 --trials 3"
        );
        let quick = JvmRun { quick: true, ..run() };
        assert!(java_args(&quick, Path::new("/tmp/x.json")).join(" ").contains("--variant-warmup-max-seconds 2 "));
    }

    #[test]
    fn passes_window_and_variants_through() {
        let mut r = run();
        r.plan.window = Some(16);
        r.jvm_variants = Some(vec!["fabric".into(), "java-socket".into()]);
        let args = java_args(&r, Path::new("/tmp/x.json")).join(" ");
        assert!(args.ends_with("--window 16 --trials 3 --variants fabric,java-socket"), "{args}");
        r.mode = Mode::Lat;
        assert!(!java_args(&r, Path::new("/tmp/x.json")).join(" ").contains("--trials"), "lat points have one run");
    }

    #[test]
    fn converts_decimal_megabytes() {
        let mut r = BenchResult {
            bench: "fabric bw".into(),
            layer: "jvm".into(),
            machine: Machine::default(),
            variants: vec![VariantResult {
                name: "java-socket".into(),
                points: vec![Point { size_bytes: 8, bw_mb_s: Some(1048.576), ..Point::default() }],
                error: None,
            }],
            notes: vec![],
        };
        assert!(normalize_bw_units(&mut r, "").contains("no bandwidth unit"));
        assert_eq!(r.variants[0].points[0].bw_mb_s, Some(1048.576));
        assert!(normalize_bw_units(&mut r, "MB/s, MB = 10^6 bytes").contains("converted"));
        assert!((r.variants[0].points[0].bw_mb_s.unwrap() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn missing_jar_is_a_clear_error() {
        let e = run_jvm(&JvmRun { jar: PathBuf::from("/nonexistent/ohb.jar"), ..run() }).unwrap_err();
        assert!(e.contains("not found"), "{e}");
    }

    #[test]
    fn checks_layer_and_mode() {
        let r = BenchResult {
            bench: "fabric bw".into(),
            layer: "jvm".into(),
            machine: Machine::default(),
            variants: vec![VariantResult { name: "java-socket".into(), points: vec![], error: None }],
            notes: vec![],
        };
        assert!(check_jvm_result(&r, Mode::Bw).is_ok());
        assert!(check_jvm_result(&r, Mode::Lat).is_err());
        assert!(check_jvm_result(&BenchResult { layer: "rust".into(), ..r }, Mode::Bw).is_err());
    }
}
