//! The consistent-hash ring that maps keys to servers: libketama's scheme.
//!
//! - Each server gets `points_per_server` points (default 160). Its name is `host:port` (the
//!   transport is not part of it, so moving a server from TCP to the fabric keeps its keys). For
//!   `i` in `0..points_per_server / 4`, `md5("host:port-i")` gives 4 points: bytes `4h..4h+4` of
//!   the digest read little-endian, `h` in `0..4`.
//! - A key hashes to the first 4 bytes of `md5(key)`, little-endian, and belongs to the server of
//!   the first point at or after that hash, wrapping around past the last point.
//! - Adding a server moves only the keys whose hash falls just before one of its points: about
//!   `1/N` of them with `N` servers after the addition, all of them to the new server.
//!
//! A single server takes every key without hashing (the common benchmark case costs nothing).

use crate::md5;

/// Points each server gets by default (libketama and libmemcached use 160).
pub const POINTS_PER_SERVER_DEFAULT: usize = 160;

#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// (hash, server index), sorted; ties broken by server index so the order is deterministic.
    points: Vec<(u32, u32)>,
    servers: usize,
}

impl Ring {
    /// A ring over `names` (server `i` is `names[i]`), `points_per_server` rounded up to a
    /// multiple of 4 (each digest yields 4 points).
    pub fn build<S: AsRef<str>>(names: &[S], points_per_server: usize) -> Ring {
        let digests_per_server = points_per_server.div_ceil(4).max(1);
        let mut points = Vec::with_capacity(names.len() * digests_per_server * 4);
        let mut label = String::new();
        for (server, name) in names.iter().enumerate() {
            for i in 0..digests_per_server {
                label.clear();
                use std::fmt::Write;
                write!(label, "{}-{}", name.as_ref(), i).unwrap();
                let d = md5::digest(label.as_bytes());
                for h in 0..4 {
                    let hash = u32::from_le_bytes([d[4 * h], d[4 * h + 1], d[4 * h + 2], d[4 * h + 3]]);
                    points.push((hash, server as u32));
                }
            }
        }
        points.sort_unstable();
        Ring { points, servers: names.len() }
    }

    pub fn servers(&self) -> usize {
        self.servers
    }

    pub fn points(&self) -> usize {
        self.points.len()
    }

    /// The hash of a key on the ring.
    pub fn key_hash(key: &[u8]) -> u32 {
        let d = md5::digest(key);
        u32::from_le_bytes([d[0], d[1], d[2], d[3]])
    }

    /// The server that owns `key`; `None` without servers.
    #[inline]
    pub fn server_for(&self, key: &[u8]) -> Option<usize> {
        match self.servers {
            0 => None,
            1 => Some(0),
            _ => Some(self.server_for_hash(Ring::key_hash(key))),
        }
    }

    fn server_for_hash(&self, hash: u32) -> usize {
        debug_assert!(!self.points.is_empty());
        let index = self.points.partition_point(|&(point, _)| point < hash);
        let (_, server) = if index == self.points.len() { self.points[0] } else { self.points[index] };
        server as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.{}:11211", i + 1)).collect()
    }

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("key:{i}").into_bytes()).collect()
    }

    #[test]
    fn empty_and_single_server() {
        assert_eq!(Ring::default().server_for(b"k"), None);
        let ring = Ring::build(&names(1), POINTS_PER_SERVER_DEFAULT);
        assert_eq!(ring.points(), 160);
        assert!(keys(100).iter().all(|k| ring.server_for(k) == Some(0)));
    }

    #[test]
    fn points_per_server_round_up_to_a_multiple_of_four() {
        assert_eq!(Ring::build(&names(3), 10).points(), 3 * 12);
    }

    #[test]
    fn keys_spread_evenly() {
        let ring = Ring::build(&names(4), POINTS_PER_SERVER_DEFAULT);
        let mut counts = [0usize; 4];
        for key in keys(40_000) {
            counts[ring.server_for(&key).unwrap()] += 1;
        }
        for count in counts {
            // 10,000 expected each; 160 points keep every server within about +-20 %.
            assert!((7_000..13_000).contains(&count), "uneven spread: {counts:?}");
        }
    }

    #[test]
    fn adding_a_server_moves_about_one_nth_of_the_keys_and_only_to_it() {
        let before = Ring::build(&names(4), POINTS_PER_SERVER_DEFAULT);
        let after = Ring::build(&names(5), POINTS_PER_SERVER_DEFAULT);
        let all = keys(50_000);
        let mut moved = 0;
        for key in &all {
            let (a, b) = (before.server_for(key).unwrap(), after.server_for(key).unwrap());
            if a != b {
                assert_eq!(b, 4, "a key moved between two old servers");
                moved += 1;
            }
        }
        let fraction = moved as f64 / all.len() as f64;
        assert!((0.12..0.28).contains(&fraction), "moved {fraction:.3} of the keys, expected about 1/5");
    }

    #[test]
    fn removing_a_server_moves_only_its_keys() {
        let four = Ring::build(&names(4), POINTS_PER_SERVER_DEFAULT);
        let three = Ring::build(&names(3), POINTS_PER_SERVER_DEFAULT);
        for key in keys(10_000) {
            let (a, b) = (four.server_for(&key).unwrap(), three.server_for(&key).unwrap());
            assert!(a == b || a == 3);
        }
    }

    #[test]
    fn placement_is_libketama_s() {
        // md5("key") = 3c6e0b8a9c15224a8228b9a98ca1531d: the key hash is its first 4 bytes, little-endian.
        assert_eq!(Ring::key_hash(b"key"), 0x8a0b6e3c);
        // A point: md5("10.0.0.1:11211-0"), bytes 0..4 little-endian, must be on the ring.
        let ring = Ring::build(&names(1), 4);
        let d = md5::digest(b"10.0.0.1:11211-0");
        let first = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
        assert!(ring.points.iter().any(|&(p, _)| p == first));
        // The owner is the first point at or after the hash, wrapping.
        let ring = Ring { points: vec![(100, 0), (200, 1), (300, 2)], servers: 3 };
        assert_eq!(ring.server_for_hash(50), 0);
        assert_eq!(ring.server_for_hash(100), 0);
        assert_eq!(ring.server_for_hash(101), 1);
        assert_eq!(ring.server_for_hash(300), 2);
        assert_eq!(ring.server_for_hash(301), 0);
    }
}
