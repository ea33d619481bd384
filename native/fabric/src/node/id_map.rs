//! Hash maps keyed by integers (ids, pointers) with a one-multiply hash: the per-message lookups of
//! the pending table and the endpoint map are on the hot path, and these keys need no
//! DoS-resistant hash (ids are ours; pointers are UCX's).
use std::collections::HashMap;

#[derive(Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64);
    }
}

pub(super) type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn consecutive_ids_spread_over_the_high_bits() {
        // hashbrown picks buckets from the hash's low bits and groups by its top 7: consecutive
        // ids (the common key) must differ in both.
        let build = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (1..=1024u64).map(|id| build.hash_one(id)).collect();
        let top7: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        let low10: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert!(top7.len() > 100, "top bits of 1024 ids take {} values", top7.len());
        assert!(low10.len() > 500, "low bits of 1024 ids take {} values", low10.len());
    }

    #[test]
    fn maps_keep_every_key() {
        let mut map: IdMap<(u64, u64, u8), u64> = IdMap::default();
        for i in 0..10_000u64 {
            map.insert((i % 7, i, (i % 3) as u8), i);
        }
        assert_eq!(map.len(), 10_000);
        assert!((0..10_000u64).all(|i| map[&(i % 7, i, (i % 3) as u8)] == i));
    }
}
