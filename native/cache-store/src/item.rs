//! An item's layout in a segment: a 32-byte header, the key, the value, padding to 8 bytes.
//!
//! ```text
//! 0        8            12           16         20            24        28       29    30
//! | cas u64 | value_bytes | client_flags | exptime_s | last_access_s | stored_s | key_len | bits | reserved
//! 32: key (key_len bytes), value (value_bytes bytes), zero padding to a multiple of 8
//! ```
//!
//! Times are Unix seconds in 32 bits (enough until 2106; later times are clamped to the last
//! second).
//!
//! With the SSD tier, two bits change the layout after the key:
//! - `bits::LOGGED`: a 16-byte `Descriptor` (where the value's record is in the SSD log) follows
//!   the key. An item read back from the SSD keeps it: while the record stays valid, the item
//!   goes back to the SSD without being written again.
//! - `bits::VALUE_EXTERNAL` (only with `LOGGED`): the value is not in the arena at all; the item is
//!   header, key and descriptor (the per-item metadata the hybrid mode keeps in memory).
//!
//! `value_bytes` is the value's length wherever the value is.

use std::mem::size_of;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemHeader {
    pub(crate) cas: u64,
    pub(crate) value_bytes: u32,
    pub(crate) client_flags: u32,
    /// 0 = never.
    pub(crate) exptime_s: u32,
    pub(crate) last_access_s: u32,
    /// When this version of the item was written (flush_all compares it).
    pub(crate) stored_s: u32,
    pub(crate) key_bytes: u8,
    pub(crate) bits: u8,
    pub(crate) reserved: u16,
}

pub(crate) const HEADER_BYTES: usize = 32;
const _: () = assert!(size_of::<ItemHeader>() == HEADER_BYTES);
pub(crate) const ALIGN_BYTES: usize = 8;

pub(crate) mod bits {
    /// Read at least once since written (meta `h`, `evicted_unfetched`, `expired_unfetched`).
    pub(crate) const FETCHED: u8 = 1 << 0;
    /// Read since written or last copied forward: eviction's second chance.
    pub(crate) const REFERENCED: u8 = 1 << 1;
    /// Invalidated (meta `I`): readers see `X`.
    pub(crate) const STALE: u8 = 1 << 2;
    /// The win token (meta `W`) was handed out; later readers see `Z`.
    pub(crate) const WIN_SENT: u8 = 1 << 3;
    /// The value is not in the arena, only in the SSD log (requires `LOGGED`).
    pub(crate) const VALUE_EXTERNAL: u8 = 1 << 4;
    /// A descriptor of the value's record in the SSD log follows the key.
    pub(crate) const LOGGED: u8 = 1 << 5;
}

/// Where an item's value is in the SSD log: the record's byte offset in the log file, its length,
/// and the generation of its log segment when written (a segment dropped or compacted since has
/// a newer generation, and the descriptor is then stale).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub(crate) offset_bytes: u64,
    pub(crate) record_bytes: u32,
    pub(crate) generation: u32,
}

pub(crate) const DESCRIPTOR_BYTES: usize = 16;
const _: () = assert!(size_of::<Descriptor>() == DESCRIPTOR_BYTES);

/// Bytes an item occupies in a segment (value in the arena, no descriptor).
#[inline]
pub(crate) fn item_bytes(key_bytes: usize, value_bytes: usize) -> usize {
    (HEADER_BYTES + key_bytes + value_bytes).next_multiple_of(ALIGN_BYTES)
}

/// Bytes an item with these bits occupies in a segment.
#[inline]
pub(crate) fn item_bytes_with(key_bytes: usize, value_bytes: usize, item_bits: u8) -> usize {
    let descriptor_bytes = if item_bits & bits::LOGGED != 0 { DESCRIPTOR_BYTES } else { 0 };
    let arena_value_bytes = if item_bits & bits::VALUE_EXTERNAL != 0 { 0 } else { value_bytes };
    (HEADER_BYTES + key_bytes + descriptor_bytes + arena_value_bytes).next_multiple_of(ALIGN_BYTES)
}

/// A time for the header: Unix seconds clamped to 32 bits.
#[inline]
pub(crate) fn time_s32(unix_s: u64) -> u32 {
    unix_s.min(u32::MAX as u64) as u32
}


/// An item in the arena. Valid while the caller holds the lock of the shard that owns the item's
/// segment (or owns the segment outright); the accessors rely on that.
#[derive(Clone, Copy)]
pub(crate) struct ItemPtr {
    start: *mut u8,
}

impl ItemPtr {
    /// # Safety
    /// `start` points at a written item header in the arena, 8-byte aligned, and the caller
    /// holds what protects that item for as long as it uses this value.
    #[inline]
    pub(crate) unsafe fn new(start: *mut u8) -> ItemPtr {
        debug_assert_eq!(start as usize % ALIGN_BYTES, 0);
        ItemPtr { start }
    }

    #[inline]
    pub(crate) fn header(&self) -> ItemHeader {
        // SAFETY: see `new`.
        unsafe { *(self.start as *const ItemHeader) }
    }

    #[inline]
    pub(crate) fn update_header(&self, update: impl FnOnce(&mut ItemHeader)) {
        // SAFETY: see `new`; the reference lives only for the closure and covers the header only.
        update(unsafe { &mut *(self.start as *mut ItemHeader) })
    }

    #[inline]
    pub(crate) fn total_bytes(&self) -> usize {
        let header = self.header();
        item_bytes_with(header.key_bytes as usize, header.value_bytes as usize, header.bits)
    }

    #[inline]
    pub(crate) fn is_external(&self) -> bool {
        self.header().bits & bits::VALUE_EXTERNAL != 0
    }

    /// The SSD record of the value, if the item has one (it may be stale: see `Descriptor`).
    #[inline]
    pub(crate) fn descriptor(&self) -> Option<Descriptor> {
        let header = self.header();
        if header.bits & bits::LOGGED == 0 {
            return None;
        }
        // SAFETY: see `new`; a LOGGED item has a descriptor after the key (8-byte aligned: not
        // necessarily, so read unaligned).
        Some(unsafe { std::ptr::read_unaligned(self.start.add(HEADER_BYTES + header.key_bytes as usize) as *const Descriptor) })
    }

    /// Points the item at its record's new place (SSD log compaction).
    pub(crate) fn set_descriptor(&self, descriptor: Descriptor) {
        let header = self.header();
        assert!(header.bits & bits::LOGGED != 0);
        // SAFETY: as in `descriptor`; the caller holds the shard lock (only accessor).
        unsafe {
            std::ptr::write_unaligned(self.start.add(HEADER_BYTES + header.key_bytes as usize) as *mut Descriptor, descriptor)
        }
    }

    #[inline]
    pub(crate) fn key<'a>(&self) -> &'a [u8] {
        let key_bytes = self.header().key_bytes as usize;
        // SAFETY: see `new`; the key follows the header.
        unsafe { std::slice::from_raw_parts(self.start.add(HEADER_BYTES), key_bytes) }
    }

    /// Where the value starts in the item (after the key, and the descriptor if any).
    #[inline]
    fn value_offset_bytes(header: &ItemHeader) -> usize {
        let descriptor_bytes = if header.bits & bits::LOGGED != 0 { DESCRIPTOR_BYTES } else { 0 };
        HEADER_BYTES + header.key_bytes as usize + descriptor_bytes
    }

    /// The value, which must be in the arena (not `is_external`).
    #[inline]
    pub(crate) fn value<'a>(&self) -> &'a [u8] {
        let header = self.header();
        assert_eq!(header.bits & bits::VALUE_EXTERNAL, 0, "the value is on the SSD");
        // SAFETY: see `new`; the value follows the key (and descriptor).
        unsafe { std::slice::from_raw_parts(self.start.add(Self::value_offset_bytes(&header)), header.value_bytes as usize) }
    }

    /// The value's bytes for an in-place rewrite of the same length (incr/decr).
    #[inline]
    pub(crate) fn value_mut<'a>(&self) -> &'a mut [u8] {
        let header = self.header();
        assert_eq!(header.bits & (bits::VALUE_EXTERNAL | bits::LOGGED), 0, "rewrite in place only unlogged values");
        // SAFETY: see `new`; the shard lock makes this the only access to the item.
        unsafe {
            std::slice::from_raw_parts_mut(self.start.add(Self::value_offset_bytes(&header)), header.value_bytes as usize)
        }
    }

    /// Writes a whole item: the header, the key, the value as the concatenation of `value_parts`.
    ///
    /// # Safety
    /// `start` is 8-byte aligned, owned by the caller, with `item_bytes(..)` bytes of room that
    /// do not overlap the source slices (which may lie elsewhere in the arena).
    pub(crate) unsafe fn write(start: *mut u8, header: ItemHeader, key: &[u8], value_parts: [&[u8]; 2]) -> ItemPtr {
        assert_eq!(header.bits & (bits::VALUE_EXTERNAL | bits::LOGGED), 0);
        Self::write_with(start, header, key, None, value_parts)
    }

    /// Writes a whole item with a descriptor when `header.bits` has `LOGGED`, and the value
    /// unless it has `VALUE_EXTERNAL` (then `value_parts` are empty and `value_bytes` is the
    /// value's length on the SSD).
    ///
    /// # Safety
    /// As `write`, with `item_bytes_with(..)` bytes of room.
    pub(crate) unsafe fn write_with(
        start: *mut u8,
        header: ItemHeader,
        key: &[u8],
        descriptor: Option<Descriptor>,
        value_parts: [&[u8]; 2],
    ) -> ItemPtr {
        debug_assert_eq!(start as usize % ALIGN_BYTES, 0);
        assert_eq!(header.key_bytes as usize, key.len());
        assert_eq!(header.bits & bits::LOGGED != 0, descriptor.is_some());
        let external = header.bits & bits::VALUE_EXTERNAL != 0;
        assert!(!external || descriptor.is_some());
        let parts_bytes = value_parts[0].len() + value_parts[1].len();
        assert_eq!(if external { 0 } else { header.value_bytes as usize }, parts_bytes);
        *(start as *mut ItemHeader) = header;
        let mut cursor = start.add(HEADER_BYTES);
        // memmove: moving an item out to the SSD rewrites it at or below its old place.
        std::ptr::copy(key.as_ptr(), cursor, key.len());
        cursor = cursor.add(key.len());
        if let Some(descriptor) = descriptor {
            std::ptr::write_unaligned(cursor as *mut Descriptor, descriptor);
            cursor = cursor.add(DESCRIPTOR_BYTES);
        }
        for part in value_parts {
            std::ptr::copy_nonoverlapping(part.as_ptr(), cursor, part.len());
            cursor = cursor.add(part.len());
        }
        let end = start.add(item_bytes_with(key.len(), header.value_bytes as usize, header.bits));
        while cursor < end {
            *cursor = 0;
            cursor = cursor.add(1);
        }
        ItemPtr { start }
    }

    /// Copies this item, as it is, to `target` (copy forward, compaction). The target may overlap
    /// the item when compacting a segment in place (it is then never above the item).
    ///
    /// # Safety
    /// `target` is 8-byte aligned with `total_bytes()` bytes of room owned by the caller.
    pub(crate) unsafe fn copy_to(&self, target: *mut u8) -> ItemPtr {
        debug_assert_eq!(target as usize % ALIGN_BYTES, 0);
        std::ptr::copy(self.start, target, self.total_bytes());
        ItemPtr { start: target }
    }
}

/// Digits of the longest decimal number below 2^64.
pub(crate) const DECIMAL_DIGITS_MAX: usize = 20;

/// C's `isspace` in the "C" locale.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A value as memcached's incr/decr read it: `safe_strtoull` over the value followed by its
/// "\r\n". Quirks kept because clients see them: leading whitespace and a sign are accepted, the
/// digits may be followed by whitespace and anything after it ("12 ab" is 12), a number above
/// 2^64 - 1 is not a number, and a negative one is rejected unless it wraps to a small positive
/// value, as strtoull does ("-0" is 0). An empty value is not a number.
pub(crate) fn parse_counter(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut index = value.iter().position(|&byte| !is_c_space(byte))?;
    let negative = value[index] == b'-';
    if value[index] == b'+' || negative {
        index += 1;
    }
    let digits_start = index;
    let mut magnitude = Some(0u64);
    while index < value.len() && value[index].is_ascii_digit() {
        let digit = (value[index] - b'0') as u64;
        magnitude = magnitude.and_then(|number| number.checked_mul(10)?.checked_add(digit));
        index += 1;
    }
    // The end of the value is followed by "\r\n": whitespace.
    if index == digits_start || (index < value.len() && !is_c_space(value[index])) {
        return None;
    }
    let number = if negative { magnitude?.wrapping_neg() } else { magnitude? };
    if negative && (number as i64) < 0 {
        return None;
    }
    Some(number)
}

/// Writes `number` in decimal into `buffer`, returning the digits.
pub(crate) fn format_decimal(number: u64, buffer: &mut [u8; DECIMAL_DIGITS_MAX]) -> &[u8] {
    let mut start = DECIMAL_DIGITS_MAX;
    let mut rest = number;
    loop {
        start -= 1;
        buffer[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    &buffer[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_header_key_value_rounded_to_8() {
        assert_eq!(item_bytes(0, 0), 32);
        assert_eq!(item_bytes(1, 0), 40);
        assert_eq!(item_bytes(8, 0), 40);
        assert_eq!(item_bytes(10, 100), 144);
        assert_eq!(item_bytes(250, 1 << 20), 32 + 250 + (1 << 20) + 6);
    }

    #[test]
    fn counters_parse_as_memcached_s_safe_strtoull() {
        assert_eq!(parse_counter(b"0"), Some(0));
        assert_eq!(parse_counter(b"42"), Some(42));
        assert_eq!(parse_counter(b"9 "), Some(9), "memcached pads numbers that shrank in place");
        assert_eq!(parse_counter(b" \t+7"), Some(7));
        assert_eq!(parse_counter(b"12 ab"), Some(12));
        assert_eq!(parse_counter(b"-0"), Some(0));
        assert_eq!(parse_counter(b"-18446744073709551615"), Some(1), "strtoull wraps");
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"000000000000000000001"), Some(1), "leading zeros: strtoull reads on");
        for bad in [&b""[..], b" ", b"-1", b"1a", b"a1", b"+", b"0x10", b"1.5", b"\x001"] {
            assert_eq!(parse_counter(bad), None, "{bad:?}");
        }
        // Numbers of more than 20 digits (without leading zeros) exceed 2^64.
        assert_eq!(parse_counter(b"18446744073709551616"), None);
        assert_eq!(parse_counter(b"100000000000000000000"), None);
        assert_eq!(parse_counter(b"99999999999999999999999999"), None);
    }

    #[test]
    fn decimal_formatting_round_trips() {
        let mut buffer = [0; DECIMAL_DIGITS_MAX];
        for number in [0, 1, 9, 10, 99, 100, 12345, u64::MAX - 1, u64::MAX] {
            let digits = format_decimal(number, &mut buffer);
            assert_eq!(digits, number.to_string().as_bytes());
            assert_eq!(parse_counter(digits), Some(number));
        }
    }
}
