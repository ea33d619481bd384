//! A pool of registered (UCX-mapped) buffers in power-of-two size classes with a hard cap on the
//! bytes mapped. Buffers return to their class's free list on drop, so the hot path is a pop and
//! a push under a per-class lock, with no system call and no allocation once the pool is warm.
//!
//! At the cap, an allocation first unmaps free buffers of other classes, then waits for a buffer
//! to come back (bounded by a deadline), then fails with `Error::PoolExhausted`.
//!
//! Views: a raw pointer into a buffer that outlives the `Buffer` (a Java direct `ByteBuffer`) must
//! never point at unmapped memory. Whoever makes such a view takes a [`ViewPin`] first; a free
//! buffer with pins is reused (a stale view then sees another message's bytes) but never unmapped
//! at the cap: a pinned buffer of 64 KiB or more that must make room becomes a ghost (unregistered,
//! its pages dropped with MADV_DONTNEED, its address range still mapped: a stale view reads zeros)
//! and is unmapped once its pins are gone; smaller pinned buffers (heap memory) stay until then.
//! Everything is unmapped when the pool itself goes away, after every `Buffer` is back; the JVM
//! bridge keeps the pool alive until every view is garbage.
//!
//! Kept buffers: a small buffer (up to `KEPT_BUFFER_MAX_BYTES`) may instead be *kept for views*
//! (`Buffer::keep_for_views`, up to `KEPT_BYTES_MAX` per pool): its memory is never freed, not at
//! the cap and not when the pool goes, where it moves (unregistered) to a process-wide store that
//! later pools of any node take their small buffers from first. A view of kept memory then needs
//! no pin and its holder need not keep the pool alive: whatever it reads or writes is memory that
//! stays allocated for the life of the process. The JVM bridge keeps small buffers this way, so a
//! Java buffer released explicitly leaves nothing for the garbage collector's reference processing
//! (docs/fabric.md, "Where the JVM bridge's time goes"). Kept memory carries an opaque *view slot*
//! for good (`Buffer::kept_view_slot`), which the pool never reads: the JVM bridge stores there the
//! root view it made of the memory once, and hands it out again with every later buffer of it.
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use ucx_sys as u;

use crate::error::{Error, Result};
use crate::ucx::Context;

/// Smallest class: 2^8 = 256 bytes.
const CLASS_MIN_SHIFT: u32 = 8;
/// Buffers up to this size may go beyond the cap, into a small reserve: acknowledgements and
/// error responses must still be possible when large messages hold the whole cap (found with 64
/// requests of 4 MiB in flight against a 256 MiB pool: the server could not even answer).
pub(crate) const SMALL_BUFFER_MAX_BYTES: usize = 4096;
/// The reserve for small buffers, on top of the cap.
pub(crate) const SMALL_RESERVE_BYTES: usize = 1 << 20;
/// The largest buffer kept for views (`Buffer::keep_for_views`); larger ones are pinned. 16 KiB
/// (4 KiB until session 47): with the JVM's root views of kept memory made once, keeping 8 and 16 KiB
/// buffers too doubled the JVM's 8 KiB bandwidth (1019-1979 against 497-975 MB/s in six alternating
/// pairs), the first size that travels by the same-host pull; 32 KiB was not tried again (session 41:
/// no difference, before the views were made once).
pub(crate) const KEPT_BUFFER_MAX_BYTES: usize = 16 << 10;
/// The most bytes of kept buffers one pool marks (`Buffer::keep_for_views`); beyond it views are
/// pinned. Kept memory is never freed, so this bounds what a pool adds to the process for good
/// (pools take kept memory from `KEPT` first, so closing and starting nodes does not add more).
/// Kept bytes count against this bound instead of the cap: the cap's reclaim cannot give them up,
/// and must not be blocked by them.
pub(crate) const KEPT_BYTES_MAX: usize = 4 << 20;

/// Kept memory of pools that went away, unregistered, for later pools.
static KEPT: Mutex<Vec<KeptMemory>> = Mutex::new(Vec::new());

/// Kept memory in the store: where, how large, and its view slot (`Buffer::kept_view_slot`).
struct KeptMemory {
    address: usize,
    capacity: usize,
    view_slot: usize,
}

struct Raw {
    address: *mut u8,
    capacity: usize,
    memh: u::ucp_mem_h,
    /// Views of this memory that may outlive their `Buffer` (`ViewPin`s alive): while above 0 the
    /// memory stays mapped.
    pins: Arc<AtomicUsize>,
    /// A view without a pin may point here (`Buffer::keep_for_views`): the memory is never given
    /// back to the allocator, only to the process's `KEPT` store when the pool goes.
    kept: bool,
    /// Of kept memory: a value the embedding layer attached to it (`Buffer::set_kept_view_slot`),
    /// 0 for none. It travels with the memory, through the `KEPT` store too, for good.
    view_slot: usize,
}

// SAFETY: `Raw` owns its mapping: it is either in one `Buffer` or on one free list (under that
// class's mutex), never both, so moving it to another thread moves the only owner; the memh is a
// plain handle that UCX allows to be used from any thread of a multi-threaded context.
unsafe impl Send for Raw {}
// SAFETY: `&Raw` only reads the address, capacity and memh fields (the bytes behind the address
// are reached through `Buffer`, whose `&mut` methods give exclusive access).
unsafe impl Sync for Raw {}

/// Keeps a buffer's memory mapped while a view of it may exist (see the module comment). The pin
/// holds no reference to the pool: the holder of a view keeps the pool alive itself.
pub struct ViewPin {
    pins: Arc<AtomicUsize>,
}

impl Drop for ViewPin {
    fn drop(&mut self) {
        self.pins.fetch_sub(1, Ordering::Release);
    }
}

/// One size class's free buffers, behind a spin lock. It is held for a push or a pop (the scan
/// of a reclaim at the cap at most), so a waiter spins, and yields its CPU after a while (a holder
/// preempted on a busy machine). Unlocking is a plain release store, where a `Mutex`'s unlock is
/// an atomic exchange (it must look for sleepers to wake): a buffer's allocation and its return
/// paid one each, on the path of every message (docs/fabric.md, "The cost of a spin round").
#[derive(Default)]
struct FreeList {
    locked: AtomicBool,
    raws: UnsafeCell<Vec<Raw>>,
}

// SAFETY: `raws` is reached only through a `FreeListGuard`, of which at most one exists at a time
// (`lock`: the acquiring compare-exchange, released by the guard's drop), and `Raw` is Send.
unsafe impl Sync for FreeList {}

struct FreeListGuard<'a> {
    list: &'a FreeList,
}

impl FreeList {
    fn lock(&self) -> FreeListGuard<'_> {
        let mut spins = 0u32;
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // Wait for it to look free with plain loads (no atomic writes while it is held).
            while self.locked.load(Ordering::Relaxed) {
                spins = spins.saturating_add(1);
                if spins < 100 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        FreeListGuard { list: self }
    }
}

impl Drop for FreeListGuard<'_> {
    fn drop(&mut self) {
        self.list.locked.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for FreeListGuard<'_> {
    type Target = Vec<Raw>;
    fn deref(&self) -> &Vec<Raw> {
        // SAFETY: this guard holds the list's lock (see the Sync impl): no other reference exists.
        unsafe { &*self.list.raws.get() }
    }
}

impl std::ops::DerefMut for FreeListGuard<'_> {
    fn deref_mut(&mut self) -> &mut Vec<Raw> {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.list.raws.get() }
    }
}

pub(crate) struct PoolInner {
    context: Arc<Context>,
    classes: Vec<FreeList>,
    cap_bytes: usize,
    mapped_bytes: AtomicUsize,
    /// The most `mapped_bytes` has been: what the pool added to the process's memory at its worst.
    mapped_bytes_peak: AtomicUsize,
    maps: AtomicU64,
    /// Signalled when a buffer comes back while allocations wait at the cap (`waiters` > 0; the
    /// count keeps the common case free of the futex system call a notify costs).
    returned: (Mutex<()>, Condvar),
    waiters: AtomicUsize,
    /// Buffers given up at the cap while views still pointed into them: unregistered, pages
    /// dropped, address range still mapped until their pins are gone (see `ghost`).
    ghosts: Mutex<Vec<Raw>>,
    ghost_bytes: AtomicUsize,
    /// Bytes of this pool's buffers marked kept (`Raw::kept`), at most `KEPT_BYTES_MAX` (more only
    /// with memory taken from `KEPT`); not in `mapped_bytes`, which the cap bounds.
    kept_bytes: AtomicUsize,
}

#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<PoolInner>,
}

fn class_of(len: usize) -> usize {
    let len = len.max(1 << CLASS_MIN_SHIFT);
    (len.next_power_of_two().trailing_zeros() - CLASS_MIN_SHIFT) as usize
}

fn class_capacity(class: usize) -> usize {
    1usize << (class as u32 + CLASS_MIN_SHIFT)
}

/// Buffers from this size up get their own anonymous mapping, returned to the system when the
/// pool unmaps them. Through malloc, freeing large blocks raises glibc's mmap threshold and later
/// large blocks come from the heap, whose freed memory stays resident: RSS then grows past the
/// pool's cap (seen with `ohb fabric mem`: 545 MiB resident under a 64 MiB cap).
const MMAP_MIN_BYTES: usize = 64 << 10;

fn layout(capacity: usize) -> Layout {
    // Page alignment for page-sized buffers helps registration on real RDMA devices.
    let align = if capacity >= 4096 { 4096 } else { 64 };
    Layout::from_size_align(capacity, align).unwrap()
}

/// Zeroed memory of `capacity` bytes (null if none), so a new buffer's bytes are initialized
/// before anyone reads them through a slice.
fn allocate(capacity: usize) -> *mut u8 {
    if capacity >= MMAP_MIN_BYTES {
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches no
        // existing memory; the result is checked against MAP_FAILED (anonymous pages are zeroed).
        let address = unsafe {
            libc::mmap(ptr::null_mut(), capacity, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if address == libc::MAP_FAILED {
            ptr::null_mut()
        } else {
            address as *mut u8
        }
    } else {
        // SAFETY: `layout` has a non-zero size (classes start at 256 bytes).
        unsafe { alloc_zeroed(layout(capacity)) }
    }
}

/// Gives back memory from `allocate(capacity)`. The caller guarantees nothing points into it any
/// more: no `Buffer` (it is on a free list or the pool is dropping) and no `ViewPin`.
fn deallocate(address: *mut u8, capacity: usize) {
    if capacity >= MMAP_MIN_BYTES {
        // SAFETY: `address` is a mapping of exactly `capacity` bytes made by `allocate`, unmapped once.
        let status = unsafe { libc::munmap(address as *mut libc::c_void, capacity) };
        debug_assert_eq!(status, 0);
    } else {
        // SAFETY: `address` came from `alloc_zeroed` with this same layout and is freed once.
        unsafe { dealloc(address, layout(capacity)) };
    }
}

impl Pool {
    pub(crate) fn new(context: Arc<Context>, cap_bytes: usize, max_buffer_bytes: usize) -> Pool {
        let classes = class_of(max_buffer_bytes) + 1;
        Pool {
            inner: Arc::new(PoolInner {
                context,
                classes: (0..classes).map(|_| FreeList::default()).collect(),
                cap_bytes,
                mapped_bytes: AtomicUsize::new(0),
                mapped_bytes_peak: AtomicUsize::new(0),
                maps: AtomicU64::new(0),
                returned: (Mutex::new(()), Condvar::new()),
                waiters: AtomicUsize::new(0),
                ghosts: Mutex::new(Vec::new()),
                ghost_bytes: AtomicUsize::new(0),
                kept_bytes: AtomicUsize::new(0),
            }),
        }
    }

    /// A buffer of at least `len` bytes (its `len()` is `len`), waiting at the cap until `deadline`.
    pub(crate) fn alloc(&self, len: usize, deadline: Option<Instant>) -> Result<Buffer> {
        let inner = &self.inner;
        let class = class_of(len);
        if class >= inner.classes.len() {
            return Err(Error::TooLarge { len, max: class_capacity(inner.classes.len() - 1) });
        }
        loop {
            if let Some(raw) = inner.classes[class].lock().pop() {
                return Ok(self.hand_out(raw, len));
            }
            let capacity = class_capacity(class);
            if self.reserve(capacity) {
                return match self.map_new(capacity) {
                    Ok(raw) => Ok(self.hand_out(raw, len)),
                    Err(e) => {
                        inner.mapped_bytes.fetch_sub(capacity, Ordering::SeqCst);
                        Err(e)
                    }
                };
            }
            if self.unmap_free_except(class, capacity) {
                continue;
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if now < deadline => {
                    let (lock, condvar) = &inner.returned;
                    let guard = lock.lock().unwrap();
                    inner.waiters.fetch_add(1, Ordering::SeqCst);
                    // Short waits: a buffer may come back between our check and the wait.
                    let wait = (deadline - now).min(std::time::Duration::from_millis(5));
                    let _ = condvar.wait_timeout(guard, wait).unwrap();
                    inner.waiters.fetch_sub(1, Ordering::SeqCst);
                }
                _ => return Err(Error::PoolExhausted { requested: len, cap: inner.cap_bytes }),
            }
        }
    }

    fn hand_out(&self, raw: Raw, len: usize) -> Buffer {
        debug_assert!(len <= raw.capacity);
        Buffer { pool: self.inner.clone(), raw: Some(raw), len }
    }

    /// Counts `capacity` bytes against the cap (plus the small reserve for small buffers) if they fit.
    fn reserve(&self, capacity: usize) -> bool {
        let inner = &self.inner;
        let limit = if capacity <= SMALL_BUFFER_MAX_BYTES { inner.cap_bytes + SMALL_RESERVE_BYTES } else { inner.cap_bytes };
        let mut mapped = inner.mapped_bytes.load(Ordering::SeqCst);
        loop {
            if mapped + capacity > limit {
                return false;
            }
            match inner.mapped_bytes.compare_exchange(mapped, mapped + capacity, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    // Reservations are rare (buffers are reused), so this costs nothing on the hot path.
                    let kept = inner.kept_bytes.load(Ordering::Relaxed);
                    inner.mapped_bytes_peak.fetch_max(mapped + capacity + kept, Ordering::Relaxed);
                    return true;
                }
                Err(now) => mapped = now,
            }
        }
    }

    fn map_new(&self, capacity: usize) -> Result<Raw> {
        if capacity <= KEPT_BUFFER_MAX_BYTES {
            if let Some(raw) = self.map_kept(capacity) {
                return raw;
            }
        }
        let address = allocate(capacity);
        if address.is_null() {
            return Err(Error::PoolExhausted { requested: capacity, cap: self.inner.cap_bytes });
        }
        self.register(address, capacity, false).inspect_err(|_| deallocate(address, capacity))
    }

    /// Registers `capacity` bytes at `address` with the context, as a buffer of this pool.
    fn register(&self, address: *mut u8, capacity: usize, kept: bool) -> Result<Raw> {
        let memh = self.inner.context.map(address, capacity)?;
        self.inner.maps.fetch_add(1, Ordering::Relaxed);
        Ok(Raw { address, capacity, memh, pins: Arc::new(AtomicUsize::new(0)), kept, view_slot: 0 })
    }

    /// Registers kept memory of an earlier pool, if `KEPT` has some of this capacity. It stays kept
    /// (stale views of it may exist) and counts in this pool's kept bytes, beyond the bound if need be.
    fn map_kept(&self, capacity: usize) -> Option<Result<Raw>> {
        let memory = {
            let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            let index = kept.iter().position(|m| m.capacity == capacity)?;
            kept.swap_remove(index)
        };
        let registered = self.register(memory.address as *mut u8, capacity, true);
        match registered {
            Ok(raw) => {
                // Reserved under the cap by the caller; kept bytes are counted apart.
                self.inner.mapped_bytes.fetch_sub(capacity, Ordering::SeqCst);
                self.inner.kept_bytes.fetch_add(capacity, Ordering::Relaxed);
                Some(Ok(Raw { view_slot: memory.view_slot, ..raw }))
            }
            Err(e) => {
                KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(memory);
                Some(Err(e))
            }
        }
    }

    /// Unmaps free buffers of other classes, largest first, until `needed` bytes fit under the cap.
    /// Free buffers of the wanted class would have been used, so they are not considered; pinned
    /// ones (a view may still point into them) are kept.
    fn unmap_free_except(&self, wanted: usize, needed: usize) -> bool {
        let inner = &self.inner;
        inner.reap_ghosts();
        let mut freed_any = false;
        for class in (0..inner.classes.len()).rev() {
            if class == wanted {
                continue;
            }
            loop {
                if inner.mapped_bytes.load(Ordering::SeqCst) + needed <= inner.cap_bytes {
                    return true;
                }
                let raw = {
                    let mut free = inner.classes[class].lock();
                    // Acquire: pairs with the Release of `ViewPin::drop`, so the view's last
                    // accesses happen before the unmap. A free buffer cannot gain a pin (pins are
                    // taken through a `Buffer`), so 0 here stays 0. A pinned one can be given up
                    // only if it is a mapping of its own (it becomes a ghost, below).
                    // Kept memory is never given up (views without pins may point into it).
                    let unpinned = free.iter().position(|raw| !raw.kept && raw.pins.load(Ordering::Acquire) == 0);
                    match unpinned.or_else(|| free.iter().position(|raw| raw.capacity >= MMAP_MIN_BYTES)) {
                        Some(index) => free.swap_remove(index),
                        None => break,
                    }
                };
                debug_assert!(!raw.kept, "kept memory is small: never a ghost, never released");
                if raw.pins.load(Ordering::Acquire) == 0 {
                    inner.release_raw(raw);
                } else {
                    inner.ghost(raw);
                }
                freed_any = true;
            }
        }
        freed_any && inner.mapped_bytes.load(Ordering::SeqCst) + needed <= inner.cap_bytes
    }

    /// Bytes mapped, kept buffers included.
    pub(crate) fn mapped_bytes(&self) -> usize {
        self.inner.mapped_bytes.load(Ordering::Relaxed) + self.inner.kept_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn mapped_bytes_peak(&self) -> usize {
        self.inner.mapped_bytes_peak.load(Ordering::Relaxed)
    }

    /// The bytes of buffers handed out: mapped, less what waits on the free lists. Counted here,
    /// when asked, rather than on every allocation and return (an atomic instruction each, on the
    /// path of every message). A snapshot: while other threads allocate, return, map or unmap,
    /// it may be off by their buffers.
    pub(crate) fn in_use_bytes(&self) -> usize {
        let inner = &self.inner;
        let mapped = self.mapped_bytes();
        let free: usize = inner.classes.iter().enumerate().map(|(class, free)| free.lock().len() * class_capacity(class)).sum();
        mapped.saturating_sub(free)
    }

    pub(crate) fn cap_bytes(&self) -> usize {
        self.inner.cap_bytes
    }
}

impl PoolInner {
    /// Gives up a free buffer that a view may still point into (pinned): its registration and its
    /// pages go (the cap counts it no more), its address range stays mapped (reads see zeros, a
    /// stale write costs a fresh page) until the last pin is gone and `reap_ghosts` unmaps it.
    fn ghost(&self, raw: Raw) {
        debug_assert!(raw.capacity >= MMAP_MIN_BYTES, "only own mappings become ghosts");
        self.context.unmap(raw.memh);
        // SAFETY: `raw` is a private anonymous mapping of `capacity` bytes made by `allocate`, owned
        // by the pool (on no free list now, in no `Buffer`); MADV_DONTNEED keeps the range mapped.
        let status = unsafe { libc::madvise(raw.address as *mut libc::c_void, raw.capacity, libc::MADV_DONTNEED) };
        debug_assert_eq!(status, 0);
        self.mapped_bytes.fetch_sub(raw.capacity, Ordering::SeqCst);
        self.ghost_bytes.fetch_add(raw.capacity, Ordering::Relaxed);
        self.ghosts.lock().unwrap().push(Raw { memh: ptr::null_mut(), ..raw });
    }

    /// Unmaps the ghosts whose views are all gone.
    fn reap_ghosts(&self) {
        let mut ghosts = self.ghosts.lock().unwrap();
        ghosts.retain(|raw| {
            // Acquire: as in `unmap_free_except`.
            if raw.pins.load(Ordering::Acquire) > 0 {
                return true;
            }
            deallocate(raw.address, raw.capacity);
            self.ghost_bytes.fetch_sub(raw.capacity, Ordering::Relaxed);
            false
        });
    }

    fn release_raw(&self, raw: Raw) {
        self.context.unmap(raw.memh);
        deallocate(raw.address, raw.capacity);
        self.mapped_bytes.fetch_sub(raw.capacity, Ordering::SeqCst);
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let mut kept = Vec::new();
        for class in &self.classes {
            for raw in class.lock().drain(..) {
                self.context.unmap(raw.memh);
                if raw.kept {
                    kept.push(KeptMemory { address: raw.address as usize, capacity: raw.capacity, view_slot: raw.view_slot });
                } else {
                    deallocate(raw.address, raw.capacity);
                }
            }
        }
        if !kept.is_empty() {
            KEPT.lock().unwrap_or_else(|e| e.into_inner()).append(&mut kept);
        }
        // The holder of a view keeps the pool alive (see the module comment): no pin is left.
        for raw in self.ghosts.lock().unwrap().drain(..) {
            deallocate(raw.address, raw.capacity);
        }
    }
}

/// Registered memory from a node's pool. Returned to the pool when dropped.
pub struct Buffer {
    pool: Arc<PoolInner>,
    raw: Option<Raw>,
    len: usize,
}

impl Buffer {
    fn raw(&self) -> &Raw {
        self.raw.as_ref().expect("buffer already returned")
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn capacity(&self) -> usize {
        self.raw().capacity
    }
    /// Sets the valid length; panics above `capacity()` (a caller bug, not input).
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "set_len {len} above capacity {}", self.capacity());
        self.len = len;
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping of `capacity` bytes at `address` lives as long as this `Buffer` (it
        // returns to the pool only in `drop`), `len <= capacity` (`set_len` asserts it) and the
        // memory is initialized (zeroed by mmap or written before use: see `allocate`).
        unsafe { std::slice::from_raw_parts(self.raw().address, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only slice of the buffer in Rust.
        unsafe { std::slice::from_raw_parts_mut(self.raw().address, self.len) }
    }
    pub fn as_ptr(&self) -> *const u8 {
        self.raw().address
    }
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.raw().address
    }
    pub(crate) fn memh(&self) -> u::ucp_mem_h {
        self.raw().memh
    }
    /// Pins this buffer's memory for a view that may outlive the buffer: until the pin is dropped,
    /// the pool never unmaps it (it may hand it out again). A holder of a view must also keep the
    /// node (its pool) alive.
    pub fn pin_view(&self) -> ViewPin {
        let pins = self.raw().pins.clone();
        pins.fetch_add(1, Ordering::Relaxed);
        ViewPin { pins }
    }

    /// Instead of a pin: marks this buffer's memory kept for good (see the module comment), so a
    /// view of it may outlive the buffer and the pool without one. True if the memory is kept
    /// (already, or now); false for a buffer above `KEPT_BUFFER_MAX_BYTES` or with the pool's
    /// `KEPT_BYTES_MAX` reached: then pin it.
    pub fn keep_for_views(&mut self) -> bool {
        let pool = &self.pool;
        let raw = self.raw.as_mut().expect("buffer already returned");
        if raw.kept {
            return true;
        }
        if raw.capacity > KEPT_BUFFER_MAX_BYTES {
            return false;
        }
        let mut kept = pool.kept_bytes.load(Ordering::Relaxed);
        loop {
            if kept + raw.capacity > KEPT_BYTES_MAX {
                return false;
            }
            match pool.kept_bytes.compare_exchange_weak(kept, kept + raw.capacity, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => kept = now,
            }
        }
        raw.kept = true;
        pool.mapped_bytes.fetch_sub(raw.capacity, Ordering::SeqCst);
        true
    }

    /// Of a kept buffer (`keep_for_views`): the value attached to its memory by
    /// `set_kept_view_slot`, 0 if none yet; `None` if the buffer is not kept. Kept memory lives as
    /// long as the process and keeps its address and capacity, so the bridge to a managed runtime
    /// may attach to it, once, an object standing for the memory (the JVM bridge: its root view),
    /// which stays valid for every later buffer of that memory. The pool never interprets it.
    pub fn kept_view_slot(&self) -> Option<usize> {
        let raw = self.raw();
        raw.kept.then_some(raw.view_slot)
    }

    /// Attaches `slot` to this kept buffer's memory for good (see `kept_view_slot`). Panics if the
    /// buffer is not kept or already has one: a slot is set once, by its first hand-out.
    pub fn set_kept_view_slot(&mut self, slot: usize) {
        let raw = self.raw.as_mut().expect("buffer already returned");
        assert!(raw.kept, "only kept memory carries a view slot");
        assert_eq!(raw.view_slot, 0, "a view slot is set once");
        raw.view_slot = slot;
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer {{ len: {}, capacity: {} }}", self.len, self.capacity())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            let pool = &self.pool;
            let class = class_of(raw.capacity);
            pool.classes[class].lock().push(raw);
            if pool.waiters.load(Ordering::SeqCst) > 0 {
                let _guard = pool.returned.0.lock().unwrap();
                pool.returned.1.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::time::Duration;

    fn pool(cap: usize) -> Pool {
        let context = Arc::new(Context::new(&Config::default()).unwrap());
        Pool::new(context, cap, 1 << 20)
    }

    #[test]
    fn classes_round_up() {
        assert_eq!(class_of(1), 0);
        assert_eq!(class_of(256), 0);
        assert_eq!(class_of(257), 1);
        assert_eq!(class_capacity(class_of(1 << 20)), 1 << 20);
    }

    #[test]
    fn reuses_returned_buffers() {
        let pool = pool(4 << 20);
        let first = pool.alloc(1000, None).unwrap();
        let address = first.as_ptr();
        assert_eq!(first.len(), 1000);
        assert_eq!(first.capacity(), 1024);
        drop(first);
        let second = pool.alloc(900, None).unwrap();
        assert_eq!(second.as_ptr(), address);
        assert_eq!(pool.inner.maps.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn cap_is_hard() {
        let pool = pool(2 << 20);
        let a = pool.alloc(1 << 20, None).unwrap();
        let _b = pool.alloc(1 << 20, None).unwrap();
        let err = pool.alloc(1 << 20, None).unwrap_err();
        assert!(matches!(err, Error::PoolExhausted { .. }), "{err}");
        assert!(pool.mapped_bytes() <= 2 << 20);
        // A waiter gets the buffer once it comes back.
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.alloc(1 << 20, Some(Instant::now() + Duration::from_secs(10))).map(|b| b.len()))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(a);
        assert_eq!(waiter.join().unwrap().unwrap(), 1 << 20);
    }

    #[test]
    fn free_buffers_of_other_classes_are_reclaimed_at_the_cap() {
        let pool = pool(1 << 20);
        let small: Vec<Buffer> = (0..4).map(|_| pool.alloc(128 << 10, None).unwrap()).collect();
        drop(small);
        assert_eq!(pool.mapped_bytes(), 512 << 10);
        let big = pool.alloc(1 << 20, None).unwrap();
        assert_eq!(big.capacity(), 1 << 20);
        assert_eq!(pool.mapped_bytes(), 1 << 20);
    }

    #[test]
    fn the_peak_of_mapped_memory_outlives_the_memory() {
        let pool = pool(1 << 20);
        assert_eq!(pool.mapped_bytes_peak(), 0);
        let small: Vec<Buffer> = (0..3).map(|_| pool.alloc(128 << 10, None).unwrap()).collect();
        assert_eq!(pool.mapped_bytes_peak(), 384 << 10);
        drop(small);
        // Reclaiming the free small buffers for a big one lowers what is mapped, and the peak
        // becomes the big buffer's: the cap, never above it.
        let big = pool.alloc(1 << 20, None).unwrap();
        assert_eq!(pool.mapped_bytes(), 1 << 20);
        assert_eq!(pool.mapped_bytes_peak(), 1 << 20);
        drop(big);
        let _again = pool.alloc(128 << 10, None).unwrap();
        assert_eq!(pool.mapped_bytes_peak(), 1 << 20, "the peak stays when memory is given back");
    }

    #[test]
    fn pinned_free_buffers_stay_mapped_at_the_cap() {
        let pool = pool(1 << 20);
        let small: Vec<Buffer> = (0..4).map(|_| pool.alloc(128 << 10, None).unwrap()).collect();
        let addresses: Vec<*const u8> = small.iter().map(|b| b.as_ptr()).collect();
        for (buffer, address) in small.iter().zip(&addresses) {
            // SAFETY: (test) writes the first byte of a live buffer of 128 KiB.
            unsafe { *(*address as *mut u8) = 7 };
            assert_eq!(buffer.as_slice()[0], 7);
        }
        // Two of the four get a view that outlives the buffer (as a Java ByteBuffer does).
        let pins: Vec<ViewPin> = small[..2].iter().map(|b| b.pin_view()).collect();
        drop(small);
        // At the cap the unpinned two are unmapped and the pinned two become ghosts: the cap holds
        // and the big buffer fits.
        let big = pool.alloc(1 << 20, None).unwrap();
        assert_eq!(pool.mapped_bytes(), 1 << 20);
        assert_eq!(pool.inner.ghost_bytes.load(Ordering::Relaxed), 256 << 10);
        for address in &addresses[..2] {
            // SAFETY: (test) a ghost's range is still mapped (its pages were dropped): reads see 0.
            assert_eq!(unsafe { std::ptr::read_volatile(*address) }, 0, "a stale view reads zeros, it does not fault");
        }
        drop(big);
        // Once the views are gone the ghosts are unmapped at the next reclaim.
        drop(pins);
        let _other = pool.alloc(512 << 10, None).unwrap();
        assert_eq!(pool.inner.ghost_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn small_pinned_buffers_are_kept_until_unpinned() {
        let pool = pool(1 << 20);
        let small: Vec<Buffer> = (0..32).map(|_| pool.alloc(32 << 10, None).unwrap()).collect();
        let pins: Vec<ViewPin> = small.iter().map(|b| b.pin_view()).collect();
        drop(small);
        // Heap memory cannot be given up page-wise: with every small buffer pinned nothing fits.
        assert!(matches!(pool.alloc(1 << 20, None), Err(Error::PoolExhausted { .. })));
        drop(pins);
        assert_eq!(pool.alloc(1 << 20, None).unwrap().capacity(), 1 << 20);
    }

    /// Buffers up to `KEPT_BUFFER_MAX_BYTES` are kept, one byte more is pinned.
    #[test]
    fn buffers_up_to_16_kib_are_kept() {
        let pool = pool(1 << 20);
        let mut at_limit = pool.alloc(KEPT_BUFFER_MAX_BYTES, None).unwrap();
        assert_eq!(at_limit.capacity(), 16 << 10);
        assert!(at_limit.keep_for_views());
        let mut above = pool.alloc(KEPT_BUFFER_MAX_BYTES + 1, None).unwrap();
        assert!(!above.keep_for_views());
    }

    #[test]
    fn kept_buffers_are_never_reclaimed_and_outlive_their_pool() {
        // 2 KiB: a class the other tests of this crate do not keep (KEPT is the process's).
        let pool = pool(64 << 10);
        let mut kept = pool.alloc(2048, None).unwrap();
        assert!(kept.keep_for_views());
        assert!(kept.keep_for_views(), "kept once, kept for good");
        let address = kept.as_ptr() as usize;
        drop(kept);
        let mut large = pool.alloc(64 << 10, None).unwrap();
        assert!(!large.keep_for_views(), "only small buffers are kept");
        drop(large);
        // Kept bytes are not under the cap (the 64 KiB fit beside them) and never given up.
        let big = pool.alloc(64 << 10, None).unwrap();
        assert_eq!(pool.inner.classes[class_of(2048)].lock().len(), 1, "the kept buffer stays on its free list");
        assert_eq!(pool.mapped_bytes(), (64 << 10) + 2048);
        drop(big);
        drop(pool);
        assert!(
            KEPT.lock().unwrap().iter().any(|m| m.address == address && m.capacity == 2048),
            "a gone pool's kept memory goes to the store, not back to the allocator"
        );
        // A later pool takes its small buffers from the store first; they stay kept.
        let later = super::tests::pool(64 << 10);
        let reused = later.alloc(2000, None).unwrap();
        assert!(reused.raw().kept);
        assert_eq!(later.inner.kept_bytes.load(Ordering::Relaxed), 2048);
    }

    /// A kept buffer's view slot stays with its memory: on the pool's free list, in the store
    /// after the pool, in a later pool; a buffer that is not kept has none.
    #[test]
    fn a_view_slot_stays_with_kept_memory_for_good() {
        // 512 B: a class the other tests of this crate neither keep nor allocate (KEPT is the process's).
        let pool = pool(64 << 10);
        let mut plain = pool.alloc(512, None).unwrap();
        assert_eq!(plain.kept_view_slot(), None, "not kept: no slot");
        assert!(plain.keep_for_views());
        assert_eq!(plain.kept_view_slot(), Some(0), "kept, nothing attached yet");
        plain.set_kept_view_slot(0x5107);
        let address = plain.as_ptr() as usize;
        drop(plain);
        let again = pool.alloc(500, None).unwrap();
        assert_eq!((again.as_ptr() as usize, again.kept_view_slot()), (address, Some(0x5107)));
        drop(again);
        drop(pool);
        assert!(KEPT.lock().unwrap().iter().any(|m| m.address == address && m.view_slot == 0x5107));
        let later = super::tests::pool(64 << 10);
        let reused = later.alloc(512, None).unwrap();
        assert_eq!((reused.as_ptr() as usize, reused.kept_view_slot()), (address, Some(0x5107)));
    }

    #[test]
    #[should_panic(expected = "a view slot is set once")]
    fn a_view_slot_is_set_once() {
        let pool = pool(64 << 10);
        let mut buffer = pool.alloc(256, None).unwrap();
        assert!(buffer.keep_for_views());
        buffer.set_kept_view_slot(1);
        buffer.set_kept_view_slot(2);
    }

    #[test]
    fn a_pool_keeps_at_most_its_bound() {
        let pool = pool(64 << 20);
        let mut buffers = Vec::new();
        let mut kept = 0;
        for _ in 0..(KEPT_BYTES_MAX / 4096 + 8) {
            let mut buffer = pool.alloc(4096, None).unwrap();
            if buffer.keep_for_views() {
                kept += buffer.capacity();
            }
            buffers.push(buffer);
        }
        assert!(kept <= KEPT_BYTES_MAX && kept + 4096 > KEPT_BYTES_MAX, "kept {kept}");
        assert!(pool.inner.kept_bytes.load(Ordering::Relaxed) <= KEPT_BYTES_MAX + 4096 * 8);
    }

    #[test]
    fn small_buffers_have_a_reserve_beyond_the_cap() {
        let pool = pool(2 << 20);
        let _big: Vec<Buffer> = (0..2).map(|_| pool.alloc(1 << 20, None).unwrap()).collect();
        assert!(matches!(pool.alloc(8192, None), Err(Error::PoolExhausted { .. })));
        // An acknowledgement still fits, up to the reserve.
        let small: Vec<Buffer> = (0..(SMALL_RESERVE_BYTES / SMALL_BUFFER_MAX_BYTES)).map(|_| pool.alloc(100, None).unwrap()).collect();
        assert!(pool.mapped_bytes() <= (2 << 20) + SMALL_RESERVE_BYTES);
        drop(small);
    }

    #[test]
    fn threads_allocating_and_returning_at_once_share_the_free_lists() {
        let pool = pool(4 << 20);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000usize {
                        let mut buffer = pool.alloc(100 + (i % 3) * 300, None).unwrap();
                        buffer.as_mut_slice()[0] = t as u8;
                        assert_eq!(buffer.as_slice()[0], t as u8, "no two holders of one buffer");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(pool.in_use_bytes(), 0, "every buffer came back");
        assert!(pool.mapped_bytes() <= 4 * (256 + 512 + 1024), "buffers were reused: {} bytes mapped", pool.mapped_bytes());
    }

    #[test]
    fn too_large_is_refused() {
        let pool = pool(4 << 20);
        assert!(matches!(pool.alloc(2 << 20, None), Err(Error::TooLarge { .. })));
    }
}
