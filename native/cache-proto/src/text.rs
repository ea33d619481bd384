//! memcached's ASCII protocol: line framing, the classic commands, `-Y` style authentication, and
//! dispatch of meta commands to `crate::meta`. Replies and errors follow memcached 1.6.18's
//! proto_text.c byte for byte, including which errors `noreply` hides.
//!
//! Hot path: no allocation. Tokens are slices of the input line, numbers are parsed in place, and
//! replies (values included) are written straight into `out`, one copy from the store.

use crate::meta;
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::session::{put_u64, Reply, Session, Step};
use crate::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView,
    StoreMode, StoreOutcome, StoreRequest,
};
use crate::tokens::Tokens;

/// memcached's `KEY_MAX_LENGTH`.
pub const KEY_BYTES_MAX: usize = 250;

/// Longest retrieval line (`get`/`gets`/`gat`/`gats` with many keys) accepted. memcached lets a
/// multi-get line grow without bound; ours holds a few thousand maximal keys.
pub const RETRIEVAL_LINE_BYTES_MAX: usize = 1 << 20;

/// Most value bytes one retrieval command may return; past it the reply ends with memcached's
/// "SERVER_ERROR out of memory writing get response" instead of END.
pub const RETRIEVAL_REPLY_BYTES_MAX: usize = 64 << 20;

/// Longest "user password" block of text authentication (memcached's `MAX_AUTH_REQ_LEN`).
pub const AUTH_BLOCK_BYTES_MAX: usize = 16384;

/// Bytes of the terminator after a value.
const DATA_TERMINATOR: &[u8] = b"\r\n";

/// Handles the command at the start of `input` (never empty).
pub(crate) fn process_command(session: &mut Session, input: &[u8], out: &mut dyn Reply) -> Step {
    assert!(!input.is_empty());
    if !session.authenticated {
        return process_authentication(session, input, out);
    }
    let line_bytes_max = session.config.max_line_bytes;
    let newline = match find_byte(&input[..input.len().min(line_bytes_max + 1)], b'\n') {
        Some(newline) => newline,
        None if input.len() <= line_bytes_max => {
            return Step::NeedMore { bytes_needed: input.len() + 1 };
        }
        None if is_retrieval(input) => {
            let bound = input.len().min(RETRIEVAL_LINE_BYTES_MAX.max(line_bytes_max) + 1);
            match find_byte(&input[line_bytes_max..bound], b'\n') {
                Some(offset) => line_bytes_max + offset,
                None if input.len() <= RETRIEVAL_LINE_BYTES_MAX => {
                    return Step::NeedMore { bytes_needed: input.len() + 1 };
                }
                None => return line_too_long(out),
            }
        }
        None => return line_too_long(out),
    };
    let line_consumed = newline + 1;
    let line = command_line(&input[..newline]);
    let tokens = Tokens::split(line);
    let data = &input[line_consumed..];
    dispatch(session, &tokens, line_consumed, data, out)
}

/// memcached closes such a connection without a word; a reason helps whoever reads the capture.
fn line_too_long(out: &mut dyn Reply) -> Step {
    out.extend_from(b"CLIENT_ERROR line too long\r\n");
    Step::Close { consumed: 0 }
}

/// The command in a line without its '\n': memcached drops one '\r' before it (when the line has
/// two bytes or more) and, being C, stops at the first NUL.
fn command_line(line: &[u8]) -> &[u8] {
    let line = if line.len() > 1 && line[line.len() - 1] == b'\r' { &line[..line.len() - 1] } else { line };
    match find_byte(line, 0) {
        Some(nul) => &line[..nul],
        None => line,
    }
}

/// Whether an unterminated line may grow past `max_line_bytes`: memcached allows it for
/// multi-gets (after at most 100 leading spaces); gat/gats take as many keys, so they may too.
fn is_retrieval(input: &[u8]) -> bool {
    let spaces = input.iter().take(101).take_while(|&&byte| byte == b' ').count();
    if spaces > 100 {
        return false;
    }
    let command = &input[spaces..];
    [&b"get "[..], b"gets ", b"gat ", b"gats "].iter().any(|prefix| command.starts_with(prefix))
}

/// Position of the first `byte` in `haystack`; eight bytes per step on long inputs.
pub(crate) fn find_byte(haystack: &[u8], byte: u8) -> Option<usize> {
    const LOW_BITS: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let pattern = LOW_BITS.wrapping_mul(u64::from(byte));
    let mut chunks = haystack.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunks of eight")) ^ pattern;
        // A zero byte in `word` is a match (the classic "has zero byte" test).
        if word.wrapping_sub(LOW_BITS) & !word & HIGH_BITS != 0 {
            return chunk.iter().position(|&b| b == byte).map(|index| offset + index);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|&b| b == byte).map(|index| offset + index)
}

/// Appends `text` and a line end, unless the client asked for no reply.
pub(crate) fn reply_line(out: &mut dyn Reply, noreply: bool, text: &[u8]) {
    if !noreply {
        out.extend_from(text);
        out.extend_from(b"\r\n");
    }
}

fn done(consumed: usize) -> Step {
    Step::Done { consumed }
}

fn dispatch(session: &mut Session, tokens: &Tokens<'_>, line_consumed: usize, data: &[u8], out: &mut dyn Reply) -> Step {
    let command = tokens.get(0);
    // Every command has a name of two bytes or more (memcached answers ERROR before looking further).
    if command.len() < 2 {
        reply_line(out, false, b"ERROR");
        return done(line_consumed);
    }
    let ntokens = tokens.ntokens();
    match command {
        b"get" | b"gets" | b"gat" | b"gats" | b"bget" => {
            if ntokens < 3 {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            let return_cas = command == b"gets" || command == b"gats";
            let touch = command == b"gat" || command == b"gats";
            process_retrieval(session, tokens, return_cas, touch, out);
            done(line_consumed)
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let is_cas = command == b"cas";
            let arity_ok = if is_cas { ntokens == 7 || ntokens == 8 } else { ntokens == 6 || ntokens == 7 };
            if !arity_ok {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            let mode = match command {
                b"add" => StoreMode::Add,
                b"replace" => StoreMode::Replace,
                b"append" => StoreMode::Append,
                b"prepend" => StoreMode::Prepend,
                _ => StoreMode::Set,
            };
            process_update(session, tokens, mode, is_cas, line_consumed, data, out)
        }
        b"delete" => {
            if !(3..=5).contains(&ntokens) {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            process_delete(session, tokens, out);
            done(line_consumed)
        }
        b"incr" | b"decr" => {
            if ntokens != 4 && ntokens != 5 {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            process_arithmetic(session, tokens, command == b"incr", out);
            done(line_consumed)
        }
        b"touch" => {
            if ntokens != 4 && ntokens != 5 {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            process_touch(session, tokens, out);
            done(line_consumed)
        }
        b"mg" | b"ms" | b"md" | b"ma" | b"mn" | b"me" => {
            let step = meta::process_command(session, tokens, line_consumed, data, out);
            // An incomplete command is parsed again with more input: count it once, when handled.
            if !matches!(step, Step::NeedMore { .. }) {
                session.counts.cmd_meta += 1;
            }
            step
        }
        b"stats" => {
            process_stats(session, tokens, out);
            done(line_consumed)
        }
        b"flush_all" => {
            if !(2..=4).contains(&ntokens) {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            process_flush_all(session, tokens, out);
            done(line_consumed)
        }
        b"version" => {
            out.extend_from(b"VERSION ");
            out.extend_from(session.config.version.as_bytes());
            out.extend_from(b"\r\n");
            done(line_consumed)
        }
        b"verbosity" => {
            if ntokens != 3 && ntokens != 4 {
                reply_line(out, false, b"ERROR");
                return done(line_consumed);
            }
            let noreply = tokens.last() == b"noreply";
            // The level is accepted and ignored: this layer does not log per command.
            let reply: &[u8] = if parse_u32(tokens.get(1)).is_some() { b"OK" } else { b"CLIENT_ERROR bad command line format" };
            reply_line(out, noreply, reply);
            done(line_consumed)
        }
        b"quit" => Step::Close { consumed: line_consumed },
        b"shutdown" => {
            reply_line(out, false, b"ERROR: shutdown not enabled");
            done(line_consumed)
        }
        _ => {
            // memcached hangs up on HTTP requests rather than answering each header line; it looks
            // only where no command family matched the first letter.
            let family_matched = b"gsacidt".contains(&command[0]) || (command[0] == b'm' && command.len() == 2);
            if !family_matched && tokens.last().starts_with(b"HTTP/") {
                return Step::Close { consumed: line_consumed };
            }
            reply_line(out, false, b"ERROR");
            done(line_consumed)
        }
    }
}

/// get, gets, gat, gats (and memcached's undocumented bget).
fn process_retrieval(session: &mut Session, tokens: &Tokens<'_>, return_cas: bool, touch: bool, out: &mut dyn Reply) {
    let mut options = GetOptions::default();
    let first_key = if touch {
        let Some(exptime) = parse_i32(tokens.get(1)) else {
            reply_line(out, false, b"CLIENT_ERROR invalid exptime argument");
            return;
        };
        options.touch_exptime_unix_s = Some(session.exptime_unix_s(i64::from(exptime)));
        2
    } else {
        1
    };
    // memcached answers a too-long key with the error alone, dropping the values found before it:
    // check first, since replies already written cannot be taken back.
    if tokens.from(first_key).any(|key| key.len() > KEY_BYTES_MAX) {
        reply_line(out, false, b"CLIENT_ERROR bad command line format");
        return;
    }
    let store = &*session.store;
    let waker = &session.waker;
    let counts = &mut session.counts;
    let mut reply_bytes = 0usize;
    let mut reply_full = false;
    for key in tokens.from(first_key) {
        let outcome = store.get(key, options, waker, &mut |item: &ItemView<'_>| {
            // Nothing bounds how often a line may name one large item: bound the reply instead.
            if reply_bytes + item.value.len() > RETRIEVAL_REPLY_BYTES_MAX {
                reply_full = true;
                return;
            }
            reply_bytes += item.value.len();
            write_value(out, key, item, return_cas);
        });
        if reply_full {
            break;
        }
        if outcome == GetOutcome::Pending {
            // The whole command runs again (its replies so far are taken back).
            session.waiting = true;
            return;
        }
        counts.count_retrieval(touch, outcome == GetOutcome::Hit);
    }
    session.reply_bytes += reply_bytes;
    if reply_full {
        // memcached's answer when it cannot build a get reply; it ends the reply in place of END.
        reply_line(out, false, b"SERVER_ERROR out of memory writing get response");
        return;
    }
    out.extend_from(b"END\r\n");
}

/// "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n".
fn write_value(out: &mut dyn Reply, key: &[u8], item: &ItemView<'_>, return_cas: bool) {
    out.extend_from(b"VALUE ");
    out.extend_from(key);
    out.extend_from(b" ");
    put_u64(out, u64::from(item.flags));
    out.extend_from(b" ");
    put_u64(out, item.value.len() as u64);
    if return_cas {
        out.extend_from(b" ");
        put_u64(out, item.cas);
    }
    out.extend_from(b"\r\n");
    out.extend_from(item.value);
    out.extend_from(DATA_TERMINATOR);
}

/// set, add, replace, append, prepend, cas: the command line, then `<bytes>` of data and "\r\n".
fn process_update(
    session: &mut Session,
    tokens: &Tokens<'_>,
    mode: StoreMode,
    is_cas: bool,
    line_consumed: usize,
    data: &[u8],
    out: &mut dyn Reply,
) -> Step {
    // memcached reads `noreply` first, so it silences even the format errors below.
    let noreply = tokens.last() == b"noreply";
    let key = tokens.get(1);
    if key.len() > KEY_BYTES_MAX {
        // The data block is not skipped: memcached reads it as the next command.
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return done(line_consumed);
    }
    let (Some(flags), Some(exptime), Some(value_bytes)) =
        (parse_u32(tokens.get(2)), parse_i32(tokens.get(3)), parse_i32(tokens.get(4)))
    else {
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return done(line_consumed);
    };
    let compare_cas = if is_cas {
        let Some(cas) = parse_u64(tokens.get(5)) else {
            reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
            return done(line_consumed);
        };
        Some(cas)
    } else {
        None
    };
    if !(0..=i32::MAX - 2).contains(&value_bytes) {
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return done(line_consumed);
    }
    let value_bytes = value_bytes as usize;
    let block_bytes = value_bytes + DATA_TERMINATOR.len();
    if key.len() + value_bytes > session.max_item_bytes {
        // Refuse before buffering: skip the block as it arrives, so the stream stays in sync.
        session.counts.store_too_large += 1;
        if mode == StoreMode::Set {
            // memcached drops the old value rather than leave it stale after a failed set.
            session.store.delete(key, DeleteOptions::default());
        }
        reply_line(out, noreply, b"SERVER_ERROR object too large for cache");
        return Step::Skip { consumed: line_consumed, skip_bytes: block_bytes as u64 };
    }
    if data.len() < block_bytes {
        return Step::NeedMore { bytes_needed: line_consumed + block_bytes };
    }
    let consumed = line_consumed + block_bytes;
    session.counts.cmd_set += 1;
    if &data[value_bytes..block_bytes] != DATA_TERMINATOR {
        reply_line(out, noreply, b"CLIENT_ERROR bad data chunk");
        return done(consumed);
    }
    let exptime_unix_s = session.exptime_unix_s(i64::from(exptime));
    let mut request = StoreRequest::new(mode, key, &data[..value_bytes], flags, exptime_unix_s);
    request.compare_cas = compare_cas;
    let outcome = session.store.store(&request, &session.waker);
    if outcome == StoreOutcome::Pending {
        session.waiting = true;
        return done(consumed);
    }
    account_store(session, &request, outcome);
    let reply: &[u8] = match outcome {
        StoreOutcome::Stored { .. } => b"STORED",
        StoreOutcome::NotStored => b"NOT_STORED",
        StoreOutcome::Exists => b"EXISTS",
        // Append/prepend with a CAS find nothing to compare with: memcached says NOT_STORED.
        StoreOutcome::NotFound if matches!(mode, StoreMode::Append | StoreMode::Prepend) => b"NOT_STORED",
        StoreOutcome::NotFound => b"NOT_FOUND",
        StoreOutcome::TooLarge => b"SERVER_ERROR object too large for cache",
        StoreOutcome::OutOfMemory => b"SERVER_ERROR out of memory storing object",
        StoreOutcome::Pending => unreachable!("answered above"),
    };
    reply_line(out, noreply, reply);
    done(consumed)
}

/// memcached's side effects of a store outcome, shared by the three protocols: the CAS and
/// failure counters, and a failed set removing the old value rather than leaving it stale.
pub(crate) fn account_store(session: &mut Session, request: &StoreRequest<'_>, outcome: StoreOutcome) {
    let cas_command = request.mode == StoreMode::Set && request.compare_cas.is_some();
    match outcome {
        StoreOutcome::Stored { .. } if cas_command => session.counts.cas_hits += 1,
        StoreOutcome::Exists if cas_command => session.counts.cas_badval += 1,
        StoreOutcome::NotFound if cas_command => session.counts.cas_misses += 1,
        StoreOutcome::TooLarge | StoreOutcome::OutOfMemory => {
            if outcome == StoreOutcome::TooLarge {
                session.counts.store_too_large += 1;
            } else {
                session.counts.store_no_memory += 1;
            }
            if request.mode == StoreMode::Set {
                session.store.delete(request.key, DeleteOptions::default());
            }
        }
        _ => {}
    }
}

/// delete <key> [0] [noreply] (memcached still accepts the old "hold time" if it is 0).
fn process_delete(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    let ntokens = tokens.ntokens();
    let mut noreply = false;
    if ntokens > 3 {
        let hold_is_zero = tokens.get(2) == b"0";
        noreply = tokens.last() == b"noreply";
        let valid = (ntokens == 4 && (hold_is_zero || noreply)) || (ntokens == 5 && hold_is_zero && noreply);
        if !valid {
            reply_line(out, noreply, b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
            return;
        }
    }
    let key = tokens.get(1);
    if key.len() > KEY_BYTES_MAX {
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return;
    }
    match session.store.delete(key, DeleteOptions::default()) {
        DeleteOutcome::Deleted => {
            session.counts.delete_hits += 1;
            reply_line(out, noreply, b"DELETED");
        }
        DeleteOutcome::NotFound | DeleteOutcome::Exists => {
            session.counts.delete_misses += 1;
            reply_line(out, noreply, b"NOT_FOUND");
        }
    }
}

/// incr|decr <key> <delta> [noreply].
fn process_arithmetic(session: &mut Session, tokens: &Tokens<'_>, increment: bool, out: &mut dyn Reply) {
    let noreply = tokens.last() == b"noreply";
    let key = tokens.get(1);
    if key.len() > KEY_BYTES_MAX {
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return;
    }
    let Some(delta) = parse_u64(tokens.get(2)) else {
        reply_line(out, noreply, b"CLIENT_ERROR invalid numeric delta argument");
        return;
    };
    let request = ArithmeticRequest {
        key,
        increment,
        delta,
        compare_cas: None,
        new_cas: None,
        initial: None,
        touch_exptime_unix_s: None,
    };
    match session.store.arithmetic(&request, &session.waker) {
        ArithmeticOutcome::Pending => session.waiting = true,
        ArithmeticOutcome::Value { value, .. } => {
            if increment {
                session.counts.incr_hits += 1;
            } else {
                session.counts.decr_hits += 1;
            }
            if !noreply {
                put_u64(out, value);
                out.extend_from(b"\r\n");
            }
        }
        ArithmeticOutcome::NonNumeric => {
            reply_line(out, noreply, b"CLIENT_ERROR cannot increment or decrement non-numeric value");
        }
        ArithmeticOutcome::NotFound | ArithmeticOutcome::Exists => {
            if increment {
                session.counts.incr_misses += 1;
            } else {
                session.counts.decr_misses += 1;
            }
            reply_line(out, noreply, b"NOT_FOUND");
        }
    }
}

/// touch <key> <exptime> [noreply].
fn process_touch(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    let noreply = tokens.last() == b"noreply";
    let key = tokens.get(1);
    if key.len() > KEY_BYTES_MAX {
        reply_line(out, noreply, b"CLIENT_ERROR bad command line format");
        return;
    }
    let Some(exptime) = parse_i32(tokens.get(2)) else {
        reply_line(out, noreply, b"CLIENT_ERROR invalid exptime argument");
        return;
    };
    let options = GetOptions {
        touch_exptime_unix_s: Some(session.exptime_unix_s(i64::from(exptime))),
        ..GetOptions::default()
    };
    session.counts.cmd_touch += 1;
    match session.store.get(key, options, &session.waker, &mut |_| {}) {
        GetOutcome::Pending => session.waiting = true,
        GetOutcome::Hit => {
            session.counts.touch_hits += 1;
            reply_line(out, noreply, b"TOUCHED");
        }
        GetOutcome::Miss => {
            session.counts.touch_misses += 1;
            reply_line(out, noreply, b"NOT_FOUND");
        }
    }
}

/// flush_all [delay] [noreply].
fn process_flush_all(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    let noreply = tokens.last() == b"noreply";
    session.counts.cmd_flush += 1;
    let mut delay: i32 = 0;
    if tokens.ntokens() != if noreply { 3 } else { 2 } {
        match parse_i32(tokens.get(1)) {
            Some(parsed) => delay = parsed,
            None => {
                reply_line(out, noreply, b"CLIENT_ERROR invalid exptime argument");
                return;
            }
        }
    }
    // A delay of 0 or less flushes now; a positive one is an exptime (relative or absolute).
    let at_unix_s = if delay > 0 { session.exptime_unix_s(i64::from(delay)) } else { 0 };
    session.store.flush_all(at_unix_s);
    reply_line(out, noreply, b"OK");
}

/// stats [reset|settings|items|slabs|sizes|conns|detail ...].
fn process_stats(session: &mut Session, tokens: &Tokens<'_>, out: &mut dyn Reply) {
    if tokens.len() == 1 {
        let stats = session.general_stats();
        write_stats(out, &stats);
        return;
    }
    match tokens.get(1) {
        b"reset" => {
            session.flush_counts();
            session.config.counters.reset();
            reply_line(out, false, b"RESET");
        }
        b"settings" => {
            let stats = session.settings_stats();
            write_stats(out, &stats);
        }
        // Slab, item and connection tables belong to the store and the server; none to report here.
        b"items" | b"slabs" | b"sizes" | b"conns" => reply_line(out, false, b"END"),
        b"detail" => match tokens.get(2) {
            b"on" | b"off" => reply_line(out, false, b"OK"),
            b"dump" => reply_line(out, false, b"END"),
            _ => reply_line(out, false, b"CLIENT_ERROR usage: stats detail on|off|dump"),
        },
        _ => reply_line(out, false, b"ERROR"),
    }
}

fn write_stats(out: &mut dyn Reply, stats: &[(String, String)]) {
    for (name, value) in stats {
        out.extend_from(b"STAT ");
        out.extend_from(name.as_bytes());
        out.extend_from(b" ");
        out.extend_from(value.as_bytes());
        out.extend_from(b"\r\n");
    }
    out.extend_from(b"END\r\n");
}

/// Before authentication, memcached's `-Y` mode accepts one thing: "set <key> <flags> <exptime>
/// <bytes>\r\n" followed by "<user> <password>\r\n" of that many bytes. Anything else is answered
/// `CLIENT_ERROR unauthenticated`.
fn process_authentication(session: &mut Session, input: &[u8], out: &mut dyn Reply) -> Step {
    if let Some(block_bytes) = session.text_auth_block_bytes {
        if input.len() < block_bytes {
            return Step::NeedMore { bytes_needed: block_bytes };
        }
        session.text_auth_block_bytes = None;
        check_authentication_block(session, &input[..block_bytes], out);
        return done(block_bytes);
    }
    let line_bytes_max = session.config.max_line_bytes;
    let Some(newline) = find_byte(&input[..input.len().min(line_bytes_max + 1)], b'\n') else {
        if input.len() > line_bytes_max {
            return line_too_long(out);
        }
        return Step::NeedMore { bytes_needed: input.len() + 1 };
    };
    let line_consumed = newline + 1;
    // memcached tokenizes this line with its '\r' still attached: the size token tolerates it.
    let line = &input[..newline];
    let line = match find_byte(line, 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let tokens = Tokens::split(line);
    let block_bytes = match parse_u32(tokens.get(4)) {
        Some(bytes) if tokens.len() >= 5 && tokens.get(0) == b"set" => bytes as usize,
        _ => {
            reply_line(out, false, b"CLIENT_ERROR unauthenticated");
            return done(line_consumed);
        }
    };
    if block_bytes > AUTH_BLOCK_BYTES_MAX {
        reply_line(out, false, b"CLIENT_ERROR auth token too long");
        return done(line_consumed);
    }
    session.text_auth_block_bytes = Some(block_bytes + DATA_TERMINATOR.len());
    done(line_consumed)
}

fn check_authentication_block(session: &mut Session, block: &[u8], out: &mut dyn Reply) {
    let Some(payload) = block.strip_suffix(DATA_TERMINATOR) else {
        reply_line(out, false, b"CLIENT_ERROR bad command line termination");
        return;
    };
    let Some(space) = find_byte(payload, b' ') else {
        reply_line(out, false, b"CLIENT_ERROR bad authentication token format");
        return;
    };
    let (user, password) = (&payload[..space], &payload[space + 1..]);
    let credentials = session.config.credentials.as_ref().expect("authentication is on only with credentials");
    session.counts.auth_cmds += 1;
    if credentials.check(user, password) {
        session.authenticated = true;
        reply_line(out, false, b"STORED");
    } else {
        session.counts.auth_errors += 1;
        reply_line(out, false, b"CLIENT_ERROR authentication failure");
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::Harness;

    fn stat(harness: &Harness, name: &str) -> u64 {
        harness.config.counters.get(name).unwrap()
    }

    #[test]
    fn set_then_get_gets() {
        let mut h = Harness::new();
        assert_eq!(h.text("set a 5 0 3\r\nabc\r\n"), "STORED\r\n");
        assert_eq!(h.text("get a\r\n"), "VALUE a 5 3\r\nabc\r\nEND\r\n");
        assert_eq!(h.text("gets a\r\n"), "VALUE a 5 3 1\r\nabc\r\nEND\r\n");
        assert_eq!(h.text("get missing\r\n"), "END\r\n");
        assert_eq!(h.text("set b 0 0 0\r\n\r\nget a b c\r\n"), "STORED\r\nVALUE a 5 3\r\nabc\r\nVALUE b 0 0\r\n\r\nEND\r\n");
        assert_eq!(stat(&h, "cmd_get"), 6);
        assert_eq!(stat(&h, "get_hits"), 4);
        assert_eq!(stat(&h, "get_misses"), 1 + 1);
        assert_eq!(stat(&h, "cmd_set"), 2);
    }

    #[test]
    fn bare_newlines_and_nul_bytes_are_accepted_like_memcached() {
        let mut h = Harness::new();
        assert_eq!(h.text("set a 0 0 1\nx\r\nget a\n"), "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
        // C string handling stops the command at a NUL.
        assert_eq!(h.send(b"get a\0junk\r\n"), b"VALUE a 0 1\r\nx\r\nEND\r\n");
        assert_eq!(h.text("\r\n"), "ERROR\r\n");
        assert_eq!(h.text("\n"), "ERROR\r\n");
        assert_eq!(h.text("x\r\n"), "ERROR\r\n");
        assert_eq!(h.text("nosuchcommand a b\r\n"), "ERROR\r\n");
    }

    #[test]
    fn storage_modes() {
        let mut h = Harness::new();
        assert_eq!(h.text("add a 0 0 1\r\n1\r\n"), "STORED\r\n");
        assert_eq!(h.text("add a 0 0 1\r\n2\r\n"), "NOT_STORED\r\n");
        assert_eq!(h.text("replace a 3 0 1\r\n3\r\n"), "STORED\r\n");
        assert_eq!(h.text("replace zz 0 0 1\r\n3\r\n"), "NOT_STORED\r\n");
        assert_eq!(h.text("append a 9 0 2\r\n45\r\n"), "STORED\r\n");
        assert_eq!(h.text("prepend a 9 0 2\r\n01\r\n"), "STORED\r\n");
        assert_eq!(h.text("append zz 0 0 1\r\n1\r\n"), "NOT_STORED\r\n");
        assert_eq!(h.text("prepend zz 0 0 1\r\n1\r\n"), "NOT_STORED\r\n");
        // Append and prepend keep the flags of the present item.
        assert_eq!(h.text("get a\r\n"), "VALUE a 3 5\r\n01345\r\nEND\r\n");
    }

    #[test]
    fn cas_command() {
        let mut h = Harness::new();
        assert_eq!(h.text("cas a 0 0 1 1\r\nx\r\n"), "NOT_FOUND\r\n");
        assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
        assert_eq!(h.text("cas a 0 0 1 99\r\ny\r\n"), "EXISTS\r\n");
        assert_eq!(h.text("cas a 0 0 1 1\r\ny\r\n"), "STORED\r\n");
        assert_eq!(h.text("gets a\r\n"), "VALUE a 0 1 2\r\ny\r\nEND\r\n");
        assert_eq!(h.text("cas a 0 0 1 2 noreply\r\nz\r\ncas a 0 0 1 x\r\nz\r\n"), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
        assert_eq!(h.text("cas a 0 0 1\r\n"), "ERROR\r\n");
        assert_eq!((stat(&h, "cas_misses"), stat(&h, "cas_badval"), stat(&h, "cas_hits")), (1, 1, 2));
    }

    #[test]
    fn noreply_silences_replies_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.text("set a 0 0 5 noreply\r\nhello\r\nget a\r\n"), "VALUE a 0 5\r\nhello\r\nEND\r\n");
        // memcached reads noreply before validating: the format error is silent, the block is a command.
        assert_eq!(h.text("set a x 0 5 noreply\r\nhello\r\n"), "ERROR\r\n");
        assert_eq!(h.text("add a 0 0 1 noreply\r\nx\r\ndelete a noreply\r\nincr a 1 noreply\r\ntouch a 1 noreply\r\n"), "");
        assert_eq!(h.text("flush_all noreply\r\nflush_all 0 noreply\r\nverbosity 1 noreply\r\n"), "");
        assert_eq!(h.text("set a 0 0 1 noreply\r\nab\r\n"), "ERROR\r\n");
    }

    #[test]
    fn storage_command_errors() {
        let mut h = Harness::new();
        let long_key = "k".repeat(251);
        // The block is not skipped after a format error: memcached parses it as a command.
        assert_eq!(h.text(&format!("set {long_key} 0 0 5\r\nhello\r\n")), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
        assert_eq!(h.text(&format!("set {} 0 0 1\r\nx\r\n", "k".repeat(250))), "STORED\r\n");
        assert_eq!(h.text("set a 0 0 1\r\nab\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
        assert_eq!(h.text("set a 0 0 -1\r\n"), "CLIENT_ERROR bad command line format\r\n");
        assert_eq!(h.text("set a -1 0 1\r\n"), "CLIENT_ERROR bad command line format\r\n");
        assert_eq!(h.text("set a 0 0\r\n"), "ERROR\r\n");
        assert_eq!(h.text("set a 0 0 1 noreply extra\r\n"), "ERROR\r\n");
        assert_eq!(h.text("set a 0 0 2147483646\r\n"), "CLIENT_ERROR bad command line format\r\n");
        // 32-bit truncation of memcached's 64-bit strtoul/strtol.
        assert_eq!(h.text("set a 4294967297 0 4294967297\r\nx\r\nget a\r\n"), "STORED\r\nVALUE a 1 1\r\nx\r\nEND\r\n");
    }

    #[test]
    fn too_large_values_are_refused_skipped_and_drop_the_old_value() {
        let mut h = Harness::with_max_item_bytes(100);
        assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
        assert_eq!(h.text("set a 0 0 100\r\n"), "SERVER_ERROR object too large for cache\r\n");
        // The refused block is skipped as it arrives, never buffered.
        assert_eq!(h.send(&[b'x'; 60]), b"");
        assert_eq!(h.pending(), 0);
        assert_eq!(h.text(&format!("{}\r\nget a\r\n", "x".repeat(40))), "END\r\n");
        assert_eq!(h.text("set b 0 0 200 noreply\r\n"), "");
        assert_eq!(h.text(&format!("{}\r\nget b\r\n", "y".repeat(200))), "END\r\n");
        // Key plus value at the limit is accepted.
        assert_eq!(h.text("set b 0 0 99\r\n"), "");
        assert_eq!(h.text(&format!("{}\r\n", "y".repeat(99))), "STORED\r\n");
        assert_eq!(stat(&h, "store_too_large"), 2);
    }

    #[test]
    fn values_arrive_in_pieces() {
        let mut h = Harness::new();
        assert_eq!(h.text("set a 0 0 10\r\n01234"), "");
        assert_eq!(h.session.bytes_needed(), Some(14 + 12));
        assert_eq!(h.text("56789\r"), "");
        assert_eq!(h.text("\nget"), "STORED\r\n");
        assert_eq!(h.text(" a\r\n"), "VALUE a 0 10\r\n0123456789\r\nEND\r\n");
    }

    #[test]
    fn retrieval_errors() {
        let mut h = Harness::new();
        assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
        assert_eq!(h.text("get\r\nget \r\ngets\r\n"), "ERROR\r\nERROR\r\nERROR\r\n");
        let long_key = "k".repeat(251);
        // Values found before the bad key are not sent: the error replaces the whole reply.
        assert_eq!(h.text(&format!("get a {long_key}\r\n")), "CLIENT_ERROR bad command line format\r\n");
        assert_eq!(h.text("gat x a\r\n"), "CLIENT_ERROR invalid exptime argument\r\n");
        assert_eq!(h.text("gat 10\r\n"), "END\r\n");
        assert_eq!(h.text("bget a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
    }

    #[test]
    fn many_keys_beyond_the_token_limit() {
        let mut h = Harness::new();
        for i in 0..40 {
            h.text(&format!("set k{i} {i} 0 1\r\n{}\r\n", i % 10));
        }
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let reply = h.text(&format!("get {}\r\n", keys.join(" ")));
        let expected: String = (0..40).map(|i| format!("VALUE k{i} {i} 1\r\n{}\r\n", i % 10)).collect();
        assert_eq!(reply, expected + "END\r\n");
    }

    #[test]
    fn a_retrieval_reply_is_bounded() {
        let mut h = Harness::new();
        let value = "v".repeat((1 << 20) - 100);
        h.text(&format!("set big 0 0 {}\r\n{value}\r\n", value.len()));
        let names = super::RETRIEVAL_REPLY_BYTES_MAX / value.len() + 1;
        let reply = h.send(format!("get {}\r\n", "big ".repeat(names)).as_bytes());
        let value_reply_bytes = format!("VALUE big 0 {}\r\n\r\n", value.len()).len() + value.len();
        let error = "SERVER_ERROR out of memory writing get response\r\n";
        assert_eq!(reply.len(), (names - 1) * value_reply_bytes + error.len());
        assert!(reply.ends_with(format!("\r\n{error}").as_bytes()));
        assert_eq!(h.text("mn\r\n"), "MN\r\n");
    }

    #[test]
    fn long_lines() {
        let mut h = Harness::new();
        // A multi-get may exceed the line limit.
        let line = format!("get {}", "x ".repeat(1500));
        assert_eq!(h.text(&line), "");
        assert_eq!(h.text("\r\n"), "END\r\n");
        // Anything else that long closes the connection.
        assert_eq!(h.send(&[b'x'; 3000]), b"CLIENT_ERROR line too long\r\n");
        assert!(h.closed);
        let mut out = Vec::new();
        assert!(h.session.process(b"get a\r\n", &mut out).close);
        assert!(out.is_empty());
    }

    #[test]
    fn delete() {
        let mut h = Harness::new();
        h.text("set a 0 0 1\r\nx\r\n");
        assert_eq!(h.text("delete a\r\ndelete a\r\n"), "DELETED\r\nNOT_FOUND\r\n");
        h.text("set a 0 0 1\r\nx\r\n");
        assert_eq!(h.text("delete a 0\r\n"), "DELETED\r\n");
        assert_eq!(h.text("delete a 1\r\n"), "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
        assert_eq!(h.text("delete a 1 noreply\r\ndelete a 0 noreply\r\n"), "");
        assert_eq!(h.text("delete\r\ndelete a 0 noreply x\r\n"), "ERROR\r\nERROR\r\n");
        assert_eq!((stat(&h, "delete_hits"), stat(&h, "delete_misses")), (2, 2));
    }

    #[test]
    fn incr_decr() {
        let mut h = Harness::new();
        assert_eq!(h.text("incr n 1\r\n"), "NOT_FOUND\r\n");
        h.text("set n 0 0 2\r\n10\r\n");
        assert_eq!(h.text("decr n 5\r\nget n\r\n"), "5\r\nVALUE n 0 2\r\n5 \r\nEND\r\n");
        assert_eq!(h.text("incr n 100\r\nget n\r\n"), "105\r\nVALUE n 0 3\r\n105\r\nEND\r\n");
        assert_eq!(h.text("decr n 1000\r\n"), "0\r\n");
        assert_eq!(h.text("incr n 18446744073709551615\r\nincr n 1\r\n"), "18446744073709551615\r\n0\r\n");
        assert_eq!(h.text("incr n -1\r\nincr n x\r\n"), "CLIENT_ERROR invalid numeric delta argument\r\n".repeat(2));
        h.text("set s 0 0 1\r\nx\r\n");
        assert_eq!(h.text("incr s 1\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
        assert_eq!(h.text("incr n\r\nincr n 1 noreply x\r\n"), "ERROR\r\nERROR\r\n");
        assert_eq!((stat(&h, "incr_hits"), stat(&h, "incr_misses"), stat(&h, "decr_hits")), (3, 1, 2));
    }

    #[test]
    fn touch_and_gat_move_expiry() {
        let mut h = Harness::new();
        h.text("set a 0 10 1\r\nx\r\n");
        assert_eq!(h.text("touch a 100\r\ntouch nope 100\r\n"), "TOUCHED\r\nNOT_FOUND\r\n");
        h.clock.advance(50);
        assert_eq!(h.text("gats 200 a nope\r\n"), "VALUE a 0 1 1\r\nx\r\nEND\r\n");
        h.clock.advance(150);
        assert_eq!(h.text("gat 0 a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
        h.clock.advance(1_000_000);
        assert_eq!(h.text("get a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
        assert_eq!(h.text("touch a -1\r\nget a\r\n"), "TOUCHED\r\nEND\r\n");
        assert_eq!(h.text("touch a\r\ntouch a x\r\n"), "ERROR\r\nCLIENT_ERROR invalid exptime argument\r\n");
        assert_eq!((stat(&h, "cmd_touch"), stat(&h, "touch_hits"), stat(&h, "touch_misses")), (6, 4, 2));
    }

    #[test]
    fn expiry_rules() {
        let mut h = Harness::new();
        h.text("set rel 0 10 1\r\nx\r\nset neg 0 -1 1\r\nx\r\n");
        let absolute = crate::test_support::START_UNIX_S + 20;
        h.text(&format!("set abs 0 {absolute} 1\r\nx\r\nset past 0 2592001 1\r\nx\r\n"));
        assert_eq!(h.text("get neg past\r\n"), "END\r\n");
        h.clock.advance(10);
        assert_eq!(h.text("get rel abs\r\n"), "VALUE abs 0 1\r\nx\r\nEND\r\n");
        h.clock.advance(10);
        assert_eq!(h.text("get abs\r\n"), "END\r\n");
    }

    #[test]
    fn flush_all() {
        let mut h = Harness::new();
        h.text("set a 0 0 1\r\nx\r\n");
        assert_eq!(h.text("flush_all\r\nget a\r\n"), "OK\r\nEND\r\n");
        h.text("set a 0 0 1\r\nx\r\n");
        assert_eq!(h.text("flush_all 10\r\nget a\r\n"), "OK\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
        h.clock.advance(10);
        assert_eq!(h.text("get a\r\n"), "END\r\n");
        assert_eq!(h.text("flush_all -1\r\nflush_all x\r\nflush_all 1 2 3\r\n"), "OK\r\nCLIENT_ERROR invalid exptime argument\r\nERROR\r\n");
        assert_eq!(stat(&h, "cmd_flush"), 4);
    }

    #[test]
    fn version_verbosity_quit_shutdown() {
        let mut h = Harness::new();
        assert_eq!(h.text("version\r\n"), "VERSION 1.6.18\r\n");
        assert_eq!(h.text("verbosity\r\nverbosity 1\r\nverbosity x\r\n"), "ERROR\r\nOK\r\nCLIENT_ERROR bad command line format\r\n");
        assert_eq!(h.text("shutdown\r\n"), "ERROR: shutdown not enabled\r\n");
        assert_eq!(h.text("mn\r\nquit\r\nget a\r\n"), "MN\r\n");
        assert!(h.closed);
        // HTTP requests get no answer but a closed connection.
        let mut h = Harness::new();
        assert_eq!(h.text("POST / HTTP/1.1\r\n"), "");
        assert!(h.closed);
    }

    #[test]
    fn stats() {
        let mut h = Harness::new();
        h.text("set a 0 0 1\r\nx\r\nget a\r\n");
        let stats = h.text("stats\r\n");
        assert!(stats.starts_with("STAT pid "), "{stats}");
        assert!(stats.contains("STAT version 1.6.18\r\n"));
        assert!(stats.contains("STAT cmd_get 1\r\nSTAT cmd_set 1\r\n"));
        assert!(stats.contains("STAT curr_items 1\r\n"));
        assert!(stats.ends_with("END\r\n"));
        assert_eq!(h.text("stats reset\r\n"), "RESET\r\n");
        assert!(h.text("stats\r\n").contains("STAT cmd_get 0\r\n"));
        assert!(h.text("stats settings\r\n").contains("STAT item_size_max 1048576\r\n"));
        assert_eq!(h.text("stats items\r\nstats slabs\r\nstats foo\r\n"), "END\r\nEND\r\nERROR\r\n");
        assert_eq!(h.text("stats detail\r\nstats detail on\r\n"), "CLIENT_ERROR usage: stats detail on|off|dump\r\nOK\r\n");
    }

    #[test]
    fn server_stats_come_first() {
        let mut h = Harness::with(|config| {
            config.server_stats = Some(std::sync::Arc::new(|| {
                vec![("pid".to_string(), "42".to_string()), ("threads".to_string(), "4".to_string())]
            }));
        });
        let stats = h.text("stats\r\n");
        assert!(stats.starts_with("STAT pid 42\r\nSTAT threads 4\r\nSTAT version 1.6.18\r\nSTAT cmd_get 0\r\n"), "{stats}");
    }

    #[test]
    fn authentication() {
        let mut h = Harness::with_credentials();
        assert_eq!(h.text("get a\r\n"), "CLIENT_ERROR unauthenticated\r\n");
        assert_eq!(h.text("mn\r\n"), "CLIENT_ERROR unauthenticated\r\n");
        assert_eq!(h.text("set a 0 0 x\r\n"), "CLIENT_ERROR unauthenticated\r\n");
        assert_eq!(h.text("set a 0 0 10\r\nuser wrong\r\n"), "CLIENT_ERROR authentication failure\r\n");
        assert_eq!(h.text("set a 0 0 10\r\nuserxwrong\r\n"), "CLIENT_ERROR bad authentication token format\r\n");
        assert_eq!(h.text("set a 0 0 10\r\nuser wrongXX"), "CLIENT_ERROR bad command line termination\r\n");
        assert_eq!(h.text("set a 0 0 99999\r\n"), "CLIENT_ERROR auth token too long\r\n");
        assert!(!h.session.is_authenticated());
        // The block may arrive in pieces.
        assert_eq!(h.text("set a 0 0 11\r\nuser se"), "");
        assert_eq!(h.text("cret\r\nget a\r\n"), "STORED\r\nEND\r\n");
        assert!(h.session.is_authenticated());
        let mut h = Harness::with_credentials();
        // Passwords may contain spaces and colons: everything after the first space.
        assert_eq!(h.text("set x 1 2 15\r\nother pass:word\r\n"), "STORED\r\n");
        assert_eq!((h.config.counters.get("auth_cmds"), h.config.counters.get("auth_errors")), (Some(1), Some(0)));
    }

    #[test]
    fn finds_bytes_at_every_offset() {
        for len in 0..40 {
            for position in 0..len {
                let mut haystack = vec![b'a'; len];
                haystack[position] = b'\n';
                assert_eq!(super::find_byte(&haystack, b'\n'), Some(position));
                haystack[position] = 0x8a;
                assert_eq!(super::find_byte(&haystack, b'\n'), None);
            }
        }
    }
}
