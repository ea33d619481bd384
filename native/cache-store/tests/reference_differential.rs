//! The store against the protocol crate's oracle (`ReferenceStore`, memcached 1.6.18's semantics
//! in a HashMap): the same random operations on both, every outcome and every item view compared.
//! CAS values differ between the two (each generates its own), so a request that compares a CAS
//! gives each store the CAS it handed out, or a value each knows to be wrong.

use cache_proto::clock::Clock as ReferenceClock;
use cache_proto::reference::ReferenceStore;
use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreMode, StoreOutcome, StoreRequest, EXPTIME_KEEP,
};
use cache_store::{Clock, Store, StoreConfig};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const START_UNIX_S: u64 = 1_700_000_000;
const KEYS: u64 = 60;
const STEPS: u64 = 100_000;

struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// An item view without the CAS (compared separately, per side).
#[derive(PartialEq, Eq)]
struct Seen {
    value: Vec<u8>,
    flags: u32,
    exptime_unix_s: u64,
    last_access_unix_s: u64,
    fetched_before: bool,
    stale: bool,
    win: bool,
    win_token_sent: bool,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = String::from_utf8_lossy(&self.value[..self.value.len().min(24)]);
        write!(
            formatter,
            "{{{} B {text:?} flags {} exp {} la {} fetched {} stale {} win {} z {}}}",
            self.value.len(),
            self.flags,
            self.exptime_unix_s,
            self.last_access_unix_s,
            self.fetched_before,
            self.stale,
            self.win,
            self.win_token_sent
        )
    }
}

/// The last operations on each key, printed when the stores disagree.
#[derive(Default)]
struct History(std::collections::HashMap<Vec<u8>, Vec<String>>);

impl History {
    fn record(&mut self, key: &[u8], line: String) {
        let lines = self.0.entry(key.to_vec()).or_default();
        lines.push(line);
        if lines.len() > 16 {
            lines.remove(0);
        }
    }

    fn of(&self, key: &[u8]) -> String {
        self.0.get(key).map_or(String::new(), |lines| lines.join("\n  "))
    }
}

fn read(store: &dyn Storage, key: &[u8], options: GetOptions) -> Option<(Seen, u64)> {
    let mut seen = None;
    let outcome = store.get(key, options, std::task::Waker::noop(), &mut |view: &ItemView<'_>| {
        seen = Some((
            Seen {
                value: view.value.to_vec(),
                flags: view.flags,
                exptime_unix_s: view.exptime_unix_s,
                last_access_unix_s: view.last_access_unix_s,
                fetched_before: view.fetched_before,
                stale: view.stale,
                win: view.win,
                win_token_sent: view.win_token_sent,
            },
            view.cas,
        ))
    });
    assert_eq!(outcome == GetOutcome::Hit, seen.is_some());
    seen
}

/// The present CAS of a key in one store, without touching its state.
fn cas_of(store: &dyn Storage, key: &[u8]) -> Option<u64> {
    read(store, key, GetOptions { no_bump: true, ..GetOptions::default() }).map(|(_, cas)| cas)
}

/// Which CAS a request compares: each side's own present one, one each knows to be wrong, or
/// one below the present (meta invalidation's "older" write).
#[derive(Clone, Copy)]
enum CasChoice {
    None,
    Present,
    Wrong,
    Older,
}

/// The CAS each side compares. "Older" needs a present CAS above 1 on both sides (else it would
/// equal the present one on one side): otherwise both get a wrong one.
fn choose_cas(stores: [&dyn Storage; 2], key: &[u8], choice: CasChoice) -> [Option<u64>; 2] {
    let present = stores.map(|side| cas_of(side, key));
    let older_possible = present.iter().all(|cas| cas.is_some_and(|cas| cas > 1));
    let choice = match choice {
        CasChoice::Older if !older_possible => CasChoice::Wrong,
        choice => choice,
    };
    present.map(|present| cas_for(present, choice))
}

fn cas_for(present: Option<u64>, choice: CasChoice) -> Option<u64> {
    match choice {
        CasChoice::None => None,
        CasChoice::Present => Some(present.unwrap_or(1)),
        CasChoice::Wrong => Some(present.map_or(1, |cas| cas + 1)),
        CasChoice::Older => Some(present.expect("checked") - 1),
    }
}

fn without_cas(outcome: StoreOutcome) -> StoreOutcome {
    match outcome {
        StoreOutcome::Stored { .. } => StoreOutcome::Stored { cas: 0 },
        other => other,
    }
}

fn arithmetic_without_cas(outcome: ArithmeticOutcome, chosen_cas: Option<u64>) -> ArithmeticOutcome {
    match outcome {
        ArithmeticOutcome::Value { value, cas, exptime_unix_s } => {
            ArithmeticOutcome::Value { value, cas: if chosen_cas.is_some() { cas } else { 0 }, exptime_unix_s }
        }
        other => other,
    }
}

#[test]
fn the_store_behaves_as_the_reference_store() {
    let now = Arc::new(AtomicU64::new(START_UNIX_S));
    let store = Store::new(StoreConfig {
        memory_limit_bytes: 64 << 20,
        clock: Clock::Manual(now.clone()),
        ..StoreConfig::default()
    })
    .unwrap();
    let reference_clock = ReferenceClock::manual(START_UNIX_S);
    let reference = ReferenceStore::new(reference_clock.clone());
    let stores: [&dyn Storage; 2] = [&store, &reference];
    let mut random = Random(0x0dd_ba11_5eed);
    let mut history = History::default();
    for step in 0..STEPS {
        let key = format!("key:{}", random.below(KEYS)).into_bytes();
        let value: Vec<u8> = match random.below(6) {
            0 => random.below(200).to_string().into_bytes(),
            1 => format!("{} ", random.below(100)).into_bytes(),
            2 => Vec::new(),
            3 => (0..random.below(3000)).map(|_| b'a' + random.below(26) as u8).collect(),
            4 => u64::MAX.to_string().into_bytes(),
            _ => (0..random.below(40)).map(|_| random.below(256) as u8).collect(),
        };
        let now_unix_s = now.load(Relaxed);
        let exptime_unix_s = match random.below(6) {
            0 => now_unix_s + 1 + random.below(30),
            1 => 1, // already past
            _ => 0,
        };
        let cas_choice = [CasChoice::None, CasChoice::None, CasChoice::Present, CasChoice::Wrong, CasChoice::Older]
            [random.below(5) as usize];
        let context = format!("step {step}, key {}", String::from_utf8_lossy(&key));
        match random.below(16) {
            0..=3 => {
                let options = GetOptions {
                    touch_exptime_unix_s: (random.below(6) == 0).then(|| now_unix_s + random.below(40)),
                    no_bump: random.below(5) == 0,
                    vivify_exptime_unix_s: (random.below(6) == 0).then(|| now_unix_s + random.below(40)),
                    recache_below_ttl_s: (random.below(4) == 0).then(|| random.below(40)),
                };
                let [ours, theirs] = stores.map(|side| read(side, &key, options).map(|(seen, _)| seen));
                history.record(&key, format!("{step} @{now_unix_s}: get {options:?} -> {ours:?}"));
                assert_eq!(ours, theirs, "get {context} {options:?}\n  {}", history.of(&key));
            }
            4..=8 => {
                let mode = [StoreMode::Set, StoreMode::Add, StoreMode::Replace, StoreMode::Append, StoreMode::Prepend]
                    [random.below(5) as usize];
                let invalidate = random.below(3) == 0;
                let new_cas = (random.below(8) == 0).then(|| 1_000_000_000 + step);
                let vivify_exptime_unix_s = (random.below(4) == 0).then_some(exptime_unix_s);
                let chosen = choose_cas(stores, &key, cas_choice);
                let [ours, theirs] = [0, 1].map(|side_index| {
                    let side = stores[side_index];
                    let mut request = StoreRequest::new(mode, &key, &value, random_flags(step), exptime_unix_s);
                    request.compare_cas = chosen[side_index];
                    request.invalidate = invalidate && mode == StoreMode::Set && request.compare_cas.is_some();
                    request.new_cas = new_cas;
                    request.vivify_exptime_unix_s = vivify_exptime_unix_s;
                    side.store(&request, std::task::Waker::noop())
                });
                let line = format!(
                    "{step} @{now_unix_s}: {mode:?} {} B exp {exptime_unix_s} cas {chosen:?} inv {invalidate} viv {:?} -> {ours:?}",
                    value.len(),
                    vivify_exptime_unix_s
                );
                history.record(&key, line);
                assert_eq!(without_cas(ours), without_cas(theirs), "{mode:?} {context}\n  {}", history.of(&key));
                if new_cas.is_some() {
                    assert_eq!(ours, theirs, "a chosen CAS is the CAS");
                }
            }
            9 | 10 => {
                let invalidate = random.below(3) == 0;
                let invalidate_exptime_unix_s = invalidate.then(|| match random.below(2) {
                    0 => EXPTIME_KEEP,
                    _ => now_unix_s + random.below(30),
                });
                let chosen = choose_cas(stores, &key, cas_choice);
                let [ours, theirs] = [0, 1].map(|side_index| {
                    let side = stores[side_index];
                    let options =
                        DeleteOptions { compare_cas: chosen[side_index], invalidate_exptime_unix_s, new_cas: None };
                    side.delete(&key, options)
                });
                let line =
                    format!("{step} @{now_unix_s}: delete {invalidate_exptime_unix_s:?} cas {chosen:?} -> {ours:?}");
                history.record(&key, line);
                assert_eq!(ours, theirs, "delete {context}\n  {}", history.of(&key));
                let _: DeleteOutcome = ours;
            }
            11..=13 => {
                let increment = random.below(2) == 0;
                let delta = match random.below(4) {
                    0 => u64::MAX - random.below(3),
                    _ => random.below(1000),
                };
                let initial = (random.below(4) == 0).then(|| (random.below(100), exptime_unix_s));
                let touch_exptime_unix_s = (random.below(6) == 0).then(|| now_unix_s + random.below(40));
                let new_cas = (random.below(8) == 0).then(|| 2_000_000_000 + step);
                let chosen = choose_cas(stores, &key, cas_choice);
                let [ours, theirs] = [0, 1].map(|side_index| {
                    let side = stores[side_index];
                    let request = ArithmeticRequest {
                        key: &key,
                        increment,
                        delta,
                        compare_cas: chosen[side_index],
                        new_cas,
                        initial,
                        touch_exptime_unix_s,
                    };
                    arithmetic_without_cas(side.arithmetic(&request, std::task::Waker::noop()), new_cas)
                });
                let line = format!(
                    "{step} @{now_unix_s}: incr {increment} {delta} init {initial:?} cas {chosen:?} -> {ours:?}"
                );
                history.record(&key, line);
                assert_eq!(ours, theirs, "arithmetic {context}\n  {}", history.of(&key));
            }
            14 => {
                let seconds = random.below(4);
                now.fetch_add(seconds, Relaxed);
                reference_clock.advance(seconds);
            }
            _ => {
                if random.below(50) == 0 {
                    // The oracle applies a delayed flush that has come on its next access: give it
                    // one before a new flush_all replaces the pending one (the store keeps a flush
                    // that has come in effect by itself).
                    for side in stores {
                        read(side, b"key:0", GetOptions { no_bump: true, ..GetOptions::default() });
                    }
                    let at_unix_s = if random.below(2) == 0 { 0 } else { now_unix_s + random.below(10) };
                    for side in stores {
                        side.flush_all(at_unix_s);
                    }
                    for key in 0..KEYS {
                        history.record(
                            format!("key:{key}").as_bytes(),
                            format!("{step} @{now_unix_s}: flush {at_unix_s}"),
                        );
                    }
                }
            }
        }
    }
    // Every key reads the same at the end.
    for key in 0..KEYS {
        let key = format!("key:{key}").into_bytes();
        let options = GetOptions { no_bump: true, ..GetOptions::default() };
        let [ours, theirs] = stores.map(|side| read(side, &key, options).map(|(seen, _)| seen));
        assert_eq!(ours, theirs);
    }
}

fn random_flags(step: u64) -> u32 {
    (step % 7) as u32
}
