//! `ohb`: the command line. See `ohb --help` and the crate documentation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ohb::args::{parse_list, parse_size, parse_sizes, Args};
use ohb::child::{find_repo_root, Launcher};
use ohb::fabric_bench::{parse_transport, SendPath};
use ohb::jvm::{default_java, run_jvm, JvmRun, DEFAULT_JAR, JVM_TIMEOUT_DEFAULT};
use ohb::measure::Plan;
use ohb::mem::{run_mem, MemRun};
use ohb::report::{default_json_path, render, result_json, write_json};
use ohb::result::{Mode, Variant};
use ohb::suite::{default_sizes, quick_sizes, run_rust, FabricRun};

const BENCH_VALUE_FLAGS: &[&str] = &[
    "sizes",
    "iterations",
    "warmup",
    "budget-ms",
    "window",
    "trials",
    "variants",
    "json",
    "jvm-jar",
    "java",
    "jvm-timeout-s",
];
const BENCH_SWITCH_FLAGS: &[&str] = &["quick", "jvm", "fabric-copy", "no-progress", "help"];
const MEM_VALUE_FLAGS: &[&str] =
    &["seconds", "threads", "window", "max-size", "pool-cap-mib", "overhead-mib", "transport", "json"];
const MEM_SWITCH_FLAGS: &[&str] = &["no-progress", "help"];
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

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", ohb::usage());
            Ok(())
        }
        Some("__serve") => ohb::suite::serve_main(&argv[1..]),
        Some("__load") => ohb::mem::load_main(&argv[1..]),
        Some("fabric") => fabric_main(&argv[1..]),
        Some("mem") => cache_main(&argv[1..]),
        Some("spark") => ohb::spark_bench::spark_main(&argv[1..]),
        Some(other) => Err(format!("unknown command '{other}'; see ohb --help")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ohb: {e}");
            ExitCode::from(2)
        }
    }
}

fn fabric_main(argv: &[String]) -> Result<(), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    match test {
        "lat" | "bw" | "rate" | "all" => {
            let args = Args::parse(&argv[1..], BENCH_VALUE_FLAGS, BENCH_SWITCH_FLAGS)?;
            if args.switch("help") {
                print!("{}", ohb::usage());
                return Ok(());
            }
            if !args.positional.is_empty() {
                return Err(format!("unexpected argument '{}'", args.positional[0]));
            }
            let modes: Vec<Mode> = match Mode::parse(test) {
                Some(m) => vec![m],
                None => Mode::ALL.to_vec(),
            };
            if modes.len() > 1 && args.value("json").is_some() {
                return Err("--json names one file; 'fabric all' writes one default file per test".into());
            }
            for mode in modes {
                bench(mode, &args)?;
            }
            Ok(())
        }
        "mem" => {
            let args = Args::parse(&argv[1..], MEM_VALUE_FLAGS, MEM_SWITCH_FLAGS)?;
            if args.switch("help") {
                print!("{}", ohb::usage());
                return Ok(());
            }
            mem(&args)
        }
        "" => Err("which test? lat, bw, rate, all or mem (see ohb --help)".into()),
        other => Err(format!("unknown test 'fabric {other}'; see ohb --help")),
    }
}

fn plan_from(args: &Args, quick: bool) -> Result<Plan, String> {
    let budget_ms: u64 = args.number("budget-ms")?.unwrap_or(if quick { 100 } else { 600 });
    if budget_ms == 0 || budget_ms > 60_000 {
        return Err("--budget-ms must be in 1..=60000".into());
    }
    let window: Option<usize> = args.number("window")?;
    if window == Some(0) || window.is_some_and(|w| w > 4096) {
        return Err("--window must be in 1..=4096".into());
    }
    let trials: u32 = args.number("trials")?.unwrap_or(if quick { 3 } else { 5 });
    if trials == 0 || trials > 100 {
        return Err("--trials must be in 1..=100".into());
    }
    let iterations: Option<u64> = args.number("iterations")?;
    if iterations == Some(0) {
        return Err("--iterations must be positive".into());
    }
    Ok(Plan { budget: Duration::from_millis(budget_ms), iterations, warmup: args.number("warmup")?, window, trials })
}

fn bench(mode: Mode, args: &Args) -> Result<(), String> {
    let quick = args.switch("quick");
    let sizes = match args.value("sizes") {
        Some(text) => parse_sizes(text)?,
        None if quick => quick_sizes(),
        None => default_sizes(),
    };
    let plan = plan_from(args, quick)?;
    let progress = !args.switch("no-progress");
    let repo_root = find_repo_root();
    let jvm = args.switch("jvm");
    let layer = if jvm { "jvm" } else { "rust" };
    let result = if jvm {
        let jar = match args.value("jvm-jar") {
            Some(p) => PathBuf::from(p),
            None => {
                repo_root.as_ref().ok_or("cannot find the repository root for the default --jvm-jar")?.join(DEFAULT_JAR)
            }
        };
        let timeout = args.number::<u64>("jvm-timeout-s")?.map(Duration::from_secs).unwrap_or(JVM_TIMEOUT_DEFAULT);
        let variants = variants_from(args)?;
        run_jvm(&JvmRun {
            mode,
            sizes,
            plan,
            quick,
            jar,
            java: args.value("java").map(PathBuf::from).unwrap_or_else(default_java),
            timeout,
            perftest: variants.as_ref().is_none_or(|v| v.contains(&Variant::UcxPerftest)),
            jvm_variants: variants
                .map(|v| v.into_iter().filter(|v| *v != Variant::UcxPerftest).map(|v| v.name().to_string()).collect()),
            progress,
        })?
    } else {
        let variants = variants_from(args)?.unwrap_or_else(|| Variant::RUST.to_vec());
        if variants.contains(&Variant::JavaSocket) {
            return Err("java-socket is measured by the JVM bench: use --jvm".into());
        }
        let send_path = if args.switch("fabric-copy") { SendPath::Copy } else { SendPath::Registered };
        let run = FabricRun { mode, sizes, plan, variants, send_path, progress };
        run_rust(&run, &Launcher::current()?)
    };
    print!("{}", render(&result));
    let path = args
        .value("json")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_json_path(repo_root.as_deref(), mode.name(), layer));
    write_json(&path, &result_json(&result))?;
    println!("results: {}\n", path.display());
    Ok(())
}

fn variants_from(args: &Args) -> Result<Option<Vec<Variant>>, String> {
    let Some(text) = args.value("variants") else { return Ok(None) };
    let mut variants = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let v = Variant::parse(name).ok_or_else(|| format!("--variants: unknown variant '{name}'"))?;
        if !variants.contains(&v) {
            variants.push(v);
        }
    }
    if variants.is_empty() {
        return Err("--variants needs at least one variant".into());
    }
    Ok(Some(variants))
}

fn mem(args: &Args) -> Result<(), String> {
    let transport_text = args.value("transport").unwrap_or("auto");
    let run = MemRun {
        seconds: args.number("seconds")?.unwrap_or(60),
        threads: args.number("threads")?.unwrap_or(16),
        window: args.number("window")?.unwrap_or(4),
        size_max_bytes: parse_size(args.value("max-size").unwrap_or("4M"))?,
        pool_cap_bytes: args.number::<usize>("pool-cap-mib")?.unwrap_or(64) << 20,
        overhead_bytes: args.number::<usize>("overhead-mib")?.unwrap_or(17) << 20,
        transport: parse_transport(transport_text)
            .ok_or_else(|| format!("--transport: '{transport_text}' is not auto or tcp"))?,
        progress: !args.switch("no-progress"),
    };
    let report = run_mem(&run, &Launcher::current()?)?;
    print!("{}", report.render());
    let path = args
        .value("json")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_json_path(find_repo_root().as_deref(), "mem", "rust"));
    write_json(&path, &report.to_json())?;
    println!("results: {}", path.display());
    Ok(())
}

fn cache_main(argv: &[String]) -> Result<(), String> {
    use ohb::cache_bench::*;
    let test = argv.first().map(String::as_str).unwrap_or("");
    if !matches!(test, "lat" | "thr" | "nb" | "hybrid" | "all") {
        return Err(format!("which cache test? lat, thr, nb, hybrid or all (got '{test}'; see ohb --help)"));
    }
    let args = Args::parse(&argv[1..], CACHE_VALUE_FLAGS, CACHE_SWITCH_FLAGS)?;
    if args.switch("help") {
        print!("{}", ohb::usage());
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
    let machine = ohb::machine::Machine::detect();
    let root = find_repo_root();
    let json_path = |name: &str| {
        args.value("json").map(PathBuf::from).unwrap_or_else(|| {
            root.clone().unwrap_or_else(|| PathBuf::from(".")).join("results").join(format!("ohb-mem-{name}.json"))
        })
    };
    let mut failed_points = 0usize;
    let small_sizes = || -> Result<Vec<usize>, String> {
        match args.value("sizes") {
            Some(text) => parse_sizes(text),
            None => Ok(vec![32, 4096]),
        }
    };
    if nb_hybrid {
        let run = hybrid_run_from(&args, quick, progress, &servers, HybridParts { spill: false, fit: false, nb: true, variants: false })?;
        let result = ohb::hybrid_bench::run_hybrid(&run)?;
        print!("{}", ohb::hybrid_bench::render_nb_hybrid(&result, &run, &machine));
        let path = json_path("nb-hybrid");
        write_json_file(&path, &ohb::hybrid_bench::hybrid_json(&result, &run, &machine))?;
        println!("results: {}\n", path.display());
        let failed = result.failures();
        if failed > 0 {
            return Err(format!("{failed} measurement(s) failed (see the errors above)"));
        }
        return Ok(());
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
        write_json_file(&path, &latency_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failed_points += points.iter().filter(|p| p.error.is_some()).count();
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
        write_json_file(&path, &throughput_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failed_points += points.iter().filter(|p| p.error.is_some()).count();
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
        write_json_file(&path, &nonblocking_json(&points, &run, &machine))?;
        println!("results: {}\n", path.display());
        failed_points += points.iter().filter(|p| p.error.is_some()).count();
    }
    if let Some(run) = hybrid_run {
        let result = ohb::hybrid_bench::run_hybrid(&run)?;
        print!("{}", ohb::hybrid_bench::render_hybrid(&result, &run, &machine));
        let path = json_path("hybrid");
        write_json_file(&path, &ohb::hybrid_bench::hybrid_json(&result, &run, &machine))?;
        println!("results: {}\n", path.display());
        failed_points += result.failures();
    }
    if failed_points > 0 {
        return Err(format!("{failed_points} point(s) failed (see the errors above)"));
    }
    Ok(())
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
    servers: &ohb::cache_bench::ServerSettings,
    parts: HybridParts,
) -> Result<ohb::hybrid_bench::HybridRun, String> {
    use ohb::hybrid_bench::*;
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
        None => ohb::cache_bench::NbProgress::Wait,
        Some(text) => ohb::cache_bench::NbProgress::parse(text)
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

