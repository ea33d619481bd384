//! The client against slipstream-cache, over TCP and over the fabric: the same checks as against
//! memcached. Skipped (with a message) while the server binary does not exist.
mod common;

use cache_client::{ClientConfig, Credentials, Error, ServerAddr};
use common::{client_for, client_with, suite, Slipstream};

fn transports(server: &Slipstream) -> [(ServerAddr, &'static str); 2] {
    [(ServerAddr::Tcp(server.tcp), "tcp"), (ServerAddr::Fabric(server.fabric), "fabric")]
}

#[test]
fn every_operation_over_tcp_and_the_fabric() {
    let _serial = common::serial();
    let server = Slipstream::start();
    for (addr, name) in transports(&server) {
        suite::every_operation(&client_for(&[addr]), &format!("ops-{name}"));
    }
}

#[test]
fn values_of_1_byte_4_kb_and_512_kb_over_tcp_and_the_fabric() {
    let _serial = common::serial();
    let server = Slipstream::start();
    for (addr, name) in transports(&server) {
        suite::sizes(&client_for(&[addr]), &format!("sizes-{name}"));
    }
}

#[test]
fn nonblocking_calls_over_tcp_and_the_fabric() {
    let _serial = common::serial();
    let server = Slipstream::start();
    for (addr, name) in transports(&server) {
        suite::nonblocking(&client_for(&[addr]), &format!("nb-{name}"));
    }
}

#[test]
fn get_multi_across_two_servers_one_per_transport() {
    let _serial = common::serial();
    let (a, b) = (Slipstream::start(), Slipstream::start());
    let client = client_for(&[ServerAddr::Fabric(a.fabric), ServerAddr::Tcp(b.tcp)]);
    suite::get_multi(&client, "multi", 200);
    suite::nonblocking(&client, "multi-nb");
    // Both transports of one server reach the same store.
    let tcp = client_for(&[ServerAddr::Tcp(a.tcp)]);
    let fabric = client_for(&[ServerAddr::Fabric(a.fabric)]);
    fabric.set(b"shared", b"by fabric", 0, 0).unwrap();
    assert_eq!(tcp.get(b"shared").unwrap().unwrap().value, b"by fabric");
}

#[test]
fn sasl_plain_over_tcp_and_the_fabric() {
    let _serial = common::serial();
    let dir = std::env::temp_dir().join(format!("slipstream-client-sasl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth_file = dir.join("auth");
    std::fs::write(&auth_file, "alice:secret\n").unwrap();
    let server = Slipstream::start_with(&["-Y", auth_file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    for (addr, name) in transports(&server) {
        let anonymous = client_for(&[addr]);
        assert!(matches!(anonymous.set(b"k", b"v", 0, 0), Err(Error::AuthFailed)), "{name}: no credentials");
        let wrong = Credentials { username: "alice".into(), password: "wrong".into() };
        let config = ClientConfig { credentials: Some(wrong), ..ClientConfig::default() };
        assert!(
            matches!(client_with(config, &[addr]).set(b"k", b"v", 0, 0), Err(Error::AuthFailed)),
            "{name}: wrong password"
        );
        let right = Credentials { username: "alice".into(), password: "secret".into() };
        let client = client_with(ClientConfig { credentials: Some(right), ..ClientConfig::default() }, &[addr]);
        client.set(b"k", name.as_bytes(), 0, 0).unwrap();
        assert_eq!(client.get(b"k").unwrap().unwrap().value, name.as_bytes());
    }
}

/// Non-blocking gets of values out on the server's SSD (hybrid mode) complete when the server's
/// read does: over TCP and the fabric, 32 in flight, every value exact.
#[test]
fn nonblocking_gets_of_values_on_the_ssd_complete_when_read() {
    let _serial = common::serial();
    let dir = std::env::temp_dir().join(format!("slipstream-client-hybrid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_arg = dir.to_str().unwrap().to_string();
    let server = Slipstream::start_with(&["-m", "16", "--ssd-path", &dir_arg, "--ssd-size", "64"]);
    let value_of = |i: usize| -> Vec<u8> { (0..4096).map(|j| (i * 7 + j) as u8).collect() };
    let loader = client_for(&[ServerAddr::Tcp(server.tcp)]);
    for i in 0..6000 {
        loader.set(format!("h{i}").as_bytes(), &value_of(i), 0, 0).unwrap();
    }
    for (addr, name) in transports(&server) {
        let client = client_for(&[addr]);
        // The oldest 2000 went out to the SSD first (and each read brings one back: the second
        // transport reads the ones the first pushed out again).
        for batch in (0..2000).step_by(32) {
            let keys: Vec<Vec<u8>> = (0..32).map(|j| format!("h{}", batch + j).into_bytes()).collect();
            let mut dests: Vec<Vec<u8>> = vec![Vec::new(); 32];
            let mut gets: Vec<_> =
                dests.iter_mut().zip(&keys).map(|(dest, key)| client.iget(key, dest).unwrap()).collect();
            for get in &mut gets {
                client.wait(get).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            drop(gets);
            for (j, dest) in dests.iter().enumerate() {
                assert!(*dest == value_of(batch + j), "{name}: h{}", batch + j);
            }
        }
    }
    let stats = loader.stats(None).remove(0).1.unwrap();
    let ssd_reads: u64 = stats.iter().find(|(name, _)| name == "ssd_reads").unwrap().1.parse().unwrap();
    assert!(ssd_reads > 1000, "the gets were served from the SSD: {ssd_reads}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
