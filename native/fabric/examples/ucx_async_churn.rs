//! Reproduces a UCX 1.13 bug that concerns processes running more than one `Node` (see
//! docs/fabric.md, "Several nodes in one process"): pairs of nodes in one process open and close
//! connections as fast as they can. UCX identifies an fd's async handler by the fd's number; an
//! event missed while one worker was busy stays queued under that number after the connection's
//! fd is closed, and when another worker's new connection gets the same fd number first, the
//! first worker's next progress call aborts on `Assertion 'handler->async == async' failed`
//! (fixed upstream by openucx/ucx#9942, UCX 1.17).
//!
//! `cargo run --release -p fabric --example ucx_async_churn -- SECONDS PAIRS`
//! On the 2-core VM: 10 pairs aborted about once per 90 s; 1 pair ran 8 x 15 s without one.
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Config, HandlerMode, Node, Request, Transport};

fn echo(request: Request) {
    let payload = request.payload().to_vec();
    request.respond(&payload);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map(|s| s.parse().expect("SECONDS")).unwrap_or(10);
    let pairs: usize = args.next().map(|s| s.parse().expect("PAIRS")).unwrap_or(4);
    let end = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..pairs)
        .map(|pair| {
            std::thread::spawn(move || {
                let transport = if pair % 2 == 0 { Transport::Auto } else { Transport::Tcp };
                let mut connections = 0u64;
                while Instant::now() < end {
                    let listen = Some("127.0.0.1:0".parse().unwrap());
                    let config = Config { listen, handler_mode: HandlerMode::Inline, transport, ..Config::default() };
                    let server = Node::start(config, Some(Arc::new(echo))).unwrap();
                    // A short idle timeout closes each connection soon after its request.
                    let config = Config { transport, idle_timeout: Duration::from_millis(5), ..Config::default() };
                    let client = Node::start(config, None).unwrap();
                    let endpoint = client.endpoint(server.local_addr().unwrap()).unwrap();
                    for _ in 0..20 {
                        endpoint.request(1, b"x").unwrap().wait().unwrap();
                        std::thread::sleep(Duration::from_millis(8));
                        connections += 1;
                    }
                }
                connections
            })
        })
        .collect();
    let connections: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    println!("{connections} connections opened and closed by {pairs} pairs of nodes in {seconds} s");
}
