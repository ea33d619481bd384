//! One client connection's protocol state machine, independent of the transport: bytes in, reply
//! bytes out. The TCP server feeds it a socket's input; the fabric server feeds it the payload of a
//! fabric request (binary protocol packets). Protocol detection: a first byte of 0x80 means binary,
//! anything else the text protocol (ASCII and meta commands share one line parser).
//!
//! Buffering contract: `process` consumes every complete command and leaves an incomplete one
//! unconsumed; the caller keeps those bytes, appends more, and calls again. A storage command needs
//! its whole value in one contiguous input, so the caller's buffer must be able to grow to
//! `bytes_needed()` (bounded: a value larger than the store's item limit is never buffered, it is
//! refused and its bytes skipped as they arrive).

use std::sync::Arc;
use std::task::Waker;

use crate::clock::{exptime_to_unix_s, Clock};
use crate::counters::{CounterBatch, ProtocolCounters};
use crate::number::{format_u64, U64_DIGITS_MAX};
use crate::storage::Storage;
use crate::{binary_session, text};

/// Where replies go. `append(n)` grows the output by `n` bytes and returns them to fill; a fabric
/// server implements it over a registered buffer so large values are copied once, from the store.
pub trait Reply {
    fn append(&mut self, len: usize) -> &mut [u8];

    fn extend_from(&mut self, data: &[u8]) {
        self.append(data.len()).copy_from_slice(data);
    }

    /// A mark for `truncate`: where the next byte goes.
    fn mark(&self) -> usize;

    /// Takes back everything appended since `mark` returned `mark` (the replies of a command
    /// that must wait for the store and will run again).
    fn truncate(&mut self, mark: usize);
}

impl Reply for Vec<u8> {
    fn mark(&self) -> usize {
        self.len()
    }

    fn truncate(&mut self, mark: usize) {
        assert!(mark <= self.len());
        Vec::truncate(self, mark);
    }

    fn append(&mut self, len: usize) -> &mut [u8] {
        let start = self.len();
        self.resize(start + len, 0);
        &mut self[start..]
    }

    fn extend_from(&mut self, data: &[u8]) {
        // One copy, without zero-filling first.
        self.extend_from_slice(data);
    }
}

/// Appends `value` in decimal.
pub(crate) fn put_u64(out: &mut dyn Reply, value: u64) {
    let mut digits = [0u8; U64_DIGITS_MAX];
    out.extend_from(format_u64(value, &mut digits));
}

/// Appends `value` in decimal, with a sign when negative.
pub(crate) fn put_i64(out: &mut dyn Reply, value: i64) {
    if value < 0 {
        out.extend_from(b"-");
    }
    put_u64(out, value.unsigned_abs());
}

/// Credentials checked by SASL PLAIN (binary) and by the text protocol's `-Y` style authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// (user, password) pairs.
    pub users: Vec<(String, String)>,
}

impl Credentials {
    /// Parses memcached's `-Y` auth file: one `user:password` per line (the password may contain
    /// ':'); blank lines and lines without ':' are skipped.
    pub fn from_authfile(text: &str) -> Credentials {
        let users = text
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(user, password)| (user.to_string(), password.to_string()))
            .collect();
        Credentials { users }
    }

    /// Whether `user` with `password` is known. Compares every entry in full, so the time taken
    /// does not tell how much of a guess matched.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let mut matched = false;
        for (known_user, known_password) in &self.users {
            let user_matches = equal_in_constant_time(known_user.as_bytes(), user);
            let password_matches = equal_in_constant_time(known_password.as_bytes(), password);
            matched |= user_matches & password_matches;
        }
        matched
    }
}

fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |difference, (x, y)| difference | (x ^ y)) == 0
}

/// The server's part of `stats`: name/value pairs, called on the slow path only.
pub type ServerStats = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// Settings shared by every session of a server.
#[derive(Clone)]
pub struct SessionConfig {
    /// Longest text command line accepted (memcached: 2048 for most commands, more for multi-get).
    pub max_line_bytes: usize,
    /// `Some`: clients must authenticate before any other command.
    pub credentials: Option<Arc<Credentials>>,
    /// Reported by `version` and `stats`.
    pub version: String,
    /// The server's `stats` besides the store's (pid, uptime, connections, threads ...), slow path.
    pub server_stats: Option<ServerStats>,
    /// The protocol's `stats` counters, shared by every session (and readable by the server).
    pub counters: Arc<ProtocolCounters>,
    /// Time for relative expiry times and meta TTLs.
    pub clock: Clock,
}

impl SessionConfig {
    /// memcached's defaults: 2048-byte lines, no authentication, system time, fresh counters.
    pub fn new(version: impl Into<String>) -> SessionConfig {
        SessionConfig {
            max_line_bytes: LINE_BYTES_DEFAULT,
            credentials: None,
            version: version.into(),
            server_stats: None,
            counters: Arc::new(ProtocolCounters::default()),
            clock: Clock::system(),
        }
    }
}

/// memcached closes a connection that sends this many bytes without a newline (`try_read_command_ascii`).
pub const LINE_BYTES_DEFAULT: usize = 2048;

/// The result of one `Session::process` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Processed {
    /// Input bytes consumed (complete commands only; keep the rest and call again with more).
    pub consumed: usize,
    /// Close the connection after writing the output (`quit`, or an error that desynchronises the
    /// stream, such as a line longer than `max_line_bytes` or a bad binary magic).
    pub close: bool,
    /// Stopped between two commands because this call's replies reached
    /// `REPLY_BYTES_PER_PROCESS_MAX`: write the output, then call again with the unconsumed input
    /// at once, without waiting for more bytes (complete commands may be waiting in it).
    pub output_full: bool,
    /// Stopped before a command that needs a value the store is reading from its slower tier
    /// (nothing of that command was done or written): call again with the unconsumed input once
    /// the session's waker (`Session::set_waker`) is woken.
    pub waiting: bool,
}

/// Reply bytes (values mostly) after which `process` stops between commands: a small pipelined
/// input of gets for large items must not build gigabytes of output in one call.
pub const REPLY_BYTES_PER_PROCESS_MAX: usize = 4 << 20;

/// The protocol a session speaks, fixed by its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// No byte seen yet.
    Undetected,
    /// ASCII and meta commands.
    Text,
    Binary,
}

/// What handling the command at the start of the input did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A command was handled; this many bytes (more than zero) are consumed.
    Done { consumed: usize },
    /// A command was handled, and the `skip_bytes` that follow the consumed ones are to be discarded
    /// as they arrive (the value of a refused storage command).
    Skip { consumed: usize, skip_bytes: u64 },
    /// The command is incomplete: at least this many bytes (from its start) are needed.
    NeedMore { bytes_needed: usize },
    /// Stop and close after writing the output.
    Close { consumed: usize },
}

pub struct Session {
    pub(crate) store: Arc<dyn Storage>,
    pub(crate) config: Arc<SessionConfig>,
    protocol: Protocol,
    /// Whether commands other than authentication are allowed (always, without credentials).
    pub(crate) authenticated: bool,
    /// Text authentication's second step: the length of the awaited "user password\r\n" block.
    pub(crate) text_auth_block_bytes: Option<usize>,
    closed: bool,
    /// Input still to discard before the next command.
    skip_bytes: u64,
    bytes_needed: Option<usize>,
    /// This session's counts not yet added to `config.counters`.
    pub(crate) counts: CounterBatch,
    /// The time of the current `process` call, read at its first use (a clock read costs about
    /// as much as parsing a GET, and GETs never need it).
    now_unix_s: Option<u64>,
    /// The store's item limit, read once: the trait call is not free and the limit is fixed.
    pub(crate) max_item_bytes: usize,
    /// Value bytes written by this `process` call (replies are mostly values; headers are not
    /// counted, which keeps the accounting to the few places that copy values).
    pub(crate) reply_bytes: usize,
    /// Woken by the store when a `Pending` operation may be retried.
    pub(crate) waker: Waker,
    /// Read once from the store: whether commands need a mark to be taken back (`Pending`).
    may_wait: bool,
    /// Set by a command handler that got `Pending` from the store; `process` then takes the
    /// command back.
    pub(crate) waiting: bool,
}

impl Session {
    pub fn new(store: Arc<dyn Storage>, config: Arc<SessionConfig>) -> Session {
        assert!(config.max_line_bytes >= MIN_LINE_BYTES, "a command line must fit a 250-byte key");
        let max_item_bytes = store.max_item_bytes();
        Session {
            authenticated: config.credentials.is_none(),
            now_unix_s: None,
            config,
            protocol: Protocol::Undetected,
            text_auth_block_bytes: None,
            closed: false,
            skip_bytes: 0,
            bytes_needed: None,
            counts: CounterBatch::default(),
            max_item_bytes,
            reply_bytes: 0,
            waker: Waker::noop().clone(),
            may_wait: store.may_wait(),
            waiting: false,
            store,
        }
    }

    /// A session in the same state between commands (protocol, authentication) that goes on
    /// independently: a fabric request that waits for the store finishes on a fork while the
    /// connection's later requests run on the original. Its waker is a no-op until set.
    pub fn fork(&self) -> Session {
        let mut fork = Session::new(self.store.clone(), self.config.clone());
        fork.protocol = self.protocol;
        fork.authenticated = self.authenticated;
        fork.closed = self.closed;
        fork
    }

    /// The waker the store wakes when a command this session stopped at (`Processed::waiting`)
    /// may run again. Without one, a waiting command is retried only when `process` is called.
    pub fn set_waker(&mut self, waker: Waker) {
        self.waker = waker;
    }

    /// Handles every complete command at the start of `input`, appending replies to `out`, and
    /// leaves an incomplete last command unconsumed (see `bytes_needed`). Stops early, between
    /// commands, when the replies reach `REPLY_BYTES_PER_PROCESS_MAX` (`output_full`).
    pub fn process(&mut self, input: &[u8], out: &mut dyn Reply) -> Processed {
        if self.closed {
            return Processed { consumed: 0, close: true, ..Processed::default() };
        }
        self.now_unix_s = None;
        self.bytes_needed = None;
        self.reply_bytes = 0;
        let mut consumed = 0;
        let mut close = false;
        let mut output_full = false;
        let mut waiting = false;
        loop {
            if self.reply_bytes >= REPLY_BYTES_PER_PROCESS_MAX && consumed < input.len() {
                output_full = true;
                break;
            }
            assert!(consumed <= input.len());
            let rest = &input[consumed..];
            if self.skip_bytes > 0 {
                let skipped = self.skip_bytes.min(rest.len() as u64);
                self.skip_bytes -= skipped;
                consumed += skipped as usize;
                if self.skip_bytes > 0 {
                    break;
                }
                continue;
            }
            if rest.is_empty() {
                break;
            }
            if self.protocol == Protocol::Undetected {
                self.protocol = if rest[0] == crate::binary::MAGIC_REQUEST { Protocol::Binary } else { Protocol::Text };
            }
            // Only a store that may answer Pending needs the command's start kept.
            let mark = self.may_wait.then(|| (out.mark(), self.counts, self.reply_bytes));
            let step = match self.protocol {
                Protocol::Text => text::process_command(self, rest, out),
                Protocol::Binary => binary_session::process_packet(self, rest, out),
                Protocol::Undetected => unreachable!("detected above"),
            };
            if self.waiting {
                let (reply_mark, counts, reply_bytes) = mark.expect("only a store that may wait answers Pending");
                out.truncate(reply_mark);
                self.counts = counts;
                self.reply_bytes = reply_bytes;
                self.waiting = false;
                waiting = true;
                break;
            }
            match step {
                Step::Done { consumed: step_consumed } => {
                    assert!(step_consumed > 0 && step_consumed <= rest.len());
                    consumed += step_consumed;
                }
                Step::Skip { consumed: step_consumed, skip_bytes } => {
                    assert!(step_consumed > 0 && step_consumed <= rest.len());
                    consumed += step_consumed;
                    self.skip_bytes = skip_bytes;
                }
                Step::NeedMore { bytes_needed } => {
                    assert!(bytes_needed > rest.len());
                    self.bytes_needed = Some(bytes_needed);
                    break;
                }
                Step::Close { consumed: step_consumed } => {
                    assert!(step_consumed <= rest.len());
                    consumed += step_consumed;
                    close = true;
                    self.closed = true;
                    break;
                }
            }
        }
        self.flush_counts();
        assert!(consumed <= input.len());
        assert!(!(close && output_full));
        Processed { consumed, close, output_full, waiting }
    }

    /// Handles one fabric request payload: complete binary request packets, nothing else. A payload
    /// that is not binary, or ends inside a packet (or inside a refused value), is a broken client:
    /// the answer is to close, after the replies to the packets before.
    pub fn process_message(&mut self, payload: &[u8], out: &mut dyn Reply) -> Processed {
        if self.closed {
            return Processed { consumed: 0, close: true, ..Processed::default() };
        }
        if payload.first().is_some_and(|&byte| byte != crate::binary::MAGIC_REQUEST) {
            self.closed = true;
            return Processed { consumed: 0, close: true, ..Processed::default() };
        }
        // One request, one reply message: the reply budget of `process` does not split it.
        let mut consumed = 0;
        loop {
            let processed = self.process(&payload[consumed..], out);
            consumed += processed.consumed;
            if processed.close {
                return Processed { consumed, close: true, ..Processed::default() };
            }
            if processed.waiting {
                // The caller keeps the payload and the reply and calls again from `consumed`.
                return Processed { consumed, waiting: true, ..Processed::default() };
            }
            if !processed.output_full {
                break;
            }
        }
        if consumed < payload.len() || self.skip_bytes > 0 {
            self.closed = true;
            self.skip_bytes = 0;
            return Processed { consumed: payload.len(), close: true, ..Processed::default() };
        }
        Processed { consumed, ..Processed::default() }
    }

    /// After `process` left a command incomplete: the bytes, counted from the first unconsumed
    /// one, that the command needs at least. `None` when nothing particular is awaited.
    pub fn bytes_needed(&self) -> Option<usize> {
        self.bytes_needed
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// Whether the session stopped (after `quit` or a fatal protocol error); it processes nothing more.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The time, read once per `process` call.
    pub(crate) fn now_unix_s(&mut self) -> u64 {
        *self.now_unix_s.get_or_insert_with(|| self.config.clock.now_unix_s())
    }

    /// A client's `exptime` in absolute Unix seconds (see `clock::exptime_to_unix_s`); reads the
    /// clock only when the answer depends on it.
    pub(crate) fn exptime_unix_s(&mut self, exptime: i64) -> u64 {
        if exptime == 0 {
            return 0;
        }
        exptime_to_unix_s(exptime, self.now_unix_s())
    }

    /// Adds this session's pending counts to the shared counters.
    pub(crate) fn flush_counts(&mut self) {
        if !self.counts.is_empty() {
            self.config.counters.add(&self.counts);
            self.counts = CounterBatch::default();
        }
    }

    /// `stats` without arguments: the server's, the protocol's counters, then the store's.
    pub(crate) fn general_stats(&mut self) -> Vec<(String, String)> {
        self.flush_counts();
        let mut stats: Vec<(String, String)> = match &self.config.server_stats {
            Some(server_stats) => server_stats(),
            None => vec![
                ("pid".to_string(), std::process::id().to_string()),
                ("time".to_string(), self.now_unix_s().to_string()),
            ],
        };
        if !stats.iter().any(|(name, _)| name == "version") {
            stats.push(("version".to_string(), self.config.version.clone()));
        }
        for (name, value) in self.config.counters.snapshot() {
            stats.push((name.to_string(), value.to_string()));
        }
        stats.extend(self.store.stats());
        stats
    }

    /// `stats settings`: what this layer knows of memcached's settings.
    pub(crate) fn settings_stats(&self) -> Vec<(String, String)> {
        let yes_no = |on: bool| if on { "yes" } else { "no" }.to_string();
        vec![
            ("item_size_max".to_string(), self.max_item_bytes.to_string()),
            ("binding_protocol".to_string(), "auto-negotiate".to_string()),
            ("auth_enabled_sasl".to_string(), yes_no(self.config.credentials.is_some())),
            ("cas_enabled".to_string(), yes_no(true)),
            ("flush_enabled".to_string(), yes_no(true)),
        ]
    }
}

/// The shortest `max_line_bytes` a session accepts: a meta command with a 250-byte key and flags.
pub const MIN_LINE_BYTES: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::opcode;
    use crate::test_support::{request, responses, Harness};

    #[test]
    fn detects_the_protocol_on_the_first_byte() {
        let mut h = Harness::new();
        assert_eq!(h.session.protocol(), Protocol::Undetected);
        assert_eq!(h.send(b""), b"");
        assert_eq!(h.session.protocol(), Protocol::Undetected);
        h.send(b"g");
        assert_eq!(h.session.protocol(), Protocol::Text);
        let mut h = Harness::new();
        h.send(&[0x80]);
        assert_eq!(h.session.protocol(), Protocol::Binary);
        // A binary packet on a text session is just bad command lines (NOOP's opcode is '\n').
        let mut h = Harness::new();
        h.text("version\r\n");
        let reply = h.send(&[&request(opcode::NOOP, &[], &[], &[], 1, 0)[..], b"\r\n"].concat());
        assert_eq!(reply, b"ERROR\r\nERROR\r\n");
    }

    #[test]
    fn a_closed_session_processes_nothing() {
        let mut h = Harness::new();
        h.text("quit\r\n");
        assert!(h.session.is_closed());
        let mut out = Vec::new();
        assert_eq!(h.session.process(b"version\r\n", &mut out), Processed { consumed: 0, close: true, ..Processed::default() });
        assert!(h.session.process_message(&request(opcode::NOOP, &[], &[], &[], 1, 0), &mut out).close);
        assert!(out.is_empty());
    }

    #[test]
    fn fabric_messages_hold_whole_packets() {
        let h = Harness::new();
        let mut session = h.connection();
        let mut out = Vec::new();
        let payload = [
            request(opcode::SETQ, b"a", &[0; 8], b"v", 1, 0),
            request(opcode::GETK, b"a", &[], &[], 2, 0),
            request(opcode::GETQ, b"b", &[], &[], 3, 0),
        ]
        .concat();
        let processed = session.process_message(&payload, &mut out);
        assert_eq!(processed, Processed { consumed: payload.len(), close: false, ..Processed::default() });
        let replies = responses(&out);
        assert_eq!(replies.len(), 1);
        assert_eq!((replies[0].opaque, replies[0].key.as_slice(), replies[0].value.as_slice()), (2, &b"a"[..], &b"v"[..]));
        // A payload cut inside a packet closes the connection, after the replies before it.
        out.clear();
        let packet = request(opcode::NOOP, &[], &[], &[], 4, 0);
        let cut = [&packet[..], &request(opcode::GET, b"a", &[], &[], 5, 0)[..20]].concat();
        assert_eq!(session.process_message(&cut, &mut out), Processed { consumed: cut.len(), close: true, ..Processed::default() });
        assert_eq!(responses(&out).len(), 1);
    }

    #[test]
    fn fabric_messages_must_be_binary_and_may_refuse_values() {
        let h = Harness::with_max_item_bytes(10);
        let mut out = Vec::new();
        let mut session = h.connection();
        assert_eq!(session.process_message(b"get a\r\n", &mut out), Processed { consumed: 0, close: true, ..Processed::default() });
        // A too-large value inside one message is refused and skipped within it.
        let mut session = h.connection();
        let payload = [request(opcode::SET, b"a", &[0; 8], &[b'x'; 50], 1, 0), request(opcode::NOOP, &[], &[], &[], 2, 0)].concat();
        assert_eq!(session.process_message(&payload, &mut out), Processed { consumed: payload.len(), close: false, ..Processed::default() });
        let replies = responses(&out);
        assert_eq!(replies.iter().map(|r| r.status).collect::<Vec<_>>(), [crate::binary::status::VALUE_TOO_LARGE, 0]);
        // A refused value running past the message's end is a broken client.
        let mut session = h.connection();
        out.clear();
        let packet = request(opcode::SET, b"a", &[0; 8], &[b'x'; 50], 1, 0);
        assert_eq!(session.process_message(&packet[..60], &mut out), Processed { consumed: 60, close: true, ..Processed::default() });
    }

    #[test]
    fn a_pipeline_of_large_replies_yields_between_commands() {
        let mut h = Harness::new();
        let value = "v".repeat((1 << 20) - 100);
        h.text(&format!("set big 0 0 {}\r\n{value}\r\n", value.len()));
        let reply_bytes = format!("VALUE big 0 {}\r\n\r\nEND\r\n", value.len()).len() + value.len();
        let commands = 10;
        let input = "get big\r\n".repeat(commands);
        let mut out = Vec::new();
        let processed = h.session.process(input.as_bytes(), &mut out);
        // Commands run until their values reach the budget, then the call returns.
        let within_budget = REPLY_BYTES_PER_PROCESS_MAX.div_ceil(value.len());
        assert_eq!(processed, Processed { consumed: within_budget * 9, close: false, output_full: true, waiting: false });
        assert_eq!(out.len(), within_budget * reply_bytes);
        // The rest comes with the next calls, no new input needed.
        let replies = h.send(&input.as_bytes()[processed.consumed..]);
        assert_eq!(replies.len() + out.len(), commands * reply_bytes);
    }

    #[test]
    fn a_fabric_reply_is_not_cut_by_the_budget() {
        let mut h = Harness::new();
        let value = vec![b'v'; (1 << 20) - 100];
        assert_eq!(responses(&h.send(&request(opcode::SET, b"big", &[0; 8], &value, 1, 0)))[0].status, 0);
        let payload = request(opcode::GET, b"big", &[], &[], 2, 0).repeat(6);
        let mut out = Vec::new();
        let processed = h.connection().process_message(&payload, &mut out);
        assert_eq!(processed, Processed { consumed: payload.len(), ..Processed::default() });
        assert_eq!(responses(&out).len(), 6);
    }

    #[test]
    fn sessions_share_counters() {
        let mut h = Harness::new();
        let mut other = h.connection();
        h.text("get a\r\n");
        let mut out = Vec::new();
        other.process(b"get a b\r\n", &mut out);
        assert_eq!(h.config.counters.get("cmd_get"), Some(3));
        assert_eq!(h.config.counters.get("get_misses"), Some(3));
    }

    #[test]
    fn authfile_parsing_and_checks() {
        let credentials = Credentials::from_authfile("user:secret\n\nbroken\nother:pass:word\n");
        assert_eq!(credentials.users.len(), 2);
        assert!(credentials.check(b"user", b"secret"));
        assert!(credentials.check(b"other", b"pass:word"));
        assert!(!credentials.check(b"user", b"secre"));
        assert!(!credentials.check(b"user", b"secrets"));
        assert!(!credentials.check(b"", b""));
        assert!(!Credentials::default().check(b"user", b"secret"));
    }

    #[test]
    #[should_panic(expected = "a command line must fit a 250-byte key")]
    fn refuses_a_line_limit_below_the_key_limit() {
        Harness::with(|config| config.max_line_bytes = 100);
    }

    /// xorshift64: a fixed-seed generator, no dependency.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len() as u64) as usize]
        }
    }

    /// A text command, valid or nearly so, over a few keys.
    fn text_command(random: &mut Random) -> Vec<u8> {
        let keys = ["a", "b", "Zm9v", "k"];
        let key = random.pick(&keys);
        let numbers = ["0", "1", "-1", "5", "100", "x", "4294967297", "2592001"];
        let number = random.pick(&numbers);
        let value_len = random.below(6) as usize;
        let value: String = (0..value_len).map(|_| *random.pick(&['x', '1', '\r', '\n', ' '])).collect();
        let wrong_len = if random.below(8) == 0 { 1 } else { 0 };
        let noreply = if random.below(5) == 0 { " noreply" } else { "" };
        let meta_flags = ["v", "k", "c", "q", "s", "t", "f", "h", "l", "O1", "T5", "N5", "R5", "b", "I", "MA", "ME", "MD", "C1", "D2", "J3", "E9", "F3", "u", "Zx"];
        let flags: Vec<&str> = (0..random.below(5)).map(|_| *random.pick(&meta_flags)).collect();
        let flags = flags.join(" ");
        let command = match random.below(20) {
            0 => format!("set {key} {number} 0 {}{noreply}\r\n{value}\r\n", value_len + wrong_len),
            1 => format!("add {key} 0 {number} {value_len}\r\n{value}\r\n"),
            2 => format!("append {key} 0 0 {value_len}{noreply}\r\n{value}\r\n"),
            3 => format!("cas {key} 0 0 {value_len} {number}\r\n{value}\r\n"),
            4 => format!("get {key} {}\r\n", random.pick(&keys)),
            5 => format!("gats {number} {key}\r\n"),
            6 => format!("incr {key} {number}{noreply}\r\n"),
            7 => format!("decr {key} {number}\r\n"),
            8 => format!("delete {key}{noreply}\r\n"),
            9 => format!("touch {key} {number}\r\n"),
            10 => format!("flush_all {number}\r\n"),
            11 => format!("mg {key} {flags}\r\n"),
            12 => format!("ms {key} {} {flags}\r\n{value}\r\n", value_len + wrong_len),
            13 => format!("md {key} {flags}\r\n"),
            14 => format!("ma {key} {flags}\r\n"),
            15 => format!("me {key} {flags}\r\n"),
            16 => "mn\r\n".to_string(),
            // `stats` shows the counters: they too must not depend on how input arrives.
            17 => ["version\r\n", "stats\r\n", "stats reset\r\n", "verbosity 1\r\n"][random.below(4) as usize].to_string(),
            18 => (0..random.below(12)).map(|_| *random.pick(&['a', ' ', '\r', '\n', '0', 'm', 'g', 's'])).collect(),
            _ => format!("set {key} 0 0 {number}\r\n"),
        };
        command.into_bytes()
    }

    /// A binary packet, usually well-formed, sometimes not.
    fn binary_packet(random: &mut Random) -> Vec<u8> {
        let opcodes = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x20, 0x21, 0x22, 0x23, 0x24, 0x42];
        let op = *random.pick(&opcodes);
        let keys: [&[u8]; 5] = [b"", b"a", b"b", b"PLAIN", b"reset"];
        let key = *random.pick(&keys);
        let extras_len = *random.pick(&[0usize, 0, 4, 8, 20, 3]);
        let extras: Vec<u8> = (0..extras_len).map(|_| random.below(3) as u8).collect();
        let value: Vec<u8> = (0..random.below(5)).map(|_| random.below(256) as u8).collect();
        let cas = if random.below(4) == 0 { random.below(5) } else { 0 };
        let mut packet = request(op, key, &extras, &value, random.below(100) as u32, cas);
        if random.below(30) == 0 {
            let index = random.below(packet.len() as u64) as usize;
            packet[index] = random.below(256) as u8;
        }
        packet
    }

    fn run(h: &mut Harness, input: &[u8], random: &mut Random, chunked: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < input.len() && !h.closed {
            let piece = if chunked { 1 + random.below(17) as usize } else { input.len() };
            let end = (offset + piece).min(input.len());
            out.extend(h.send(&input[offset..end]));
            offset = end;
        }
        out
    }

    /// Random inputs through two sessions, one fed at once and one in random pieces: no panic, and
    /// the same replies whatever the pieces (no state leaks between partial reads).
    #[test]
    fn random_inputs_in_random_pieces() {
        let mut random = Random(0x5eed_cafe_f00d_0001);
        for round in 0..3000 {
            let binary = round % 3 == 2;
            let authenticated = round % 7 != 3;
            let mut input = Vec::new();
            if !authenticated {
                input.extend_from_slice(if binary { b"" } else { b"set x 0 0 11\r\nuser secret\r\n" });
            }
            for _ in 0..1 + random.below(12) {
                if binary {
                    input.extend(binary_packet(&mut random));
                } else {
                    input.extend(text_command(&mut random));
                }
            }
            let make = || if authenticated { Harness::with_max_item_bytes(64) } else { Harness::with_credentials() };
            let (mut whole, mut pieces) = (make(), make());
            let at_once = run(&mut whole, &input, &mut random, false);
            let in_pieces = run(&mut pieces, &input, &mut random, true);
            assert_eq!(at_once, in_pieces, "round {round}: {:?}", String::from_utf8_lossy(&input));
            assert_eq!(whole.closed, pieces.closed);
        }
    }
}
