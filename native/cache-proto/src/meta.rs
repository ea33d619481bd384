//! memcached's meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`), following memcached 1.6.18's
//! proto_text.c: flag parsing and its error strings, reply codes (HD/VA/EN/NF/NS/EX/MN/ME), flags
//! reflected in request order, `q` hiding only the nominal reply (EN for mg; HD for ms, md, ma).
//!
//! Additions from later memcached releases, where the `Storage` trait supports them: `E` (set the
//! new CAS), `N` on `ms` in append/prepend mode (create on miss), `mg` with `C` and `v` (no value
//! when the CAS matches), and `me` printing the remaining TTL with the right sign.
//!
//! Deliberate difference: a too-long opaque (`O`) is refused before the command runs, where
//! memcached 1.6.18 discovers it while writing the reply of `mg`/`ma`, after their side effects.

use crate::base64;
use crate::clock::ttl_remaining_s;
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::session::{put_i64, put_u64, Reply, Session, Step};
use crate::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView,
    StoreMode, StoreOutcome, StoreRequest, EXPTIME_KEEP,
};
use crate::text::{account_store, reply_line, KEY_BYTES_MAX};
use crate::tokens::Tokens;

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta command line has fewer tokens than this (counting
/// memcached's terminal token).
pub const META_NTOKENS_MAX: usize = 20;

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`, counting the leading 'O'.
pub const OPAQUE_BYTES_MAX: usize = 32;

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format";
const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format";

/// Handles a meta command; `tokens.get(0)` is one of mg, ms, md, ma, mn, me.
pub(crate) fn process_command(
    session: &mut Session,
    tokens: &Tokens<'_>,
    line_consumed: usize,
    data: &[u8],
    out: &mut dyn Reply,
) -> Step {
    let done = Step::Done { consumed: line_consumed };
    match tokens.get(0) {
        b"mg" => {
            process_get(session, tokens, out);
            done
        }
        b"ms" => process_set(session, tokens, line_consumed, data, out),
        b"md" => {
            process_delete(session, tokens, out);
            done
        }
        b"ma" => {
            process_arithmetic(session, tokens, out);
            done
        }
        b"mn" => {
            out.extend_from(b"MN\r\n");
            done
        }
        b"me" => {
            process_debug(session, tokens, out);
            done
        }
        _ => unreachable!("text dispatches only meta commands here"),
    }
}

/// The flags of one meta command, as memcached's `_meta_flag_preparse` reads them.
#[derive(Debug, Default)]
struct Flags {
    base64_key: bool,
    value: bool,
    quiet: bool,
    no_bump: bool,
    invalidate: bool,
    vivify_exptime: Option<i32>,
    touch_exptime: Option<i32>,
    recache_exptime: Option<i32>,
    client_flags: u32,
    compare_cas: Option<u64>,
    new_cas: Option<u64>,
    mode: Option<u8>,
    initial: Option<u64>,
    delta: Option<u64>,
}

/// A key as the command uses it: the token, or its base64 decoding (at most 187 bytes).
struct Key {
    decoded: [u8; KEY_BYTES_MAX],
    len: usize,
    base64: bool,
}

/// Base64 of the longest decoded key, plus room.
const ENCODED_KEY_BYTES_MAX: usize = 256;

impl Key {
    fn bytes<'a>(&'a self, token: &'a [u8]) -> &'a [u8] {
        if self.base64 {
            &self.decoded[..self.len]
        } else {
            token
        }
    }
}

/// Parses the flags from token `start` on. `Err` carries memcached's error line. The key token is
/// decoded into `key` when the `b` flag is present.
fn parse_flags(tokens: &Tokens<'_>, start: usize, key: &mut Key) -> Result<Flags, &'static [u8]> {
    let mut flags = Flags::default();
    let mut seen = [false; 128];
    let mut error: Option<&'static [u8]> = None;
    let mut has_error = false;
    for index in start..tokens.len() {
        let token = tokens.get(index);
        let flag = token[0];
        if flag >= 127 || seen[usize::from(flag)] {
            return Err(b"CLIENT_ERROR duplicate flag");
        }
        seen[usize::from(flag)] = true;
        let argument = &token[1..];
        let mut fail = |message: Option<&'static [u8]>| {
            has_error = true;
            // A later error's message replaces an earlier one, as in memcached.
            if message.is_some() {
                error = message;
            }
        };
        match flag {
            b'b' => {
                let encoded = tokens.get(1);
                match base64::decode(encoded, &mut key.decoded[..encoded.len()]) {
                    Some(len) => key.len = len,
                    None => {
                        key.len = 0;
                        fail(Some(b"CLIENT_ERROR error decoding key"));
                    }
                }
                key.base64 = true;
                flags.base64_key = true;
            }
            b'N' => match parse_i32(argument) {
                Some(exptime) => flags.vivify_exptime = Some(exptime),
                None => fail(Some(BAD_TOKEN)),
            },
            b'T' => match parse_i32(argument) {
                Some(exptime) => flags.touch_exptime = Some(exptime),
                None => fail(Some(BAD_TOKEN)),
            },
            b'R' => match parse_i32(argument) {
                Some(exptime) => flags.recache_exptime = Some(exptime),
                None => fail(Some(BAD_TOKEN)),
            },
            b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' => {}
            b'v' => flags.value = true,
            b'u' => flags.no_bump = true,
            b'q' => flags.quiet = true,
            b'F' => match parse_u32(argument) {
                Some(client_flags) => flags.client_flags = client_flags,
                None => fail(None),
            },
            b'C' => match parse_u64(argument) {
                Some(cas) => flags.compare_cas = Some(cas),
                None => fail(Some(BAD_TOKEN)),
            },
            b'E' => match parse_u64(argument) {
                Some(cas) => flags.new_cas = Some(cas),
                None => fail(Some(BAD_TOKEN)),
            },
            b'M' => {
                if token.len() != 2 {
                    fail(Some(b"CLIENT_ERROR incorrect length for M token"));
                } else {
                    flags.mode = Some(token[1]);
                }
            }
            b'J' => match parse_u64(argument) {
                Some(initial) => flags.initial = Some(initial),
                None => fail(Some(b"CLIENT_ERROR invalid numeric initial value")),
            },
            b'D' => match parse_u64(argument) {
                Some(delta) => flags.delta = Some(delta),
                None => fail(Some(b"CLIENT_ERROR invalid numeric delta value")),
            },
            b'I' => flags.invalidate = true,
            _ => return Err(b"CLIENT_ERROR invalid flag"),
        }
    }
    if has_error {
        return Err(error.unwrap_or(BAD_FORMAT));
    }
    Ok(flags)
}

fn new_key() -> Key {
    Key { decoded: [0; KEY_BYTES_MAX], len: 0, base64: false }
}

fn opaque_too_long(tokens: &Tokens<'_>, start: usize) -> bool {
    (start..tokens.len()).any(|index| {
        let token = tokens.get(index);
        token[0] == b'O' && token.len() > OPAQUE_BYTES_MAX
    })
}

/// " k<key>", base64 encoded with a trailing " b" for a binary key.
fn put_key_flag(out: &mut dyn Reply, key: &[u8], base64_key: bool) {
    out.extend_from(b" k");
    if base64_key {
        let mut encoded = [0u8; ENCODED_KEY_BYTES_MAX];
        let written = base64::encode(key, &mut encoded);
        out.extend_from(&encoded[..written]);
        out.extend_from(b" b");
    } else {
        out.extend_from(key);
    }
}

/// The `O` and `k` flags, all a reply without an item reflects.
fn put_opaque_and_key(out: &mut dyn Reply, tokens: &Tokens<'_>, start: usize, key: &[u8], base64_key: bool) {
    for index in start..tokens.len() {
        let token = tokens.get(index);
        match token[0] {
            b'O' => {
                out.extend_from(b" ");
                out.extend_from(token);
            }
            b'k' => put_key_flag(out, key, base64_key),
            _ => {}
        }
    }
}

/// The checks every meta command but `me` starts with. `Err` carries the reply.
fn check_line(tokens: &Tokens<'_>, too_many_flags: &'static [u8]) -> Result<(), &'static [u8]> {
    if tokens.ntokens() < 3 {
        return Err(b"ERROR");
    }
    if tokens.get(1).len() > KEY_BYTES_MAX {
        return Err(BAD_FORMAT);
    }
    if tokens.ntokens() > META_NTOKENS_MAX {
        return Err(too_many_flags);
    }
    Ok(())
}

/// mg <key> <flags>*
fn process_get(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    if let Err(reply) = check_line(tokens, b"CLIENT_ERROR options flags are too long") {
        reply_line(out, false, reply);
        return;
    }
    let mut key = new_key();
    let flags = match parse_flags(tokens, 2, &mut key) {
        Ok(flags) => flags,
        Err(reply) => {
            reply_line(out, false, reply);
            return;
        }
    };
    if opaque_too_long(tokens, 2) {
        reply_line(out, false, b"CLIENT_ERROR opaque token too long");
        return;
    }
    let key_token = tokens.get(1);
    let key_bytes = key.bytes(key_token);
    // The clock is read only for flags that need the time (GETs are the hot path).
    let reports_time = (2..tokens.len()).any(|index| matches!(tokens.get(index)[0], b't' | b'l'));
    let now_unix_s = if reports_time { session.now_unix_s() } else { 0 };
    let options = GetOptions {
        touch_exptime_unix_s: flags.touch_exptime.map(|exptime| session.exptime_unix_s(i64::from(exptime))),
        no_bump: flags.no_bump,
        vivify_exptime_unix_s: flags.vivify_exptime.map(|exptime| session.exptime_unix_s(i64::from(exptime))),
        // memcached wins when the item expires before now + R (a negative R never wins).
        recache_below_ttl_s: flags.recache_exptime.map(|exptime| exptime.max(0) as u64),
    };
    let mut reply_bytes = 0;
    let outcome = session.store.get(key_bytes, options, &session.waker, &mut |item: &ItemView<'_>| {
        reply_bytes = write_get_hit(out, tokens, &flags, key_bytes, item, now_unix_s);
    });
    if outcome == GetOutcome::Pending {
        session.waiting = true;
        return;
    }
    session.reply_bytes += reply_bytes;
    let touched = flags.touch_exptime.is_some();
    session.counts.count_retrieval(touched, outcome == GetOutcome::Hit);
    if outcome == GetOutcome::Miss && !flags.quiet {
        out.extend_from(b"EN");
        put_opaque_and_key(out, tokens, 2, key_bytes, flags.base64_key);
        out.extend_from(b"\r\n");
    }
}

/// Writes the reply to a hit; returns the value bytes written.
fn write_get_hit(out: &mut dyn Reply, tokens: &Tokens<'_>, flags: &Flags, key: &[u8], item: &ItemView<'_>, now_unix_s: u64) -> usize {
    // With C and v, the value is sent only if the client's copy is out of date.
    let send_value = flags.value && flags.compare_cas != Some(item.cas);
    if send_value {
        out.extend_from(b"VA ");
        put_u64(out, item.value.len() as u64);
    } else {
        out.extend_from(b"HD");
    }
    for index in 2..tokens.len() {
        let token = tokens.get(index);
        match token[0] {
            b's' => {
                out.extend_from(b" s");
                put_u64(out, item.value.len() as u64);
            }
            b't' => {
                out.extend_from(b" t");
                put_i64(out, ttl_remaining_s(item.exptime_unix_s, now_unix_s));
            }
            b'c' => {
                out.extend_from(b" c");
                put_u64(out, item.cas);
            }
            b'f' => {
                out.extend_from(b" f");
                put_u64(out, u64::from(item.flags));
            }
            b'l' => {
                out.extend_from(b" l");
                put_u64(out, now_unix_s.saturating_sub(item.last_access_unix_s));
            }
            b'h' => out.extend_from(if item.fetched_before { b" h1" } else { b" h0" }),
            b'O' => {
                out.extend_from(b" ");
                out.extend_from(token);
            }
            b'k' => put_key_flag(out, key, flags.base64_key),
            _ => {}
        }
    }
    // memcached's order: Z (someone else holds the token), X (stale), W (this request won).
    if item.win_token_sent {
        out.extend_from(b" Z");
    }
    if item.stale {
        out.extend_from(b" X");
    }
    if item.win {
        out.extend_from(b" W");
    }
    out.extend_from(b"\r\n");
    if !send_value {
        return 0;
    }
    out.extend_from(item.value);
    out.extend_from(b"\r\n");
    item.value.len()
}

/// ms <key> <datalen> <flags>*\r\n<data>\r\n
fn process_set(session: &mut Session, tokens: &Tokens<'_>, line_consumed: usize, data: &[u8], out: &mut dyn Reply) -> Step {
    let done = Step::Done { consumed: line_consumed };
    if tokens.ntokens() < 3 {
        reply_line(out, false, b"ERROR");
        return done;
    }
    if tokens.get(1).len() > KEY_BYTES_MAX || tokens.ntokens() == 3 {
        reply_line(out, false, BAD_FORMAT);
        return done;
    }
    if tokens.ntokens() > META_NTOKENS_MAX {
        reply_line(out, false, b"CLIENT_ERROR options flags too long");
        return done;
    }
    let value_bytes = match parse_i32(tokens.get(2)) {
        Some(bytes) if (0..=i32::MAX - 2).contains(&bytes) => bytes as usize,
        _ => {
            reply_line(out, false, BAD_FORMAT);
            return done;
        }
    };
    // From here on the size is known: errors skip the data block so the stream stays in sync.
    let block_bytes = value_bytes + 2;
    let refuse = |out: &mut dyn Reply, reply: &[u8]| {
        reply_line(out, false, reply);
        Step::Skip { consumed: line_consumed, skip_bytes: block_bytes as u64 }
    };
    let mut key = new_key();
    let flags = match parse_flags(tokens, 3, &mut key) {
        Ok(flags) => flags,
        Err(reply) => return refuse(out, reply),
    };
    let opaque_error = opaque_too_long(tokens, 3);
    let mode = match flags.mode {
        None | Some(b'S') => StoreMode::Set,
        Some(b'E') => StoreMode::Add,
        Some(b'A') => StoreMode::Append,
        Some(b'P') => StoreMode::Prepend,
        Some(b'R') => StoreMode::Replace,
        Some(_) => return refuse(out, b"CLIENT_ERROR invalid mode for ms M token"),
    };
    if opaque_error {
        return refuse(out, b"CLIENT_ERROR opaque token too long");
    }
    let key_token = tokens.get(1);
    let key_bytes = key.bytes(key_token);
    if key_bytes.len() + value_bytes > session.max_item_bytes {
        session.counts.store_too_large += 1;
        // memcached 1.6.18 drops the old value whatever the mode.
        session.store.delete(key_bytes, DeleteOptions::default());
        return refuse(out, b"SERVER_ERROR object too large for cache");
    }
    if data.len() < block_bytes {
        return Step::NeedMore { bytes_needed: line_consumed + block_bytes };
    }
    let consumed = Step::Done { consumed: line_consumed + block_bytes };
    session.counts.cmd_set += 1;
    if &data[value_bytes..block_bytes] != b"\r\n" {
        reply_line(out, false, b"CLIENT_ERROR bad data chunk");
        return consumed;
    }
    // memcached's mapping onto its store modes: a CAS turns set and replace into its CAS command,
    // is checked by append and prepend, and is ignored by add.
    let (mode, compare_cas) = match (mode, flags.compare_cas) {
        (StoreMode::Set | StoreMode::Replace, Some(cas)) => (StoreMode::Set, Some(cas)),
        (StoreMode::Add, _) => (StoreMode::Add, None),
        (mode, cas) => (mode, cas),
    };
    let appending = matches!(mode, StoreMode::Append | StoreMode::Prepend);
    let exptime_unix_s = flags.touch_exptime.map_or(0, |exptime| session.exptime_unix_s(i64::from(exptime)));
    let vivify_exptime_unix_s = match flags.vivify_exptime {
        Some(exptime) if appending => Some(session.exptime_unix_s(i64::from(exptime))),
        _ => None,
    };
    let request = StoreRequest {
        mode,
        key: key_bytes,
        value: &data[..value_bytes],
        flags: flags.client_flags,
        exptime_unix_s,
        compare_cas,
        new_cas: flags.new_cas,
        invalidate: flags.invalidate && mode == StoreMode::Set && compare_cas.is_some(),
        vivify_exptime_unix_s,
    };
    let outcome = session.store.store(&request, &session.waker);
    if outcome == StoreOutcome::Pending {
        session.waiting = true;
        return consumed;
    }
    account_store(session, &request, outcome);
    let (code, cas): (&[u8], u64) = match outcome {
        StoreOutcome::Stored { cas } => {
            if flags.quiet {
                return consumed;
            }
            (b"HD", cas)
        }
        StoreOutcome::NotStored => (b"NS", 0),
        StoreOutcome::Exists => (b"EX", 0),
        StoreOutcome::NotFound if appending => (b"NS", 0),
        StoreOutcome::NotFound => (b"NF", 0),
        StoreOutcome::TooLarge => {
            reply_line(out, false, b"SERVER_ERROR object too large for cache");
            return consumed;
        }
        StoreOutcome::OutOfMemory => {
            reply_line(out, false, b"SERVER_ERROR out of memory storing object");
            return consumed;
        }
        StoreOutcome::Pending => unreachable!("answered above"),
    };
    out.extend_from(code);
    for index in 3..tokens.len() {
        let token = tokens.get(index);
        match token[0] {
            b'O' => {
                out.extend_from(b" ");
                out.extend_from(token);
            }
            b'k' => put_key_flag(out, key_bytes, flags.base64_key),
            b'c' => {
                out.extend_from(b" c");
                put_u64(out, cas);
            }
            _ => {}
        }
    }
    out.extend_from(b"\r\n");
    consumed
}

/// md <key> <flags>*
fn process_delete(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    if let Err(reply) = check_line(tokens, b"CLIENT_ERROR options flags too long") {
        reply_line(out, false, reply);
        return;
    }
    let mut key = new_key();
    let Ok(flags) = parse_flags(tokens, 2, &mut key) else {
        reply_line(out, false, b"CLIENT_ERROR invalid or duplicate flag");
        return;
    };
    if opaque_too_long(tokens, 2) {
        reply_line(out, false, b"CLIENT_ERROR opaque token too long");
        return;
    }
    let key_bytes = key.bytes(tokens.get(1));
    // T changes the expiry only of an invalidated item.
    let invalidate_exptime_unix_s = match (flags.invalidate, flags.touch_exptime) {
        (true, Some(exptime)) => Some(session.exptime_unix_s(i64::from(exptime))),
        (true, None) => Some(EXPTIME_KEEP),
        (false, _) => None,
    };
    let options = DeleteOptions {
        compare_cas: flags.compare_cas,
        invalidate_exptime_unix_s,
        new_cas: flags.new_cas,
    };
    let code: &[u8] = match session.store.delete(key_bytes, options) {
        DeleteOutcome::Deleted => {
            if !flags.invalidate {
                session.counts.delete_hits += 1;
            }
            if flags.quiet {
                return;
            }
            b"HD"
        }
        DeleteOutcome::NotFound => {
            session.counts.delete_misses += 1;
            b"NF"
        }
        DeleteOutcome::Exists => {
            session.counts.delete_misses += 1;
            b"EX"
        }
    };
    out.extend_from(code);
    put_opaque_and_key(out, tokens, 2, key_bytes, flags.base64_key);
    out.extend_from(b"\r\n");
}

/// ma <key> <flags>*
fn process_arithmetic(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    if let Err(reply) = check_line(tokens, b"CLIENT_ERROR options flags too long") {
        reply_line(out, false, reply);
        return;
    }
    let mut key = new_key();
    let Ok(flags) = parse_flags(tokens, 2, &mut key) else {
        reply_line(out, false, b"CLIENT_ERROR invalid or duplicate flag");
        return;
    };
    let increment = match flags.mode {
        None | Some(b'I') | Some(b'+') => true,
        Some(b'D') | Some(b'-') => false,
        Some(_) => {
            reply_line(out, false, b"CLIENT_ERROR invalid mode for ma M token");
            return;
        }
    };
    if opaque_too_long(tokens, 2) {
        reply_line(out, false, b"CLIENT_ERROR opaque token too long");
        return;
    }
    let key_bytes = key.bytes(tokens.get(1));
    let vivify_exptime_unix_s = flags.vivify_exptime.map(|exptime| session.exptime_unix_s(i64::from(exptime)));
    let touch_exptime_unix_s = flags.touch_exptime.map(|exptime| session.exptime_unix_s(i64::from(exptime)));
    let request = ArithmeticRequest {
        key: key_bytes,
        increment,
        delta: flags.delta.unwrap_or(1),
        // memcached treats a CAS of 0 as "no CAS given".
        compare_cas: flags.compare_cas.filter(|&cas| cas != 0),
        new_cas: flags.new_cas,
        initial: vivify_exptime_unix_s.map(|exptime_unix_s| (flags.initial.unwrap_or(0), exptime_unix_s)),
        touch_exptime_unix_s,
    };
    let code: &[u8] = match session.store.arithmetic(&request, &session.waker) {
        ArithmeticOutcome::Pending => {
            session.waiting = true;
            return;
        }
        ArithmeticOutcome::Value { value, cas, exptime_unix_s } => {
            if increment {
                session.counts.incr_hits += 1;
            } else {
                session.counts.decr_hits += 1;
            }
            if !flags.quiet {
                let ttl_s = ttl_remaining_s(exptime_unix_s, session.now_unix_s());
                write_arithmetic_value(out, tokens, &flags, key_bytes, value, cas, ttl_s);
            }
            return;
        }
        ArithmeticOutcome::NonNumeric => {
            reply_line(out, false, b"CLIENT_ERROR cannot increment or decrement non-numeric value");
            return;
        }
        ArithmeticOutcome::NotFound => {
            if increment {
                session.counts.incr_misses += 1;
            } else {
                session.counts.decr_misses += 1;
            }
            b"NF"
        }
        ArithmeticOutcome::Exists => b"EX",
    };
    out.extend_from(code);
    put_opaque_and_key(out, tokens, 2, key_bytes, flags.base64_key);
    out.extend_from(b"\r\n");
}

fn write_arithmetic_value(
    out: &mut dyn Reply,
    tokens: &Tokens<'_>,
    flags: &Flags,
    key: &[u8],
    value: u64,
    cas: u64,
    ttl_s: i64,
) {
    let mut digits = [0u8; crate::number::U64_DIGITS_MAX];
    let digits = crate::number::format_u64(value, &mut digits);
    if flags.value {
        out.extend_from(b"VA ");
        put_u64(out, digits.len() as u64);
    } else {
        out.extend_from(b"HD");
    }
    for index in 2..tokens.len() {
        let token = tokens.get(index);
        match token[0] {
            b'c' => {
                out.extend_from(b" c");
                put_u64(out, cas);
            }
            b't' => {
                out.extend_from(b" t");
                put_i64(out, ttl_s);
            }
            b'O' => {
                out.extend_from(b" ");
                out.extend_from(token);
            }
            b'k' => put_key_flag(out, key, flags.base64_key),
            _ => {}
        }
    }
    out.extend_from(b"\r\n");
    if flags.value {
        out.extend_from(digits);
        out.extend_from(b"\r\n");
    }
}

/// Bytes memcached's `me` reports as an item's size: its item header (48 bytes, 8 more for the CAS),
/// the key with a NUL, the value with "\r\n", and 4 bytes of client flags when they are not 0.
fn memcached_item_bytes(key_len: usize, value_len: usize, flags: u32) -> usize {
    48 + 8 + key_len + 1 + value_len + 2 + if flags == 0 { 0 } else { 4 }
}

/// me <key> [b]: a human-readable dump of an item's metadata.
fn process_debug(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    let key_token = tokens.get(1);
    if tokens.ntokens() < 3 || key_token.len() > KEY_BYTES_MAX {
        reply_line(out, false, BAD_FORMAT);
        return;
    }
    let mut decoded = [0u8; KEY_BYTES_MAX];
    let base64_key = tokens.ntokens() >= 4 && tokens.get(2) == b"b";
    let key: &[u8] = if base64_key {
        match base64::decode(key_token, &mut decoded[..key_token.len()]) {
            Some(len) => &decoded[..len],
            None => {
                reply_line(out, false, BAD_FORMAT);
                return;
            }
        }
    } else {
        key_token
    };
    let now_unix_s = session.now_unix_s();
    let options = GetOptions { no_bump: true, ..GetOptions::default() };
    let outcome = session.store.get(key, options, &session.waker, &mut |item: &ItemView<'_>| {
        out.extend_from(b"ME ");
        if base64_key {
            let mut encoded = [0u8; ENCODED_KEY_BYTES_MAX];
            let written = base64::encode(key, &mut encoded);
            out.extend_from(&encoded[..written]);
        } else {
            out.extend_from(key);
        }
        out.extend_from(b" exp=");
        put_i64(out, ttl_remaining_s(item.exptime_unix_s, now_unix_s));
        out.extend_from(b" la=");
        put_u64(out, now_unix_s.saturating_sub(item.last_access_unix_s));
        out.extend_from(b" cas=");
        put_u64(out, item.cas);
        out.extend_from(if item.fetched_before { b" fetch=yes" } else { b" fetch=no" });
        // memcached's slab class has no equivalent here; 1 is the class of small items.
        out.extend_from(b" cls=1 size=");
        put_u64(out, memcached_item_bytes(key.len(), item.value.len(), item.flags) as u64);
        out.extend_from(b"\r\n");
    });
    match outcome {
        GetOutcome::Miss => out.extend_from(b"EN\r\n"),
        GetOutcome::Pending => session.waiting = true,
        GetOutcome::Hit => {}
    }
}

#[cfg(test)]
#[path = "meta_tests.rs"]
mod tests;
