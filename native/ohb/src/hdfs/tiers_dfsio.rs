//! `ohb hdfs tiers dfsio`: Hadoop's own TestDFSIO (the hadoop-mapreduce-client-jobclient 3.4.2 tests jar,
//! unmodified, run as `ohb hdfs dfsio` runs it: ToolRunner, the LocalJobRunner, HDFS's own client) `-write`
//! then `-read` on each of `ohb hdfs tiers`' storage configurations (HOT, LAZY_PERSIST, ALL_SSD, HHH,
//! HHH-M, HHH-L, HHH-L-BB), each in its own JVM (`io.slipstream.ohb.hdfs.TiersDfsioBench`) on the same
//! mini cluster layout `ohb hdfs tiers` gives that configuration (`TiersCluster` in `jvm/ohb-hdfs`: the
//! RAM_DISK directories on tmpfs, SSD, DISK and for HHH-L the ARCHIVE directories on the disk, the same
//! directories as `tiers.rs`'s run, removed after each configuration). TestDFSIO's base directory
//! (`test.build.data`) carries the configuration's storage policy, so its files inherit it; HHH-L-BB gets a
//! real `slipstream-cache` as its burst buffer, started and killed by `ohb` (`tiers_pfs.rs`).
//!
//! The JVM fails (and `ohb` exits non-zero) when TestDFSIO fails, when a RAM or burst buffer replica was not
//! persisted within two minutes of the write, or when any replica of TestDFSIO's files is off the tiers the
//! configuration promises (TiersBench's placement check; HHH-L-BB: every ARCHIVE replica went through the
//! burst buffer and was flushed). Here TestDFSIO's result blocks are parsed (`dfsio.rs`), checked (both
//! tests, every file, every byte) and set side by side, medians over the rounds, ratios against HOT.
//! Logs go to `build/ohb-hdfs-tiers-dfsio-<config>.log`.

use crate::stats::round_order;
use super::dfsio::{check_results, medians, parse_dfsio, DfsioResult, DfsioRun, DfsioWorkload, DFSIO_TESTS};
use super::tiers::{burst_buffer_line, parse_configs, ram_bytes_for_blocks, RunDirs, BURST_BUFFERED, CONFIGS};
use super::tiers_run::{check_shm_room, finish, run_tiers_jvm};
use super::tiers_pfs::BbSizing;
use crate::args::Args;
use crate::child::{bench_jvm, find_repo_root};
use crate::machine::Machine;
use crate::output::run_stamp;
use crate::table::{format_mb_s, format_ratio};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

const RESULT_PREFIX: &str = "OHB_TIERS_DFSIO ";
const MIB: u64 = 1 << 20;
const USAGE: &str = "Usage: ohb hdfs tiers dfsio [--quick] [--configs LIST] [--rounds N] [--files N] [--file-bytes N] [--block-bytes N] \
                     [--sync-on-close] [--warmup-passes N] [--shm-dir DIR] [--json FILE] [--no-progress]\n";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct TiersDfsioArgs {
    pub workload: DfsioWorkload,
    pub configs: Vec<String>,
    /// `dfs.datanode.synconclose` on for every configuration: persistent tiers then pay their device's
    /// speed at `close()` instead of the page cache's (HDFS's default: off).
    pub sync_on_close: bool,
    /// Unmeasured TestDFSIO passes (write and read, files then deleted) before the measured one, in the
    /// same JVM and cluster: a fresh JVM's JIT compilers took 30 % of all samples during the jobs
    /// (profiled in session 29), more than HDFS's data path. Full run 1, `--quick` 0.
    pub warmup_passes: u32,
    pub shm_dir: PathBuf,
    pub json: Option<PathBuf>,
}

/// Full: 2 files of 256 MiB (as `ohb hdfs dfsio`) in 64 MiB blocks (as `ohb hdfs tiers`), 3 rounds;
/// `--quick`: 2 files of 16 MiB in 4 MiB blocks, 1 round. Two map tasks at once (the machine's 2 cores).
pub fn workload(quick: bool) -> DfsioWorkload {
    if quick {
        DfsioWorkload { files: 2, file_bytes: 16 * MIB, block_bytes: 4 * MIB, maps: 2, rounds: 1 }
    } else {
        DfsioWorkload { files: 2, file_bytes: 256 * MIB, block_bytes: 64 * MIB, maps: 2, rounds: 3 }
    }
}

pub fn parse_args(argv: &[String]) -> Result<TiersDfsioArgs, String> {
    let args = Args::parse(argv, &["configs", "rounds", "files", "file-bytes", "block-bytes", "warmup-passes", "shm-dir", "json"], &["quick", "no-progress", "sync-on-close"])
        .map_err(|e| format!("{e}\n{USAGE}"))?;
    if !args.positional.is_empty() {
        return Err(format!("unexpected {:?}\n{USAGE}", args.positional));
    }
    let quick = args.switch("quick");
    let mut w = workload(quick);
    let warmup_passes = args.number("warmup-passes")?.unwrap_or(if quick { 0 } else { 1 });
    w.files = args.number("files")?.unwrap_or(w.files);
    w.file_bytes = args.number("file-bytes")?.unwrap_or(w.file_bytes);
    w.block_bytes = args.number("block-bytes")?.unwrap_or(w.block_bytes);
    w.rounds = args.number("rounds")?.unwrap_or(w.rounds);
    if !(1..=64).contains(&w.files)
        || !(MIB..=16 << 30).contains(&w.file_bytes)
        || !(MIB..=1 << 30).contains(&w.block_bytes)
        || !w.block_bytes.is_multiple_of(4096)
        || !(1..=9).contains(&w.rounds)
        || warmup_passes > 3
    {
        return Err("files 1 to 64, file 1 MiB to 16 GiB, block 1 MiB to 1 GiB and a multiple of 4096 (HDFS's condition for a RAM \
                    write), rounds 1 to 9, warm-up passes 0 to 3"
            .into());
    }
    Ok(TiersDfsioArgs {
        workload: w,
        configs: parse_configs(&args)?,
        sync_on_close: args.switch("sync-on-close"),
        warmup_passes,
        shm_dir: PathBuf::from(args.value("shm-dir").unwrap_or("/dev/shm")),
        json: args.value("json").map(PathBuf::from),
    })
}

/// TestDFSIO's own files with a block beside the measured ones, over its write and its read (as the
/// NameNode's audit log of a run lists them): per phase a control file per measured file and the job's
/// reduce output (its `_SUCCESS` is empty; the LocalJobRunner stages the job on the local disk). Each is one
/// block at most, but reserves a whole block on the RAM tier (and in the burst buffer's pending limit)
/// while it is written, and they inherit the base directory's policy.
pub fn side_files(w: &DfsioWorkload) -> u64 {
    2 * (u64::from(w.files) + 1)
}

/// Each DataNode's RAM tier: every block of TestDFSIO's files (HHH-M and LAZY_PERSIST put all three
/// replicas in RAM) and of its side files, as `ohb hdfs tiers` sizes it.
pub fn ram_bytes_per_datanode(w: &DfsioWorkload) -> u64 {
    let blocks = u64::from(w.files) * w.file_bytes.div_ceil(w.block_bytes) + side_files(w);
    ram_bytes_for_blocks(blocks, w.block_bytes)
}

/// The JVM's `OHB_TIERS_DFSIO {json}` line: its configuration, placement and persistence figures.
pub fn parse_result(stdout: &str) -> Result<Value, String> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT_PREFIX)).ok_or("no OHB_TIERS_DFSIO line")?;
    serde_json::from_str(line).map_err(|e| format!("bad OHB_TIERS_DFSIO line {line}: {e}"))
}

fn run_config(root: &Path, a: &TiersDfsioArgs, config: &str, dirs: &RunDirs) -> Result<(Vec<DfsioResult>, Value), String> {
    let w = &a.workload;
    let mut cmd = bench_jvm(root, "ohb-hdfs", "2g")?;
    cmd.arg("io.slipstream.ohb.hdfs.TiersDfsioBench")
        .args(["--config", config, "--files", &w.files.to_string(), "--file-bytes", &w.file_bytes.to_string()])
        .args(["--block-bytes", &w.block_bytes.to_string(), "--maps", &w.maps.to_string()])
        .args(["--ram-bytes-per-datanode", &ram_bytes_per_datanode(w).to_string()])
        .args(["--sync-on-close", &a.sync_on_close.to_string()])
        .args(["--warmup-passes", &a.warmup_passes.to_string()]);
    let sizing = BbSizing::for_files(u64::from(w.files), w.file_bytes, w.block_bytes, side_files(w));
    let run = run_tiers_jvm(root, "ohb-hdfs-tiers-dfsio", config, dirs, cmd, sizing)?;
    let result = run.result(parse_result)?;
    let with_log = |e: String| format!("{e}; log: {}", run.log.display());
    let tests = parse_dfsio(&run.stdout).map_err(with_log)?;
    check_results(&tests, w).map_err(with_log)?;
    Ok((tests, result))
}

/// The tables: per TestDFSIO test one row per configuration run (`configs`, in [`CONFIGS`] order) with the
/// medians over the rounds that passed and the ratio of the median throughput to HOT's, or "failed" when
/// none did; the write table adds where the replicas were (the first round that passed) and the longest
/// wait until every RAM (and burst buffer) replica was persisted.
pub fn render(w: &DfsioWorkload, warmup_passes: u32, configs: &[String], runs: &[DfsioRun]) -> String {
    let mut out = format!(
        "ohb hdfs tiers dfsio: Hadoop's TestDFSIO per storage configuration, {} files of {} B, block {} B, replication 3, \
         {} maps at once (LocalJobRunner), RAM tier {} B per DataNode; medians of {} round(s), configurations in rotated order; \
         {} unmeasured warm-up pass(es) of the same write and read per JVM before the measured one (cold: the first's MB/s)\n",
        w.files,
        w.file_bytes,
        w.block_bytes,
        w.maps,
        ram_bytes_per_datanode(w),
        w.rounds,
        warmup_passes
    );
    for test in DFSIO_TESTS {
        let hot = medians(runs, "hot", test).map(|m| m.0).filter(|t| *t > 0.0);
        out += &format!(
            "TestDFSIO {test}\n{:<15} {:>8} {:>13} {:>9} {:>7} {:>7} {:>8}",
            "config", "MB/s", "min-max", "avg rate", "exec s", "vs HOT", "cold"
        );
        out += if test == "write" { "  replicas R/S/D/A  persist wait ms\n" } else { "\n" };
        for config in CONFIGS.iter().filter(|c| configs.iter().any(|x| x == *c)) {
            let (Some(first), Some((throughput, rate, exec_s, lowest, highest))) =
                (runs.iter().find(|r| r.config == *config), medians(runs, config, test))
            else {
                out += &format!("{config:<13} {:>8}\n", "failed");
                continue;
            };
            let persist_wait_ms_max = runs.iter().filter(|r| r.config == *config).filter_map(|r| r.counters["persist_wait_ms"].as_u64()).max();
            let cold = cold_median(runs, config, test).map(format_mb_s).unwrap_or_else(|| "-".into());
            out += &format!(
                "{:<15} {:>8} {:>13} {:>9} {:>7.2} {:>7} {:>8}",
                config,
                format_mb_s(throughput),
                format!("{}-{}", format_mb_s(lowest), format_mb_s(highest)),
                format_mb_s(rate),
                exec_s,
                hot.map(|h| format_ratio(throughput / h)).unwrap_or_else(|| "-".into()),
                cold
            );
            if test == "write" {
                let replicas = ["ram_disk", "ssd", "disk", "archive"].map(|t| first.counters[format!("replicas_{t}")].as_u64().unwrap_or(0).to_string());
                out += &format!("  {:<16}  {}", replicas.join("/"), persist_wait_ms_max.map(|ms| ms.to_string()).unwrap_or_default());
            }
            out += "\n";
        }
    }
    for config in BURST_BUFFERED {
        if let Some(bb) = runs.iter().find(|r| r.config == config && r.counters["bb_replicas_buffered"].is_u64()) {
            out += &burst_buffer_line(&bb.counters, &format!("round {}, TestDFSIO's files and the jobs' own", bb.round + 1));
        }
    }
    out
}

/// The median over a configuration's runs of its first warm-up pass's throughput in `test` (the figure
/// of a fresh JVM), if any run had one.
fn cold_median(runs: &[DfsioRun], config: &str, test: &str) -> Option<f64> {
    let mut cold: Vec<f64> = runs.iter().filter(|r| r.config == config).filter_map(|r| r.counters[format!("warmup_{test}_mb_s")].as_f64()).collect();
    if cold.is_empty() {
        return None;
    }
    cold.sort_by(f64::total_cmp);
    Some(cold[cold.len() / 2])
}

pub fn tiers_dfsio_main(argv: &[String]) -> Result<(), String> {
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        print!("{USAGE}");
        return Ok(());
    }
    let a = parse_args(argv)?;
    let w = &a.workload;
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let started = Instant::now();
    let dirs = RunDirs::create(&a.shm_dir, &root)?;
    check_shm_room(&a.shm_dir, ram_bytes_per_datanode(w))?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for round in 0..w.rounds {
        for config in round_order(&a.configs, round as usize) {
            match run_config(&root, &a, &config, &dirs) {
                Ok((results, counters)) => runs.push(DfsioRun { config, round, results, counters }),
                Err(e) => failures.push(format!("{config} round {}: {e}", round + 1)),
            }
        }
    }
    print!("{}", render(w, a.warmup_passes, &a.configs, &runs));
    if a.sync_on_close {
        println!("dfs.datanode.synconclose=true in every configuration: a block file on a persistent tier is synced at close");
    }
    let stamp = run_stamp();
    println!("machine: {}; load average {} (1, 5, 15 min) at the end", Machine::detect().describe(), stamp["load_average"].as_str().unwrap_or("?"));
    let value = json!({"bench": "hdfs tiers dfsio", "run": stamp,
        "workload": {"files": w.files, "file_bytes": w.file_bytes, "block_bytes": w.block_bytes, "maps": w.maps, "rounds": w.rounds,
            "sync_on_close": a.sync_on_close, "warmup_passes": a.warmup_passes, "ram_bytes_per_datanode": ram_bytes_per_datanode(w)},
        "runs": runs.iter().map(DfsioRun::to_json).collect::<Vec<_>>()});
    let path = a.json.clone().unwrap_or_else(|| root.join("results").join("ohb-hdfs-tiers-dfsio.json"));
    finish("ohb hdfs tiers dfsio", &path, &value, started, &failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_quick_defaults_overrides_and_refuses_bad_values() {
        let a = parse_args(&words("--quick --configs hot,hhh-l-bb --rounds 2 --json x.json --no-progress")).unwrap();
        assert_eq!((a.workload.files, a.workload.file_bytes, a.workload.block_bytes, a.workload.rounds), (2, 16 << 20, 4 << 20, 2));
        assert_eq!(a.configs, vec!["hot", "hhh-l-bb"]);
        assert_eq!(a.json, Some(PathBuf::from("x.json")));
        assert_eq!(a.shm_dir, PathBuf::from("/dev/shm"));
        assert!(!a.sync_on_close);
        assert!(parse_args(&words("--sync-on-close")).unwrap().sync_on_close);
        assert_eq!(a.warmup_passes, 0, "--quick measures a fresh JVM");
        assert_eq!(parse_args(&[]).unwrap().warmup_passes, 1);
        assert_eq!(parse_args(&words("--quick --warmup-passes 2")).unwrap().warmup_passes, 2);
        let full = parse_args(&[]).unwrap();
        assert_eq!(full.configs.len(), CONFIGS.len());
        assert_eq!((full.workload.file_bytes, full.workload.rounds), (256 << 20, 3));
        let sized = parse_args(&words("--files 3 --file-bytes 8388608 --block-bytes 2097152")).unwrap().workload;
        assert_eq!((sized.files, sized.file_bytes, sized.block_bytes), (3, 8 << 20, 2 << 20));
        for bad in [
            "--files 0",
            "--files 65",
            "--file-bytes 1000",
            "--block-bytes 1048577",
            "--rounds 0",
            "--rounds 10",
            "--warmup-passes 4",
            "--configs hhh",
            "--configs hot,vanilla",
            "--maps 2",
            "extra",
        ] {
            assert!(parse_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ram_tier_holds_testdfsios_blocks_and_its_side_files() {
        let w = workload(true);
        // 2 files x 4 blocks, and 2 phases x (2 control files + 1 reduce output) side files.
        assert_eq!(side_files(&w), 6);
        assert_eq!(ram_bytes_per_datanode(&w), 14 * ((4 << 20) + (64 << 10)) * 10 / 6);
        // A file of a block and a byte takes two blocks; one file, 2 x (1 + 1) side files.
        let tail = DfsioWorkload { file_bytes: (4 << 20) + 1, files: 1, ..w };
        assert_eq!(ram_bytes_per_datanode(&tail), (2 + 4) * ((4 << 20) + (64 << 10)) * 10 / 6);
    }

    /// What TiersDfsioBench prints: TestDFSIO's result file, then its own line.
    fn stdout(config: &str, write_mb_s: f64, read_mb_s: f64) -> String {
        format!(
            "----- TestDFSIO ----- : write\n        Number of files: 2\n Total MBytes processed: 32\n      Throughput mb/sec: {write_mb_s}\n\
             \x20Average IO rate mb/sec: {write_mb_s}\n  IO rate std deviation: 0.5\n     Test exec time sec: 6.2\n\n\
             ----- TestDFSIO ----- : read\n        Number of files: 2\n Total MBytes processed: 32\n      Throughput mb/sec: {read_mb_s}\n\
             \x20Average IO rate mb/sec: {read_mb_s}\n  IO rate std deviation: 0.5\n     Test exec time sec: 2.1\n\n\
             OHB_TIERS_DFSIO {{\"config\":\"{config}\",\"replicas_ram_disk\":8,\"replicas_ssd\":16,\"replicas_disk\":0,\
             \"replicas_archive\":0,\"persist_wait_ms\":420,\"ok\":true}}\n"
        )
    }

    fn run(config: &str, round: u32, write_mb_s: f64, read_mb_s: f64) -> DfsioRun {
        let text = stdout(config, write_mb_s, read_mb_s);
        let results = parse_dfsio(&text).unwrap();
        check_results(&results, &workload(true)).unwrap();
        DfsioRun { config: config.into(), round, results, counters: parse_result(&text).unwrap() }
    }

    #[test]
    fn the_result_line_is_found_among_testdfsios_output() {
        let r = parse_result(&stdout("hhh", 10.0, 20.0)).unwrap();
        assert_eq!((r["config"].as_str(), r["persist_wait_ms"].as_u64()), (Some("hhh"), Some(420)));
        assert!(parse_result("OHB_TIERS_RESULT {}").is_err());
        assert!(parse_result("OHB_TIERS_DFSIO {bad").is_err());
    }

    #[test]
    fn tables_show_medians_ratios_to_hot_replicas_and_failures() {
        let runs = vec![
            run("hot", 0, 40.0, 100.0),
            run("hhh", 0, 60.0, 150.0),
            run("hot", 1, 50.0, 300.0),
            run("hhh", 1, 20.0, 100.0),
            run("hot", 2, 45.0, 200.0),
            run("hhh", 2, 90.0, 400.0),
        ];
        let w = DfsioWorkload { rounds: 3, ..workload(true) };
        let configs = vec!["hot".to_string(), "hhh".to_string()];
        let table = render(&w, 0, &configs, &runs);
        let line = |test: &str, config: &str| {
            let block = table.split(&format!("TestDFSIO {test}\n")).nth(1).unwrap();
            block.lines().find(|l| l.starts_with(&format!("{config} "))).unwrap_or_else(|| panic!("{config}: {table}")).to_string()
        };
        // hot write 40, 45, 50 (median 45); hhh 20, 60, 90 (median 60): 1.33x.
        assert!(line("write", "hot").contains(" 45.0 ") && line("write", "hot").contains("1.00x"), "{table}");
        assert!(line("write", "hhh").contains("1.33x") && line("write", "hhh").contains("20.0-90.0"), "{table}");
        assert!(line("write", "hhh").contains("8/16/0/0") && line("write", "hhh").ends_with(" 420"), "{table}");
        // read: hot 100, 200, 300 (200); hhh 100, 150, 400 (150): 0.75x; no placement columns.
        assert!(line("read", "hhh").contains("0.75x") && !line("read", "hhh").contains("8/16"), "{table}");
        assert!(table.contains("medians of 3 round(s)"), "{table}");
        assert!(!table.contains("lazy-persist"), "configurations not run get no row: {table}");
        // A configuration whose rounds all failed is a "failed" row; without HOT's figure no ratio.
        let hot_failed = render(&w, 0, &configs, &runs[1..2]);
        let row = |config: &str| hot_failed.lines().find(|l| l.starts_with(&format!("{config} "))).unwrap().to_string();
        assert!(row("hot").ends_with("failed") && row("hhh").contains(" - "), "{hot_failed}");
    }

    #[test]
    fn the_cold_column_is_the_median_of_the_first_warm_up_passes() {
        let mut runs = vec![run("hot", 0, 40.0, 100.0), run("hot", 1, 50.0, 300.0), run("hot", 2, 45.0, 200.0), run("hhh", 0, 60.0, 150.0)];
        for (r, cold) in runs.iter_mut().zip([10.0, 30.0, 20.0]) {
            r.counters["warmup_write_mb_s"] = json!(cold);
            r.counters["warmup_read_mb_s"] = json!(cold * 2.0);
        }
        let table = render(&DfsioWorkload { rounds: 3, ..workload(true) }, 1, &["hot".into(), "hhh".into()], &runs);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("hot ") || l.starts_with("hhh ")).collect();
        let cold = |row: &str| row.split_whitespace().nth(6).unwrap().to_string();
        assert_eq!(cold(rows[0]), "20.0", "hot write cold median: {table}");
        assert_eq!(cold(rows[1]), "-", "hhh had no warm-up pass: {table}");
        assert_eq!(cold(rows[2]), "40.0", "hot read cold median: {table}");
        assert!(table.contains("1 unmeasured warm-up pass(es)"), "{table}");
    }

    #[test]
    fn the_burst_buffer_line_names_the_round() {
        let mut bb = run("hhh-l-bb", 1, 30.0, 90.0);
        for (k, v) in [("bb_replicas_buffered", 28), ("bb_replicas_flushed", 28), ("bb_replicas_written_through", 0), ("bb_cache_cmd_set", 90)] {
            bb.counters[k] = json!(v);
        }
        bb.counters["bb_servers"] = json!("127.0.0.1:4242");
        let table = render(&workload(true), 0, &["hot".into(), "hhh-l-bb".into()], &[run("hot", 1, 40.0, 100.0), bb]);
        assert!(table.contains("127.0.0.1:4242") && table.contains("round 2, TestDFSIO's files and the jobs' own: 28 replicas buffered, 28 flushed"), "{table}");
        assert!(table.contains("0 written straight through") && table.contains("90 sets"), "{table}");
    }
}
