//! Splitting a text command line into tokens the way memcached's `tokenize_command` does: tokens
//! are separated by spaces only (a tab is part of a token), runs of spaces count as one, and at
//! most `TOKENS_MAX` tokens are split off; whatever follows stays in `rest` (only multi-key
//! retrievals read it). No allocation: tokens are slices of the line.

/// memcached's `MAX_TOKENS` (24) less its terminal token.
pub(crate) const TOKENS_MAX: usize = 23;

pub(crate) struct Tokens<'a> {
    items: [&'a [u8]; TOKENS_MAX],
    count: usize,
    /// The unsplit remainder after `TOKENS_MAX` tokens (may be spaces only); empty otherwise.
    pub(crate) rest: &'a [u8],
}

impl<'a> Tokens<'a> {
    pub(crate) fn split(line: &'a [u8]) -> Tokens<'a> {
        let mut tokens = Tokens { items: [&[]; TOKENS_MAX], count: 0, rest: &[] };
        let mut iterator = SpaceSeparated::new(line);
        while tokens.count < TOKENS_MAX {
            match iterator.next() {
                Some(token) => {
                    tokens.items[tokens.count] = token;
                    tokens.count += 1;
                }
                None => return tokens,
            }
        }
        // memcached stops right after the space that ends the last token it keeps.
        tokens.rest = iterator.remaining_after_separator();
        tokens
    }

    /// Tokens split off (at most `TOKENS_MAX`).
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// memcached's `ntokens`, which counts a terminal token: its arity checks are written in it.
    pub(crate) fn ntokens(&self) -> usize {
        self.count + 1
    }

    /// Token `index`; an empty slice past the end (memcached's terminal token has length 0).
    pub(crate) fn get(&self, index: usize) -> &'a [u8] {
        if index < self.count {
            self.items[index]
        } else {
            &[]
        }
    }

    pub(crate) fn last(&self) -> &'a [u8] {
        if self.count == 0 {
            &[]
        } else {
            self.items[self.count - 1]
        }
    }

    /// The tokens from `start` on, then every token of `rest`: a retrieval's keys.
    pub(crate) fn from(&self, start: usize) -> impl Iterator<Item = &'a [u8]> + '_ {
        let split = &self.items[start.min(self.count)..self.count];
        split.iter().copied().chain(SpaceSeparated::new(self.rest))
    }
}

/// Space-separated tokens of a byte string, skipping empty ones.
pub(crate) struct SpaceSeparated<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> SpaceSeparated<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> SpaceSeparated<'a> {
        SpaceSeparated { bytes, position: 0 }
    }

    fn remaining_after_separator(&self) -> &'a [u8] {
        // `next` leaves `position` on the space after the token (or at the end).
        let start = (self.position + 1).min(self.bytes.len());
        &self.bytes[start..]
    }
}

impl<'a> Iterator for SpaceSeparated<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        let mut start = self.position;
        while start < bytes.len() && bytes[start] == b' ' {
            start += 1;
        }
        if start == bytes.len() {
            self.position = start;
            return None;
        }
        let mut end = start;
        while end < bytes.len() && bytes[end] != b' ' {
            end += 1;
        }
        self.position = end;
        Some(&bytes[start..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_spaces_only() {
        let tokens = Tokens::split(b"  get a\tb   c ");
        assert_eq!(tokens.len(), 3);
        assert_eq!(tokens.ntokens(), 4);
        assert_eq!(tokens.get(0), b"get");
        assert_eq!(tokens.get(1), b"a\tb");
        assert_eq!(tokens.last(), b"c");
        assert_eq!(tokens.get(3), b"");
        assert!(tokens.rest.is_empty());
        assert_eq!(Tokens::split(b"").len(), 0);
        assert_eq!(Tokens::split(b"    ").len(), 0);
    }

    #[test]
    fn keeps_the_rest_after_the_token_limit() {
        let line: Vec<u8> = (0..30).map(|i| format!("k{i}")).collect::<Vec<_>>().join(" ").into_bytes();
        let tokens = Tokens::split(&line);
        assert_eq!(tokens.len(), TOKENS_MAX);
        assert_eq!(tokens.rest, b"k23 k24 k25 k26 k27 k28 k29");
        let keys: Vec<&[u8]> = tokens.from(1).collect();
        assert_eq!(keys.len(), 29);
        assert_eq!(keys[28], b"k29");
        // Exactly TOKENS_MAX tokens then spaces: memcached's terminal token is the spaces.
        let line: Vec<u8> = (0..23).map(|i| format!("k{i}")).collect::<Vec<_>>().join(" ").into_bytes();
        let with_spaces = [&line[..], b"   "].concat();
        let tokens = Tokens::split(&with_spaces);
        assert_eq!(tokens.len(), TOKENS_MAX);
        assert_eq!(tokens.rest, b"  ");
        assert_eq!(tokens.from(0).count(), 23);
    }
}
