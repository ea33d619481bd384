//! Quick latency probe of the client (the real benchmark is `ohb mem`).
//!
//! ```text
//! latency mock                          # a mock fabric server (prints its address) until killed
//! latency ADDR [SIZE_BYTES] [ITERATIONS] # ADDR: tcp://host:port or fabric://host:port
//! ```
//! Prints p50/p99 of blocking GET and SET, of iget+wait, and for a fabric server also of a raw
//! fabric request carrying the same GET packet (the client's overhead is the difference).
#[path = "../tests/common/mock_fabric.rs"]
#[allow(dead_code)]
mod mock_fabric;

use std::time::Instant;

use cache_client::{Client, ClientConfig, ServerAddr};

fn percentiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    format!("p50 {:7.2} us  p99 {:7.2} us", at(0.5), at(0.99))
}

fn time(iterations: usize, mut op: impl FnMut(usize)) -> String {
    for i in 0..iterations / 10 {
        op(i);
    }
    let mut ns = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let t = Instant::now();
        op(i);
        ns.push(t.elapsed().as_nanos() as u64);
    }
    percentiles(ns)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("mock") {
        let server = mock_fabric::MockFabricServer::start();
        println!("fabric={}", server.addr);
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    let addr: ServerAddr = args.first().expect("ADDR").parse().expect("ADDR");
    let size: usize = args.get(1).map_or(32, |s| s.parse().unwrap());
    let iterations: usize = args.get(2).map_or(20_000, |s| s.parse().unwrap());
    let client = Client::new(ClientConfig::default()).unwrap();
    client.add_server(addr).unwrap();
    let value = vec![b'v'; size];
    let key = b"latency:key";
    client.set(key, &value, 0, 0).unwrap();
    let mut dest = Vec::new();
    println!("{addr}, {size} B values, {iterations} iterations");
    println!("  get        {}", time(iterations, |_| assert!(client.get_into(key, &mut dest).unwrap().is_some())));
    println!("  set        {}", time(iterations, |_| client.set(key, &value, 0, 0).unwrap()));
    println!(
        "  iget+wait  {}",
        time(iterations, |_| {
            let mut get = client.iget(key, &mut dest).unwrap();
            get.wait().unwrap();
        })
    );
    println!(
        "  iget+test  {}",
        time(iterations, |_| {
            let mut get = client.iget(key, &mut dest).unwrap();
            while get.test().is_pending() {}
        })
    );
    if let ServerAddr::Fabric(peer) = addr {
        let node = fabric::Node::start(fabric::Config::default(), None).unwrap();
        let endpoint = node.endpoint(peer).unwrap();
        let mut packet = Vec::new();
        cache_client::packet::Req::new(cache_proto::binary::opcode::GET, key).append_to(&mut packet);
        println!(
            "  raw fabric {}",
            time(iterations, |_| {
                let response = endpoint.request(cache_proto::FABRIC_OP_BINARY, &packet).unwrap().wait().unwrap();
                assert!(response.len() > 24);
            })
        );
    }
}
