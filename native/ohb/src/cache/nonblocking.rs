//! `ohb mem nb` (after OHB's `ohb_memlat_nb`): iset / iget / bset / bget in batches, completed by
//! wait or test, each against its blocking calls.

use std::time::Instant;

use cache_client::Client;
use serde_json::{json, Value};

use crate::args::format_size;
use crate::cache::CacheVariant;
use crate::cache::servers::{connect, CacheServers, ServerSettings};
use crate::cache::workload::{key_for, one_op, preload, value_of, Workload, KEYS_PER_POINT};
use crate::machine::Machine;
use crate::table::{format_rate, format_ratio, format_us};

/// HiBD's non-blocking calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbRequest {
    Iset,
    Iget,
    Bset,
    Bget,
}

impl NbRequest {
    pub const ALL: [NbRequest; 4] = [NbRequest::Iset, NbRequest::Iget, NbRequest::Bset, NbRequest::Bget];

    pub fn name(self) -> &'static str {
        match self {
            NbRequest::Iset => "iset",
            NbRequest::Iget => "iget",
            NbRequest::Bset => "bset",
            NbRequest::Bget => "bget",
        }
    }

    pub fn parse(text: &str) -> Option<NbRequest> {
        NbRequest::ALL.into_iter().find(|r| r.name().eq_ignore_ascii_case(text))
    }

    fn is_get(self) -> bool {
        matches!(self, NbRequest::Iget | NbRequest::Bget)
    }
}

/// How completions are found: `wait` on each request, or `test` them round-robin until done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbProgress {
    Wait,
    Test,
}

impl NbProgress {
    pub fn name(self) -> &'static str {
        match self {
            NbProgress::Wait => "wait",
            NbProgress::Test => "test",
        }
    }

    pub fn parse(text: &str) -> Option<NbProgress> {
        [NbProgress::Wait, NbProgress::Test].into_iter().find(|p| p.name().eq_ignore_ascii_case(text))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbPoint {
    pub variant: CacheVariant,
    pub request: NbRequest,
    pub size_bytes: usize,
    /// The same operations through the blocking calls (set/get), one at a time.
    pub blocking_ops_per_s: f64,
    pub nonblocking_ops_per_s: f64,
    /// Time per operation when `req_thresh` are issued before completing them, microseconds.
    pub nonblocking_us_avg: f64,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NbRun {
    pub requests: Vec<NbRequest>,
    pub sizes: Vec<usize>,
    pub progress_type: NbProgress,
    /// Requests issued before the batch is completed (OHB's --reqthresh, default 32).
    pub req_thresh: usize,
    pub ops: usize,
    pub variants: Vec<CacheVariant>,
    pub servers: ServerSettings,
    pub progress: bool,
}

/// Issues `ops` requests in batches of `req_thresh`, completing each batch by wait or test.
fn nonblocking_pass(client: &Client, run: &NbRun, request: NbRequest, size_bytes: usize) -> Result<f64, String> {
    let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
    let value = value_of(size_bytes);
    let mut dests: Vec<Vec<u8>> = vec![Vec::with_capacity(size_bytes); run.req_thresh];
    let started = Instant::now();
    let mut issued = 0usize;
    while issued < run.ops {
        let batch = run.req_thresh.min(run.ops - issued);
        let mut pending = Vec::with_capacity(batch);
        for (k, dest) in dests.iter_mut().take(batch).enumerate() {
            let key = &keys[(issued + k) % keys.len()];
            let req = match request {
                NbRequest::Iset => client.iset(key, &value, 0, 0),
                NbRequest::Bset => client.bset(key, &value, 0, 0),
                NbRequest::Iget => client.iget(key, dest),
                NbRequest::Bget => client.bget(key, dest),
            }
            .map_err(|e| format!("{}: {e}", request.name()))?;
            pending.push(Some(req));
        }
        let mut left = batch;
        while left > 0 {
            for slot in pending.iter_mut() {
                let Some(req) = slot.as_mut() else { continue };
                let outcome = match run.progress_type {
                    NbProgress::Wait => Some(client.wait(req)),
                    NbProgress::Test => match client.test(req) {
                        std::task::Poll::Ready(r) => Some(r),
                        std::task::Poll::Pending => None,
                    },
                };
                if let Some(result) = outcome {
                    result.map_err(|e| format!("{} completion: {e}", request.name()))?;
                    *slot = None;
                    left -= 1;
                }
            }
        }
        drop(pending);
        if request.is_get() {
            if let Some(bad) = dests.iter().take(batch).find(|d| d.len() != size_bytes) {
                return Err(format!("{} returned {} bytes, expected {size_bytes}", request.name(), bad.len()));
            }
        }
        issued += batch;
    }
    Ok(run.ops as f64 / started.elapsed().as_secs_f64())
}

fn blocking_pass(client: &Client, run: &NbRun, request: NbRequest, size_bytes: usize) -> Result<f64, String> {
    let keys: Vec<Vec<u8>> = (0..KEYS_PER_POINT).map(|i| key_for(size_bytes, i)).collect();
    let value = value_of(size_bytes);
    let workload = if request.is_get() { Workload::Get } else { Workload::Set };
    let mut scratch = Vec::new();
    let started = Instant::now();
    for i in 0..run.ops as u64 {
        one_op(client, workload, i, &keys, &value, &mut scratch)?;
    }
    Ok(run.ops as f64 / started.elapsed().as_secs_f64())
}

pub fn run_nonblocking(run: &NbRun) -> Result<Vec<NbPoint>, String> {
    assert!(run.req_thresh > 0 && run.ops > 0);
    let servers = CacheServers::start(&run.servers, &run.variants)?;
    let mut clients = Vec::new();
    for &variant in &run.variants {
        clients.push((variant, connect(servers.addr(variant))?));
    }
    let mut points = Vec::new();
    for &request in &run.requests {
        for &size_bytes in &run.sizes {
            for (variant, client) in clients.iter_mut() {
                if run.progress {
                    eprintln!("ohb mem nb: {} {} {} ({})", variant.name(), request.name(), format_size(size_bytes), run.progress_type.name());
                }
                let measured = (|| -> Result<(f64, f64), String> {
                    preload(client, size_bytes)?;
                    // A short warm-up of both paths, then the measured passes.
                    let warm = NbRun { ops: run.ops.min(200), ..run.clone() };
                    blocking_pass(client, &warm, request, size_bytes)?;
                    nonblocking_pass(client, &warm, request, size_bytes)?;
                    let blocking = blocking_pass(client, run, request, size_bytes)?;
                    let nonblocking = nonblocking_pass(client, run, request, size_bytes)?;
                    Ok((blocking, nonblocking))
                })();
                points.push(match measured {
                    Ok((blocking, nonblocking)) => NbPoint {
                        variant: *variant,
                        request,
                        size_bytes,
                        blocking_ops_per_s: blocking,
                        nonblocking_ops_per_s: nonblocking,
                        nonblocking_us_avg: 1e6 / nonblocking,
                        error: None,
                    },
                    Err(error) => NbPoint {
                        variant: *variant,
                        request,
                        size_bytes,
                        blocking_ops_per_s: 0.0,
                        nonblocking_ops_per_s: 0.0,
                        nonblocking_us_avg: 0.0,
                        error: Some(error),
                    },
                });
            }
        }
    }
    drop(servers);
    Ok(points)
}

pub fn render_nonblocking(points: &[NbPoint], run: &NbRun, machine: &Machine) -> String {
    let mut out = String::new();
    out += &format!(
        "# ohb mem nb: non-blocking calls, {} requests in batches of {} (--reqthresh), completed by {}\n# machine: {}\n",
        run.ops,
        run.req_thresh,
        run.progress_type.name(),
        machine.describe()
    );
    out += "# blocking: the same operations through set/get, one at a time; ops/s and us per op\n";
    out += &format!("{:>5} {:>8}", "req", "size");
    for v in &run.variants {
        out += &format!(" | {:>30}", format!("{} blocking / nb (us/op)", v.name()));
    }
    out += &format!(" | {:>14}\n", "fabric nb x mc");
    for &request in &run.requests {
        for &size in &run.sizes {
            out += &format!("{:>5} {:>8}", request.name(), format_size(size));
            for &v in &run.variants {
                let p = points.iter().find(|p| p.variant == v && p.request == request && p.size_bytes == size);
                let cell = match p {
                    Some(p) if p.error.is_none() => format!(
                        "{} / {} ({})",
                        format_rate(p.blocking_ops_per_s),
                        format_rate(p.nonblocking_ops_per_s),
                        format_us(p.nonblocking_us_avg)
                    ),
                    _ => "err".into(),
                };
                out += &format!(" | {cell:>30}");
            }
            let rate = |v: CacheVariant| {
                points
                    .iter()
                    .find(|p| p.variant == v && p.request == request && p.size_bytes == size && p.error.is_none())
                    .map(|p| p.nonblocking_ops_per_s)
            };
            let ratio = rate(CacheVariant::CacheFabric).zip(rate(CacheVariant::Memcached)).map(|(f, m)| f / m);
            out += &format!(" | {:>14}\n", ratio.map(format_ratio).unwrap_or_else(|| "-".into()));
        }
    }
    for p in points.iter().filter(|p| p.error.is_some()) {
        out += &format!("error: {} {} {}: {}\n", p.variant.name(), p.request.name(), format_size(p.size_bytes), p.error.as_deref().unwrap_or(""));
    }
    out
}

pub fn nonblocking_json(points: &[NbPoint], run: &NbRun, machine: &Machine) -> Value {
    json!({
        "test": "mem nb",
        "machine": machine.to_json(),
        "progress": run.progress_type.name(),
        "req_thresh": run.req_thresh,
        "ops": run.ops,
        "points": points.iter().map(|p| json!({
            "variant": p.variant.name(), "request": p.request.name(), "size_bytes": p.size_bytes,
            "blocking_ops_per_s": p.blocking_ops_per_s, "nonblocking_ops_per_s": p.nonblocking_ops_per_s,
            "nonblocking_us_avg": p.nonblocking_us_avg, "error": p.error,
        })).collect::<Vec<_>>(),
    })
}
