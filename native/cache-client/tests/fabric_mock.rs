//! The client's fabric transport against a minimal in-process binary-protocol server (see
//! common/mock_fabric.rs); slipstream.rs runs the same checks against the real server.
mod common;

use cache_client::{ClientConfig, Error, FabricNode, ServerAddr};
use common::mock_fabric::MockFabricServer;
use common::{client_for, client_with, suite, Memcached};

#[test]
fn every_operation_over_the_fabric() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    suite::every_operation(&client_for(&[ServerAddr::Fabric(server.addr)]), "ops");
}

#[test]
fn blocking_calls_over_the_fabric() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    let client = client_for(&[ServerAddr::Fabric(server.addr)]);
    client.set(b"k", b"v", 5, 0).unwrap();
    let item = client.get(b"k").unwrap().unwrap();
    assert_eq!((item.value.as_slice(), item.flags), (&b"v"[..], 5));
    assert!(matches!(client.add(b"k", b"x", 0, 0), Err(Error::Exists)));
    assert!(matches!(client.replace(b"nope", b"x", 0, 0), Err(Error::NotFound)));
    client.delete(b"k").unwrap();
    assert_eq!(client.get(b"k").unwrap(), None);
    assert!(matches!(client.delete(b"k"), Err(Error::NotFound)));
    assert_eq!(client.version()[0].1.as_ref().unwrap(), "1.6.18-mock");
    assert!(client.stats(None)[0].1.as_ref().unwrap().iter().any(|(k, _)| k == "pid"));
    client.flush_all(0).unwrap();
}

#[test]
fn values_of_1_byte_4_kb_and_512_kb_over_the_fabric() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    suite::sizes(&client_for(&[ServerAddr::Fabric(server.addr)]), "sizes");
}

#[test]
fn nonblocking_calls_over_the_fabric() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    suite::nonblocking(&client_for(&[ServerAddr::Fabric(server.addr)]), "nb");
}

#[test]
fn get_multi_over_the_fabric_and_tcp_at_once() {
    let _serial = common::serial();
    let (fabric, tcp) = (MockFabricServer::start(), Memcached::start());
    let client = client_for(&[ServerAddr::Fabric(fabric.addr), tcp.server()]);
    suite::get_multi(&client, "multi", 100);
    suite::nonblocking(&client, "mixed-nb");
}

#[test]
fn a_dedicated_fabric_node() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    let config =
        ClientConfig { fabric_node: FabricNode::Dedicated(fabric::Config::default()), ..ClientConfig::default() };
    let client = client_with(config, &[ServerAddr::Fabric(server.addr)]);
    client.set(b"k", b"dedicated", 0, 0).unwrap();
    assert_eq!(client.get(b"k").unwrap().unwrap().value, b"dedicated");
}

#[test]
fn a_dead_fabric_peer_is_an_error_not_a_hang() {
    let _serial = common::serial();
    let server = MockFabricServer::start();
    let addr = server.addr;
    let config = ClientConfig { io_timeout: std::time::Duration::from_secs(2), ..ClientConfig::default() };
    let client = client_with(config, &[ServerAddr::Fabric(addr)]);
    client.set(b"k", b"v", 0, 0).unwrap();
    server.node.close();
    let started = std::time::Instant::now();
    let error = client.get(b"k").unwrap_err();
    assert!(error.is_connection_error(), "{error:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
