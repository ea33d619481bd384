//! The cache's store: memcached's semantics (`cache_proto::storage::Storage`) over segments in one
//! bounded arena.
//!
//! - Memory: one anonymous mapping of `memory_limit_bytes`, cut into segments (1 MiB, or the
//!   item size limit if larger). Items are appended to their shard's active segment; there is no
//!   per-item allocation and no slab class. Overwritten, deleted and expired items are garbage
//!   until their segment is recycled.
//! - Index: one open-addressing table per shard, 8 bytes per slot (location plus hash bits), in
//!   its own mapping. Shards are chosen by the key's hash, each under its own lock; one lock per
//!   operation, and never two shard locks at once (the segment pool's lock is always taken last).
//! - Eviction: when no segment is free, the oldest sealed segment (FIFO across all shards) is
//!   recycled with a second chance: items read since they were written (or last moved) are
//!   copied forward into their shard's active segment, the rest are unlinked. When that segment
//!   is full, the victim itself becomes the shard's active segment, its survivors compacted to
//!   its front. Among the 8 oldest segments, one that is at most a quarter live is compacted
//!   instead of evicting the oldest. This approximates LRU as CLOCK does, at segment granularity.
//! - Expiry is lazy (on access, or when a segment is recycled). flush_all now unlinks everything
//!   at once; a delayed one is checked against each item's store time.
//! - Accounting: resident segments + index tables + bookkeeping <= `memory_limit_bytes`. When an
//!   index table grows, segments are released to the kernel (MADV_DONTNEED) to stay within it;
//!   only one active segment per shard and two more always stay (this floor matters only for
//!   stores of a few segments).
//! - An SSD tier (issue 5) would plug in at `item::ItemPtr::value_location`: keys and headers stay
//!   in segments, a flag marks values moved to a log.
//!
//! Per item: a 32-byte header (`item`), key and value padded to 8 bytes, and one index slot of
//! 8 bytes at a load between 3/8 and 3/4 (11 to 21 bytes per item).
//!
//! Files: here the store's state and its item-level steps (find, link, reserve room);
//! `commands.rs` memcached's commands over them (the `Storage` trait); `evict.rs` making room
//! (segment recycling, release to the kernel); `tier.rs` and `ssd.rs` the SSD tier.

mod arena;
mod commands;
mod crc32c;
mod evict;
mod hash;
mod index;
mod item;
mod pool;
mod ssd;
#[cfg(test)]
mod ssd_tests;
mod tier;
#[cfg(test)]
mod tests;

use arena::Mapping;
use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreMode, StoreOutcome, StoreRequest, EXPTIME_KEEP,
};
use index::{index_hash, Index};
use item::{bits, item_bytes, time_s32, ItemHeader, ItemPtr, HEADER_BYTES};
pub use ssd::LOG_FILE_NAME;
use pool::{Pool, Victim};
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

/// memcached's key length limit; longer keys are never stored.
pub const KEY_BYTES_MAX: usize = 250;
/// Segments are at least this large (and at least `max_item_bytes`, so every item fits in one).
pub const SEGMENT_BYTES_MIN: usize = 1 << 20;
/// The smallest `-I` accepted (memcached's own minimum).
pub const MAX_ITEM_BYTES_MIN: usize = 1024;
/// The largest `-I` accepted (memcached's own maximum); value lengths are kept in 32 bits.
pub const MAX_ITEM_BYTES_MAX: usize = 1 << 30;
/// The largest arena the index's 36-bit locations (8-byte units) address.
pub const MEMORY_LIMIT_BYTES_MAX: usize = 1 << 39;
/// A store needs segments to append to, to evict, and to take meanwhile.
pub const SEGMENTS_MIN: usize = 3;
pub const SHARDS_MAX: usize = 256;
/// Shards are limited so that at most a quarter of the segments are active (partly filled).
const SEGMENTS_PER_SHARD_MIN: usize = 4;
/// Shards per CPU by default: enough that two workers rarely meet on one lock.
const SHARDS_PER_CPU: usize = 4;
/// Times an operation runs under its shard lock before giving up for want of room. Installing a
/// taken segment always makes room, so the second attempt succeeds; more are needed only when no
/// segment could be taken because other threads hold them in flight (a store of few segments):
/// then the operation yields and tries again.
const ROOM_ATTEMPTS_MAX: usize = 64;

/// Where the store reads the time (Unix seconds).
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// CLOCK_REALTIME_COARSE (a vDSO read, no system call).
    #[default]
    System,
    /// A time set by the owner of the counter (tests).
    Manual(Arc<AtomicU64>),
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Everything the store keeps resident (segments, index, bookkeeping) fits in this (`-m`).
    pub memory_limit_bytes: usize,
    /// The largest item, header (32 bytes) + key + value, in bytes (`-I`).
    pub max_item_bytes: usize,
    /// Lock shards; `None`: 4 per CPU. Either way at most a power of two no larger than
    /// `SHARDS_MAX` and than a quarter of the segments (the effective count is in `stats`).
    pub shards: Option<usize>,
    pub clock: Clock,
    /// The SSD tier (hybrid mode): when memory is full, cold values move to a log on the SSD
    /// instead of being evicted. `None`: memory only.
    pub ssd: Option<SsdConfig>,
}

/// Where and how large the SSD tier's log is (`--ssd-path`, `--ssd-size`).
#[derive(Clone, Debug)]
pub struct SsdConfig {
    /// A directory; the log is one file in it, created afresh at start (nothing survives a
    /// restart, as with memcached's extstore).
    pub dir: std::path::PathBuf,
    /// The log file's size.
    pub size_bytes: u64,
    /// Threads that read spilled values (and write the log): workers never wait on the SSD.
    pub io_threads: usize,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { memory_limit_bytes: 64 << 20, max_item_bytes: 1 << 20, shards: None, clock: Clock::System, ssd: None }
    }
}

#[derive(Debug)]
pub enum StoreError {
    Config(String),
    /// The arena or an index table could not be mapped.
    Map(std::io::Error),
    /// The SSD log could not be created, reserved or locked, or its threads started.
    Ssd(std::io::Error),
}

impl fmt::Display for StoreError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Config(reason) => write!(formatter, "invalid store configuration: {reason}"),
            StoreError::Map(error) => write!(formatter, "cannot map the store's memory: {error}"),
            StoreError::Ssd(error) => write!(formatter, "cannot set up the SSD tier: {error}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Bytes of linked items in one segment, on its own cache line: shards update their segments'
/// counters on every write, and neighbouring segments belong to different shards.
#[repr(align(64))]
struct LiveBytes(AtomicU32);

/// A cache line and its neighbour (the adjacent-line prefetcher pairs them), so that shard locks
/// do not share lines.
#[repr(align(128))]
struct Padded<T>(T);

#[derive(Debug, Default, Clone, Copy)]
struct ShardCounters {
    curr_items: u64,
    /// Bytes of linked items (header, key, value, padding).
    item_bytes: u64,
    total_items: u64,
    evictions: u64,
    evicted_unfetched: u64,
    expired_unfetched: u64,
    /// Expired or flushed items unlinked (on access or when their segment was recycled).
    reclaimed: u64,
    get_expired: u64,
    get_flushed: u64,
    /// Live items moved to the active segment when their segment was recycled.
    items_copied_forward: u64,
    /// Items whose value is only on the SSD (linked now).
    ssd_items: u64,
    /// Cold items whose value was written to the SSD log instead of being evicted.
    ssd_spills: u64,
    /// Cold items moved out of memory without a write (their record was still valid).
    ssd_demotions: u64,
    /// Items read back from the SSD into memory.
    ssd_promotions: u64,
    /// Items whose record was dropped with its log segment (or failed its check): now misses.
    ssd_items_lost: u64,
    /// Items with only a header in memory evicted for want of memory for headers.
    ssd_header_evictions: u64,
}

impl ShardCounters {
    fn add(&mut self, other: &ShardCounters) {
        self.curr_items += other.curr_items;
        self.item_bytes += other.item_bytes;
        self.total_items += other.total_items;
        self.evictions += other.evictions;
        self.evicted_unfetched += other.evicted_unfetched;
        self.expired_unfetched += other.expired_unfetched;
        self.reclaimed += other.reclaimed;
        self.get_expired += other.get_expired;
        self.get_flushed += other.get_flushed;
        self.items_copied_forward += other.items_copied_forward;
        self.ssd_items += other.ssd_items;
        self.ssd_spills += other.ssd_spills;
        self.ssd_demotions += other.ssd_demotions;
        self.ssd_promotions += other.ssd_promotions;
        self.ssd_items_lost += other.ssd_items_lost;
        self.ssd_header_evictions += other.ssd_header_evictions;
    }
}

#[derive(Debug, Clone, Copy)]
struct ActiveSegment {
    segment: u32,
    used_bytes: usize,
}

struct Shard {
    index: Index,
    active: Option<ActiveSegment>,
    /// CAS values are unique across the store: shard `i` hands out `i + 1 + k * shard_count`.
    cas_next: u64,
    counters: ShardCounters,
}

/// What an attempt under a shard lock came to.
enum Attempt<R> {
    Done(R),
    /// The active segment has no room and no spare segment is at hand: take one and try again.
    NeedRoom,
}

/// A live item found in the index.
#[derive(Clone, Copy)]
struct Found {
    slot: usize,
    location: u64,
    item: ItemPtr,
}

/// Where a new item goes: reserved room, and the key's entry it replaces (if any).
struct Placement {
    hash: u64,
    replaced: Option<Found>,
    offset_bytes: usize,
}

/// Why a found item is not live.
#[derive(PartialEq, Eq)]
enum Death {
    Expired,
    Flushed,
}

/// The store; share it between threads (`Arc<Store>`), it does its own locking. With an SSD tier
/// it owns the tier's I/O threads (stopped when it is dropped).
pub struct Store {
    core: Arc<StoreCore>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The store's state, shared by its users and its SSD tier's I/O threads (reached through `Store`).
pub struct StoreCore {
    memory_limit_bytes: usize,
    max_item_bytes: usize,
    segment_bytes: usize,
    segment_count: usize,
    arena: Mapping,
    shards: Box<[Padded<Mutex<Shard>>]>,
    pool: Mutex<Pool>,
    /// Bytes of linked items per segment; changed only under the lock of the segment's owner
    /// shard (atomics only so that the pool may read them for victim selection).
    segment_live_bytes: Box<[LiveBytes]>,
    index_bytes_total: AtomicUsize,
    /// Bookkeeping counted against the limit besides segments and index tables.
    metadata_bytes: usize,
    /// Segments that stay resident whatever the index takes: one active per shard and two more.
    resident_segments_min: usize,
    /// A flush_all for a future time: items stored before it are dead once it comes. 0 = none.
    flush_at_unix_s: AtomicU64,
    /// The latest delayed flush that has come and was then replaced by another flush_all: items
    /// stored before it stay dead (memcached would let them reappear). 0 = none.
    flushed_before_unix_s: AtomicU64,
    /// Serialises flush_all calls, which update the two times above together.
    flush_lock: Mutex<()>,
    hash_seed: u64,
    clock: Clock,
    /// The SSD tier's log (hybrid mode).
    ssd: Option<ssd::Log>,
    /// Threads reading spilled values.
    io_threads: usize,
}

const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Store>();
    send_and_sync::<StoreCore>();
};

/// Warnings on stderr, at most `WARNINGS_MAX` per process (a failing disk must not flood the log;
/// the `stats` counters keep counting).
fn warn_limited(message: &str) {
    const WARNINGS_MAX: u32 = 20;
    static WARNINGS: AtomicU32 = AtomicU32::new(0);
    if WARNINGS.fetch_add(1, Relaxed) < WARNINGS_MAX {
        eprintln!("[slipstream-cache WARN] {message}");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic under a lock leaves the store's invariants unchecked: fail loudly everywhere.
    mutex.lock().expect("a thread panicked while holding a store lock")
}

fn coarse_realtime_s() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut now) };
    debug_assert_eq!(status, 0);
    now.tv_sec as u64
}

impl Store {
    /// Maps the arena (address space only: memory becomes resident as items are written), and
    /// with an SSD tier creates its log and starts its threads. Fails on a configuration outside
    /// the limits above, or when the kernel refuses the mapping or the log.
    pub fn new(config: StoreConfig) -> Result<Store, StoreError> {
        let core = Arc::new(StoreCore::new(config)?);
        let threads = tier::start_threads(&core).map_err(StoreError::Ssd)?;
        Ok(Store { core, threads })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(log) = &self.core.ssd {
            log.shut_down();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl std::ops::Deref for Store {
    type Target = StoreCore;

    fn deref(&self) -> &StoreCore {
        &self.core
    }
}

impl Storage for Store {
    fn max_item_bytes(&self) -> usize {
        self.core.max_item_bytes()
    }

    fn may_wait(&self) -> bool {
        self.core.may_wait()
    }

    fn get(&self, key: &[u8], options: GetOptions, waker: &Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        self.core.get(key, options, waker, visit)
    }

    fn store(&self, request: &StoreRequest<'_>, waker: &Waker) -> StoreOutcome {
        self.core.store(request, waker)
    }

    fn delete(&self, key: &[u8], options: DeleteOptions) -> DeleteOutcome {
        self.core.delete(key, options)
    }

    fn arithmetic(&self, request: &ArithmeticRequest<'_>, waker: &Waker) -> ArithmeticOutcome {
        self.core.arithmetic(request, waker)
    }

    fn flush_all(&self, at_unix_s: u64) {
        self.core.flush_all(at_unix_s)
    }

    fn stats(&self) -> Vec<(String, String)> {
        self.core.stats()
    }
}

impl StoreCore {
    fn new(config: StoreConfig) -> Result<StoreCore, StoreError> {
        let invalid = |reason: String| Err(StoreError::Config(reason));
        if !(MAX_ITEM_BYTES_MIN..=MAX_ITEM_BYTES_MAX).contains(&config.max_item_bytes) {
            return invalid(format!(
                "max_item_bytes {} is outside {MAX_ITEM_BYTES_MIN}..={MAX_ITEM_BYTES_MAX}",
                config.max_item_bytes
            ));
        }
        let page_bytes = arena::page_bytes();
        let segment_bytes = config.max_item_bytes.next_multiple_of(page_bytes).max(SEGMENT_BYTES_MIN);
        if config.memory_limit_bytes > MEMORY_LIMIT_BYTES_MAX {
            return invalid(format!(
                "memory_limit_bytes {} exceeds {MEMORY_LIMIT_BYTES_MAX}",
                config.memory_limit_bytes
            ));
        }
        let segment_count = config.memory_limit_bytes / segment_bytes;
        if segment_count < SEGMENTS_MIN {
            return invalid(format!(
                "memory_limit_bytes {} holds fewer than {SEGMENTS_MIN} segments of {segment_bytes} bytes \
                 (segments are at least max_item_bytes)",
                config.memory_limit_bytes
            ));
        }
        let shards_wanted = match config.shards {
            Some(0) => return invalid("shards must be at least 1".to_string()),
            Some(shards) => shards,
            None => std::thread::available_parallelism().map_or(1, |cpus| cpus.get()) * SHARDS_PER_CPU,
        };
        let shards_allowed = (segment_count / SEGMENTS_PER_SHARD_MIN).clamp(1, SHARDS_MAX);
        let shard_count = prev_power_of_two(shards_wanted.min(shards_allowed));
        assert!((1..=SHARDS_MAX).contains(&shard_count));

        let (ssd, io_threads) = match &config.ssd {
            None => (None, 0),
            Some(ssd_config) => {
                if !(1..=tier::IO_THREADS_MAX).contains(&ssd_config.io_threads) {
                    return invalid(format!("ssd io_threads {} is outside 1..={}", ssd_config.io_threads, tier::IO_THREADS_MAX));
                }
                ssd::Log::geometry(ssd_config.size_bytes, config.max_item_bytes).map_err(StoreError::Config)?;
                let log = ssd::Log::create(&ssd_config.dir, ssd_config.size_bytes, config.max_item_bytes)
                    .map_err(StoreError::Ssd)?;
                (Some(log), ssd_config.io_threads)
            }
        };
        let arena = Mapping::new(segment_count * segment_bytes).map_err(StoreError::Map)?;
        let mut shards = Vec::with_capacity(shard_count);
        for shard_index in 0..shard_count {
            shards.push(Padded(Mutex::new(Shard {
                index: Index::new(index::SLOTS_MIN).map_err(StoreError::Map)?,
                active: None,
                cas_next: shard_index as u64 + 1,
                counters: ShardCounters::default(),
            })));
        }
        let index_bytes_total = shard_count * index::SLOTS_MIN * index::ENTRY_BYTES;
        let metadata_bytes = std::mem::size_of::<Store>()
            + shard_count * std::mem::size_of::<Padded<Mutex<Shard>>>()
            + segment_count * std::mem::size_of::<LiveBytes>()
            + Pool::metadata_bytes(segment_count)
            + ssd.as_ref().map_or(0, |log| tier::memory_bytes(log, io_threads));
        let store = StoreCore {
            memory_limit_bytes: config.memory_limit_bytes,
            max_item_bytes: config.max_item_bytes,
            segment_bytes,
            segment_count,
            arena,
            shards: shards.into_boxed_slice(),
            pool: Mutex::new(Pool::new(segment_count)),
            segment_live_bytes: (0..segment_count).map(|_| LiveBytes(AtomicU32::new(0))).collect(),
            index_bytes_total: AtomicUsize::new(index_bytes_total),
            metadata_bytes,
            resident_segments_min: (shard_count + 2).min(segment_count),
            flush_at_unix_s: AtomicU64::new(0),
            flushed_before_unix_s: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            hash_seed: hash::random_seed(),
            clock: config.clock,
            ssd,
            io_threads,
        };
        assert!(shard_count == 1 || shard_count * SEGMENTS_PER_SHARD_MIN <= segment_count);
        assert!(store.resident_segments_min <= store.resident_segments_allowed());
        Ok(store)
    }

    pub fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// What the store counts against its limit: resident segments, index tables, bookkeeping.
    pub fn memory_used_bytes(&self) -> usize {
        let resident_count = lock(&self.pool).resident_count;
        resident_count * self.segment_bytes + self.index_bytes_total.load(Relaxed) + self.metadata_bytes
    }

    /// Bytes of the arena and the index tables the kernel holds in memory, measured with mincore
    /// (slow: for tests and checks of the accounting).
    pub fn measured_resident_bytes(&self) -> usize {
        let index_bytes: usize = self.shards.iter().map(|shard| lock(&shard.0).index.resident_bytes()).sum();
        self.arena.resident_bytes() + index_bytes
    }

    #[inline]
    fn now_unix_s(&self) -> u64 {
        match &self.clock {
            Clock::System => coarse_realtime_s(),
            Clock::Manual(now) => now.load(Relaxed),
        }
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        hash::hash_key(self.hash_seed, key)
    }

    /// Shards come from the hash's high bits (the index uses the low ones).
    #[inline]
    fn shard_of(&self, hash: u64) -> usize {
        (((hash >> 32) * self.shards.len() as u64) >> 32) as usize
    }

    fn resident_segments_allowed(&self) -> usize {
        let others_bytes = self.index_bytes_total.load(Relaxed) + self.metadata_bytes;
        let segments = self.memory_limit_bytes.saturating_sub(others_bytes) / self.segment_bytes;
        segments.clamp(self.resident_segments_min, self.segment_count)
    }

    #[inline]
    fn item_at(&self, location: u64) -> ItemPtr {
        let offset_bytes = location as usize * item::ALIGN_BYTES;
        debug_assert!(offset_bytes + HEADER_BYTES <= self.arena.len_bytes());
        // SAFETY: locations in an index point at items written in the arena; callers hold the
        // owning shard's lock.
        unsafe { ItemPtr::new(self.arena.base().add(offset_bytes)) }
    }

    #[inline]
    fn segment_of(&self, location: u64) -> usize {
        location as usize * item::ALIGN_BYTES / self.segment_bytes
    }

    #[inline]
    fn death(&self, header: &ItemHeader, now_unix_s: u64) -> Option<Death> {
        if header.exptime_s != 0 && header.exptime_s as u64 <= now_unix_s {
            return Some(Death::Expired);
        }
        let stored_unix_s = header.stored_s as u64;
        let flush_at_unix_s = self.flush_at_unix_s.load(Relaxed);
        if flush_at_unix_s != 0 && flush_at_unix_s <= now_unix_s && stored_unix_s < flush_at_unix_s {
            return Some(Death::Flushed);
        }
        if stored_unix_s < self.flushed_before_unix_s.load(Relaxed) {
            return Some(Death::Flushed);
        }
        None
    }

    /// Looks a key up; an expired or flushed item is unlinked and counted (as a read's miss too if
    /// `is_read`), and reads as absent.
    #[inline]
    fn find_live(&self, shard: &mut Shard, hash: u64, key: &[u8], now_unix_s: u64, is_read: bool) -> Option<Found> {
        let hash_bits = index_hash(hash);
        let slot = shard.index.find(hash_bits, |location| self.item_at(location).key() == key)?;
        let location = shard.index.location(slot);
        let item = self.item_at(location);
        let header = item.header();
        match self.death(&header, now_unix_s) {
            None if header.bits & bits::VALUE_EXTERNAL != 0 && !self.record_is_valid(item) => {
                // Its record was dropped with its log segment: the item is gone.
                shard.counters.ssd_items_lost += 1;
                self.unlink(shard, slot, location, item);
                None
            }
            None => Some(Found { slot, location, item }),
            Some(death) => {
                if is_read && death == Death::Expired {
                    shard.counters.get_expired += 1;
                }
                if is_read && death == Death::Flushed {
                    shard.counters.get_flushed += 1;
                }
                self.count_reclaimed(shard, &header);
                self.unlink(shard, slot, location, item);
                None
            }
        }
    }

    fn count_reclaimed(&self, shard: &mut Shard, header: &ItemHeader) {
        shard.counters.reclaimed += 1;
        if header.bits & bits::FETCHED == 0 {
            shard.counters.expired_unfetched += 1;
        }
    }

    fn live_bytes_add(&self, location: u64, bytes: usize) {
        let live = &self.segment_live_bytes[self.segment_of(location)].0;
        let after = live.load(Relaxed) as usize + bytes;
        assert!(after <= self.segment_bytes);
        live.store(after as u32, Relaxed);
    }

    fn live_bytes_sub(&self, location: u64, bytes: usize) {
        let live = &self.segment_live_bytes[self.segment_of(location)].0;
        let before = live.load(Relaxed) as usize;
        assert!(before >= bytes);
        live.store((before - bytes) as u32, Relaxed);
    }

    fn unlink(&self, shard: &mut Shard, slot: usize, location: u64, item: ItemPtr) {
        let bytes = item.total_bytes();
        self.release_record(shard, item);
        shard.index.remove(slot);
        shard.counters.curr_items -= 1;
        shard.counters.item_bytes -= bytes as u64;
        self.live_bytes_sub(location, bytes);
    }

    /// Links a newly written item: over `replaced` (same key), or as a new entry.
    fn link(&self, shard: &mut Shard, hash: u64, replaced: Option<Found>, location: u64, item: ItemPtr) {
        let bytes = item.total_bytes();
        match replaced {
            Some(old) => {
                let old_bytes = old.item.total_bytes();
                if old.item.descriptor() != item.descriptor() {
                    self.release_record(shard, old.item);
                } else if old.item.is_external() {
                    shard.counters.ssd_items -= 1; // Read back: the same record, now in memory too.
                }
                shard.index.relocate(old.slot, location);
                shard.counters.item_bytes -= old_bytes as u64;
                self.live_bytes_sub(old.location, old_bytes);
            }
            None => {
                shard.index.insert(index_hash(hash), location);
                shard.counters.curr_items += 1;
            }
        }
        shard.counters.item_bytes += bytes as u64;
        shard.counters.total_items += 1;
        self.live_bytes_add(location, bytes);
        assert!(!item.is_external(), "items go out to the SSD only by eviction");
    }

    /// Grows a full index table before an insert. `Err` if it cannot grow (then the store is out
    /// of memory for new keys); `Ok(true)` if it grew (segments may have to be released).
    fn make_index_room(&self, shard: &mut Shard) -> Result<bool, ()> {
        if !shard.index.is_full() {
            return Ok(false);
        }
        let grown = match shard.index.grown() {
            Ok(Some(grown)) => grown,
            Ok(None) | Err(_) => return Err(()),
        };
        let old_bytes = shard.index.bytes();
        let new_bytes = grown.bytes();
        shard.index = grown;
        self.index_bytes_total.fetch_add(new_bytes - old_bytes, Relaxed);
        Ok(true)
    }

    fn next_cas(&self, shard: &mut Shard) -> u64 {
        let cas = shard.cas_next;
        shard.cas_next += self.shards.len() as u64;
        cas
    }

    /// Room for `bytes` in the shard's active segment, installing `spare` if the active one is
    /// full. Returns the arena offset of the room.
    fn reserve(&self, shard: &mut Shard, shard_index: usize, spare: &mut Option<u32>, bytes: usize) -> Option<usize> {
        assert!(bytes <= self.segment_bytes);
        if let Some(offset_bytes) = self.reserve_in_active(shard, bytes) {
            return Some(offset_bytes);
        }
        let segment = spare.take()?;
        {
            let mut pool = lock(&self.pool);
            if let Some(active) = shard.active {
                pool.seal(active.segment, active.used_bytes);
            }
            pool.activate(segment, shard_index);
        }
        debug_assert_eq!(self.segment_live_bytes[segment as usize].0.load(Relaxed), 0);
        shard.active = Some(ActiveSegment { segment, used_bytes: 0 });
        let offset_bytes = self.reserve_in_active(shard, bytes);
        assert!(offset_bytes.is_some());
        offset_bytes
    }

    fn reserve_in_active(&self, shard: &mut Shard, bytes: usize) -> Option<usize> {
        let active = shard.active.as_mut()?;
        if active.used_bytes + bytes > self.segment_bytes {
            return None;
        }
        let offset_bytes = active.segment as usize * self.segment_bytes + active.used_bytes;
        active.used_bytes += bytes;
        Some(offset_bytes)
    }

    /// Writes an item at a reserved offset and links it.
    fn write_and_link(
        &self,
        shard: &mut Shard,
        placement: Placement,
        header: ItemHeader,
        key: &[u8],
        value_parts: [&[u8]; 2],
    ) -> ItemPtr {
        let Placement { hash, replaced, offset_bytes } = placement;
        // SAFETY: the room was reserved in this shard's active segment (under its lock) and lies
        // past every item written there, so it overlaps no source slice.
        let item = unsafe { ItemPtr::write(self.arena.base().add(offset_bytes), header, key, value_parts) };
        self.link(shard, hash, replaced, (offset_bytes / item::ALIGN_BYTES) as u64, item);
        item
    }

    /// Writes an item with an optional SSD descriptor (read back from the SSD) and links it.
    fn write_and_link_with(
        &self,
        shard: &mut Shard,
        placement: Placement,
        header: ItemHeader,
        key: &[u8],
        descriptor: Option<item::Descriptor>,
        value: &[u8],
    ) -> ItemPtr {
        let Placement { hash, replaced, offset_bytes } = placement;
        // SAFETY: as in `write_and_link`; the value is the caller's buffer.
        let item = unsafe { ItemPtr::write_with(self.arena.base().add(offset_bytes), header, key, descriptor, [value, &[]]) };
        self.link(shard, hash, replaced, (offset_bytes / item::ALIGN_BYTES) as u64, item);
        item
    }

    /// Runs `attempt` under the shard's lock until it is done; when it needs room, takes a
    /// segment with no lock held (recycling one may need another shard's lock) and retries.
    fn with_room<R>(
        &self,
        shard_index: usize,
        out_of_memory: R,
        mut attempt: impl FnMut(&mut Shard, &mut Option<u32>, &mut bool) -> Attempt<R>,
    ) -> R {
        let mut spare: Option<u32> = None;
        let mut index_grew = false;
        let mut outcome = None;
        for _ in 0..ROOM_ATTEMPTS_MAX {
            let mut shard = lock(&self.shards[shard_index].0);
            match attempt(&mut shard, &mut spare, &mut index_grew) {
                Attempt::Done(result) => {
                    outcome = Some(result);
                    break;
                }
                Attempt::NeedRoom => {
                    drop(shard);
                    assert!(spare.is_none(), "an attempt needs room only without a spare");
                    spare = self.take_segment();
                    if spare.is_none() {
                        std::thread::yield_now();
                    }
                }
            }
        }
        if let Some(segment) = spare {
            lock(&self.pool).give_back(segment);
        }
        if index_grew {
            self.release_to_budget();
        }
        outcome.unwrap_or(out_of_memory)
    }

    /// Calls the visitor with a live item, applying the read's options.
    fn visit_hit(
        &self,
        found: Found,
        value: &[u8],
        options: &GetOptions,
        now_unix_s: u64,
        visit: &mut dyn FnMut(&ItemView<'_>),
    ) {
        if let Some(exptime_unix_s) = options.touch_exptime_unix_s {
            // Before the recache check, which then sees the new expiry (as memcached with `T R`).
            found.item.update_header(|header| header.exptime_s = time_s32(exptime_unix_s));
        }
        let header = found.item.header();
        let win_token_sent = header.bits & bits::WIN_SENT != 0;
        let stale = header.bits & bits::STALE != 0;
        let mut win = false;
        if !win_token_sent {
            if stale {
                win = true;
            } else if let Some(recache_below_ttl_s) = options.recache_below_ttl_s {
                // Live, so a non-zero expiry lies in the future.
                if header.exptime_s != 0 && (header.exptime_s as u64 - now_unix_s) < recache_below_ttl_s {
                    win = true;
                }
            }
        }
        found.item.update_header(|header| {
            if win {
                header.bits |= bits::WIN_SENT;
            }
            if !options.no_bump {
                header.bits |= bits::FETCHED | bits::REFERENCED;
                header.last_access_s = time_s32(now_unix_s);
            }
        });
        visit(&ItemView {
            key: found.item.key(),
            value,
            flags: header.client_flags,
            cas: header.cas,
            exptime_unix_s: header.exptime_s as u64,
            last_access_unix_s: header.last_access_s as u64,
            fetched_before: header.bits & bits::FETCHED != 0,
            stale,
            win,
            win_token_sent,
        });
    }

    fn key_is_valid(key: &[u8]) -> bool {
        !key.is_empty() && key.len() <= KEY_BYTES_MAX
    }

    fn fits(&self, key_bytes: usize, value_bytes: usize) -> bool {
        HEADER_BYTES + key_bytes + value_bytes <= self.max_item_bytes
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        let mut live_bytes = vec![0u64; self.segment_count];
        let mut active_segments = 0;
        for (shard_index, shard) in self.shards.iter().enumerate() {
            let shard = lock(&shard.0);
            shard.index.check_invariants();
            assert_eq!(shard.index.count() as u64, shard.counters.curr_items);
            let mut item_bytes = 0;
            for slot in 0..shard.index.slot_count() {
                if let Some(location) = shard.index.location_if_occupied(slot) {
                    let item = self.item_at(location);
                    assert_eq!(self.shard_of(self.hash(item.key())), shard_index);
                    live_bytes[self.segment_of(location)] += item.total_bytes() as u64;
                    item_bytes += item.total_bytes() as u64;
                }
            }
            assert_eq!(item_bytes, shard.counters.item_bytes);
            if let Some(active) = shard.active {
                active_segments += 1;
                let pool = lock(&self.pool);
                let info = pool.infos[active.segment as usize];
                assert_eq!(info.state, pool::SegmentState::Active);
                assert_eq!(info.owner_shard as usize, shard_index);
            }
        }
        self.check_log_invariants();
        let pool = lock(&self.pool);
        pool.check_invariants();
        assert_eq!(pool.count_in(pool::SegmentState::Active), active_segments);
        for (segment, &bytes) in live_bytes.iter().enumerate() {
            assert_eq!(self.segment_live_bytes[segment].0.load(Relaxed) as u64, bytes, "segment {segment}");
        }
    }
}

fn prev_power_of_two(value: usize) -> usize {
    assert!(value >= 1);
    1 << (usize::BITS - 1 - value.leading_zeros())
}
