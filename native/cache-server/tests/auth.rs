//! `-Y`: every client authenticates first, over text (memcached's set-based login), binary SASL
//! PLAIN, and the fabric (SASL PLAIN as well).
mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::*;

fn auth_file() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("slipstream-auth-{}-{:?}.txt", std::process::id(), std::thread::current().id()));
    std::fs::write(&path, "# test users\nalice:secret\nbob:pa ss:word\n").unwrap();
    path
}

#[test]
fn text_login_is_required_and_works() {
    let file = auth_file();
    let server = Server::start(&["--no-fabric", "-Y", file.to_str().unwrap()]);
    let mut c = server.connect();
    assert_eq!(c.command("get k"), "CLIENT_ERROR unauthenticated");
    assert_eq!(c.command("stats"), "CLIENT_ERROR unauthenticated");
    assert_eq!(c.set("login", b"alice wrong"), "CLIENT_ERROR authentication failure");
    assert_eq!(c.command("get k"), "CLIENT_ERROR unauthenticated");
    assert_eq!(c.set("login", b"alice secret"), "STORED");
    assert_eq!(c.set("k", b"v"), "STORED");
    assert_eq!(c.get("k").as_deref(), Some(&b"v"[..]));
    // Another connection is not authenticated by the first one's login.
    let mut other = server.connect();
    assert_eq!(other.command("get k"), "CLIENT_ERROR unauthenticated");
    assert_eq!(other.set("x", b"bob pa ss:word"), "STORED");
    assert_eq!(other.get("k").as_deref(), Some(&b"v"[..]));
    let _ = std::fs::remove_file(file);
}

#[test]
fn binary_sasl_plain() {
    let file = auth_file();
    let server = Server::start(&["--no-fabric", "-Y", file.to_str().unwrap(), "-S"]);
    let connect = || {
        let s = TcpStream::connect(server.tcp).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    // A command before authentication: refused, and the connection closed (as memcached).
    let mut s = connect();
    s.write_all(&get_packet(b"k", 1)).unwrap();
    assert_eq!(read_reply(&mut s).status(), status::AUTH_ERROR);
    let mut rest = Vec::new();
    assert!(std::io::Read::read_to_end(&mut s, &mut rest).is_ok_and(|n| n == 0));
    let mut s = connect();
    s.write_all(&packet(opcode::SASL_LIST_MECHS, b"", &[], &[], 2, 0)).unwrap();
    let mechs = read_reply(&mut s);
    assert_eq!(mechs.status(), status::NO_ERROR);
    assert!(String::from_utf8_lossy(&mechs.value).contains("PLAIN"));
    // A wrong password is refused; the connection may try again.
    s.write_all(&sasl_plain_packet("alice", "wrong")).unwrap();
    assert_eq!(read_reply(&mut s).status(), status::AUTH_ERROR);
    s.write_all(&sasl_plain_packet("alice", "secret")).unwrap();
    assert_eq!(read_reply(&mut s).status(), status::NO_ERROR);
    s.write_all(&set_packet(b"k", b"value", 7, 4)).unwrap();
    assert_eq!(read_reply(&mut s).status(), status::NO_ERROR);
    s.write_all(&get_packet(b"k", 5)).unwrap();
    let got = read_reply(&mut s);
    assert_eq!((got.status(), got.value.as_slice(), got.header.opaque), (status::NO_ERROR, &b"value"[..], 5));
    let _ = std::fs::remove_file(file);
}

#[test]
fn libmemcached_tools_authenticate_with_sasl() {
    let installed =
        Command::new("sh").args(["-c", "command -v memccp && command -v memccat"]).output().is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("SKIPPED: memccp/memccat are not installed");
        return;
    }
    let file = auth_file();
    let server = Server::start(&["--no-fabric", "-Y", file.to_str().unwrap(), "-S"]);
    let servers = format!("--servers=127.0.0.1:{}", server.tcp.port());
    let data = std::env::temp_dir().join(format!("slipstream-auth-data-{}", std::process::id()));
    std::fs::write(&data, pattern(20_000, 9)).unwrap();
    let name = data.file_name().unwrap().to_str().unwrap().to_string();
    let copy = Command::new("memccp").args([&servers, "--binary", "-u", "alice", "-p", "secret"]).arg(&data).output().unwrap();
    assert!(copy.status.success(), "{}", String::from_utf8_lossy(&copy.stderr));
    let out = data.with_extension("out");
    let cat = Command::new("memccat")
        .args([&servers, "--binary", "-u", "alice", "-p", "secret", &format!("--file={}", out.display()), &name])
        .output()
        .unwrap();
    assert!(cat.status.success(), "{}", String::from_utf8_lossy(&cat.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), pattern(20_000, 9));
    let denied = Command::new("memccat").args([&servers, "--binary", "-u", "alice", "-p", "nope", &name]).output().unwrap();
    assert!(!denied.status.success(), "a wrong password must fail");
    for path in [&data, &out, &file] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn sasl_flag_needs_an_auth_file() {
    let out = Command::new(BIN).args(["-S", "--no-fabric", "-p", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = Command::new(BIN).args(["-Y", "/nonexistent/auth", "--no-fabric", "-p", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}
