//! Many nodes in one process open and close connections as fast as they can: pairs of nodes
//! (server and client), each pair started and closed again and again, each client's connection
//! closed after 5 ms idle. Under UCX 1.13 this used to abort the process when each node had a
//! worker of its own: UCX identifies an fd's async handler by the fd's number, and an event
//! missed while one worker was busy stayed queued under that number after the connection's fd
//! was closed; when another worker's new connection got the same fd number first, the first
//! worker's next progress call aborted on `Assertion 'handler->async == async' failed` (fixed
//! upstream by openucx/ucx#9942, UCX 1.17). Now the nodes of a process share one worker
//! (docs/fabric.md, "Several nodes in one process"), and this runs without an abort.
//!
//! `cargo run --release -p fabric --example ucx_async_churn -- SECONDS PAIRS [auto|tcp|mixed]`
//! `mixed` alternates the transport per pair, i.e. two workers in one process: the case the
//! shared worker cannot cover (nodes that differ in transport settings need contexts of their own).
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
    let transports = args.next().unwrap_or_else(|| "auto".into());
    let end = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..pairs)
        .map(|pair| {
            let transport = match transports.as_str() {
                "auto" => Transport::Auto,
                "tcp" => Transport::Tcp,
                "mixed" if pair % 2 == 0 => Transport::Auto,
                "mixed" => Transport::Tcp,
                other => panic!("transport {other}: auto, tcp or mixed"),
            };
            std::thread::spawn(move || {
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
    println!("{connections} connections opened and closed by {pairs} pairs of nodes ({transports}) in {seconds} s");
}
