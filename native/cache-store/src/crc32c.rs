//! CRC32C (Castagnoli), the checksum of every value on the SSD tier (as memcached's extstore and
//! iSCSI use): the SSE4.2 `crc32` instruction where the CPU has it, a table otherwise.

const POLYNOMIAL_REFLECTED: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut index = 0;
    while index < 256 {
        let mut crc = index as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ POLYNOMIAL_REFLECTED } else { crc >> 1 };
            bit += 1;
        }
        table[index] = crc;
        index += 1;
    }
    table
};

/// Continues a CRC32C over `data` (start with 0; `update(update(0, a), b) == update(0, a ++ b)`).
pub(crate) fn update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2 (checked above).
            return unsafe { update_sse42(crc, data) };
        }
    }
    update_table(crc, data)
}

fn update_table(crc: u32, data: &[u8]) -> u32 {
    let mut crc = !crc;
    for &byte in data {
        crc = TABLE[((crc ^ byte as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn update_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc64 = (!crc) as u64;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        crc64 = _mm_crc32_u64(crc64, u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
    }
    let mut crc32 = crc64 as u32;
    for &byte in chunks.remainder() {
        crc32 = _mm_crc32_u8(crc32, byte);
    }
    !crc32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_check_values() {
        // The check value of CRC-32C (RFC 3720, and every CRC catalogue).
        assert_eq!(update(0, b"123456789"), 0xE306_9283);
        assert_eq!(update_table(0, b"123456789"), 0xE306_9283);
        assert_eq!(update(0, b""), 0);
        // RFC 3720 B.4: 32 bytes of zeros, of 0xff.
        assert_eq!(update(0, &[0u8; 32]), 0x8A91_36AA);
        assert_eq!(update(0, &[0xffu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn the_instruction_and_the_table_agree_and_chain() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 4096, 10_000] {
            assert_eq!(update(0, &data[..len]), update_table(0, &data[..len]), "len {len}");
        }
        let (a, b) = data.split_at(3333);
        assert_eq!(update(update(0, a), b), update(0, &data));
    }
}
