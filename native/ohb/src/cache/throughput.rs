//! `ohb mem thr`: operations per second with N client threads, one connection each.

use std::sync::{Arc, Barrier};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cache_client::ServerAddr;
use serde_json::{json, Value};

use crate::args::format_size;
use crate::cache::CacheVariant;
use crate::cache::latency::short;
use crate::cache::servers::{connect, CacheServers, ServerSettings};
use crate::cache::workload::{key_for, one_op, preload, value_of, Workload, KEYS_PER_POINT};
use crate::machine::Machine;
use crate::stats::median;
use crate::table::{format_rate, format_ratio};

#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputPoint {
    pub variant: CacheVariant,
    pub workload: Workload,
    pub size_bytes: usize,
    /// Operations per second of every trial; the median is reported.
    pub ops_per_s_trials: Vec<f64>,
    pub error: Option<String>,
}

impl ThroughputPoint {
    pub fn ops_per_s(&self) -> Option<f64> {
        if self.error.is_some() {
            return None;
        }
        median(&self.ops_per_s_trials)
    }
}

#[derive(Debug, Clone)]
pub struct ThroughputRun {
    pub workloads: Vec<Workload>,
    pub sizes: Vec<usize>,
    pub client_threads: usize,
    pub seconds_per_trial: f64,
    pub trials: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

/// `threads` clients, each with its own connection, run `workload` for `seconds`; operations/s.
fn throughput_trial(addr: ServerAddr, workload: Workload, size_bytes: usize, threads: usize, seconds: f64) -> Result<f64, String> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let total_ops = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (barrier, stop, total_ops) = (barrier.clone(), stop.clone(), total_ops.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let setup = (|| -> Result<_, String> {
                let client = connect(addr)?;
                if t == 0 {
                    preload(&client, size_bytes)?;
                }
                Ok(client)
            })();
            barrier.wait(); // every thread connected (or failed)
            let client = setup?;
            barrier.wait(); // start
            let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
            let value = value_of(size_bytes);
            let mut scratch = Vec::new();
            let mut i = t as u64 * 7919;
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                one_op(&client, workload, i, &keys, &value, &mut scratch)?;
                i += 1;
                ops += 1;
            }
            total_ops.fetch_add(ops, Ordering::Relaxed);
            Ok(())
        }));
    }
    barrier.wait();
    barrier.wait();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for h in handles {
        if let Err(e) = h.join().unwrap_or_else(|_| Err("client thread panicked".into())) {
            first_error.get_or_insert(e);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    match first_error {
        Some(e) => Err(e),
        None => Ok(total_ops.load(Ordering::Relaxed) as f64 / elapsed),
    }
}

pub fn run_throughput(run: &ThroughputRun) -> Result<Vec<ThroughputPoint>, String> {
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut points: Vec<ThroughputPoint> = Vec::new();
    for &workload in &run.workloads {
        for &size_bytes in &run.sizes {
            let start = points.len();
            for &variant in &run.variants {
                points.push(ThroughputPoint { variant, workload, size_bytes, ops_per_s_trials: Vec::new(), error: None });
            }
            // Trials interleave the variants, so a noisy second hurts all of them alike.
            for trial in 0..run.trials {
                for (k, &variant) in run.variants.iter().enumerate() {
                    let point = &mut points[start + k];
                    if point.error.is_some() {
                        continue;
                    }
                    if run.progress {
                        eprintln!(
                            "ohb mem thr: {} {} {} trial {}/{}",
                            variant.name(),
                            workload.name(),
                            format_size(size_bytes),
                            trial + 1,
                            run.trials
                        );
                    }
                    match throughput_trial(servers.addr(variant), workload, size_bytes, run.client_threads, run.seconds_per_trial) {
                        Ok(rate) => point.ops_per_s_trials.push(rate),
                        Err(e) => point.error = Some(e),
                    }
                }
            }
        }
    }
    Ok(points)
}

fn throughput_of(points: &[ThroughputPoint], variant: CacheVariant, workload: Workload, size: usize) -> Option<f64> {
    points.iter().find(|p| p.variant == variant && p.workload == workload && p.size_bytes == size)?.ops_per_s()
}

pub fn render_throughput(points: &[ThroughputPoint], run: &ThroughputRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!(
        "# ohb mem thr: operations per second, {} client threads with one connection each\n# machine: {}\n",
        run.client_threads,
        machine.describe()
    );
    out += &format!(
        "# servers: {} threads, -m {} MiB; median of {} trials of {:.1} s, variants interleaved\n",
        run.servers.threads, run.servers.memory_mib, run.trials, run.seconds_per_trial
    );
    let mut header = format!("{:>4} {:>8}", "op", "size");
    for v in &run.variants {
        header += &format!(" | {:>12}", v.name());
    }
    for v in run.variants.iter().filter(|v| **v != CacheVariant::Memcached) {
        header += &format!(" | {:>12}", format!("x vs mc ({})", short(*v)));
    }
    out += &header;
    out += "\n";
    for &workload in &run.workloads {
        for &size in &run.sizes {
            let mut row = format!("{:>4} {:>8}", workload.name(), format_size(size));
            for &v in &run.variants {
                row += &format!(" | {:>12}", throughput_of(points, v, workload, size).map(format_rate).unwrap_or_else(|| "err".into()));
            }
            for v in run.variants.iter().copied().filter(|v| *v != CacheVariant::Memcached) {
                let ratio = throughput_of(points, v, workload, size)
                    .zip(throughput_of(points, CacheVariant::Memcached, workload, size))
                    .map(|(x, mc)| x / mc);
                row += &format!(" | {:>12}", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
            }
            out += &row;
            out += "\n";
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.workload.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out += "\ntargets: over TCP >= 1.0x memcached for GET and SET at 32 B and 4 KB; over the fabric >= 2x memcached\n";
    for workload in [Workload::Get, Workload::Set] {
        for size in [32usize, 4096] {
            let mc = throughput_of(points, CacheVariant::Memcached, workload, size);
            for (v, target) in [(CacheVariant::CacheTcp, 1.0), (CacheVariant::CacheFabric, 2.0)] {
                let line = match mc.zip(throughput_of(points, v, workload, size)) {
                    Some((mc, x)) => {
                        let r = x / mc;
                        format!("{} -> {}", format_ratio(r), if r >= target { "met" } else { "MISSED" })
                    }
                    None => "not measured in this run".into(),
                };
                out += &format!("  {} {} {} (>= {target}x): {line}\n", workload.name(), format_size(size), v.name());
            }
        }
    }
    out
}

pub fn throughput_json(points: &[ThroughputPoint], run: &ThroughputRun, machine: &Machine) -> Value {
    json!({
        "test": "mem thr",
        "machine": machine.to_json(),
        "server_threads": run.servers.threads,
        "client_threads": run.client_threads,
        "seconds_per_trial": run.seconds_per_trial,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "workload": p.workload.name(), "size_bytes": p.size_bytes,
            "ops_per_s": p.ops_per_s(), "ops_per_s_trials": p.ops_per_s_trials, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}
