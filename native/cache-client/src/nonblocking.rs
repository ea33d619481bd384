//! Non-blocking requests (after OSU's RDMA-Memcached `memcached_iset`/`iget`/`bset`/`bget`):
//! the request slots a client keeps, and the [`Request`] handle callers complete with `wait` or
//! poll with `test`.
//!
//! A slot is taken when a request is issued and given back when its handle is completed or dropped.
//! Its state moves `Queued` (TCP: written, reply not read) or `Fabric` (fabric: in flight) to
//! `Done`/`FabricDone` (outcome known, not yet handed to the caller) to `Free`. A get's value
//! reaches the caller's buffer only when the caller completes the handle (`wait`, or `test`
//! returning ready): over TCP by swapping the slot's buffer with the caller's (no copy), over the
//! fabric by one copy out of the registered response buffer.
use std::marker::PhantomData;
use std::task::Poll;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::packet::{self, Reply};
use crate::tcp::Sink;

/// What a completed request or a hit returns besides the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// The item's flags (gets; 0 for stores).
    pub flags: u32,
    /// The item's CAS after the operation.
    pub cas: u64,
}

/// Slot buffers grown above this are dropped when the slot is freed.
const SLOT_VALUE_BYTES_KEPT: usize = 4 << 20;

pub(crate) enum SlotState {
    Free,
    /// Written on a TCP connection; in that connection's queue.
    Queued,
    /// In flight on the fabric.
    Fabric(fabric::Pending),
    /// Outcome known; a get's value is in `Slot::value`.
    Done(Result<Meta>),
    /// A fabric response not parsed yet (parsed when the caller completes the request, so the
    /// value is copied once, straight into the caller's buffer).
    FabricDone(Result<fabric::Response>),
}

pub(crate) struct Slot {
    pub generation: u32,
    /// Issue order, to find the oldest request at the in-flight bound.
    pub seq: u64,
    pub state: SlotState,
    pub is_get: bool,
    /// The handle was dropped while the request was queued: free the slot when the reply comes.
    pub abandoned: bool,
    pub server: usize,
    pub value: Vec<u8>,
}

impl Slot {
    pub fn in_flight(&self) -> bool {
        matches!(self.state, SlotState::Queued | SlotState::Fabric(_))
    }
}

#[derive(Default)]
pub(crate) struct Slots {
    pub slots: Vec<Slot>,
    free: Vec<u32>,
    /// Requests on the wire (Queued or Fabric, abandoned ones included).
    pub in_flight: usize,
    next_seq: u64,
}

impl Slots {
    pub fn alloc(&mut self, is_get: bool, server: usize) -> u32 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    seq: 0,
                    state: SlotState::Free,
                    is_get,
                    abandoned: false,
                    server,
                    value: Vec::new(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.next_seq += 1;
        let slot = &mut self.slots[index as usize];
        debug_assert!(matches!(slot.state, SlotState::Free));
        slot.generation = slot.generation.wrapping_add(1);
        slot.seq = self.next_seq;
        slot.is_get = is_get;
        slot.abandoned = false;
        slot.server = server;
        index
    }

    pub fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        debug_assert!(!slot.in_flight(), "releasing a slot in flight");
        slot.state = SlotState::Free;
        slot.value.clear();
        if slot.value.capacity() > SLOT_VALUE_BYTES_KEPT {
            slot.value = Vec::new();
        }
        self.free.push(index);
    }

    /// Records the outcome of a fabric request that just completed.
    pub fn fabric_done(&mut self, index: u32, result: Result<fabric::Response>) {
        let slot = &mut self.slots[index as usize];
        debug_assert!(matches!(slot.state, SlotState::Fabric(_) | SlotState::Free));
        self.in_flight -= 1;
        slot.state = SlotState::FabricDone(result);
    }

    /// The oldest request in flight.
    pub fn oldest_in_flight(&self) -> Option<u32> {
        self.slots.iter().enumerate().filter(|(_, s)| s.in_flight()).min_by_key(|(_, s)| s.seq).map(|(i, _)| i as u32)
    }

    /// Hands the outcome of a completed slot to the caller and frees the slot.
    pub fn finish(&mut self, index: u32, dest: Option<&mut Vec<u8>>, body_bytes_max: usize) -> Result<Meta> {
        let slot = &mut self.slots[index as usize];
        let state = std::mem::replace(&mut slot.state, SlotState::Free);
        let outcome = match state {
            SlotState::Done(outcome) => {
                if let (Ok(_), Some(dest), true) = (&outcome, dest, slot.is_get) {
                    std::mem::swap(dest, &mut slot.value);
                }
                outcome
            }
            SlotState::FabricDone(result) => result.and_then(|response| {
                let reply = packet::single_reply(&response, body_bytes_max)?;
                reply.check()?;
                if let (Some(dest), true) = (dest, slot.is_get) {
                    dest.clear();
                    dest.extend_from_slice(reply.value);
                }
                Ok(Meta { flags: if slot.is_get { reply.flags() } else { 0 }, cas: reply.cas })
            }),
            _ => unreachable!("finishing a request that is not complete"),
        };
        self.release(index);
        outcome
    }
}

impl Sink for Slots {
    fn deliver(&mut self, index: u32, reply: Result<Reply<'_>>) {
        let slot = &mut self.slots[index as usize];
        debug_assert!(matches!(slot.state, SlotState::Queued));
        self.in_flight -= 1;
        if slot.abandoned {
            slot.state = SlotState::Free;
            self.release(index);
            return;
        }
        let is_get = slot.is_get;
        let value = &mut slot.value;
        let outcome = reply.and_then(|r| {
            r.check()?;
            if is_get {
                value.clear();
                value.extend_from_slice(r.value);
            }
            Ok(Meta { flags: if is_get { r.flags() } else { 0 }, cas: r.cas })
        });
        slot.state = SlotState::Done(outcome);
    }
}

/// A non-blocking request in progress, from [`Client::iset`], [`Client::iget`],
/// [`Client::bset`] or [`Client::bget`]. Complete it with [`wait`](Request::wait) or poll it with
/// [`test`](Request::test); a get's value is in the caller's buffer once either reports completion.
///
/// The lifetime `'a` covers the client and every buffer the request may use until it completes:
/// the compiler rejects reusing an `iset` value, an `iget` key or any get's destination while
/// the request lives. Dropping an incomplete request abandons it: its reply is discarded on
/// arrival, and the destination buffer is left as it was.
#[must_use = "a request is completed with wait() or test(); dropping it abandons it"]
pub struct Request<'a> {
    pub(crate) client: &'a Client,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    pub(crate) dest: Option<&'a mut Vec<u8>>,
    pub(crate) outcome: Option<Result<Meta>>,
    pub(crate) _buffers: PhantomData<&'a [u8]>,
}

impl<'a> Request<'a> {
    /// `Poll::Pending` while the request is in progress (or the client is busy: called from a
    /// `get_multi_with` callback); its outcome once done (and on every later call). Never blocks: over TCP it reads whatever replies have arrived, over the
    /// fabric it checks the completion flag the fabric's progress thread sets.
    pub fn test(&mut self) -> Poll<Result<Meta>> {
        if let Some(outcome) = &self.outcome {
            return Poll::Ready(outcome.clone());
        }
        match self.client.test_slot(self.slot, self.generation, self.dest.as_deref_mut()) {
            Some(outcome) => {
                self.outcome = Some(outcome.clone());
                Poll::Ready(outcome)
            }
            None => Poll::Pending,
        }
    }

    /// Blocks until the request completes (bounded by the client's I/O timeout) and returns its
    /// outcome: a get's `Meta` with the value in the destination buffer, `Err(Error::NotFound)`
    /// on a miss; a set's `Meta` with the new CAS.
    pub fn wait(&mut self) -> Result<Meta> {
        if let Some(outcome) = &self.outcome {
            return outcome.clone();
        }
        let outcome = self.client.wait_slot(self.slot, self.generation, self.dest.as_deref_mut());
        if !matches!(outcome, Err(Error::Busy)) {
            self.outcome = Some(outcome.clone()); // Busy: the request is untouched, still in progress
        }
        outcome
    }

    /// Whether `test` or `wait` has seen the request complete.
    pub fn is_complete(&self) -> bool {
        self.outcome.is_some()
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if self.outcome.is_none() {
            self.client.abandon_slot(self.slot, self.generation);
        }
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request").field("slot", &self.slot).field("outcome", &self.outcome).finish()
    }
}
