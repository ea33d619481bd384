//! GET and SET throughput of the store alone, on N threads sharing one store (no network):
//! `cargo run --release -p cache-store --example store_throughput -- [threads] [value_bytes]`.
//! Reports operations per second; asserts nothing (performance belongs to `ohb`).

use cache_proto::storage::{GetOptions, Storage, StoreMode, StoreRequest};
use cache_store::{Store, StoreConfig};
use std::io::Write;
use std::time::Instant;

fn main() {
    let mut arguments = std::env::args().skip(1);
    let threads: usize = arguments.next().map_or(2, |text| text.parse().unwrap());
    let value_bytes: usize = arguments.next().map_or(32, |text| text.parse().unwrap());
    let keys = 100_000u64;
    let operations_per_thread = 2_000_000u64;
    let store = Store::new(StoreConfig { memory_limit_bytes: 1 << 30, ..StoreConfig::default() }).unwrap();
    let value = vec![b'v'; value_bytes];
    for key in 0..keys {
        store.store(&StoreRequest::new(StoreMode::Set, format!("key:{key}").as_bytes(), &value, 0, 0), std::task::Waker::noop());
    }
    for (name, set_per_mille) in [("GET", 0), ("SET", 1000), ("MIX 90:10", 100)] {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let (store, value) = (&store, &value);
                scope.spawn(move || {
                    let mut key_text = Vec::with_capacity(32);
                    let mut random = 0x9e37_79b9_7f4a_7c15u64 ^ thread as u64;
                    let mut copied = 0usize;
                    for _ in 0..operations_per_thread {
                        random ^= random << 13;
                        random ^= random >> 7;
                        random ^= random << 17;
                        key_text.clear();
                        write!(key_text, "key:{}", random % keys).unwrap();
                        if random % 1000 < set_per_mille {
                            store.store(&StoreRequest::new(StoreMode::Set, &key_text, value, 0, 0), std::task::Waker::noop());
                        } else {
                            store.get(&key_text, GetOptions::default(), std::task::Waker::noop(), &mut |view| copied += view.value.len());
                        }
                    }
                    std::hint::black_box(copied);
                });
            }
        });
        let seconds = started.elapsed().as_secs_f64();
        let rate = (threads as u64 * operations_per_thread) as f64 / seconds;
        println!("{name:>10}: {threads} threads, {value_bytes} B values: {:.2} M ops/s", rate / 1e6);
    }
}
