//! `ohb spark ...`: flags to a run, the run, its tables and JSON files.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::args::{parse_list, parse_size, Args};
use crate::child::find_repo_root;
use crate::machine::Machine;
use crate::output::{fail_if_points_failed, write_json};
use crate::spark::{
    run_spark, APP_JAR, APP_TIMEOUT_DEFAULT, APP_TIMEOUT_QUICK, LOG_DIR_DEFAULT, PLUGIN_JAR, SPARK_HOME_DEFAULT,
};
use crate::spark::app::java_version;
use crate::spark::render::{render_test, test_json};
use crate::spark::run::{SparkConfig, SparkHosts, SparkRun, SparkTest, Workload};

pub const VALUE_FLAGS: &[&str] = &[
    "mappers",
    "pairs",
    "value-bytes",
    "reducers",
    "executor-memory",
    "repeats",
    "seed",
    "configs",
    "spark-home",
    "plugin-jar",
    "app-jar",
    "java",
    "timeout-s",
    "log-dir",
    "json",
    "hosts",
];
pub const SWITCH_FLAGS: &[&str] = &["quick", "no-progress", "help"];

/// `4g`, `4096m`, `4096` (MiB) -> MiB.
pub fn parse_memory_mib(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t.as_str(), ""),
    };
    let n: u64 = digits.parse().map_err(|_| format!("memory '{text}' must start with a number"))?;
    let factor = match unit.trim_end_matches(['b', 'i']) {
        "" | "m" => 1,
        "g" => 1024,
        other => return Err(format!("memory '{text}': unknown unit '{other}' (use m or g)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("memory '{text}' overflows"))
}

/// A size as Spark's `getSizeAsBytes` reads it: digits and an optional unit b, k(b), m(b), g(b),
/// t(b), p(b), powers of 1024; no unit means bytes.
pub fn spark_size_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("size '{text}' must start with a whole number"))?;
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        "p" | "pb" => 50,
        other => return Err(format!("size '{text}': unknown unit '{other}'")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("size '{text}' overflows"))
}

/// Spark settings, in order.
pub type ConfPairs = Vec<(String, String)>;

/// Takes every `--conf k=v` (or `--conf=k=v`) out of `argv`: the generic parser allows a flag once.
pub fn split_conf_flags(argv: &[String]) -> Result<(Vec<String>, ConfPairs), String> {
    let mut rest = Vec::new();
    let mut conf = Vec::new();
    let mut words = argv.iter();
    while let Some(word) = words.next() {
        let pair = if word == "--conf" {
            words.next().ok_or("--conf needs key=value")?.clone()
        } else if let Some(inline) = word.strip_prefix("--conf=") {
            inline.to_string()
        } else {
            rest.push(word.clone());
            continue;
        };
        match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => conf.push((k.trim().to_string(), v.to_string())),
            _ => return Err(format!("--conf needs key=value, got '{pair}'")),
        }
    }
    Ok((rest, conf))
}

/// The run a command line describes (nothing started yet).
pub fn run_from_args(test: &str, args: &Args, extra_conf: Vec<(String, String)>) -> Result<SparkRun, String> {
    let tests = match test {
        "all" => SparkTest::ALL.to_vec(),
        other => vec![SparkTest::parse(other).ok_or_else(|| format!("unknown test 'spark {other}' (groupby, sortby, terasort, pagerank, sql or all)"))?],
    };
    let quick = args.switch("quick");
    let hosts = match args.value("hosts") {
        Some(text) => SparkHosts::parse(text).ok_or_else(|| format!("--hosts: '{text}' is not loopback or netns"))?,
        None => SparkHosts::Loopback,
    };
    let defaults = if quick { Workload::QUICK } else { Workload::DEFAULT };
    let mappers = args.number("mappers")?.unwrap_or(defaults.mappers);
    let workload = Workload {
        mappers,
        pairs_per_mapper: args.number("pairs")?.unwrap_or(defaults.pairs_per_mapper),
        value_bytes: match args.value("value-bytes") {
            Some(text) => parse_size(text)?,
            None => defaults.value_bytes,
        },
        // As in Spark's GroupByTest: as many reducers as mappers unless told.
        reducers: args.number("reducers")?.unwrap_or(if args.value("mappers").is_some() { mappers } else { defaults.reducers }),
    };
    let root = find_repo_root();
    let from_root = |relative: &str| root.clone().unwrap_or_else(|| PathBuf::from(".")).join(relative);
    let absolute = |path: PathBuf| -> PathBuf {
        if path.is_absolute() {
            path
        } else {
            std::env::current_dir().map(|d| d.join(&path)).unwrap_or(path)
        }
    };
    let path_flag = |flag: &str, default: &str| absolute(args.value(flag).map(PathBuf::from).unwrap_or_else(|| from_root(default)));
    let log_dir = match args.value("log-dir") {
        Some(p) => absolute(PathBuf::from(p)),
        None if root.is_some() => from_root(LOG_DIR_DEFAULT),
        None => std::env::temp_dir().join("ohb-spark"),
    };
    let configs = match (args.value("configs"), hosts) {
        (Some(text), _) => parse_list(text, "--configs", SparkConfig::parse)?,
        // Across hosts no executor shares a host: vanilla-local would be vanilla again.
        (None, SparkHosts::Netns) => vec![SparkConfig::Vanilla, SparkConfig::Plugin, SparkConfig::PluginTcp],
        (None, SparkHosts::Loopback) => SparkConfig::ALL.to_vec(),
    };
    // As many rounds as configurations (at least 3): the order rotates each round (`round_order`), so
    // each configuration then runs once in every position.
    let repeats_default = if quick { 1 } else { configs.len().max(3) };
    let run = SparkRun {
        tests,
        configs,
        workload,
        executor_memory_mib: match args.value("executor-memory") {
            Some(text) => parse_memory_mib(text)?,
            None if quick => 1024,
            None => 4096,
        },
        repeats: args.number("repeats")?.unwrap_or(repeats_default),
        seed: args.number("seed")?.unwrap_or(42),
        spark_home: path_flag("spark-home", SPARK_HOME_DEFAULT),
        app_jar: path_flag("app-jar", APP_JAR),
        plugin_jar: path_flag("plugin-jar", PLUGIN_JAR),
        java: args.value("java").map(PathBuf::from).unwrap_or_else(crate::child::default_java),
        extra_conf,
        timeout: match args.number::<u64>("timeout-s")? {
            Some(s) => Duration::from_secs(s),
            None if quick => APP_TIMEOUT_QUICK,
            None => APP_TIMEOUT_DEFAULT,
        },
        log_dir,
        progress: !args.switch("no-progress"),
        hosts,
    };
    run.validate()?;
    Ok(run)
}

/// `ohb spark groupby|sortby|terasort|pagerank|sql|all [options]`.
pub fn spark_main(argv: &[String]) -> Result<(), String> {
    let test = argv.first().map(String::as_str).unwrap_or("");
    if matches!(test, "--help" | "-h") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if !matches!(test, "groupby" | "sortby" | "terasort" | "pagerank" | "sql" | "all") {
        return Err(format!("which Spark test? groupby, sortby, terasort, pagerank, sql or all (got '{test}'; see ohb --help)"));
    }
    let (rest, extra_conf) = split_conf_flags(&argv[1..])?;
    let args = Args::parse(&rest, VALUE_FLAGS, SWITCH_FLAGS)?;
    if args.switch("help") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if let Some(word) = args.positional.first() {
        return Err(format!("unexpected argument '{word}'"));
    }
    let run = run_from_args(test, &args, extra_conf)?;
    let started = Instant::now();
    let machine = Machine::detect();
    let java = java_version(&run.java);
    let results = run_spark(&run)?;
    let mut failures = Vec::new();
    let mut jsons = Vec::new();
    for result in &results {
        print!("{}", render_test(result, &run, &machine, &java));
        failures.extend(result.failures(&run.workload));
        let value = test_json(result, &run, &machine, &java);
        if args.value("json").is_none() {
            let path = find_repo_root()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("results")
                .join(format!("ohb-spark-{}.json", result.test.name()));
            write_json(&path, &value)?;
            println!("results: {}", path.display());
        }
        println!();
        jsons.push(value);
    }
    if let Some(path) = args.value("json") {
        let value = if jsons.len() == 1 { jsons.remove(0) } else { json!({"bench": "spark all", "tests": jsons}) };
        write_json(Path::new(path), &value)?;
        println!("results: {path}");
    }
    println!("ohb spark {test}: {:.0} s in all; logs in {}", started.elapsed().as_secs_f64(), run.log_dir.display());
    fail_if_points_failed(&format!("spark {test}"), &failures)
}

#[cfg(test)]
mod tests {
    use crate::spark::test_support::words;
    use super::*;

    #[test]
    fn command_line_flags() {
        let (rest, conf) = split_conf_flags(&words("--quick --conf a.b=1 --conf=c=x=y --repeats 2")).unwrap();
        assert_eq!(rest, words("--quick --repeats 2"));
        assert_eq!(conf, vec![("a.b".to_string(), "1".to_string()), ("c".to_string(), "x=y".to_string())]);
        assert!(split_conf_flags(&words("--conf")).is_err());
        assert!(split_conf_flags(&words("--conf novalue")).is_err());
        assert!(split_conf_flags(&words("--conf =1")).is_err());
        assert_eq!(parse_memory_mib("4g").unwrap(), 4096);
        assert_eq!(parse_memory_mib("4096m").unwrap(), 4096);
        assert_eq!(parse_memory_mib("2048").unwrap(), 2048);
        assert_eq!(parse_memory_mib("1GiB").unwrap(), 1024);
        assert!(parse_memory_mib("4t").is_err());
        assert!(parse_memory_mib("g").is_err());

        let args = Args::parse(&words("--quick"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        let run = run_from_args("all", &args, vec![]).unwrap();
        assert_eq!(run.workload, Workload::QUICK);
        assert_eq!((run.repeats, run.executor_memory_mib, run.tests.len(), run.configs.len()), (1, 1024, 5, 4));
        assert_eq!(run.tests, SparkTest::ALL.to_vec(), "all: groupby, sortby, terasort, pagerank, sql");
        for name in ["terasort", "pagerank", "sql"] {
            assert_eq!(run_from_args(name, &args, vec![]).unwrap().tests[0].name(), name);
        }
        let args = Args::parse(&words("--mappers 4 --configs vanilla,plugin,vanilla --executor-memory 2g"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        let run = run_from_args("sortby", &args, vec![]).unwrap();
        assert_eq!((run.workload.mappers, run.workload.reducers), (4, 4), "reducers follow mappers");
        assert_eq!(run.configs, vec![SparkConfig::Vanilla, SparkConfig::Plugin]);
        assert_eq!(run.repeats, 3, "at least 3 rounds");
        assert_eq!(run.tests, vec![SparkTest::SortBy]);
        assert_eq!(run.master(), "local-cluster[2,1,2048]");
        assert!(run.spark_home.is_absolute() && run.app_jar.is_absolute());
        let defaults = run_from_args("groupby", &Args::default(), vec![]).unwrap();
        assert_eq!((defaults.configs.len(), defaults.repeats), (4, 4), "a round per configuration: each runs once in every position");
        for bad in ["--repeats 0", "--mappers 0", "--configs nope", "--executor-memory 100m", "--reducers 0", "--value-bytes 0"] {
            let args = Args::parse(&words(bad), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
            assert!(run_from_args("groupby", &args, vec![]).is_err(), "{bad}");
        }
        assert!(run_from_args("join", &Args::default(), vec![]).is_err());
        let args = Args::parse(&words("--quick --hosts netns"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        let run = run_from_args("groupby", &args, vec![]).unwrap();
        assert_eq!(run.hosts, SparkHosts::Netns);
        assert_eq!(run.configs, vec![SparkConfig::Vanilla, SparkConfig::Plugin, SparkConfig::PluginTcp], "no vanilla-local across hosts");
        let args = Args::parse(&words("--hosts mars"), VALUE_FLAGS, SWITCH_FLAGS).unwrap();
        assert!(run_from_args("groupby", &args, vec![]).unwrap_err().contains("not loopback or netns"));
    }
}
