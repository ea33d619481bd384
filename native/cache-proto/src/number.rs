//! Decimal numbers in text commands, parsed and printed without allocation.
//!
//! The parsers reproduce memcached's `safe_strtoull`/`safe_strtoul`/`safe_strtol` (util.c) on a
//! 64-bit Linux build, quirks included, because clients see the difference: leading whitespace and a
//! sign are accepted, the number must be followed by the end of the token or by whitespace, `-1` is
//! rejected as unsigned but `-0` is not, and `strtoul`/`strtol` results are truncated to 32 bits
//! (memcached stores them in 32-bit variables: `set k 4294967297 0 1` stores flags 1).

/// C's `isspace` in the "C" locale.
pub(crate) fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The result of C's `strtoull`/`strtoll` prefix scan: sign, magnitude, and where parsing stopped.
struct Scan {
    negative: bool,
    /// `None` when the magnitude overflowed 64 bits (`ERANGE`).
    magnitude: Option<u64>,
    /// Index of the first byte after the digits; 0 when no digits were found (`endptr == str`).
    end: usize,
}

fn scan(token: &[u8]) -> Scan {
    let mut index = 0;
    while index < token.len() && is_c_space(token[index]) {
        index += 1;
    }
    let mut negative = false;
    if index < token.len() && (token[index] == b'+' || token[index] == b'-') {
        negative = token[index] == b'-';
        index += 1;
    }
    let digits_start = index;
    let mut magnitude: Option<u64> = Some(0);
    while index < token.len() && token[index].is_ascii_digit() {
        let digit = u64::from(token[index] - b'0');
        magnitude = magnitude.and_then(|m| m.checked_mul(10)).and_then(|m| m.checked_add(digit));
        index += 1;
    }
    if index == digits_start {
        return Scan { negative, magnitude: Some(0), end: 0 };
    }
    Scan { negative, magnitude, end: index }
}

/// Whether what follows the digits is acceptable to memcached: nothing, or whitespace.
fn ends_cleanly(token: &[u8], end: usize) -> bool {
    end > 0 && (end == token.len() || is_c_space(token[end]))
}

/// memcached's `safe_strtoull`.
pub(crate) fn parse_u64(token: &[u8]) -> Option<u64> {
    let scan = scan(token);
    let magnitude = scan.magnitude?;
    if !ends_cleanly(token, scan.end) {
        return None;
    }
    let value = if scan.negative { magnitude.wrapping_neg() } else { magnitude };
    // Like strtoull, "-5" wraps to 2^64-5; memcached rejects it only when the result looks negative.
    if (value as i64) < 0 && token[..scan.end].contains(&b'-') {
        return None;
    }
    Some(value)
}

/// memcached's `safe_strtoul`: `strtoul` is 64-bit on LP64, and the result lands in a `uint32_t`.
pub(crate) fn parse_u32(token: &[u8]) -> Option<u32> {
    parse_u64(token).map(|value| value as u32)
}

/// memcached's `safe_strtol`: `strtol` is 64-bit on LP64, and the result lands in an `int32_t`.
pub(crate) fn parse_i32(token: &[u8]) -> Option<i32> {
    let scan = scan(token);
    let magnitude = scan.magnitude?;
    if !ends_cleanly(token, scan.end) {
        return None;
    }
    let value: i64 = if scan.negative {
        if magnitude > 1u64 << 63 {
            return None; // ERANGE
        }
        (magnitude as i64).wrapping_neg()
    } else {
        i64::try_from(magnitude).ok()? // ERANGE
    };
    Some(value as i32)
}

/// Longest decimal form of a `u64`.
pub(crate) const U64_DIGITS_MAX: usize = 20;

/// Formats `value` in decimal at the end of `buffer` and returns the digits.
pub(crate) fn format_u64(value: u64, buffer: &mut [u8; U64_DIGITS_MAX]) -> &[u8] {
    let mut index = U64_DIGITS_MAX;
    let mut rest = value;
    loop {
        index -= 1;
        buffer[index] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    &buffer[index..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_like_strtoull() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b"  7"), Some(7));
        assert_eq!(parse_u64(b"7\r"), Some(7));
        assert_eq!(parse_u64(b"7x"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-"), None);
        assert_eq!(parse_u64(b"x"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"-0"), Some(0));
        // strtoull negates in unsigned arithmetic; the result is "positive", so memcached keeps it.
        assert_eq!(parse_u64(b"-18446744073709551615"), Some(1));
    }

    #[test]
    fn thirty_two_bit_results_truncate_like_memcached() {
        assert_eq!(parse_u32(b"4294967297"), Some(1));
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"4294967297"), Some(1));
        assert_eq!(parse_i32(b"9223372036854775807"), Some(-1));
        assert_eq!(parse_i32(b"9223372036854775808"), None);
        assert_eq!(parse_i32(b"-9223372036854775808"), Some(0));
        assert_eq!(parse_i32(b"-9223372036854775809"), None);
        assert_eq!(parse_i32(b"12 "), Some(12));
        assert_eq!(parse_i32(b"1.5"), None);
    }

    #[test]
    fn formats_every_width() {
        let mut buffer = [0u8; U64_DIGITS_MAX];
        assert_eq!(format_u64(0, &mut buffer), b"0");
        assert_eq!(format_u64(10, &mut buffer), b"10");
        assert_eq!(format_u64(u64::MAX, &mut buffer), b"18446744073709551615");
        let mut value = 1u64;
        while let Some(next) = value.checked_mul(10) {
            assert_eq!(format_u64(value, &mut buffer), value.to_string().as_bytes());
            value = next;
        }
    }
}
