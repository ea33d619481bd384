//! `ohb`: the command line. See `ohb --help` and the crate documentation.

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", ohb::usage());
            Ok(())
        }
        Some("__serve") => ohb::fabric::suite::serve_main(&argv[1..]),
        Some("__load") => ohb::fabric::mem::load_main(&argv[1..]),
        Some("fabric") => ohb::fabric::cli::fabric_main(&argv[1..]),
        Some("mem") => ohb::cache::cli::cache_main(&argv[1..]),
        Some("spark") => ohb::spark::cli::spark_main(&argv[1..]),
        Some("report") => ohb::report::report_main(&argv[1..]),
        Some("mapreduce") => ohb::mapreduce::cli::mapreduce_main(&argv[1..]),
        Some("rpc") => ohb::rpc::cli::rpc_main(&argv[1..]),
        Some("hdfs") => ohb::hdfs::cli::hdfs_main(&argv[1..]),
        Some("hbase") => ohb::hbase::cli::hbase_main(&argv[1..]),
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
