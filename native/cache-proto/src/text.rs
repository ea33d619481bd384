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
#[path = "text_tests.rs"]
mod tests;
