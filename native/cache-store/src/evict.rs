//! Making room: which segment a new item goes to when none is free (a free one, an untouched one
//! within the memory budget, or the oldest recycled with a second chance for items read since
//! they were written), and segments given back to the kernel to stay within the budget.

use super::*;

impl StoreCore {
    /// A segment to install: a free one, an untouched one within the budget, or a recycled one.
    /// A victim that keeps its survivors (see `evict`) frees nothing: then the next is tried, at
    /// most once per segment (survivors lose their second chance, so a second round frees).
    pub(crate) fn take_segment(&self) -> Option<u32> {
        for _ in 0..2 * self.segment_count {
            let victim = {
                let mut pool = lock(&self.pool);
                if let Some(segment) = pool.take_free(self.resident_segments_allowed()) {
                    return Some(segment);
                }
                pool.take_victim(|segment| self.live_bytes(segment), self.segment_bytes)?
            };
            if self.evict(victim) {
                lock(&self.pool).evicted(victim.segment);
                return Some(victim.segment);
            }
        }
        None
    }

    fn live_bytes(&self, segment: u32) -> usize {
        self.segment_live_bytes[segment as usize].0.load(Relaxed) as usize
    }

    /// Releases segments to the kernel until resident segments fit beside the index tables.
    pub(crate) fn release_to_budget(&self) {
        for _ in 0..2 * self.segment_count {
            let (segment, victim) = {
                let mut pool = lock(&self.pool);
                if pool.resident_count <= self.resident_segments_allowed() {
                    return;
                }
                if let Some(segment) = pool.take_free_to_retire() {
                    (segment, None)
                } else {
                    match pool.take_victim(|segment| self.live_bytes(segment), self.segment_bytes) {
                        Some(victim) => (victim.segment, Some(victim)),
                        None => return,
                    }
                }
            };
            if let Some(victim) = victim {
                if !self.evict(victim) {
                    continue;
                }
                lock(&self.pool).retire_evicted(segment);
            }
            // The segment is in state Retiring: no one else touches it until `retired`.
            self.arena.release(segment as usize * self.segment_bytes, self.segment_bytes);
            lock(&self.pool).retired(segment);
        }
    }

    /// Recycles a sealed segment: every item still linked is copied forward (if read since it
    /// was written, or if compacting) or unlinked. Survivors go to the owner's active segment;
    /// once that is full, the victim itself becomes the owner's active segment and the remaining
    /// survivors are compacted to its front. Returns whether the victim is empty (free to take).
    ///
    /// With the SSD tier, a cold item is not unlinked but goes out to the SSD (`tier::cold_fate`):
    /// only its header, key and descriptor are copied forward. Headers of items already out are
    /// copied forward too, unless the victim is nearly all such headers (memory is full of
    /// metadata): then the cold ones are evicted.
    fn evict(&self, victim: Victim) -> bool {
        let mut shard = lock(&self.shards[victim.owner_shard as usize].0);
        let shard = &mut *shard;
        let now_unix_s = self.now_unix_s();
        let segment_start_bytes = victim.segment as usize * self.segment_bytes;
        let evict_headers = self.ssd.is_some() && !victim.compact && self.victim_is_mostly_headers(shard, victim, now_unix_s);
        let mut victim_is_active = false;
        let mut offset_bytes = 0;
        while offset_bytes < victim.used_bytes as usize {
            let location = ((segment_start_bytes + offset_bytes) / item::ALIGN_BYTES) as u64;
            let item = self.item_at(location);
            let header = item.header();
            let bytes = item.total_bytes();
            offset_bytes += bytes;
            let hash = self.hash(item.key());
            assert_eq!(self.shard_of(hash), victim.owner_shard as usize);
            let Some(slot) = shard.index.find_location(index_hash(hash), location) else {
                continue; // Garbage: overwritten, deleted, or unlinked on access.
            };
            if self.death(&header, now_unix_s).is_some() {
                self.count_reclaimed(shard, &header);
                self.unlink(shard, slot, location, item);
                continue;
            }
            if header.bits & bits::VALUE_EXTERNAL != 0 && !self.record_is_valid(item) {
                shard.counters.ssd_items_lost += 1;
                self.unlink(shard, slot, location, item);
                continue;
            }
            let mut going_out = None;
            if !victim.compact && header.bits & bits::REFERENCED == 0 {
                going_out = match self.cold_fate(item, evict_headers) {
                    tier::ColdFate::Evict => {
                        if header.bits & bits::VALUE_EXTERNAL != 0 {
                            shard.counters.ssd_header_evictions += 1;
                        }
                        shard.counters.evictions += 1;
                        if header.bits & bits::FETCHED == 0 {
                            shard.counters.evicted_unfetched += 1;
                        }
                        self.unlink(shard, slot, location, item);
                        continue;
                    }
                    tier::ColdFate::Keep => None,
                    tier::ColdFate::Out { descriptor, written } => Some((descriptor, written)),
                };
            }
            let moved_bytes = match going_out {
                Some(_) => item::item_bytes_with(header.key_bytes as usize, header.value_bytes as usize, bits::LOGGED | bits::VALUE_EXTERNAL),
                None => bytes,
            };
            let target_bytes = match self.reserve_in_active(shard, moved_bytes) {
                Some(target_bytes) => target_bytes,
                None => {
                    assert!(!victim_is_active, "compacting in place always has room");
                    let replaced_active = shard.active.map(|active| (active.segment, active.used_bytes));
                    lock(&self.pool).activate_victim(victim.segment, replaced_active);
                    shard.active = Some(ActiveSegment { segment: victim.segment, used_bytes: 0 });
                    victim_is_active = true;
                    self.reserve_in_active(shard, moved_bytes).expect("an empty segment holds any item")
                }
            };
            let target = (target_bytes / item::ALIGN_BYTES) as u64;
            if let Some((descriptor, written)) = going_out {
                // The item's old record (if it had one) is stale or the same one: nothing to release.
                let mut external = header;
                external.bits = (header.bits | bits::LOGGED | bits::VALUE_EXTERNAL) & !bits::REFERENCED;
                // SAFETY: as for `copy_to` below; the header and key were read before, and the
                // writer moves the key with memmove.
                let key = item.key();
                unsafe { ItemPtr::write_with(self.arena.base().add(target_bytes), external, key, Some(descriptor), [&[], &[]]) };
                shard.index.relocate(slot, target);
                self.live_bytes_sub(location, bytes);
                self.live_bytes_add(target, moved_bytes);
                shard.counters.item_bytes = shard.counters.item_bytes - bytes as u64 + moved_bytes as u64;
                shard.counters.ssd_items += 1;
                if written {
                    shard.counters.ssd_spills += 1;
                } else {
                    shard.counters.ssd_demotions += 1;
                }
                continue;
            }
            // SAFETY: reserved room in the owner's active segment: another segment, or this one
            // at or below the item (the write cursor never passes the walk).
            let copy = unsafe { item.copy_to(self.arena.base().add(target_bytes)) };
            if !victim.compact {
                copy.update_header(|header| header.bits &= !bits::REFERENCED);
            }
            shard.index.relocate(slot, target);
            self.live_bytes_sub(location, bytes);
            self.live_bytes_add(target, bytes);
            shard.counters.items_copied_forward += 1;
        }
        assert_eq!(offset_bytes, victim.used_bytes as usize);
        if victim_is_active {
            let active = shard.active.expect("the victim");
            assert_eq!(self.live_bytes(victim.segment), active.used_bytes);
            return false;
        }
        assert_eq!(self.live_bytes(victim.segment), 0);
        true
    }
}
