//! The C library tested from C: tests/c/api_test.c is compiled with `cc` against the built
//! libslipstream_memcached (shared, with an rpath, and static) and run against real servers:
//! memcached over TCP (two of them, so mget spans servers), a fabric server (an in-process
//! binary-protocol server on the fabric), and slipstream-cache over TCP and the fabric when its
//! binary exists.
#[path = "../../cache-client/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::mock_fabric::MockFabricServer;
use common::{Memcached, Slipstream};

/// Where cargo put the libslipstream_memcached.{so,a} built with these tests: the `deps`
/// directory beside the test executable (`cargo test` does not copy them up to
/// target/<profile>, whose copies may be stale).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(
        deps.join("libslipstream_memcached.so").exists() && deps.join("libslipstream_memcached.a").exists(),
        "libslipstream_memcached.so/.a not in {} (cargo builds them with the tests)",
        deps.display()
    );
    deps
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A compiled test program, deleted when dropped.
struct Program(PathBuf);

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir(self.0.parent().unwrap()); // once empty
    }
}

/// Compiles the C test; `static_link` links the .a (plus UCX and the system libraries Rust needs).
fn compile(static_link: bool) -> Program {
    let lib = library_dir();
    let out_dir = std::env::temp_dir().join(format!("slipstream-capi-test-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(if static_link { "api_test_static" } else { "api_test" });
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c/api_test.c"))
        .arg("-o")
        .arg(&exe);
    if static_link {
        cc.arg(lib.join("libslipstream_memcached.a")).args([
            "-lucp",
            "-luct",
            "-lucs",
            "-lucm",
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
        ]);
    } else {
        cc.arg("-L").arg(&lib).arg("-lslipstream_memcached").arg(format!("-Wl,-rpath,{}", lib.display()));
    }
    let output = cc.output().expect("cc must be installed");
    assert!(
        output.status.success(),
        "cc failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Program(exe)
}

fn run(program: &Program, args: &[String]) {
    let exe: &Path = &program.0;
    let output = Command::new(exe).args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{} {args:?} failed ({}):\n{stdout}{stderr}", exe.display(), output.status);
    assert!(stdout.contains(", 0 failed"), "{stdout}");
    println!("{} {args:?}: {}", exe.file_name().unwrap().to_string_lossy(), stdout.trim());
}

fn tcp_args(servers: &[&Memcached]) -> Vec<String> {
    let mut args = vec!["tcp".to_string()];
    for s in servers {
        args.push(s.addr.ip().to_string());
        args.push(s.addr.port().to_string());
    }
    args
}

#[test]
fn c_program_against_memcached_over_tcp() {
    let _serial = common::serial();
    let program = compile(false);
    let (a, b) = (Memcached::start(), Memcached::start());
    run(&program, &tcp_args(&[&a]));
    run(&program, &tcp_args(&[&a, &b]));
}

#[test]
fn c_program_linked_statically() {
    let _serial = common::serial();
    let program = compile(true);
    let server = Memcached::start();
    run(&program, &tcp_args(&[&server]));
}

#[test]
fn c_program_over_the_fabric() {
    let _serial = common::serial();
    let program = compile(false);
    let server = MockFabricServer::start();
    run(&program, &["fabric".into(), server.addr.ip().to_string(), server.addr.port().to_string()]);
}

#[test]
fn c_program_against_slipstream_cache() {
    let _serial = common::serial();
    let server = Slipstream::start();
    let program = compile(false);
    run(&program, &["tcp".into(), server.tcp.ip().to_string(), server.tcp.port().to_string()]);
    run(&program, &["fabric".into(), server.fabric.ip().to_string(), server.fabric.port().to_string()]);
}
