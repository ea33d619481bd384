//! `ohb mem hybrid` (after OHB's `ohb_memhybrid`) and `ohb mem nb --hybrid`: the cache when the
//! data set does not fit in memory.
//!
//! `ohb mem hybrid` loads `spill_factor x -m` of data (every item set once, keys in order) into
//! four servers, one after the other, each started fresh: slipstream-cache RAM-only, slipstream-
//! cache with its SSD tier (`--ssd-path DIR --ssd-size MB`), memcached and memcached with extstore
//! (`-o ext_path=FILE:SIZEm`). Then the same seeded key sequence (uniform, or OHB's NORMAL) is read
//! from each over TCP (binary protocol, `cache-client`), one get at a time, counting hits, misses
//! and wrong values (a hit must carry exactly the bytes and flags that were set). A miss costs
//! `miss_penalty_ms` (fetching the item from the backing database): the penalty is ADDED to that
//! get's measured latency, never slept. A fit-in-memory comparison (spill 0.5) measures what the
//! SSD tier costs when nothing spills, RAM-only and hybrid interleaved in rounds, over TCP and the
//! fabric. The non-blocking part measures blocking gets against `iget`/`bget` batches on the hybrid
//! server over the fabric, with the data spilled.
//!
//! The SSD tier's flags are new: when the server refuses them (and its `--help` does not list
//! them) the hybrid rows say "not available" instead of failing the run.
//!
//! Architecture invariant (as the other cache tests): servers are separate processes bound to 127.0.0.1,
//! killed with ohb; their temporary directories are removed after them.

use crate::cache::hybrid::fit::{measure_fit, FitMeasure};
use crate::cache::hybrid::keys::{item_count, key_of, ssd_size_mb, Scan};
use crate::cache::hybrid::nb::{measure_nb, NbHybridMeasure};
use crate::cache::hybrid::servers::{HybridServer, Unmeasured};
use crate::cache::hybrid::spill::{measure_spill, SpillMeasure, SpillRow};
use crate::cache::nonblocking::NbProgress;
use crate::cache::servers::ServerSettings;
use crate::table::first_line;

pub mod fit;
pub mod gets;
pub mod keys;
pub mod nb;
pub mod render;
pub mod servers;
pub mod spill;

/// OHB's default spill factor: data set = 1.5 x memory.
pub const SPILL_FACTOR_DEFAULT: f64 = 1.5;
/// The fit-in-memory comparison's spill factor: half of memory holds the data.
pub const FIT_SPILL_FACTOR: f64 = 0.5;
/// SSD (and extstore file) size = this x the data set size: room to spare.
pub const SSD_ROOM_FACTOR: f64 = 2.0;
/// Target: with spill 1.5 and uniform keys, the hybrid server answers every get.
pub const HYBRID_SUCCESS_PERCENT_TARGET: f64 = 100.0;
/// Target: average latency with the miss penalty at least this many times lower than RAM-only.
pub const PENALTY_SPEEDUP_TARGET: f64 = 2.0;
/// Target: data fits in memory, hybrid latency at most this times RAM-only.
pub const FIT_SLOWDOWN_MAX: f64 = 1.05;
/// Target: non-blocking gets on the hybrid server at least this times the blocking gets' rate.
pub const NB_SPEEDUP_TARGET: f64 = 2.5;
/// memcached 1.6's `ext_page_size` default (MB); a smaller file gets smaller pages (see
/// `extstore_option`).
pub const MEMCACHED_EXT_PAGE_MB_DEFAULT: u64 = 64;
/// Largest value the bench sets (the servers' default -I is 1 MiB, key and header included).
pub const VALUE_BYTES_MAX: usize = 512 << 10;

#[derive(Debug, Clone)]
pub struct FitRun {
    pub rounds: usize,
    pub gets_tcp: usize,
    pub gets_fabric: usize,
}

#[derive(Debug, Clone)]
pub struct NbHybridRun {
    pub ops: usize,
    pub req_thresh: usize,
    pub progress_type: NbProgress,
    pub trials: usize,
}

#[derive(Debug, Clone)]
pub struct HybridRun {
    pub scan: Scan,
    pub max_memory_mb: u64,
    pub value_bytes: usize,
    pub miss_penalty_ms: f64,
    pub spill_factor: f64,
    pub gets: usize,
    pub clients: usize,
    pub seed: u64,
    /// Servers of the spill comparison, in order (empty: skip it).
    pub servers: Vec<HybridServer>,
    pub fit: Option<FitRun>,
    pub nb: Option<NbHybridRun>,
    /// Threads and executables (`memory_mib` is replaced by `max_memory_mb`).
    pub settings: ServerSettings,
    pub progress: bool,
}

impl HybridRun {
    pub fn items(&self) -> usize {
        item_count(self.spill_factor, self.max_memory_mb, self.value_bytes)
    }

    pub fn ssd_mb(&self) -> u64 {
        ssd_size_mb(self.spill_factor, self.max_memory_mb)
    }

    /// Checks the parameters; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.spill_factor > 0.0 && self.spill_factor <= 16.0) {
            return Err("--spill-factor must be in (0, 16]".into());
        }
        if !(2..=65536).contains(&self.max_memory_mb) {
            return Err("--max-memory-mb must be in 2..=65536".into());
        }
        if self.value_bytes == 0 || self.value_bytes > VALUE_BYTES_MAX {
            return Err(format!("--value-bytes must be in 1..={VALUE_BYTES_MAX}"));
        }
        if !(self.miss_penalty_ms >= 0.0 && self.miss_penalty_ms.is_finite()) {
            return Err("--miss-penalty-ms must be a non-negative number".into());
        }
        if self.gets == 0 || self.clients == 0 || self.clients > 64 || self.clients > self.gets {
            return Err("--gets must be positive and --clients in 1..=64 (and at most --gets)".into());
        }
        if self.items() > 50_000_000 {
            return Err("more than 50 million items: lower --spill-factor or --max-memory-mb, or raise --value-bytes".into());
        }
        if let Some(fit) = &self.fit {
            if fit.rounds == 0 || fit.gets_tcp == 0 || fit.gets_fabric == 0 {
                return Err("--rounds must be positive".into());
            }
        }
        if let Some(nb) = &self.nb {
            if nb.ops == 0 || nb.req_thresh == 0 || nb.req_thresh > 4096 || nb.trials == 0 {
                return Err("--count and --trials must be positive, --req-thresh in 1..=4096".into());
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HybridResult {
    pub spill: Vec<SpillRow>,
    pub fit: Option<Result<FitMeasure, Unmeasured>>,
    pub nb: Option<Result<NbHybridMeasure, Unmeasured>>,
}

impl HybridResult {
    /// Measurements that failed (a "not available" row is not one).
    /// Every measurement that failed ("not available" is no failure), as "PART: why".
    pub fn failures(&self) -> Vec<String> {
        let failed = |part: String, u: &Unmeasured| match u {
            Unmeasured::Failed(why) => Some(format!("{part}: {}", first_line(why))),
            Unmeasured::NotAvailable(_) => None,
        };
        let spill = self.spill.iter().filter_map(|r| failed(format!("spill {}", r.server.name()), r.outcome.as_ref().err()?));
        let fit = self.fit.as_ref().and_then(|f| failed("fit in memory".into(), f.as_ref().err()?));
        let nb = self.nb.as_ref().and_then(|n| failed("nb --hybrid".into(), n.as_ref().err()?));
        spill.chain(fit).chain(nb).collect()
    }

    pub fn spill_measure(&self, server: HybridServer) -> Option<&SpillMeasure> {
        self.spill.iter().find(|r| r.server == server)?.outcome.as_ref().ok()
    }
}

pub fn run_hybrid(run: &HybridRun) -> Result<HybridResult, String> {
    run.validate()?;
    let keys: Vec<Vec<u8>> = (0..run.items()).map(key_of).collect();
    let mut result = HybridResult { spill: Vec::new(), fit: None, nb: None };
    for &server in &run.servers {
        if run.progress {
            eprintln!("ohb mem hybrid: {} (fresh), spill {}, {} scan", server.name(), run.spill_factor, run.scan.name());
        }
        let outcome = measure_spill(server, run, &keys);
        if let Err(u) = &outcome {
            eprintln!("ohb mem hybrid: {}: {}", server.name(), u.text());
        }
        result.spill.push(SpillRow { server, outcome });
    }
    drop(keys);
    if let Some(fit) = &run.fit {
        let outcome = measure_fit(run, fit);
        if let Err(u) = &outcome {
            eprintln!("ohb mem hybrid: fit in memory: {}", u.text());
        }
        result.fit = Some(outcome);
    }
    if let Some(nb) = &run.nb {
        let outcome = measure_nb(run, nb);
        if let Err(u) = &outcome {
            eprintln!("ohb mem nb --hybrid: {}", u.text());
        }
        result.nb = Some(outcome);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use crate::cache::hybrid::fit::fit_order;
    use crate::cache::hybrid::keys::thread_seed;
    use crate::cache::hybrid::nb::{nb_order, NbGetMode};
    use super::*;

    pub(super) fn test_run() -> HybridRun {
        HybridRun {
            scan: Scan::Uniform,
            max_memory_mb: 64,
            value_bytes: 4096,
            miss_penalty_ms: 1.5,
            spill_factor: 1.5,
            gets: 1000,
            clients: 1,
            seed: 42,
            servers: HybridServer::ALL.to_vec(),
            fit: Some(FitRun { rounds: 3, gets_tcp: 100, gets_fabric: 100 }),
            nb: Some(NbHybridRun { ops: 100, req_thresh: 32, progress_type: NbProgress::Wait, trials: 1 }),
            settings: ServerSettings::default_for_this_build(),
            progress: false,
        }
    }

    #[test]
    fn orders_alternate_and_rotate() {
        assert_eq!(fit_order(0), [0, 1, 2]);
        assert_eq!(fit_order(1), [1, 2, 0]);
        assert_eq!(fit_order(5), [2, 0, 1]);
        // Over 3 rounds every server is first, second and third once.
        for position in 0..3 {
            let mut seen: Vec<usize> = (0..3).map(|r| fit_order(r)[position]).collect();
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2]);
        }
        assert_eq!(nb_order(0), [NbGetMode::Blocking, NbGetMode::Iget, NbGetMode::Bget]);
        assert_eq!(nb_order(1), [NbGetMode::Iget, NbGetMode::Bget, NbGetMode::Blocking]);
        assert_eq!(nb_order(5), [NbGetMode::Bget, NbGetMode::Blocking, NbGetMode::Iget]);
        assert_ne!(thread_seed(1, 0), thread_seed(1, 1));
    }

    #[test]
    fn validation_names_the_flag() {
        let mut run = test_run();
        run.spill_factor = 0.0;
        assert!(run.validate().unwrap_err().contains("--spill-factor"));
        let mut run = test_run();
        run.value_bytes = 0;
        assert!(run.validate().unwrap_err().contains("--value-bytes"));
        let mut run = test_run();
        run.clients = 0;
        assert!(run.validate().unwrap_err().contains("--clients"));
        let mut run = test_run();
        run.miss_penalty_ms = -1.0;
        assert!(run.validate().unwrap_err().contains("--miss-penalty-ms"));
    }
}
