//! memcached's commands over the store (`cache_proto::storage::Storage`): each one's plan,
//! decided from the present item before anything is written (`plan_*`), then carried out under
//! its shard's lock.

use super::*;

/// A header for a new item (cas and value length are filled in once room is reserved).
fn new_header(key: &[u8], client_flags: u32, exptime_unix_s: u64, now_unix_s: u64) -> ItemHeader {
    assert!(key.len() <= KEY_BYTES_MAX);
    ItemHeader {
        cas: 0,
        value_bytes: 0,
        client_flags,
        exptime_s: time_s32(exptime_unix_s),
        last_access_s: time_s32(now_unix_s),
        stored_s: time_s32(now_unix_s),
        key_bytes: key.len() as u8,
        bits: 0,
        reserved: 0,
    }
}

/// What a store request writes given the present item: the new header and the value's parts
/// (the request's value, or it and the present value for append/prepend), or the outcome that
/// writes nothing.
fn plan_store<'a>(
    request: &StoreRequest<'a>,
    existing: Option<Found>,
    now_unix_s: u64,
) -> Result<(ItemHeader, [&'a [u8]; 2]), StoreOutcome> {
    let appending = matches!(request.mode, StoreMode::Append | StoreMode::Prepend);
    // memcached's add ignores a CAS; an append that may vivify has nothing to compare on a miss.
    let compare_cas = if request.mode == StoreMode::Add { None } else { request.compare_cas };
    let mut store_stale = false;
    if let Some(compare_cas) = compare_cas {
        let vivifies = appending && request.vivify_exptime_unix_s.is_some();
        let found = match existing {
            Some(found) => found,
            None if vivifies => return plan_vivified_append(request, now_unix_s),
            None => return Err(StoreOutcome::NotFound),
        };
        let cas = found.item.header().cas;
        if cas != compare_cas {
            // Meta I with C: a write older than the present item is kept, marked stale.
            let replaces = matches!(request.mode, StoreMode::Set | StoreMode::Replace);
            if !(request.invalidate && replaces && compare_cas < cas) {
                return Err(StoreOutcome::Exists);
            }
            store_stale = true;
        }
    }
    let mut header = new_header(request.key, request.flags, request.exptime_unix_s, now_unix_s);
    let value_parts: [&'a [u8]; 2] = match (request.mode, existing) {
        (StoreMode::Add, Some(_)) | (StoreMode::Replace, None) => return Err(StoreOutcome::NotStored),
        (StoreMode::Set | StoreMode::Add, None) | (StoreMode::Set | StoreMode::Replace, Some(_)) => {
            [request.value, &[]]
        }
        (StoreMode::Append | StoreMode::Prepend, Some(found)) => {
            let old = found.item.header();
            header.client_flags = old.client_flags;
            header.exptime_s = old.exptime_s;
            header.bits = old.bits & (bits::STALE | bits::WIN_SENT);
            let old_value: &'a [u8] = found.item.value();
            if request.mode == StoreMode::Append {
                [old_value, request.value]
            } else {
                [request.value, old_value]
            }
        }
        (StoreMode::Append | StoreMode::Prepend, None) => return plan_vivified_append(request, now_unix_s),
    };
    if store_stale {
        // memcached: the stale write keeps the present item's expiry and win token.
        let old = existing.expect("compared").item.header();
        header.exptime_s = old.exptime_s;
        header.bits = bits::STALE | (old.bits & bits::WIN_SENT);
    }
    Ok((header, value_parts))
}

/// Append/prepend with meta N on a miss: the request's value becomes the item.
fn plan_vivified_append<'a>(
    request: &StoreRequest<'a>,
    now_unix_s: u64,
) -> Result<(ItemHeader, [&'a [u8]; 2]), StoreOutcome> {
    let exptime_unix_s = request.vivify_exptime_unix_s.ok_or(StoreOutcome::NotStored)?;
    Ok((new_header(request.key, request.flags, exptime_unix_s, now_unix_s), [request.value, &[]]))
}

/// The number an arithmetic request leaves and the header of the item holding it (cas and
/// value length still to fill), or the outcome that writes nothing.
fn plan_arithmetic(
    request: &ArithmeticRequest<'_>,
    existing: Option<Found>,
    now_unix_s: u64,
) -> Result<(u64, ItemHeader), ArithmeticOutcome> {
    let Some(found) = existing else {
        // memcached creates on a miss even when a CAS was given (there is nothing to compare).
        let (initial, exptime_unix_s) = request.initial.ok_or(ArithmeticOutcome::NotFound)?;
        return Ok((initial, new_header(request.key, 0, exptime_unix_s, now_unix_s)));
    };
    let mut header = found.item.header();
    if request.compare_cas.is_some_and(|compare_cas| compare_cas != header.cas) {
        return Err(ArithmeticOutcome::Exists);
    }
    // The new value is written in memory, without a record on the SSD.
    header.bits &= !(bits::LOGGED | bits::VALUE_EXTERNAL);
    let number = item::parse_counter(found.item.value()).ok_or(ArithmeticOutcome::NonNumeric)?;
    let value =
        if request.increment { number.wrapping_add(request.delta) } else { number.saturating_sub(request.delta) };
    header.last_access_s = time_s32(now_unix_s);
    header.stored_s = time_s32(now_unix_s);
    if let Some(exptime_unix_s) = request.touch_exptime_unix_s {
        header.exptime_s = time_s32(exptime_unix_s);
    }
    Ok((value, header))
}

impl Storage for StoreCore {
    fn max_item_bytes(&self) -> usize {
        self.max_item_bytes
    }

    fn may_wait(&self) -> bool {
        self.ssd.is_some()
    }

    fn get(&self, key: &[u8], options: GetOptions, waker: &Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        if !Self::key_is_valid(key) {
            return GetOutcome::Miss;
        }
        let hash = self.hash(key);
        let shard_index = self.shard_of(hash);
        self.with_room(shard_index, GetOutcome::Miss, |shard, spare, index_grew| {
            let now_unix_s = self.now_unix_s();
            if let Some(found) = self.find_live(shard, hash, key, now_unix_s, true) {
                if found.item.is_external() {
                    return Attempt::Done(self.get_external(found, key, hash, &options, now_unix_s, waker, visit));
                }
                self.visit_hit(found, found.item.value(), &options, now_unix_s, visit);
                return Attempt::Done(GetOutcome::Hit);
            }
            let Some(vivify_exptime_unix_s) = options.vivify_exptime_unix_s else {
                return Attempt::Done(GetOutcome::Miss);
            };
            // Vivify: an empty item whose creator holds the win token.
            match self.make_index_room(shard) {
                Ok(grew) => *index_grew |= grew,
                Err(()) => return Attempt::Done(GetOutcome::Miss),
            }
            let Some(offset_bytes) = self.reserve(shard, shard_index, spare, item_bytes(key.len(), 0)) else {
                return Attempt::NeedRoom;
            };
            let exptime_unix_s = options.touch_exptime_unix_s.unwrap_or(vivify_exptime_unix_s);
            let mut header = new_header(key, 0, exptime_unix_s, now_unix_s);
            header.bits = bits::WIN_SENT;
            header.cas = self.next_cas(shard);
            let placement = Placement { hash, replaced: None, offset_bytes };
            let item = self.write_and_link(shard, placement, header, key, [&[], &[]]);
            visit(&ItemView {
                key: item.key(),
                value: item.value(),
                flags: 0,
                cas: header.cas,
                exptime_unix_s: header.exptime_s as u64,
                last_access_unix_s: now_unix_s,
                fetched_before: false,
                stale: false,
                win: true,
                win_token_sent: false,
            });
            Attempt::Done(GetOutcome::Hit)
        })
    }

    fn store(&self, request: &StoreRequest<'_>, waker: &Waker) -> StoreOutcome {
        let key = request.key;
        if key.len() > KEY_BYTES_MAX || !self.fits(key.len(), request.value.len()) {
            return StoreOutcome::TooLarge;
        }
        if key.is_empty() {
            return StoreOutcome::NotStored;
        }
        let hash = self.hash(key);
        let shard_index = self.shard_of(hash);
        self.with_room(shard_index, StoreOutcome::OutOfMemory, |shard, spare, index_grew| {
            let now_unix_s = self.now_unix_s();
            let existing = self.find_live(shard, hash, key, now_unix_s, false);
            let appending = matches!(request.mode, StoreMode::Append | StoreMode::Prepend);
            if let Some(found) = existing.filter(|found| appending && found.item.is_external()) {
                // The present value is on the SSD: read it back first.
                return Attempt::Done(self.read_back(found, key, hash, waker, StoreOutcome::Pending, StoreOutcome::OutOfMemory));
            }
            let (mut header, value_parts) = match plan_store(request, existing, now_unix_s) {
                Ok(plan) => plan,
                Err(outcome) => {
                    if let (StoreMode::Add, Some(found)) = (request.mode, existing) {
                        // memcached: a failed add counts as an access of the present item.
                        found.item.update_header(|header| header.last_access_s = time_s32(now_unix_s));
                    }
                    return Attempt::Done(outcome);
                }
            };
            let value_bytes = value_parts[0].len() + value_parts[1].len();
            if !self.fits(key.len(), value_bytes) {
                // Only append/prepend grow past the limit here; memcached answers NOT_STORED.
                return Attempt::Done(StoreOutcome::NotStored);
            }
            if existing.is_none() {
                match self.make_index_room(shard) {
                    Ok(grew) => *index_grew |= grew,
                    Err(()) => return Attempt::Done(StoreOutcome::OutOfMemory),
                }
            }
            let Some(offset_bytes) = self.reserve(shard, shard_index, spare, item_bytes(key.len(), value_bytes)) else {
                return Attempt::NeedRoom;
            };
            header.value_bytes = value_bytes as u32;
            header.cas = request.new_cas.unwrap_or_else(|| self.next_cas(shard));
            self.write_and_link(shard, Placement { hash, replaced: existing, offset_bytes }, header, key, value_parts);
            Attempt::Done(StoreOutcome::Stored { cas: header.cas })
        })
    }

    fn delete(&self, key: &[u8], options: DeleteOptions) -> DeleteOutcome {
        if !Self::key_is_valid(key) {
            return DeleteOutcome::NotFound;
        }
        let hash = self.hash(key);
        let mut shard = lock(&self.shards[self.shard_of(hash)].0);
        let shard = &mut *shard;
        let Some(found) = self.find_live(shard, hash, key, self.now_unix_s(), false) else {
            return DeleteOutcome::NotFound;
        };
        if options.compare_cas.is_some_and(|compare_cas| compare_cas != found.item.header().cas) {
            return DeleteOutcome::Exists;
        }
        match options.invalidate_exptime_unix_s {
            Some(exptime_unix_s) => {
                // memcached: a stale item keeps its value, gets a new CAS, and the next reader wins.
                let cas = options.new_cas.unwrap_or_else(|| self.next_cas(shard));
                found.item.update_header(|header| {
                    if exptime_unix_s != EXPTIME_KEEP {
                        header.exptime_s = time_s32(exptime_unix_s);
                    }
                    header.bits = (header.bits | bits::STALE) & !bits::WIN_SENT;
                    header.cas = cas;
                });
            }
            None => self.unlink(shard, found.slot, found.location, found.item),
        }
        DeleteOutcome::Deleted
    }

    fn arithmetic(&self, request: &ArithmeticRequest<'_>, waker: &Waker) -> ArithmeticOutcome {
        let key = request.key;
        if !Self::key_is_valid(key) || !self.fits(key.len(), item::DECIMAL_DIGITS_MAX) {
            return ArithmeticOutcome::NotFound;
        }
        let hash = self.hash(key);
        let shard_index = self.shard_of(hash);
        self.with_room(shard_index, ArithmeticOutcome::NotFound, |shard, spare, index_grew| {
            let now_unix_s = self.now_unix_s();
            let existing = self.find_live(shard, hash, key, now_unix_s, false);
            if let Some(found) = existing.filter(|found| found.item.is_external()) {
                return Attempt::Done(self.read_back(found, key, hash, waker, ArithmeticOutcome::Pending, ArithmeticOutcome::NotFound));
            }
            let (value, mut header) = match plan_arithmetic(request, existing, now_unix_s) {
                Ok(plan) => plan,
                Err(outcome) => return Attempt::Done(outcome),
            };
            let mut digits_buffer = [0u8; item::DECIMAL_DIGITS_MAX];
            let digits = item::format_decimal(value, &mut digits_buffer);
            let rewritable = |found: &Found| {
                found.item.header().value_bytes as usize >= digits.len() && found.item.descriptor().is_none()
            };
            if let Some(found) = existing.filter(rewritable) {
                // No longer than the present value: rewrite in place padded with spaces, as
                // memcached does ("10" decr 1 reads back "9 "). Readers hold this lock too.
                header.cas = request.new_cas.unwrap_or_else(|| self.next_cas(shard));
                let stored = found.item.value_mut();
                stored[..digits.len()].copy_from_slice(digits);
                stored[digits.len()..].fill(b' ');
                found.item.update_header(|stored| *stored = header);
                return Attempt::Done(ArithmeticOutcome::Value {
                    value,
                    cas: header.cas,
                    exptime_unix_s: header.exptime_s as u64,
                });
            }
            if existing.is_none() {
                match self.make_index_room(shard) {
                    Ok(grew) => *index_grew |= grew,
                    Err(()) => return Attempt::Done(ArithmeticOutcome::NotFound),
                }
            }
            let Some(offset_bytes) = self.reserve(shard, shard_index, spare, item_bytes(key.len(), digits.len()))
            else {
                return Attempt::NeedRoom;
            };
            header.value_bytes = digits.len() as u32;
            header.cas = request.new_cas.unwrap_or_else(|| self.next_cas(shard));
            let placement = Placement { hash, replaced: existing, offset_bytes };
            self.write_and_link(shard, placement, header, key, [digits, &[]]);
            Attempt::Done(ArithmeticOutcome::Value { value, cas: header.cas, exptime_unix_s: header.exptime_s as u64 })
        })
    }

    fn flush_all(&self, at_unix_s: u64) {
        let _serialised = lock(&self.flush_lock);
        let now_unix_s = self.now_unix_s();
        let pending_unix_s = self.flush_at_unix_s.load(Relaxed);
        if pending_unix_s != 0 && pending_unix_s <= now_unix_s {
            // The pending flush has come: it stays in effect whatever replaces it.
            self.flushed_before_unix_s.fetch_max(pending_unix_s, Relaxed);
        }
        if at_unix_s > now_unix_s {
            self.flush_at_unix_s.store(at_unix_s, Relaxed);
            return;
        }
        // Now: unlink everything, shard by shard, and free their segments at once. Items stored
        // in a shard after its turn are newer than the flush and stay. A pending flush is
        // cancelled (memcached keeps one flush time).
        self.flush_at_unix_s.store(0, Relaxed);
        for (shard_index, shard) in self.shards.iter().enumerate() {
            let mut shard = lock(&shard.0);
            self.release_all_records(&mut shard);
            shard.index.clear();
            shard.counters.curr_items = 0;
            shard.counters.item_bytes = 0;
            if let Some(active) = shard.active.as_mut() {
                active.used_bytes = 0;
            }
            let mut pool = lock(&self.pool);
            pool.free_sealed_of(shard_index);
            // Live bytes change only under the owner's lock, held here.
            for (segment, info) in pool.infos.iter().enumerate() {
                if info.owner_shard as usize == shard_index {
                    self.segment_live_bytes[segment].0.store(0, Relaxed);
                }
            }
        }
    }

    fn stats(&self) -> Vec<(String, String)> {
        let mut counters = ShardCounters::default();
        let mut hash_slots = 0;
        for shard in self.shards.iter() {
            let shard = lock(&shard.0);
            counters.add(&shard.counters);
            hash_slots += shard.index.slot_count();
        }
        let (resident_count, free, sealed, evicted, compacted, released) = {
            let pool = lock(&self.pool);
            (
                pool.resident_count,
                pool.free.len(),
                pool.sealed.len(),
                pool.segments_evicted,
                pool.segments_compacted,
                pool.segments_released,
            )
        };
        let index_bytes = self.index_bytes_total.load(Relaxed);
        let memory_used_bytes = resident_count * self.segment_bytes + index_bytes + self.metadata_bytes;
        let entries: [(&str, u64); 24] = [
            ("curr_items", counters.curr_items),
            ("total_items", counters.total_items),
            ("bytes", counters.item_bytes),
            ("limit_maxbytes", self.memory_limit_bytes as u64),
            ("item_size_max", self.max_item_bytes as u64),
            ("evictions", counters.evictions),
            ("evicted_unfetched", counters.evicted_unfetched),
            ("expired_unfetched", counters.expired_unfetched),
            ("reclaimed", counters.reclaimed),
            ("get_expired", counters.get_expired),
            ("get_flushed", counters.get_flushed),
            ("hash_power_level", hash_slots.max(1).ilog2() as u64),
            ("hash_bytes", index_bytes as u64),
            ("hash_is_expanding", 0),
            ("store_shards", self.shards.len() as u64),
            ("segment_bytes", self.segment_bytes as u64),
            ("total_segments", self.segment_count as u64),
            ("curr_segments", (resident_count - free) as u64),
            ("sealed_segments", sealed as u64),
            ("free_segments", free as u64),
            ("segments_evicted", evicted),
            ("segments_compacted", compacted),
            ("segments_released", released),
            ("items_copied_forward", counters.items_copied_forward),
        ];
        let mut stats: Vec<(String, String)> =
            entries.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        stats.push(("memory_used_bytes".to_string(), memory_used_bytes.to_string()));
        self.ssd_stats(&counters, &mut stats);
        stats
    }
}
