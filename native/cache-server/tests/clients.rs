//! Real memcached clients against the server: libmemcached's tools (memccapable's conformance
//! checks, memccp/memccat) and pymemcache. Each is skipped with a note if it is not installed.
mod common;

use std::path::Path;
use std::process::Command;

use common::*;

fn installed(program: &str) -> bool {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {program} is not installed");
    }
    found
}

#[test]
fn memccapable_passes_every_check() {
    if !installed("memccapable") {
        return;
    }
    let server = Server::start(&["--no-fabric"]);
    let out = Command::new("memccapable")
        .args(["-h", "127.0.0.1", "-p", &server.tcp.port().to_string(), "-t", "10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let failed: Vec<&str> = text.lines().filter(|l| l.contains('[') && !l.contains("[pass]")).collect();
    assert!(out.status.success() && failed.is_empty() && text.contains("All tests passed"), "memccapable:\n{text}");
}

#[test]
fn memccp_and_memccat_round_trip_files() {
    if !installed("memccp") || !installed("memccat") {
        return;
    }
    let server = Server::start(&["--no-fabric"]);
    let servers = format!("--servers=127.0.0.1:{}", server.tcp.port());
    let dir = std::env::temp_dir().join(format!("slipstream-memccp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files =
        [("tiny.txt", pattern(10, 1)), ("page.bin", pattern(4096, 2)), ("large.bin", pattern(500 << 10, 3)), ("empty", vec![])];
    for (name, data) in &files {
        std::fs::write(dir.join(name), data).unwrap();
    }
    for binary in [false, true] {
        let mut copy = Command::new("memccp");
        copy.arg(&servers);
        if binary {
            copy.arg("--binary");
        }
        copy.args(files.iter().map(|(name, _)| dir.join(name)));
        let out = copy.output().unwrap();
        assert!(out.status.success(), "memccp: {}", String::from_utf8_lossy(&out.stderr));
        for (name, data) in &files {
            let mut cat = Command::new("memccat");
            cat.arg(&servers);
            if binary {
                cat.arg("--binary");
            }
            // --file: the exact bytes (on stdout memccat adds a newline).
            let copied = dir.join(format!("{name}.out"));
            let out = cat.arg(format!("--file={}", copied.display())).arg(name).output().unwrap();
            assert!(out.status.success(), "memccat {name}: {}", String::from_utf8_lossy(&out.stderr));
            let read = std::fs::read(&copied).unwrap_or_default();
            assert!(read == *data, "memccat {name} (binary {binary}): {} bytes, expected {}", read.len(), data.len());
            let _ = std::fs::remove_file(&copied);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pymemcache_round_trips_every_command() {
    let python = "/usr/bin/python3";
    let has_module = Command::new(python).args(["-c", "import pymemcache"]).output().is_ok_and(|o| o.status.success());
    if !has_module {
        eprintln!("SKIPPED: {python} has no pymemcache (apt-get install python3-pymemcache)");
        return;
    }
    let server = Server::start(&[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pymemcache_roundtrip.py");
    let out = Command::new(python).arg(script).arg(server.tcp.port().to_string()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.trim() == "ok", "pymemcache:\n{text}");
}
