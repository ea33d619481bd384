//! Reassembly of messages that travel as several chunks: one buffer of the message's length per
//! message, each chunk written at its offset (by copy or by a zero-copy rendezvous receive), and a
//! bitmap of the chunks seen, so a message is complete exactly when every chunk has arrived once
//! and a duplicate chunk cannot leave a hole of stale bytes. Every chunk must lie where the
//! sender's cut puts it (`wire::chunk_cut`: chunks of one size back to back, the same size for
//! every chunk of the message), so chunks that overlap cannot leave a hole either: a complete
//! message has every byte written exactly once. Knows no UCX: the receive path asks where a chunk
//! goes and says when it has landed.
//!
//! Limits (`Config`): requests in reassembly per connection and per node (a chunk that would start
//! one more is refused), bytes of buffers per connection (beyond it a request gets no buffer and
//! fails), and a timeout after the last chunk (the message is dropped with its buffer). A buffer
//! that a rendezvous receive is still writing into is never freed: a message dropped with its
//! connection or at its timeout keeps it until those receives are done.
use crate::error::Error;
use crate::pool::Buffer;
use crate::wire::{self, Header, Kind};

use super::id_map::IdMap;

/// A message in reassembly: (connection, request id, kind). Responses and requests of one id and
/// connection are different messages.
pub type PartialKey = (u64, u64, u8);

/// What the reassembly needs of a message's buffer: its length. The node's buffers are
/// `pool::Buffer`s; the fuzz target's (`fuzz/fuzz_targets/fuzz_reassembly.rs`) are plain memory
/// that reports when it is dropped, so that the target can tell when a buffer goes back.
#[allow(clippy::len_without_is_empty)] // whether a buffer is empty means nothing here
pub trait MessageBuffer {
    fn len(&self) -> usize;
}

impl MessageBuffer for Buffer {
    fn len(&self) -> usize {
        Buffer::len(self)
    }
}

/// The bounds of a node's reassembly (from `Config`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub requests_per_connection: usize,
    pub requests: usize,
    pub bytes_per_connection: usize,
    pub timeout_ms: u64,
}

/// A message being reassembled from chunks.
struct Partial<B> {
    /// None when no buffer could be had: chunks are then received and dropped, and the message fails.
    buffer: Option<B>,
    op: u16,
    status: u16,
    total_len: u64,
    chunk_count: u32,
    /// The chunk size of the sender's cut, from the first chunk (`wire::chunk_cut`).
    chunk_bytes: u64,
    chunks_done: u32,
    bytes_done: u64,
    /// One bit per chunk seen.
    seen: Vec<u64>,
    /// When the last chunk arrived (coarse clock).
    last_chunk_ms: u64,
    /// Rendezvous receives writing into `buffer` right now.
    receives_in_flight: u32,
    /// A chunk failed to land: the message fails, its next chunks are dropped, and its buffer stays
    /// until the message goes (receives in flight may still be writing into it).
    failed: bool,
    /// Dropped (connection failed) while receives were in flight: removed once they are done.
    doomed: bool,
}

/// Where the bytes of an accepted chunk go.
pub enum ChunkTarget<'a, B = Buffer> {
    /// `offset` bytes into this buffer (its length is the message's).
    Into(&'a mut B, usize),
    /// The message has no buffer: receive the chunk and drop it.
    Drop,
}

/// What one connection holds in reassembly (requests only): multi-chunk requests (the count
/// limits), and bytes of every request's buffer (a single-chunk request sent by rendezvous holds
/// one here until its data has landed).
#[derive(Default, Clone, Copy)]
struct ConnUsage {
    requests: usize,
    bytes: usize,
    entries: usize,
}

pub struct Reassembly<B = Buffer> {
    partials: IdMap<PartialKey, Partial<B>>,
    usage: IdMap<u64, ConnUsage>,
    requests: usize,
    limits: Limits,
}

fn is_request(key: &PartialKey) -> bool {
    key.2 == Kind::Request as u8
}

impl<B: MessageBuffer> Reassembly<B> {
    pub fn new(limits: Limits) -> Reassembly<B> {
        Reassembly { partials: IdMap::default(), usage: IdMap::default(), requests: 0, limits }
    }

    /// Whether a message is in reassembly: more of its chunks are on their way.
    pub fn is_empty(&self) -> bool {
        self.partials.is_empty()
    }

    /// Accepts chunk `header` of message `key`, `len` bytes, creating the message at its first
    /// chunk with the buffer `alloc(total_len)` gives (or none; none either beyond the connection's
    /// byte limit). `receive`: the caller will write the chunk with a rendezvous receive and report
    /// it to `chunk_done` with `receive` set. Fails, changing nothing, on a chunk that lies off any
    /// sender's cut, contradicts the message's first chunk (count, op, length, chunk size), was
    /// seen already, or would start a request beyond the connection's or the node's limit: the
    /// sender is broken or hostile, and the caller closes the connection.
    pub fn accept(&mut self, key: PartialKey, header: &Header, len: usize, now_ms: u64, receive: bool, alloc: impl FnOnce(usize) -> Option<B>) -> Result<ChunkTarget<'_, B>, String> {
        // Chunks that overlap could add up to the message's length and leave a hole of stale bytes
        // (found by fuzz_reassembly): each chunk must be where the sender's cut puts it.
        let Some(chunk_bytes) = wire::chunk_cut(header, len) else {
            return Err(format!("chunk {} of message {} ({len} bytes at offset {}) is off any sender's cut", header.chunk_index, header.request_id, header.offset));
        };
        if !self.partials.contains_key(&key) {
            let mut usage = self.usage.get(&key.0).copied().unwrap_or_default();
            let counted = header.chunk_count > 1;
            let buffer = if is_request(&key) {
                if counted && usage.requests >= self.limits.requests_per_connection {
                    return Err(format!("more than {} requests of one connection in reassembly", self.limits.requests_per_connection));
                }
                if counted && self.requests >= self.limits.requests {
                    return Err(format!("more than {} requests in reassembly on this node", self.limits.requests));
                }
                let over_bytes = usage.entries > 0 && usage.bytes + header.total_len as usize > self.limits.bytes_per_connection;
                let buffer = if over_bytes { None } else { alloc(header.total_len as usize) };
                if counted {
                    usage.requests += 1;
                    self.requests += 1;
                }
                usage.entries += 1;
                usage.bytes += buffer.as_ref().map_or(0, |b| b.len());
                self.usage.insert(key.0, usage);
                buffer
            } else {
                alloc(header.total_len as usize)
            };
            self.partials.insert(
                key,
                Partial {
                    buffer,
                    op: header.op,
                    status: header.status,
                    total_len: header.total_len,
                    chunk_count: header.chunk_count,
                    chunk_bytes,
                    chunks_done: 0,
                    bytes_done: 0,
                    seen: vec![0; (header.chunk_count as usize).div_ceil(64)],
                    last_chunk_ms: now_ms,
                    receives_in_flight: 0,
                    failed: false,
                    doomed: false,
                },
            );
        }
        let partial = self.partials.get_mut(&key).expect("inserted above");
        if partial.doomed {
            return Ok(ChunkTarget::Drop);
        }
        let (word, bit) = (header.chunk_index as usize / 64, 1u64 << (header.chunk_index % 64));
        if partial.chunk_count != header.chunk_count || partial.op != header.op || partial.total_len != header.total_len || partial.chunk_bytes != chunk_bytes {
            return Err(format!("chunk {} of message {} contradicts its first chunk", header.chunk_index, header.request_id));
        }
        if header.chunk_index >= partial.chunk_count || partial.seen[word] & bit != 0 {
            return Err(format!("chunk {} of message {} is a duplicate or out of range", header.chunk_index, header.request_id));
        }
        partial.seen[word] |= bit;
        partial.last_chunk_ms = now_ms;
        Ok(match partial.buffer.as_mut().filter(|_| !partial.failed) {
            Some(buffer) => {
                if receive {
                    partial.receives_in_flight += 1;
                }
                ChunkTarget::Into(buffer, header.offset as usize)
            }
            None => ChunkTarget::Drop,
        })
    }

    /// A chunk of `len` bytes of message `key` has landed (or failed to: the message then fails);
    /// `receive`: it was a rendezvous receive into the buffer (`accept` returned `Into`).
    /// Returns the whole message once its last chunk is in: its header (chunk 0, the length
    /// received) and its bytes, or why it has none.
    pub fn chunk_done(&mut self, key: PartialKey, len: usize, landed: bool, receive: bool, pool_cap_bytes: usize) -> Option<(Header, Result<B, Error>)> {
        let partial = self.partials.get_mut(&key)?;
        if receive {
            partial.receives_in_flight -= 1;
        }
        if partial.doomed {
            if partial.receives_in_flight == 0 {
                self.remove(&key);
            }
            return None;
        }
        // A failed chunk fails the message; its buffer stays until the message goes: another
        // receive may still be writing into it (dropping it here handed it back to the pool under
        // that receive, and left its bytes on the connection's count: found by fuzz_reassembly).
        partial.failed |= !landed;
        partial.chunks_done += 1;
        partial.bytes_done += len as u64;
        if partial.chunks_done < partial.chunk_count {
            return None;
        }
        debug_assert_eq!(partial.receives_in_flight, 0, "every chunk is done");
        let partial = self.remove(&key)?;
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
            Some(buffer) if !partial.failed && buffer.len() as u64 == partial.bytes_done => Ok(buffer),
            Some(_) if !partial.failed => Err(Error::Protocol("chunks do not add up to the message length".into())),
            // No buffer, or a chunk failed to land: answered as before the failed flag, when a
            // failed chunk dropped the buffer.
            _ => Err(Error::PoolExhausted { requested: partial.bytes_done as usize, cap: pool_cap_bytes }),
        };
        Some((header, payload))
    }

    /// Removes a message and its share of the limits.
    fn remove(&mut self, key: &PartialKey) -> Option<Partial<B>> {
        let partial = self.partials.remove(key)?;
        if is_request(key) {
            let counted = partial.chunk_count > 1;
            if counted {
                self.requests -= 1;
            }
            if let Some(usage) = self.usage.get_mut(&key.0) {
                if counted {
                    usage.requests -= 1;
                }
                usage.entries -= 1;
                usage.bytes -= partial.buffer.as_ref().map_or(0, |b| b.len());
                if usage.entries == 0 {
                    debug_assert!(usage.bytes == 0 && usage.requests == 0, "a connection with no request in reassembly holds none of the limits");
                    self.usage.remove(&key.0);
                }
            }
        }
        Some(partial)
    }

    /// Forgets the messages of a failed connection; those with receives in flight keep their
    /// buffer until the receives are done.
    pub fn drop_conn(&mut self, conn_id: u64) {
        let keys: Vec<PartialKey> = self.partials.keys().filter(|key| key.0 == conn_id).copied().collect();
        for key in keys {
            self.drop_message(&key);
        }
    }

    /// Drops the messages whose last chunk came `timeout_ms` or longer before `now_ms`; returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let timeout_ms = self.limits.timeout_ms;
        let keys: Vec<PartialKey> = self
            .partials
            .iter()
            .filter(|(_, p)| !p.doomed && now_ms.saturating_sub(p.last_chunk_ms) >= timeout_ms)
            .map(|(key, _)| *key)
            .collect();
        for key in &keys {
            self.drop_message(key);
        }
        keys.len()
    }

    fn drop_message(&mut self, key: &PartialKey) {
        let Some(partial) = self.partials.get_mut(key) else { return };
        if partial.receives_in_flight > 0 {
            partial.doomed = true;
        } else {
            self.remove(key);
        }
    }

    /// Drops every message, at close. The worker is shared with the other nodes of the process and
    /// keeps running, so a message with rendezvous receives in flight keeps its buffer until they
    /// are done (the node stays registered with the runtime until then).
    pub fn clear(&mut self) {
        let keys: Vec<PartialKey> = self.partials.keys().copied().collect();
        for key in &keys {
            self.drop_message(key);
        }
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
    const LIMITS: Limits = Limits { requests_per_connection: 4, requests: 6, bytes_per_connection: 3 * CHUNK, timeout_ms: 1000 };

    fn chunk(request_id: u64, index: u32, count: u32, total_len: u64) -> Header {
        Header { kind: Kind::Response, op: 9, status: wire::STATUS_OK, chunk_index: index, chunk_count: count, request_id, total_len, offset: index as u64 * CHUNK as u64 }
    }

    /// `reassembly.accept` for a chunk of the length its header implies (cut at `CHUNK`).
    fn accept<'a>(reassembly: &'a mut Reassembly, key: PartialKey, header: &Header, now_ms: u64, receive: bool, alloc: impl FnOnce(usize) -> Option<Buffer>) -> Result<ChunkTarget<'a>, String> {
        let len = CHUNK.min(header.total_len.saturating_sub(header.offset) as usize);
        reassembly.accept(key, header, len, now_ms, receive, alloc)
    }

    fn pool() -> Pool {
        Pool::new(Arc::new(Context::new(&Config::default()).unwrap()), 1 << 20, 1 << 16)
    }

    /// Delivers chunk `index` of a 3-chunk message whose byte i is `i % 251`.
    fn deliver(reassembly: &mut Reassembly, pool: &Pool, index: u32) -> Option<(Header, Result<Buffer, Error>)> {
        let total_len = (2 * CHUNK + 100) as u64;
        let header = chunk(5, index, 3, total_len);
        let len = CHUNK.min(total_len as usize - header.offset as usize);
        match accept(reassembly, (1, 5, 2), &header, 0, false, |n| pool.alloc(n, None).ok()).unwrap() {
            ChunkTarget::Into(buffer, offset) => {
                for (i, byte) in buffer.as_mut_slice()[offset..offset + len].iter_mut().enumerate() {
                    *byte = ((offset + i) % 251) as u8;
                }
            }
            ChunkTarget::Drop => panic!("the pool had room"),
        }
        reassembly.chunk_done((1, 5, 2), len, true, false, 1 << 20)
    }

    #[test]
    fn chunks_in_any_order_make_the_whole_message_once() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
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
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        assert!(deliver(&mut reassembly, &pool, 0).is_none());
        let again = accept(&mut reassembly, (1, 5, 2), &chunk(5, 0, 3, (2 * CHUNK + 100) as u64), 0, false, |_| panic!("no second buffer"));
        assert!(again.is_err());
    }

    #[test]
    fn chunks_that_contradict_the_first_are_refused() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let total_len = (2 * CHUNK + 100) as u64;
        assert!(accept(&mut reassembly, (1, 5, 2), &chunk(5, 0, 3, total_len), 0, false, |n| pool.alloc(n, None).ok()).is_ok());
        assert!(accept(&mut reassembly, (1, 5, 2), &chunk(5, 1, 4, total_len), 0, false, |_| None).is_err(), "another chunk count");
        assert!(accept(&mut reassembly, (1, 5, 2), &chunk(5, 1, 3, total_len + 1), 0, false, |_| None).is_err(), "another length");
        let mut other_op = chunk(5, 1, 3, total_len);
        other_op.op = 10;
        assert!(accept(&mut reassembly, (1, 5, 2), &other_op, 0, false, |_| None).is_err(), "another op");
        assert!(accept(&mut reassembly, (1, 5, 2), &chunk(5, 3, 3, total_len), 0, false, |_| None).is_err(), "index beyond the count");
        assert!(accept(&mut reassembly, (1, 5, 2), &chunk(5, 1, 3, total_len), 0, false, |_| None).is_ok(), "the real second chunk still fits");
    }

    #[test]
    fn without_a_buffer_the_chunks_are_dropped_and_the_message_fails() {
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let total_len = (CHUNK + 1) as u64;
        for index in 0..2 {
            let target = accept(&mut reassembly, (1, 6, 1), &chunk(6, index, 2, total_len), 0, false, |_| None).unwrap();
            assert!(matches!(target, ChunkTarget::Drop));
        }
        assert!(reassembly.chunk_done((1, 6, 1), CHUNK, true, false, 77).is_none());
        let (header, payload) = reassembly.chunk_done((1, 6, 1), 1, true, false, 77).unwrap();
        assert_eq!(header.kind, Kind::Request);
        assert!(matches!(payload, Err(Error::PoolExhausted { requested, cap: 77 }) if requested == CHUNK + 1));
    }

    #[test]
    fn a_chunk_that_failed_to_land_fails_the_message() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let total_len = (CHUNK + 1) as u64;
        for index in 0..2 {
            assert!(accept(&mut reassembly, (1, 7, 2), &chunk(7, index, 2, total_len), 0, false, |n| pool.alloc(n, None).ok()).is_ok());
        }
        assert!(reassembly.chunk_done((1, 7, 2), CHUNK, false, false, 1).is_none());
        let (_, payload) = reassembly.chunk_done((1, 7, 2), 1, true, false, 1).unwrap();
        assert!(payload.is_err());
        assert_eq!(pool.in_use_bytes(), 0, "the buffer went back to the pool");
    }

    #[test]
    fn a_failed_connection_takes_only_its_own_messages() {
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        for (conn, id) in [(1, 1), (1, 2), (2, 1)] {
            accept(&mut reassembly, (conn, id, 2), &chunk(id, 0, 2, (CHUNK + 1) as u64), 0, false, |_| None).unwrap();
        }
        reassembly.drop_conn(1);
        assert_eq!(reassembly.len(), 1);
        assert!(reassembly.chunk_done((1, 1, 2), CHUNK, true, false, 1).is_none(), "a dropped message completes no more");
        reassembly.clear();
        assert_eq!(reassembly.len(), 0);
    }

    /// Found by fuzz_reassembly: chunks that each lie inside the message (all `Header::decode`
    /// checks) but overlap could add up to its length, and the message completed with a hole of
    /// whatever the pool buffer held before (another message's bytes). Each chunk must be where the
    /// sender's cut puts it, the same cut for every chunk of the message.
    #[test]
    fn overlapping_chunks_are_refused_rather_than_completed_with_a_hole() {
        let pool = pool();
        let alloc = |n| pool.alloc(n, None).ok();
        // Two chunks of 4 KiB, both at offset 0, of an 8 KiB message: the second half never written.
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let first = chunk(8, 0, 2, 2 * CHUNK as u64);
        let again_at_0 = Header { chunk_index: 1, ..first };
        assert!(Header::decode(&again_at_0.encode(), CHUNK, 1 << 20).is_ok(), "inside the message: decode lets it through");
        assert!(matches!(reassembly.accept((1, 8, 2), &first, CHUNK, 0, false, alloc).unwrap(), ChunkTarget::Into(..)));
        assert!(reassembly.chunk_done((1, 8, 2), CHUNK, true, false, 1).is_none());
        assert!(reassembly.accept((1, 8, 2), &again_at_0, CHUNK, 0, false, |_| None).is_err(), "chunk 1 at chunk 0's place");
        // Three chunks each of a cut of its own (4096, 5120 and 4608 bytes) that add up to the
        // 12 KiB: a hole at [4096, 5120), an overlap at [9216, 10240).
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let total_len = 3 * CHUNK as u64;
        let pieces = [(0, 0, 4096), (1, 5120, 5120), (2, 9216, 3072)];
        let [_, second, third] = pieces.map(|(index, offset, len)| {
            let header = Header { offset, ..chunk(9, index, 3, total_len) };
            assert!(Header::decode(&header.encode(), len, 1 << 20).is_ok());
            (header, len)
        });
        assert!(reassembly.accept((1, 9, 2), &chunk(9, 0, 3, total_len), CHUNK, 0, false, alloc).is_ok());
        assert!(reassembly.chunk_done((1, 9, 2), CHUNK, true, false, 1).is_none());
        for (header, len) in [second, third] {
            assert!(wire::chunk_cut(&header, len).is_some(), "alone, each chunk fits a cut");
            assert!(reassembly.accept((1, 9, 2), &header, len, 0, false, |_| None).is_err(), "{header:?}: another cut than the first chunk's");
        }
    }

    /// Found by fuzz_reassembly: a rendezvous receive that failed dropped the message's buffer
    /// (back to the pool, to be handed out again) while another receive was still writing into it.
    #[test]
    fn a_failed_receive_keeps_the_buffer_another_receive_writes_into() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        for index in 0..2 {
            let target = accept(&mut reassembly, (1, 1, 1), &request_chunk(1, index), 0, true, |n| pool.alloc(n, None).ok()).unwrap();
            assert!(matches!(target, ChunkTarget::Into(..)));
        }
        assert!(reassembly.chunk_done((1, 1, 1), CHUNK, false, true, 1).is_none(), "the first receive failed");
        assert!(pool.in_use_bytes() > 0, "UCX may still be writing the second chunk into the buffer");
        let (_, payload) = reassembly.chunk_done((1, 1, 1), 1, true, true, 1).expect("both chunks done");
        assert!(matches!(payload, Err(Error::PoolExhausted { .. })), "the message failed");
        assert_eq!(pool.in_use_bytes(), 0, "the buffer went back with its message");
    }

    /// The same fault as above (found by fuzz_reassembly): a failed chunk dropped its message's
    /// buffer but left its bytes on the connection's count, so the connection got fewer buffers
    /// until it had no request left in reassembly.
    #[test]
    fn a_failed_chunk_gives_its_bytes_back_to_the_connection() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let alloc = |n| pool.alloc(n, None).ok();
        // A request without a buffer keeps the connection's count alive throughout.
        assert!(matches!(accept(&mut reassembly, (1, 0, 1), &request_chunk(0, 0), 0, false, |_| None).unwrap(), ChunkTarget::Drop));
        reassembly.chunk_done((1, 0, 1), CHUNK, true, false, 1);
        // A request whose first chunk fails to land, then completes (failed).
        assert!(matches!(accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 0), 0, false, alloc).unwrap(), ChunkTarget::Into(..)));
        assert!(reassembly.chunk_done((1, 1, 1), CHUNK, false, false, 1).is_none());
        assert!(matches!(accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 1), 0, false, |_| None).unwrap(), ChunkTarget::Drop), "a failed message drops its next chunks");
        assert!(reassembly.chunk_done((1, 1, 1), 1, true, false, 1).unwrap().1.is_err());
        // Its bytes are free again: two requests of CHUNK + 1 bytes fit the limit of 3 * CHUNK.
        for id in 2..4 {
            assert!(matches!(accept(&mut reassembly, (1, id, 1), &request_chunk(id, 0), 0, false, alloc).unwrap(), ChunkTarget::Into(..)), "request {id}");
        }
        reassembly.clear();
        assert_eq!(pool.in_use_bytes(), 0);
    }

    fn request_chunk(request_id: u64, index: u32) -> Header {
        Header { kind: Kind::Request, status: wire::STATUS_OK, ..chunk(request_id, index, 2, (CHUNK + 1) as u64) }
    }

    #[test]
    fn requests_in_reassembly_are_bounded_per_connection_and_per_node() {
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        for id in 0..4 {
            assert!(accept(&mut reassembly, (1, id, 1), &request_chunk(id, 0), 0, false, |_| None).is_ok());
        }
        let refused = accept(&mut reassembly, (1, 4, 1), &request_chunk(4, 0), 0, false, |_| panic!("no buffer for a refused request"));
        assert!(refused.is_err_and(|e| e.contains("one connection")), "the fifth of one connection");
        // Responses are bounded by the pending table, not here.
        assert!(accept(&mut reassembly, (1, 4, 2), &chunk(4, 0, 2, (CHUNK + 1) as u64), 0, false, |_| None).is_ok());
        assert!(accept(&mut reassembly, (2, 0, 1), &request_chunk(0, 0), 0, false, |_| None).is_ok());
        assert!(accept(&mut reassembly, (2, 1, 1), &request_chunk(1, 0), 0, false, |_| None).is_ok());
        let refused = accept(&mut reassembly, (3, 0, 1), &request_chunk(0, 0), 0, false, |_| None);
        assert!(refused.is_err_and(|e| e.contains("this node")), "the seventh of the node");
        // A finished request makes room again.
        accept(&mut reassembly, (1, 0, 1), &request_chunk(0, 1), 0, false, |_| None).unwrap();
        reassembly.chunk_done((1, 0, 1), CHUNK, true, false, 1);
        assert!(reassembly.chunk_done((1, 0, 1), 1, true, false, 1).is_some());
        assert!(accept(&mut reassembly, (3, 0, 1), &request_chunk(0, 0), 0, false, |_| None).is_ok());
    }

    #[test]
    fn single_chunk_requests_by_rendezvous_count_bytes_not_messages() {
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let single = |id| Header { kind: Kind::Request, status: wire::STATUS_OK, ..chunk(id, 0, 1, 100) };
        for id in 0..10 {
            assert!(accept(&mut reassembly, (1, id, 1), &single(id), 0, true, |_| None).is_ok(), "not limited by count: {id}");
        }
        assert!(accept(&mut reassembly, (1, 10, 1), &request_chunk(10, 0), 0, false, |_| None).is_ok(), "multi-chunk ones still fit");
        for id in 0..10 {
            assert!(reassembly.chunk_done((1, id, 1), 100, true, false, 1).is_some());
        }
    }

    #[test]
    fn beyond_its_byte_limit_a_connection_gets_no_buffer() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let alloc = |n| pool.alloc(n, None).ok();
        // Two requests of CHUNK + 1 bytes fit the limit of 3 * CHUNK; the third does not.
        for id in 0..2 {
            assert!(matches!(accept(&mut reassembly, (1, id, 1), &request_chunk(id, 0), 0, false, alloc).unwrap(), ChunkTarget::Into(..)));
        }
        assert!(matches!(accept(&mut reassembly, (1, 2, 1), &request_chunk(2, 0), 0, false, alloc).unwrap(), ChunkTarget::Drop));
        // Another connection still gets buffers, and one message is always admitted.
        let big = Header { total_len: (4 * CHUNK) as u64, chunk_count: 4, ..request_chunk(0, 0) };
        assert!(matches!(accept(&mut reassembly, (2, 0, 1), &big, 0, false, alloc).unwrap(), ChunkTarget::Into(..)));
        reassembly.drop_conn(1);
        reassembly.drop_conn(2);
        assert_eq!(pool.in_use_bytes(), 0, "dropped messages gave their buffers back");
    }

    #[test]
    fn silent_messages_expire_and_free_their_buffers() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 0), 100, false, |n| pool.alloc(n, None).ok()).unwrap();
        accept(&mut reassembly, (1, 2, 1), &request_chunk(2, 0), 600, false, |n| pool.alloc(n, None).ok()).unwrap();
        assert_eq!(reassembly.expire(1099), 0, "not yet");
        assert_eq!(reassembly.expire(1100), 1, "the first, 1000 ms after its last chunk");
        assert_eq!(reassembly.len(), 1);
        assert_eq!(reassembly.expire(1600), 1);
        assert_eq!(pool.in_use_bytes(), 0);
        assert!(accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 1), 1700, false, |_| None).is_ok(), "a late chunk starts afresh (and will expire too)");
    }

    #[test]
    fn a_buffer_with_a_receive_in_flight_outlives_its_dropped_message() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        let target = accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 0), 0, true, |n| pool.alloc(n, None).ok()).unwrap();
        assert!(matches!(target, ChunkTarget::Into(..)));
        reassembly.drop_conn(1);
        assert_eq!(reassembly.expire(u64::MAX), 0);
        assert!(pool.in_use_bytes() > 0, "UCX may still be writing into the buffer");
        assert!(matches!(accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 1), 0, false, |_| None).unwrap(), ChunkTarget::Drop));
        assert!(reassembly.chunk_done((1, 1, 1), CHUNK, true, true, 1).is_none(), "a doomed message completes no more");
        assert_eq!(reassembly.len(), 0);
        assert_eq!(pool.in_use_bytes(), 0, "freed once the receive is done");
    }

    /// At close the shared worker keeps running, so a receive into a message's buffer may still be
    /// in flight: clearing keeps that buffer until the receive is done.
    #[test]
    fn clearing_at_close_keeps_a_buffer_with_a_receive_in_flight() {
        let pool = pool();
        let mut reassembly = Reassembly::<Buffer>::new(LIMITS);
        accept(&mut reassembly, (1, 1, 1), &request_chunk(1, 0), 0, true, |n| pool.alloc(n, None).ok()).unwrap();
        accept(&mut reassembly, (2, 1, 1), &request_chunk(1, 0), 0, false, |n| pool.alloc(n, None).ok()).unwrap();
        reassembly.clear();
        assert_eq!(reassembly.len(), 1, "only the message with a receive in flight is left");
        let (in_use, one) = (pool.in_use_bytes(), (CHUNK + 1).next_power_of_two());
        assert!(in_use > 0 && in_use <= one, "the other message's buffer went back ({in_use} bytes in use)");
        assert!(reassembly.chunk_done((1, 1, 1), CHUNK, true, true, 1).is_none());
        assert_eq!(reassembly.len(), 0);
        assert_eq!(pool.in_use_bytes(), 0, "freed once the receive is done");
    }
}
