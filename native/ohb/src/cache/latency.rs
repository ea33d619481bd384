//! `ohb mem lat` (after OHB's `ohb_memlat`): GET / SET / MIX latency, one operation at a time.

use std::time::Instant;

use serde_json::{json, Value};

use crate::args::format_size;
use crate::cache::CacheVariant;
use crate::cache::servers::{connect, CacheServers, ServerSettings};
use crate::cache::workload::{key_for, one_op, preload, value_of, Workload, KEYS_PER_POINT};
use crate::machine::Machine;
use crate::stats::percentile_sorted;
use crate::table::{format_ratio, format_us};

/// Latency of one (variant, workload, size) point, microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyPoint {
    pub variant: CacheVariant,
    pub workload: Workload,
    pub size_bytes: usize,
    pub ops: usize,
    pub us_p50: f64,
    pub us_p99: f64,
    pub us_avg: f64,
    pub ops_per_s: f64,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LatencyRun {
    pub workloads: Vec<Workload>,
    pub sizes: Vec<usize>,
    pub iterations: usize,
    pub warmup: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

pub fn run_latency(run: &LatencyRun) -> Result<Vec<LatencyPoint>, String> {
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut clients = Vec::new();
    for &variant in &run.variants {
        clients.push((variant, connect(servers.addr(variant))?));
    }
    let mut points = Vec::new();
    let mut samples_ns = vec![0u64; run.iterations];
    let mut scratch = Vec::new();
    for &workload in &run.workloads {
        for &size_bytes in &run.sizes {
            let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
            let value = value_of(size_bytes);
            for (variant, client) in clients.iter_mut() {
                if run.progress {
                    eprintln!("ohb mem lat: {} {} {}", variant.name(), workload.name(), format_size(size_bytes));
                }
                let result = (|| -> Result<LatencyPoint, String> {
                    preload(client, size_bytes)?;
                    for i in 0..run.warmup as u64 {
                        one_op(client, workload, i, &keys, &value, &mut scratch)?;
                    }
                    let started = Instant::now();
                    for (i, sample) in samples_ns.iter_mut().enumerate() {
                        let t0 = Instant::now();
                        one_op(client, workload, i as u64, &keys, &value, &mut scratch)?;
                        *sample = t0.elapsed().as_nanos() as u64;
                    }
                    let seconds = started.elapsed().as_secs_f64();
                    let total_ns: u64 = samples_ns.iter().sum();
                    samples_ns.sort_unstable();
                    let us = |ns: u64| ns as f64 / 1000.0;
                    Ok(LatencyPoint {
                        variant: *variant,
                        workload,
                        size_bytes,
                        ops: samples_ns.len(),
                        us_p50: us(percentile_sorted(&samples_ns, 50.0).unwrap_or(0)),
                        us_p99: us(percentile_sorted(&samples_ns, 99.0).unwrap_or(0)),
                        us_avg: total_ns as f64 / samples_ns.len() as f64 / 1000.0,
                        ops_per_s: samples_ns.len() as f64 / seconds,
                        error: None,
                    })
                })();
                points.push(result.unwrap_or_else(|error| LatencyPoint {
                    variant: *variant,
                    workload,
                    size_bytes,
                    ops: 0,
                    us_p50: 0.0,
                    us_p99: 0.0,
                    us_avg: 0.0,
                    ops_per_s: 0.0,
                    error: Some(error),
                }));
            }
        }
    }
    drop(servers);
    Ok(points)
}

fn latency_point(
    points: &[LatencyPoint],
    variant: CacheVariant,
    workload: Workload,
    size: usize,
) -> Option<&LatencyPoint> {
    points
        .iter()
        .find(|p| p.variant == variant && p.workload == workload && p.size_bytes == size && p.error.is_none())
}

pub fn render_latency(points: &[LatencyPoint], run: &LatencyRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!("# ohb mem lat: latency per operation, one client thread, one request at a time\n# machine: {}\n", machine.describe());
    out += &format!(
        "# servers: {} threads, -m {} MiB; {} measured ops per point after {} warm-up; p50 / p99 / avg in us\n",
        run.servers.threads, run.servers.memory_mib, run.iterations, run.warmup
    );
    for &workload in &run.workloads {
        out += &format!("\n{}\n", workload.name());
        let mut header = format!("{:>8}", "size");
        for v in &run.variants {
            header += &format!(" | {:>24}", format!("{} p50/p99/avg", v.name()));
        }
        for v in run.variants.iter().filter(|v| **v != CacheVariant::Memcached) {
            header += &format!(" | {:>16}", format!("p50 x vs mc ({})", short(*v)));
        }
        out += &header;
        out += "\n";
        for &size in &run.sizes {
            let mut row = format!("{:>8}", format_size(size));
            for &v in &run.variants {
                let cell = match latency_point(points, v, workload, size) {
                    Some(p) => format!("{}/{}/{}", format_us(p.us_p50), format_us(p.us_p99), format_us(p.us_avg)),
                    None => "err".into(),
                };
                row += &format!(" | {cell:>24}");
            }
            for v in run.variants.iter().copied().filter(|v| *v != CacheVariant::Memcached) {
                let ratio = latency_point(points, CacheVariant::Memcached, workload, size)
                    .zip(latency_point(points, v, workload, size))
                    .map(|(mc, p)| mc.us_p50 / p.us_p50);
                row += &format!(" | {:>16}", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
            }
            out += &row;
            out += "\n";
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.workload.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out += "\nratio: memcached's p50 / this variant's p50 (higher is better).\n";
    out += "target: over the fabric, GET p50 at least 4x lower than memcached over TCP at 32 B and 4 KB\n";
    for size in [32usize, 4096] {
        let ratio = latency_point(points, CacheVariant::Memcached, Workload::Get, size)
            .zip(latency_point(points, CacheVariant::CacheFabric, Workload::Get, size))
            .map(|(mc, f)| mc.us_p50 / f.us_p50);
        out += &match ratio {
            Some(r) => format!("  GET {}: {} -> {}\n", format_size(size), format_ratio(r), if r >= 4.0 { "met" } else { "MISSED" }),
            None => format!("  GET {}: not measured in this run\n", format_size(size)),
        };
    }
    out
}

pub(super) fn short(v: CacheVariant) -> &'static str {
    match v {
        CacheVariant::Memcached => "mc",
        CacheVariant::CacheTcp => "tcp",
        CacheVariant::CacheFabric => "fabric",
    }
}

pub fn latency_json(points: &[LatencyPoint], run: &LatencyRun, machine: &Machine) -> Value {
    json!({
        "test": "mem lat",
        "machine": machine.to_json(),
        "server_threads": run.servers.threads,
        "memory_mib": run.servers.memory_mib,
        "iterations": run.iterations,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "workload": p.workload.name(), "size_bytes": p.size_bytes,
            "ops": p.ops, "us_p50": p.us_p50, "us_p99": p.us_p99, "us_avg": p.us_avg,
            "ops_per_s": p.ops_per_s, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}
