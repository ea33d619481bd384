//! `ohb mem ...`: flags to runs, the runs, their tables and JSON files.

use std::path::PathBuf;

use crate::args::{format_size, parse_list, parse_size, parse_sizes, Args};
use crate::cache::CacheVariant;
use crate::cache::hybrid::{run_hybrid, FitRun, HybridRun, NbHybridRun, SPILL_FACTOR_DEFAULT};
use crate::cache::hybrid::keys::Scan;
use crate::cache::hybrid::render::{hybrid_json, render_hybrid, render_nb_hybrid};
use crate::cache::hybrid::servers::HybridServer;
use crate::cache::latency::{latency_json, render_latency, run_latency, LatencyRun};
use crate::cache::nonblocking::{nonblocking_json, render_nonblocking, run_nonblocking, NbProgress, NbRequest, NbRun};
use crate::cache::servers::ServerSettings;
use crate::cache::throughput::{render_throughput, run_throughput, throughput_json, ThroughputRun};
use crate::cache::workload::Workload;
use crate::child::find_repo_root;
use crate::machine::Machine;
use crate::output::{fail_if_points_failed, write_json};
use crate::table::first_line;

const CACHE_VALUE_FLAGS: &[&str] = &[
    "sizes",
    "ops",
    "iterations",
    "threads",
    "seconds",
    "trials",
    "reqtype",
    "progress-type",
    "req-thresh",
    "count",
    "server-threads",
    "memory-mib",
    "variants",
    "json",
    "scan",
    "max-memory-mb",
    "value-bytes",
    "miss-penalty-ms",
    "spill-factor",
    "gets",
    "clients",
    "seed",
    "rounds",
];
const CACHE_SWITCH_FLAGS: &[&str] = &["quick", "no-progress", "help", "hybrid"];

pub fn cache_main(argv: &[String]) -> Result<(), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    if !matches!(test, "lat" | "thr" | "nb" | "hybrid" | "all") {
        return Err(format!("which cache test? lat, thr, nb, hybrid or all (got '{test}'; see ohb --help)"));
    }
    let args = Args::parse(&argv[1..], CACHE_VALUE_FLAGS, CACHE_SWITCH_FLAGS)?;
    if args.switch("help") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if test == "all" && args.value("json").is_some() {
        return Err("--json names one file; 'mem all' writes one default file per test".into());
    }
    let quick = args.switch("quick");
    let progress = !args.switch("no-progress");
    let mut servers = ServerSettings::default_for_this_build();
    servers.threads = args.number("server-threads")?.unwrap_or(servers.threads);
    servers.memory_mib = args.number("memory-mib")?.unwrap_or(servers.memory_mib);
    let nb_hybrid = args.switch("hybrid");
    if nb_hybrid && test != "nb" {
        return Err("--hybrid goes with 'mem nb' ('mem hybrid' includes the hybrid nb run)".into());
    }
    // For 'mem hybrid', --variants names the hybrid bench's servers.
    let variants = match args.value("variants") {
        Some(text) if test != "hybrid" => parse_list(text, "--variants", CacheVariant::parse)?,
        _ => CacheVariant::ALL.to_vec(),
    };
    let workloads = match args.value("ops") {
        None => Workload::ALL.to_vec(),
        Some(text) => parse_list(text, "--ops", Workload::parse)?,
    };
    let machine = Machine::detect();
    let root = find_repo_root();
    let json_path = |name: &str| {
        args.value("json").map(PathBuf::from).unwrap_or_else(|| {
            root.clone().unwrap_or_else(|| PathBuf::from(".")).join("results").join(format!("ohb-mem-{name}.json"))
        })
    };
    let mut failures = Vec::new();
    let small_sizes = || -> Result<Vec<usize>, String> {
        match args.value("sizes") {
            Some(text) => parse_sizes(text),
            None => Ok(vec![32, 4096]),
        }
    };
    if nb_hybrid {
        let run = hybrid_run_from(&args, quick, progress, &servers, HybridParts { spill: false, fit: false, nb: true, variants: false })?;
        let result = run_hybrid(&run)?;
        print!("{}", render_nb_hybrid(&result, &run, &machine));
        let path = json_path("nb-hybrid");
        write_json(&path, &hybrid_json(&result, &run, &machine))?;
        println!("results: {}\n", path.display());
        return fail_if_points_failed("mem nb --hybrid", &result.failures());
    }
    // Built (and its flags checked) before anything runs.
    let hybrid_run = if test == "hybrid" || test == "all" {
        let parts = HybridParts { spill: true, fit: true, nb: true, variants: test == "hybrid" };
        Some(hybrid_run_from(&args, quick, progress, &servers, parts)?)
    } else {
        None
    };
    if test == "lat" || test == "all" {
        let sizes = match args.value("sizes") {
            Some(text) => parse_sizes(text)?,
            None if quick => vec![32, 4096, 512 << 10],
            None => vec![1, 32, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 512 << 10],
        };
        let iterations: usize = args.number("iterations")?.unwrap_or(if quick { 1000 } else { 5000 });
        if iterations == 0 {
            return Err("--iterations must be positive".into());
        }
        let run = LatencyRun {
            workloads: workloads.clone(),
            sizes,
            iterations,
            warmup: (iterations / 5).max(100),
            variants: variants.clone(),
            servers: servers.clone(),
            progress,
        };
        let points = run_latency(&run)?;
        print!("{}", render_latency(&points, &run, &machine));
        let path = json_path("lat");
        write_json(&path, &latency_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failures.extend(points.iter().filter_map(|p| {
            let why = first_line(p.error.as_deref()?);
            Some(format!("lat {} {} {}: {why}", p.variant.name(), p.workload.name(), format_size(p.size_bytes)))
        }));
    }
    if test == "thr" || test == "all" {
        let run = ThroughputRun {
            workloads: workloads.clone(),
            sizes: small_sizes()?,
            client_threads: args.number("threads")?.unwrap_or(4),
            seconds_per_trial: args.number("seconds")?.unwrap_or(if quick { 0.5 } else { 2.0 }),
            trials: args.number("trials")?.unwrap_or(if quick { 1 } else { 3 }),
            variants: variants.clone(),
            servers: servers.clone(),
            progress,
        };
        if run.client_threads == 0 || run.client_threads > 256 || run.trials == 0 || run.seconds_per_trial.is_nan() || run.seconds_per_trial <= 0.0 {
            return Err("--threads must be in 1..=256, --trials and --seconds positive".into());
        }
        let points = run_throughput(&run)?;
        print!("{}", render_throughput(&points, &run, &machine));
        let path = json_path("thr");
        write_json(&path, &throughput_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failures.extend(points.iter().filter_map(|p| {
            let why = first_line(p.error.as_deref()?);
            Some(format!("thr {} {} {}: {why}", p.variant.name(), p.workload.name(), format_size(p.size_bytes)))
        }));
    }
    if test == "nb" || test == "all" {
        let requests = match args.value("reqtype") {
            None => NbRequest::ALL.to_vec(),
            Some(text) => parse_list(text, "--reqtype", NbRequest::parse)?,
        };
        let progress_type = match args.value("progress-type") {
            None => NbProgress::Wait,
            Some(text) => NbProgress::parse(text).ok_or_else(|| format!("--progress-type: '{text}' is not wait or test"))?,
        };
        let run = NbRun {
            requests,
            sizes: small_sizes()?,
            progress_type,
            req_thresh: args.number("req-thresh")?.unwrap_or(32),
            ops: args.number("count")?.unwrap_or(if quick { 4000 } else { 20000 }),
            variants,
            servers: servers.clone(),
            progress,
        };
        if run.req_thresh == 0 || run.req_thresh > 4096 || run.ops == 0 {
            return Err("--req-thresh must be in 1..=4096 and --count positive".into());
        }
        let points = run_nonblocking(&run)?;
        print!("{}", render_nonblocking(&points, &run, &machine));
        let path = json_path("nb");
        write_json(&path, &nonblocking_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failures.extend(points.iter().filter_map(|p| {
            let why = first_line(p.error.as_deref()?);
            Some(format!("nb {} {} {}: {why}", p.variant.name(), p.request.name(), format_size(p.size_bytes)))
        }));
    }
    if let Some(run) = hybrid_run {
        let result = run_hybrid(&run)?;
        print!("{}", render_hybrid(&result, &run, &machine));
        let path = json_path("hybrid");
        write_json(&path, &hybrid_json(&result, &run, &machine))?;
        println!("results: {}\n", path.display());
        failures.extend(result.failures().into_iter().map(|f| format!("hybrid {f}")));
    }
    fail_if_points_failed(&format!("mem {test}"), &failures)
}

/// Which parts of the hybrid bench a command runs.
struct HybridParts {
    spill: bool,
    fit: bool,
    nb: bool,
    /// --variants lists hybrid servers (cache-ram, cache-hybrid, memcached, memcached-ext).
    variants: bool,
}

/// The hybrid bench's parameters from the flags (defaults after OHB's ohb_memhybrid).
fn hybrid_run_from(
    args: &Args,
    quick: bool,
    progress: bool,
    servers: &ServerSettings,
    parts: HybridParts,
) -> Result<HybridRun, String> {
    let scan = match args.value("scan") {
        None => Scan::Uniform,
        Some(text) => Scan::parse(text).ok_or_else(|| format!("--scan: '{text}' is not uniform or normal"))?,
    };
    // Under 'mem all', --variants names the other benches' variants.
    let hybrid_servers = match args.value("variants") {
        Some(text) if parts.variants => parse_list(text, "--variants", HybridServer::parse)?,
        _ => HybridServer::ALL.to_vec(),
    };
    let progress_type = match args.value("progress-type") {
        None => NbProgress::Wait,
        Some(text) => NbProgress::parse(text)
            .ok_or_else(|| format!("--progress-type: '{text}' is not wait or test"))?,
    };
    let run = HybridRun {
        scan,
        max_memory_mb: args.number("max-memory-mb")?.unwrap_or(64),
        value_bytes: match args.value("value-bytes") {
            Some(text) => parse_size(text)?,
            None => 4096,
        },
        miss_penalty_ms: args.number("miss-penalty-ms")?.unwrap_or(1.5),
        spill_factor: args.number("spill-factor")?.unwrap_or(SPILL_FACTOR_DEFAULT),
        gets: args.number("gets")?.unwrap_or(if quick { 10_000 } else { 100_000 }),
        clients: args.number("clients")?.unwrap_or(1),
        seed: args.number("seed")?.unwrap_or(42),
        servers: if parts.spill { hybrid_servers } else { Vec::new() },
        fit: parts.fit.then(|| -> Result<FitRun, String> {
            Ok(FitRun {
                rounds: args.number("rounds")?.unwrap_or(if quick { 6 } else { 21 }),
                gets_tcp: if quick { 500 } else { 5000 },
                gets_fabric: if quick { 2000 } else { 20_000 },
            })
        }).transpose()?,
        nb: parts.nb.then(|| -> Result<NbHybridRun, String> {
            Ok(NbHybridRun {
                ops: args.number("count")?.unwrap_or(if quick { 4000 } else { 20_000 }),
                req_thresh: args.number("req-thresh")?.unwrap_or(32),
                progress_type,
                trials: args.number("trials")?.unwrap_or(if quick { 1 } else { 3 }),
            })
        }).transpose()?,
        settings: servers.clone(),
        progress,
    };
    run.validate()?;
    Ok(run)
}
