//! For the unit tests of the wait/wake plumbing: a store whose "cold" keys answer `Pending`, as
//! the hybrid store does for values on its SSD, with the "read" completed when a test says so
//! (`release`), or at once, inside the call, before the caller even sees `Pending` (`eager`).
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use cache_proto::session::{Processed, Reply, Session, SessionConfig};
use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreMode, StoreOutcome, StoreRequest,
};

pub struct SlowTierStore {
    inner: cache_store::Store,
    /// Cold keys and the wakers of the operations that found them cold.
    cold: Mutex<HashMap<Vec<u8>, Vec<Waker>>>,
    /// Complete every read at once: wake inside the call, then answer `Pending`.
    eager: bool,
    /// `Pending` answers so far.
    pendings: AtomicUsize,
}

impl SlowTierStore {
    pub fn new(eager: bool) -> Arc<SlowTierStore> {
        let config = cache_store::StoreConfig { memory_limit_bytes: 16 << 20, ..Default::default() };
        let inner = cache_store::Store::new(config).unwrap();
        Arc::new(SlowTierStore { inner, cold: Mutex::new(HashMap::new()), eager, pendings: AtomicUsize::new(0) })
    }

    /// The next operations on `key` answer `Pending` until `release(key)` (or once, if eager).
    pub fn make_cold(&self, key: &[u8]) {
        self.cold.lock().unwrap().entry(key.to_vec()).or_default();
    }

    /// "The read completed": `key` is hot again; wakes every waiter, from the calling thread,
    /// with no lock held. Returns how many waited.
    pub fn release(&self, key: &[u8]) -> usize {
        let wakers = self.cold.lock().unwrap().remove(key).unwrap_or_default();
        for waker in &wakers {
            waker.wake_by_ref();
        }
        wakers.len()
    }

    pub fn pendings(&self) -> usize {
        self.pendings.load(Ordering::SeqCst)
    }

    /// Whether the operation on `key` must wait (it has registered `waker` then).
    fn cold(&self, key: &[u8], waker: &Waker) -> bool {
        let mut cold = self.cold.lock().unwrap();
        let Some(waiters) = cold.get_mut(key) else { return false };
        self.pendings.fetch_add(1, Ordering::SeqCst);
        if self.eager {
            cold.remove(key);
            drop(cold);
            waker.wake_by_ref();
        } else {
            waiters.push(waker.clone());
        }
        true
    }
}

impl Storage for SlowTierStore {
    fn max_item_bytes(&self) -> usize {
        self.inner.max_item_bytes()
    }

    fn may_wait(&self) -> bool {
        true
    }

    fn get(&self, key: &[u8], options: GetOptions, waker: &Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        if self.cold(key, waker) {
            return GetOutcome::Pending;
        }
        self.inner.get(key, options, waker, visit)
    }

    fn store(&self, request: &StoreRequest<'_>, waker: &Waker) -> StoreOutcome {
        let reads_present = matches!(request.mode, StoreMode::Append | StoreMode::Prepend);
        if reads_present && self.cold(request.key, waker) {
            return StoreOutcome::Pending;
        }
        self.inner.store(request, waker)
    }

    fn delete(&self, key: &[u8], options: DeleteOptions) -> DeleteOutcome {
        self.inner.delete(key, options)
    }

    fn arithmetic(&self, request: &ArithmeticRequest<'_>, waker: &Waker) -> ArithmeticOutcome {
        if self.cold(request.key, waker) {
            return ArithmeticOutcome::Pending;
        }
        self.inner.arithmetic(request, waker)
    }

    fn flush_all(&self, at_unix_s: u64) {
        self.inner.flush_all(at_unix_s)
    }

    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats()
    }
}

/// A binary protocol request packet (no CAS).
pub fn bin_packet(opcode: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    let mut p = vec![0x80, opcode];
    p.extend((key.len() as u16).to_be_bytes());
    p.extend([extras.len() as u8, 0, 0, 0]);
    p.extend(((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    p.extend(opaque.to_be_bytes());
    p.extend([0u8; 8]);
    p.extend(extras);
    p.extend(key);
    p.extend(value);
    p
}

/// A binary SET with flags 0 and no expiry.
pub fn bin_set(key: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    bin_packet(0x01, key, &[0u8; 8], value, opaque)
}

/// One reply packet: opcode, status, opaque, value.
#[derive(Debug, PartialEq, Eq)]
pub struct BinReply {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub value: Vec<u8>,
}

pub fn bin_replies(mut bytes: &[u8]) -> Vec<BinReply> {
    let mut replies = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= 24 && bytes[0] == 0x81, "not a reply packet: {bytes:?}");
        let key_len = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
        let extras_len = bytes[4] as usize;
        let body_len = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
        replies.push(BinReply {
            opcode: bytes[1],
            status: u16::from_be_bytes([bytes[6], bytes[7]]),
            opaque: u32::from_be_bytes(bytes[12..16].try_into().unwrap()),
            value: bytes[24 + extras_len + key_len..24 + body_len].to_vec(),
        });
        bytes = &bytes[24 + body_len..];
    }
    replies
}

/// The store answers as the tests expect: a session stops before a cold key's command and goes
/// on after `release`.
#[test]
fn cold_keys_wait_until_released() {
    let store = SlowTierStore::new(false);
    let mut session = Session::new(store.clone(), Arc::new(SessionConfig::new("test")));
    let mut out = Vec::new();
    let set = b"set k 0 0 1\r\nv\r\n";
    assert_eq!(session.process(set, &mut out).consumed, set.len());
    store.make_cold(b"k");
    let input = b"get k\r\n";
    let processed = session.process(input, &mut out as &mut dyn Reply);
    assert_eq!(processed, Processed { consumed: 0, waiting: true, ..Processed::default() });
    assert_eq!(store.release(b"k"), 1);
    out.clear();
    assert_eq!(session.process(input, &mut out).consumed, input.len());
    assert_eq!(out, b"VALUE k 0 1\r\nv\r\nEND\r\n");
}
