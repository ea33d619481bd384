//! Copying values into replies.
//!
//! Why not `copy_from_slice` for large values: glibc 2.36 (Debian 12) copies blocks above
//! `x86_rep_movsb_threshold` (about 2 KiB) with `rep movsb`, which on the AMD EPYC machines this
//! project runs on is 10 to 30 times slower when the destination sits 1 to 15 bytes past the
//! source modulo 4 KiB. A reply puts a value right after a short header, so whether a GET of a
//! large value took 15 us or 300 us for its copy depended on the key's length. A plain SSE2 loop
//! has no such case (measured: 11 to 13 us for 512 KiB at every relative offset; memcpy 11 us at
//! good offsets, 150 to 340 us at bad ones). Newer glibc releases avoid `rep movsb` on AMD for
//! this reason.

/// Below this, `copy_from_slice` (glibc's small-size paths have no such case).
pub const LARGE_COPY_BYTES: usize = 4096;

/// Copies `src` into `dst` (equal lengths).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy between slices of different lengths");
    if src.len() < LARGE_COPY_BYTES {
        dst.copy_from_slice(src);
        return;
    }
    copy_large(dst, src);
}

#[cfg(target_arch = "x86_64")]
fn copy_large(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
    let blocks_bytes = src.len() / 64 * 64;
    // SAFETY: SSE2 is part of x86_64. Every load reads 16 bytes within src[..blocks_bytes] and
    // every store writes 16 bytes within dst[..blocks_bytes] (both slices are at least that
    // long); unaligned loads and stores have no alignment requirement; dst and src cannot overlap
    // (one is borrowed mutably, the other shared).
    unsafe {
        let (from, to) = (src.as_ptr(), dst.as_mut_ptr());
        let mut offset = 0;
        while offset < blocks_bytes {
            let a = _mm_loadu_si128(from.add(offset) as *const __m128i);
            let b = _mm_loadu_si128(from.add(offset + 16) as *const __m128i);
            let c = _mm_loadu_si128(from.add(offset + 32) as *const __m128i);
            let d = _mm_loadu_si128(from.add(offset + 48) as *const __m128i);
            _mm_storeu_si128(to.add(offset) as *mut __m128i, a);
            _mm_storeu_si128(to.add(offset + 16) as *mut __m128i, b);
            _mm_storeu_si128(to.add(offset + 32) as *mut __m128i, c);
            _mm_storeu_si128(to.add(offset + 48) as *mut __m128i, d);
            offset += 64;
        }
    }
    dst[blocks_bytes..].copy_from_slice(&src[blocks_bytes..]);
}

#[cfg(not(target_arch = "x86_64"))]
fn copy_large(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_exactly_at_every_offset_and_length() {
        let source: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut target = vec![0u8; 20_200];
        for len in [0usize, 1, 63, 64, 65, 4095, 4096, 4097, 4160, 10_000, 19_000] {
            for src_offset in [0usize, 1, 15, 16, 63] {
                for dst_offset in [0usize, 1, 7, 16, 33, 64, 127] {
                    target.fill(0xEE);
                    copy(&mut target[dst_offset..dst_offset + len], &source[src_offset..src_offset + len]);
                    assert!(target[dst_offset..dst_offset + len] == source[src_offset..src_offset + len]);
                    assert!(target[..dst_offset].iter().all(|&b| b == 0xEE), "wrote before the destination");
                    assert!(target[dst_offset + len..].iter().all(|&b| b == 0xEE), "wrote past the destination");
                }
            }
        }
    }
}
