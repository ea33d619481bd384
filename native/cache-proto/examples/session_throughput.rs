//! The protocol layer's cost per command, without a network or a real store (the store here holds
//! one constant 32-byte value and accepts every write): what a `Session` adds to each request.
//!
//! `cargo run --release -p cache-proto --example session_throughput`

use std::sync::Arc;
use std::time::Instant;

use cache_proto::binary::{opcode, Header, HEADER_BYTES, MAGIC_REQUEST};
use cache_proto::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreOutcome, StoreRequest,
};
use cache_proto::{Session, SessionConfig};

struct ConstantStore;

const VALUE: [u8; 32] = [b'v'; 32];

impl Storage for ConstantStore {
    fn max_item_bytes(&self) -> usize {
        1 << 20
    }
    fn get(&self, key: &[u8], _: GetOptions, _: &std::task::Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        visit(&ItemView {
            key,
            value: &VALUE,
            flags: 0,
            cas: 1,
            exptime_unix_s: 0,
            last_access_unix_s: 0,
            fetched_before: true,
            stale: false,
            win: false,
            win_token_sent: false,
        });
        GetOutcome::Hit
    }
    fn store(&self, _: &StoreRequest<'_>, _: &std::task::Waker) -> StoreOutcome {
        StoreOutcome::Stored { cas: 1 }
    }
    fn delete(&self, _: &[u8], _: DeleteOptions) -> DeleteOutcome {
        DeleteOutcome::Deleted
    }
    fn arithmetic(&self, _: &ArithmeticRequest<'_>, _: &std::task::Waker) -> ArithmeticOutcome {
        ArithmeticOutcome::Value { value: 1, cas: 1, exptime_unix_s: 0 }
    }
    fn flush_all(&self, _: u64) {}
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
        opaque: 1,
        cas: 0,
    };
    let mut bytes = vec![0u8; HEADER_BYTES];
    header.encode(&mut bytes);
    [bytes, extras.to_vec(), key.to_vec(), value.to_vec()].concat()
}

/// Runs `command` (repeated to fill a 64 KiB pipeline) and prints nanoseconds per command.
fn measure(name: &str, command: &[u8], commands_per_unit: usize) {
    let repeats = (65536 / command.len()).max(1);
    let input = command.repeat(repeats);
    let mut session = Session::new(Arc::new(ConstantStore), Arc::new(SessionConfig::new("bench")));
    let mut out = Vec::with_capacity(1 << 22);
    let rounds = (2_000_000 / repeats).max(10);
    let start = Instant::now();
    for _ in 0..rounds {
        out.clear();
        let processed = session.process(&input, &mut out);
        assert_eq!(processed.consumed, input.len());
    }
    let commands = (rounds * repeats * commands_per_unit) as f64;
    let ns = start.elapsed().as_nanos() as f64 / commands;
    println!("{name:<28} {ns:>7.1} ns/command  {:>6.1} M commands/s", 1e3 / ns);
}

fn main() {
    let keys16: Vec<String> = (0..16).map(|i| format!("key:{i:08}")).collect();
    measure("text get (hit, 32 B)", b"get key:00000001\r\n", 1);
    measure("text get, 16 keys (per key)", format!("get {}\r\n", keys16.join(" ")).as_bytes(), 16);
    measure("text set (32 B)", format!("set key:00000001 0 0 32\r\n{}\r\n", "x".repeat(32)).as_bytes(), 1);
    measure("meta mg v f c", b"mg key:00000001 v f c\r\n", 1);
    measure("meta ms (32 B)", format!("ms key:00000001 32 T0\r\n{}\r\n", "x".repeat(32)).as_bytes(), 1);
    measure("binary GET", &packet(opcode::GET, b"key:00000001", &[], &[]), 1);
    measure("binary SET (32 B)", &packet(opcode::SET, b"key:00000001", &[0; 8], &[b'x'; 32]), 1);
}
