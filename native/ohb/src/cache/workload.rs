//! The operation mix of a point, the keys and values it uses, and one timed operation.

use cache_client::Client;

/// Keys each point reads from (preloaded), so GETs hit and the working set stays in cache.
pub(super) const KEYS_PER_POINT: usize = 64;

/// The operation mix of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Get,
    Set,
    /// 90 % GET, 10 % SET (OHB's MIX).
    Mix,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Get, Workload::Set, Workload::Mix];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Get => "GET",
            Workload::Set => "SET",
            Workload::Mix => "MIX",
        }
    }

    pub fn parse(text: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name().eq_ignore_ascii_case(text))
    }

    /// Whether operation number `i` of this workload is a SET.
    fn is_set(self, i: u64) -> bool {
        match self {
            Workload::Get => false,
            Workload::Set => true,
            Workload::Mix => i % 10 == 9,
        }
    }
}

pub(super) fn key_for(size_bytes: usize, index: usize) -> Vec<u8> {
    format!("ohb:{size_bytes}:{index}").into_bytes()
}

pub(super) fn value_of(size_bytes: usize) -> Vec<u8> {
    (0..size_bytes).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Loads the keys a point reads.
pub(super) fn preload(client: &Client, size_bytes: usize) -> Result<(), String> {
    let value = value_of(size_bytes);
    for i in 0..KEYS_PER_POINT {
        client.set(&key_for(size_bytes, i), &value, 0, 0).map_err(|e| format!("preload: {e}"))?;
    }
    Ok(())
}

/// One GET or SET; a GET must hit with the full value (a miss is a benchmark error, not a figure).
pub(super) fn one_op(
    client: &Client,
    workload: Workload,
    i: u64,
    keys: &[Vec<u8>],
    value: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let key = &keys[i as usize % keys.len()];
    if workload.is_set(i) {
        client.set(key, value, 0, 0).map_err(|e| format!("set: {e}"))
    } else {
        match client.get_into(key, scratch).map_err(|e| format!("get: {e}"))? {
            Some(_) if scratch.len() == value.len() => Ok(()),
            Some(_) => Err(format!("get returned {} bytes, expected {}", scratch.len(), value.len())),
            None => Err("get missed a preloaded key (evicted?)".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_one_set_in_ten() {
        let sets = (0..1000).filter(|&i| Workload::Mix.is_set(i)).count();
        assert_eq!(sets, 100);
        assert!((0..100).all(|i| !Workload::Get.is_set(i) && Workload::Set.is_set(i)));
    }
}
