//! The store with its SSD tier: spill, read back, promotion, append/incr on spilled items, a full
//! log, compaction, damaged and unreadable records, restart. Black-box through the `Storage`
//! trait, plus the invariants (`check_invariants`) after each scenario.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;

use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, GetOptions, GetOutcome, Storage, StoreMode, StoreOutcome, StoreRequest,
};

use crate::{Clock, SsdConfig, Store, StoreConfig, LOG_FILE_NAME};

const MIB: usize = 1 << 20;

/// A waker a test thread waits on.
#[derive(Default)]
struct Flag {
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.signal.notify_all();
    }
}

impl Flag {
    fn wait(&self) {
        let woken = self.woken.lock().unwrap();
        let (mut woken, timeout) = self.signal.wait_timeout_while(woken, Duration::from_secs(20), |woken| !*woken).unwrap();
        assert!(!timeout.timed_out(), "the store never woke a pending read");
        *woken = false;
    }
}

struct Fixture {
    store: Store,
    dir: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("slipstream-tier-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// 16 MiB of memory (16 segments, about 7 MiB of them taken by the tier's buffers), items up to
/// 512 KiB, and a log of `ssd_mib`.
fn hybrid(name: &str, ssd_mib: u64) -> Fixture {
    let dir = temp_dir(name);
    let config = StoreConfig {
        memory_limit_bytes: 16 * MIB,
        max_item_bytes: 512 << 10,
        shards: Some(2),
        clock: Clock::System,
        ssd: Some(SsdConfig { dir: dir.clone(), size_bytes: ssd_mib << 20, io_threads: 2 }),
    };
    Fixture { store: Store::new(config).unwrap(), dir }
}

fn value_of(index: usize, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|offset| (index * 31 + offset * 7) as u8).collect()
}

fn set(store: &Store, key: &str, value: &[u8]) {
    let outcome = store.store(&StoreRequest::new(StoreMode::Set, key.as_bytes(), value, 0, 0), Waker::noop());
    assert!(matches!(outcome, StoreOutcome::Stored { .. }), "{key}: {outcome:?}");
}

/// A get as a connection does it: retried when woken. Returns the value, and whether it waited.
fn get(store: &Store, key: &str) -> (Option<Vec<u8>>, bool) {
    let flag = Arc::new(Flag::default());
    let waker = Waker::from(flag.clone());
    let mut waited = false;
    loop {
        let mut value = None;
        match store.get(key.as_bytes(), GetOptions::default(), &waker, &mut |view| value = Some(view.value.to_vec())) {
            GetOutcome::Hit => return (value, waited),
            GetOutcome::Miss => return (None, waited),
            GetOutcome::Pending => {
                waited = true;
                flag.wait();
            }
        }
    }
}

fn ssd_stats(store: &Store) -> Vec<(String, String)> {
    store.stats().into_iter().filter(|(name, _)| name.starts_with("ssd") || name.starts_with("evic") || name.contains("items")).collect()
}

fn stat(store: &Store, name: &str) -> u64 {
    let stats = store.stats();
    let (_, value) = stats.iter().find(|(stat, _)| stat == name).unwrap_or_else(|| panic!("no stat {name}"));
    value.parse().unwrap()
}

/// Sets `count` items of `bytes` (keys "key-<i>").
fn fill(store: &Store, count: usize, bytes: usize) {
    for index in 0..count {
        set(store, &format!("key-{index}"), &value_of(index, bytes));
    }
}

#[test]
fn cold_values_spill_instead_of_being_evicted_and_read_back_intact() {
    let fixture = hybrid("spill", 64);
    let store = &fixture.store;
    assert!(store.may_wait());
    // 6000 x 4 KiB = 24 MiB through about 9 MiB of memory for items.
    fill(store, 6000, 4096);
    assert!(stat(store, "ssd_spills") > 3000, "most went out: {}", stat(store, "ssd_spills"));
    assert_eq!(stat(store, "evictions"), 0, "nothing evicted while the log has room: {:?}", ssd_stats(store));
    assert_eq!(stat(store, "curr_items"), 6000);
    store.check_invariants();
    let mut waited = 0;
    for index in 0..6000 {
        let (value, did_wait) = get(store, &format!("key-{index}"));
        assert_eq!(value.as_deref(), Some(&value_of(index, 4096)[..]), "key-{index}: {:?}", ssd_stats(store));
        waited += did_wait as usize;
    }
    assert!(waited > 1000, "values out on the SSD were read by the I/O threads: {waited}");
    assert!(stat(store, "ssd_promotions") as usize >= waited);
    assert_eq!(stat(store, "ssd_crc_failures") + stat(store, "ssd_io_errors"), 0);
    store.check_invariants();
}

#[test]
fn a_value_read_back_stays_in_memory_and_goes_out_again_without_a_write() {
    let fixture = hybrid("promote", 64);
    let store = &fixture.store;
    fill(store, 4000, 4096);
    let (value, waited) = get(store, "key-0");
    assert!(waited, "the first item went out first");
    assert_eq!(value.unwrap(), value_of(0, 4096));
    let (value, waited) = get(store, "key-0");
    assert!(!waited, "promoted: now in memory");
    assert_eq!(value.unwrap(), value_of(0, 4096));
    // Push it out again: its record is still valid, so it leaves without being written.
    let demotions = stat(store, "ssd_demotions");
    let writes = stat(store, "ssd_writes");
    let spills = stat(store, "ssd_spills");
    for index in 4000..8000 {
        set(store, &format!("key-{index}"), &value_of(index, 4096));
    }
    assert!(stat(store, "ssd_demotions") > demotions);
    assert_eq!(stat(store, "ssd_writes") - writes, stat(store, "ssd_spills") - spills, "a write per spill only");
    let (value, waited) = get(store, "key-0");
    assert!(waited);
    assert_eq!(value.unwrap(), value_of(0, 4096));
    store.check_invariants();
}

#[test]
fn append_and_incr_on_spilled_items_wait_for_the_value() {
    let fixture = hybrid("append", 64);
    let store = &fixture.store;
    set(store, "counter", format!("{:0>200}", 41).as_bytes());
    set(store, "text", &[b'a'; 300]);
    fill(store, 4000, 4096);
    assert!(stat(store, "ssd_items") > 1000, "most went out");
    let flag = Arc::new(Flag::default());
    let waker = Waker::from(flag.clone());
    let append = StoreRequest::new(StoreMode::Append, b"text", b"bc", 0, 0);
    let mut outcome = store.store(&append, &waker);
    assert_eq!(outcome, StoreOutcome::Pending, "the value to append to is on the SSD");
    while outcome == StoreOutcome::Pending {
        flag.wait();
        outcome = store.store(&append, &waker);
    }
    assert!(matches!(outcome, StoreOutcome::Stored { .. }));
    let mut expected = vec![b'a'; 300];
    expected.extend_from_slice(b"bc");
    assert_eq!(get(store, "text").0.unwrap(), expected);
    let incr = ArithmeticRequest {
        key: b"counter",
        increment: true,
        delta: 1,
        compare_cas: None,
        new_cas: None,
        initial: None,
        touch_exptime_unix_s: None,
    };
    let mut outcome = store.arithmetic(&incr, &waker);
    assert_eq!(outcome, ArithmeticOutcome::Pending);
    while outcome == ArithmeticOutcome::Pending {
        flag.wait();
        outcome = store.arithmetic(&incr, &waker);
    }
    assert!(matches!(outcome, ArithmeticOutcome::Value { value: 42, .. }), "{outcome:?}");
    store.check_invariants();
}

#[test]
fn a_full_log_drops_its_oldest_segment_and_keeps_serving() {
    let fixture = hybrid("full", 16);
    let store = &fixture.store;
    // 40 MiB through about 9 MiB of memory and a 16 MiB log.
    fill(store, 10_000, 4096);
    assert!(stat(store, "ssd_segments_dropped") > 0);
    let mut hits = 0;
    for index in 0..10_000 {
        if let (Some(value), _) = get(store, &format!("key-{index}")) {
            assert_eq!(value, value_of(index, 4096));
            hits += 1;
        }
    }
    assert!(hits > 3000, "memory and log hold more than a third: {hits}");
    assert!(hits < 10_000);
    // Items whose record was dropped were unlinked by the gets.
    assert_eq!(stat(store, "curr_items"), hits);
    let (value, _) = get(store, "key-0");
    assert_eq!(value, None, "the oldest is gone");
    set(store, "after", b"still works");
    assert_eq!(get(store, "after").0.unwrap(), b"still works");
    store.check_invariants();
}

#[test]
fn mostly_dead_log_segments_are_compacted() {
    let fixture = hybrid("compact", 32);
    let store = &fixture.store;
    // The log has 8 segments of 4 MiB. Spill about 24 MiB, delete most of it (dead records),
    // keep spilling: the writer compacts the mostly dead segments instead of dropping them.
    fill(store, 6000, 4096);
    for index in 0..6000 {
        if index % 8 != 0 {
            store.delete(format!("key-{index}").as_bytes(), Default::default());
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for round in 0..20 {
        for index in 0..1000 {
            set(store, &format!("more-{round}-{index}"), &value_of(index, 4096));
        }
        if stat(store, "ssd_compactions") > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(std::time::Instant::now() < deadline);
    }
    assert!(stat(store, "ssd_compactions") > 0, "compacted");
    assert!(stat(store, "ssd_records_compacted") > 0);
    // The survivors of the first batch whose records were moved read back intact.
    let mut found = 0;
    for index in (0..6000).step_by(8) {
        if let (Some(value), _) = get(store, &format!("key-{index}")) {
            assert_eq!(value, value_of(index, 4096));
            found += 1;
        }
    }
    assert!(found > 0);
    store.check_invariants();
}

/// The record of `key` in the log file, once it is on the file (not in a write buffer).
fn record_offset_on_file(store: &Store, key: &str) -> u64 {
    let hash = store.hash(key.as_bytes());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let descriptor = {
            let shard = crate::lock(&store.shards[store.shard_of(hash)].0);
            let slot = shard
                .index
                .find(crate::index::index_hash(hash), |location| store.item_at(location).key() == key.as_bytes())
                .expect("linked");
            store.item_at(shard.index.location(slot)).descriptor().expect("out on the SSD")
        };
        let log = store.ssd.as_ref().unwrap();
        if log.with_buffered(&descriptor, |_| ()).is_none() {
            return descriptor.offset_bytes;
        }
        assert!(std::time::Instant::now() < deadline, "the record was never written");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_damaged_record_is_a_miss_and_counted_never_wrong_data() {
    let fixture = hybrid("crc", 64);
    let store = &fixture.store;
    fill(store, 6000, 4096);
    let offset = record_offset_on_file(store, "key-0");
    let file = std::fs::OpenOptions::new().write(true).open(fixture.dir.join(LOG_FILE_NAME)).unwrap();
    // A byte in the middle of the value.
    file.write_all_at(&[0xA5 ^ value_of(0, 4096)[2000]], offset + 16 + 5 + 2000).unwrap();
    let (value, waited) = get(store, "key-0");
    assert!(waited);
    assert_eq!(value, None, "a checksum mismatch is a miss");
    assert_eq!(stat(store, "ssd_crc_failures"), 1);
    assert_eq!(get(store, "key-1").0.unwrap(), value_of(1, 4096), "the rest is fine");
    store.check_invariants();
}

#[test]
fn an_unreadable_log_makes_misses_and_counts_io_errors() {
    let fixture = hybrid("io", 64);
    let store = &fixture.store;
    fill(store, 6000, 4096);
    record_offset_on_file(store, "key-0");
    // Every full buffer written first: a write after the cut would extend the file again and
    // leave zeros (a checksum failure) where key-0's record was, instead of a short read.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stat(store, "ssd_buffers_queued") > 0 {
        assert!(std::time::Instant::now() < deadline, "the writer never caught up");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Cut the file under the server: reads beyond its end fail.
    std::fs::OpenOptions::new().write(true).open(fixture.dir.join(LOG_FILE_NAME)).unwrap().set_len(0).unwrap();
    let (value, waited) = get(store, "key-0");
    assert!(waited);
    assert_eq!(value, None);
    assert!(stat(store, "ssd_io_errors") >= 1);
    set(store, "after", b"still works");
    assert_eq!(get(store, "after").0.unwrap(), b"still works");
    store.check_invariants();
}

#[test]
fn a_restart_starts_from_an_empty_log() {
    let dir = temp_dir("restart");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(LOG_FILE_NAME), vec![0xEE; 1 << 20]).unwrap();
    let config = StoreConfig {
        memory_limit_bytes: 8 * MIB,
        max_item_bytes: 512 << 10,
        shards: Some(2),
        clock: Clock::System,
        ssd: Some(SsdConfig { dir: dir.clone(), size_bytes: 16 << 20, io_threads: 1 }),
    };
    for round in 0..2 {
        let store = Store::new(config.clone()).unwrap();
        assert_eq!(stat(&store, "curr_items"), 0, "round {round}: nothing survives");
        assert_eq!(stat(&store, "ssd_bytes"), 0);
        fill(&store, 3000, 4096);
        assert_eq!(get(&store, "key-0").0.unwrap(), value_of(0, 4096));
        store.check_invariants();
    }
    assert_eq!(std::fs::metadata(dir.join(LOG_FILE_NAME)).unwrap().len(), 16 << 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn small_values_and_data_that_fits_never_touch_the_ssd() {
    let fixture = hybrid("small", 64);
    let store = &fixture.store;
    fill(store, 1000, 4096);
    assert_eq!(stat(store, "ssd_writes"), 0, "4 MiB fit in 9 MiB");
    for index in 0..1000 {
        assert_eq!(get(store, &format!("key-{index}")), (Some(value_of(index, 4096)), false));
    }
    // Values under the spill threshold are evicted as without the tier.
    for index in 0..200_000 {
        set(store, &format!("small-{index}"), &value_of(index, 64));
    }
    assert!(stat(store, "evictions") > 0);
    store.check_invariants();
    assert_eq!(fixture.store.ssd.as_ref().unwrap().counters.crc_failures.load(Relaxed), 0);
}

#[test]
fn a_log_too_small_or_a_bad_thread_count_is_refused() {
    let dir = temp_dir("invalid");
    let config = |size_bytes: u64, io_threads: usize| StoreConfig {
        memory_limit_bytes: 8 * MIB,
        max_item_bytes: 1 << 20,
        shards: None,
        clock: Clock::System,
        ssd: Some(SsdConfig { dir: dir.clone(), size_bytes, io_threads }),
    };
    assert!(Store::new(config(8 << 20, 2)).is_err(), "fewer than 4 log segments");
    assert!(Store::new(config(64 << 20, 0)).is_err());
    assert!(Store::new(config(64 << 20, 65)).is_err());
    assert!(Store::new(config(64 << 20, 2)).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn when_memory_is_full_of_headers_the_cold_ones_are_evicted() {
    let fixture = hybrid("headers", 128);
    let store = &fixture.store;
    // 300k items of 200 bytes: their headers (64 bytes each out on the SSD) outgrow memory.
    // How many items memory holds moves in a cycle (a segment of headers is evicted at once, and
    // where the cycle ends depends on the random hash seed): sample it over the second half.
    let mut held_samples = Vec::new();
    for index in 0..300_000 {
        set(store, &format!("h{index}"), &value_of(index, 200));
        if index >= 150_000 && index % 5_000 == 0 {
            // (An append that found the writer behind evicts its item instead: count those too,
            // the machine may be busy.)
            held_samples.push(stat(store, "curr_items") + stat(store, "ssd_write_stalls"));
        }
    }
    assert!(stat(store, "ssd_header_evictions") > 0, "{:?}", ssd_stats(store));
    // Memory holds about 37k of these items with their values; with headers only, more: the mean
    // was 55k to 65k over 40 runs (a single sample, 35k to 80k).
    let held_mean = held_samples.iter().sum::<u64>() / held_samples.len() as u64;
    assert!(held_mean > 48_000, "{held_samples:?} {:?}", ssd_stats(store));
    assert_eq!(get(store, "h299999").0.unwrap(), value_of(299_999, 200));
    store.check_invariants();
}
