//! Connection buffers: a read buffer with cursors and a write buffer that is the TCP `Reply`,
//! both backed by byte vectors that a worker recycles, so that the hot path allocates nothing and
//! large values do not pay for fresh memory (or zero-filling) on every request.
//!
//! Every vector here is fully initialised up to its `len()` (no uninitialised bytes are ever lent
//! out as `&mut [u8]`); the usable size of a buffer is its `len()`, not its capacity.
//!
//! Memory bound: every buffer larger than `INPUT_INITIAL_BYTES` (a large value arriving or leaving,
//! kept spare or in use) is counted in one `Budget` shared by all workers
//! (`--conn-buffers-mb`). Growth beyond it fails: a read buffer that cannot grow closes its
//! connection, a reply that cannot grow is dropped and its connection closed (`Output::reply`).
//! Small buffers are two per connection (`-c` bounds them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cache_proto::session::Reply;

/// Size of a connection's read buffer when it is created or shrunk back (memcached: 16 KiB).
pub const INPUT_INITIAL_BYTES: usize = 16 << 10;
/// Buffers at most this large are kept by the connection while it is idle.
pub const KEEP_BYTES: usize = 64 << 10;
/// A worker keeps at most this many small vectors ...
const RECYCLED_SMALL_MAX: usize = 32;
/// ... and at most this many large ones, each at most `RECYCLED_LARGE_BYTES_MAX`.
const RECYCLED_LARGE_MAX: usize = 2;
const RECYCLED_LARGE_BYTES_MAX: usize = 4 << 20;
const LARGE_GRANULE_BYTES: usize = 64 << 10;

/// Bytes of large connection buffers, all workers together, and their limit.
pub struct Budget {
    limit_bytes: usize,
    used_bytes: AtomicUsize,
}

impl Budget {
    pub fn new(limit_bytes: usize) -> Budget {
        Budget { limit_bytes, used_bytes: AtomicUsize::new(0) }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    fn try_charge(&self, bytes: usize) -> bool {
        let mut used = self.used_bytes.load(Ordering::Relaxed);
        loop {
            let Some(next) = used.checked_add(bytes).filter(|&n| n <= self.limit_bytes) else { return false };
            match self.used_bytes.compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn refund(&self, bytes: usize) {
        let before = self.used_bytes.fetch_sub(bytes, Ordering::Relaxed);
        assert!(before >= bytes, "buffer budget refund {bytes} above the {before} bytes charged");
    }
}

/// A worker's spare vectors. Bounded: at most 32 small and 2 large (<= 4 MiB) ones.
pub struct Recycler {
    small: Vec<Vec<u8>>,
    large: Vec<Vec<u8>>,
    budget: Arc<Budget>,
}

impl Recycler {
    pub fn new(budget: Arc<Budget>) -> Recycler {
        Recycler { small: Vec::new(), large: Vec::new(), budget }
    }

    /// A zeroed-or-stale vector of at least `len` bytes (its `len()`), reused if one fits;
    /// `None` if a new large one would exceed the budget.
    pub fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        if len <= INPUT_INITIAL_BYTES {
            if let Some(v) = self.small.pop() {
                debug_assert_eq!(v.len(), INPUT_INITIAL_BYTES);
                return Some(v);
            }
            return Some(vec![0u8; INPUT_INITIAL_BYTES]);
        }
        if let Some(i) = self.large.iter().position(|v| v.len() >= len) {
            return Some(self.large.swap_remove(i));
        }
        // Rounded to 64 KiB, so that a vector fits the next request of about the same size.
        let bytes = len.checked_next_multiple_of(LARGE_GRANULE_BYTES)?;
        if !self.budget.try_charge(bytes) {
            // Free the spares first: they are charged too.
            for spare in self.large.drain(..) {
                self.budget.refund(spare.len());
            }
            if !self.budget.try_charge(bytes) {
                return None;
            }
        }
        // calloc: a large block comes from mmap as zero pages, touched only when written.
        Some(vec![0u8; bytes])
    }

    pub fn give(&mut self, v: Vec<u8>) {
        let len = v.len();
        if len <= INPUT_INITIAL_BYTES {
            if len == INPUT_INITIAL_BYTES && self.small.len() < RECYCLED_SMALL_MAX {
                self.small.push(v);
            }
            return;
        }
        // A large vector: charged to the budget until it is freed.
        let mut freed = Some(v);
        if len <= RECYCLED_LARGE_BYTES_MAX {
            if self.large.len() < RECYCLED_LARGE_MAX {
                self.large.push(freed.take().unwrap());
            } else if let Some(smallest) = self.large.iter_mut().min_by_key(|l| l.len()) {
                if smallest.len() < len {
                    freed = Some(std::mem::replace(smallest, freed.take().unwrap()));
                }
            }
        }
        if let Some(v) = freed {
            self.budget.refund(v.len());
        }
    }
}

impl Drop for Recycler {
    fn drop(&mut self) {
        for spare in self.large.drain(..) {
            self.budget.refund(spare.len());
        }
    }
}

/// A connection's input: bytes `[start, end)` of `data` are received and not yet consumed.
pub struct Input {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// Largest `data.len()` allowed: one command (line + largest value) must fit.
    limit_bytes: usize,
}

/// Why the read buffer cannot take more bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum InputFull {
    /// One incomplete command fills `limit_bytes`.
    Limit,
    /// The buffer budget has no room for a larger buffer now.
    Budget,
}

impl Input {
    pub fn new(recycler: &mut Recycler, limit_bytes: usize) -> Input {
        assert!(limit_bytes >= INPUT_INITIAL_BYTES);
        let data = recycler.take(INPUT_INITIAL_BYTES).expect("small buffers are not budgeted");
        Input { data, start: 0, end: 0, limit_bytes }
    }

    pub fn pending(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start, "consumed {n} of {} bytes", self.end - self.start);
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free space to read into, making room first (compacting, then growing up to the limit).
    /// `InputFull` when the buffer holds `limit_bytes` of one incomplete command.
    pub fn space(&mut self, recycler: &mut Recycler) -> Result<&mut [u8], InputFull> {
        let capacity = self.data.len();
        // Compact when less than a quarter is free: the move is at most one command's bytes, once.
        if self.start > 0 && capacity - self.end < capacity / 4 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == capacity {
            if capacity >= self.limit_bytes {
                return Err(InputFull::Limit);
            }
            let target = (capacity * 2).min(self.limit_bytes);
            let mut larger = recycler.take(target).ok_or(InputFull::Budget)?;
            larger[..self.end - self.start].copy_from_slice(&self.data[self.start..self.end]);
            self.end -= self.start;
            self.start = 0;
            recycler.give(std::mem::replace(&mut self.data, larger));
        }
        Ok(&mut self.data[self.end..])
    }

    /// Free space to read into without growing the buffer (compacting first when that helps);
    /// empty when the buffer is full. For a connection whose commands wait: it may read what its
    /// buffer holds, and no more, until they run.
    pub fn room(&mut self) -> &mut [u8] {
        if self.start > 0 && self.end == self.data.len() {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.data[self.end..]
    }

    /// Whether `room` would return any space.
    pub fn has_room(&self) -> bool {
        self.start > 0 || self.end < self.data.len()
    }

    /// Makes room for a command of `needed` bytes starting at the first unconsumed byte (as the
    /// session announced it), so that it arrives without step-by-step growth. At most the limit.
    pub fn reserve(&mut self, needed: usize, recycler: &mut Recycler) {
        let needed = needed.min(self.limit_bytes);
        if self.start + needed <= self.data.len() {
            return;
        }
        let pending = self.end - self.start;
        if needed <= self.data.len() {
            self.data.copy_within(self.start..self.end, 0);
        } else {
            // Without budget, nothing now: the buffer grows step by step, or `space` fails.
            let Some(mut larger) = recycler.take(needed) else { return };
            larger[..pending].copy_from_slice(&self.data[self.start..self.end]);
            recycler.give(std::mem::replace(&mut self.data, larger));
        }
        self.start = 0;
        self.end = pending;
    }

    pub fn filled(&mut self, n: usize) {
        assert!(self.end + n <= self.data.len());
        self.end += n;
    }

    /// Gives a grown buffer back while the connection is idle.
    pub fn shrink_if_idle(&mut self, recycler: &mut Recycler) {
        if self.is_empty() && self.data.len() > KEEP_BYTES {
            let small = recycler.take(INPUT_INITIAL_BYTES).expect("small buffers are not budgeted");
            recycler.give(std::mem::replace(&mut self.data, small));
        }
    }

    pub fn release(self, recycler: &mut Recycler) {
        recycler.give(self.data);
    }
}

/// A connection's output: bytes `[sent, used)` of `data` are waiting for the socket.
#[derive(Default)]
pub struct Output {
    data: Vec<u8>,
    used: usize,
    sent: usize,
}

impl Output {
    pub fn pending(&self) -> &[u8] {
        &self.data[self.sent..self.used]
    }

    pub fn pending_len(&self) -> usize {
        self.used - self.sent
    }

    pub fn advance(&mut self, n: usize) {
        assert!(n <= self.pending_len());
        self.sent += n;
        if self.sent == self.used {
            self.sent = 0;
            self.used = 0;
        }
    }

    pub fn shrink_if_idle(&mut self, recycler: &mut Recycler) {
        if self.used == 0 && self.data.len() > KEEP_BYTES {
            recycler.give(std::mem::take(&mut self.data));
        }
    }

    pub fn release(self, recycler: &mut Recycler) {
        if !self.data.is_empty() {
            recycler.give(self.data);
        }
    }

    /// The `Reply` that appends to this output, growing through the worker's recycler, up to
    /// `cap_bytes` of unsent output and as far as the budget allows. Beyond, the reply overflows:
    /// further bytes go to `scratch` (bounded by one append) and `OutputReply::finish` takes
    /// back everything appended through it.
    pub fn reply<'a>(&'a mut self, recycler: &'a mut Recycler, scratch: &'a mut Vec<u8>, cap_bytes: usize) -> OutputReply<'a> {
        let used_before = self.used;
        OutputReply { output: self, recycler, scratch, cap_bytes, used_before, overflowed_at: None, overflow_bytes: 0 }
    }
}

pub struct OutputReply<'a> {
    output: &'a mut Output,
    recycler: &'a mut Recycler,
    scratch: &'a mut Vec<u8>,
    cap_bytes: usize,
    /// Where this reply started in the output (unsent bytes before it stay).
    used_before: usize,
    /// The reply's length (its mark) when it overflowed, if it did.
    overflowed_at: Option<usize>,
    /// Bytes appended to `scratch` since.
    overflow_bytes: usize,
}

impl OutputReply<'_> {
    /// Whether the reply overflowed; if so, what it appended is removed from the output.
    pub fn finish(self) -> bool {
        let overflowed = self.overflowed_at.is_some();
        if overflowed {
            let out = self.output;
            out.used = self.used_before.min(out.used);
            if out.used <= out.sent {
                out.used = 0;
                out.sent = 0;
            }
        }
        overflowed
    }

    fn overflow(&mut self, len: usize) -> &mut [u8] {
        if self.overflowed_at.is_none() {
            self.overflowed_at = Some(self.output.used - self.used_before);
        }
        self.overflow_bytes += len;
        self.scratch.resize(len, 0);
        &mut self.scratch[..len]
    }
}

impl Reply for OutputReply<'_> {
    fn mark(&self) -> usize {
        match self.overflowed_at {
            Some(at) => at + self.overflow_bytes,
            None => self.output.used - self.used_before,
        }
    }

    fn truncate(&mut self, mark: usize) {
        assert!(mark <= self.mark());
        if let Some(at) = self.overflowed_at {
            if mark > at {
                // Still past the overflow: the reply stays refused.
                self.overflow_bytes = mark - at;
                return;
            }
            self.overflowed_at = None;
            self.overflow_bytes = 0;
        }
        self.output.used = self.used_before + mark;
    }

    fn append(&mut self, len: usize) -> &mut [u8] {
        if self.overflowed_at.is_some() {
            return self.overflow(len);
        }
        let need = self.output.used.checked_add(len).expect("reply length overflows");
        if need - self.output.sent > self.cap_bytes {
            return self.overflow(len);
        }
        if need > self.output.data.len() {
            // Drop what was sent, then move the unsent bytes into a larger vector (one copy of the
            // bytes so far; the value about to be appended is written once, by the caller).
            let target = need.max(self.output.data.len() * 2);
            let Some(mut larger) = self.recycler.take(target) else { return self.overflow(len) };
            let out = &mut *self.output;
            let pending = out.used - out.sent;
            larger[..pending].copy_from_slice(&out.data[out.sent..out.used]);
            let old = std::mem::replace(&mut out.data, larger);
            if !old.is_empty() {
                self.recycler.give(old);
            }
            self.used_before = self.used_before.saturating_sub(out.sent);
            out.used = pending;
            out.sent = 0;
        }
        let out = &mut *self.output;
        let start = out.used;
        out.used += len;
        &mut out.data[start..out.used]
    }

    fn extend_from(&mut self, data: &[u8]) {
        crate::copy::copy(self.append(data.len()), data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_grows_to_its_limit_and_no_further() {
        let mut r = Recycler::new(Arc::new(Budget::new(64 << 20)));
        let mut input = Input::new(&mut r, 64 << 10);
        let mut total = 0;
        loop {
            match input.space(&mut r) {
                Ok(space) => {
                    let n = space.len();
                    space.fill(7);
                    input.filled(n);
                    total += n;
                }
                Err(InputFull::Limit) => break,
                Err(InputFull::Budget) => panic!("budget"),
            }
        }
        assert_eq!(total, 64 << 10);
        assert!(input.pending().iter().all(|&b| b == 7));
        input.consume(total);
        input.shrink_if_idle(&mut r);
        assert!(input.is_empty());
    }

    #[test]
    fn input_keeps_the_unconsumed_tail_across_compaction() {
        let mut r = Recycler::new(Arc::new(Budget::new(64 << 20)));
        let mut input = Input::new(&mut r, 1 << 20);
        let space = input.space(&mut r).unwrap();
        let n = space.len();
        for (i, b) in space.iter_mut().enumerate() {
            *b = i as u8;
        }
        input.filled(n);
        input.consume(n - 10);
        let expected: Vec<u8> = (n - 10..n).map(|i| i as u8).collect();
        let _ = input.space(&mut r).unwrap();
        assert_eq!(input.pending(), &expected[..]);
    }

    #[test]
    fn room_never_grows_the_buffer() {
        let mut r = Recycler::new(Arc::new(Budget::new(64 << 20)));
        let mut input = Input::new(&mut r, 1 << 20);
        let n = input.room().len();
        assert_eq!(n, INPUT_INITIAL_BYTES);
        input.room()[..n].fill(1);
        input.filled(n);
        assert!(!input.has_room());
        assert!(input.room().is_empty());
        input.consume(10);
        assert!(input.has_room());
        assert_eq!(input.room().len(), 10, "compacted, not grown");
        assert_eq!(input.pending().len(), n - 10);
        assert!(input.pending().iter().all(|&b| b == 1));
    }

    #[test]
    fn reserve_makes_room_for_an_announced_command() {
        let mut r = Recycler::new(Arc::new(Budget::new(64 << 20)));
        let mut input = Input::new(&mut r, 1 << 20);
        let space = input.space(&mut r).unwrap();
        space[..5].copy_from_slice(b"xxabc");
        input.filled(5);
        input.consume(2);
        input.reserve(500_000, &mut r);
        assert_eq!(input.pending(), b"abc");
        assert!(input.space(&mut r).unwrap().len() >= 500_000 - 3);
        input.reserve(5 << 20, &mut r); // above the limit: up to the limit only
        assert!(input.space(&mut r).unwrap().len() >= (1 << 20) - 3);
    }

    #[test]
    fn output_reply_appends_and_keeps_unsent_bytes() {
        let mut r = Recycler::new(Arc::new(Budget::new(64 << 20)));
        let mut out = Output::default();
        let mut scratch = Vec::new();
        out.reply(&mut r, &mut scratch, 1 << 20).extend_from(b"hello ");
        out.advance(3);
        let big = vec![9u8; 100_000];
        out.reply(&mut r, &mut scratch, 1 << 20).extend_from(&big);
        assert_eq!(&out.pending()[..3], b"lo ");
        assert_eq!(out.pending_len(), 3 + big.len());
        let n = out.pending_len();
        out.advance(n);
        out.shrink_if_idle(&mut r);
        assert_eq!(out.pending_len(), 0);
        // The large vector went back to the recycler and comes out again.
        assert!(r.take(100_000).unwrap().len() >= 100_003);
    }

    #[test]
    fn a_reply_beyond_its_cap_or_the_budget_is_taken_back() {
        let budget = Arc::new(Budget::new(1 << 20));
        let mut r = Recycler::new(budget.clone());
        let mut out = Output::default();
        let mut scratch = Vec::new();
        out.reply(&mut r, &mut scratch, 4 << 20).extend_from(b"kept\r\n");
        // Over the per-connection cap.
        let mut reply = out.reply(&mut r, &mut scratch, 4 << 20);
        reply.extend_from(b"VALUE ...");
        reply.append(5 << 20);
        assert!(reply.finish());
        assert_eq!(out.pending(), b"kept\r\n");
        // Over the budget (1 MiB) while under the cap.
        let mut reply = out.reply(&mut r, &mut scratch, 4 << 20);
        reply.append(600 << 10);
        reply.append(600 << 10);
        assert!(reply.finish());
        assert_eq!(out.pending(), b"kept\r\n");
        assert!(budget.used_bytes() <= budget.limit_bytes());
        let mut reply = out.reply(&mut r, &mut scratch, 4 << 20);
        reply.append(300 << 10);
        assert!(!reply.finish());
        assert_eq!(out.pending_len(), 6 + (300 << 10));
        let n = out.pending_len();
        out.advance(n);
        out.shrink_if_idle(&mut r);
        drop(r);
        assert_eq!(budget.used_bytes(), 0, "every large buffer refunded");
    }
}
