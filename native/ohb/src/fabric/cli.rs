//! `ohb fabric ...`: flags to runs, the runs, their tables and JSON files.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::{parse_size, parse_sizes, Args};
use crate::child::{default_java, find_repo_root, Launcher};
use crate::fabric::jvm::{run_jvm, JvmRun, DEFAULT_JAR, JVM_TIMEOUT_DEFAULT};
use crate::fabric::hosts::{run_on_hosts, Servers};
use crate::fabric::measure::Plan;
use crate::fabric::mem::{run_mem, MemRun};
use crate::fabric::node::{parse_transport, SendPath};
use crate::fabric::render::{default_json_path, render, result_json};
use crate::fabric::result::{Mode, Variant};
use crate::fabric::suite::{default_sizes, quick_sizes, run_rust, FabricRun};
use crate::output::{fail_if_points_failed, write_json};

const BENCH_VALUE_FLAGS: &[&str] = &[
    "sizes",
    "hosts",
    "servers-netns",
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
const BENCH_SWITCH_FLAGS: &[&str] = &["quick", "jvm", "fabric-copy", "no-same-host-pull", "no-progress", "help"];
const MEM_VALUE_FLAGS: &[&str] =
    &["seconds", "threads", "window", "max-size", "pool-cap-mib", "overhead-mib", "transport", "json"];
const MEM_SWITCH_FLAGS: &[&str] = &["no-progress", "help"];

pub fn fabric_main(argv: &[String]) -> Result<(), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    match test {
        "lat" | "bw" | "rate" | "all" => {
            let args = Args::parse(&argv[1..], BENCH_VALUE_FLAGS, BENCH_SWITCH_FLAGS)?;
            if args.switch("help") {
                print!("{}", crate::usage());
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
            let Some(servers) = servers_from(&args)? else {
                // --hosts netns: this run made the hosts; ohb runs again as the client on host b.
                let inner: Vec<String> = std::iter::once("fabric".to_string()).chain(argv.iter().cloned()).collect();
                return run_on_hosts(&Launcher::current()?.exe, &inner);
            };
            let mut failures = Vec::new();
            let several = modes.len() > 1;
            for mode in modes {
                let failed = bench(mode, &args, &servers)?;
                failures.extend(failed.into_iter().map(|f| if several { format!("{} {f}", mode.name()) } else { f }));
            }
            let layer = if args.switch("jvm") { " --jvm" } else { "" };
            fail_if_points_failed(&format!("fabric {test}{layer}"), &failures)
        }
        "mem" => {
            let args = Args::parse(&argv[1..], MEM_VALUE_FLAGS, MEM_SWITCH_FLAGS)?;
            if args.switch("help") {
                print!("{}", crate::usage());
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

/// `--hosts loopback|netns`: where the servers run. `None` for the outer run of `--hosts netns`
/// (no `--servers-netns` yet), which creates the hosts and runs the client on one of them.
fn servers_from(args: &Args) -> Result<Option<Servers>, String> {
    match (args.value("hosts").unwrap_or("loopback"), args.value("servers-netns")) {
        ("loopback", None) => Ok(Some(Servers::Loopback)),
        ("loopback", Some(_)) => Err("--servers-netns belongs to --hosts netns (ohb passes it to itself)".into()),
        ("netns", _) if args.switch("jvm") => Err("--hosts netns measures the Rust layer (without --jvm)".into()),
        ("netns", None) => Ok(None),
        ("netns", Some(namespace)) => Ok(Some(Servers::Netns { namespace: namespace.to_string() })),
        (other, _) => Err(format!("--hosts: '{other}' is not loopback or netns")),
    }
}

/// Runs one test, prints its table and writes its JSON; returns the failed points.
fn bench(mode: Mode, args: &Args, servers: &Servers) -> Result<Vec<String>, String> {
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
    let layer = match (jvm, servers) {
        (true, _) => "jvm",
        (false, Servers::Loopback) => "rust",
        (false, Servers::Netns { .. }) => "rust-netns",
    };
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
        let same_host_pull = !args.switch("no-same-host-pull");
        let run = FabricRun { mode, sizes, plan, variants, send_path, same_host_pull, progress, servers: servers.clone() };
        run_rust(&run, &Launcher::current()?)
    };
    print!("{}", render(&result));
    let path = args
        .value("json")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_json_path(repo_root.as_deref(), mode.name(), layer));
    write_json(&path, &result_json(&result))?;
    println!("results: {}\n", path.display());
    Ok(result.failures())
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
    fail_if_points_failed("fabric mem", &report.failures())
}

#[cfg(test)]
mod hosts_flag_tests {
    use super::*;

    fn parse(words: &[&str]) -> Args {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        Args::parse(&words, BENCH_VALUE_FLAGS, BENCH_SWITCH_FLAGS).unwrap()
    }

    #[test]
    fn hosts_flag_chooses_where_servers_run() {
        assert_eq!(servers_from(&parse(&[])).unwrap(), Some(Servers::Loopback));
        assert_eq!(servers_from(&parse(&["--hosts", "netns"])).unwrap(), None, "the outer run makes the hosts");
        assert_eq!(
            servers_from(&parse(&["--hosts", "netns", "--servers-netns", "ns-a"])).unwrap(),
            Some(Servers::Netns { namespace: "ns-a".into() })
        );
        assert!(servers_from(&parse(&["--hosts", "mars"])).unwrap_err().contains("not loopback or netns"));
        assert!(servers_from(&parse(&["--hosts", "netns", "--jvm"])).unwrap_err().contains("without --jvm"));
        assert!(servers_from(&parse(&["--servers-netns", "ns-a"])).unwrap_err().contains("belongs to --hosts netns"));
    }
}
