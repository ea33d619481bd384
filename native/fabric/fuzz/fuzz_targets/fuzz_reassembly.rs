//! `Reassembly` (node/reassembly.rs), which puts messages of several chunks back together from
//! chunk headers that came from the network. The input is the limits, the shapes of eight messages
//! (connection, id, kind, length, the sender's chunk size, op: some share a key, some are beyond
//! the length limit), then events of a few bytes each: a chunk of one of the messages, as the
//! sender cuts it or bent (offset, length, total, count, index, op, status), copied or received by
//! rendezvous (landing now, failing now, or left in flight), a buffer that cannot be had; a receive
//! in flight landing or failing; the clock moving on, with or without an expiry round; a
//! connection failing; the node clearing. Each header goes through `Header::decode` as on the
//! receive path, and a header it refuses or a chunk the reassembly refuses fails that connection
//! as there (the connection's next messages come on a new connection id).
//!
//! A model of the messages predicts every outcome: which chunks are refused (a contradiction of
//! the first chunk, a repeat, a chunk off the sender's cut, a request beyond a count limit),
//! which get a buffer, which messages complete, expire or wait for their receives. Asserted
//! besides: a buffer is asked for once per message, of the message's length, never above
//! `max_message_bytes`; a chunk's place lies inside its buffer; a message completes with its
//! buffer only if its chunks tile it (every byte written exactly once); a buffer a receive is
//! still writing into is never dropped; no buffer outlives its message (no leak); the request
//! buffers of a connection stay within its byte limit (one message is always admitted); and at the
//! end, with every receive done and the node cleared, nothing is left.
#![no_main]

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use fabric::fuzzing::{ChunkTarget, Limits, MessageBuffer, PartialKey, Reassembly};
use fabric::wire::{self, Header, Kind, STATUS_OK, STATUS_REMOTE};
use fabric::Error;
use libfuzzer_sys::fuzz_target;

/// What `chunk_done` is told the pool's cap is (it only reports it).
const POOL_CAP_BYTES: usize = 77 << 20;
const EVENTS_MAX: usize = 2048;
const CONNECTIONS: usize = 4;
/// The receiver's `max_message_bytes`: one chunk, an odd length, eight and sixteen chunks.
const MESSAGE_BYTES_MAX: [usize; 4] = [4096, 3 * 4096 + 100, 8 * 4096, 16 * 4096];
const CONNECTION_BYTES_MAX: [usize; 5] = [0, 4096, 3 * 4096, 20 * 4096, usize::MAX];

/// Buffers alive (handed out by `alloc`, not yet dropped): id -> (message, length).
type Live = Rc<RefCell<HashMap<u64, (PartialKey, usize)>>>;

/// A message's buffer: plain memory that leaves `Live` when dropped.
struct FuzzBuffer {
    id: u64,
    bytes: Vec<u8>,
    live: Live,
}

impl MessageBuffer for FuzzBuffer {
    fn len(&self) -> usize {
        self.bytes.len()
    }
}

impl Drop for FuzzBuffer {
    fn drop(&mut self) {
        self.live.borrow_mut().remove(&self.id);
    }
}

/// The input, read a byte at a time; 0 once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let Some((&first, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        first
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
}

/// A message as its sender would cut it.
#[derive(Clone, Copy)]
struct Shape {
    connection: usize,
    request_id: u64,
    kind: Kind,
    total_len: u64,
    chunk_bytes: u64,
    op: u16,
}

/// The model's view of a message in reassembly.
struct Message {
    total_len: u64,
    chunk_count: u32,
    op: u16,
    status: u16,
    /// The chunk size of the sender's cut, from its first chunk.
    cut: u64,
    seen: Vec<bool>,
    chunks_done: u32,
    bytes_done: u64,
    receives_in_flight: u32,
    buffer: Option<u64>,
    /// A chunk failed to land.
    failed: bool,
    doomed: bool,
    last_chunk_ms: u64,
    /// Where chunks were written into the buffer: (offset, length).
    written: Vec<(u64, u64)>,
}

/// A rendezvous receive in flight: where it writes.
struct InFlight {
    key: PartialKey,
    len: usize,
    buffer: u64,
}

fn is_request(key: &PartialKey) -> bool {
    key.2 == Kind::Request as u8
}

/// The chunk size of the sender's cut (`wire::chunking`, chunks back to back) that makes `len`
/// bytes at `header.offset` chunk `header.chunk_index`, if there is one.
fn sender_cut(header: &Header, len: usize) -> Option<u64> {
    let (index, count, total_len) = (u64::from(header.chunk_index), u64::from(header.chunk_count), header.total_len);
    if count == 1 {
        return (header.offset == 0 && len as u64 == total_len).then_some(total_len);
    }
    // Every chunk but the last is one chunk size long; the last starts count - 1 sizes in.
    let size = if index + 1 < count { len as u64 } else { header.offset / (count - 1) };
    if size == 0 {
        return None;
    }
    let (cut_count, cut_size) = wire::chunking(total_len as usize, size as usize);
    let offset = index.checked_mul(cut_size as u64)?;
    let cut_len = (cut_size as u64).min(total_len.checked_sub(offset)?);
    (u64::from(cut_count) == count && offset == header.offset && cut_len == len as u64).then_some(cut_size as u64)
}

struct Model {
    limits: Limits,
    messages: HashMap<PartialKey, Message>,
}

/// What the model expects of `accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Refused,
    Drop,
    Into,
}

impl Model {
    fn requests_counted(&self, connection: Option<u64>) -> usize {
        self.messages
            .iter()
            .filter(|(key, m)| is_request(key) && m.chunk_count > 1 && connection.is_none_or(|c| key.0 == c))
            .count()
    }

    fn request_entries(&self, connection: u64) -> usize {
        self.messages.keys().filter(|key| is_request(key) && key.0 == connection).count()
    }

    /// Bytes of the request buffers of `connection` that are alive.
    fn request_bytes(live: &Live, connection: u64) -> usize {
        live.borrow().values().filter(|(key, _)| is_request(key) && key.0 == connection).map(|&(_, len)| len).sum()
    }

    /// The outcome of `accept` for a chunk of `len` bytes, and whether a buffer should be asked for.
    fn predict(&self, live: &Live, key: PartialKey, header: &Header, len: usize, alloc_fails: bool) -> (Expect, bool) {
        let Some(cut) = sender_cut(header, len) else {
            return (Expect::Refused, false);
        };
        if let Some(m) = self.messages.get(&key) {
            if m.doomed {
                return (Expect::Drop, false);
            }
            let contradicts = m.chunk_count != header.chunk_count || m.op != header.op || m.total_len != header.total_len || m.cut != cut;
            if contradicts || m.seen[header.chunk_index as usize] {
                return (Expect::Refused, false);
            }
            let into = m.buffer.is_some_and(|id| live.borrow().contains_key(&id)) && !m.failed;
            return (if into { Expect::Into } else { Expect::Drop }, false);
        }
        let limits = &self.limits;
        if is_request(&key) && header.chunk_count > 1 {
            if self.requests_counted(Some(key.0)) >= limits.requests_per_connection || self.requests_counted(None) >= limits.requests {
                return (Expect::Refused, false);
            }
        }
        // Beyond the connection's byte limit no buffer, unless it is the connection's only request.
        let over_bytes = is_request(&key)
            && self.request_entries(key.0) > 0
            && Self::request_bytes(live, key.0) + header.total_len as usize > limits.bytes_per_connection;
        let into = !over_bytes && !alloc_fails;
        (if into { Expect::Into } else { Expect::Drop }, !over_bytes)
    }

    /// A message is forgotten, or doomed while receives into its buffer are in flight.
    fn drop_message(&mut self, key: &PartialKey) {
        let m = self.messages.get_mut(key).expect("a message in the model");
        if m.receives_in_flight > 0 {
            m.doomed = true;
        } else {
            self.messages.remove(key);
        }
    }

    fn drop_conn(&mut self, connection: u64) {
        let keys: Vec<PartialKey> = self.messages.keys().filter(|key| key.0 == connection).copied().collect();
        for key in &keys {
            self.drop_message(key);
        }
    }
}

struct Harness {
    reassembly: Reassembly<FuzzBuffer>,
    model: Model,
    live: Live,
    in_flight: Vec<InFlight>,
    max_message_bytes: usize,
    now_ms: u64,
    buffer_ids: u64,
    /// The connection id each connection slot uses now: a failed connection's next messages come
    /// on a new one, as after a reconnect.
    connection_ids: [u64; CONNECTIONS],
}

impl Harness {
    fn fail_connection(&mut self, slot: usize) {
        let connection = self.connection_ids[slot];
        self.reassembly.drop_conn(connection);
        self.model.drop_conn(connection);
        self.connection_ids[slot] += CONNECTIONS as u64;
    }

    /// One chunk, as `NodeInner::on_active_message` hands it to the reassembly.
    fn chunk(&mut self, shape: Shape, index_byte: u8, bend: u8, mode: u8) {
        let (count, size) = wire::chunking(shape.total_len as usize, shape.chunk_bytes as usize);
        let key: PartialKey = (self.connection_ids[shape.connection], shape.request_id, shape.kind as u8);
        // Mostly a chunk of the message not seen yet (in any order), so that messages of many
        // chunks complete; else any chunk (a repeat, maybe).
        let unseen = |m: &Message| (0..count).filter(|&i| !m.seen[i as usize]).collect::<Vec<u32>>();
        let index = match self.model.messages.get(&key).filter(|m| index_byte < 192 && !m.doomed && m.chunk_count == count).map(unseen) {
            Some(unseen) if !unseen.is_empty() => unseen[usize::from(index_byte) % unseen.len()],
            _ => u32::from(index_byte) % count,
        };
        let offset = u64::from(index) * size as u64;
        let mut len = (size as u64).min(shape.total_len - offset);
        let status = if shape.kind == Kind::ErrorResponse { STATUS_REMOTE } else { STATUS_OK };
        let mut header = Header { kind: shape.kind, op: shape.op, status, chunk_index: index, chunk_count: count, request_id: shape.request_id, total_len: shape.total_len, offset };
        if bend >= 224 {
            let size = size as u64;
            match bend % 16 {
                0 => header.offset += 1,
                1 => header.offset = header.offset.saturating_sub(1),
                2 => header.offset = 0,
                3 => len = len.saturating_sub(1),
                4 => len = size,
                5 => header.total_len += 1,
                6 => header.total_len = header.total_len.saturating_sub(1),
                7 => header.chunk_count += 1,
                8 => header.chunk_count = header.chunk_count.saturating_sub(1),
                9 => header.op ^= 1,
                10 => header.status = STATUS_REMOTE,
                11 => header.chunk_index = u32::from(index_byte) % (count + 1),
                12 => header.offset += size,
                13 => header.offset += size / 2,
                14 => len /= 2,
                _ => (header.offset, len) = (u64::from(index) * (size / 2), size / 2),
            }
        }
        let len = len as usize;
        let rendezvous = mode & 1 == 1;
        let alloc_fails = mode & 0x70 == 0x70;
        let slot = shape.connection;
        let Ok(decoded) = Header::decode(&header.encode(), len, self.max_message_bytes) else {
            // A protocol error: the connection is failed.
            return self.fail_connection(slot);
        };
        assert_eq!(decoded, header);
        if header.chunk_count == 1 && !rendezvous {
            return; // a whole message: one copy into a buffer, no reassembly
        }
        let (expect, alloc_expected) = self.model.predict(&self.live, key, &header, len, alloc_fails);
        let mut requested = None;
        let (live, id) = (self.live.clone(), self.buffer_ids);
        let alloc = |n: usize| {
            requested = Some(n);
            if alloc_fails {
                return None;
            }
            live.borrow_mut().insert(id, (key, n));
            Some(FuzzBuffer { id, bytes: vec![0; n], live })
        };
        let outcome = match self.reassembly.accept(key, &header, len, self.now_ms, rendezvous, alloc) {
            Err(_) => Expect::Refused,
            Ok(ChunkTarget::Drop) => Expect::Drop,
            Ok(ChunkTarget::Into(buffer, at)) => {
                // Where the receive path copies the chunk, or UCX receives it.
                assert_eq!(at as u64, header.offset);
                assert!(at + len <= buffer.bytes.len() && buffer.bytes.len() as u64 == header.total_len, "{header:?} with {len} bytes into {}", buffer.bytes.len());
                buffer.bytes[at..at + len].fill(header.chunk_index as u8);
                Expect::Into
            }
        };
        if requested.is_some() {
            self.buffer_ids += 1;
        }
        assert!(requested.is_none_or(|n| n as u64 == header.total_len && n <= self.max_message_bytes), "asked for {requested:?} bytes by {header:?}");
        assert_eq!(outcome, expect, "{header:?} with {len} bytes");
        if outcome == Expect::Refused {
            // The reassembly changed nothing and asked for no buffer; the receive path fails the
            // connection.
            assert!(requested.is_none(), "a buffer for a refused chunk {header:?}");
            return self.fail_connection(slot);
        }
        if !self.model.messages.contains_key(&key) {
            // The message's first chunk.
            assert_eq!(requested.is_some(), alloc_expected, "{header:?}");
            let buffer = (outcome == Expect::Into).then_some(id);
            let m = Message {
                total_len: header.total_len,
                chunk_count: header.chunk_count,
                op: header.op,
                status: header.status,
                cut: sender_cut(&header, len).expect("refused off the sender's cut"),
                seen: vec![false; header.chunk_count as usize],
                chunks_done: 0,
                bytes_done: 0,
                receives_in_flight: 0,
                buffer,
                failed: false,
                doomed: false,
                last_chunk_ms: self.now_ms,
                written: Vec::new(),
            };
            self.model.messages.insert(key, m);
        }
        let m = self.model.messages.get_mut(&key).expect("inserted above");
        assert!(requested.is_none() || m.chunks_done == 0 && !m.seen.contains(&true), "a second buffer for {header:?}");
        if m.doomed {
            return self.chunk_done(key, len, true, false);
        }
        m.seen[header.chunk_index as usize] = true;
        m.last_chunk_ms = self.now_ms;
        if outcome == Expect::Drop {
            return self.chunk_done(key, len, true, false);
        }
        m.written.push((header.offset, len as u64));
        if !rendezvous {
            return self.chunk_done(key, len, true, false);
        }
        m.receives_in_flight += 1;
        match (mode >> 1) & 7 {
            // `ucp_am_recv_data_nbx` done at once, or failed at once.
            4..=6 => self.chunk_done(key, len, true, true),
            7 => self.chunk_done(key, len, false, true),
            _ => self.in_flight.push(InFlight { key, len, buffer: m.buffer.expect("a chunk into a buffer") }),
        }
    }

    /// A chunk has landed (or failed to); the model's expectation is checked against the reassembly.
    fn chunk_done(&mut self, key: PartialKey, len: usize, landed: bool, receive: bool) {
        let done = self.reassembly.chunk_done(key, len, landed, receive, POOL_CAP_BYTES);
        let Some(m) = self.model.messages.get_mut(&key) else {
            assert!(done.is_none(), "a message completed that the model does not know");
            return;
        };
        if receive {
            m.receives_in_flight -= 1;
        }
        if m.doomed {
            if m.receives_in_flight == 0 {
                self.model.messages.remove(&key);
            }
            assert!(done.is_none(), "a doomed message completed");
            return;
        }
        m.failed |= !landed;
        m.chunks_done += 1;
        m.bytes_done += len as u64;
        if m.chunks_done < m.chunk_count {
            assert!(done.is_none(), "complete after {} chunks of {}", m.chunks_done, m.chunk_count);
            return;
        }
        let m = self.model.messages.remove(&key).unwrap();
        let (header, payload) = done.expect("complete after its last chunk");
        assert_eq!(header.kind as u8, key.2);
        assert_eq!((header.op, header.status, header.chunk_index, header.chunk_count), (m.op, m.status, 0, m.chunk_count));
        assert_eq!((header.request_id, header.total_len, header.offset), (key.1, m.bytes_done, 0));
        match payload {
            Ok(buffer) => {
                assert!(!m.failed, "a message with a failed chunk completed");
                assert_eq!(Some(buffer.id), m.buffer);
                assert_eq!((buffer.bytes.len() as u64, m.bytes_done), (m.total_len, m.total_len));
                // Every byte written exactly once: the chunks tile the message.
                let mut written = m.written;
                written.sort_unstable();
                let mut end = 0;
                for (offset, len) in written {
                    assert_eq!(offset, end, "chunks of a {}-byte message overlap or leave a hole", m.total_len);
                    end = offset + len;
                }
                assert_eq!(end, m.total_len);
            }
            Err(Error::PoolExhausted { requested, cap }) => {
                assert!(m.buffer.is_none() || m.failed, "no buffer, yet the model had one");
                assert_eq!((requested as u64, cap), (m.bytes_done, POOL_CAP_BYTES));
            }
            Err(Error::Protocol(_)) => assert!(m.buffer.is_some() && !m.failed && m.bytes_done != m.total_len),
            Err(e) => panic!("{e}"),
        }
    }

    fn expire(&mut self) {
        let (now_ms, timeout_ms) = (self.now_ms, self.model.limits.timeout_ms);
        let keys: Vec<PartialKey> = self
            .model
            .messages
            .iter()
            .filter(|(_, m)| !m.doomed && now_ms.saturating_sub(m.last_chunk_ms) >= timeout_ms)
            .map(|(key, _)| *key)
            .collect();
        for key in &keys {
            self.model.drop_message(key);
        }
        assert_eq!(self.reassembly.expire(now_ms), keys.len());
    }

    fn clear(&mut self) {
        self.reassembly.clear();
        let keys: Vec<PartialKey> = self.model.messages.keys().copied().collect();
        for key in &keys {
            self.model.drop_message(key);
        }
    }

    fn receive_done(&mut self, which: usize, landed: bool) {
        let receive = self.in_flight.swap_remove(which);
        assert!(self.live.borrow().contains_key(&receive.buffer), "a buffer went back while a receive was writing into it");
        self.chunk_done(receive.key, receive.len, landed, true);
    }

    fn check(&self) {
        let live = self.live.borrow();
        for receive in &self.in_flight {
            assert!(live.contains_key(&receive.buffer), "a buffer went back while a receive was writing into it");
        }
        for (id, (key, _)) in live.iter() {
            assert!(self.model.messages.get(key).is_some_and(|m| m.buffer == Some(*id)), "buffer {id} of {key:?} outlived its message");
        }
        let limits = &self.model.limits;
        for &connection in &self.connection_ids {
            let buffers: Vec<usize> = live.values().filter(|(key, _)| is_request(key) && key.0 == connection).map(|&(_, len)| len).collect();
            let bytes: usize = buffers.iter().sum();
            assert!(bytes <= limits.bytes_per_connection || buffers.len() == 1, "{bytes} bytes of requests in reassembly on one connection");
            assert!(self.model.requests_counted(Some(connection)) <= limits.requests_per_connection);
        }
        assert!(self.model.requests_counted(None) <= limits.requests);
        assert_eq!(self.reassembly.is_empty(), self.model.messages.is_empty());
    }
}

fuzz_target!(|bytes: &[u8]| {
    let mut input = Input(bytes);
    let settings = input.u8();
    let max_message_bytes = MESSAGE_BYTES_MAX[usize::from(settings % 4)];
    let limits = Limits {
        requests_per_connection: 1 + usize::from((settings >> 2) % 4),
        requests: 1 + usize::from((settings >> 4) % 6),
        bytes_per_connection: CONNECTION_BYTES_MAX[usize::from(input.u8() % 5)],
        timeout_ms: u64::from(input.u8()),
    };
    let clear_first = settings & 0x80 != 0;
    let shapes: Vec<Shape> = (0..8)
        .map(|_| {
            let who = input.u8();
            let total_len = u64::from(input.u16()) % (max_message_bytes as u64 + 4097);
            let size = input.u8();
            // Chunk sizes as senders cut them (multiples of 4 KiB, or odd ones), and one below
            // `MIN_CHUNK_BYTES`, which no sender uses.
            let chunk_bytes = match size {
                0..=191 => 4096 * (1 + u64::from(size % 4)),
                255 => 1000,
                _ => 4096 + u64::from(size - 192) * 97,
            };
            Shape {
                connection: usize::from(who) % CONNECTIONS,
                request_id: u64::from(who >> 2) % 4,
                kind: [Kind::Request, Kind::Response, Kind::ErrorResponse, Kind::Request][usize::from(who >> 4) % 4],
                total_len,
                chunk_bytes,
                op: u16::from(input.u8() % 2),
            }
        })
        .collect();
    let live: Live = Rc::default();
    let mut h = Harness {
        reassembly: Reassembly::new(limits),
        model: Model { limits, messages: HashMap::new() },
        live,
        in_flight: Vec::new(),
        max_message_bytes,
        now_ms: u64::from(input.u16()),
        buffer_ids: 0,
        connection_ids: std::array::from_fn(|slot| slot as u64),
    };
    for _ in 0..EVENTS_MAX {
        if input.0.is_empty() {
            break;
        }
        let event = input.u8();
        match event % 16 {
            0..=9 => {
                let shape = shapes[usize::from(event >> 4) % shapes.len()];
                let (index, bend, mode) = (input.u8(), input.u8(), input.u8());
                h.chunk(shape, index, bend, mode);
            }
            10 | 11 => {
                if !h.in_flight.is_empty() {
                    let which = usize::from(event >> 4) % h.in_flight.len();
                    h.receive_done(which, event >> 5 != 7);
                }
            }
            12 | 13 => {
                let step = input.u8();
                h.now_ms += if step < 200 { u64::from(step) } else { u64::from(step - 200) * 1000 };
                if event % 16 == 12 {
                    h.expire();
                }
            }
            14 => h.fail_connection(usize::from(event >> 4) % CONNECTIONS),
            _ if event >> 4 == 0 => h.clear(),
            _ => {}
        }
        h.check();
    }
    // The end: every receive lands (some fail), the node clears; or the other way round.
    if clear_first {
        h.clear();
        h.check();
    }
    while !h.in_flight.is_empty() {
        let landed = h.in_flight.len() % 3 != 0;
        h.receive_done(0, landed);
        h.check();
    }
    h.clear();
    h.check();
    assert!(h.reassembly.is_empty() && h.model.messages.is_empty());
    assert!(h.live.borrow().is_empty(), "buffers left after the node cleared: {:?}", h.live.borrow());
});
