//! `fabric-peer`: a fabric node serving three operations, for black-box tests, or (`--client`) a
//! client node driven line by line from stdin, for tests whose two sides must be separate processes
//! in separate namespaces ("hosts", tests/netns.rs).
//!
//! ```text
//! fabric-peer [--listen ADDR] [--transport auto|tcp] [--devices DEVS] [--threads N | --inline] [--same-host-eager]
//! fabric-peer --client ADDR [--transport auto|tcp] [--devices DEVS] [--request-timeout-ms N]
//! ```
//! Server: prints `LISTENING <addr>` on stdout once ready; exits when stdin closes.
//! Operations: 1 = echo; 2 = respond with N bytes (N = little-endian u64 payload), filled with a
//! pattern the caller can check (byte i = i * 31 mod 256); 3 = sleep N ms (u64 payload), then answer "ok".
//! `--devices` sets `Config::net_devices` (the network devices UCX may use; default `lo`);
//! `--same-host-eager` sets `Config::same_host_eager` (large responses through the shared-memory FIFO).
//!
//! Client: prints `READY`, then answers each command line with one line (see `client_command`).
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fabric::{Config, HandlerMode, Node, Request, Transport};

mod client;

fn handle(mut request: Request) {
    let arg = || u64::from_le_bytes(request.payload().get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
    match request.op() {
        1 => {
            let payload = request.take_payload().unwrap();
            request.respond_buffer(payload);
        }
        2 => {
            let len = arg() as usize;
            match request.alloc(len) {
                Ok(mut buffer) => {
                    for (i, byte) in buffer.as_mut_slice().iter_mut().enumerate() {
                        *byte = (i as u8).wrapping_mul(31);
                    }
                    request.respond_buffer(buffer);
                }
                Err(e) => request.fail(&e.to_string()),
            }
        }
        3 => {
            std::thread::sleep(Duration::from_millis(arg()));
            request.respond(b"ok");
        }
        op => request.fail(&format!("unknown op {op}")),
    }
}

fn main() {
    let mut config = Config { listen: Some("127.0.0.1:0".parse().unwrap()), handler_mode: HandlerMode::Staged { threads: 2 }, ..Config::default() };
    let mut args = std::env::args().skip(1);
    let mut client_of: Option<SocketAddr> = None;
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => config.listen = Some(value().parse().expect("--listen ADDR:PORT")),
            "--transport" => {
                config.transport = match value().as_str() {
                    "auto" => Transport::Auto,
                    "tcp" => Transport::Tcp,
                    other => panic!("unknown transport {other}"),
                }
            }
            "--devices" => config.net_devices = value(),
            "--client" => client_of = Some(value().parse().expect("--client ADDR:PORT")),
            "--request-timeout-ms" => {
                config.request_timeout = Duration::from_millis(value().parse().expect("--request-timeout-ms N"))
            }
            "--spin-us" => config.spin_us = value().parse().expect("--spin-us N"),
            "--inline" => config.handler_mode = HandlerMode::Inline,
            "--same-host-eager" => config.same_host_eager = true,
            "--threads" => config.handler_mode = HandlerMode::Staged { threads: value().parse().expect("--threads N") },
            other => panic!("unknown argument {other}"),
        }
    }
    if let Some(server) = client_of {
        config.listen = None;
        client::run(config, server);
        return;
    }
    let node = Node::start(config, Some(Arc::new(handle))).unwrap_or_else(|e| {
        eprintln!("fabric-peer: {e}");
        std::process::exit(1)
    });
    println!("LISTENING {}", node.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    // Serve until stdin closes (the parent went away) or we are killed.
    for _ in std::io::stdin().lock().lines() {}
    node.close();
}
