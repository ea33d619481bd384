//! Reassembly of messages that travel as several chunks: one buffer of the message's length per
//! message, each chunk written at its offset (by copy or by a zero-copy rendezvous receive), and a
//! bitmap of the chunks seen, so a message is complete exactly when every chunk has arrived once
//! and a duplicate chunk cannot leave a hole of stale bytes. Knows no UCX: the receive path asks
//! where a chunk goes and says when it has landed.
use crate::error::Error;
use crate::pool::Buffer;
use crate::wire::{Header, Kind};

use super::id_map::IdMap;

/// A message in reassembly: (connection, request id, kind). Responses and requests of one id and
/// connection are different messages.
pub(super) type PartialKey = (u64, u64, u8);

/// A message being reassembled from chunks.
struct Partial {
    /// None when no buffer could be had: chunks are then received and dropped, and the message fails.
    buffer: Option<Buffer>,
    op: u16,
    status: u16,
    total_len: u64,
    chunk_count: u32,
    chunks_done: u32,
    bytes_done: u64,
    /// One bit per chunk seen.
    seen: Vec<u64>,
}

/// Where the bytes of an accepted chunk go.
pub(super) enum ChunkTarget<'a> {
    /// `offset` bytes into this buffer (its length is the message's).
    Into(&'a mut Buffer, usize),
    /// The message has no buffer: receive the chunk and drop it.
    Drop,
}

#[derive(Default)]
pub(super) struct Reassembly {
    partials: IdMap<PartialKey, Partial>,
}

impl Reassembly {
    /// Accepts chunk `header` of message `key`, creating the message at its first chunk with the
    /// buffer `alloc(total_len)` gives (or none). Fails, changing nothing, on a chunk that
    /// contradicts the message's first chunk (count, op, length) or was seen already: the
    /// sender is broken or hostile, and the caller closes the connection.
    pub(super) fn accept(&mut self, key: PartialKey, header: &Header, alloc: impl FnOnce(usize) -> Option<Buffer>) -> Result<ChunkTarget<'_>, String> {
        let partial = self.partials.entry(key).or_insert_with(|| Partial {
            buffer: alloc(header.total_len as usize),
            op: header.op,
            status: header.status,
            total_len: header.total_len,
            chunk_count: header.chunk_count,
            chunks_done: 0,
            bytes_done: 0,
            seen: vec![0; (header.chunk_count as usize).div_ceil(64)],
        });
        let (word, bit) = (header.chunk_index as usize / 64, 1u64 << (header.chunk_index % 64));
        if partial.chunk_count != header.chunk_count || partial.op != header.op || partial.total_len != header.total_len {
            return Err(format!("chunk {} of message {} contradicts its first chunk", header.chunk_index, header.request_id));
        }
        if header.chunk_index >= partial.chunk_count || partial.seen[word] & bit != 0 {
            return Err(format!("chunk {} of message {} is a duplicate or out of range", header.chunk_index, header.request_id));
        }
        partial.seen[word] |= bit;
        Ok(match partial.buffer.as_mut() {
            Some(buffer) => ChunkTarget::Into(buffer, header.offset as usize),
            None => ChunkTarget::Drop,
        })
    }

    /// A chunk of `len` bytes of message `key` has landed (or failed to: the message then fails).
    /// Returns the whole message once its last chunk is in: its header (chunk 0, the length
    /// received) and its bytes, or why it has none.
    pub(super) fn chunk_done(&mut self, key: PartialKey, len: usize, landed: bool, pool_cap_bytes: usize) -> Option<(Header, Result<Buffer, Error>)> {
        let partial = self.partials.get_mut(&key)?;
        if !landed {
            partial.buffer = None;
        }
        partial.chunks_done += 1;
        partial.bytes_done += len as u64;
        if partial.chunks_done < partial.chunk_count {
            return None;
        }
        let partial = self.partials.remove(&key)?;
        let kind = match key.2 {
            1 => Kind::Request,
            2 => Kind::Response,
            _ => Kind::ErrorResponse,
        };
        let header = Header {
            kind,
            op: partial.op,
            status: partial.status,
            chunk_index: 0,
            chunk_count: partial.chunk_count,
            request_id: key.1,
            total_len: partial.bytes_done,
            offset: 0,
        };
        let payload = match partial.buffer {
            Some(buffer) if buffer.len() as u64 == partial.bytes_done => Ok(buffer),
            Some(_) => Err(Error::Protocol("chunks do not add up to the message length".into())),
            None => Err(Error::PoolExhausted { requested: partial.bytes_done as usize, cap: pool_cap_bytes }),
        };
        Some((header, payload))
    }

    /// Forgets the messages of a failed connection.
    pub(super) fn drop_conn(&mut self, conn_id: u64) {
        self.partials.retain(|key, _| key.0 != conn_id);
    }

    pub(super) fn clear(&mut self) {
        self.partials.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.partials.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pool::Pool;
    use crate::ucx::Context;
    use crate::wire;
    use std::sync::Arc;

    const CHUNK: usize = 4096;

    fn chunk(request_id: u64, index: u32, count: u32, total_len: u64) -> Header {
        Header { kind: Kind::Response, op: 9, status: wire::STATUS_OK, chunk_index: index, chunk_count: count, request_id, total_len, offset: index as u64 * CHUNK as u64 }
    }

    fn pool() -> Pool {
        Pool::new(Arc::new(Context::new(&Config::default()).unwrap()), 1 << 20, 1 << 16)
    }

    /// Delivers chunk `index` of a 3-chunk message whose byte i is `i % 251`.
    fn deliver(reassembly: &mut Reassembly, pool: &Pool, index: u32) -> Option<(Header, Result<Buffer, Error>)> {
        let total_len = (2 * CHUNK + 100) as u64;
        let header = chunk(5, index, 3, total_len);
        let len = CHUNK.min(total_len as usize - header.offset as usize);
        match reassembly.accept((1, 5, 2), &header, |n| pool.alloc(n, None).ok()).unwrap() {
            ChunkTarget::Into(buffer, offset) => {
                for (i, byte) in buffer.as_mut_slice()[offset..offset + len].iter_mut().enumerate() {
                    *byte = ((offset + i) % 251) as u8;
                }
            }
            ChunkTarget::Drop => panic!("the pool had room"),
        }
        reassembly.chunk_done((1, 5, 2), len, true, 1 << 20)
    }

    #[test]
    fn chunks_in_any_order_make_the_whole_message_once() {
        let pool = pool();
        let mut reassembly = Reassembly::default();
        assert!(deliver(&mut reassembly, &pool, 2).is_none());
        assert!(deliver(&mut reassembly, &pool, 0).is_none());
        let (header, payload) = deliver(&mut reassembly, &pool, 1).expect("complete after the third chunk");
        assert_eq!((header.kind, header.op, header.request_id, header.total_len), (Kind::Response, 9, 5, (2 * CHUNK + 100) as u64));
        let payload = payload.unwrap();
        assert!(payload.as_slice().iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(reassembly.len(), 0, "a complete message leaves the table");
    }

    #[test]
    fn a_duplicate_chunk_is_refused() {
        let pool = pool();
        let mut reassembly = Reassembly::default();
        assert!(deliver(&mut reassembly, &pool, 0).is_none());
        let again = reassembly.accept((1, 5, 2), &chunk(5, 0, 3, (2 * CHUNK + 100) as u64), |_| panic!("no second buffer"));
        assert!(again.is_err());
    }

    #[test]
    fn chunks_that_contradict_the_first_are_refused() {
        let pool = pool();
        let mut reassembly = Reassembly::default();
        let total_len = (2 * CHUNK + 100) as u64;
        assert!(reassembly.accept((1, 5, 2), &chunk(5, 0, 3, total_len), |n| pool.alloc(n, None).ok()).is_ok());
        assert!(reassembly.accept((1, 5, 2), &chunk(5, 1, 4, total_len), |_| None).is_err(), "another chunk count");
        assert!(reassembly.accept((1, 5, 2), &chunk(5, 1, 3, total_len + 1), |_| None).is_err(), "another length");
        let mut other_op = chunk(5, 1, 3, total_len);
        other_op.op = 10;
        assert!(reassembly.accept((1, 5, 2), &other_op, |_| None).is_err(), "another op");
        assert!(reassembly.accept((1, 5, 2), &chunk(5, 3, 3, total_len), |_| None).is_err(), "index beyond the count");
        assert!(reassembly.accept((1, 5, 2), &chunk(5, 1, 3, total_len), |_| None).is_ok(), "the real second chunk still fits");
    }

    #[test]
    fn without_a_buffer_the_chunks_are_dropped_and_the_message_fails() {
        let mut reassembly = Reassembly::default();
        let total_len = (CHUNK + 1) as u64;
        for index in 0..2 {
            let target = reassembly.accept((1, 6, 1), &chunk(6, index, 2, total_len), |_| None).unwrap();
            assert!(matches!(target, ChunkTarget::Drop));
        }
        assert!(reassembly.chunk_done((1, 6, 1), CHUNK, true, 77).is_none());
        let (header, payload) = reassembly.chunk_done((1, 6, 1), 1, true, 77).unwrap();
        assert_eq!(header.kind, Kind::Request);
        assert!(matches!(payload, Err(Error::PoolExhausted { requested, cap: 77 }) if requested == CHUNK + 1));
    }

    #[test]
    fn a_chunk_that_failed_to_land_fails_the_message() {
        let pool = pool();
        let mut reassembly = Reassembly::default();
        let total_len = (CHUNK + 1) as u64;
        for index in 0..2 {
            assert!(reassembly.accept((1, 7, 2), &chunk(7, index, 2, total_len), |n| pool.alloc(n, None).ok()).is_ok());
        }
        assert!(reassembly.chunk_done((1, 7, 2), CHUNK, false, 1).is_none());
        let (_, payload) = reassembly.chunk_done((1, 7, 2), 1, true, 1).unwrap();
        assert!(payload.is_err());
        assert_eq!(pool.in_use_bytes(), 0, "the buffer went back to the pool");
    }

    #[test]
    fn a_failed_connection_takes_only_its_own_messages() {
        let mut reassembly = Reassembly::default();
        for (conn, id) in [(1, 1), (1, 2), (2, 1)] {
            reassembly.accept((conn, id, 2), &chunk(id, 0, 2, (CHUNK + 1) as u64), |_| None).unwrap();
        }
        reassembly.drop_conn(1);
        assert_eq!(reassembly.len(), 1);
        assert!(reassembly.chunk_done((1, 1, 2), CHUNK, true, 1).is_none(), "a dropped message completes no more");
        reassembly.clear();
        assert_eq!(reassembly.len(), 0);
    }
}
