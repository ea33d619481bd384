//! Runs one fabric test at the Rust level: for each variant, a server process, a client here,
//! every size in turn; `ucx_perftest` per size. Progress goes to stderr.

use crate::progress::Progress;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use fabric::Transport;

use crate::args::format_size;
use crate::child::{ChildGuard, Launcher};
use crate::fabric::node::{transport_name, FabricParty, SendPath};
use crate::machine::Machine;
use crate::fabric::measure::{measure, Party, Plan};
use crate::fabric::hosts::Servers;
use crate::fabric::perftest;
use crate::table::{format_mb_s, format_rate, format_us};
use crate::fabric::result::{BenchResult, Mode, Point, Variant, VariantResult};
use crate::fabric::socket::SocketParty;

/// Time for a server process to start and announce its port.
pub const SERVER_START_TIMEOUT: Duration = Duration::from_secs(20);

/// Default sizes: 8 B, then powers of 4 from 16 B to 4 MiB.
pub fn default_sizes() -> Vec<usize> {
    let mut sizes = vec![8];
    let mut s = 16;
    while s <= 4 << 20 {
        sizes.push(s);
        s *= 4;
    }
    sizes
}

/// `--quick`: the sizes the targets name.
pub fn quick_sizes() -> Vec<usize> {
    vec![8, 4096, 65536, 1 << 20]
}

/// One test run at the Rust level.
#[derive(Debug, Clone)]
pub struct FabricRun {
    pub mode: Mode,
    pub sizes: Vec<usize>,
    pub plan: Plan,
    pub variants: Vec<Variant>,
    pub send_path: SendPath,
    /// `Config::same_host_pull` of the fabric client (off: the client neither pulls nor is pulled from).
    pub same_host_pull: bool,
    pub progress: bool,
    /// Where the servers run (`--hosts`): this host, or another one.
    pub servers: Servers,
}

/// What a point shows in a progress line.
pub fn outcome(mode: Mode, p: &Point) -> String {
    if let Some(e) = &p.error {
        return format!("error: {}", e.lines().next().unwrap_or(""));
    }
    match mode {
        Mode::Lat => p.lat_us_p50.map(|x| format!("{} us p50 ({} it)", format_us(x), p.iterations)),
        Mode::Bw => p.bw_mb_s.map(|x| format!("{} MB/s ({} msgs)", format_mb_s(x), p.iterations)),
        Mode::Rate => p.msg_rate.map(|x| format!("{} msg/s ({} msgs)", format_rate(x), p.iterations)),
    }
    .unwrap_or_else(|| "no figure".into())
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Server arguments for `ohb __serve ...` of a variant.
pub fn serve_args(variant: Variant) -> Option<Vec<String>> {
    let words: &[&str] = match variant {
        Variant::Fabric => &["__serve", "fabric", "--transport", "auto", "--port", "0"],
        Variant::FabricTcp => &["__serve", "fabric", "--transport", "tcp", "--port", "0"],
        Variant::RustSocket => &["__serve", "socket", "--port", "0"],
        Variant::JavaSocket | Variant::UcxPerftest => return None,
    };
    Some(words.iter().map(|s| s.to_string()).collect())
}

/// Runs every variant at every size.
pub fn run_rust(run: &FabricRun, launcher: &Launcher) -> BenchResult {
    assert!(!run.sizes.is_empty() && !run.variants.is_empty());
    let mut progress = Progress::new(run.progress, run.sizes.len() * run.variants.len());
    let mut variants = Vec::new();
    for &variant in &run.variants {
        let points = match variant {
            Variant::UcxPerftest => perftest_points(run.mode, &run.sizes, &run.plan, &run.servers, &mut progress),
            _ => run_client_server(run, variant, launcher, &mut progress),
        };
        variants.push(VariantResult { name: variant.name().to_string(), points, error: None });
    }
    BenchResult {
        bench: format!("fabric {}", run.mode.name()),
        layer: "rust".into(),
        machine: Machine::detect(),
        variants,
        notes: notes(run),
    }
}

fn notes(run: &FabricRun) -> Vec<String> {
    let mut notes = Vec::new();
    let budget_ms = run.plan.budget.as_millis();
    notes.push(match run.plan.iterations {
        Some(n) => format!("{n} iterations per point"),
        None => format!("iterations per point from a {budget_ms} ms budget (see the JSON)"),
    });
    if run.mode != Mode::Lat {
        notes.push(format!(
            "win = requests in flight (fabric, sockets); median of {} trials; ucx_perftest tag_bw keeps its own window",
            run.plan.trials
        ));
    }
    if run.variants.iter().any(|v| matches!(v, Variant::Fabric | Variant::FabricTcp)) {
        notes.push(match run.send_path {
            SendPath::Registered => "fabric: client sends registered pool buffers (alloc + request_buffer, no copy); \
                                     server: Inline handler (echo returns the received buffer)"
                .into(),
            SendPath::Copy => "fabric: client sends with request(&[u8]) (one copy per request); \
                               server: Inline handler (echo returns the received buffer)"
                .into(),
        });
        notes.push(if run.same_host_pull {
            "fabric: same-host pull path on (large messages on one host pulled with CMA; docs/fabric.md)".into()
        } else {
            "fabric: same-host pull path off (--no-same-host-pull): large messages through UCX".into()
        });
    }
    notes.push(format!("{}; rust-socket: blocking std::net, TCP_NODELAY, length-prefixed frames", run.servers.note()));
    notes
}

/// `ucx_perftest`, the raw-UCX reference, at every size (both the Rust and the JVM layer use it).
pub fn perftest_points(mode: Mode, sizes: &[usize], plan: &Plan, servers: &Servers, progress: &mut Progress) -> Vec<Point> {
    let mut points = Vec::new();
    for &size in sizes {
        progress.begin(&format!("{} {} {}", Variant::UcxPerftest.name(), perftest::test_for(mode), format_size(size)));
        let iterations = plan.iterations.unwrap_or_else(|| match servers {
            Servers::Loopback => perftest::default_iterations(mode, size, plan.budget),
            // Over TCP between hosts a round trip costs tens of microseconds, not one: the shared-memory
            // cost model would ask for minutes of iterations (the client hit its 60 s limit).
            Servers::Netns { .. } => perftest::default_iterations(mode, size, plan.budget) / 50,
        }.max(perftest::ITERATIONS_MIN));
        let warmup = plan.warmup.unwrap_or_else(|| perftest::default_warmup(iterations));
        let point = perftest::point(mode, size, iterations, warmup, servers);
        progress.end(&outcome(mode, &point));
        points.push(point);
    }
    points
}

fn run_client_server(run: &FabricRun, variant: Variant, launcher: &Launcher, progress: &mut Progress) -> Vec<Point> {
    let connected = (|| -> Result<_, String> {
        let args =
            serve_args(variant).ok_or_else(|| format!("{} is not measured at the Rust level", variant.name()))?;
        let ip = run.servers.ip();
        let mut command = run.servers.command(&launcher.exe);
        command.args(&args).args(["--ip", &ip.to_string()]);
        let mut server = ChildGuard::spawn(variant.name(), command, true)?;
        let port = server.wait_for_port(SERVER_START_TIMEOUT)?;
        let address = SocketAddr::from((ip, port));
        let party: Box<dyn Party> = match variant {
            Variant::Fabric => Box::new(FabricParty::connect(Transport::Auto, address, run.send_path, run.same_host_pull)?),
            Variant::FabricTcp => Box::new(FabricParty::connect(Transport::Tcp, address, run.send_path, run.same_host_pull)?),
            Variant::RustSocket => Box::new(SocketParty::connect(address)?),
            _ => unreachable!("serve_args covers the variants"),
        };
        Ok((server, party))
    })();
    let mut points = Vec::new();
    match connected {
        Ok((server, mut party)) => {
            for &size in &run.sizes {
                progress.begin(&format!("{} {}", variant.name(), format_size(size)));
                let point = measure(party.as_mut(), run.mode, size, &run.plan);
                progress.end(&outcome(run.mode, &point));
                points.push(point);
            }
            // The client goes first (it closes its connection), then the server process.
            drop(party);
            drop(server);
        }
        Err(e) => {
            for &size in &run.sizes {
                progress.begin(&format!("{} {}", variant.name(), format_size(size)));
                let point = Point::failed(size, e.clone());
                progress.end(&outcome(run.mode, &point));
                points.push(point);
            }
        }
    }
    points
}

/// `ohb __serve fabric|socket [--transport auto|tcp] [--port N] ...`: a server process.
pub fn serve_main(argv: &[String]) -> Result<(), String> {
    use crate::args::Args;
    use crate::child::{announce_port, exit_when_parent_leaves};
    let args = Args::parse(
        argv,
        &["ip", "transport", "port", "handler", "threads", "pool-cap-mib", "max-message-mib", "stats-ms", "lifetime-s"],
        &[],
    )?;
    let port: u16 = args.number("port")?.unwrap_or(0);
    let ip: Ipv4Addr = match args.value("ip") {
        Some(text) => text.parse().map_err(|_| format!("--ip: '{text}' is not an IPv4 address"))?,
        None => Ipv4Addr::LOCALHOST,
    };
    let lifetime = Duration::from_secs(args.number("lifetime-s")?.unwrap_or(3600));
    match args.positional.first().map(String::as_str) {
        Some("socket") => {
            let listener = crate::fabric::socket::bind(ip, port)?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            exit_when_parent_leaves(lifetime);
            announce_port(port);
            crate::fabric::socket::serve(listener)
        }
        Some("fabric") => {
            let transport_text = args.value("transport").unwrap_or("auto");
            let transport = crate::fabric::node::parse_transport(transport_text)
                .ok_or_else(|| format!("--transport: '{transport_text}' is not auto or tcp"))?;
            let threads: usize = args.number("threads")?.unwrap_or(2);
            let handler_mode = match args.value("handler").unwrap_or("inline") {
                "inline" => fabric::HandlerMode::Inline,
                "staged" => fabric::HandlerMode::Staged { threads },
                other => return Err(format!("--handler: '{other}' is not inline or staged")),
            };
            let mib =
                |name: &str| -> Result<Option<usize>, String> { Ok(args.number::<usize>(name)?.map(|m| m << 20)) };
            let server = crate::fabric::node::ServerConfig {
                ip,
                transport,
                port,
                handler_mode,
                pool_cap_bytes: mib("pool-cap-mib")?,
                max_message_bytes: mib("max-message-mib")?,
            };
            let node = crate::fabric::node::start_server(&server)?;
            exit_when_parent_leaves(lifetime);
            announce_port(node.local_addr().expect("listening").port());
            let stats_period = args.number::<u64>("stats-ms")?.map(Duration::from_millis);
            eprintln_debug(&format!("fabric server on {:?} ({})", node.local_addr(), transport_name(transport)));
            loop {
                std::thread::sleep(stats_period.unwrap_or(Duration::from_secs(1)));
                if stats_period.is_some() {
                    println!("{}", crate::fabric::node::stats_json(&node));
                }
            }
        }
        _ => Err("__serve needs 'fabric' or 'socket'".into()),
    }
}

fn eprintln_debug(message: &str) {
    if std::env::var_os("OHB_DEBUG").is_some() {
        eprintln!("ohb: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let sizes = default_sizes();
        assert_eq!(sizes.first(), Some(&8));
        assert_eq!(sizes.last(), Some(&(4 << 20)));
        for target in [8, 4096, 65536, 1 << 20, 4 << 20] {
            assert!(sizes.contains(&target), "{target}");
        }
        assert_eq!(sizes.len(), 11);
        assert!(quick_sizes().iter().all(|s| sizes.contains(s)));
    }

    #[test]
    fn serve_args_for_servers_only() {
        assert!(serve_args(Variant::Fabric).unwrap().contains(&"auto".to_string()));
        assert!(serve_args(Variant::FabricTcp).unwrap().contains(&"tcp".to_string()));
        assert!(serve_args(Variant::UcxPerftest).is_none());
    }
}
