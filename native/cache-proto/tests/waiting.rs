//! Sessions over a store whose values may be on its SSD tier: a command that needs such a value is
//! taken back whole (no reply, no count, nothing consumed) and runs again once the store wakes the
//! session's waker; commands before it keep their replies.

use std::sync::{Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;

use cache_proto::{Processed, Session, SessionConfig};
use cache_store::{Clock, SsdConfig, Store, StoreConfig};

#[derive(Default)]
struct Flag {
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.signal.notify_all();
    }
}

impl Flag {
    fn wait(&self) {
        let woken = self.woken.lock().unwrap();
        let (mut woken, timeout) = self.signal.wait_timeout_while(woken, Duration::from_secs(20), |woken| !*woken).unwrap();
        assert!(!timeout.timed_out(), "never woken");
        *woken = false;
    }
}

struct Fixture {
    store: Arc<Store>,
    session: Session,
    flag: Arc<Flag>,
    config: Arc<SessionConfig>,
    dir: std::path::PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A hybrid store (16 MiB of memory, 64 MiB log) with `key-0` .. `key-5999` of 4 KiB set: the
/// first ones are out on the SSD.
fn fixture(name: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("slipstream-waiting-{name}-{}", std::process::id()));
    let store = Store::new(StoreConfig {
        memory_limit_bytes: 16 << 20,
        max_item_bytes: 512 << 10,
        shards: Some(2),
        clock: Clock::System,
        ssd: Some(SsdConfig { dir: dir.clone(), size_bytes: 64 << 20, io_threads: 1 }),
    })
    .unwrap();
    let config = Arc::new(SessionConfig::new("test"));
    let store = Arc::new(store);
    let mut session = Session::new(store.clone(), config.clone());
    let flag = Arc::new(Flag::default());
    session.set_waker(Waker::from(flag.clone()));
    let mut fixture = Fixture { store, session, flag, config, dir };
    for index in 0..6000 {
        let command = format!("set key-{index} 0 0 4096 noreply\r\n{}\r\n", value(index));
        let mut out = Vec::new();
        let processed = fixture.session.process(command.as_bytes(), &mut out);
        assert_eq!(processed.consumed, command.len());
        assert!(out.is_empty());
    }
    fixture
}

fn value(index: usize) -> String {
    format!("{index:>4096}")
}

fn counter(config: &SessionConfig, name: &str) -> u64 {
    config.counters.snapshot().into_iter().find(|(counter, _)| *counter == name).unwrap().1
}

/// Runs `input` to the end as a connection does: waiting when told, until all is consumed.
fn run(fixture: &mut Fixture, input: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut consumed = 0;
    let mut waits = 0;
    while consumed < input.len() {
        let processed = fixture.session.process(&input[consumed..], &mut out);
        assert!(processed.consumed > 0 || processed.waiting, "stuck at {:?}: {processed:?}", String::from_utf8_lossy(&input[consumed..]));
        consumed += processed.consumed;
        if processed.waiting {
            waits += 1;
            fixture.flag.wait();
        }
    }
    (out, waits)
}

#[test]
fn a_multi_get_waits_whole_and_replies_once() {
    let mut fixture = fixture("multi");
    let input = b"get key-5999 key-0 key-5998\r\n";
    let mut out = Vec::new();
    let processed = fixture.session.process(input, &mut out);
    assert_eq!(processed, Processed { consumed: 0, close: false, output_full: false, waiting: true });
    assert!(out.is_empty(), "the reply for key-5999 was taken back");
    assert_eq!(counter(&fixture.config, "get_hits"), 0, "and its count");
    fixture.flag.wait();
    let processed = fixture.session.process(input, &mut out);
    assert_eq!(processed.consumed, input.len(), "key-0 is back in memory now");
    let expected = format!(
        "VALUE key-5999 0 4096\r\n{}\r\nVALUE key-0 0 4096\r\n{}\r\nVALUE key-5998 0 4096\r\n{}\r\nEND\r\n",
        value(5999),
        value(0),
        value(5998)
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected);
    assert_eq!(counter(&fixture.config, "get_hits"), 3);
    assert_eq!(counter(&fixture.config, "cmd_get"), 3, "memcached counts keys");
}

#[test]
fn commands_before_a_waiting_one_keep_their_replies_and_run_once() {
    let mut fixture = fixture("pipeline");
    let input = b"incr n 1\r\nset n 0 0 1\r\n5\r\nincr n 1\r\nget key-1\r\nincr n 1\r\nappend key-2 0 0 2\r\n!!\r\nget key-2\r\n";
    let (out, waits) = run(&mut fixture, input);
    assert!(waits >= 2, "key-1 and key-2 were out: {waits}");
    let expected = format!(
        "NOT_FOUND\r\nSTORED\r\n6\r\nVALUE key-1 0 4096\r\n{}\r\nEND\r\n7\r\nSTORED\r\nVALUE key-2 0 4098\r\n{}!!\r\nEND\r\n",
        value(1),
        value(2)
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected, "each command ran exactly once");
}

#[test]
fn meta_and_binary_commands_wait_too() {
    let mut fixture = fixture("meta");
    let (out, waits) = run(&mut fixture, b"mg key-3 v k s\r\nmn\r\n");
    assert_eq!(waits, 1);
    assert_eq!(String::from_utf8(out).unwrap(), format!("VA 4096 kkey-3 s4096\r\n{}\r\nMN\r\n", value(3)));
    // Binary GETK of key-4, on a new (binary) session.
    let mut packet = vec![0x80, 0x0c, 0, 5, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
    packet.extend_from_slice(b"key-4");
    fixture.session = Session::new(fixture.store.clone(), fixture.config.clone());
    fixture.session.set_waker(Waker::from(fixture.flag.clone()));
    let (out, waits) = run(&mut fixture, &packet);
    assert_eq!(waits, 1);
    assert_eq!(&out[..2], &[0x81, 0x0c]);
    assert_eq!(&out[6..8], &[0, 0], "status: no error");
    assert_eq!(&out[12..16], &[0, 0, 0, 9], "opaque echoed");
    assert_eq!(&out[out.len() - 4096..], value(4).as_bytes());
}
