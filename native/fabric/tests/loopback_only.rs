//! Nothing listens beyond loopback unless configured: UCX's TCP transport opens a listening socket
//! on every network device it uses, so the node must restrict it (Config::net_devices = "lo").
use std::collections::HashSet;
use std::sync::Arc;

use fabric::{Config, HandlerMode, Node, Request};

/// Local addresses (hex, as in /proc/net/tcp*) of this process's listening TCP sockets.
fn listening_addresses() -> Vec<String> {
    let inodes: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let mut found = Vec::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 9 && fields[3] == "0A" && inodes.contains(fields[9]) {
                found.push(fields[1].to_string());
            }
        }
    }
    found
}

#[test]
fn every_listening_socket_is_on_loopback() {
    if std::env::var_os("UCX_NET_DEVICES").is_some() {
        eprintln!("UCX_NET_DEVICES is set: the user chose the devices, nothing to check");
        return;
    }
    let config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Inline, ..Config::default() };
    let server = Node::start(config, Some(Arc::new(|r: Request| r.respond(b"ok")))).unwrap();
    let client = Node::start(Config::default(), None).unwrap();
    let reply = client.endpoint(server.local_addr().unwrap()).unwrap().request(1, b"x").unwrap().wait().unwrap();
    assert_eq!(&reply[..], b"ok");
    let listening = listening_addresses();
    assert!(!listening.is_empty(), "the server's listener must show up");
    for address in listening {
        // 0100007F = 127.0.0.1 in /proc/net/tcp's byte order; IPv6 loopback is ...01000000.
        assert!(
            address.starts_with("0100007F:") || address.starts_with("00000000000000000000000001000000:"),
            "a socket listens beyond loopback: {address}"
        );
    }
}
