//! The storage interface the protocols execute against. The protocol crate owns it so that parsing
//! is testable without a store and the store without a network (Pelikan's protocol/storage split).
//!
//! Times are absolute Unix seconds; `0` means "never expires". Converting memcached's relative or
//! absolute `exptime` (and negative values, meaning "already expired") is the protocol layer's job:
//! see `crate::clock`.
//!
//! A store with a slower tier (the SSD of the hybrid mode) never blocks the caller on it: an
//! operation that needs a value held there answers `Pending`, having queued the read, and wakes
//! the `waker` it was given once the value is back in memory; the caller retries the operation
//! then. Stores without such a tier never answer `Pending` (`may_wait` is false).

use std::task::Waker;

/// `DeleteOptions::invalidate_exptime_unix_s` value meaning "mark stale, keep the present expiry"
/// (meta `md <key> I` without `T`). Never a real time: exptimes fit in 32 bits.
pub const EXPTIME_KEEP: u64 = u64::MAX;

/// One item as the store holds it, lent to a visitor under the lock that protects it. The visitor
/// copies what it needs (into a reply buffer) and returns quickly; it must not call the store.
#[derive(Debug, Clone, Copy)]
pub struct ItemView<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// The client's opaque 32-bit flags.
    pub flags: u32,
    pub cas: u64,
    /// Absolute Unix seconds; 0 = never.
    pub exptime_unix_s: u64,
    /// When the item was last read or written, before this access (meta `l`, `me`'s `la`).
    pub last_access_unix_s: u64,
    /// Whether the item had been read before this access (meta `h`).
    pub fetched_before: bool,
    /// Marked stale by an invalidation (meta `I`): the reply carries `X`.
    pub stale: bool,
    /// This request won the right to recache the item (meta `W`).
    pub win: bool,
    /// Another request already holds the win token (meta `Z`).
    pub win_token_sent: bool,
}

/// What a read does besides reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// Set a new expiry (gat/gats, binary GAT/TOUCH, ASCII touch, meta `T`).
    pub touch_exptime_unix_s: Option<u64>,
    /// Do not update last access / fetched state (meta `me`, and mg without bump semantics).
    pub no_bump: bool,
    /// Meta `N`: on a miss, create an empty item with this expiry and give the caller the win token.
    pub vivify_exptime_unix_s: Option<u64>,
    /// Meta `R`: if the remaining TTL is below this many seconds, give out the win token once.
    pub recache_below_ttl_s: Option<u64>,
}

/// The outcome of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetOutcome {
    /// The visitor was called.
    Hit,
    Miss,
    /// The value is being read from the slower tier: retry when the waker is woken.
    Pending,
}

/// How a write combines with what is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// Store unconditionally.
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present.
    Replace,
    /// Append to the present value (flags and expiry of the present item are kept).
    Append,
    /// Prepend to the present value (flags and expiry of the present item are kept).
    Prepend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRequest<'a> {
    pub mode: StoreMode,
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    pub exptime_unix_s: u64,
    /// `cas` command, binary CAS field, meta `C`: store only if the present item's CAS equals this;
    /// `Exists` if it differs, `NotFound` if there is no item. The protocols send it with `Set`
    /// (memcached's CAS command), `Append` and `Prepend` only.
    pub compare_cas: Option<u64>,
    /// Meta `E`: use this CAS value for the new item instead of a generated one.
    pub new_cas: Option<u64>,
    /// Meta `I` with `C`: if the compared CAS is older than the item's, store but mark stale.
    pub invalidate: bool,
    /// Append/prepend with meta `N`: create the item (with this expiry) if absent.
    pub vivify_exptime_unix_s: Option<u64>,
}

impl<'a> StoreRequest<'a> {
    /// A plain request: no CAS, no meta extras.
    pub fn new(mode: StoreMode, key: &'a [u8], value: &'a [u8], flags: u32, exptime_unix_s: u64) -> Self {
        StoreRequest {
            mode,
            key,
            value,
            flags,
            exptime_unix_s,
            compare_cas: None,
            new_cas: None,
            invalidate: false,
            vivify_exptime_unix_s: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    /// Stored; the new item's CAS.
    Stored { cas: u64 },
    /// The mode's condition failed (add on present, replace/append/prepend on absent).
    NotStored,
    /// `compare_cas` did not match.
    Exists,
    /// `compare_cas` was given and there is no item.
    NotFound,
    /// Key plus value exceed the store's item size limit.
    TooLarge,
    /// No memory could be freed for the item (every candidate is in use).
    OutOfMemory,
    /// The present value (append/prepend) is being read from the slower tier: retry when the
    /// waker is woken. Nothing was written.
    Pending,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub compare_cas: Option<u64>,
    /// Meta `I`: mark the item stale (and set this expiry; `EXPTIME_KEEP` keeps the present one)
    /// instead of removing it. Clears the win token so the next reader wins (memcached).
    pub invalidate_exptime_unix_s: Option<u64>,
    /// Meta `E`: the CAS value a stale item gets.
    pub new_cas: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    /// `compare_cas` did not match.
    Exists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArithmeticRequest<'a> {
    pub key: &'a [u8],
    /// `true` adds (saturating at 2^64 wrap as memcached: incr wraps, decr stops at 0).
    pub increment: bool,
    pub delta: u64,
    pub compare_cas: Option<u64>,
    pub new_cas: Option<u64>,
    /// Binary incr/decr and meta `N`/`J`: on a miss, create the item with this value and expiry.
    pub initial: Option<(u64, u64)>,
    /// Meta `T`: update the expiry.
    pub touch_exptime_unix_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithmeticOutcome {
    /// The value after the operation (or the initial value if it was created).
    Value { value: u64, cas: u64, exptime_unix_s: u64 },
    NotFound,
    /// The stored value is not a decimal number below 2^64.
    NonNumeric,
    /// `compare_cas` did not match.
    Exists,
    /// The present value is being read from the slower tier: retry when the waker is woken.
    /// Nothing was written.
    Pending,
}

/// A key-value store with memcached's semantics. Implementations are shared by all worker threads.
pub trait Storage: Send + Sync + 'static {
    /// The largest item (key plus value) the store accepts, in bytes (`-I`).
    fn max_item_bytes(&self) -> usize;

    /// Whether this store may answer `Pending` (it has a slower tier). Read once per session.
    fn may_wait(&self) -> bool {
        false
    }

    /// Reads `key`. On a hit, applies `options` and calls `visit` once with the item. `Pending`
    /// (see the module doc): nothing was applied and `visit` was not called.
    fn get(&self, key: &[u8], options: GetOptions, waker: &Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome;

    fn store(&self, request: &StoreRequest<'_>, waker: &Waker) -> StoreOutcome;

    fn delete(&self, key: &[u8], options: DeleteOptions) -> DeleteOutcome;

    fn arithmetic(&self, request: &ArithmeticRequest<'_>, waker: &Waker) -> ArithmeticOutcome;

    /// Invalidates every item stored at or before `at_unix_s` (0 = now), once that time comes.
    fn flush_all(&self, at_unix_s: u64);

    /// The store's counters for `stats` (`curr_items`, `bytes`, `limit_maxbytes`, `evictions`, ...),
    /// as name/value pairs in a stable order. Slow path.
    fn stats(&self) -> Vec<(String, String)>;
}
