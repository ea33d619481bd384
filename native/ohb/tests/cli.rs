//! End to end through the `ohb` binary: servers in their own processes on loopback.

use std::process::Command;

fn ohb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ohb"))
}

#[test]
fn help_lists_the_table_of_tests() {
    for args in [&[][..], &["--help"][..]] {
        let out = ohb().args(args).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for test in ["fabric lat", "fabric bw", "fabric rate", "fabric mem"] {
            assert!(text.contains(test), "usage lacks {test}:\n{text}");
        }
    }
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = ohb().args(["fabric", "lat", "--sizes", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("size"));
    let out = ohb().args(["fabric", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hybrid_flags_are_checked_before_any_server_starts() {
    let out = ohb().arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["mem hybrid", "mem nb --hybrid", "--spill-factor", "--miss-penalty-ms", "--scan"] {
        assert!(text.contains(needle), "usage lacks {needle}:\n{text}");
    }
    for (args, expected) in [
        (&["mem", "hybrid", "--scan", "zipf"][..], "--scan"),
        (&["mem", "hybrid", "--spill-factor", "0"][..], "--spill-factor"),
        (&["mem", "hybrid", "--value-bytes", "2M"][..], "--value-bytes"),
        (&["mem", "hybrid", "--variants", "cache-tcp"][..], "--variants"),
        (&["mem", "lat", "--hybrid"][..], "--hybrid"),
        (&["mem", "nb", "--hybrid", "--req-thresh", "0"][..], "--req-thresh"),
    ] {
        let out = ohb().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// The socket variant, lat and bw, with its server in a separate `ohb __serve socket` process.
#[test]
fn socket_variant_end_to_end() {
    let dir = std::env::temp_dir().join(format!("ohb-cli-test-{}", std::process::id()));
    for mode in ["lat", "bw"] {
        let json = dir.join(format!("{mode}.json"));
        let out = ohb()
            .args(["fabric", mode, "--variants", "rust-socket", "--sizes", "8,64K", "--iterations", "200"])
            .args(["--warmup", "20", "--trials", "2", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stderr.contains("[2/2] rust-socket 64 KiB"), "progress lines:\n{stderr}");
        assert!(stdout.contains("64 KiB"), "{stdout}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["bench"], format!("fabric {mode}"));
        assert_eq!(v["layer"], "rust");
        let points = v["variants"][0]["points"].as_array().unwrap();
        assert_eq!(v["variants"][0]["name"], "rust-socket");
        assert_eq!(points.len(), 2);
        for p in points {
            assert!(p.get("error").is_none(), "{p}");
            assert_eq!(p["iterations"], 200);
            let figure = if mode == "lat" { &p["lat_us_p50"] } else { &p["bw_mb_s"] };
            assert!(figure.as_f64().unwrap() > 0.0, "{p}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A point that fails makes `ohb` exit non-zero and say which point and why on stderr, after it
/// printed the table and wrote the JSON. UCX limited to a transport that does not exist cannot
/// start the fabric server.
#[test]
fn a_failed_fabric_point_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("ohb-cli-fail-{}", std::process::id()));
    let json = dir.join("lat.json");
    let out = ohb()
        .env("UCX_TLS", "no-such-transport")
        .args(["fabric", "lat", "--variants", "fabric,rust-socket", "--sizes", "8", "--iterations", "100"])
        .args(["--warmup", "10", "--no-progress", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("ohb: fabric lat: 1 point(s) failed:\n  fabric 8 B: "), "{stderr}");
    assert!(!stderr.contains("rust-socket 8 B"), "the socket point does not fail:\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["variants"][0]["points"][0]["error"].is_string(), "{v}");
    assert!(v["variants"][1]["points"][0]["error"].is_null(), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cache suite likewise: a value larger than memcached's item size limit fails its point.
#[test]
fn a_failed_cache_point_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("ohb-cli-fail-mem-{}", std::process::id()));
    let json = dir.join("lat.json");
    let out = ohb()
        .args(["mem", "lat", "--variants", "memcached", "--ops", "SET", "--sizes", "32,2M", "--iterations", "100"])
        .args(["--no-progress", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("ohb: mem lat: 1 point(s) failed:\n  lat memcached SET 2 MiB: "), "{stderr}");
    assert!(json.is_file(), "the JSON is written before the exit");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Hadoop's own tools (`rpc callbench`, `hdfs meta`): listed, and bad flags refused before any JVM starts.
#[test]
fn hadoop_tool_flags_are_checked_before_any_jvm_starts() {
    let text = String::from_utf8(ohb().arg("--help").output().unwrap().stdout).unwrap();
    for needle in ["rpc callbench", "hdfs meta", "RPCCallBenchmark", "NNThroughputBenchmark"] {
        assert!(text.contains(needle), "usage lacks {needle}:\n{text}");
    }
    for (args, expected) in [
        (&["rpc", "callbench", "--clients", "0"][..], "--clients"),
        (&["rpc", "callbench", "--configs", "grpc"][..], "grpc"),
        (&["hdfs", "meta", "--ops", "mkdirs"][..], "mkdirs"),
        (&["hdfs", "meta", "--files"][..], "--files"),
    ] {
        let out = ohb().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
