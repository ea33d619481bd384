//! Keys, values and their distributions for the hybrid bench: pure functions of a seed and an index.

use std::path::Path;

use crate::cache::hybrid::{MEMCACHED_EXT_PAGE_MB_DEFAULT, SSD_ROOM_FACTOR};

/// How keys are drawn (OHB's --scanmode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Every item equally likely.
    Uniform,
    /// Normal around the middle of the key space, standard deviation items / 6, clamped.
    Normal,
}

impl Scan {
    pub fn name(self) -> &'static str {
        match self {
            Scan::Uniform => "uniform",
            Scan::Normal => "normal",
        }
    }

    pub fn parse(text: &str) -> Option<Scan> {
        [Scan::Uniform, Scan::Normal].into_iter().find(|s| s.name().eq_ignore_ascii_case(text))
    }
}

/// SplitMix64: small, seedable, and the same sequence on every machine (no crate needed).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-40 for the n used here).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A standard normal deviate (Box-Muller).
    pub fn standard_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// SplitMix64's finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// OHB's NORMAL mode: the item at `z` standard deviations from the middle of `items`, with
/// standard deviation items / 6, clamped to the key space.
pub fn normal_index(z: f64, items: usize) -> usize {
    assert!(items > 0);
    let n = items as f64;
    let x = (n / 2.0 + z * n / 6.0).floor();
    x.clamp(0.0, n - 1.0) as usize
}

/// Draws item indices: the same seed gives the same sequence for every server.
#[derive(Debug, Clone)]
pub struct KeyPicker {
    scan: Scan,
    items: usize,
    rng: Rng,
}

impl KeyPicker {
    pub fn new(scan: Scan, items: usize, seed: u64) -> KeyPicker {
        assert!(items > 0, "no items to pick from");
        KeyPicker { scan, items, rng: Rng::new(seed) }
    }

    pub fn next_index(&mut self) -> usize {
        match self.scan {
            Scan::Uniform => self.rng.below(self.items),
            Scan::Normal => normal_index(self.rng.standard_normal(), self.items),
        }
    }
}

/// The seed of client thread `thread` (threads read different sequences; servers the same ones).
pub fn thread_seed(seed: u64, thread: usize) -> u64 {
    mix64(seed ^ (thread as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Items of `value_bytes` that make `spill_factor` x `max_memory_mb` MiB of values (at least 1).
pub fn item_count(spill_factor: f64, max_memory_mb: u64, value_bytes: usize) -> usize {
    assert!(spill_factor > 0.0 && value_bytes > 0);
    let bytes = spill_factor * (max_memory_mb as f64) * (1u64 << 20) as f64;
    ((bytes / value_bytes as f64 + 1e-9).floor() as usize).max(1)
}

/// SSD tier (and extstore file) size in MB: `SSD_ROOM_FACTOR` x the data set, rounded up.
pub fn ssd_size_mb(spill_factor: f64, max_memory_mb: u64) -> u64 {
    let mb = SSD_ROOM_FACTOR * spill_factor * max_memory_mb as f64;
    // Tolerate float noise (2 x 1.1 x 10 = 22.000000000000004 is 22 MB).
    ((mb - 1e-6).ceil() as u64).max(1)
}

/// memcached's `-o` value for an extstore file of `size_mb` at `path`: `ext_path=PATH:SIZEm`,
/// with the default 64 MB pages unless the file would hold fewer than 2 of them (then pages of a
/// quarter of the file, at least 1 MB).
pub fn extstore_option(path: &Path, size_mb: u64) -> String {
    let mut option = format!("ext_path={}:{size_mb}m", path.display());
    if size_mb < 2 * MEMCACHED_EXT_PAGE_MB_DEFAULT {
        option += &format!(",ext_page_size={}", (size_mb / 4).max(1));
    }
    option
}

/// The key of item `index`.
pub fn key_of(index: usize) -> Vec<u8> {
    format!("ohb:hybrid:{index}").into_bytes()
}

/// The flags set with item `index` (checked on every hit, besides the value).
pub fn flags_of(index: usize) -> u32 {
    (index as u32).rotate_left(16) ^ 0x00A5_5A00
}

fn value_word(index: usize, word: usize) -> [u8; 8] {
    mix64((index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ word as u64).to_le_bytes()
}

/// Item `index`'s value: `len` bytes that differ from every other item's.
pub fn fill_value(index: usize, len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.resize(len, 0);
    for (word, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&value_word(index, word)[..chunk.len()]);
    }
}

/// Whether `got` is exactly item `index`'s value of `len` bytes.
pub fn value_matches(index: usize, len: usize, got: &[u8]) -> bool {
    got.len() == len && got.chunks(8).enumerate().all(|(word, chunk)| chunk == &value_word(index, word)[..chunk.len()])
}

/// Average get latency in us with `miss_penalty_ms` added for every miss.
pub fn average_with_penalty_us(raw_total_ns: u64, misses: usize, gets: usize, miss_penalty_ms: f64) -> f64 {
    assert!(gets > 0);
    (raw_total_ns as f64 / 1000.0 + misses as f64 * miss_penalty_ms * 1000.0) / gets as f64
}

#[cfg(test)]
mod tests {
    use crate::cache::hybrid::gets::GetTally;
    use super::*;

    #[test]
    fn item_and_ssd_arithmetic() {
        // OHB's defaults: 1.5 x 64 MiB of 4 KiB values.
        assert_eq!(item_count(1.5, 64, 4096), 24576);
        assert_eq!(item_count(0.5, 64, 4096), 8192);
        assert_eq!(item_count(1.0, 1, 1000), 1048);
        assert_eq!(item_count(0.000001, 2, 4096), 1, "at least one item");
        assert_eq!(ssd_size_mb(1.5, 64), 192);
        assert_eq!(ssd_size_mb(0.5, 64), 64);
        assert_eq!(ssd_size_mb(1.1, 10), 22, "float noise does not round up");
        assert_eq!(ssd_size_mb(0.1, 64), 13, "12.8 rounds up");
        assert_eq!(ssd_size_mb(0.001, 2), 1);
    }

    #[test]
    fn extstore_option_syntax() {
        let p = Path::new("/tmp/x/extstore");
        assert_eq!(extstore_option(p, 192), "ext_path=/tmp/x/extstore:192m");
        assert_eq!(extstore_option(p, 128), "ext_path=/tmp/x/extstore:128m");
        assert_eq!(extstore_option(p, 64), "ext_path=/tmp/x/extstore:64m,ext_page_size=16");
        assert_eq!(extstore_option(p, 2), "ext_path=/tmp/x/extstore:2m,ext_page_size=1");
    }

    #[test]
    fn rng_is_seeded_and_uniform() {
        let a: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..5).scan(Rng::new(8), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut rng = Rng::new(1);
        let mut counts = [0usize; 10];
        for _ in 0..100_000 {
            let x = rng.below(10);
            counts[x] += 1;
            let f = rng.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn uniform_picker_covers_the_key_space() {
        let items = 1000;
        let mut picker = KeyPicker::new(Scan::Uniform, items, 42);
        let mut seen = vec![false; items];
        for _ in 0..20_000 {
            let i = picker.next_index();
            assert!(i < items);
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s), "20x oversampling reaches every key");
        // Same seed, same sequence (every server sees the same keys).
        let mut p1 = KeyPicker::new(Scan::Normal, items, 9);
        let mut p2 = KeyPicker::new(Scan::Normal, items, 9);
        assert!((0..1000).all(|_| p1.next_index() == p2.next_index()));
    }

    #[test]
    fn normal_picker_is_centred_with_sd_of_a_sixth() {
        let items = 6000;
        let mut picker = KeyPicker::new(Scan::Normal, items, 3);
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| picker.next_index() as f64).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let sd = (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean - 3000.0).abs() < 30.0, "mean {mean}");
        assert!((sd - 1000.0).abs() < 30.0, "sd {sd}");
        // About 68 % within one sd of the centre.
        let within = draws.iter().filter(|x| (**x - 3000.0).abs() < 1000.0).count() as f64 / n as f64;
        assert!((within - 0.6827).abs() < 0.01, "{within}");
        // Clamped at both ends.
        assert_eq!(normal_index(-10.0, items), 0);
        assert_eq!(normal_index(10.0, items), items - 1);
        assert_eq!(normal_index(0.0, items), 3000);
        assert_eq!(normal_index(0.0, 1), 0);
        assert_eq!(normal_index(1.0, 600), 400);
    }

    #[test]
    fn values_are_per_item_and_checked_exactly() {
        let mut v = Vec::new();
        fill_value(5, 4096, &mut v);
        assert_eq!(v.len(), 4096);
        assert!(value_matches(5, 4096, &v));
        assert!(!value_matches(6, 4096, &v), "another item's value");
        assert!(!value_matches(5, 4096, &v[..4095]), "short");
        let mut w = v.clone();
        w[4000] ^= 1;
        assert!(!value_matches(5, 4096, &w), "one bit flipped");
        fill_value(5, 13, &mut v);
        assert!(value_matches(5, 13, &v), "odd length");
        let mut t = GetTally::default();
        fill_value(9, 100, &mut v);
        t.count(9, Some(flags_of(9)), 100, &v);
        t.count(9, None, 100, &v);
        t.count(9, Some(flags_of(9) ^ 1), 100, &v);
        t.count(8, Some(flags_of(8)), 100, &v);
        assert_eq!((t.hits, t.misses, t.wrong, t.first_wrong), (1, 1, 2, Some(9)));
        assert_eq!(t.gets(), 4);
        assert!(t.wrong_error().unwrap().contains("2 of 4"));
        assert!(key_of(12) != key_of(21));
    }

    #[test]
    fn penalty_is_added_per_miss() {
        // 4 gets of 50 us, 1 miss with a 1.5 ms penalty: (200 + 1500) / 4 us.
        assert_eq!(average_with_penalty_us(200_000, 1, 4, 1.5), 425.0);
        assert_eq!(average_with_penalty_us(200_000, 0, 4, 1.5), 50.0);
        assert_eq!(average_with_penalty_us(0, 4, 4, 0.0), 0.0);
    }
}
