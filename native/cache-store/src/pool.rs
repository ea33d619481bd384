//! The segments' bookkeeping, under one lock that is always taken last (never held while taking
//! a shard lock). A segment moves through these states:
//!
//! ```text
//! Untouched --take--> Taken --install--> Active --seal--> Sealed --take_victim--> Evicting --> Taken
//!     ^                 | (unused: give_back)              |  (flush_all)                     |
//!     |                 v                                  v                                  |
//!     +-- Retiring <-- Free <------------------------------+                                  |
//!                       ^-----------------------------------------------------------------------+
//! ```
//!
//! Untouched segments are not resident (never written, or released with MADV_DONTNEED); every
//! other state counts as resident against the memory budget.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegmentState {
    Untouched,
    /// Resident, empty, ready to take.
    Free,
    /// Handed to a thread that is about to install it as a shard's active segment.
    Taken,
    /// A shard appends to it.
    Active,
    /// Full; waits in the FIFO for eviction.
    Sealed,
    /// A thread walks its items under the owner's lock.
    Evicting,
    /// Being released to the kernel.
    Retiring,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentInfo {
    pub(crate) state: SegmentState,
    pub(crate) owner_shard: u32,
    /// Bytes of items written, valid once sealed.
    pub(crate) used_bytes: u32,
}

/// A sealed segment chosen for recycling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Victim {
    pub(crate) segment: u32,
    pub(crate) owner_shard: u32,
    pub(crate) used_bytes: u32,
    /// Chosen for being mostly garbage rather than oldest: copy every live item forward, not only
    /// those read since written.
    pub(crate) compact: bool,
}

/// How many of the oldest sealed segments are looked at for a mostly-garbage one.
pub(crate) const COMPACTION_WINDOW_SEGMENTS: usize = 8;
/// A segment whose live bytes are at most this fraction (1/n) of its size is compacted instead
/// of evicting the oldest.
pub(crate) const COMPACTION_LIVE_FRACTION_DIVISOR: usize = 4;

pub(crate) struct Pool {
    pub(crate) infos: Vec<SegmentInfo>,
    pub(crate) free: Vec<u32>,
    pub(crate) untouched: Vec<u32>,
    /// Sealed segments, oldest first.
    pub(crate) sealed: VecDeque<u32>,
    /// Segments in any state but Untouched.
    pub(crate) resident_count: usize,
    pub(crate) segments_evicted: u64,
    pub(crate) segments_compacted: u64,
    pub(crate) segments_released: u64,
}

impl Pool {
    pub(crate) fn new(segment_count: usize) -> Pool {
        assert!(segment_count > 0 && segment_count <= u32::MAX as usize);
        Pool {
            infos: vec![SegmentInfo { state: SegmentState::Untouched, owner_shard: 0, used_bytes: 0 }; segment_count],
            free: Vec::with_capacity(segment_count),
            // Popped from the back: segment 0 first, so a small store touches the arena's start.
            untouched: (0..segment_count as u32).rev().collect(),
            sealed: VecDeque::with_capacity(segment_count),
            resident_count: 0,
            segments_evicted: 0,
            segments_compacted: 0,
            segments_released: 0,
        }
    }

    /// Bytes of this bookkeeping at full size, counted against the memory limit.
    pub(crate) fn metadata_bytes(segment_count: usize) -> usize {
        segment_count * (std::mem::size_of::<SegmentInfo>() + 3 * std::mem::size_of::<u32>())
    }

    fn set_state(&mut self, segment: u32, from: &[SegmentState], to: SegmentState) {
        let info = &mut self.infos[segment as usize];
        assert!(from.contains(&info.state), "segment {segment}: {:?} -> {to:?}", info.state);
        info.state = to;
    }

    /// A resident free segment, or an untouched one if the budget allows another resident one.
    pub(crate) fn take_free(&mut self, resident_allowed: usize) -> Option<u32> {
        if let Some(segment) = self.free.pop() {
            self.set_state(segment, &[SegmentState::Free], SegmentState::Taken);
            return Some(segment);
        }
        if self.resident_count < resident_allowed {
            if let Some(segment) = self.untouched.pop() {
                self.set_state(segment, &[SegmentState::Untouched], SegmentState::Taken);
                self.resident_count += 1;
                return Some(segment);
            }
        }
        None
    }

    /// Takes a sealed segment to recycle: the oldest, unless one of the few oldest is mostly
    /// garbage (then compacting it costs little copying and loses nothing live).
    pub(crate) fn take_victim(&mut self, live_bytes: impl Fn(u32) -> usize, segment_bytes: usize) -> Option<Victim> {
        let mut position = 0;
        let mut compact = false;
        let window = self.sealed.len().min(COMPACTION_WINDOW_SEGMENTS);
        let emptiest = (0..window).min_by_key(|&candidate| live_bytes(self.sealed[candidate]));
        if let Some(emptiest) = emptiest {
            if live_bytes(self.sealed[emptiest]) * COMPACTION_LIVE_FRACTION_DIVISOR <= segment_bytes {
                position = emptiest;
                compact = true;
            }
        }
        let segment = self.sealed.remove(position)?;
        self.set_state(segment, &[SegmentState::Sealed], SegmentState::Evicting);
        if compact {
            self.segments_compacted += 1;
        } else {
            self.segments_evicted += 1;
        }
        let info = self.infos[segment as usize];
        Some(Victim { segment, owner_shard: info.owner_shard, used_bytes: info.used_bytes, compact })
    }

    /// A victim whose survivors did not fit in its owner's active segment becomes that segment,
    /// its survivors compacted to its front; the old active segment is sealed.
    pub(crate) fn activate_victim(&mut self, segment: u32, replaced_active: Option<(u32, usize)>) {
        if let Some((active, used_bytes)) = replaced_active {
            self.seal(active, used_bytes);
        }
        self.set_state(segment, &[SegmentState::Evicting], SegmentState::Active);
        self.infos[segment as usize].used_bytes = 0;
    }

    pub(crate) fn evicted(&mut self, segment: u32) {
        self.set_state(segment, &[SegmentState::Evicting], SegmentState::Taken);
    }

    /// A taken segment nobody installed.
    pub(crate) fn give_back(&mut self, segment: u32) {
        self.set_state(segment, &[SegmentState::Taken], SegmentState::Free);
        self.free.push(segment);
    }

    pub(crate) fn activate(&mut self, segment: u32, owner_shard: usize) {
        self.set_state(segment, &[SegmentState::Taken], SegmentState::Active);
        let info = &mut self.infos[segment as usize];
        info.owner_shard = owner_shard as u32;
        info.used_bytes = 0;
    }

    /// A shard's active segment is replaced: an empty one goes back to the free list.
    pub(crate) fn seal(&mut self, segment: u32, used_bytes: usize) {
        if used_bytes == 0 {
            self.set_state(segment, &[SegmentState::Active], SegmentState::Free);
            self.free.push(segment);
            return;
        }
        self.set_state(segment, &[SegmentState::Active], SegmentState::Sealed);
        self.infos[segment as usize].used_bytes = used_bytes as u32;
        self.sealed.push_back(segment);
    }

    /// flush_all: every sealed segment of a shard (whose index was just emptied) is free again.
    pub(crate) fn free_sealed_of(&mut self, owner_shard: usize) {
        let infos = &self.infos;
        let (mut freed, kept): (Vec<u32>, Vec<u32>) =
            self.sealed.iter().partition(|&&segment| infos[segment as usize].owner_shard == owner_shard as u32);
        self.sealed = kept.into();
        for &segment in &freed {
            self.set_state(segment, &[SegmentState::Sealed], SegmentState::Free);
        }
        self.free.append(&mut freed);
    }

    /// Takes a free segment to release to the kernel; `retired` puts it among the untouched.
    pub(crate) fn take_free_to_retire(&mut self) -> Option<u32> {
        let segment = self.free.pop()?;
        self.set_state(segment, &[SegmentState::Free], SegmentState::Retiring);
        self.resident_count -= 1;
        Some(segment)
    }

    /// A segment just evicted, to release to the kernel.
    pub(crate) fn retire_evicted(&mut self, segment: u32) {
        self.set_state(segment, &[SegmentState::Evicting], SegmentState::Retiring);
        self.resident_count -= 1;
    }

    pub(crate) fn retired(&mut self, segment: u32) {
        self.set_state(segment, &[SegmentState::Retiring], SegmentState::Untouched);
        self.untouched.push(segment);
        self.segments_released += 1;
    }

    #[cfg(test)]
    pub(crate) fn count_in(&self, state: SegmentState) -> usize {
        self.infos.iter().filter(|info| info.state == state).count()
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        use SegmentState::*;
        assert_eq!(self.free.len(), self.count_in(Free));
        assert_eq!(self.untouched.len(), self.count_in(Untouched));
        assert_eq!(self.sealed.len(), self.count_in(Sealed));
        assert_eq!(self.resident_count, self.infos.len() - self.count_in(Untouched) - self.count_in(Retiring));
        for &segment in &self.free {
            assert_eq!(self.infos[segment as usize].state, Free);
        }
        for &segment in &self.sealed {
            assert_eq!(self.infos[segment as usize].state, Sealed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_goes_round_the_states() {
        let mut pool = Pool::new(4);
        assert_eq!(pool.take_free(1), Some(0));
        assert_eq!(pool.take_free(1), None, "budget of one resident segment");
        pool.activate(0, 3);
        pool.seal(0, 100);
        pool.check_invariants();
        let victim = pool.take_victim(|_| 1000, 1000).unwrap();
        assert_eq!(victim, Victim { segment: 0, owner_shard: 3, used_bytes: 100, compact: false });
        pool.evicted(0);
        pool.give_back(0);
        assert_eq!(pool.take_free(1), Some(0), "free before untouched");
        pool.give_back(0);
        assert_eq!(pool.take_free_to_retire(), Some(0));
        pool.retired(0);
        pool.check_invariants();
        assert_eq!(pool.resident_count, 0);
        assert_eq!(pool.segments_released, 1);
    }

    #[test]
    fn a_mostly_garbage_segment_is_compacted_before_the_oldest_is_evicted() {
        let mut pool = Pool::new(12);
        for segment in 0..10 {
            assert_eq!(pool.take_free(12), Some(segment));
            pool.activate(segment, 0);
            pool.seal(segment, 1000);
        }
        let live = |segment: u32| if segment == 5 || segment == 9 { 200 } else { 900 };
        let victim = pool.take_victim(live, 1000).unwrap();
        assert_eq!((victim.segment, victim.compact), (5, true), "inside the window of 8");
        let victim = pool.take_victim(live, 1000).unwrap();
        assert_eq!((victim.segment, victim.compact), (0, false), "segment 9 is outside the window");
        pool.free_sealed_of(0);
        assert!(pool.sealed.is_empty());
        pool.check_invariants();
    }
}
