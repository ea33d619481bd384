//! The SSD tier's log: one preallocated file cut into log segments, written append-only through
//! write buffers, read record by record. It knows records (key, value, checksum) and where they
//! are; it does not know items, shards or the index (the store, in `tier.rs`, decides what goes
//! here and keeps the descriptors).
//!
//! - Writing: `append` copies a record into the active write buffer (memory); a full buffer is
//!   sealed and queued for the writer thread, which writes buffers in order (one writer, so a
//!   reused log segment is never overwritten by an older buffer). A record is readable from its
//!   buffer until the write completes, from the file after. When no buffer is free (the writer is
//!   behind) `append` refuses, and the caller evicts instead of spilling.
//! - Space: the current log segment fills; the next is a free one, or else the oldest is dropped
//!   (its generation advances, so every descriptor into it is stale: those items become misses).
//!   Segments whose records are mostly dead are compacted (their live records appended again) by
//!   the writer thread before it comes to that.
//! - Liveness: per segment, one atomic word of generation (high 32 bits) and bytes of records that
//!   linked items refer to (low 32 bits); an update for an old generation does nothing.
//!
//! Record format (little endian, 8-byte aligned; byte by byte in docs/cache-ssd-format.md):
//! `magic "SLC1" | crc32c u32 | value_bytes u32 | key_bytes u8 | 3 zero bytes | key | value | zero
//! padding to 8`, the CRC32C covering everything after itself (lengths, key, value; not the padding).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use crate::crc32c;
use crate::item::Descriptor;

pub(crate) const RECORD_HEADER_BYTES: usize = 16;
pub(crate) const RECORD_MAGIC: [u8; 4] = *b"SLC1";
/// The log file's name in `--ssd-path`.
pub const LOG_FILE_NAME: &str = "slipstream-cache.ssd";
/// Write buffers: one filling while the others are written.
pub(crate) const WRITE_BUFFERS: usize = 4;
/// How long `append` waits for the writer to free a buffer before refusing (then the item is
/// evicted instead: a bounded stall of the caller rather than an unbounded one or lost data).
const BUFFER_WAIT: Duration = Duration::from_millis(5);
/// Log segments in the smallest log.
pub(crate) const LOG_SEGMENTS_MIN: usize = 4;
/// Log segments are at most this large (and about a sixteenth of the log).
const LOG_SEGMENT_BYTES_MAX: usize = 64 << 20;
/// Reads waiting for an I/O thread; beyond, a read is refused (a miss, counted).
pub(crate) const READ_QUEUE_MAX: usize = 1024;
/// The writer compacts while fewer log segments than this are free.
pub(crate) const FREE_SEGMENTS_LOW: usize = 2;
/// A sealed log segment with at most this fraction (1/n) of its bytes live is worth compacting.
const COMPACTION_LIVE_FRACTION_DIVISOR: usize = 2;
/// The writer wakes up this often to look for compaction work even when nothing was written.
const WRITER_IDLE_WAKE: Duration = Duration::from_millis(200);

/// Bytes a record takes in the log.
#[inline]
pub(crate) fn record_bytes(key_bytes: usize, value_bytes: usize) -> usize {
    (RECORD_HEADER_BYTES + key_bytes + value_bytes).next_multiple_of(8)
}

/// Writes a record into `out` (exactly `record_bytes(..)` long).
pub(crate) fn encode_record(out: &mut [u8], key: &[u8], value: &[u8]) {
    assert!(key.len() <= u8::MAX as usize);
    assert_eq!(out.len(), record_bytes(key.len(), value.len()));
    out[0..4].copy_from_slice(&RECORD_MAGIC);
    out[8..12].copy_from_slice(&(value.len() as u32).to_le_bytes());
    out[12] = key.len() as u8;
    out[13..16].fill(0);
    let key_start = RECORD_HEADER_BYTES;
    let value_start = key_start + key.len();
    let value_end = value_start + value.len();
    out[key_start..value_start].copy_from_slice(key);
    out[value_start..value_end].copy_from_slice(value);
    out[value_end..].fill(0);
    let crc = crc32c::update(0, &out[8..value_end]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Why a record read back is not the value asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordError {
    /// The bytes are not the record the descriptor promised (bad magic, lengths, key or checksum).
    Corrupt,
}

/// The header of the record at the start of `bytes`: (key bytes, value bytes, record bytes).
pub(crate) fn record_lengths(bytes: &[u8]) -> Option<(usize, usize, usize)> {
    if bytes.len() < RECORD_HEADER_BYTES || bytes[0..4] != RECORD_MAGIC {
        return None;
    }
    let value_bytes = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let key_bytes = bytes[12] as usize;
    Some((key_bytes, value_bytes, record_bytes(key_bytes, value_bytes)))
}

/// The value of the record in `bytes` (the whole record), checked against the key expected and
/// its checksum.
pub(crate) fn decode_record<'a>(bytes: &'a [u8], key: &[u8]) -> Result<&'a [u8], RecordError> {
    let (key_bytes, value_bytes, total_bytes) = record_lengths(bytes).ok_or(RecordError::Corrupt)?;
    if total_bytes != bytes.len() || key_bytes != key.len() {
        return Err(RecordError::Corrupt);
    }
    let value_start = RECORD_HEADER_BYTES + key_bytes;
    let value_end = value_start + value_bytes;
    if &bytes[RECORD_HEADER_BYTES..value_start] != key {
        return Err(RecordError::Corrupt);
    }
    let stored_crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if crc32c::update(0, &bytes[8..value_end]) != stored_crc {
        return Err(RecordError::Corrupt);
    }
    Ok(&bytes[value_start..value_end])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentState {
    Free,
    /// Records are appended to it.
    Current,
    /// Full; in the FIFO, oldest dropped first.
    Sealed,
    /// The writer thread moves its live records away.
    Compacting,
}

/// Records written to the file's range `[offset_bytes, offset_bytes + data.len())`, in one segment.
struct WriteBuffer {
    data: Vec<u8>,
    offset_bytes: u64,
    segment: u32,
}

impl WriteBuffer {
    /// The record at `descriptor`, if this buffer holds it.
    fn record(&self, descriptor: &Descriptor, segment_bytes: usize) -> Option<&[u8]> {
        let segment = (descriptor.offset_bytes / segment_bytes as u64) as u32;
        let end = self.offset_bytes + self.data.len() as u64;
        if segment != self.segment || descriptor.offset_bytes < self.offset_bytes || descriptor.offset_bytes >= end {
            return None;
        }
        let start = (descriptor.offset_bytes - self.offset_bytes) as usize;
        self.data.get(start..start + descriptor.record_bytes as usize)
    }
}

struct Writer {
    states: Vec<SegmentState>,
    /// Bytes of records appended per segment (where its next record goes, and where its walk ends).
    used_bytes: Vec<usize>,
    current: Option<u32>,
    free: Vec<u32>,
    /// Sealed segments, oldest first.
    sealed: VecDeque<u32>,
    active: Option<WriteBuffer>,
    /// Full buffers waiting for the writer thread, oldest first; readable meanwhile.
    queued: VecDeque<Arc<WriteBuffer>>,
    spare: Vec<Vec<u8>>,
    shutdown: bool,
}

/// A read for an I/O thread: which record, for which key, and whom to wake afterwards.
pub(crate) struct ReadRequest {
    pub(crate) key: [u8; crate::KEY_BYTES_MAX],
    pub(crate) key_bytes: u8,
    pub(crate) hash: u64,
    pub(crate) descriptor: Descriptor,
    pub(crate) waker: Waker,
}

impl ReadRequest {
    pub(crate) fn key(&self) -> &[u8] {
        &self.key[..self.key_bytes as usize]
    }
}

struct ReadQueue {
    requests: VecDeque<ReadRequest>,
    shutdown: bool,
}

/// The tier's counters for `stats`.
#[derive(Default)]
pub(crate) struct LogCounters {
    pub(crate) records_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) reads_from_buffer: AtomicU64,
    pub(crate) crc_failures: AtomicU64,
    pub(crate) io_errors: AtomicU64,
    pub(crate) segments_dropped: AtomicU64,
    pub(crate) segments_compacted: AtomicU64,
    pub(crate) records_compacted: AtomicU64,
    pub(crate) write_stalls: AtomicU64,
    pub(crate) read_queue_full: AtomicU64,
}

pub(crate) struct Log {
    file: File,
    path: PathBuf,
    size_bytes: u64,
    segment_bytes: usize,
    buffer_bytes: usize,
    /// Per segment: generation << 32 | live bytes.
    segments: Box<[AtomicU64]>,
    writer: Mutex<Writer>,
    /// Wakes the writer thread: a buffer was queued, or shutdown.
    writer_work: Condvar,
    /// Wakes appenders waiting for a free buffer.
    buffer_freed: Condvar,
    reads: Mutex<ReadQueue>,
    read_work: Condvar,
    pub(crate) counters: LogCounters,
    /// Set once by `Log::shut_down`.
    stopping: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("a thread panicked while holding an SSD log lock")
}

/// What a log read came to.
pub(crate) enum ReadResult {
    Ok,
    /// The record's segment was dropped or compacted meanwhile: the descriptor is stale.
    Stale,
    Io(io::Error),
}

impl Log {
    /// The log segment and buffer sizes for a log of `size_bytes` holding items up to
    /// `max_item_bytes`; `Err` when it is too small.
    pub(crate) fn geometry(size_bytes: u64, max_item_bytes: usize) -> Result<(usize, usize), String> {
        let page_bytes = crate::arena::page_bytes();
        // The largest record: the item limit covers header (32 bytes) + key + value, so a record
        // (16-byte header, key, value, padding) always fits in max_item_bytes + 8.
        let buffer_bytes = (max_item_bytes + 64).next_multiple_of(page_bytes).max(1 << 20);
        let segment_bytes = ((size_bytes / 16) as usize / buffer_bytes * buffer_bytes)
            .clamp(4 * buffer_bytes, LOG_SEGMENT_BYTES_MAX.max(4 * buffer_bytes));
        let segment_count = (size_bytes / segment_bytes as u64) as usize;
        if segment_count < LOG_SEGMENTS_MIN {
            return Err(format!(
                "ssd size {size_bytes} bytes holds fewer than {LOG_SEGMENTS_MIN} log segments of {segment_bytes} bytes \
                 (at least {} bytes are needed with an item size limit of {max_item_bytes})",
                LOG_SEGMENTS_MIN * segment_bytes
            ));
        }
        Ok((segment_bytes, buffer_bytes))
    }

    /// Creates (or empties) the log file in `dir`, reserves its space, and locks it against a
    /// second server.
    pub(crate) fn create(dir: &Path, size_bytes: u64, max_item_bytes: usize) -> io::Result<Log> {
        let (segment_bytes, buffer_bytes) =
            Log::geometry(size_bytes, max_item_bytes).map_err(|reason| io::Error::new(io::ErrorKind::InvalidInput, reason))?;
        let segment_count = (size_bytes / segment_bytes as u64) as usize;
        assert!(segment_count <= u32::MAX as usize);
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE_NAME);
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        // SAFETY: a valid descriptor; flock has no memory effects.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = io::Error::last_os_error();
            return Err(io::Error::new(error.kind(), format!("{} is in use by another server: {error}", path.display())));
        }
        // Nothing survives a restart: start from an empty file, then reserve the space, so that a
        // full disk shows now rather than as write errors later.
        file.set_len(0)?;
        let used_size_bytes = segment_count as u64 * segment_bytes as u64;
        // SAFETY: a valid descriptor.
        let status = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, used_size_bytes as libc::off_t) };
        if status != 0 {
            let error = io::Error::from_raw_os_error(status);
            return Err(io::Error::new(error.kind(), format!("cannot reserve {used_size_bytes} bytes for {}: {error}", path.display())));
        }
        let writer = Writer {
            states: vec![SegmentState::Free; segment_count],
            used_bytes: vec![0; segment_count],
            current: None,
            // Popped from the back: segment 0 first.
            free: (0..segment_count as u32).rev().collect(),
            sealed: VecDeque::with_capacity(segment_count),
            active: None,
            queued: VecDeque::with_capacity(WRITE_BUFFERS),
            spare: (0..WRITE_BUFFERS).map(|_| Vec::with_capacity(buffer_bytes)).collect(),
            shutdown: false,
        };
        Ok(Log {
            file,
            path,
            size_bytes: used_size_bytes,
            segment_bytes,
            buffer_bytes,
            segments: (0..segment_count).map(|_| AtomicU64::new(1 << 32)).collect(),
            writer: Mutex::new(writer),
            writer_work: Condvar::new(),
            buffer_freed: Condvar::new(),
            reads: Mutex::new(ReadQueue { requests: VecDeque::with_capacity(256), shutdown: false }),
            read_work: Condvar::new(),
            counters: LogCounters::default(),
            stopping: AtomicBool::new(false),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub(crate) fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    pub(crate) fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Room for any record; also the size of each I/O thread's read buffer.
    pub(crate) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// Memory the tier holds besides the arena: write buffers (the read and compaction buffers
    /// belong to the I/O threads, see `tier`).
    pub(crate) fn buffers_bytes(&self) -> usize {
        WRITE_BUFFERS * self.buffer_bytes
    }

    fn segment_of(&self, descriptor: &Descriptor) -> usize {
        (descriptor.offset_bytes / self.segment_bytes as u64) as usize
    }

    /// Whether the descriptor's record is still in the log.
    #[inline]
    pub(crate) fn is_valid(&self, descriptor: &Descriptor) -> bool {
        let segment = self.segment_of(descriptor);
        segment < self.segments.len() && (self.segments[segment].load(Relaxed) >> 32) as u32 == descriptor.generation
    }

    /// An item no longer refers to this record.
    pub(crate) fn release(&self, descriptor: &Descriptor) {
        let word = &self.segments[self.segment_of(descriptor)];
        let _ = word.fetch_update(Relaxed, Relaxed, |state| {
            if (state >> 32) as u32 != descriptor.generation {
                return None;
            }
            let live = state & 0xffff_ffff;
            assert!(live >= descriptor.record_bytes as u64, "log live bytes underflow");
            Some(state - descriptor.record_bytes as u64)
        });
    }

    pub(crate) fn live_bytes_total(&self) -> u64 {
        self.segments.iter().map(|word| word.load(Relaxed) & 0xffff_ffff).sum()
    }

    #[cfg(test)]
    pub(crate) fn live_bytes(&self, segment: usize) -> u64 {
        self.segments[segment].load(Relaxed) & 0xffff_ffff
    }

    /// The next generation: every descriptor into the segment is stale, its live bytes zero.
    fn invalidate(&self, segment: u32) {
        let word = &self.segments[segment as usize];
        let state = word.load(Relaxed);
        let generation = ((state >> 32) as u32).wrapping_add(1).max(1);
        word.store((generation as u64) << 32, Relaxed);
    }

    /// Appends a record of `key` and `value` (the value as the concatenation of its parts, or
    /// copied raw from another record when `raw` is given); returns its descriptor, the record
    /// counted live. `None`: no buffer is free right now (the caller evicts instead).
    pub(crate) fn append(&self, key: &[u8], value: &[u8]) -> Option<Descriptor> {
        let bytes = record_bytes(key.len(), value.len());
        self.append_with(bytes, |out| encode_record(out, key, value))
    }

    /// Appends a record as it is (compaction).
    pub(crate) fn append_raw(&self, record: &[u8]) -> Option<Descriptor> {
        self.append_with(record.len(), |out| out.copy_from_slice(record))
    }

    fn append_with(&self, bytes: usize, fill: impl FnOnce(&mut [u8])) -> Option<Descriptor> {
        assert!(bytes <= self.buffer_bytes && bytes.is_multiple_of(8));
        let mut writer = lock(&self.writer);
        let mut waited = false;
        let (segment, offset_bytes) = loop {
            let segment = match writer.current {
                Some(segment) if writer.used_bytes[segment as usize] + bytes <= self.segment_bytes => segment,
                _ => self.next_segment(&mut writer)?,
            };
            let offset_bytes = segment as u64 * self.segment_bytes as u64 + writer.used_bytes[segment as usize] as u64;
            let fits_active = writer.active.as_ref().is_some_and(|buffer| {
                buffer.segment == segment
                    && buffer.offset_bytes + buffer.data.len() as u64 == offset_bytes
                    && buffer.data.len() + bytes <= self.buffer_bytes
            });
            if fits_active {
                break (segment, offset_bytes);
            }
            self.seal_active(&mut writer);
            if let Some(data) = writer.spare.pop() {
                writer.active = Some(WriteBuffer { data, offset_bytes, segment });
                break (segment, offset_bytes);
            }
            if waited || writer.shutdown {
                self.counters.write_stalls.fetch_add(1, Relaxed);
                return None;
            }
            // The writer is behind: wait a little for it, then look again (anything may have
            // changed meanwhile).
            writer = self.buffer_freed.wait_timeout(writer, BUFFER_WAIT).expect("writer lock poisoned").0;
            waited = true;
        };
        let writer = &mut *writer;
        let buffer = writer.active.as_mut().expect("installed above");
        let start = buffer.data.len();
        buffer.data.resize(start + bytes, 0);
        fill(&mut buffer.data[start..]);
        writer.used_bytes[segment as usize] += bytes;
        let word = &self.segments[segment as usize];
        let state = word.fetch_add(bytes as u64, Relaxed);
        assert!((state & 0xffff_ffff) + bytes as u64 <= self.segment_bytes as u64);
        self.counters.records_written.fetch_add(1, Relaxed);
        self.counters.bytes_written.fetch_add(bytes as u64, Relaxed);
        Some(Descriptor { offset_bytes, record_bytes: bytes as u32, generation: (state >> 32) as u32 })
    }

    /// Queues the active buffer for the writer thread.
    fn seal_active(&self, writer: &mut Writer) {
        if let Some(buffer) = writer.active.take() {
            if buffer.data.is_empty() {
                writer.spare.push(buffer.data);
            } else {
                writer.queued.push_back(Arc::new(buffer));
                self.writer_work.notify_all();
            }
        }
    }

    /// Seals the current segment and makes another current: a free one, or else the oldest
    /// sealed one, dropped. `None` if every segment is being compacted.
    fn next_segment(&self, writer: &mut Writer) -> Option<u32> {
        if let Some(current) = writer.current.take() {
            writer.states[current as usize] = SegmentState::Sealed;
            writer.sealed.push_back(current);
        }
        self.seal_active(writer);
        let segment = match writer.free.pop() {
            Some(segment) => segment,
            None => {
                let oldest = writer.sealed.pop_front()?;
                self.invalidate(oldest);
                self.counters.segments_dropped.fetch_add(1, Relaxed);
                oldest
            }
        };
        writer.states[segment as usize] = SegmentState::Current;
        writer.used_bytes[segment as usize] = 0;
        writer.current = Some(segment);
        Some(segment)
    }

    /// Calls `visit` with the record if it is still in a write buffer (not yet on the file).
    pub(crate) fn with_buffered<R>(&self, descriptor: &Descriptor, visit: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let writer = lock(&self.writer);
        if !self.is_valid(descriptor) {
            return None;
        }
        let record = writer
            .active
            .iter()
            .chain(writer.queued.iter().map(|buffer| &**buffer))
            .find_map(|buffer| buffer.record(descriptor, self.segment_bytes))?;
        self.counters.reads_from_buffer.fetch_add(1, Relaxed);
        Some(visit(record))
    }

    /// Reads the descriptor's record into `out[..record_bytes]`: from a write buffer, or from
    /// the file (a short read is an I/O error: the file was cut).
    pub(crate) fn read(&self, descriptor: &Descriptor, out: &mut [u8]) -> ReadResult {
        let bytes = descriptor.record_bytes as usize;
        assert!(bytes <= out.len());
        if self.with_buffered(descriptor, |record| out[..bytes].copy_from_slice(record)).is_some() {
            return ReadResult::Ok;
        }
        self.counters.reads.fetch_add(1, Relaxed);
        let result = self.read_at(descriptor.offset_bytes, &mut out[..bytes]);
        // Checked after the read: a segment dropped and rewritten meanwhile reads as new bytes.
        if !self.is_valid(descriptor) {
            return ReadResult::Stale;
        }
        match result {
            Ok(()) => ReadResult::Ok,
            Err(error) => ReadResult::Io(error),
        }
    }

    fn read_at(&self, offset_bytes: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(out, offset_bytes)
    }

    /// Queues a read for the I/O threads. `false` when the queue is full (the caller misses).
    pub(crate) fn queue_read(&self, key: &[u8], hash: u64, descriptor: Descriptor, waker: &Waker) -> bool {
        let mut reads = lock(&self.reads);
        if reads.requests.len() >= READ_QUEUE_MAX || reads.shutdown {
            self.counters.read_queue_full.fetch_add(1, Relaxed);
            return false;
        }
        let mut request =
            ReadRequest { key: [0; crate::KEY_BYTES_MAX], key_bytes: key.len() as u8, hash, descriptor, waker: waker.clone() };
        request.key[..key.len()].copy_from_slice(key);
        reads.requests.push_back(request);
        drop(reads);
        self.read_work.notify_one();
        true
    }

    /// The next read for an I/O thread; `None` once the log shuts down.
    pub(crate) fn next_read(&self) -> Option<ReadRequest> {
        let mut reads = lock(&self.reads);
        loop {
            if reads.shutdown {
                return None;
            }
            if let Some(request) = reads.requests.pop_front() {
                return Some(request);
            }
            reads = self.read_work.wait(reads).expect("a thread panicked while holding the read queue");
        }
    }

    /// The writer thread's next job: `Some(Some(buffer))` write it, `Some(None)` look for
    /// compaction (also after a quiet while), `None` stop.
    pub(crate) fn next_write(&self) -> Option<Option<WriteBufferRef>> {
        let mut writer = lock(&self.writer);
        if writer.shutdown {
            return None;
        }
        if writer.queued.is_empty() {
            writer = self.writer_work.wait_timeout(writer, WRITER_IDLE_WAKE).expect("writer lock poisoned").0;
            if writer.shutdown {
                return None;
            }
        }
        Some(writer.queued.front().cloned().map(WriteBufferRef))
    }

    /// Writes the oldest queued buffer to the file, then recycles it. Called by the writer thread
    /// (and by compaction on it, when it needs a buffer), never concurrently.
    pub(crate) fn write_queued(&self, queued: WriteBufferRef) {
        let buffer = queued.0;
        if let Err(error) = self.file.write_all_at(&buffer.data, buffer.offset_bytes) {
            // The records are lost; every descriptor into the segment becomes stale (records
            // appended to it from now on are valid again).
            self.counters.io_errors.fetch_add(1, Relaxed);
            crate::warn_limited(&format!("writing {} bytes to {} failed: {error}", buffer.data.len(), self.path.display()));
            self.invalidate(buffer.segment);
        }
        let mut writer = lock(&self.writer);
        let written = writer.queued.pop_front().expect("the buffer written is the oldest queued");
        assert!(Arc::ptr_eq(&written, &buffer));
        drop(written);
        // Readers copy under the writer lock and keep no reference: this one is the last.
        let buffer = Arc::try_unwrap(buffer).unwrap_or_else(|_| panic!("a written buffer is referred to elsewhere"));
        let mut data = buffer.data;
        data.clear();
        writer.spare.push(data);
        drop(writer);
        self.buffer_freed.notify_all();
    }

    /// A sealed segment worth compacting (mostly dead records) when free segments run low:
    /// marked Compacting and returned with its generation and bytes used.
    pub(crate) fn take_compaction_candidate(&self) -> Option<(u32, u32, usize)> {
        let mut writer = lock(&self.writer);
        if writer.free.len() >= FREE_SEGMENTS_LOW {
            return None;
        }
        // Only segments wholly on the file: none of their records still in a buffer.
        let buffered = |segment: u32| {
            writer.active.iter().any(|buffer| buffer.segment == segment)
                || writer.queued.iter().any(|buffer| buffer.segment == segment)
        };
        let (position, segment) = writer
            .sealed
            .iter()
            .enumerate()
            .map(|(position, &segment)| (position, segment))
            .filter(|&(_, segment)| !buffered(segment))
            .min_by_key(|&(_, segment)| self.segments[segment as usize].load(Relaxed) & 0xffff_ffff)?;
        let live = self.segments[segment as usize].load(Relaxed);
        let used = writer.used_bytes[segment as usize];
        if (live & 0xffff_ffff) as usize > used / COMPACTION_LIVE_FRACTION_DIVISOR {
            return None;
        }
        writer.sealed.remove(position);
        writer.states[segment as usize] = SegmentState::Compacting;
        Some((segment, (live >> 32) as u32, used))
    }

    /// Ends a compaction: the segment's records are stale and it is free.
    pub(crate) fn finish_compaction(&self, segment: u32) {
        let mut writer = lock(&self.writer);
        assert_eq!(writer.states[segment as usize], SegmentState::Compacting);
        self.invalidate(segment);
        writer.states[segment as usize] = SegmentState::Free;
        writer.used_bytes[segment as usize] = 0;
        writer.free.push(segment);
        self.counters.segments_compacted.fetch_add(1, Relaxed);
    }

    /// Reads `out.len()` bytes at `offset_bytes` of the file (compaction's walk).
    pub(crate) fn read_raw(&self, offset_bytes: u64, out: &mut [u8]) -> io::Result<()> {
        self.read_at(offset_bytes, out)
    }

    /// The oldest queued buffer, for compaction to write when `append` finds none free.
    pub(crate) fn oldest_queued(&self) -> Option<WriteBufferRef> {
        lock(&self.writer).queued.front().cloned().map(WriteBufferRef)
    }

    /// Free and sealed segments, and full write buffers not yet written (stats).
    pub(crate) fn segment_counts(&self) -> (usize, usize, usize) {
        let writer = lock(&self.writer);
        (writer.free.len(), writer.sealed.len(), writer.queued.len())
    }

    /// Stops the threads: readers see no more requests (those queued are woken unanswered: their
    /// retry finds the store shutting down), the writer stops after its current job.
    pub(crate) fn shut_down(&self) {
        self.stopping.store(true, Relaxed);
        let pending: Vec<ReadRequest> = {
            let mut reads = lock(&self.reads);
            reads.shutdown = true;
            reads.requests.drain(..).collect()
        };
        for request in pending {
            request.waker.wake();
        }
        self.read_work.notify_all();
        lock(&self.writer).shutdown = true;
        self.writer_work.notify_all();
        self.buffer_freed.notify_all();
    }
}

/// A queued write buffer held by the writer thread while it writes it.
pub(crate) struct WriteBufferRef(Arc<WriteBuffer>);

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("slipstream-ssd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn records_round_trip_and_reject_any_damage() {
        let key = b"some-key";
        let value: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut record = vec![0u8; record_bytes(key.len(), value.len())];
        encode_record(&mut record, key, &value);
        assert_eq!(record.len() % 8, 0);
        assert_eq!(&record[0..4], b"SLC1");
        assert_eq!(decode_record(&record, key), Ok(&value[..]));
        assert_eq!(decode_record(&record, b"other-ke"), Err(RecordError::Corrupt), "another key");
        for position in [0, 4, 8, 12, 16, 16 + key.len(), record.len() - 9] {
            let mut damaged = record.clone();
            damaged[position] ^= 0x40;
            assert_eq!(decode_record(&damaged, key), Err(RecordError::Corrupt), "byte {position}");
        }
        assert_eq!(decode_record(&record[..record.len() - 8], key), Err(RecordError::Corrupt), "cut short");
    }

    #[test]
    fn the_documented_example_record() {
        // docs/cache-ssd-format.md, "Example".
        let mut record = vec![0u8; record_bytes(2, 5)];
        encode_record(&mut record, b"k1", b"hello");
        let documented = [
            0x53, 0x4c, 0x43, 0x31, 0x88, 0xbe, 0x57, 0x40, 0x05, 0, 0, 0, 0x02, 0, 0, 0, 0x6b, 0x31, 0x68, 0x65, 0x6c,
            0x6c, 0x6f, 0x00,
        ];
        assert_eq!(record, documented);
    }

    #[test]
    fn geometry_needs_four_segments_of_four_buffers() {
        assert!(Log::geometry(16 << 20, 1 << 20).is_err(), "buffers of 1 MiB + 64 round to 1 MiB + a page");
        let (segment_bytes, buffer_bytes) = Log::geometry(64 << 20, 1 << 20).unwrap();
        assert_eq!(buffer_bytes, (1 << 20) + 4096);
        assert_eq!(segment_bytes, 4 * buffer_bytes);
        let (segment_bytes, buffer_bytes) = Log::geometry(16 << 20, 512 << 10).unwrap();
        assert_eq!((segment_bytes, buffer_bytes), (4 << 20, 1 << 20));
        let (segment_bytes, _) = Log::geometry(4 << 30, 1 << 20).unwrap();
        assert_eq!(segment_bytes, 64 << 20, "at most 64 MiB");
    }

    #[test]
    fn appended_records_read_back_from_buffers_then_from_the_file() {
        let dir = temp_dir("append");
        let log = Log::create(&dir, 16 << 20, 512 << 10).unwrap();
        assert_eq!(std::fs::metadata(dir.join(LOG_FILE_NAME)).unwrap().len(), 16 << 20);
        let value = vec![7u8; 3000];
        let descriptor = log.append(b"k1", &value).unwrap();
        assert_eq!(descriptor.offset_bytes, 0);
        assert!(log.is_valid(&descriptor));
        assert_eq!(log.live_bytes(0), descriptor.record_bytes as u64);
        let mut out = vec![0u8; log.buffer_bytes()];
        assert!(matches!(log.read(&descriptor, &mut out), ReadResult::Ok));
        assert_eq!(decode_record(&out[..descriptor.record_bytes as usize], b"k1"), Ok(&value[..]));
        // Fill past the first buffer: it is queued; write it as the writer thread would.
        let mut last = descriptor;
        while log.oldest_queued().is_none() {
            last = log.append(b"kk", &value).unwrap();
        }
        log.write_queued(log.oldest_queued().unwrap());
        assert!(log.with_buffered(&descriptor, |_| ()).is_none(), "written: read from the file");
        out.fill(0);
        assert!(matches!(log.read(&descriptor, &mut out), ReadResult::Ok));
        assert_eq!(decode_record(&out[..descriptor.record_bytes as usize], b"k1"), Ok(&value[..]));
        assert!(log.with_buffered(&last, |_| ()).is_some(), "the newest is still in the active buffer");
        let live_before = log.live_bytes(0);
        log.release(&descriptor);
        assert_eq!(log.live_bytes(0), live_before - descriptor.record_bytes as u64);
        assert_eq!(log.live_bytes(0), log.live_bytes_total());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_log_drops_its_oldest_segment_and_stale_descriptors_say_so() {
        let dir = temp_dir("full");
        let log = Log::create(&dir, 16 << 20, 512 << 10).unwrap();
        let value = vec![1u8; 100_000];
        let first = log.append(b"first", &value).unwrap();
        let mut appended = 0;
        while log.is_valid(&first) {
            if let Some(queued) = log.oldest_queued() {
                log.write_queued(queued);
            }
            log.append(b"more", &value).expect("a buffer is free after writing the queued one");
            appended += 1;
            assert!(appended < 1000, "16 MiB hold about 160 records of 100 kB");
        }
        assert_eq!(log.counters.segments_dropped.load(Relaxed), 1);
        let mut out = vec![0u8; log.buffer_bytes()];
        assert!(matches!(log.read(&first, &mut out), ReadResult::Stale));
        log.release(&first); // Stale: nothing to release, no underflow.
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_log_in_the_same_directory_is_refused() {
        let dir = temp_dir("lock");
        let _log = Log::create(&dir, 16 << 20, 512 << 10).unwrap();
        let error = Log::create(&dir, 16 << 20, 512 << 10).err().expect("locked");
        assert!(error.to_string().contains("in use"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
