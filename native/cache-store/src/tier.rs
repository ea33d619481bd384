//! The hybrid mode: what the store does with its SSD log (`ssd`). Items keep their header and key
//! in memory; a cold item's value moves to the log instead of being evicted, and reading it back
//! happens on an I/O thread, never on the caller's.
//!
//! - Going out (`cold_fate`, from eviction): a cold item whose record is still valid leaves memory
//!   without a write (demotion); one with a value of at least `SPILL_VALUE_BYTES_MIN` is appended
//!   to the log (spill); smaller values are evicted as without the tier.
//! - Coming back (`get_external`, `read_back`): a read of a value that is out queues the record's
//!   read and answers `Pending`; the I/O thread checks it (checksum, key, generation) and writes
//!   the item back into memory, keeping its descriptor (promotion), then wakes the caller, whose
//!   retry finds the value in memory. A record still in a write buffer is served at once.
//! - Failures: a checksum mismatch or an I/O error unlinks the item (a miss) and is counted; a
//!   record whose log segment was dropped makes its item a miss when next touched.
//! - Compaction (writer thread): a sealed log segment with mostly dead records has its live ones
//!   appended again and their items' descriptors updated, then it is free.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Waker;

use cache_proto::storage::{GetOptions, GetOutcome, ItemView};

use crate::index::index_hash;
use crate::item::{bits, item_bytes_with, Descriptor, ItemPtr};
use crate::ssd::{self, Log, ReadRequest, ReadResult, RecordError};
use crate::{lock, Attempt, Found, Placement, Shard, StoreCore};

/// Values shorter than this are evicted rather than spilled: the record and the descriptor kept
/// in memory (16 bytes) would save little.
pub(crate) const SPILL_VALUE_BYTES_MIN: usize = 128;
pub(crate) const IO_THREADS_MAX: usize = 64;
/// A victim whose cold items' headers would fill more than this fraction (n/8) of a segment is
/// "mostly metadata": those headers are evicted so that eviction frees memory.
const HEADER_EIGHTHS_MAX: usize = 6;

/// Memory the tier takes from the store's limit: write buffers, a read buffer per I/O thread,
/// the writer's compaction buffer, and the read queue at its bound.
pub(crate) fn memory_bytes(log: &Log, io_threads: usize) -> usize {
    log.buffers_bytes()
        + (io_threads + 1) * log.buffer_bytes()
        + ssd::READ_QUEUE_MAX * std::mem::size_of::<ReadRequest>()
}

/// Starts the I/O threads (readers and the writer) of a store with an SSD tier. If one cannot be
/// started, those started are stopped.
pub(crate) fn start_threads(core: &Arc<StoreCore>) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let Some(log) = &core.ssd else { return Ok(Vec::new()) };
    let mut bodies: Vec<(String, Box<dyn FnOnce() + Send>)> = Vec::with_capacity(core.io_threads + 1);
    for index in 0..core.io_threads {
        let core = core.clone();
        bodies.push((format!("ssd-read-{index}"), Box::new(move || read_loop(&core))));
    }
    let writer_core = core.clone();
    bodies.push(("ssd-write".to_string(), Box::new(move || write_loop(&writer_core))));
    let mut threads = Vec::with_capacity(bodies.len());
    for (name, body) in bodies {
        match std::thread::Builder::new().name(name).spawn(body) {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                log.shut_down();
                for thread in threads {
                    let _ = thread.join();
                }
                return Err(error);
            }
        }
    }
    Ok(threads)
}

/// An I/O thread: reads records, brings their items back, wakes who asked.
fn read_loop(core: &StoreCore) {
    let log = core.ssd.as_ref().expect("started with a log");
    let mut buffer = vec![0u8; log.buffer_bytes()];
    while let Some(request) = log.next_read() {
        core.complete_read(&request, &mut buffer);
        request.waker.wake();
    }
}

/// The writer thread: writes full buffers in order, and compacts the log.
fn write_loop(core: &StoreCore) {
    let log = core.ssd.as_ref().expect("started with a log");
    let mut buffer = vec![0u8; log.buffer_bytes()];
    while let Some(job) = log.next_write() {
        if let Some(queued) = job {
            log.write_queued(queued);
        }
        // Also under a steady stream of writes: compaction must come before the log is full
        // (then its oldest segment would be dropped, live records and all).
        if let Some((segment, generation, used_bytes)) = log.take_compaction_candidate() {
            core.compact_log_segment(segment, generation, used_bytes, &mut buffer);
            log.finish_compaction(segment);
        }
    }
}

/// What eviction does with a cold item when the store has an SSD tier.
pub(crate) enum ColdFate {
    /// Unlink it (counted as an eviction).
    Evict,
    /// Copy it forward as it is (a header whose value is already out).
    Keep,
    /// Rewrite it as header, key and this descriptor; `written`: the record was just appended.
    Out { descriptor: Descriptor, written: bool },
}

impl StoreCore {
    /// Whether an item's record (which it must have) is still in the log.
    pub(crate) fn record_is_valid(&self, item: ItemPtr) -> bool {
        let descriptor = item.descriptor().expect("an item with a record");
        self.ssd.as_ref().is_some_and(|log| log.is_valid(&descriptor))
    }

    /// The item no longer holds its record (unlinked or replaced by another version).
    pub(crate) fn release_record(&self, shard: &mut Shard, item: ItemPtr) {
        if let Some(descriptor) = item.descriptor() {
            self.ssd.as_ref().expect("records only with a log").release(&descriptor);
        }
        if item.is_external() {
            shard.counters.ssd_items -= 1;
        }
    }

    /// flush_all: every linked item of the shard lets go of its record.
    pub(crate) fn release_all_records(&self, shard: &mut Shard) {
        if self.ssd.is_none() {
            return;
        }
        for slot in 0..shard.index.slot_count() {
            if let Some(location) = shard.index.location_if_occupied(slot) {
                let item = self.item_at(location);
                self.release_record(shard, item);
            }
        }
        assert_eq!(shard.counters.ssd_items, 0);
    }

    /// The fate of a cold item met by eviction (see the module doc). Without a tier: evict.
    pub(crate) fn cold_fate(&self, item: ItemPtr, evict_headers: bool) -> ColdFate {
        let Some(log) = &self.ssd else { return ColdFate::Evict };
        if item.is_external() {
            return if evict_headers { ColdFate::Evict } else { ColdFate::Keep };
        }
        if let Some(descriptor) = item.descriptor().filter(|descriptor| log.is_valid(descriptor)) {
            return ColdFate::Out { descriptor, written: false };
        }
        let value = item.value();
        if value.len() < SPILL_VALUE_BYTES_MIN {
            return ColdFate::Evict;
        }
        match log.append(item.key(), value) {
            Some(descriptor) => ColdFate::Out { descriptor, written: true },
            // No write buffer free: the writer is behind; evicting keeps the store moving.
            None => ColdFate::Evict,
        }
    }

    /// Whether a victim is mostly headers of items whose values are out (or about to go out):
    /// then copying them forward would free little, and memory is full of metadata, so the cold
    /// ones are evicted. Items kept for their second chance do not count: they lose it on this
    /// pass and go out on the next.
    pub(crate) fn victim_is_mostly_headers(&self, shard: &mut Shard, victim: crate::pool::Victim, now_unix_s: u64) -> bool {
        let segment_start_bytes = victim.segment as usize * self.segment_bytes;
        let mut header_bytes = 0;
        let mut offset_bytes = 0;
        while offset_bytes < victim.used_bytes as usize {
            let location = ((segment_start_bytes + offset_bytes) / crate::item::ALIGN_BYTES) as u64;
            let item = self.item_at(location);
            let header = item.header();
            let bytes = item.total_bytes();
            offset_bytes += bytes;
            if header.bits & bits::REFERENCED != 0 {
                continue;
            }
            let hash = self.hash(item.key());
            if shard.index.find_location(index_hash(hash), location).is_none() || self.death(&header, now_unix_s).is_some() {
                continue;
            }
            let goes_out = header.bits & bits::LOGGED != 0 || header.value_bytes as usize >= SPILL_VALUE_BYTES_MIN;
            if goes_out {
                header_bytes +=
                    item_bytes_with(header.key_bytes as usize, header.value_bytes as usize, bits::LOGGED | bits::VALUE_EXTERNAL);
            }
        }
        header_bytes * 8 > self.segment_bytes * HEADER_EIGHTHS_MAX
    }

    /// A read of an item whose value is out: served from a write buffer if the record is still
    /// there, else queued for an I/O thread (`Pending`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_external(
        &self,
        found: Found,
        key: &[u8],
        hash: u64,
        options: &GetOptions,
        now_unix_s: u64,
        waker: &Waker,
        visit: &mut dyn FnMut(&ItemView<'_>),
    ) -> GetOutcome {
        let log = self.ssd.as_ref().expect("external items only with a log");
        let descriptor = found.item.descriptor().expect("external items have a record");
        let buffered = log.with_buffered(&descriptor, |record| match ssd::decode_record(record, key) {
            Ok(value) => {
                self.visit_hit(found, value, options, now_unix_s, visit);
                true
            }
            Err(RecordError::Corrupt) => false,
        });
        match buffered {
            Some(true) => GetOutcome::Hit,
            Some(false) => panic!("a record in a write buffer does not match its item"),
            None => self.read_back(found, key, hash, waker, GetOutcome::Pending, GetOutcome::Miss),
        }
    }

    /// Queues the read of an external item's record: `pending` if queued, `refused` if the queue
    /// is full.
    pub(crate) fn read_back<R>(&self, found: Found, key: &[u8], hash: u64, waker: &Waker, pending: R, refused: R) -> R {
        let log = self.ssd.as_ref().expect("external items only with a log");
        let descriptor = found.item.descriptor().expect("external items have a record");
        if log.queue_read(key, hash, descriptor, waker) {
            pending
        } else {
            refused
        }
    }

    /// An I/O thread's work on one read: read and check the record, then bring the item back
    /// into memory, or unlink it if the record is damaged or unreadable. The caller wakes the
    /// requester afterwards (no lock is held then).
    pub(crate) fn complete_read(&self, request: &ReadRequest, buffer: &mut [u8]) {
        let log = self.ssd.as_ref().expect("reads only with a log");
        let descriptor = request.descriptor;
        // `None`: the record is unreadable or damaged (counted), and its item goes.
        let value = match log.read(&descriptor, buffer) {
            ReadResult::Stale => return,
            ReadResult::Io(error) => {
                log.counters.io_errors.fetch_add(1, Relaxed);
                crate::warn_limited(&format!("reading {} bytes from {} failed: {error}", descriptor.record_bytes, log.path().display()));
                None
            }
            ReadResult::Ok => match ssd::decode_record(&buffer[..descriptor.record_bytes as usize], request.key()) {
                Ok(value) => Some(value),
                Err(RecordError::Corrupt) => {
                    log.counters.crc_failures.fetch_add(1, Relaxed);
                    None
                }
            },
        };
        let key = request.key();
        let shard_index = self.shard_of(request.hash);
        self.with_room(shard_index, (), |shard, spare, _index_grew| {
            let now_unix_s = self.now_unix_s();
            let Some(found) = self.find_live(shard, request.hash, key, now_unix_s, false) else {
                return Attempt::Done(());
            };
            if !found.item.is_external() || found.item.descriptor() != Some(descriptor) {
                return Attempt::Done(()); // Rewritten or read back meanwhile.
            }
            let Some(value) = value else {
                shard.counters.ssd_items_lost += 1;
                self.unlink(shard, found.slot, found.location, found.item);
                return Attempt::Done(());
            };
            let mut header = found.item.header();
            header.bits &= !bits::VALUE_EXTERNAL;
            let bytes = item_bytes_with(key.len(), value.len(), header.bits);
            let Some(offset_bytes) = self.reserve(shard, shard_index, spare, bytes) else {
                return Attempt::NeedRoom;
            };
            let placement = Placement { hash: request.hash, replaced: Some(found), offset_bytes };
            self.write_and_link_with(shard, placement, header, key, Some(descriptor), value);
            shard.counters.ssd_promotions += 1;
            Attempt::Done(())
        });
    }

    /// Moves the live records of a log segment (being compacted) to the log's end and points
    /// their items at the new places. Runs on the writer thread, which also writes the buffers
    /// this fills.
    pub(crate) fn compact_log_segment(&self, segment: u32, generation: u32, used_bytes: usize, buffer: &mut [u8]) {
        let log = self.ssd.as_ref().expect("compaction only with a log");
        let segment_start = segment as u64 * log.segment_bytes() as u64;
        let mut offset_bytes = 0usize;
        while offset_bytes < used_bytes {
            let chunk_bytes = buffer.len().min(used_bytes - offset_bytes);
            if let Err(error) = log.read_raw(segment_start + offset_bytes as u64, &mut buffer[..chunk_bytes]) {
                log.counters.io_errors.fetch_add(1, Relaxed);
                crate::warn_limited(&format!("compaction could not read {}: {error}", log.path().display()));
                return; // Its records are lost with the segment.
            }
            let mut walked = 0;
            while walked < chunk_bytes {
                let Some((key_bytes, _, record_bytes)) = ssd::record_lengths(&buffer[walked..chunk_bytes]) else {
                    if walked + ssd::RECORD_HEADER_BYTES <= chunk_bytes {
                        // Not a record: damaged. The rest of the segment is lost with it.
                        log.counters.crc_failures.fetch_add(1, Relaxed);
                        return;
                    }
                    break; // A header cut by the chunk's end: read on from it.
                };
                if walked + record_bytes > chunk_bytes {
                    if walked == 0 {
                        log.counters.crc_failures.fetch_add(1, Relaxed);
                        return; // Longer than any record can be: damaged.
                    }
                    break;
                }
                let record = &buffer[walked..walked + record_bytes];
                let descriptor = Descriptor {
                    offset_bytes: segment_start + (offset_bytes + walked) as u64,
                    record_bytes: record_bytes as u32,
                    generation,
                };
                let key = &record[ssd::RECORD_HEADER_BYTES..ssd::RECORD_HEADER_BYTES + key_bytes];
                self.move_record(log, key, descriptor, record);
                walked += record_bytes;
            }
            offset_bytes += walked;
        }
    }

    /// Appends a record again if its item still refers to it, and repoints the item.
    fn move_record(&self, log: &Log, key: &[u8], descriptor: Descriptor, record: &[u8]) {
        let hash = self.hash(key);
        let shard = lock(&self.shards[self.shard_of(hash)].0);
        let Some(slot) = shard.index.find(index_hash(hash), |location| self.item_at(location).key() == key) else {
            return;
        };
        let item = self.item_at(shard.index.location(slot));
        if item.descriptor() != Some(descriptor) {
            return;
        }
        let moved = loop {
            if let Some(moved) = log.append_raw(record) {
                break moved;
            }
            // Both buffers are full: write the oldest here (this is the writer thread).
            match log.oldest_queued() {
                Some(queued) => log.write_queued(queued),
                None => return,
            }
        };
        item.set_descriptor(moved);
        log.release(&descriptor);
        log.counters.records_compacted.fetch_add(1, Relaxed);
    }

    /// The tier's `stats`.
    pub(crate) fn ssd_stats(&self, counters: &crate::ShardCounters, stats: &mut Vec<(String, String)>) {
        let Some(log) = &self.ssd else { return };
        let (free_segments, sealed_segments, buffers_queued) = log.segment_counts();
        let c = &log.counters;
        let entries: [(&str, u64); 25] = [
            ("ssd_size_bytes", log.size_bytes()),
            ("ssd_segment_bytes", log.segment_bytes() as u64),
            ("ssd_segments", log.segment_count() as u64),
            ("ssd_segments_free", free_segments as u64),
            ("ssd_segments_sealed", sealed_segments as u64),
            ("ssd_buffers_queued", buffers_queued as u64),
            ("ssd_items", counters.ssd_items),
            ("ssd_bytes", log.live_bytes_total()),
            ("ssd_reads", c.reads.load(Relaxed)),
            ("ssd_reads_from_buffer", c.reads_from_buffer.load(Relaxed)),
            ("ssd_writes", c.records_written.load(Relaxed)),
            ("ssd_bytes_written", c.bytes_written.load(Relaxed)),
            ("ssd_spills", counters.ssd_spills),
            ("ssd_demotions", counters.ssd_demotions),
            ("ssd_promotions", counters.ssd_promotions),
            ("ssd_compactions", c.segments_compacted.load(Relaxed)),
            ("ssd_records_compacted", c.records_compacted.load(Relaxed)),
            ("ssd_segments_dropped", c.segments_dropped.load(Relaxed)),
            ("ssd_items_lost", counters.ssd_items_lost),
            ("ssd_header_evictions", counters.ssd_header_evictions),
            ("ssd_crc_failures", c.crc_failures.load(Relaxed)),
            ("ssd_io_errors", c.io_errors.load(Relaxed)),
            ("ssd_write_stalls", c.write_stalls.load(Relaxed)),
            ("ssd_read_queue_full", c.read_queue_full.load(Relaxed)),
            ("ssd_io_threads", self.io_threads as u64),
        ];
        stats.extend(entries.iter().map(|(name, value)| (name.to_string(), value.to_string())));
    }

    /// Tests: every valid record is referred to by exactly the live bytes its segment counts.
    #[cfg(test)]
    pub(crate) fn check_log_invariants(&self) {
        let Some(log) = &self.ssd else { return };
        let mut live = vec![0u64; log.segment_count()];
        for shard in self.shards.iter() {
            let shard = lock(&shard.0);
            let mut external_items = 0;
            for slot in 0..shard.index.slot_count() {
                if let Some(location) = shard.index.location_if_occupied(slot) {
                    let item = self.item_at(location);
                    if let Some(descriptor) = item.descriptor().filter(|descriptor| log.is_valid(descriptor)) {
                        live[(descriptor.offset_bytes / log.segment_bytes() as u64) as usize] += descriptor.record_bytes as u64;
                    }
                    external_items += item.is_external() as u64;
                }
            }
            assert_eq!(shard.counters.ssd_items, external_items);
        }
        for (segment, &bytes) in live.iter().enumerate() {
            assert_eq!(log.live_bytes(segment), bytes, "log segment {segment}");
        }
    }
}
