//! The store's resident memory as the kernel sees the whole process (/proc/self/statm), filled
//! with values of one size at a time. One test in its own binary, so no other test allocates
//! meanwhile; the unit tests measure the arena and index alone with mincore.

use cache_proto::storage::{Storage, StoreMode, StoreOutcome, StoreRequest};
use cache_store::{Store, StoreConfig};

const MIB: usize = 1 << 20;

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let resident_pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    resident_pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

#[test]
fn a_full_store_stays_within_its_memory_limit() {
    let memory_limit_bytes = 64 * MIB;
    let bound_bytes = memory_limit_bytes + memory_limit_bytes * 15 / 100;
    let mut key = String::with_capacity(32);
    for value_bytes in [1, 100, 4096, 500 * 1024, MIB - 100] {
        let value = vec![b'r'; value_bytes];
        let before_bytes = resident_bytes();
        let config = StoreConfig { memory_limit_bytes, ..StoreConfig::default() };
        let store = Store::new(config).unwrap();
        let mut written_bytes = 0;
        let mut count = 0u64;
        while written_bytes < 2 * memory_limit_bytes {
            use std::fmt::Write;
            key.clear();
            write!(key, "key:{count}").unwrap();
            let outcome = store.store(&StoreRequest::new(StoreMode::Set, key.as_bytes(), &value, 0, 0), std::task::Waker::noop());
            assert!(matches!(outcome, StoreOutcome::Stored { .. }), "{outcome:?}");
            written_bytes += value_bytes + 48;
            count += 1;
        }
        let grown_bytes = resident_bytes().saturating_sub(before_bytes);
        eprintln!(
            "{value_bytes} B values: process grew by {grown_bytes} B, store counts {} B, limit {memory_limit_bytes} B",
            store.memory_used_bytes()
        );
        assert!(store.memory_used_bytes() <= memory_limit_bytes);
        assert!(grown_bytes <= bound_bytes, "{value_bytes} B values: {grown_bytes} > {bound_bytes}");
        drop(store);
        assert!(resident_bytes() < before_bytes + 4 * MIB, "a dropped store gives its memory back");
    }
}
