//! Order statistics over latency samples. Medians and percentiles, never means.

/// The items in round `round`'s order: rotated by one place per round, so that over as many rounds
/// as items each one runs once in every position, and none always first (on a fresh page cache) or
/// always right after the same one. Medians over the rounds then compare like with like.
pub fn round_order<T: Clone>(items: &[T], round: usize) -> Vec<T> {
    let mut order = items.to_vec();
    if !order.is_empty() {
        let shift = round % order.len();
        order.rotate_left(shift);
    }
    order
}

/// Nearest-rank percentile of `sorted` (ascending): the smallest sample such that at least
/// `percent`% of the samples are at or below it. `percent` is in (0, 100].
pub fn percentile_sorted(sorted: &[u64], percent: f64) -> Option<u64> {
    assert!(percent > 0.0 && percent <= 100.0, "percent out of range: {percent}");
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "samples must be sorted");
    if sorted.is_empty() {
        return None;
    }
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    Some(sorted[index])
}

/// Median of unsorted floats (the lower middle for an even count, as nearest-rank p50).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("no NaN in measurements"));
    let rank = (sorted.len() as f64 * 0.5).ceil() as usize;
    Some(sorted[rank.max(1) - 1])
}

/// Latency summary of one point, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub count: usize,
    pub us_min: f64,
    pub us_p50: f64,
    pub us_p99: f64,
    pub us_max: f64,
}

/// Summarizes nanosecond samples (sorts them in place).
pub fn summarize_ns(samples_ns: &mut [u64]) -> Option<LatencySummary> {
    if samples_ns.is_empty() {
        return None;
    }
    samples_ns.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    let summary = LatencySummary {
        count: samples_ns.len(),
        us_min: us(samples_ns[0]),
        us_p50: us(percentile_sorted(samples_ns, 50.0)?),
        us_p99: us(percentile_sorted(samples_ns, 99.0)?),
        us_max: us(samples_ns[samples_ns.len() - 1]),
    };
    assert!(summary.us_min <= summary.us_p50 && summary.us_p50 <= summary.us_p99);
    assert!(summary.us_p99 <= summary.us_max);
    Some(summary)
}

/// Bytes in the "MB" of every MB/s figure: 2^20, as `ucx_perftest` prints.
pub const MB_BYTES: f64 = 1048576.0;

/// MB/s (MB = 2^20 bytes) for `count` messages of `size_bytes` in `seconds`.
pub fn bandwidth_mb_s(size_bytes: usize, count: u64, seconds: f64) -> f64 {
    assert!(seconds > 0.0);
    size_bytes as f64 * count as f64 / seconds / MB_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&samples, 50.0), Some(50));
        assert_eq!(percentile_sorted(&samples, 99.0), Some(99));
        assert_eq!(percentile_sorted(&samples, 100.0), Some(100));
        assert_eq!(percentile_sorted(&samples, 0.5), Some(1));
        assert_eq!(percentile_sorted(&[], 50.0), None);
        assert_eq!(percentile_sorted(&[7], 99.0), Some(7));
        // Ten samples: p99 is the largest, p50 the fifth.
        let ten: Vec<u64> = (10..20).collect();
        assert_eq!(percentile_sorted(&ten, 99.0), Some(19));
        assert_eq!(percentile_sorted(&ten, 50.0), Some(14));
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let mut samples = vec![5000, 1000, 3000, 2000, 4000];
        let s = summarize_ns(&mut samples).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!(s.us_min, 1.0);
        assert_eq!(s.us_p50, 3.0);
        assert_eq!(s.us_p99, 5.0);
        assert_eq!(s.us_max, 5.0);
        assert!(summarize_ns(&mut []).is_none());
    }

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn bandwidth_in_mebibytes() {
        assert_eq!(bandwidth_mb_s(1 << 20, 10, 1.0), 10.0);
        assert_eq!(bandwidth_mb_s(8, 131072, 0.5), 2.0);
    }

    /// `round_order` over the indices `0..count`.
    fn order(count: usize, round: usize) -> Vec<usize> {
        round_order(&(0..count).collect::<Vec<_>>(), round)
    }

    #[test]
    fn each_round_rotates_the_order_so_no_configuration_always_runs_first() {
        assert_eq!(order(4, 0), vec![0, 1, 2, 3]);
        assert_eq!(order(4, 1), vec![1, 2, 3, 0]);
        assert_eq!(order(4, 2), vec![2, 3, 0, 1]);
        assert_eq!(order(4, 5), vec![1, 2, 3, 0]);
        // Over as many rounds as configurations, each one runs once in every position.
        for config in 0..3 {
            let mut positions: Vec<usize> = (0..3).map(|round| order(3, round).iter().position(|&c| c == config).unwrap()).collect();
            positions.sort_unstable();
            assert_eq!(positions, vec![0, 1, 2]);
        }
        assert!(order(0, 3).is_empty());
    }
}
