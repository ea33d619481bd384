//! Non-blocking gets on the hybrid server (`ohb mem nb --hybrid`): blocking gets vs `iget`/`bget`
//! batches over the fabric, with the data spilled.

use std::time::Instant;

use cache_client::{Client, Error as ClientError, ServerAddr};

use crate::cache::hybrid::{HybridRun, NbHybridRun};
use crate::cache::hybrid::gets::{load, GetTally};
use crate::cache::hybrid::keys::{key_of, thread_seed, KeyPicker, Scan};
use crate::cache::hybrid::servers::{relevant_stats, server_stats, start_server, HybridServer, Unmeasured};
use crate::cache::nonblocking::NbProgress;
use crate::cache::servers::connect;
use crate::stats::median;

/// How a pass issues its gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbGetMode {
    /// `get`, one at a time.
    Blocking,
    /// `iget`, `req_thresh` issued before completing them.
    Iget,
    /// `bget`, likewise.
    Bget,
}

impl NbGetMode {
    pub const ALL: [NbGetMode; 3] = [NbGetMode::Blocking, NbGetMode::Iget, NbGetMode::Bget];

    pub fn name(self) -> &'static str {
        match self {
            NbGetMode::Blocking => "get (blocking)",
            NbGetMode::Iget => "iget",
            NbGetMode::Bget => "bget",
        }
    }

    pub(super) fn key(self) -> &'static str {
        match self {
            NbGetMode::Blocking => "blocking",
            NbGetMode::Iget => "iget",
            NbGetMode::Bget => "bget",
        }
    }
}

/// Blocking gets on a pass's fresh connection before the measured pass (the same for every mode).
const NB_WARMUP_GETS: usize = 200;

/// The pass order of trial `trial`: rotated, so no mode always runs first after the others.
pub fn nb_order(trial: usize) -> [NbGetMode; 3] {
    let mut order = NbGetMode::ALL;
    order.rotate_left(trial % 3);
    order
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbModeResult {
    pub mode: NbGetMode,
    pub ops_per_s_trials: Vec<f64>,
    pub hits: usize,
    pub misses: usize,
}

impl NbModeResult {
    pub fn ops_per_s(&self) -> f64 {
        median(&self.ops_per_s_trials).unwrap_or(0.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NbHybridMeasure {
    pub items: usize,
    pub ssd_mb: u64,
    pub modes: Vec<NbModeResult>,
    pub stats: Vec<(String, String)>,
}

impl NbHybridMeasure {
    pub fn rate(&self, mode: NbGetMode) -> Option<f64> {
        self.modes.iter().find(|m| m.mode == mode).map(NbModeResult::ops_per_s)
    }
}

/// One pass of `ops` gets in `mode`; returns ops/s. Values are checked inside the timed loop
/// in every mode alike.
fn nb_pass(
    client: &Client,
    (keys, value_bytes): (&[Vec<u8>], usize),
    nb: &NbHybridRun,
    mode: NbGetMode,
    seed: u64,
    ops: usize,
    tally: &mut GetTally,
) -> Result<f64, String> {
    let mut picker = KeyPicker::new(Scan::Uniform, keys.len(), seed);
    let started = Instant::now();
    if mode == NbGetMode::Blocking {
        let mut buf = Vec::with_capacity(value_bytes);
        for _ in 0..ops {
            let index = picker.next_index();
            let found = client.get_into(&keys[index], &mut buf).map_err(|e| format!("get: {e}"))?.map(|m| m.flags);
            tally.count(index, found, value_bytes, &buf);
        }
        return Ok(ops as f64 / started.elapsed().as_secs_f64());
    }
    let mut dests: Vec<Vec<u8>> = vec![Vec::with_capacity(value_bytes); nb.req_thresh];
    let mut indices = vec![0usize; nb.req_thresh];
    let mut found: Vec<Option<u32>> = vec![None; nb.req_thresh];
    let mut issued = 0usize;
    while issued < ops {
        let batch = nb.req_thresh.min(ops - issued);
        for index in indices.iter_mut().take(batch) {
            *index = picker.next_index();
        }
        let mut pending = Vec::with_capacity(batch);
        for (k, dest) in dests.iter_mut().take(batch).enumerate() {
            let key = &keys[indices[k]];
            let req = match mode {
                NbGetMode::Iget => client.iget(key, dest),
                _ => client.bget(key, dest),
            }
            .map_err(|e| format!("{}: {e}", mode.name()))?;
            pending.push(Some(req));
        }
        let mut left = batch;
        while left > 0 {
            for (k, slot) in pending.iter_mut().enumerate() {
                let Some(req) = slot.as_mut() else { continue };
                let outcome = match nb.progress_type {
                    NbProgress::Wait => Some(client.wait(req)),
                    NbProgress::Test => match client.test(req) {
                        std::task::Poll::Ready(r) => Some(r),
                        std::task::Poll::Pending => None,
                    },
                };
                let Some(result) = outcome else { continue };
                found[k] = match result {
                    Ok(meta) => Some(meta.flags),
                    Err(ClientError::NotFound) => None,
                    Err(e) => return Err(format!("{} completion: {e}", mode.name())),
                };
                *slot = None;
                left -= 1;
            }
        }
        drop(pending);
        for k in 0..batch {
            tally.count(indices[k], found[k], value_bytes, &dests[k]);
        }
        issued += batch;
    }
    Ok(ops as f64 / started.elapsed().as_secs_f64())
}

pub(super) fn measure_nb(run: &HybridRun, nb: &NbHybridRun) -> Result<NbHybridMeasure, Unmeasured> {
    let items = run.items();
    let ssd_mb = run.ssd_mb();
    let keys: Vec<Vec<u8>> = (0..items).map(key_of).collect();
    let mut modes: Vec<NbModeResult> =
        NbGetMode::ALL.iter().map(|&mode| NbModeResult { mode, ops_per_s_trials: Vec::new(), hits: 0, misses: 0 }).collect();
    let mut stats = Vec::new();
    for trial in 0..nb.trials {
        let seed = thread_seed(run.seed, 2000 + trial);
        for mode in nb_order(trial) {
            if run.progress {
                eprintln!("ohb mem nb --hybrid: {} trial {}/{} (fresh server)", mode.name(), trial + 1, nb.trials);
            }
            // Every pass on a fresh server loaded the same way: a pass promotes the items it reads
            // from the SSD tier, so a later pass of the same keys would find a warmer cache.
            let running = start_server(HybridServer::CacheHybrid, &run.settings, run.max_memory_mb, ssd_mb)?;
            let client = connect(ServerAddr::Fabric(running.fabric.expect("slipstream-cache has a fabric port")))?;
            let (refused, _) = load(&client, &keys, run.value_bytes)?;
            if refused > 0 {
                return Err(Unmeasured::Failed(format!("{refused} sets refused by cache-hybrid while loading")));
            }
            let mut warm = GetTally::default();
            nb_pass(&client, (&keys, run.value_bytes), nb, NbGetMode::Blocking, !run.seed, NB_WARMUP_GETS, &mut warm)?;
            let mut tally = GetTally::default();
            let rate = nb_pass(&client, (&keys, run.value_bytes), nb, mode, seed, nb.ops, &mut tally)?;
            if let Some(error) = warm.wrong_error().or(tally.wrong_error()) {
                return Err(Unmeasured::Failed(format!("{}: {error}", mode.name())));
            }
            let m = modes.iter_mut().find(|m| m.mode == mode).expect("every mode");
            m.ops_per_s_trials.push(rate);
            m.hits += tally.hits;
            m.misses += tally.misses;
            stats = relevant_stats(HybridServer::CacheHybrid, &server_stats(&client)?);
        }
    }
    Ok(NbHybridMeasure { items, ssd_mb, modes, stats })
}
