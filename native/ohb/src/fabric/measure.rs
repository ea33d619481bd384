//! Measurement loops shared by every client: latency (sequential echoes, each timed) and
//! streaming (a window of in-flight requests answered by acks, timed per trial).
//!
//! Iteration counts follow a time budget per point unless given: a warm-up estimates the cost of
//! one operation, and the count is the budget divided by that cost, within fixed bounds. Every
//! loop is bounded in count and in time (`POINT_TIME_MAX`; with budget-derived counts also
//! `BUDGET_OVERRUN_MAX` budgets).

use std::time::{Duration, Instant};

use crate::fabric::result::{Mode, Point};
use crate::stats::{median, summarize_ns, MB_BYTES};

/// Latency iterations per point when derived from the budget.
pub const LAT_ITERATIONS_MIN: u64 = 100;
pub const LAT_ITERATIONS_MAX: u64 = 200_000;
/// Messages per point (all trials) when derived from the budget.
pub const STREAM_MESSAGES_MAX: u64 = 4_000_000;
/// Warm-up stops at this count or at a tenth of the budget.
pub const WARMUP_ITERATIONS_MAX: u64 = 2000;
pub const WARMUP_ITERATIONS_MIN: u64 = 4;
/// A point never measures longer than this, whatever the iteration count.
pub const POINT_TIME_MAX: Duration = Duration::from_secs(60);
/// With budget-derived counts, a point that runs slower than its warm-up predicted stops at this
/// many budgets (keeping at least `LAT_ITERATIONS_MIN` samples or one trial).
pub const BUDGET_OVERRUN_MAX: u32 = 3;

/// A client of one measured party, connected to its server.
pub trait Party {
    /// Gets ready to send payloads of `size_bytes`: allocations happen here, not in timed loops.
    fn prepare(&mut self, size_bytes: usize) -> Result<(), String>;
    /// One echo round trip of the prepared payload. Checks the echoed length always, and the
    /// content too when `verify`.
    fn echo(&mut self, verify: bool) -> Result<(), String>;
    /// Sends `count` prepared payloads with at most `window` unanswered; returns once all are acked.
    fn stream(&mut self, window: usize, count: u64) -> Result<(), String>;
}

/// How much to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Target measuring time per point.
    pub budget: Duration,
    /// Fixed iteration count (messages, for bw/rate), instead of the budget.
    pub iterations: Option<u64>,
    /// Fixed warm-up count, instead of a tenth of the budget.
    pub warmup: Option<u64>,
    /// Fixed window, instead of `default_window`.
    pub window: Option<usize>,
    /// Trials per bw/rate point; the median trial is reported.
    pub trials: u32,
}

impl Plan {
    /// How long the timed part of a point may run.
    pub fn time_max(&self) -> Duration {
        match self.iterations {
            Some(_) => POINT_TIME_MAX,
            None => (self.budget * BUDGET_OVERRUN_MAX).min(POINT_TIME_MAX),
        }
    }

    pub fn window_for(&self, mode: Mode, size_bytes: usize) -> Option<usize> {
        match mode {
            Mode::Lat => None,
            _ => Some(self.window.unwrap_or_else(|| default_window(mode, size_bytes))),
        }
    }
}

/// Requests in flight for streaming modes: wide for small messages, narrow for large ones
/// (4 x 4 MiB in flight already fills loopback pipes).
pub fn default_window(mode: Mode, size_bytes: usize) -> usize {
    match (mode, size_bytes) {
        (Mode::Lat, _) => 1,
        (Mode::Bw, s) if s < 256 << 10 => 32,
        (Mode::Rate, s) if s < 256 << 10 => 64,
        (_, s) if s <= 1 << 20 => 8,
        _ => 4,
    }
}

/// Pattern byte `i` of every payload, so echoes can be checked.
pub fn pattern_byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8)) as u8
}

pub fn fill_pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(i);
    }
}

pub fn check_pattern(buf: &[u8]) -> Result<(), String> {
    match buf.iter().enumerate().find(|(i, b)| **b != pattern_byte(*i)) {
        None => Ok(()),
        Some((i, b)) => Err(format!("echo corrupted at byte {i}: {b:#04x} != {:#04x}", pattern_byte(i))),
    }
}

/// Measures one point of `mode`. Errors become a failed point.
pub fn measure(party: &mut dyn Party, mode: Mode, size_bytes: usize, plan: &Plan) -> Point {
    let result = party.prepare(size_bytes).and_then(|()| match mode {
        Mode::Lat => measure_lat(party, size_bytes, plan),
        Mode::Bw | Mode::Rate => measure_stream(party, size_bytes, plan.window_for(mode, size_bytes).unwrap(), plan),
    });
    result.unwrap_or_else(|e| Point::failed(size_bytes, e))
}

fn measure_lat(party: &mut dyn Party, size_bytes: usize, plan: &Plan) -> Result<Point, String> {
    // Warm-up: the first echo is checked byte for byte; the rest estimate the cost.
    party.echo(true)?;
    let warm_start = Instant::now();
    let warm_budget = plan.budget / 10;
    // At least a few, even with `--warmup 0`: they calibrate the iteration count.
    let warm_max = plan.warmup.unwrap_or(WARMUP_ITERATIONS_MAX).max(WARMUP_ITERATIONS_MIN);
    let mut warm_count = 0u64;
    while warm_count < warm_max && warm_start.elapsed() < POINT_TIME_MAX {
        let budget_spent = plan.warmup.is_none() && warm_start.elapsed() >= warm_budget;
        if budget_spent && warm_count >= WARMUP_ITERATIONS_MIN {
            break;
        }
        party.echo(false)?;
        warm_count += 1;
    }
    let per_op = warm_start.elapsed().as_secs_f64() / warm_count.max(1) as f64;
    let iterations = plan.iterations.unwrap_or_else(|| {
        ((plan.budget.as_secs_f64() / per_op.max(1e-9)) as u64).clamp(LAT_ITERATIONS_MIN, LAT_ITERATIONS_MAX)
    });
    let mut samples_ns: Vec<u64> = Vec::with_capacity(iterations as usize);
    let time_max = plan.time_max();
    let start = Instant::now();
    let mut before = start;
    for _ in 0..iterations {
        party.echo(false)?;
        let after = Instant::now();
        samples_ns.push(after.duration_since(before).as_nanos() as u64);
        before = after;
        if after.duration_since(start) > time_max && samples_ns.len() as u64 >= LAT_ITERATIONS_MIN {
            break;
        }
    }
    // A final checked echo: the data still survives after the timed loop.
    party.echo(true)?;
    let summary = summarize_ns(&mut samples_ns).ok_or("no samples")?;
    Ok(Point {
        size_bytes,
        iterations: summary.count as u64,
        lat_us_min: Some(summary.us_min),
        lat_us_p50: Some(summary.us_p50),
        lat_us_p99: Some(summary.us_p99),
        ..Point::default()
    })
}

fn measure_stream(party: &mut dyn Party, size_bytes: usize, window: usize, plan: &Plan) -> Result<Point, String> {
    assert!(window > 0);
    party.echo(true)?;
    let warm_start = Instant::now();
    let warm_budget = plan.budget / 10;
    let warm_batch = (window as u64 * 2).max(WARMUP_ITERATIONS_MIN);
    let mut warm_count = 0u64;
    loop {
        let batch = match plan.warmup {
            Some(w) => w.saturating_sub(warm_count).min(warm_batch),
            None => warm_batch,
        };
        // The first batch runs even with `--warmup 0`: it calibrates the message count.
        let batch = if warm_count == 0 { batch.max(window as u64) } else { batch };
        if batch == 0 {
            break;
        }
        party.stream(window, batch)?;
        warm_count += batch;
        if plan.warmup.is_none() && (warm_start.elapsed() >= warm_budget || warm_count >= WARMUP_ITERATIONS_MAX * 16) {
            break;
        }
        if warm_start.elapsed() > POINT_TIME_MAX {
            break;
        }
    }
    let per_msg = warm_start.elapsed().as_secs_f64() / warm_count.max(1) as f64;
    let trials = plan.trials.max(1) as u64;
    let total = plan.iterations.unwrap_or_else(|| {
        ((plan.budget.as_secs_f64() / per_msg.max(1e-9)) as u64).clamp(window as u64 * trials, STREAM_MESSAGES_MAX)
    });
    let per_trial = (total / trials).max(1);
    let mut rates = Vec::with_capacity(trials as usize);
    let time_max = plan.time_max();
    let start = Instant::now();
    for _ in 0..trials {
        let t0 = Instant::now();
        party.stream(window, per_trial)?;
        let seconds = t0.elapsed().as_secs_f64().max(1e-9);
        rates.push(per_trial as f64 / seconds);
        if start.elapsed() > time_max {
            break;
        }
    }
    party.echo(true)?;
    let msg_rate = median(&rates).ok_or("no trials")?;
    Ok(Point {
        size_bytes,
        iterations: per_trial * rates.len() as u64,
        bw_mb_s: Some(size_bytes as f64 * msg_rate / MB_BYTES),
        msg_rate: Some(msg_rate),
        window: Some(window),
        trial_msg_rates: rates,
        ..Point::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory party: echoes by copying, streams by counting.
    struct Loopback {
        payload: Vec<u8>,
        echoed: Vec<u8>,
        streamed: u64,
    }

    impl Party for Loopback {
        fn prepare(&mut self, size_bytes: usize) -> Result<(), String> {
            self.payload = vec![0; size_bytes];
            fill_pattern(&mut self.payload);
            Ok(())
        }
        fn echo(&mut self, verify: bool) -> Result<(), String> {
            self.echoed.clear();
            self.echoed.extend_from_slice(&self.payload);
            if verify {
                check_pattern(&self.echoed)?;
            }
            Ok(())
        }
        fn stream(&mut self, window: usize, count: u64) -> Result<(), String> {
            assert!(window > 0);
            self.streamed += count;
            Ok(())
        }
    }

    fn plan() -> Plan {
        Plan { budget: Duration::from_millis(20), iterations: Some(500), warmup: Some(10), window: None, trials: 5 }
    }

    #[test]
    fn lat_point_has_percentiles() {
        let mut party = Loopback { payload: vec![], echoed: vec![], streamed: 0 };
        let p = measure(&mut party, Mode::Lat, 64, &plan());
        assert_eq!(p.error, None);
        assert_eq!(p.iterations, 500);
        assert!(p.lat_us_min.unwrap() <= p.lat_us_p50.unwrap());
        assert!(p.lat_us_p50.unwrap() <= p.lat_us_p99.unwrap());
        assert_eq!(p.bw_mb_s, None);
    }

    #[test]
    fn stream_point_has_rate_and_window() {
        let mut party = Loopback { payload: vec![], echoed: vec![], streamed: 0 };
        let p = measure(&mut party, Mode::Bw, 4096, &plan());
        assert_eq!(p.error, None);
        assert_eq!(p.window, Some(32));
        assert_eq!(p.iterations, 500);
        assert_eq!(party.streamed, 500 + 32);
        let rate = p.msg_rate.unwrap();
        let bw = p.bw_mb_s.unwrap();
        assert!((bw - rate * 4096.0 / 1048576.0).abs() <= bw * 1e-9);
    }

    #[test]
    fn budget_bounds_iterations() {
        let mut party = Loopback { payload: vec![], echoed: vec![], streamed: 0 };
        let p = measure(&mut party, Mode::Lat, 8, &Plan { iterations: None, warmup: None, ..plan() });
        assert!((LAT_ITERATIONS_MIN..=LAT_ITERATIONS_MAX).contains(&p.iterations), "{}", p.iterations);
    }

    #[test]
    fn patterns_detect_corruption() {
        let mut buf = vec![0u8; 1000];
        fill_pattern(&mut buf);
        assert!(check_pattern(&buf).is_ok());
        buf[777] ^= 1;
        assert!(check_pattern(&buf).unwrap_err().contains("777"));
    }

    #[test]
    fn windows() {
        assert_eq!(default_window(Mode::Bw, 8), 32);
        assert_eq!(default_window(Mode::Rate, 8), 64);
        assert_eq!(default_window(Mode::Bw, 1 << 20), 8);
        assert_eq!(default_window(Mode::Bw, 4 << 20), 4);
        let p = Plan { window: Some(3), ..plan() };
        assert_eq!(p.window_for(Mode::Rate, 8), Some(3));
        assert_eq!(p.window_for(Mode::Lat, 8), None);
    }
}
