//! The client against the real memcached 1.6 over TCP.
mod common;

use std::collections::HashSet;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use cache_client::{Client, ClientConfig, Error, ServerAddr};
use common::{client_for, client_with, suite, value, Memcached};

#[test]
fn every_operation() {
    let server = Memcached::start();
    suite::every_operation(&client_for(&[server.server()]), "ops");
}

#[test]
fn values_of_1_byte_4_kb_and_512_kb() {
    let server = Memcached::start();
    suite::sizes(&client_for(&[server.server()]), "sizes");
}

#[test]
fn nonblocking_calls_with_wait_and_test() {
    let server = Memcached::start();
    suite::nonblocking(&client_for(&[server.server()]), "nb");
}

#[test]
fn get_multi_across_two_servers() {
    let (a, b) = (Memcached::start(), Memcached::start());
    let client = client_for(&[a.server(), b.server()]);
    suite::get_multi(&client, "multi", 200);
    // Both servers got keys, and each key is where the ring says.
    let on_a = client_for(&[a.server()]);
    let mut owners = HashSet::new();
    for i in 0..200 {
        let key = format!("multi:m{i}");
        let owner = client.server_for(key.as_bytes()).unwrap();
        owners.insert(owner);
        if i % 5 != 4 {
            assert_eq!(on_a.get(key.as_bytes()).unwrap().is_some(), owner == 0, "key {key} on the wrong server");
        }
    }
    assert_eq!(owners.len(), 2);
    // Non-blocking requests spread over both servers too.
    suite::nonblocking(&client, "multi-nb");
}

#[test]
fn flush_all_empties_every_server() {
    let (a, b) = (Memcached::start(), Memcached::start());
    let client = client_for(&[a.server(), b.server()]);
    for i in 0..50 {
        client.set(format!("f{i}").as_bytes(), b"v", 0, 0).unwrap();
    }
    client.flush_all(0).unwrap();
    let keys: Vec<String> = (0..50).map(|i| format!("f{i}")).collect();
    assert!(client.get_multi(&keys).unwrap().iter().all(Option::is_none));
    assert_eq!(client.version().len(), 2);
    assert!(client.stats(Some("settings")).iter().all(|(_, s)| s
        .as_ref()
        .unwrap()
        .iter()
        .any(|(k, _)| k == "maxbytes")));
}

#[test]
fn deep_pipeline_of_large_values_does_not_deadlock() {
    // 24 gets of 512 KB queued (12 MB of replies nobody reads yet), then 24 blocking sets of
    // 512 KB: the writes must read queued replies while the socket is full.
    let server = Memcached::start();
    let client = client_with(ClientConfig { max_in_flight: 64, ..ClientConfig::default() }, &[server.server()]);
    let big = value(512 << 10, 9);
    for i in 0..24 {
        client.set(format!("big{i}").as_bytes(), &big, 0, 0).unwrap();
    }
    let keys: Vec<String> = (0..24).map(|i| format!("big{i}")).collect();
    let others: Vec<String> = (0..24).map(|i| format!("other{i}")).collect();
    let mut dests = vec![Vec::new(); 24];
    let started = Instant::now();
    {
        let mut gets: Vec<_> =
            dests.iter_mut().zip(&keys).map(|(d, k)| client.bget(k.as_bytes(), d).unwrap()).collect();
        let mut sets: Vec<_> = others.iter().map(|k| client.iset(k.as_bytes(), &big, 0, 0).unwrap()).collect();
        for set in &mut sets {
            set.wait().unwrap();
        }
        client.set(b"after", &big, 0, 0).unwrap();
        for get in &mut gets {
            get.wait().unwrap();
        }
    }
    assert!(dests.iter().all(|d| *d == big));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn at_the_in_flight_bound_the_oldest_request_is_completed_first() {
    let server = Memcached::start();
    let client = client_with(ClientConfig { max_in_flight: 4, ..ClientConfig::default() }, &[server.server()]);
    let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("bound{i}").into_bytes()).collect();
    let mut requests = Vec::new();
    for key in &keys {
        requests.push(client.iset(key, key, 0, 0).unwrap());
        assert!(client.requests_in_flight() <= 4);
    }
    // The first 16 were completed to make room; their outcomes wait for their owners.
    for request in &mut requests {
        request.wait().unwrap();
    }
    for key in &keys {
        assert_eq!(client.get(key).unwrap().unwrap().value, *key);
    }
}

#[test]
fn connection_errors_are_typed_and_the_client_reconnects() {
    // Nothing listening: an I/O error (connection refused).
    let port = common::free_port();
    let client = client_for(&[ServerAddr::Tcp(format!("127.0.0.1:{port}").parse().unwrap())]);
    assert!(matches!(client.set(b"k", b"v", 0, 0), Err(Error::Io(_))));

    // A server that dies: its in-flight requests and the next call fail, then a new server on
    // the same port is reconnected transparently.
    let mut server = Memcached::start();
    let client = client_for(&[server.server()]);
    client.set(b"k", b"v", 0, 0).unwrap();
    let mut dest = Vec::new();
    let mut pending = client.iget(b"k", &mut dest).unwrap();
    pending.wait().unwrap();
    drop(pending);
    server.kill();
    assert!(client.get(b"k").unwrap_err().is_connection_error());
    let port = server.addr.port();
    let restarted = Memcached::start_on(port);
    assert_eq!(client.get(b"k").unwrap(), None, "a fresh server after reconnecting");
    client.set(b"k", b"v2", 0, 0).unwrap();
    drop(restarted);
}

#[test]
fn a_silent_server_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts connections and never answers (the thread ends with the test process).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept() {
            held.push(stream);
        }
    });
    let config = ClientConfig { io_timeout: Duration::from_millis(200), ..ClientConfig::default() };
    let client = client_with(config, &[ServerAddr::Tcp(addr)]);
    let started = Instant::now();
    assert!(matches!(client.get(b"k"), Err(Error::Timeout)));
    assert!(started.elapsed() < Duration::from_secs(2));
    let mut dest = Vec::new();
    let mut get = client.iget(b"k", &mut dest).unwrap();
    assert!(get.test().is_pending());
    assert!(matches!(get.wait(), Err(Error::Timeout)));
}

#[test]
fn no_servers() {
    let client = Client::new(ClientConfig::default()).unwrap();
    assert!(matches!(client.get(b"k"), Err(Error::NoServers)));
    let mut dest = Vec::new();
    assert!(matches!(client.iget(b"k", &mut dest), Err(Error::NoServers)));
    assert!(matches!(client.get_multi(&["k"]), Err(Error::NoServers)));
    assert!(client.version().is_empty());
}

#[test]
fn server_addresses_parse() {
    assert_eq!(
        "tcp://127.0.0.1:11211".parse::<ServerAddr>().unwrap(),
        ServerAddr::Tcp("127.0.0.1:11211".parse().unwrap())
    );
    assert_eq!(
        "fabric://127.0.0.1:11212".parse::<ServerAddr>().unwrap(),
        ServerAddr::Fabric("127.0.0.1:11212".parse().unwrap())
    );
    assert_eq!("localhost:11211".parse::<ServerAddr>().unwrap(), ServerAddr::Tcp("127.0.0.1:11211".parse().unwrap()));
    assert!("udp://127.0.0.1:1".parse::<ServerAddr>().is_err());
    assert!("127.0.0.1".parse::<ServerAddr>().is_err());
    assert_eq!(ServerAddr::Fabric("127.0.0.1:5".parse().unwrap()).to_string(), "fabric://127.0.0.1:5");
}

#[test]
fn credentials_are_sent_on_every_new_connection() {
    // memcached without -S answers SASL with "unknown command": authentication fails.
    let (a, b) = (Memcached::start(), Memcached::start());
    let client = client_for(&[a.server(), b.server()]);
    let keys: Vec<String> = (0..20).map(|i| format!("sasl{i}")).collect();
    for key in &keys {
        client.set(key.as_bytes(), b"v", 0, 0).unwrap();
    }
    let mut dests = vec![Vec::new(); 12];
    let pending: Vec<_> = dests.iter_mut().zip(&keys).map(|(d, k)| client.iget(k.as_bytes(), d).unwrap()).collect();
    drop(pending); // abandoned while queued: their replies arrive after the credentials change
    client.set_credentials(Some(cache_client::Credentials { username: "u".into(), password: "p".into() })).unwrap();
    for key in &keys {
        assert!(matches!(client.set(key.as_bytes(), b"v", 0, 0), Err(Error::AuthFailed)), "{key}");
    }
    client.set_credentials(None).unwrap();
    for key in &keys {
        client.set(key.as_bytes(), b"v", 0, 0).unwrap();
    }
}

#[test]
fn calls_from_a_get_multi_callback_are_refused_not_deadlocked() {
    let server = Memcached::start();
    let client = client_for(&[server.server()]);
    client.set(b"a", b"1", 0, 0).unwrap();
    let mut dest = Vec::new();
    let mut get = client.iget(b"a", &mut dest).unwrap();
    let mut calls = 0;
    client
        .get_multi_with(&["a"], |_, _, _| {
            calls += 1;
            assert!(matches!(client.get(b"a"), Err(Error::Busy)));
            assert!(get.test().is_pending(), "busy: still in progress");
            assert!(matches!(get.wait(), Err(Error::Busy)));
        })
        .unwrap();
    assert_eq!(calls, 1);
    get.wait().unwrap();
    drop(get);
    assert_eq!(dest, b"1");
}
