//! The store against memcached's semantics, its memory bound, eviction order and concurrency.

use super::*;
use std::collections::HashMap;

const START_UNIX_S: u64 = 1_700_000_000;
const MIB: usize = 1 << 20;

struct Fixture {
    store: Store,
    now: Arc<AtomicU64>,
}

impl Fixture {
    fn new(memory_limit_bytes: usize, shards: Option<usize>) -> Fixture {
        Fixture::with_max_item(memory_limit_bytes, 1 << 20, shards)
    }

    fn with_max_item(memory_limit_bytes: usize, max_item_bytes: usize, shards: Option<usize>) -> Fixture {
        let now = Arc::new(AtomicU64::new(START_UNIX_S));
        let config = StoreConfig { memory_limit_bytes, max_item_bytes, shards, clock: Clock::Manual(now.clone()), ssd: None };
        Fixture { store: Store::new(config).unwrap(), now }
    }

    fn advance(&self, seconds: u64) {
        self.now.fetch_add(seconds, Relaxed);
    }

    fn now(&self) -> u64 {
        self.now.load(Relaxed)
    }

    fn store(&self, mode: StoreMode, key: &str, value: &[u8]) -> StoreOutcome {
        self.store.store(&StoreRequest::new(mode, key.as_bytes(), value, 0, 0), std::task::Waker::noop())
    }

    fn set(&self, key: &str, value: &[u8]) -> u64 {
        match self.store(StoreMode::Set, key, value) {
            StoreOutcome::Stored { cas } => cas,
            other => panic!("set {key}: {other:?}"),
        }
    }

    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.view(key, GetOptions::default()).map(|view| view.value)
    }

    fn view(&self, key: &str, options: GetOptions) -> Option<OwnedView> {
        let mut seen = None;
        let outcome = self.store.get(key.as_bytes(), options, std::task::Waker::noop(), &mut |view| {
            assert!(seen.is_none(), "the visitor is called once");
            assert_eq!(view.key, key.as_bytes());
            seen = Some(OwnedView::from(view));
        });
        assert_eq!(outcome == GetOutcome::Hit, seen.is_some());
        seen
    }

    fn arithmetic(&self, key: &str, increment: bool, delta: u64) -> ArithmeticOutcome {
        self.store.arithmetic(&ArithmeticRequest {
            key: key.as_bytes(),
            increment,
            delta,
            compare_cas: None,
            new_cas: None,
            initial: None,
            touch_exptime_unix_s: None,
        }, std::task::Waker::noop())
    }

    fn stat(&self, name: &str) -> u64 {
        let stats = self.store.stats();
        let (_, value) = stats.iter().find(|(stat, _)| stat == name).unwrap_or_else(|| panic!("no stat {name}"));
        value.parse().unwrap()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnedView {
    value: Vec<u8>,
    flags: u32,
    cas: u64,
    exptime_unix_s: u64,
    last_access_unix_s: u64,
    fetched_before: bool,
    stale: bool,
    win: bool,
    win_token_sent: bool,
}

impl From<&ItemView<'_>> for OwnedView {
    fn from(view: &ItemView<'_>) -> OwnedView {
        OwnedView {
            value: view.value.to_vec(),
            flags: view.flags,
            cas: view.cas,
            exptime_unix_s: view.exptime_unix_s,
            last_access_unix_s: view.last_access_unix_s,
            fetched_before: view.fetched_before,
            stale: view.stale,
            win: view.win,
            win_token_sent: view.win_token_sent,
        }
    }
}

fn value_of(outcome: ArithmeticOutcome) -> u64 {
    match outcome {
        ArithmeticOutcome::Value { value, .. } => value,
        other => panic!("{other:?}"),
    }
}

/// xorshift64*: deterministic and dependency-free.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[test]
fn config_is_validated_and_defaults_are_memcached_s() {
    let config = StoreConfig::default();
    assert_eq!((config.memory_limit_bytes, config.max_item_bytes, config.shards), (64 * MIB, MIB, None));
    let store = Store::new(config.clone()).unwrap();
    assert_eq!(store.max_item_bytes(), MIB);
    assert_eq!(store.segment_bytes(), MIB);
    assert!(store.shard_count().is_power_of_two() && store.shard_count() <= 16);

    let invalid = |config: StoreConfig| matches!(Store::new(config), Err(StoreError::Config(_)));
    assert!(invalid(StoreConfig { memory_limit_bytes: 2 * MIB, ..config.clone() }), "fewer than 3 segments");
    assert!(!invalid(StoreConfig { memory_limit_bytes: 3 * MIB, ..config.clone() }));
    assert!(invalid(StoreConfig { max_item_bytes: 1023, ..config.clone() }));
    assert!(invalid(StoreConfig { max_item_bytes: (1 << 30) + 1, ..config.clone() }));
    assert!(invalid(StoreConfig { memory_limit_bytes: MEMORY_LIMIT_BYTES_MAX + 1, ..config.clone() }));
    assert!(invalid(StoreConfig { shards: Some(0), ..config.clone() }));
    // Segments grow with the item limit; shards shrink to a quarter of the segments.
    let store = Store::new(StoreConfig { max_item_bytes: 5 * MIB + 1, memory_limit_bytes: 48 * MIB, ..config.clone() });
    let store = store.unwrap();
    assert_eq!(store.segment_bytes(), 5 * MIB + 4096);
    let store = Store::new(StoreConfig { memory_limit_bytes: 8 * MIB, shards: Some(64), ..config.clone() }).unwrap();
    assert_eq!(store.shard_count(), 2);
    let store = Store::new(StoreConfig { shards: Some(6), ..config }).unwrap();
    assert_eq!(store.shard_count(), 4, "a power of two");
}

#[test]
fn set_get_keeps_flags_expiry_and_a_fresh_cas() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    let exptime = fixture.now() + 100;
    let outcome = store.store(&StoreRequest::new(StoreMode::Set, b"key", b"value", 0xdead_beef, exptime), std::task::Waker::noop());
    let StoreOutcome::Stored { cas } = outcome else { panic!("{outcome:?}") };
    let view = fixture.view("key", GetOptions::default()).unwrap();
    assert_eq!(view.value, b"value");
    assert_eq!((view.flags, view.cas, view.exptime_unix_s), (0xdead_beef, cas, exptime));
    assert!(!view.fetched_before && !view.stale && !view.win && !view.win_token_sent);
    assert!(fixture.view("key", GetOptions::default()).unwrap().fetched_before);
    assert_eq!(fixture.get("other"), None);
    // Empty values, binary values, the longest key.
    fixture.set("empty", b"");
    assert_eq!(fixture.get("empty"), Some(vec![]));
    let binary: Vec<u8> = (0..=255).collect();
    fixture.set("binary", &binary);
    assert_eq!(fixture.get("binary"), Some(binary));
    let longest = "k".repeat(KEY_BYTES_MAX);
    fixture.set(&longest, b"v");
    assert_eq!(fixture.get(&longest), Some(b"v".to_vec()));
    let too_long = "k".repeat(KEY_BYTES_MAX + 1);
    assert_eq!(fixture.store(StoreMode::Set, &too_long, b"v"), StoreOutcome::TooLarge);
    assert_eq!(fixture.get(&too_long), None);
    assert_eq!(fixture.stat("curr_items"), 4);
    assert_eq!(fixture.stat("total_items"), 4);
    store.check_invariants();
}

#[test]
fn cas_values_are_unique_and_increase_per_key() {
    let fixture = Fixture::new(8 * MIB, Some(4));
    let mut seen = std::collections::HashSet::new();
    let mut last_of_key = HashMap::new();
    for round in 0..50 {
        for key in 0..40 {
            let cas = fixture.set(&format!("key{key}"), format!("{round}").as_bytes());
            assert!(seen.insert(cas), "cas {cas} handed out twice");
            let last = last_of_key.insert(key, cas).unwrap_or(0);
            assert!(cas > last);
        }
    }
}

#[test]
fn add_and_replace_depend_on_presence() {
    let fixture = Fixture::new(8 * MIB, None);
    assert_eq!(fixture.store(StoreMode::Replace, "key", b"1"), StoreOutcome::NotStored);
    assert!(matches!(fixture.store(StoreMode::Add, "key", b"2"), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.store(StoreMode::Add, "key", b"3"), StoreOutcome::NotStored);
    assert!(matches!(fixture.store(StoreMode::Replace, "key", b"4"), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.get("key"), Some(b"4".to_vec()));
    // An expired item is absent for add.
    let store = &fixture.store;
    store.store(&StoreRequest::new(StoreMode::Set, b"short", b"1", 0, fixture.now() + 1), std::task::Waker::noop());
    fixture.advance(1);
    assert!(matches!(fixture.store(StoreMode::Add, "short", b"2"), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.get("short"), Some(b"2".to_vec()));
    assert_eq!(fixture.stat("curr_items"), 2);
    // Add ignores a CAS (memcached), and a failed add counts as an access.
    let mut request = StoreRequest::new(StoreMode::Add, b"fresh", b"1", 0, 0);
    request.compare_cas = Some(12345);
    assert!(matches!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { .. }));
    fixture.advance(5);
    assert_eq!(store.store(&request, std::task::Waker::noop()), StoreOutcome::NotStored);
    let no_bump = GetOptions { no_bump: true, ..GetOptions::default() };
    assert_eq!(fixture.view("fresh", no_bump).unwrap().last_access_unix_s, fixture.now());
    store.check_invariants();
}

#[test]
fn append_and_prepend_keep_flags_and_expiry() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    assert_eq!(fixture.store(StoreMode::Append, "key", b"x"), StoreOutcome::NotStored);
    assert_eq!(fixture.store(StoreMode::Prepend, "key", b"x"), StoreOutcome::NotStored);
    assert_eq!(fixture.get("key"), None);
    let exptime = fixture.now() + 50;
    store.store(&StoreRequest::new(StoreMode::Set, b"key", b"middle", 7, exptime), std::task::Waker::noop());
    let before = fixture.view("key", GetOptions::default()).unwrap();
    let request = StoreRequest::new(StoreMode::Append, b"key", b">>", 99, 0);
    let StoreOutcome::Stored { cas } = store.store(&request, std::task::Waker::noop()) else { panic!() };
    assert!(cas > before.cas);
    let request = StoreRequest::new(StoreMode::Prepend, b"key", b"<<", 98, 1);
    store.store(&request, std::task::Waker::noop());
    let after = fixture.view("key", GetOptions::default()).unwrap();
    assert_eq!(after.value, b"<<middle>>");
    assert_eq!((after.flags, after.exptime_unix_s), (7, exptime));
    // Meta N: append vivifies a missing item with the request's value and the given expiry.
    let mut request = StoreRequest::new(StoreMode::Append, b"new", b"first", 3, 0);
    request.vivify_exptime_unix_s = Some(exptime + 1);
    assert!(matches!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { .. }));
    let view = fixture.view("new", GetOptions::default()).unwrap();
    assert_eq!((view.value.as_slice(), view.flags, view.exptime_unix_s), (&b"first"[..], 3, exptime + 1));
    // ... even with a CAS to compare (there is nothing to compare it with).
    let mut request = StoreRequest::new(StoreMode::Prepend, b"newer", b"v", 0, 0);
    request.vivify_exptime_unix_s = Some(0);
    request.compare_cas = Some(99);
    assert!(matches!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.get("newer"), Some(b"v".to_vec()));
    // Appending to a stale item keeps it stale, with its win token state.
    let invalidate = DeleteOptions { invalidate_exptime_unix_s: Some(EXPTIME_KEEP), ..DeleteOptions::default() };
    store.delete(b"newer", invalidate);
    assert!(fixture.view("newer", GetOptions::default()).unwrap().win);
    fixture.store(StoreMode::Append, "newer", b"w");
    let view = fixture.view("newer", GetOptions::default()).unwrap();
    assert_eq!(view.value, b"vw");
    assert!(view.stale && view.win_token_sent && !view.win);
    // Append beyond the item limit: memcached answers NOT_STORED.
    let big = vec![b'b'; MIB - 100];
    fixture.set("big", &big);
    assert_eq!(fixture.store(StoreMode::Append, "big", &[b'c'; 100]), StoreOutcome::NotStored);
    assert_eq!(fixture.get("big"), Some(big));
    store.check_invariants();
}

#[test]
fn compare_and_swap() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    let cas_request = |value: &'static [u8], compare_cas: u64| {
        let mut request = StoreRequest::new(StoreMode::Set, b"key", value, 0, 0);
        request.compare_cas = Some(compare_cas);
        store.store(&request, std::task::Waker::noop())
    };
    assert_eq!(cas_request(b"1", 1), StoreOutcome::NotFound);
    let cas = fixture.set("key", b"0");
    assert_eq!(cas_request(b"1", cas + 1), StoreOutcome::Exists);
    assert_eq!(cas_request(b"1", cas - 1), StoreOutcome::Exists);
    assert_eq!(fixture.get("key"), Some(b"0".to_vec()));
    let StoreOutcome::Stored { cas: swapped } = cas_request(b"2", cas) else { panic!() };
    assert!(swapped > cas);
    assert_eq!(cas_request(b"3", cas), StoreOutcome::Exists, "the old cas is spent");
    assert_eq!(fixture.get("key"), Some(b"2".to_vec()));
    // Append with a CAS; add with a matching CAS on a present item is still not stored.
    let mut request = StoreRequest::new(StoreMode::Append, b"key", b"+", 0, 0);
    request.compare_cas = Some(cas);
    assert_eq!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Exists);
    request.compare_cas = Some(swapped);
    assert!(matches!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.get("key"), Some(b"2+".to_vec()));
    // Meta E: the client picks the new CAS.
    let mut request = StoreRequest::new(StoreMode::Set, b"key", b"e", 0, 0);
    request.new_cas = Some(12345);
    assert_eq!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { cas: 12345 });
    assert_eq!(fixture.view("key", GetOptions::default()).unwrap().cas, 12345);
}

#[test]
fn invalidation_marks_stale_and_hands_out_one_win_token() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    let cas = fixture.set("key", b"old");
    let exptime = fixture.now() + 30;
    let options = DeleteOptions { compare_cas: None, invalidate_exptime_unix_s: Some(exptime), new_cas: None };
    assert_eq!(store.delete(b"key", options), DeleteOutcome::Deleted);
    let first = fixture.view("key", GetOptions::default()).unwrap();
    assert_eq!(first.value, b"old", "a stale item keeps its value");
    assert!(first.stale && first.win && !first.win_token_sent);
    assert!(first.cas > cas);
    assert_eq!(first.exptime_unix_s, exptime);
    let second = fixture.view("key", GetOptions::default()).unwrap();
    assert!(second.stale && !second.win && second.win_token_sent);
    // A late write with an older CAS is kept but stays stale (meta I with C), keeping the expiry
    // and the token; a current CAS replaces the stale item with a fresh one.
    let mut request = StoreRequest::new(StoreMode::Set, b"key", b"late", 0, 0);
    request.compare_cas = Some(cas);
    assert_eq!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Exists, "without invalidate");
    request.invalidate = true;
    let StoreOutcome::Stored { cas: late_cas } = store.store(&request, std::task::Waker::noop()) else { panic!() };
    let view = fixture.view("key", GetOptions::default()).unwrap();
    assert_eq!(view.value, b"late");
    assert!(view.stale && view.win_token_sent && !view.win);
    assert_eq!(view.exptime_unix_s, exptime);
    let mut request = StoreRequest::new(StoreMode::Set, b"key", b"fresh", 0, 0);
    request.compare_cas = Some(late_cas);
    request.invalidate = true;
    assert!(matches!(store.store(&request, std::task::Waker::noop()), StoreOutcome::Stored { .. }));
    let view = fixture.view("key", GetOptions::default()).unwrap();
    assert!(!view.stale && !view.win && !view.win_token_sent);
    // Invalidation with a chosen CAS, keeping the expiry.
    let fresh_exptime = fixture.view("key", GetOptions::default()).unwrap().exptime_unix_s;
    let options =
        DeleteOptions { compare_cas: None, invalidate_exptime_unix_s: Some(EXPTIME_KEEP), new_cas: Some(777) };
    store.delete(b"key", options);
    let view = fixture.view("key", GetOptions::default()).unwrap();
    assert_eq!((view.cas, view.exptime_unix_s, view.stale), (777, fresh_exptime, true));
}

#[test]
fn delete_with_and_without_cas() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    assert_eq!(store.delete(b"key", DeleteOptions::default()), DeleteOutcome::NotFound);
    let cas = fixture.set("key", b"v");
    let with_cas = |compare_cas| DeleteOptions { compare_cas: Some(compare_cas), ..DeleteOptions::default() };
    assert_eq!(store.delete(b"key", with_cas(cas + 1)), DeleteOutcome::Exists);
    assert_eq!(store.delete(b"key", with_cas(cas)), DeleteOutcome::Deleted);
    assert_eq!(fixture.get("key"), None);
    assert_eq!(store.delete(b"key", DeleteOptions::default()), DeleteOutcome::NotFound);
    fixture.set("key", b"v");
    assert_eq!(store.delete(b"key", DeleteOptions::default()), DeleteOutcome::Deleted);
    assert_eq!(fixture.stat("curr_items"), 0);
    assert_eq!(fixture.stat("bytes"), 0);
    store.check_invariants();
}

#[test]
fn items_expire_lazily_and_are_counted() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    let now = fixture.now();
    store.store(&StoreRequest::new(StoreMode::Set, b"read", b"v", 0, now + 10), std::task::Waker::noop());
    store.store(&StoreRequest::new(StoreMode::Set, b"unread", b"v", 0, now + 10), std::task::Waker::noop());
    store.store(&StoreRequest::new(StoreMode::Set, b"forever", b"v", 0, 0), std::task::Waker::noop());
    store.store(&StoreRequest::new(StoreMode::Set, b"past", b"v", 0, now - 1), std::task::Waker::noop());
    assert_eq!(fixture.get("past"), None, "stored already expired");
    assert!(fixture.get("read").is_some());
    fixture.advance(9);
    assert!(fixture.get("read").is_some());
    assert_eq!(fixture.stat("curr_items"), 3);
    fixture.advance(1);
    assert_eq!(fixture.get("read"), None);
    assert_eq!(fixture.get("unread"), None);
    assert!(fixture.get("forever").is_some());
    assert_eq!(fixture.stat("curr_items"), 1);
    assert_eq!(fixture.stat("reclaimed"), 3);
    assert_eq!(fixture.stat("expired_unfetched"), 2, "past and unread");
    assert_eq!(fixture.stat("get_expired"), 3);
    // Touch extends, and arithmetic and delete see expiry too.
    store.store(&StoreRequest::new(StoreMode::Set, b"touched", b"5", 0, fixture.now() + 5), std::task::Waker::noop());
    let touch = GetOptions { touch_exptime_unix_s: Some(fixture.now() + 100), ..GetOptions::default() };
    assert_eq!(fixture.view("touched", touch).unwrap().exptime_unix_s, fixture.now() + 100);
    fixture.advance(50);
    assert_eq!(value_of(fixture.arithmetic("touched", true, 1)), 6);
    fixture.advance(50);
    assert_eq!(fixture.arithmetic("touched", true, 1), ArithmeticOutcome::NotFound);
    store.check_invariants();
}

#[test]
fn flush_all_now_and_in_the_future() {
    let fixture = Fixture::new(16 * MIB, Some(4));
    let store = &fixture.store;
    for key in 0..8000 {
        fixture.set(&format!("key{key}"), &[b'x'; 1000]);
    }
    assert!(fixture.stat("curr_segments") >= 8);
    store.flush_all(0);
    assert_eq!(fixture.get("key1"), None);
    assert_eq!(fixture.stat("curr_items"), 0);
    assert_eq!(fixture.stat("bytes"), 0);
    assert_eq!(fixture.stat("curr_segments"), 4, "sealed segments are free again");
    store.check_invariants();
    fixture.set("after", b"1");
    assert_eq!(fixture.get("after"), Some(b"1".to_vec()), "items stored after a flush stay");

    // In the future: items stored before the time die when it comes, later ones stay.
    let flush_at = fixture.now() + 10;
    fixture.set("before", b"1");
    store.flush_all(flush_at);
    fixture.advance(9);
    fixture.set("just-before", b"1");
    assert!(fixture.get("before").is_some() && fixture.get("just-before").is_some());
    fixture.advance(1);
    fixture.set("at", b"1");
    assert_eq!(fixture.get("before"), None);
    assert_eq!(fixture.get("just-before"), None);
    assert_eq!(fixture.get("after"), None);
    assert_eq!(fixture.get("at"), Some(b"1".to_vec()));
    assert_eq!(fixture.stat("get_flushed"), 3);
    fixture.advance(100);
    assert_eq!(fixture.get("at"), Some(b"1".to_vec()));
    // A flush that has come stays in effect when another replaces it (memcached would let the
    // items it flushed reappear until the new time).
    store.flush_all(fixture.now() + 5);
    fixture.advance(5);
    fixture.advance(1);
    store.flush_all(fixture.now() + 100);
    assert_eq!(fixture.get("at"), None);
    // A later immediate flush replaces the pending one.
    store.flush_all(fixture.now() + 5);
    store.flush_all(0);
    fixture.set("new", b"1");
    fixture.advance(10);
    assert_eq!(fixture.get("new"), Some(b"1".to_vec()));
    store.check_invariants();
}

#[test]
fn incr_and_decr_on_decimal_values() {
    let fixture = Fixture::new(8 * MIB, None);
    let store = &fixture.store;
    assert_eq!(fixture.arithmetic("n", true, 1), ArithmeticOutcome::NotFound);
    store.store(&StoreRequest::new(StoreMode::Set, b"n", b"99", 5, fixture.now() + 60), std::task::Waker::noop());
    let ArithmeticOutcome::Value { value, cas, exptime_unix_s } = fixture.arithmetic("n", true, 1) else { panic!() };
    assert_eq!((value, exptime_unix_s), (100, fixture.now() + 60));
    let view = fixture.view("n", GetOptions::default()).unwrap();
    assert_eq!((view.value.as_slice(), view.flags, view.cas), (&b"100"[..], 5, cas), "length grew");
    assert_eq!(value_of(fixture.arithmetic("n", false, 1)), 99);
    assert_eq!(fixture.get("n"), Some(b"99 ".to_vec()), "shorter: in place, padded as memcached does");
    assert_eq!(value_of(fixture.arithmetic("n", true, 1)), 100);
    assert_eq!(fixture.get("n"), Some(b"100".to_vec()));
    assert_eq!(value_of(fixture.arithmetic("n", false, 1000)), 0, "decr floors at 0");
    assert_eq!(fixture.get("n"), Some(b"0  ".to_vec()));
    assert_eq!(value_of(fixture.arithmetic("n", true, 12345)), 12345, "longer: a new item");
    assert_eq!(fixture.get("n"), Some(b"12345".to_vec()));
    fixture.set("max", u64::MAX.to_string().as_bytes());
    assert_eq!(value_of(fixture.arithmetic("max", true, 2)), 1, "incr wraps at 2^64");
    assert_eq!(fixture.get("max").unwrap().trim_ascii_end(), b"1");
    for bad in [&b""[..], b"abc", b"-1", b"1.5", b"18446744073709551616", b"100000000000000000000"] {
        fixture.set("bad", bad);
        assert_eq!(fixture.arithmetic("bad", true, 1), ArithmeticOutcome::NonNumeric, "{bad:?}");
        assert_eq!(fixture.get("bad"), Some(bad.to_vec()));
    }
    fixture.set("twenty", b"00000000000000000009");
    assert_eq!(value_of(fixture.arithmetic("twenty", true, 1)), 10);
    assert_eq!(fixture.get("twenty"), Some(b"10                  ".to_vec()));
    // CAS, a chosen new CAS, touch, and the initial value of binary incr / meta N.
    let cas = fixture.set("c", b"10");
    let mut request = ArithmeticRequest {
        key: b"c",
        increment: true,
        delta: 1,
        compare_cas: Some(cas + 1),
        new_cas: None,
        initial: None,
        touch_exptime_unix_s: None,
    };
    assert_eq!(store.arithmetic(&request, std::task::Waker::noop()), ArithmeticOutcome::Exists);
    request.compare_cas = Some(cas);
    request.new_cas = Some(5000);
    request.touch_exptime_unix_s = Some(fixture.now() + 7);
    let outcome = store.arithmetic(&request, std::task::Waker::noop());
    assert_eq!(outcome, ArithmeticOutcome::Value { value: 11, cas: 5000, exptime_unix_s: fixture.now() + 7 });
    let request = ArithmeticRequest {
        key: b"fresh",
        increment: false,
        delta: 5,
        compare_cas: None,
        new_cas: None,
        initial: Some((42, 0)),
        touch_exptime_unix_s: None,
    };
    assert_eq!(value_of(store.arithmetic(&request, std::task::Waker::noop())), 42, "created with the initial value");
    assert_eq!(value_of(store.arithmetic(&request, std::task::Waker::noop())), 37);
    assert_eq!(fixture.get("fresh"), Some(b"37".to_vec()));
    store.check_invariants();
}

#[test]
fn meta_vivify_recache_and_no_bump() {
    let fixture = Fixture::new(8 * MIB, None);
    let exptime = fixture.now() + 30;
    let vivify = GetOptions { vivify_exptime_unix_s: Some(exptime), ..GetOptions::default() };
    let first = fixture.view("key", vivify).unwrap();
    assert_eq!(first.value, b"");
    assert!(first.win && !first.win_token_sent && !first.fetched_before);
    assert_eq!(first.exptime_unix_s, exptime);
    let second = fixture.view("key", vivify).unwrap();
    assert!(!second.win && second.win_token_sent);
    assert_eq!(fixture.stat("curr_items"), 1);
    // With a touch, the vivified item takes the touch's expiry.
    let vivify_and_touch = GetOptions { touch_exptime_unix_s: Some(exptime + 5), ..vivify };
    assert_eq!(fixture.view("other", vivify_and_touch).unwrap().exptime_unix_s, exptime + 5);
    // The winner stores the real value: the token is spent with the old item.
    fixture.store.store(&StoreRequest::new(StoreMode::Set, b"key", b"real", 0, exptime), std::task::Waker::noop());
    // Recache: below the remaining TTL the first reader wins, later ones see Z.
    let recache = GetOptions { recache_below_ttl_s: Some(10), ..GetOptions::default() };
    let view = fixture.view("key", recache).unwrap();
    assert!(!view.win && !view.win_token_sent, "30 s left");
    fixture.advance(21);
    let view = fixture.view("key", recache).unwrap();
    assert!(view.win && !view.win_token_sent, "9 s left");
    let view = fixture.view("key", recache).unwrap();
    assert!(!view.win && view.win_token_sent);
    // A touch comes first: extending the TTL in the same read wins nothing.
    fixture.set("touched", b"v");
    fixture.store.store(&StoreRequest::new(StoreMode::Set, b"touched", b"v", 0, fixture.now() + 5), std::task::Waker::noop());
    let touch_and_recache = GetOptions { touch_exptime_unix_s: Some(fixture.now() + 100), ..recache };
    let view = fixture.view("touched", touch_and_recache).unwrap();
    assert!(!view.win && view.exptime_unix_s == fixture.now() + 100);
    // No bump: last access and fetched state stay as they were.
    fixture.set("quiet", b"v");
    let stored_at = fixture.now();
    fixture.advance(5);
    let no_bump = GetOptions { no_bump: true, ..GetOptions::default() };
    let view = fixture.view("quiet", no_bump).unwrap();
    assert_eq!((view.last_access_unix_s, view.fetched_before), (stored_at, false));
    let view = fixture.view("quiet", GetOptions::default()).unwrap();
    assert_eq!((view.last_access_unix_s, view.fetched_before), (stored_at, false));
    fixture.advance(5);
    let view = fixture.view("quiet", no_bump).unwrap();
    assert_eq!((view.last_access_unix_s, view.fetched_before), (stored_at + 5, true));
}

#[test]
fn item_size_limit_is_header_key_and_value() {
    let max_item_bytes = MIB;
    let fixture = Fixture::with_max_item(16 * MIB, max_item_bytes, None);
    let key = "the-key";
    let largest = max_item_bytes - item::HEADER_BYTES - key.len();
    let value: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    assert!(matches!(fixture.store(StoreMode::Set, key, &value), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.get(key), Some(value.clone()));
    let one_more = vec![0u8; largest + 1];
    assert_eq!(fixture.store(StoreMode::Set, key, &one_more), StoreOutcome::TooLarge);
    assert_eq!(fixture.get(key), Some(value.clone()), "the present item stays");
    // Many items of the largest size, one per segment, read back after being copied around.
    for round in 0..40 {
        fixture.set(&format!("big{round}"), &value);
        assert_eq!(fixture.get(&format!("big{round}")).unwrap().len(), largest);
    }
    fixture.store.check_invariants();
    // A limit that is not a multiple of 8 or of the page size.
    let fixture = Fixture::with_max_item(32 * MIB, 2 * MIB + 3, Some(1));
    let largest = 2 * MIB + 3 - item::HEADER_BYTES - 3;
    assert!(matches!(fixture.store(StoreMode::Set, "k00", &vec![1; largest]), StoreOutcome::Stored { .. }));
    assert_eq!(fixture.store(StoreMode::Set, "k00", &vec![1; largest + 1]), StoreOutcome::TooLarge);
    for round in 10..40 {
        fixture.set(&format!("k{round}"), &vec![round as u8; largest]);
    }
    assert_eq!(fixture.get("k39"), Some(vec![39; largest]));
    fixture.store.check_invariants();
}

#[test]
fn recently_read_items_survive_writing_through_the_memory() {
    let memory_limit_bytes = 16 * MIB;
    let fixture = Fixture::new(memory_limit_bytes, Some(2));
    let value = vec![b'v'; 1000];
    let hot_keys = 200;
    for key in 0..hot_keys {
        fixture.set(&format!("hot{key}"), &value);
    }
    // Three times the memory in cold items; the hot ones are read now and then.
    let cold_keys = 3 * memory_limit_bytes / value.len();
    for key in 0..cold_keys {
        fixture.set(&format!("cold{key}"), &value);
        if key % 2000 == 0 {
            for hot in 0..hot_keys {
                assert!(fixture.get(&format!("hot{hot}")).is_some(), "hot{hot} evicted at cold{key}");
            }
        }
    }
    for hot in 0..hot_keys {
        assert_eq!(fixture.get(&format!("hot{hot}")), Some(value.clone()));
    }
    assert!(fixture.get("cold0").is_none(), "the oldest cold item went first");
    assert!(fixture.get(&format!("cold{}", cold_keys - 1)).is_some(), "the newest is here");
    let evictions = fixture.stat("evictions");
    assert!(evictions as usize > cold_keys / 2, "{evictions}");
    assert_eq!(fixture.stat("evicted_unfetched"), evictions);
    assert!(fixture.stat("items_copied_forward") > 0);
    fixture.store.check_invariants();
}

#[test]
fn overwritten_keys_are_compacted_not_evicted() {
    let fixture = Fixture::new(8 * MIB, Some(1));
    let keys = 500;
    let value = vec![b'x'; 500];
    for round in 0..200u32 {
        for key in 0..keys {
            let mut value = value.clone();
            value[..4].copy_from_slice(&round.to_le_bytes());
            fixture.set(&format!("key{key}"), &value);
        }
    }
    assert_eq!(fixture.stat("evictions"), 0);
    assert!(fixture.stat("segments_compacted") > 0);
    for key in 0..keys {
        assert_eq!(fixture.get(&format!("key{key}")).unwrap()[..4], 199u32.to_le_bytes());
    }
    fixture.store.check_invariants();
}

/// Fills a store with values of one size, three times over, and checks what it counts and what
/// the kernel holds for its arena and index.
fn fill_and_check_memory(memory_limit_bytes: usize, value_bytes: usize) {
    let fixture = Fixture::new(memory_limit_bytes, None);
    let store = &fixture.store;
    let value = vec![b'm'; value_bytes];
    let mut written_bytes = 0;
    let mut key = 0u64;
    while written_bytes < 3 * memory_limit_bytes {
        let outcome = fixture.store(StoreMode::Set, &format!("key:{key}"), &value);
        assert!(matches!(outcome, StoreOutcome::Stored { .. }), "{value_bytes} B, key {key}: {outcome:?}");
        written_bytes += value_bytes + 16;
        key += 1;
    }
    let used_bytes = store.memory_used_bytes();
    let resident_bytes = store.measured_resident_bytes();
    let item_bytes = fixture.stat("bytes") as usize;
    let bound_bytes = memory_limit_bytes + memory_limit_bytes * 15 / 100;
    eprintln!(
        "{value_bytes} B values: used {used_bytes} resident {resident_bytes} items {} of {key} in {item_bytes} B, \
         index {} B, limit {memory_limit_bytes}",
        fixture.stat("curr_items"),
        fixture.stat("hash_bytes"),
    );
    assert!(used_bytes <= memory_limit_bytes, "counted {used_bytes} > {memory_limit_bytes}");
    assert!(resident_bytes <= used_bytes, "resident {resident_bytes} > counted {used_bytes}");
    assert!(resident_bytes <= bound_bytes);
    // What is kept is most of the memory (segments' unused tails and the index are the rest).
    assert!(item_bytes * 2 > memory_limit_bytes, "only {item_bytes} B of items");
    assert_eq!(fixture.get(&format!("key:{}", key - 1)), Some(value));
    if value_bytes == 1 {
        assert!(fixture.stat("segments_released") > 0, "the index grew into the segments' share");
    }
    store.check_invariants();
}

#[test]
fn memory_stays_within_the_limit_with_small_values() {
    fill_and_check_memory(32 * MIB, 1);
    fill_and_check_memory(32 * MIB, 100);
}

#[test]
fn memory_stays_within_the_limit_with_large_values() {
    fill_and_check_memory(32 * MIB, 4096);
    fill_and_check_memory(32 * MIB, 500 * 1024);
    fill_and_check_memory(32 * MIB, MIB - 64);
}

/// A value that names its key and version and repeats a pattern derived from both, so a reader
/// can tell a written value from a torn or mixed one.
fn versioned_value(key: u64, version: u64, length_bytes: usize) -> Vec<u8> {
    let length_bytes = length_bytes.max(24);
    let mut value = Vec::with_capacity(length_bytes + 8);
    value.extend_from_slice(format!("{key}:{version}:").as_bytes());
    let mut pattern = key.wrapping_mul(31).wrapping_add(version);
    while value.len() < length_bytes {
        pattern = pattern.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        value.extend_from_slice(&pattern.to_le_bytes());
    }
    value.truncate(length_bytes);
    value
}

fn check_versioned(key: u64, value: &[u8]) {
    let mut parts = value.splitn(3, |&b| b == b':');
    let key_part: u64 = std::str::from_utf8(parts.next().unwrap()).unwrap().parse().unwrap();
    let version: u64 = std::str::from_utf8(parts.next().unwrap()).unwrap().parse().unwrap();
    assert_eq!(key_part, key, "value of another key");
    assert_eq!(value, versioned_value(key, version, value.len()).as_slice(), "torn value for key {key}");
}

#[test]
fn threads_hammering_overlapping_keys_see_only_written_values() {
    let fixture = Arc::new(Fixture::new(8 * MIB, Some(4)));
    let threads = 4;
    let keys = 3000u64;
    let operations = 60_000;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let fixture = fixture.clone();
            scope.spawn(move || {
                let store = &fixture.store;
                let mut random = Random(0x9e37_79b9 + thread);
                for step in 0..operations {
                    let key = random.below(keys);
                    let key_text = format!("key{key}");
                    match random.below(10) {
                        0..=4 => {
                            let found = store.get(key_text.as_bytes(), GetOptions::default(), std::task::Waker::noop(), &mut |view| {
                                check_versioned(key, view.value);
                            });
                            let _ = found;
                        }
                        5..=7 => {
                            let length = [10, 100, 3000, 20_000][random.below(4) as usize];
                            let value = versioned_value(key, thread << 32 | step, length);
                            let outcome =
                                store.store(&StoreRequest::new(StoreMode::Set, key_text.as_bytes(), &value, 0, 0), std::task::Waker::noop());
                            assert!(matches!(outcome, StoreOutcome::Stored { .. }), "{outcome:?}");
                        }
                        8 => {
                            store.delete(key_text.as_bytes(), DeleteOptions::default());
                        }
                        _ => {
                            // Compare-and-swap with what was just read.
                            let mut seen_cas = None;
                            store
                                .get(key_text.as_bytes(), GetOptions::default(), std::task::Waker::noop(), &mut |view| seen_cas = Some(view.cas));
                            if let Some(cas) = seen_cas {
                                let value = versioned_value(key, thread << 32 | step, 50);
                                let mut request = StoreRequest::new(StoreMode::Set, key_text.as_bytes(), &value, 0, 0);
                                request.compare_cas = Some(cas);
                                let outcome = store.store(&request, std::task::Waker::noop());
                                assert!(matches!(
                                    outcome,
                                    StoreOutcome::Stored { .. } | StoreOutcome::Exists | StoreOutcome::NotFound
                                ));
                            }
                        }
                    }
                }
            });
        }
    });
    assert!(fixture.stat("evictions") > 0, "the test ran under eviction pressure");
    fixture.store.check_invariants();
    for key in 0..keys {
        if let Some(value) = fixture.get(&format!("key{key}")) {
            check_versioned(key, &value);
        }
    }
}

#[test]
fn concurrent_incr_and_cas_loops_lose_no_update() {
    let fixture = Arc::new(Fixture::new(16 * MIB, Some(2)));
    fixture.set("counter", b"0");
    fixture.set("cas-counter", b"0");
    fixture.set("log", b"");
    let threads = 4u64;
    let increments = 5_000u64;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let fixture = fixture.clone();
            scope.spawn(move || {
                let store = &fixture.store;
                for _ in 0..increments {
                    value_of(fixture.arithmetic("counter", true, 1));
                    // A read-modify-write loop on CAS.
                    loop {
                        let mut seen = None;
                        store.get(b"cas-counter", GetOptions::default(), std::task::Waker::noop(), &mut |view| {
                            seen = Some((item::parse_counter(view.value).unwrap(), view.cas));
                        });
                        let (number, cas) = seen.unwrap();
                        let next = (number + 1).to_string();
                        let mut request = StoreRequest::new(StoreMode::Set, b"cas-counter", next.as_bytes(), 0, 0);
                        request.compare_cas = Some(cas);
                        match store.store(&request, std::task::Waker::noop()) {
                            StoreOutcome::Stored { .. } => break,
                            StoreOutcome::Exists => continue,
                            other => panic!("{other:?}"),
                        }
                    }
                }
                // Appends of fixed-size tokens must all be there, none torn.
                for index in 0..500u64 {
                    let token = format!("{thread:02}{index:06};");
                    let outcome = fixture.store(StoreMode::Append, "log", token.as_bytes());
                    assert!(matches!(outcome, StoreOutcome::Stored { .. }));
                }
            });
        }
    });
    let total = threads * increments;
    assert_eq!(fixture.get("counter"), Some(total.to_string().into_bytes()));
    assert_eq!(fixture.get("cas-counter"), Some(total.to_string().into_bytes()));
    let log = fixture.get("log").unwrap();
    assert_eq!(log.len(), (threads * 500 * 9) as usize);
    let mut next_of_thread = vec![0u64; threads as usize];
    for token in log.chunks(9) {
        let text = std::str::from_utf8(token).unwrap();
        assert_eq!(&text[8..], ";");
        let thread: usize = text[..2].parse().unwrap();
        let index: u64 = text[2..8].parse().unwrap();
        assert_eq!(index, next_of_thread[thread], "appends of one thread in order");
        next_of_thread[thread] += 1;
    }
    fixture.store.check_invariants();
}

#[derive(Debug, Clone)]
struct ModelItem {
    value: Vec<u8>,
    flags: u32,
    exptime_unix_s: u64,
    cas: u64,
}

#[test]
fn random_operations_match_a_hash_map_model() {
    let fixture = Fixture::new(64 * MIB, Some(4));
    let store = &fixture.store;
    let mut model: HashMap<Vec<u8>, ModelItem> = HashMap::new();
    let mut random = Random(0x5eed_1234_abcd);
    let keys = 300;
    for step in 0..60_000u64 {
        let now = fixture.now();
        model.retain(|_, item| item.exptime_unix_s == 0 || item.exptime_unix_s > now);
        let key = format!("key{}", random.below(keys)).into_bytes();
        let present = model.get(&key).cloned();
        let value_length = [0, 1, 5, 20, 300, 5000][random.below(6) as usize];
        let value: Vec<u8> = if random.below(4) == 0 {
            random.below(1000).to_string().into_bytes()
        } else {
            (0..value_length).map(|_| random.below(256) as u8).collect()
        };
        let flags = random.below(4) as u32;
        let exptime_unix_s = match random.below(5) {
            0 => now + 1 + random.below(20),
            _ => 0,
        };
        match random.below(12) {
            0 | 1 => {
                let mut seen = None;
                let outcome = store.get(&key, GetOptions::default(), std::task::Waker::noop(), &mut |view| seen = Some(OwnedView::from(view)));
                match (&present, seen) {
                    (None, None) => assert_eq!(outcome, GetOutcome::Miss),
                    (Some(item), Some(view)) => {
                        assert_eq!(view.value, item.value, "step {step}");
                        assert_eq!(
                            (view.flags, view.cas, view.exptime_unix_s),
                            (item.flags, item.cas, item.exptime_unix_s)
                        );
                    }
                    (expected, seen) => panic!("step {step}: expected {expected:?}, saw {seen:?}"),
                }
            }
            2..=6 => {
                let mode = [StoreMode::Set, StoreMode::Add, StoreMode::Replace, StoreMode::Append, StoreMode::Prepend]
                    [random.below(5) as usize];
                let mut request = StoreRequest::new(mode, &key, &value, flags, exptime_unix_s);
                let compare = random.below(4);
                if compare == 0 {
                    request.compare_cas = Some(present.as_ref().map_or(1, |item| item.cas));
                } else if compare == 1 {
                    request.compare_cas = Some(present.as_ref().map_or(1, |item| item.cas + 1));
                }
                let outcome = store.store(&request, std::task::Waker::noop());
                let compare_cas = if mode == StoreMode::Add { None } else { request.compare_cas };
                let expected = match (&present, compare_cas) {
                    (None, Some(_)) => Err(StoreOutcome::NotFound),
                    (Some(item), Some(cas)) if cas != item.cas => Err(StoreOutcome::Exists),
                    (Some(_), _) if mode == StoreMode::Add => Err(StoreOutcome::NotStored),
                    (None, _) if matches!(mode, StoreMode::Replace | StoreMode::Append | StoreMode::Prepend) => {
                        Err(StoreOutcome::NotStored)
                    }
                    (Some(item), _) if mode == StoreMode::Append => {
                        Ok(ModelItem { value: [item.value.clone(), value.clone()].concat(), ..item.clone() })
                    }
                    (Some(item), _) if mode == StoreMode::Prepend => {
                        Ok(ModelItem { value: [value.clone(), item.value.clone()].concat(), ..item.clone() })
                    }
                    _ => Ok(ModelItem { value: value.clone(), flags, exptime_unix_s, cas: 0 }),
                };
                match expected {
                    Err(expected) => assert_eq!(outcome, expected, "step {step}"),
                    Ok(mut item) => {
                        if !fixture.store.fits(key.len(), item.value.len()) {
                            assert_eq!(outcome, StoreOutcome::NotStored, "an append too large");
                            continue;
                        }
                        let StoreOutcome::Stored { cas } = outcome else { panic!("step {step}: {outcome:?}") };
                        item.cas = cas;
                        model.insert(key, item);
                    }
                }
            }
            7 => {
                let outcome = store.delete(&key, DeleteOptions::default());
                assert_eq!(outcome == DeleteOutcome::Deleted, model.remove(&key).is_some(), "step {step}");
            }
            8 | 9 => {
                let increment = random.below(2) == 0;
                let delta = if random.below(10) == 0 { u64::MAX - random.below(3) } else { random.below(100) };
                let outcome = fixture.arithmetic(std::str::from_utf8(&key).unwrap(), increment, delta);
                match &present {
                    None => assert_eq!(outcome, ArithmeticOutcome::NotFound),
                    Some(item) => match item::parse_counter(&item.value) {
                        None => assert_eq!(outcome, ArithmeticOutcome::NonNumeric, "step {step}"),
                        Some(number) => {
                            let expected =
                                if increment { number.wrapping_add(delta) } else { number.saturating_sub(delta) };
                            let ArithmeticOutcome::Value { value, cas, exptime_unix_s } = outcome else {
                                panic!("step {step}: {outcome:?}")
                            };
                            assert_eq!((value, exptime_unix_s), (expected, item.exptime_unix_s));
                            let mut value = expected.to_string().into_bytes();
                            if value.len() <= item.value.len() {
                                value.resize(item.value.len(), b' ');
                            }
                            model.insert(key, ModelItem { value, cas, ..item.clone() });
                        }
                    },
                }
            }
            10 => fixture.advance(random.below(3)),
            _ => {
                if random.below(100) == 0 {
                    store.flush_all(0);
                    model.clear();
                }
            }
        }
        if step % 10_000 == 0 {
            store.check_invariants();
        }
    }
    assert_eq!(fixture.stat("evictions"), 0, "the model has no eviction");
    let now = fixture.now();
    model.retain(|_, item| item.exptime_unix_s == 0 || item.exptime_unix_s > now);
    for (key, item) in &model {
        assert_eq!(fixture.get(std::str::from_utf8(key).unwrap()).as_ref(), Some(&item.value));
    }
    store.check_invariants();
}

#[test]
fn the_smallest_store_keeps_working_on_two_threads() {
    // Three segments: one active, two to recycle; two threads often hold both in flight.
    let fixture = Arc::new(Fixture::new(3 * MIB, None));
    assert_eq!(fixture.store.shard_count(), 1);
    std::thread::scope(|scope| {
        for thread in 0..2u64 {
            let fixture = fixture.clone();
            scope.spawn(move || {
                let mut random = Random(thread + 1);
                for step in 0..3000u64 {
                    let length = [1, 1000, 100_000, MIB - 100][random.below(4) as usize];
                    let key = random.below(50);
                    let value = versioned_value(key, thread << 32 | step, length);
                    let outcome = fixture.store(StoreMode::Set, &format!("key{key}"), &value);
                    assert!(matches!(outcome, StoreOutcome::Stored { .. }), "{outcome:?}");
                    if let Some(value) = fixture.get(&format!("key{}", random.below(50))) {
                        check_versioned_prefix(&value);
                    }
                }
            });
        }
    });
    // At this size the floor of resident segments (one active per shard, two more) holds the
    // whole arena, and the index comes on top: within the bound, not within the limit.
    let used_bytes = fixture.store.memory_used_bytes();
    assert!(used_bytes <= 3 * MIB + 3 * MIB * 15 / 100, "{used_bytes}");
    assert!(fixture.store.measured_resident_bytes() <= used_bytes);
    fixture.store.check_invariants();
}

fn check_versioned_prefix(value: &[u8]) {
    let key: u64 = std::str::from_utf8(value.split(|&b| b == b':').next().unwrap()).unwrap().parse().unwrap();
    check_versioned(key, value);
}
