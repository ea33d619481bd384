// Scratch latency probe (not a benchmark; ohb is): 8 B round trips against a fabric-peer.
use std::time::{Duration, Instant};
fn main() {
    let addr: std::net::SocketAddr = std::env::args().nth(1).unwrap().parse().unwrap();
    let tcp = std::env::args().nth(2).as_deref() == Some("tcp");
    let size: usize = std::env::args().nth(3).map(|s| s.parse().unwrap()).unwrap_or(8);
    let config = fabric::Config { transport: if tcp { fabric::Transport::Tcp } else { fabric::Transport::Auto }, ..Default::default() };
    let node = fabric::Node::start(config, None).unwrap();
    let ep = node.endpoint(addr).unwrap();
    let payload = vec![7u8; size];
    for _ in 0..2000 { ep.request(1, &payload).unwrap().wait().unwrap(); }
    let mut lat = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) && lat.len() < 200000 {
        let t = Instant::now();
        ep.request(1, &payload).unwrap().wait().unwrap();
        lat.push(t.elapsed().as_nanos() as f64 / 1000.0);
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("n={} min={:.2} p50={:.2} p99={:.2} us", lat.len(), lat[0], lat[lat.len()/2], lat[lat.len()*99/100]);
}
