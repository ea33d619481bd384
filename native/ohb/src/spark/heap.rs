//! The executors' Java heap as their garbage collector logged it (`-Xlog:gc`).
//!
//! The executor memory target is judged on heap plus the fabric's off-heap memory, not on the
//! resident set: a JVM's RSS is mostly heap pages the collector chose to touch (young regions are
//! sized by pause-time goals, not by what the application keeps), so two runs of the same
//! application differ by hundreds of MiB of RSS. What a run keeps is the heap after each
//! collection; its peak is compared between configurations.

use std::path::{Path, PathBuf};

/// Where each executor writes its GC log, relative to its working directory (the worker's
/// `work/<app>/<executor>/`, beside its `stderr`).
pub const GC_LOG_FILE: &str = "gc.log";

/// The JVM option that makes an executor write it (`spark.executor.defaultJavaOptions`, so that a
/// user's `spark.executor.extraJavaOptions` still applies).
pub fn gc_log_option() -> String {
    format!("-Xlog:gc:file={GC_LOG_FILE}")
}

/// Lines read from one log at most: a run of minutes logs thousands, not millions.
const GC_LOG_LINES_MAX: usize = 1_000_000;

/// One executor's heap over its life, from its GC log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeapPeaks {
    /// The largest heap in use after a collection: what the executor kept at its worst.
    pub after_gc_mib_max: f64,
    /// The largest heap in use when a collection started.
    pub before_gc_mib_max: f64,
    /// Collections logged with a heap transition.
    pub collections: u64,
}

/// A size of the log, `123M`, `4G`, `512K` or `17B`, in MiB.
fn size_mib(text: &str) -> Option<f64> {
    let unit_at = text.len().checked_sub(1)?;
    let number: f64 = text[..unit_at].parse().ok()?;
    let factor = match &text[unit_at..] {
        "B" => 1.0 / (1024.0 * 1024.0),
        "K" => 1.0 / 1024.0,
        "M" => 1.0,
        "G" => 1024.0,
        _ => return None,
    };
    Some(number * factor)
}

/// The heap transition of a unified-logging GC line, `... 1200M->340M(4096M) 12.345ms`: (before, after) MiB.
pub fn heap_transition(line: &str) -> Option<(f64, f64)> {
    line.split_whitespace().rev().find_map(|word| {
        let (before, rest) = word.split_once("->")?;
        let (after, committed) = rest.split_once('(')?;
        committed.strip_suffix(')').and_then(size_mib)?;
        Some((size_mib(before)?, size_mib(after)?))
    })
}

/// The peaks of one GC log's text; None when it logged no collection.
pub fn parse_gc_log(text: &str) -> Option<HeapPeaks> {
    let mut peaks = HeapPeaks { after_gc_mib_max: 0.0, before_gc_mib_max: 0.0, collections: 0 };
    for (before, after) in text.lines().take(GC_LOG_LINES_MAX).filter_map(heap_transition) {
        peaks.after_gc_mib_max = peaks.after_gc_mib_max.max(after);
        peaks.before_gc_mib_max = peaks.before_gc_mib_max.max(before);
        peaks.collections += 1;
    }
    (peaks.collections > 0).then_some(peaks)
}

/// `work/app-*/N/gc.log` under a worker's work directory, sorted.
fn gc_logs(work: &Path) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for app in std::fs::read_dir(work).into_iter().flatten().flatten() {
        for executor in std::fs::read_dir(app.path()).into_iter().flatten().flatten() {
            let log = executor.path().join(GC_LOG_FILE);
            if log.is_file() {
                logs.push(log);
            }
        }
    }
    logs.sort();
    logs
}

/// The executor that kept the most heap (largest after-GC peak) among those under `work`; None
/// when no executor logged a collection.
pub fn largest_executor_heap(work: &Path) -> Option<HeapPeaks> {
    gc_logs(work)
        .iter()
        .filter_map(|log| parse_gc_log(&std::fs::read_to_string(log).ok()?))
        .max_by(|a, b| a.after_gc_mib_max.total_cmp(&b.after_gc_mib_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as Java 17's G1 writes them with -Xlog:gc.
    const LOG: &str = "\
[0.011s][info][gc] Using G1
[1.204s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 204M->12M(4096M) 8.133ms
[9.870s][info][gc] GC(1) Pause Young (Concurrent Start) (G1 Humongous Allocation) 1536M->1210M(4096M) 40.2ms
[9.871s][info][gc] GC(2) Concurrent Mark Cycle
[9.990s][info][gc] GC(2) Pause Remark 1300M->1300M(4096M) 3.1ms
[10.2s][info][gc] GC(2) Pause Cleanup 1300M->1300M(4096M) 0.1ms
[10.3s][info][gc] GC(2) Concurrent Mark Cycle 432.1ms
[12.0s][info][gc] GC(3) Pause Young (Normal) (G1 Evacuation Pause) 2G->1024M(4G) 20.0ms
";

    #[test]
    fn transitions_are_read_from_g1_lines() {
        assert_eq!(heap_transition("[1.2s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 204M->12M(4096M) 8.1ms"), Some((204.0, 12.0)));
        assert_eq!(heap_transition("GC(7) Pause Full (System.gc()) 3G->512K(4G) 1.0ms"), Some((3072.0, 0.5)));
        assert_eq!(heap_transition("[0.011s][info][gc] Using G1"), None);
        assert_eq!(heap_transition("GC(2) Concurrent Mark Cycle 432.1ms"), None);
        for malformed in ["1M->(4M)", "1M->2M", "xM->2M(4M)", "1M->2Q(4M)", "->(", "1M->2M(4M"] {
            assert_eq!(heap_transition(malformed), None, "{malformed}");
        }
    }

    #[test]
    fn peaks_are_the_largest_before_and_after_a_collection() {
        let peaks = parse_gc_log(LOG).unwrap();
        assert_eq!(peaks.after_gc_mib_max, 1300.0);
        assert_eq!(peaks.before_gc_mib_max, 2048.0);
        assert_eq!(peaks.collections, 5);
        assert_eq!(parse_gc_log("[0.011s][info][gc] Using G1\n"), None, "no collection: nothing to judge");
        assert_eq!(parse_gc_log(""), None);
    }

    #[test]
    fn the_executor_that_kept_the_most_heap_is_chosen() {
        let work = std::env::temp_dir().join(format!("ohb-spark-gc-{}", std::process::id()));
        for (executor, after) in [("0", "700M"), ("1", "900M")] {
            let dir = work.join("app-1").join(executor);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(GC_LOG_FILE), format!("GC(0) Pause Young (Normal) 1000M->{after}(4096M) 1ms\n")).unwrap();
        }
        std::fs::create_dir_all(work.join("app-1").join("2")).unwrap(); // an executor that logged nothing
        let largest = largest_executor_heap(&work).unwrap();
        assert_eq!(largest.after_gc_mib_max, 900.0);
        assert_eq!(largest_executor_heap(&work.join("none")), None);
        std::fs::remove_dir_all(&work).unwrap();
    }
}
