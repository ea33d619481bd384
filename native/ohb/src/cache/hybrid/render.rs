//! What a hybrid run prints and writes: the tables, the target checks and the JSON.

use serde_json::{json, Value};

use crate::args::format_size;
use crate::cache::hybrid::{
    HybridResult, HybridRun, FIT_SLOWDOWN_MAX, FIT_SPILL_FACTOR, HYBRID_SUCCESS_PERCENT_TARGET, NB_SPEEDUP_TARGET,
    PENALTY_SPEEDUP_TARGET, SPILL_FACTOR_DEFAULT,
};
use crate::cache::hybrid::fit::FitSide;
use crate::cache::hybrid::keys::{item_count, ssd_size_mb, Scan};
use crate::cache::hybrid::nb::{NbGetMode, NbHybridMeasure};
use crate::cache::hybrid::servers::{stat_of, HybridServer, Unmeasured};
use crate::machine::Machine;
use crate::table::{format_rate, format_ratio, format_us, Check};

fn mib_text(bytes: f64) -> String {
    let mib = bytes / (1u64 << 20) as f64;
    if mib >= 10.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// A latency ratio near 1 with three decimals: the fit target's 5 % needs them.
pub fn format_slowdown(x: f64) -> String {
    format!("{x:.3}x")
}

/// "1.5" for 1.5, "0.5", "2" for 2.0.
fn factor_text(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The target checks of a result (see the module's constants). `pass` is `None` when the run
/// did not measure what the target needs.
pub fn hybrid_checks(result: &HybridResult, run: &HybridRun) -> Vec<Check> {
    let mut checks = Vec::new();
    // `mem nb --hybrid` has no spill rows: only the parts that ran have targets to show.
    if !result.spill.is_empty() {
        checks.extend(spill_checks(result, run));
    }
    fit_and_nb_checks(result, &mut checks);
    checks
}

fn spill_checks(result: &HybridResult, run: &HybridRun) -> Vec<Check> {
    let conditions = if run.scan == Scan::Uniform && (run.spill_factor - SPILL_FACTOR_DEFAULT).abs() < 1e-9 {
        String::new()
    } else {
        format!(" [target defined at spill 1.5, uniform; this run: spill {}, {}]", factor_text(run.spill_factor), run.scan.name())
    };
    let hybrid = result.spill_measure(HybridServer::CacheHybrid);
    let ram = result.spill_measure(HybridServer::CacheRam);
    let ext = result.spill_measure(HybridServer::MemcachedExt);
    let spill_unmeasured = |server: HybridServer| -> String {
        match result.spill.iter().find(|r| r.server == server).map(|r| &r.outcome) {
            Some(Err(u)) => u.short().into(),
            Some(Ok(_)) => "measured".into(),
            None => "not in this run".into(),
        }
    };
    let mut checks = Vec::new();
    let ext_text = match ext {
        Some(m) => format!("memcached-ext {:.1} %", m.success_percent()),
        None => "memcached-ext not measured".into(),
    };
    checks.push(match hybrid {
        Some(h) => {
            let rate = h.success_percent();
            Check {
                name: format!("spill {} {}: cache-hybrid success rate {HYBRID_SUCCESS_PERCENT_TARGET:.0} %{conditions}", factor_text(run.spill_factor), run.scan.name()),
                ratio: Some(rate / 100.0),
                pass: Some(rate >= HYBRID_SUCCESS_PERCENT_TARGET),
                detail: format!("cache-hybrid {rate:.2} % ({} of {} gets hit; {ext_text})", h.hits, h.gets),
            }
        }
        None => Check {
            name: format!("spill {} {}: cache-hybrid success rate {HYBRID_SUCCESS_PERCENT_TARGET:.0} %{conditions}", factor_text(run.spill_factor), run.scan.name()),
            ratio: None,
            pass: None,
            detail: format!("cache-hybrid {} ({ext_text})", spill_unmeasured(HybridServer::CacheHybrid)),
        },
    });
    let penalty_name = format!(
        "average latency with a {} ms miss penalty: cache-hybrid >= {}x lower than cache-ram{conditions}",
        factor_text(run.miss_penalty_ms),
        factor_text(PENALTY_SPEEDUP_TARGET)
    );
    checks.push(match (hybrid, ram) {
        (Some(h), Some(r)) => {
            let speedup = r.us_avg_with_penalty / h.us_avg_with_penalty;
            Check {
                name: penalty_name,
                ratio: Some(speedup),
                pass: Some(speedup >= PENALTY_SPEEDUP_TARGET),
                detail: format!(
                    "cache-ram {} us vs cache-hybrid {} us: {} lower",
                    format_us(r.us_avg_with_penalty),
                    format_us(h.us_avg_with_penalty),
                    format_ratio(speedup)
                ),
            }
        }
        _ => Check {
            name: penalty_name,
            ratio: None,
            pass: None,
            detail: format!(
                "cache-hybrid {}; cache-ram {}",
                spill_unmeasured(HybridServer::CacheHybrid),
                spill_unmeasured(HybridServer::CacheRam)
            ),
        },
    });
    checks
}

fn fit_and_nb_checks(result: &HybridResult, checks: &mut Vec<Check>) {
    let fit_name = format!(
        "fit in memory (spill {}): cache-hybrid get latency <= {}x cache-ram (p50 and avg, every transport)",
        factor_text(FIT_SPILL_FACTOR),
        factor_text(FIT_SLOWDOWN_MAX)
    );
    match &result.fit {
        Some(Ok(fit)) => {
            let mut worst = 0.0f64;
            let mut parts = Vec::new();
            let mut noise_worst = 0.0f64;
            for t in &fit.transports {
                let (p50, avg) = t.slowdowns();
                let (noise_p50, noise_avg) = t.noise();
                worst = worst.max(p50).max(avg);
                noise_worst = noise_worst.max((noise_p50 - 1.0).abs()).max((noise_avg - 1.0).abs());
                parts.push(format!("{} p50 {} avg {}", t.transport, format_slowdown(p50), format_slowdown(avg)));
            }
            checks.push(Check {
                name: fit_name,
                ratio: Some(worst),
                pass: Some(worst <= FIT_SLOWDOWN_MAX),
                detail: format!(
                    "hybrid/ram: {} (worst {}; control/ram within {:.1} % of 1{})",
                    parts.join(", "),
                    format_slowdown(worst),
                    noise_worst * 100.0,
                    if worst > FIT_SLOWDOWN_MAX && worst - 1.0 <= noise_worst {
                        ": the A/A control moved as much, so this miss is within this run's noise"
                    } else {
                        ""
                    }
                ),
            });
        }
        Some(Err(u)) => checks.push(Check { name: fit_name, ratio: None, pass: None, detail: format!("cache-hybrid {}", u.short()) }),
        None => {}
    }
    let nb_name = format!("non-blocking gets on cache-hybrid over the fabric >= {}x blocking", factor_text(NB_SPEEDUP_TARGET));
    match &result.nb {
        Some(Ok(nb)) => {
            let blocking = nb.rate(NbGetMode::Blocking).unwrap_or(0.0);
            for mode in [NbGetMode::Iget, NbGetMode::Bget] {
                let rate = nb.rate(mode).unwrap_or(0.0);
                let ratio = rate / blocking;
                checks.push(Check {
                    name: format!("{nb_name} ({})", mode.name()),
                    ratio: Some(ratio),
                    pass: Some(ratio >= NB_SPEEDUP_TARGET),
                    detail: format!(
                        "{} {} ops/s vs blocking {} ops/s: {}",
                        mode.name(),
                        format_rate(rate),
                        format_rate(blocking),
                        format_ratio(ratio)
                    ),
                });
            }
        }
        Some(Err(u)) => checks.push(Check { name: nb_name, ratio: None, pass: None, detail: format!("cache-hybrid {}", u.short()) }),
        None => {}
    }
}

fn check_lines(checks: &[Check]) -> String {
    let mut out = String::from("targets:\n");
    for c in checks {
        let verdict = match c.pass {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        out += &format!("  {}: {} -> {verdict}\n", c.name, c.detail);
    }
    out
}

fn stats_block(name: &str, stats: &[(String, String)]) -> String {
    if stats.is_empty() {
        return format!("  {name}: (no matching stats)\n");
    }
    let mut out = String::new();
    let mut line = format!("  {name}:");
    for (k, v) in stats {
        let item = format!(" {k}={v}");
        if line.len() + item.len() > 110 {
            out += &line;
            out += "\n";
            line = format!("  {:width$} ", "", width = name.len());
        }
        line += &item;
    }
    out += &line;
    out += "\n";
    out
}

/// The spill table, the fit-in-memory table, the non-blocking table, server stats and targets.
pub fn render_hybrid(result: &HybridResult, run: &HybridRun, machine: &Machine) -> String {
    let mut out = String::new();
    let items = run.items();
    out += "# ohb mem hybrid: a data set larger than memory (after OHB's ohb_memhybrid)\n";
    out += &format!("# machine: {}\n", machine.describe());
    if !result.spill.is_empty() {
        out += &format!(
            "# data: {items} items of {} = {} x -m {} MiB ({}), every item set once in key order, then {} gets\n",
            format_size(run.value_bytes),
            factor_text(run.spill_factor),
            run.max_memory_mb,
            mib_text(items as f64 * run.value_bytes as f64),
            run.gets
        );
        out += &format!(
            "# keys: {} (seed {}), {} client thread(s), one get at a time over TCP (binary protocol); every server started fresh, -t {}\n",
            match run.scan {
                Scan::Uniform => "uniform".to_string(),
                Scan::Normal => "normal around the middle, sd = items / 6, clamped".to_string(),
            },
            run.seed,
            run.clients,
            run.settings.threads
        );
        out += &format!(
            concat!(
                "# a miss costs {} ms (fetching the item from the backing database): the penalty is ADDED to that get's\n",
                "#   measured latency, not slept; misses are not set back. p50/p99 are of the raw get latency.\n"
            ),
            factor_text(run.miss_penalty_ms)
        );
        out += "# servers:\n";
        for &s in &run.servers {
            out += &format!("#   {:<14} {}\n", s.name(), s.describe_flags(run.max_memory_mb, run.ssd_mb()));
        }
        out += &format!(
            "\n{:<14} | {:>9} | {:>8} | {:>8} | {:>15} | {:>8} | {:>8} | {:>9} | {:>9}\n",
            "server", "success %", "hits", "misses", "avg us +penalty", "avg raw", "p50 us", "p99 us", "evictions"
        );
        for row in &result.spill {
            match &row.outcome {
                Ok(m) => {
                    out += &format!(
                        "{:<14} | {:>9.2} | {:>8} | {:>8} | {:>15} | {:>8} | {:>8} | {:>9} | {:>9}\n",
                        row.server.name(),
                        m.success_percent(),
                        m.hits,
                        m.misses,
                        format_us(m.us_avg_with_penalty),
                        format_us(m.us_avg_raw),
                        format_us(m.us_p50),
                        format_us(m.us_p99),
                        stat_of(&m.stats, "evictions").unwrap_or("-")
                    );
                }
                Err(u) => out += &format!("{:<14} | {}\n", row.server.name(), u.text()),
            }
        }
        let refused: Vec<String> = result
            .spill
            .iter()
            .filter_map(|r| r.outcome.as_ref().ok().filter(|m| m.sets_refused > 0).map(|m| format!("{} {}", r.server.name(), m.sets_refused)))
            .collect();
        if !refused.is_empty() {
            out += &format!("sets refused by the server while loading: {}\n", refused.join(", "));
        }
        let avg = |s: HybridServer| result.spill_measure(s).map(|m| m.us_avg_with_penalty);
        let mut ratios = Vec::new();
        for (a, b) in [
            (HybridServer::CacheRam, HybridServer::CacheHybrid),
            (HybridServer::MemcachedExt, HybridServer::CacheHybrid),
            (HybridServer::Memcached, HybridServer::MemcachedExt),
            (HybridServer::Memcached, HybridServer::CacheRam),
        ] {
            if let (Some(x), Some(y)) = (avg(a), avg(b)) {
                ratios.push(format!("{} / {} {}", a.name(), b.name(), format_ratio(x / y)));
            }
        }
        if !ratios.is_empty() {
            out += &format!("avg latency with penalty, ratio (> 1: the second is faster): {}\n", ratios.join("; "));
        }
        out += "server stats after the gets:\n";
        for row in &result.spill {
            if let Ok(m) = &row.outcome {
                out += &stats_block(row.server.name(), &m.stats);
            }
        }
    }
    if let Some(fit) = &result.fit {
        let fit_run = run.fit.as_ref().expect("fit result without a fit run");
        out += &format!(
            concat!(
                "\n# fit in memory: {} items of {} = {} x -m {} MiB; cache-ram vs cache-hybrid (--ssd-size {}) and a second\n",
                "#   cache-ram as control (control/ram shows the noise alone), all three running; {} rounds of {} (tcp) /\n",
                "#   {} (fabric) uniform gets from each server in turn (order rotating per round), fresh connections per\n",
                "#   round; median of the rounds' p50 and avg (us)\n"
            ),
            item_count(FIT_SPILL_FACTOR, run.max_memory_mb, run.value_bytes),
            format_size(run.value_bytes),
            factor_text(FIT_SPILL_FACTOR),
            run.max_memory_mb,
            ssd_size_mb(FIT_SPILL_FACTOR, run.max_memory_mb),
            fit_run.rounds,
            fit_run.gets_tcp,
            fit_run.gets_fabric
        );
        match fit {
            Ok(f) => {
                out += &format!(
                    "{:>9} | {:>14} | {:>14} | {:>15} | {:>18} | {:>19} | {:>7}\n",
                    "transport", "ram p50/avg", "hybrid p50/avg", "control p50/avg", "hybrid/ram p50/avg", "control/ram p50/avg", "misses"
                );
                for t in &f.transports {
                    let (p50, avg) = t.slowdowns();
                    let (noise_p50, noise_avg) = t.noise();
                    out += &format!(
                        "{:>9} | {:>14} | {:>14} | {:>15} | {:>18} | {:>19} | {:>7}\n",
                        t.transport,
                        format!("{}/{}", format_us(t.ram.us_p50()), format_us(t.ram.us_avg())),
                        format!("{}/{}", format_us(t.hybrid.us_p50()), format_us(t.hybrid.us_avg())),
                        format!("{}/{}", format_us(t.control.us_p50()), format_us(t.control.us_avg())),
                        format!("{} / {}", format_slowdown(p50), format_slowdown(avg)),
                        format!("{} / {}", format_slowdown(noise_p50), format_slowdown(noise_avg)),
                        t.ram.misses + t.hybrid.misses + t.control.misses
                    );
                }
                out += "ratio: latency / cache-ram's latency (< 1: faster than cache-ram)\n";
            }
            Err(u) => out += &format!("{}\n", u.text()),
        }
    }
    if let Some(nb) = &result.nb {
        out += &render_nb_section(nb, run);
    }
    out += "\n";
    out += &check_lines(&hybrid_checks(result, run));
    out
}

fn render_nb_section(nb: &Result<NbHybridMeasure, Unmeasured>, run: &HybridRun) -> String {
    let nb_run = run.nb.as_ref().expect("nb result without an nb run");
    let mut out = format!(
        concat!(
            "\n# nb on cache-hybrid: {} items of {} = {} x -m {} MiB (--ssd-size {}), over the fabric; {} uniform gets\n",
            "#   per pass, blocking get one at a time vs iget/bget in batches of {} (--req-thresh) completed by {};\n",
            "#   median of {} trials; every pass on a fresh server loaded the same way, the same key sequence for\n",
            "#   every mode within a trial; values checked in every mode\n"
        ),
        run.items(),
        format_size(run.value_bytes),
        factor_text(run.spill_factor),
        run.max_memory_mb,
        run.ssd_mb(),
        nb_run.ops,
        nb_run.req_thresh,
        nb_run.progress_type.name(),
        nb_run.trials
    );
    match nb {
        Ok(m) => {
            let blocking = m.rate(NbGetMode::Blocking).unwrap_or(0.0);
            out += &format!("{:>15} | {:>9} | {:>9} | {:>11} | {:>8} | {:>8}\n", "mode", "ops/s", "us/op", "x blocking", "hits", "misses");
            for r in &m.modes {
                let rate = r.ops_per_s();
                out += &format!(
                    "{:>15} | {:>9} | {:>9} | {:>11} | {:>8} | {:>8}\n",
                    r.mode.name(),
                    format_rate(rate),
                    format_us(1e6 / rate),
                    format_ratio(rate / blocking),
                    r.hits,
                    r.misses
                );
            }
            out += "server stats after the last pass:\n";
            out += &stats_block("cache-hybrid", &m.stats);
        }
        Err(u) => out += &format!("{}\n", u.text()),
    }
    out
}

/// `ohb mem nb --hybrid`: the non-blocking section and its target only.
pub fn render_nb_hybrid(result: &HybridResult, run: &HybridRun, machine: &Machine) -> String {
    let mut out = format!("# ohb mem nb --hybrid: non-blocking gets on the hybrid cache\n# machine: {}\n", machine.describe());
    if let Some(nb) = &result.nb {
        out += &render_nb_section(nb, run);
    }
    out += "\n";
    out += &check_lines(&hybrid_checks(result, run));
    out
}

fn unmeasured_json(u: &Unmeasured) -> Value {
    match u {
        Unmeasured::NotAvailable(why) => json!({"not_available": why}),
        Unmeasured::Failed(why) => json!({"error": why}),
    }
}

fn fit_side_json(side: &FitSide) -> Value {
    json!({
        "us_p50": side.us_p50(), "us_avg": side.us_avg(), "us_p50_rounds": side.us_p50_rounds,
        "us_avg_rounds": side.us_avg_rounds, "hits": side.hits, "misses": side.misses,
    })
}

fn stats_json(stats: &[(String, String)]) -> Value {
    Value::Object(stats.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

pub fn hybrid_json(result: &HybridResult, run: &HybridRun, machine: &Machine) -> Value {
    let spill: Vec<Value> = result
        .spill
        .iter()
        .map(|row| {
            let mut v = match &row.outcome {
                Ok(m) => json!({
                    "items": m.items, "sets_refused": m.sets_refused, "load_seconds": m.load_seconds,
                    "gets": m.gets, "hits": m.hits, "misses": m.misses, "success_percent": m.success_percent(),
                    "get_seconds": m.get_seconds, "us_p50": m.us_p50, "us_p99": m.us_p99,
                    "us_avg_raw": m.us_avg_raw, "us_avg_with_penalty": m.us_avg_with_penalty,
                    "stats": stats_json(&m.stats),
                }),
                Err(u) => unmeasured_json(u),
            };
            v["server"] = json!(row.server.name());
            v["flags"] = json!(row.server.describe_flags(run.max_memory_mb, run.ssd_mb()));
            v
        })
        .collect();
    let fit = result.fit.as_ref().map(|f| match f {
        Ok(m) => json!({
            "items": m.items, "ssd_mb": m.ssd_mb,
            "rounds": run.fit.as_ref().map(|f| f.rounds),
            "transports": m.transports.iter().map(|t| json!({
                "transport": t.transport,
                "ram": fit_side_json(&t.ram),
                "hybrid": fit_side_json(&t.hybrid),
                "control": fit_side_json(&t.control),
                "slowdown_p50": t.slowdowns().0, "slowdown_avg": t.slowdowns().1,
                "noise_p50": t.noise().0, "noise_avg": t.noise().1,
            })).collect::<Vec<_>>(),
        }),
        Err(u) => unmeasured_json(u),
    });
    let nb = result.nb.as_ref().map(|n| match n {
        Ok(m) => json!({
            "items": m.items, "ssd_mb": m.ssd_mb,
            "req_thresh": run.nb.as_ref().map(|n| n.req_thresh),
            "ops": run.nb.as_ref().map(|n| n.ops),
            "progress": run.nb.as_ref().map(|n| n.progress_type.name()),
            "modes": m.modes.iter().map(|r| json!({
                "mode": r.mode.key(), "ops_per_s": r.ops_per_s(), "ops_per_s_trials": r.ops_per_s_trials,
                "hits": r.hits, "misses": r.misses,
            })).collect::<Vec<_>>(),
            "stats": stats_json(&m.stats),
        }),
        Err(u) => unmeasured_json(u),
    });
    json!({
        "test": "mem hybrid",
        "machine": machine.to_json(),
        "scan": run.scan.name(),
        "max_memory_mb": run.max_memory_mb,
        "value_bytes": run.value_bytes,
        "miss_penalty_ms": run.miss_penalty_ms,
        "miss_penalty_applied": "added to the measured latency of each missed get, not slept",
        "spill_factor": run.spill_factor,
        "items": run.items(),
        "ssd_mb": run.ssd_mb(),
        "gets": run.gets,
        "clients": run.clients,
        "seed": run.seed,
        "server_threads": run.settings.threads,
        "spill": spill,
        "fit": fit,
        "nb": nb,
        "targets": hybrid_checks(result, run).iter().map(Check::to_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use crate::cache::hybrid::{FitMeasure, SpillMeasure, SpillRow};
    use crate::cache::hybrid::fit::FitTransport;
    use crate::cache::hybrid::nb::NbModeResult;
    use crate::cache::hybrid::tests::test_run;
    use super::*;


    fn measure(hits: usize, misses: usize, avg_penalty: f64) -> SpillMeasure {
        SpillMeasure {
            items: 24576,
            sets_refused: 0,
            load_seconds: 1.0,
            gets: hits + misses,
            hits,
            misses,
            get_seconds: 1.0,
            us_p50: 50.0,
            us_p99: 90.0,
            us_avg_raw: 55.0,
            us_avg_with_penalty: avg_penalty,
            stats: vec![("evictions".into(), "123".into())],
        }
    }

    fn side(p50: f64, avg: f64) -> FitSide {
        FitSide { us_p50_rounds: vec![p50, p50 * 3.0, p50 * 0.9], us_avg_rounds: vec![avg], hits: 10, misses: 0 }
    }

    #[test]
    fn checks_and_report() {
        let run = test_run();
        assert!(run.validate().is_ok());
        assert_eq!(run.items(), 24576);
        assert_eq!(run.ssd_mb(), 192);
        let result = HybridResult {
            spill: vec![
                SpillRow { server: HybridServer::CacheRam, outcome: Ok(measure(600, 400, 655.0)) },
                SpillRow { server: HybridServer::CacheHybrid, outcome: Ok(measure(1000, 0, 60.0)) },
                SpillRow { server: HybridServer::Memcached, outcome: Err(Unmeasured::Failed("boom".into())) },
                SpillRow { server: HybridServer::MemcachedExt, outcome: Ok(measure(300, 700, 1105.0)) },
            ],
            fit: Some(Ok(FitMeasure {
                items: 8192,
                ssd_mb: 64,
                transports: vec![
                    FitTransport {
                        transport: "tcp",
                        ram: side(50.0, 52.0),
                        hybrid: side(51.0, 53.0),
                        control: side(50.5, 52.0),
                    },
                    FitTransport {
                        transport: "fabric",
                        ram: side(2.0, 2.0),
                        hybrid: side(2.2, 2.0),
                        control: side(1.96, 2.0),
                    },
                ],
            })),
            nb: Some(Ok(NbHybridMeasure {
                items: 24576,
                ssd_mb: 192,
                modes: vec![
                    NbModeResult { mode: NbGetMode::Blocking, ops_per_s_trials: vec![100e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Iget, ops_per_s_trials: vec![300e3, 200e3, 260e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Bget, ops_per_s_trials: vec![240e3], hits: 1, misses: 0 },
                ],
                stats: vec![],
            })),
        };
        assert_eq!(result.failures().len(), 1, "{:?}", result.failures());
        let checks = hybrid_checks(&result, &run);
        let pass: Vec<Option<bool>> = checks.iter().map(|c| c.pass).collect();
        // success 100 % met; 655/60 = 10.9x met; fit worst 1.1x (fabric p50) missed; iget 2.6x met, bget 2.4x missed.
        assert_eq!(pass, [Some(true), Some(true), Some(false), Some(true), Some(false)]);
        assert!(checks[0].detail.contains("memcached-ext 30.0 %"), "{}", checks[0].detail);
        assert!((checks[2].ratio.unwrap() - 1.1).abs() < 1e-9);
        let text = render_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("memcached      | FAILED: boom"), "{text}");
        assert!(text.contains("ADDED to that get's"), "{text}");
        assert!(text.contains("cache-hybrid   |    100.00 |     1000 |        0 |            60.0"), "{text}");
        assert!(text.contains("evictions=123"), "{text}");
        assert!(text.contains("cache-ram / cache-hybrid 10.92x"), "{text}");
        assert!(
            text.contains("      tcp |      50.0/52.0 |      51.0/53.0 |       50.5/52.0 |    1.020x / 1.019x |     1.010x / 1.000x |       0"),
            "{text}"
        );
        assert!(
            checks[2].detail.contains("fabric p50 1.100x avg 1.000x (worst 1.100x; control/ram within 2.0 % of 1)"),
            "{}",
            checks[2].detail
        );
        // A miss no larger than the A/A control's deviation says so (still a miss).
        let mut noisy = result.clone();
        if let Some(Ok(fit)) = &mut noisy.fit {
            fit.transports[1].control = side(2.4, 2.0);
        }
        let check = &hybrid_checks(&noisy, &run)[2];
        assert_eq!(check.pass, Some(false));
        assert!(check.detail.contains("within 20.0 % of 1: the A/A control moved as much"), "{}", check.detail);
        assert!(text.contains("-> MISSED"), "{text}");
        let json = hybrid_json(&result, &run, &Machine::default());
        assert_eq!(json["spill"][2]["error"], "boom");
        assert_eq!(json["spill"][1]["hits"], 1000);
        assert_eq!(json["nb"]["modes"][1]["ops_per_s"], 260e3);
        assert_eq!(json["targets"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn not_available_is_no_failure_and_leaves_targets_unmeasured() {
        let mut run = test_run();
        run.scan = Scan::Normal;
        let result = HybridResult {
            spill: vec![
                SpillRow { server: HybridServer::CacheRam, outcome: Ok(measure(600, 400, 655.0)) },
                SpillRow { server: HybridServer::CacheHybrid, outcome: Err(Unmeasured::NotAvailable("no flags".into())) },
            ],
            fit: Some(Err(Unmeasured::NotAvailable("no flags".into()))),
            nb: None,
        };
        assert!(result.failures().is_empty(), "{:?}", result.failures());
        let checks = hybrid_checks(&result, &run);
        assert_eq!(checks.len(), 3);
        assert!(checks.iter().all(|c| c.pass.is_none()));
        assert!(checks[0].name.contains("this run: spill 1.5, normal"), "{}", checks[0].name);
        let text = render_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("cache-hybrid   | not available: no flags"), "{text}");
        assert!(text.contains("-> not measured"), "{text}");
    }

    #[test]
    fn nb_only_run_shows_only_the_nb_targets() {
        let mut run = test_run();
        run.servers.clear();
        run.fit = None;
        let result = HybridResult {
            spill: Vec::new(),
            fit: None,
            nb: Some(Ok(NbHybridMeasure {
                items: 24576,
                ssd_mb: 192,
                modes: vec![
                    NbModeResult { mode: NbGetMode::Blocking, ops_per_s_trials: vec![10e3, 20e3, 30e3], hits: 3, misses: 0 },
                    NbModeResult { mode: NbGetMode::Iget, ops_per_s_trials: vec![50e3], hits: 1, misses: 0 },
                    NbModeResult { mode: NbGetMode::Bget, ops_per_s_trials: vec![49e3], hits: 1, misses: 0 },
                ],
                stats: vec![("ssd_reads".into(), "7".into())],
            })),
        };
        let checks = hybrid_checks(&result, &run);
        assert_eq!(checks.len(), 2, "{checks:?}");
        // Median blocking 20k: iget 2.5x exactly meets the target, bget 2.45x misses it.
        assert_eq!(checks.iter().map(|c| c.pass).collect::<Vec<_>>(), [Some(true), Some(false)]);
        let text = render_nb_hybrid(&result, &run, &Machine::default());
        assert!(text.contains("           iget |     50.0k |      20.0 |       2.50x |        1 |        0"), "{text}");
        assert!(text.contains("ssd_reads=7"), "{text}");
        assert!(!text.contains("success rate"), "{text}");
        let failed = HybridResult { nb: Some(Err(Unmeasured::Failed("x".into()))), ..result };
        assert_eq!(failed.failures().len(), 1, "{:?}", failed.failures());
        assert_eq!(hybrid_checks(&failed, &run)[0].detail, "cache-hybrid FAILED");
    }
}
