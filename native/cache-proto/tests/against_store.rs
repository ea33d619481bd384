//! The session scenarios of tests/scenarios against the reference store and against cache-store's
//! `Store`, the store the server runs: the protocols and the real store agree on memcached's
//! semantics.

mod scenarios;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use cache_proto::clock::Clock;
use cache_proto::reference::ReferenceStore;
use cache_proto::storage::Storage;

fn run_all(make_store: impl Fn(Arc<AtomicU64>) -> Arc<dyn Storage>) {
    let mut failures = Vec::new();
    for scenario in scenarios::scenarios() {
        let now_unix_s = Arc::new(AtomicU64::new(scenarios::START_UNIX_S));
        let store = make_store(now_unix_s.clone());
        if let Err(failure) = scenarios::run(&scenario, store, now_unix_s) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{} scenarios failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn scenarios_against_the_reference_store() {
    // cache-store's 1 MiB limit includes a 32-byte item header: the same effective limit here means
    // the session refuses before buffering what cache-store refuses after, with the same replies.
    run_all(|now_unix_s| {
        Arc::new(ReferenceStore::with_limits(Clock::manual_shared(now_unix_s), (1 << 20) - 32, usize::MAX))
    });
}

#[test]
fn scenarios_against_cache_store() {
    run_all(|now_unix_s| {
        let config = cache_store::StoreConfig {
            memory_limit_bytes: 64 << 20,
            max_item_bytes: 1 << 20,
            shards: Some(4),
            clock: cache_store::Clock::Manual(now_unix_s),
            ssd: None,
        };
        Arc::new(cache_store::Store::new(config).expect("a store of 64 MiB"))
    });
}
