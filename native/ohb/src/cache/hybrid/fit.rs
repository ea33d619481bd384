//! Fit in memory: RAM-only vs hybrid, interleaved rounds over TCP and the fabric.

use cache_client::ServerAddr;

use crate::cache::hybrid::{FitRun, HybridRun, FIT_SPILL_FACTOR};
use crate::cache::hybrid::gets::{load, timed_gets, GetTally};
use crate::cache::hybrid::keys::{item_count, key_of, ssd_size_mb, thread_seed, KeyPicker, Scan};
use crate::cache::hybrid::servers::{start_server, HybridServer, Running, Unmeasured};
use crate::cache::servers::connect;
use crate::stats::{median, percentile_sorted};

/// Median over rounds of one server's figures on one transport.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSide {
    pub us_p50_rounds: Vec<f64>,
    pub us_avg_rounds: Vec<f64>,
    pub hits: usize,
    pub misses: usize,
}

impl FitSide {
    fn new() -> FitSide {
        FitSide { us_p50_rounds: Vec::new(), us_avg_rounds: Vec::new(), hits: 0, misses: 0 }
    }

    pub fn us_p50(&self) -> f64 {
        median(&self.us_p50_rounds).unwrap_or(0.0)
    }

    pub fn us_avg(&self) -> f64 {
        median(&self.us_avg_rounds).unwrap_or(0.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitTransport {
    pub transport: &'static str,
    pub ram: FitSide,
    pub hybrid: FitSide,
    /// A second RAM-only server measured like the others: control / ram is the noise floor.
    pub control: FitSide,
}

impl FitTransport {
    /// Hybrid latency / RAM-only latency (p50, avg): <= 1.05 is the target.
    pub fn slowdowns(&self) -> (f64, f64) {
        (self.hybrid.us_p50() / self.ram.us_p50(), self.hybrid.us_avg() / self.ram.us_avg())
    }

    /// The same ratios between two identical RAM-only servers (A/A): what noise alone gives.
    pub fn noise(&self) -> (f64, f64) {
        (self.control.us_p50() / self.ram.us_p50(), self.control.us_avg() / self.ram.us_avg())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitMeasure {
    pub items: usize,
    pub ssd_mb: u64,
    pub transports: Vec<FitTransport>,
}

/// Gets on a fresh connection before a fit round's measured gets.
const FIT_WARMUP_GETS: usize = 100;

/// The order of the fit servers (0 ram, 1 hybrid, 2 control) in round `round`: rotated, so
/// every server takes every position equally often over a multiple of 3 rounds.
pub fn fit_order(round: usize) -> [usize; 3] {
    let mut order = [0, 1, 2];
    order.rotate_left(round % 3);
    order
}

/// The fit servers' names, by index.
const FIT_NAMES: [&str; 3] = ["cache-ram", "cache-hybrid", "control (cache-ram)"];

pub(super) fn measure_fit(run: &HybridRun, fit: &FitRun) -> Result<FitMeasure, Unmeasured> {
    let items = item_count(FIT_SPILL_FACTOR, run.max_memory_mb, run.value_bytes);
    let ssd_mb = ssd_size_mb(FIT_SPILL_FACTOR, run.max_memory_mb);
    let keys: Vec<Vec<u8>> = (0..items).map(key_of).collect();
    // All three run at once (rounds rotate between them); hybrid first, so "not available" is cheap.
    let hybrid = start_server(HybridServer::CacheHybrid, &run.settings, run.max_memory_mb, ssd_mb)?;
    let ram = start_server(HybridServer::CacheRam, &run.settings, run.max_memory_mb, ssd_mb)?;
    let control = start_server(HybridServer::CacheRam, &run.settings, run.max_memory_mb, ssd_mb)?;
    let mut transports = Vec::new();
    for transport in ["tcp", "fabric"] {
        let addr_of = |r: &Running| match transport {
            "tcp" => ServerAddr::Tcp(r.tcp),
            _ => ServerAddr::Fabric(r.fabric.expect("slipstream-cache has a fabric port")),
        };
        if transport == "tcp" {
            for server in [&ram, &hybrid, &control] {
                let (refused, _) = load(&connect(addr_of(server))?, &keys, run.value_bytes)?;
                if refused > 0 {
                    return Err(Unmeasured::Failed(format!("{refused} sets refused while the data fits in memory")));
                }
            }
        }
        let gets = if transport == "tcp" { fit.gets_tcp } else { fit.gets_fabric };
        let mut sides = [FitSide::new(), FitSide::new(), FitSide::new()];
        for round in 0..fit.rounds {
            if run.progress {
                eprintln!("ohb mem hybrid: fit in memory, {transport}, round {}/{}", round + 1, fit.rounds);
            }
            // Fresh connections every round (a connection's thread placement is a lasting mode
            // on this VM), warmed up; then the round's keys from one server after the other, the
            // order rotating per round. Blocks, not single gets in turn: an idle server's fabric
            // progress thread stops spinning after --fabric-spin-us, a busy one does not, and
            // two spinning servers plus the client overload 2 vCPUs.
            let clients = [connect(addr_of(&ram))?, connect(addr_of(&hybrid))?, connect(addr_of(&control))?];
            let mut tallies = [GetTally::default(), GetTally::default(), GetTally::default()];
            for side in fit_order(round) {
                let mut warm = KeyPicker::new(Scan::Uniform, items, !thread_seed(run.seed, round));
                timed_gets(&clients[side], &keys, run.value_bytes, &mut warm, FIT_WARMUP_GETS)?;
                let mut picker = KeyPicker::new(Scan::Uniform, items, thread_seed(run.seed, 1000 + round));
                tallies[side] = timed_gets(&clients[side], &keys, run.value_bytes, &mut picker, gets)?;
            }
            for (side, mut tally) in tallies.into_iter().enumerate() {
                if let Some(error) = tally.wrong_error() {
                    return Err(Unmeasured::Failed(format!("{} over {transport}: {error}", FIT_NAMES[side])));
                }
                let total: u64 = tally.samples_ns.iter().sum();
                tally.samples_ns.sort_unstable();
                let s = &mut sides[side];
                s.us_p50_rounds.push(percentile_sorted(&tally.samples_ns, 50.0).unwrap_or(0) as f64 / 1000.0);
                s.us_avg_rounds.push(total as f64 / tally.samples_ns.len() as f64 / 1000.0);
                s.hits += tally.hits;
                s.misses += tally.misses;
            }
        }
        let [ram_side, hybrid_side, control_side] = sides;
        transports.push(FitTransport { transport, ram: ram_side, hybrid: hybrid_side, control: control_side });
    }
    Ok(FitMeasure { items, ssd_mb, transports })
}
