//! The GET and SET paths of all three protocols allocate nothing in the session: a counting global
//! allocator watches `Session::process` over a store that itself never allocates, with an output
//! buffer reserved up front. (A test binary of its own: the allocator is process-wide.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use cache_proto::binary::{opcode, Header, HEADER_BYTES, MAGIC_REQUEST};
use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreOutcome, StoreRequest,
};
use cache_proto::{Session, SessionConfig};

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Every key holds the same 100-byte value; every write succeeds. Allocates nothing.
struct ConstantStore;

const VALUE: [u8; 100] = [b'v'; 100];

impl Storage for ConstantStore {
    fn max_item_bytes(&self) -> usize {
        1024 * 1024
    }

    fn get(&self, key: &[u8], _options: GetOptions, _waker: &std::task::Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        visit(&ItemView {
            key,
            value: &VALUE,
            flags: 7,
            cas: 12345,
            exptime_unix_s: 0,
            last_access_unix_s: 0,
            fetched_before: true,
            stale: false,
            win: false,
            win_token_sent: false,
        });
        GetOutcome::Hit
    }

    fn store(&self, _request: &StoreRequest<'_>, _waker: &std::task::Waker) -> StoreOutcome {
        StoreOutcome::Stored { cas: 1 }
    }

    fn delete(&self, _key: &[u8], _options: DeleteOptions) -> DeleteOutcome {
        DeleteOutcome::Deleted
    }

    fn arithmetic(&self, _request: &ArithmeticRequest<'_>, _waker: &std::task::Waker) -> ArithmeticOutcome {
        ArithmeticOutcome::Value { value: 1, cas: 1, exptime_unix_s: 0 }
    }

    fn flush_all(&self, _at_unix_s: u64) {}

    fn stats(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

fn packet(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let header = Header {
        magic: MAGIC_REQUEST,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        vbucket_or_status: 0,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque: 7,
        cas: 0,
    };
    let mut bytes = vec![0u8; HEADER_BYTES];
    header.encode(&mut bytes);
    [bytes, extras.to_vec(), key.to_vec(), value.to_vec()].concat()
}

#[test]
fn get_and_set_paths_do_not_allocate() {
    let before = allocations();
    let probe: Vec<u8> = Vec::with_capacity(16);
    assert_eq!(allocations(), before + 1, "the counting allocator counts");
    drop(probe);
    let keys: Vec<String> = (0..40).map(|i| format!("key:{i:04}")).collect();
    let value = "x".repeat(1000);
    let text = [
        format!("get {}\r\n", keys.join(" ")),
        format!("gets {}\r\n", keys[..5].join(" ")),
        format!("set key:1 5 0 {}\r\n{value}\r\n", value.len()),
        format!("set key:1 5 0 {} noreply\r\n{value}\r\n", value.len()),
        "mg key:1 v f c t k s O123\r\n".to_string(),
        format!("ms key:1 {} T0 F5 c\r\n{value}\r\n", value.len()),
        "mg Zm9v b k v\r\n".to_string(),
        "delete key:1\r\nincr key:1 1\r\ntouch key:1 10\r\nmn\r\n".to_string(),
    ]
    .concat()
    .into_bytes();
    let binary = [
        packet(opcode::GET, b"key:1", &[], &[]),
        packet(opcode::GETKQ, b"key:2", &[], &[]),
        packet(opcode::SET, b"key:1", &[0; 8], value.as_bytes()),
        packet(opcode::SETQ, b"key:1", &[0; 8], value.as_bytes()),
        packet(opcode::NOOP, &[], &[], &[]),
    ]
    .concat();
    for input in [&text, &binary] {
        let mut session = Session::new(Arc::new(ConstantStore), Arc::new(SessionConfig::new("test")));
        let mut out: Vec<u8> = Vec::with_capacity(1 << 20);
        // Warm up once: the first call may initialise lazily (thread locals, the clock).
        session.process(input, &mut out);
        out.clear();
        let before = allocations();
        let processed = session.process(input, &mut out);
        let allocated = allocations() - before;
        assert_eq!(processed.consumed, input.len());
        assert!(!out.is_empty());
        assert_eq!(allocated, 0, "the session allocated {allocated} times");
    }
}
