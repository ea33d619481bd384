//! The key hash: a wyhash-style multiply-fold over 16-byte blocks, seeded per store from the
//! standard library's random keys, so that clients cannot aim keys at one index neighbourhood
//! without knowing the seed. Keys are at most 250 bytes: a few multiplications per key.

const SECRET_0: u64 = 0xa076_1d64_78bd_642f;
const SECRET_1: u64 = 0xe703_7ed1_a0b4_28db;
const SECRET_2: u64 = 0x8ebc_6af0_9c88_c6e3;

#[inline]
fn fold_multiply(a: u64, b: u64) -> u64 {
    let product = (a as u128) * (b as u128);
    (product as u64) ^ ((product >> 64) as u64)
}

#[inline]
fn read_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

#[inline]
fn read_u32(bytes: &[u8]) -> u64 {
    u32::from_le_bytes(bytes[..4].try_into().unwrap()) as u64
}

#[inline]
pub(crate) fn hash_key(seed: u64, key: &[u8]) -> u64 {
    let len = key.len();
    let mut state = seed ^ SECRET_0;
    let mut rest = key;
    while rest.len() > 16 {
        state = fold_multiply(read_u64(rest) ^ SECRET_1, read_u64(&rest[8..]) ^ state);
        rest = &rest[16..];
    }
    let tail = rest.len();
    let (a, b) = if tail >= 8 {
        (read_u64(rest), read_u64(&rest[tail - 8..]))
    } else if tail >= 4 {
        (read_u32(rest), read_u32(&rest[tail - 4..]))
    } else if tail > 0 {
        ((rest[0] as u64) << 16 | (rest[tail / 2] as u64) << 8 | rest[tail - 1] as u64, 0)
    } else {
        (0, 0)
    };
    fold_multiply(SECRET_2 ^ len as u64, fold_multiply(a ^ SECRET_1, b ^ state))
}

/// A per-process random seed (the standard library seeds its hashers from the OS).
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_lengths_matter() {
        let seed = 7;
        assert_eq!(hash_key(seed, b"key:1"), hash_key(seed, b"key:1"));
        assert_ne!(hash_key(seed, b"key:1"), hash_key(seed, b"key:2"));
        assert_ne!(hash_key(seed, b""), hash_key(seed, b"\0"));
        assert_ne!(hash_key(seed, b"\0"), hash_key(seed, b"\0\0"));
        assert_ne!(hash_key(1, b"key"), hash_key(2, b"key"));
    }

    #[test]
    fn low_bits_spread_sequential_keys() {
        // Index slots come from the low bits, shards from the high: both must spread keys that
        // differ in one digit, at every key length class (short, tail of 4..8, blocks of 16).
        for prefix in ["", "user:", "a-much-longer-prefix-of-the-key:"] {
            let mut low_buckets = [0u32; 64];
            let mut high_buckets = [0u32; 64];
            for n in 0..64_000u32 {
                let hash = hash_key(42, format!("{prefix}{n}").as_bytes());
                low_buckets[(hash & 63) as usize] += 1;
                high_buckets[(hash >> 58) as usize] += 1;
            }
            for count in low_buckets.iter().chain(high_buckets.iter()) {
                assert!((800..1200).contains(count), "{prefix}: {count} of 1000 expected");
            }
        }
    }
}
