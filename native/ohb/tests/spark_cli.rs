//! `ohb spark` through the binary: flags and missing files are reported before any JVM starts.
//! (The applications themselves run in `make smoke`: `ohb spark all --quick`.)

use std::process::Command;

fn ohb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ohb"))
}

#[test]
fn usage_lists_the_spark_tests() {
    let out = ohb().arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["spark groupby", "spark sortby", "spark terasort", "spark pagerank", "spark sql", "ohb spark groupby|sortby|terasort|pagerank|sql|all", "--executor-memory", "--plugin-jar"] {
        assert!(text.contains(needle), "usage lacks {needle}:\n{text}");
    }
}

#[test]
fn bad_spark_command_lines_fail_with_a_message() {
    let log_dir = std::env::temp_dir().join(format!("ohb-spark-cli-{}", std::process::id()));
    let log_dir = log_dir.to_str().unwrap();
    for (args, expected) in [
        (&["spark"][..], "groupby, sortby, terasort, pagerank, sql or all"),
        (&["spark", "join"][..], "groupby, sortby, terasort, pagerank, sql or all"),
        (&["spark", "groupby", "--repeats", "0"][..], "--repeats"),
        (&["spark", "all", "--configs", "vanilla,rdma"][..], "--configs"),
        (&["spark", "sortby", "--executor-memory", "4t"][..], "memory"),
        (&["spark", "groupby", "--conf", "novalue"][..], "--conf"),
        (&["spark", "groupby", "--bogus"][..], "--bogus"),
        (&["spark", "all", "--spark-home", "/nonexistent/spark", "--log-dir", log_dir][..], "no Spark home"),
    ] {
        let out = ohb().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(log_dir);
}
