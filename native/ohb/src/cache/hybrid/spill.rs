//! The spill comparison: one server, the data set larger than its memory, the same key sequence.

use cache_client::ServerAddr;

use crate::cache::hybrid::HybridRun;
use crate::cache::hybrid::gets::{load, timed_gets_threads};
use crate::cache::hybrid::keys::average_with_penalty_us;
use crate::cache::hybrid::servers::{relevant_stats, server_stats, start_server, HybridServer, Unmeasured};
use crate::cache::servers::connect;
use crate::stats::percentile_sorted;

/// One server's figures in the spill comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct SpillMeasure {
    pub items: usize,
    pub sets_refused: usize,
    pub load_seconds: f64,
    pub gets: usize,
    pub hits: usize,
    pub misses: usize,
    pub get_seconds: f64,
    pub us_p50: f64,
    pub us_p99: f64,
    pub us_avg_raw: f64,
    /// Average with the miss penalty added for every miss.
    pub us_avg_with_penalty: f64,
    /// `relevant_stats` after the gets.
    pub stats: Vec<(String, String)>,
}

impl SpillMeasure {
    pub fn success_percent(&self) -> f64 {
        100.0 * self.hits as f64 / self.gets as f64
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpillRow {
    pub server: HybridServer,
    pub outcome: Result<SpillMeasure, Unmeasured>,
}

pub(super) fn measure_spill(server: HybridServer, run: &HybridRun, keys: &[Vec<u8>]) -> Result<SpillMeasure, Unmeasured> {
    let running = start_server(server, &run.settings, run.max_memory_mb, run.ssd_mb())?;
    let addr = ServerAddr::Tcp(running.tcp);
    let client = connect(addr)?;
    let (sets_refused, load_seconds) = load(&client, keys, run.value_bytes)?;
    if run.progress {
        eprintln!("ohb mem hybrid: {}: {} items set in {load_seconds:.1} s, {} gets", server.name(), keys.len(), run.gets);
    }
    let (mut tally, get_seconds) =
        timed_gets_threads(addr, keys, run.value_bytes, run.scan, run.seed, run.gets, run.clients)?;
    if let Some(error) = tally.wrong_error() {
        return Err(Unmeasured::Failed(error));
    }
    let stats = relevant_stats(server, &server_stats(&client)?);
    drop(client);
    drop(running);
    let total_ns: u64 = tally.samples_ns.iter().sum();
    let gets = tally.gets();
    tally.samples_ns.sort_unstable();
    let us = |ns: Option<u64>| ns.unwrap_or(0) as f64 / 1000.0;
    Ok(SpillMeasure {
        items: keys.len(),
        sets_refused,
        load_seconds,
        gets,
        hits: tally.hits,
        misses: tally.misses,
        get_seconds,
        us_p50: us(percentile_sorted(&tally.samples_ns, 50.0)),
        us_p99: us(percentile_sorted(&tally.samples_ns, 99.0)),
        us_avg_raw: total_ns as f64 / gets as f64 / 1000.0,
        us_avg_with_penalty: average_with_penalty_us(total_ns, tally.misses, gets, run.miss_penalty_ms),
        stats,
    })
}
