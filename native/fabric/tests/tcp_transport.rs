//! Nodes forced to TCP (`Transport::Tcp`), in a test binary of their own: they need a UCX context
//! and worker of their own, and UCX 1.13 can abort a process running two workers while connections
//! churn (docs/fabric.md, "Several nodes in one process"); cargo runs test binaries one at a time.
use std::sync::Arc;
use std::time::Duration;

use fabric::{Config, HandlerMode, Node, Request, Transport};

fn echo(request: Request) {
    let payload = request.payload().to_vec();
    request.respond(&payload);
}

#[test]
fn echo_staged_over_tcp() {
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let server_config = Config { listen, handler_mode: HandlerMode::Staged { threads: 2 }, transport: Transport::Tcp, ..Config::default() };
    let server = Node::start(server_config, Some(Arc::new(echo))).unwrap();
    let client = Node::start(Config { transport: Transport::Tcp, request_timeout: Duration::from_secs(20), ..Config::default() }, None).unwrap();
    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
    // Around the chunk a TCP connection cuts (512 KiB) and UCX's receive segment (576 KiB).
    for len in [8usize, 100_000, 512 << 10, (512 << 10) + 1, (576 << 10) + 1, (1 << 20) + 3, 5 << 20] {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(3)).collect();
        let response = endpoint.request(1, &payload).unwrap().wait().unwrap();
        assert!(response[..] == payload[..], "{len} bytes over TCP corrupted");
    }
}
