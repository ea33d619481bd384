//! Anonymous memory mappings for the segment arena and the hash index tables. Both are mapped
//! directly (not through malloc) so that what the store counts against its memory limit is what
//! the kernel holds: pages are resident only once written, `release` gives them back at once, and
//! a freed index table is unmapped instead of lingering in an allocator's free lists.

use std::io;
use std::ptr;

pub(crate) struct Mapping {
    base: *mut u8,
    len_bytes: usize,
}

// SAFETY: the mapping is plain memory owned by this value; who may touch which bytes when is the
// store's business (segments are written only under their owning shard's lock).
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

pub(crate) fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    assert!(page_bytes > 0 && (page_bytes as usize).is_power_of_two());
    page_bytes as usize
}

impl Mapping {
    /// Reserves `len_bytes` of zeroed address space; nothing is resident until written.
    pub(crate) fn new(len_bytes: usize) -> io::Result<Mapping> {
        assert!(len_bytes > 0);
        assert_eq!(len_bytes % page_bytes(), 0);
        // SAFETY: a fresh private anonymous mapping aliases nothing.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { base: base as *mut u8, len_bytes })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    pub(crate) fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// Gives the pages of a range back to the kernel; they read as zeros afterwards. The caller
    /// must own the range (no one reads or writes it meanwhile).
    pub(crate) fn release(&self, offset_bytes: usize, len_bytes: usize) {
        let page_bytes = page_bytes();
        assert_eq!(offset_bytes % page_bytes, 0);
        assert_eq!(len_bytes % page_bytes, 0);
        assert!(offset_bytes + len_bytes <= self.len_bytes);
        // SAFETY: the range lies inside this mapping (asserted above).
        let status =
            unsafe { libc::madvise(self.base.add(offset_bytes) as *mut libc::c_void, len_bytes, libc::MADV_DONTNEED) };
        assert_eq!(status, 0, "madvise(MADV_DONTNEED): {}", io::Error::last_os_error());
    }

    /// Bytes of this mapping the kernel holds in memory now (mincore). Slow path: tests and checks.
    pub(crate) fn resident_bytes(&self) -> usize {
        let page_bytes = page_bytes();
        let pages = self.len_bytes / page_bytes;
        let mut residency = vec![0u8; pages];
        // SAFETY: base/len describe this mapping; the vector has one byte per page.
        let status = unsafe { libc::mincore(self.base as *mut libc::c_void, self.len_bytes, residency.as_mut_ptr()) };
        assert_eq!(status, 0, "mincore: {}", io::Error::last_os_error());
        residency.iter().filter(|&&page| page & 1 != 0).count() * page_bytes
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing refers to it once its owner is dropped.
        let status = unsafe { libc::munmap(self.base as *mut libc::c_void, self.len_bytes) };
        debug_assert_eq!(status, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_resident_once_written_and_released_on_demand() {
        let page_bytes = page_bytes();
        let mapping = Mapping::new(64 * page_bytes).unwrap();
        assert_eq!(mapping.resident_bytes(), 0);
        for page in 0..8 {
            // SAFETY: inside the mapping.
            unsafe { *mapping.base().add(page * page_bytes) = 1 };
        }
        assert_eq!(mapping.resident_bytes(), 8 * page_bytes);
        mapping.release(0, 4 * page_bytes);
        assert_eq!(mapping.resident_bytes(), 4 * page_bytes);
        // SAFETY: inside the mapping; released pages read as zeros.
        assert_eq!(unsafe { *mapping.base() }, 0);
        assert_eq!(unsafe { *mapping.base().add(4 * page_bytes) }, 1);
    }
}
