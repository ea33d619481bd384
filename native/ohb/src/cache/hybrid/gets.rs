//! Loading a server and timing gets against it, one or several client threads.

use std::time::Instant;

use cache_client::{Client, ServerAddr};

use crate::cache::hybrid::keys::{fill_value, flags_of, thread_seed, value_matches, KeyPicker, Scan};
use crate::cache::servers::connect;

/// Sets every item once, keys in order. Refused sets (the server answered with an error status,
/// e.g. out of memory) are counted; a broken connection fails the load.
pub(super) fn load(client: &Client, keys: &[Vec<u8>], value_bytes: usize) -> Result<(usize, f64), String> {
    let mut value = Vec::with_capacity(value_bytes);
    let mut refused = 0usize;
    let started = Instant::now();
    for (index, key) in keys.iter().enumerate() {
        fill_value(index, value_bytes, &mut value);
        match client.set(key, &value, flags_of(index), 0) {
            Ok(()) => {}
            Err(e) if e.is_connection_error() => return Err(format!("set item {index}: {e}")),
            Err(_) => refused += 1,
        }
    }
    Ok((refused, started.elapsed().as_secs_f64()))
}

/// Outcome counts and raw latencies of a sequence of gets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GetTally {
    pub samples_ns: Vec<u64>,
    pub hits: usize,
    pub misses: usize,
    /// Hits whose value or flags differ from what was set (a failure, never counted as a hit).
    pub wrong: usize,
    pub first_wrong: Option<usize>,
}

impl GetTally {
    fn merge(&mut self, other: GetTally) {
        self.samples_ns.extend(other.samples_ns);
        self.hits += other.hits;
        self.misses += other.misses;
        self.wrong += other.wrong;
        self.first_wrong = self.first_wrong.or(other.first_wrong);
    }

    pub fn gets(&self) -> usize {
        self.hits + self.misses + self.wrong
    }

    pub(super) fn wrong_error(&self) -> Option<String> {
        (self.wrong > 0).then(|| {
            format!(
                "{} of {} gets returned a wrong value or flags (first: item {})",
                self.wrong,
                self.gets(),
                self.first_wrong.unwrap_or(0)
            )
        })
    }

    pub(super) fn count(&mut self, index: usize, found: Option<u32>, value_bytes: usize, got: &[u8]) {
        match found {
            None => self.misses += 1,
            Some(flags) if flags == flags_of(index) && value_matches(index, value_bytes, got) => self.hits += 1,
            Some(_) => {
                self.wrong += 1;
                self.first_wrong.get_or_insert(index);
            }
        }
    }
}

/// `count` blocking gets of keys drawn by `picker`, each timed alone (checking the value is not
/// part of the time).
pub(super) fn timed_gets(
    client: &Client,
    keys: &[Vec<u8>],
    value_bytes: usize,
    picker: &mut KeyPicker,
    count: usize,
) -> Result<GetTally, String> {
    let mut tally = GetTally { samples_ns: Vec::with_capacity(count), ..GetTally::default() };
    let mut buf = Vec::with_capacity(value_bytes);
    for _ in 0..count {
        timed_get(client, keys, picker.next_index(), value_bytes, &mut buf, &mut tally)?;
    }
    Ok(tally)
}

/// One timed get of item `index` into `tally` (the value check is not part of the time).
fn timed_get(
    client: &Client,
    keys: &[Vec<u8>],
    index: usize,
    value_bytes: usize,
    buf: &mut Vec<u8>,
    tally: &mut GetTally,
) -> Result<(), String> {
    let t0 = Instant::now();
    let result = client.get_into(&keys[index], buf);
    tally.samples_ns.push(t0.elapsed().as_nanos() as u64);
    let found = result.map_err(|e| format!("get item {index}: {e}"))?.map(|meta| meta.flags);
    tally.count(index, found, value_bytes, buf);
    Ok(())
}

/// `gets` timed gets from `clients` threads (each its own connection and key sequence).
pub(super) fn timed_gets_threads(
    addr: ServerAddr,
    keys: &[Vec<u8>],
    value_bytes: usize,
    scan: Scan,
    seed: u64,
    gets: usize,
    clients: usize,
) -> Result<(GetTally, f64), String> {
    assert!(clients > 0);
    let started = Instant::now();
    let results: Vec<Result<GetTally, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|t| {
                let count = gets / clients + usize::from(t < gets % clients);
                scope.spawn(move || {
                    let client = connect(addr)?;
                    let mut picker = KeyPicker::new(scan, keys.len(), thread_seed(seed, t));
                    timed_gets(&client, keys, value_bytes, &mut picker, count)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into()))).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut tally = GetTally::default();
    for result in results {
        tally.merge(result?);
    }
    Ok((tally, seconds))
}
