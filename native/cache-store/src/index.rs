//! A shard's hash index: open addressing with linear probing and backward-shift deletion (no
//! tombstones), one 8-byte entry per item, in its own mapping (see `arena`).
//!
//! An entry packs 28 bits of the key's hash with the item's location (its arena offset in 8-byte
//! units, plus one so that 0 means an empty slot). The stored hash bits do two jobs: they reject
//! most non-matching slots without touching the item, and they let the table grow (double)
//! without reading a single key back from the arena.

use crate::arena::Mapping;
use std::io;

pub(crate) const HASH_BITS: u32 = 28;
pub(crate) const LOCATION_BITS: u32 = 64 - HASH_BITS;
const HASH_MASK: u64 = (1 << HASH_BITS) - 1;
const LOCATION_MASK: u64 = (1 << LOCATION_BITS) - 1;
/// Items the arena can address: `LOCATION_BITS` bits of 8-byte units, one value kept for empty.
pub(crate) const LOCATION_MAX: u64 = LOCATION_MASK - 1;
/// Slots are chosen by the stored hash bits, so a table cannot usefully grow beyond them.
pub(crate) const SLOTS_MAX: usize = 1 << HASH_BITS;
pub(crate) const SLOTS_MIN: usize = 1024;
pub(crate) const ENTRY_BYTES: usize = 8;

/// The part of a key's hash the index keeps: the low bits (shards use the high bits).
#[inline]
pub(crate) fn index_hash(hash: u64) -> u64 {
    hash & HASH_MASK
}

pub(crate) struct Index {
    slots: Mapping,
    slot_mask: usize,
    count: usize,
}

impl Index {
    pub(crate) fn new(slot_count: usize) -> io::Result<Index> {
        assert!(slot_count.is_power_of_two());
        assert!((SLOTS_MIN..=SLOTS_MAX).contains(&slot_count));
        Ok(Index { slots: Mapping::new(slot_count * ENTRY_BYTES)?, slot_mask: slot_count - 1, count: 0 })
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slot_mask + 1
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    pub(crate) fn bytes(&self) -> usize {
        self.slots.len_bytes()
    }

    pub(crate) fn resident_bytes(&self) -> usize {
        self.slots.resident_bytes()
    }

    #[inline]
    fn entry(&self, slot: usize) -> u64 {
        debug_assert!(slot <= self.slot_mask);
        // SAFETY: slot is within the table (masked by every caller, asserted above).
        unsafe { *(self.slots.base() as *const u64).add(slot) }
    }

    #[inline]
    fn set_entry(&mut self, slot: usize, entry: u64) {
        debug_assert!(slot <= self.slot_mask);
        // SAFETY: as in `entry`; `&mut self` makes this the only accessor.
        unsafe { *(self.slots.base() as *mut u64).add(slot) = entry }
    }

    #[inline]
    fn pack(hash_bits: u64, location: u64) -> u64 {
        debug_assert!(hash_bits <= HASH_MASK);
        debug_assert!(location <= LOCATION_MAX);
        hash_bits << LOCATION_BITS | (location + 1)
    }

    #[inline]
    fn entry_hash(entry: u64) -> u64 {
        entry >> LOCATION_BITS
    }

    #[inline]
    fn entry_location(entry: u64) -> u64 {
        debug_assert_ne!(entry, 0);
        (entry & LOCATION_MASK) - 1
    }

    pub(crate) fn location(&self, slot: usize) -> u64 {
        Self::entry_location(self.entry(slot))
    }

    /// The slot of the entry with these hash bits whose item `matches` (compares the key).
    #[inline]
    pub(crate) fn find(&self, hash_bits: u64, mut matches: impl FnMut(u64) -> bool) -> Option<usize> {
        let mut slot = hash_bits as usize & self.slot_mask;
        loop {
            let entry = self.entry(slot);
            if entry == 0 {
                return None;
            }
            if Self::entry_hash(entry) == hash_bits && matches(Self::entry_location(entry)) {
                return Some(slot);
            }
            slot = (slot + 1) & self.slot_mask;
        }
    }

    /// The slot that points at exactly this location (eviction asks "is this item still linked?").
    pub(crate) fn find_location(&self, hash_bits: u64, location: u64) -> Option<usize> {
        self.find(hash_bits, |candidate| candidate == location)
    }

    /// Whether one more entry would exceed the load factor (3/4).
    pub(crate) fn is_full(&self) -> bool {
        (self.count + 1) * 4 > self.slot_count() * 3
    }

    /// Adds an entry for a key that is not in the index. The caller has grown a full table.
    pub(crate) fn insert(&mut self, hash_bits: u64, location: u64) {
        assert!(self.count < self.slot_mask, "an index table is never filled to the last slot");
        let mut slot = hash_bits as usize & self.slot_mask;
        while self.entry(slot) != 0 {
            slot = (slot + 1) & self.slot_mask;
        }
        self.set_entry(slot, Self::pack(hash_bits, location));
        self.count += 1;
    }

    /// Points a slot at a new location of the same key (overwrite, copy forward).
    pub(crate) fn relocate(&mut self, slot: usize, location: u64) {
        let entry = self.entry(slot);
        assert_ne!(entry, 0);
        self.set_entry(slot, Self::pack(Self::entry_hash(entry), location));
    }

    /// Removes a slot's entry, shifting later entries of its probe run back so that no lookup
    /// stops early at the hole.
    pub(crate) fn remove(&mut self, slot: usize) {
        assert_ne!(self.entry(slot), 0);
        let mut hole = slot;
        let mut probe = (slot + 1) & self.slot_mask;
        loop {
            let entry = self.entry(probe);
            if entry == 0 {
                break;
            }
            let home = Self::entry_hash(entry) as usize & self.slot_mask;
            // The entry may fill the hole if the hole lies on its probe path (home ..= probe).
            let entry_distance = probe.wrapping_sub(home) & self.slot_mask;
            let hole_distance = probe.wrapping_sub(hole) & self.slot_mask;
            if entry_distance >= hole_distance {
                self.set_entry(hole, entry);
                hole = probe;
            }
            probe = (probe + 1) & self.slot_mask;
        }
        self.set_entry(hole, 0);
        self.count -= 1;
    }

    /// A table of twice the slots with the same entries, or `None` at `SLOTS_MAX`.
    pub(crate) fn grown(&self) -> io::Result<Option<Index>> {
        if self.slot_count() >= SLOTS_MAX {
            return Ok(None);
        }
        let mut grown = Index::new(self.slot_count() * 2)?;
        for slot in 0..self.slot_count() {
            let entry = self.entry(slot);
            if entry != 0 {
                grown.insert(Self::entry_hash(entry), Self::entry_location(entry));
            }
        }
        assert_eq!(grown.count, self.count);
        Ok(Some(grown))
    }

    /// Empties the table and gives its pages back (flush_all).
    pub(crate) fn clear(&mut self) {
        self.slots.release(0, self.slots.len_bytes());
        self.count = 0;
    }

    pub(crate) fn location_if_occupied(&self, slot: usize) -> Option<u64> {
        let entry = self.entry(slot);
        (entry != 0).then(|| Self::entry_location(entry))
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut count = 0;
        for slot in 0..self.slot_count() {
            let entry = self.entry(slot);
            if entry == 0 {
                continue;
            }
            count += 1;
            // Every slot between the entry's home and its slot is occupied, or lookups would miss it.
            let home = Self::entry_hash(entry) as usize & self.slot_mask;
            let mut probe = home;
            while probe != slot {
                assert_ne!(self.entry(probe), 0, "hole at {probe} before entry at {slot} (home {home})");
                probe = (probe + 1) & self.slot_mask;
            }
        }
        assert_eq!(count, self.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_find_relocate_remove_against_a_model() {
        let mut index = Index::new(SLOTS_MIN).unwrap();
        let mut model: HashMap<u64, u64> = HashMap::new(); // location -> hash bits
        let mut state = 0x1234_5678_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for step in 0..200_000u64 {
            let choice = next() % 4;
            if choice < 2 && !index.is_full() {
                // Few distinct hash bits, so that probe runs are long and wrap around.
                let hash_bits = next() % 64 + (SLOTS_MIN as u64 - 32);
                let location = step;
                index.insert(hash_bits, location);
                model.insert(location, hash_bits);
            } else if let Some((&location, &hash_bits)) = model.iter().next() {
                let slot = index.find_location(hash_bits, location).expect("linked");
                if choice == 2 {
                    index.remove(slot);
                    model.remove(&location);
                } else {
                    index.relocate(slot, location + 1_000_000_000);
                    model.remove(&location);
                    model.insert(location + 1_000_000_000, hash_bits);
                }
            }
            if step % 10_000 == 0 {
                index.check_invariants();
                for (&location, &hash_bits) in &model {
                    assert!(index.find_location(hash_bits, location).is_some());
                }
            }
        }
        assert_eq!(index.count(), model.len());
    }

    #[test]
    fn growing_keeps_every_entry_and_the_load_factor_bound() {
        let mut index = Index::new(SLOTS_MIN).unwrap();
        for location in 0..10_000u64 {
            if index.is_full() {
                index = index.grown().unwrap().unwrap();
            }
            index.insert(index_hash(crate::hash::hash_key(1, &location.to_le_bytes())), location);
            assert!(index.count() * 4 <= index.slot_count() * 3);
        }
        assert_eq!(index.slot_count(), 16_384);
        index.check_invariants();
        for location in 0..10_000u64 {
            let hash_bits = index_hash(crate::hash::hash_key(1, &location.to_le_bytes()));
            assert_eq!(index.location(index.find_location(hash_bits, location).unwrap()), location);
        }
        index.clear();
        assert_eq!(index.count(), 0);
        assert_eq!(index.find(5, |_| true), None);
    }

    #[test]
    fn location_limits_round_trip() {
        let mut index = Index::new(SLOTS_MIN).unwrap();
        index.insert(HASH_MASK, LOCATION_MAX);
        index.insert(0, 0);
        assert_eq!(index.location(index.find_location(HASH_MASK, LOCATION_MAX).unwrap()), LOCATION_MAX);
        assert_eq!(index.location(index.find_location(0, 0).unwrap()), 0);
    }
}
