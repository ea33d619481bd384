//! memcached's binary protocol executed against the store: framing, validation and replies as in
//! memcached 1.6.18's proto_bin.c. Quiet commands send nothing on success (GETQ/GETKQ/GATQ/GATKQ:
//! nothing on a miss); errors are always sent.
//!
//! Untrusted lengths: a packet is buffered whole only when its value fits the store's item limit;
//! larger values are refused (VALUE_TOO_LARGE) and skipped as they arrive, and parts of a body a
//! command does not use are skipped the same way, never buffered.
//!
//! Deliberate differences from memcached 1.6.18: VERBOSITY is answered (memcached 1.6 answers
//! UNKNOWN_COMMAND); after an unknown opcode, or a body part a command ignores (STAT, TOUCH), exactly
//! the rest of the packet is skipped (memcached skips the wrong amount and loses the stream).

use crate::binary::{opcode, status, Header, HEADER_BYTES, MAGIC_REQUEST, MAGIC_RESPONSE};
use crate::session::{Reply, Session, Step};
use crate::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView,
    StoreMode, StoreOutcome, StoreRequest,
};
use crate::text::{account_store, AUTH_BLOCK_BYTES_MAX, KEY_BYTES_MAX};

/// memcached's `MAX_SASL_MECH_LEN`.
pub const SASL_MECHANISM_BYTES_MAX: usize = 32;

/// The only mechanism offered.
pub const SASL_MECHANISMS: &[u8] = b"PLAIN";

/// Binary INCR/DECR expiration meaning "fail on a miss instead of creating the item".
pub const ARITHMETIC_NO_CREATE: u32 = 0xffff_ffff;

/// memcached's text for an error status (the body of an error reply).
pub fn status_text(code: u16) -> &'static [u8] {
    match code {
        status::OUT_OF_MEMORY => b"Out of memory",
        status::UNKNOWN_COMMAND => b"Unknown command",
        status::KEY_NOT_FOUND => b"Not found",
        status::INVALID_ARGUMENTS => b"Invalid arguments",
        status::KEY_EXISTS => b"Data exists for key.",
        status::VALUE_TOO_LARGE => b"Too large.",
        status::NON_NUMERIC => b"Non-numeric server-side value for incr or decr",
        status::ITEM_NOT_STORED => b"Not stored.",
        status::AUTH_ERROR => b"Auth failure.",
        _ => b"",
    }
}

/// Where replies to one request go, with the request's opcode and opaque.
struct Responder {
    opcode: u8,
    opaque: u32,
}

impl Responder {
    fn header(&self, out: &mut dyn Reply, code: u16, extras_len: usize, key_len: usize, value_len: usize, cas: u64) {
        let body_len = extras_len + key_len + value_len;
        let header = Header {
            magic: MAGIC_RESPONSE,
            opcode: self.opcode,
            key_len: u16::try_from(key_len).expect("keys are at most 250 bytes"),
            extras_len: u8::try_from(extras_len).expect("extras are at most 8 bytes"),
            data_type: 0,
            vbucket_or_status: code,
            body_len: u32::try_from(body_len).expect("values are below the item limit"),
            opaque: self.opaque,
            cas,
        };
        let mut bytes = [0u8; HEADER_BYTES];
        header.encode(&mut bytes);
        out.extend_from(&bytes);
    }

    fn success(&self, out: &mut dyn Reply, body: &[u8], cas: u64) {
        self.header(out, status::NO_ERROR, 0, 0, body.len(), cas);
        out.extend_from(body);
    }

    fn error(&self, out: &mut dyn Reply, code: u16) {
        assert_ne!(code, status::NO_ERROR);
        let text = status_text(code);
        self.header(out, code, 0, 0, text.len(), 0);
        out.extend_from(text);
    }

    /// Reply with a custom error text (memcached's `out_of_memory` messages).
    fn error_text(&self, out: &mut dyn Reply, code: u16, text: &[u8]) {
        self.header(out, code, 0, 0, text.len(), 0);
        out.extend_from(text);
    }
}

/// The opcode a quiet opcode is the quiet form of, and whether it was quiet.
fn loud_form(code: u8) -> (u8, bool) {
    let loud = match code {
        opcode::SETQ => opcode::SET,
        opcode::ADDQ => opcode::ADD,
        opcode::REPLACEQ => opcode::REPLACE,
        opcode::DELETEQ => opcode::DELETE,
        opcode::INCREMENTQ => opcode::INCREMENT,
        opcode::DECREMENTQ => opcode::DECREMENT,
        opcode::QUITQ => opcode::QUIT,
        opcode::FLUSHQ => opcode::FLUSH,
        opcode::APPENDQ => opcode::APPEND,
        opcode::PREPENDQ => opcode::PREPEND,
        opcode::GETQ => opcode::GET,
        opcode::GETKQ => opcode::GETK,
        opcode::GATQ => opcode::GAT,
        opcode::GATKQ => opcode::GATK,
        other => return (other, false),
    };
    (loud, true)
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().expect("four bytes"))
}

fn be_u64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes[..8].try_into().expect("eight bytes"))
}

/// The parts of one request packet.
struct Request<'a> {
    header: Header,
    /// The loud form of the opcode.
    command: u8,
    quiet: bool,
    extras: &'a [u8],
    key: &'a [u8],
    /// Header, extras and key.
    head_bytes: usize,
    /// Body bytes after extras and key.
    value_len: u64,
}

impl Request<'_> {
    /// The step after a command that uses no value: the rest of the body is skipped.
    fn finish(&self) -> Step {
        if self.value_len == 0 {
            Step::Done { consumed: self.head_bytes }
        } else {
            Step::Skip { consumed: self.head_bytes, skip_bytes: self.value_len }
        }
    }
}

/// Handles the packet at the start of `input` (never empty).
pub(crate) fn process_packet(session: &mut Session, input: &[u8], out: &mut dyn Reply) -> Step {
    assert!(!input.is_empty());
    let Some(header) = Header::decode(input) else {
        return Step::NeedMore { bytes_needed: HEADER_BYTES };
    };
    if header.magic != MAGIC_REQUEST {
        // memcached closes without a reply: nothing after a bad magic can be trusted.
        return Step::Close { consumed: 0 };
    }
    let responder = Responder { opcode: header.opcode, opaque: header.opaque };
    let extras_len = usize::from(header.extras_len);
    let key_len = usize::from(header.key_len);
    let body_len = header.body_len as usize;
    if key_len > body_len || key_len + extras_len > body_len {
        responder.error(out, status::UNKNOWN_COMMAND);
        return Step::Close { consumed: 0 };
    }
    let (command, quiet) = loud_form(header.opcode);
    let allowed_unauthenticated =
        matches!(command, opcode::SASL_LIST_MECHS | opcode::SASL_AUTH | opcode::SASL_STEP | opcode::VERSION);
    if !session.authenticated && !allowed_unauthenticated {
        responder.error(out, status::AUTH_ERROR);
        return Step::Close { consumed: 0 };
    }
    if key_len > KEY_BYTES_MAX {
        responder.error(out, status::INVALID_ARGUMENTS);
        return Step::Close { consumed: 0 };
    }
    let head_bytes = HEADER_BYTES + extras_len + key_len;
    if input.len() < head_bytes {
        return Step::NeedMore { bytes_needed: head_bytes };
    }
    let request = Request {
        header,
        command,
        quiet,
        extras: &input[HEADER_BYTES..HEADER_BYTES + extras_len],
        key: &input[HEADER_BYTES + extras_len..head_bytes],
        head_bytes,
        value_len: (body_len - extras_len - key_len) as u64,
    };
    if !is_well_formed(&request) {
        responder.error(out, status::INVALID_ARGUMENTS);
        return Step::Close { consumed: head_bytes };
    }
    match command {
        opcode::GET | opcode::GETK | opcode::TOUCH | opcode::GAT | opcode::GATK => {
            process_get(session, &request, &responder, out);
            request.finish()
        }
        opcode::SET | opcode::ADD | opcode::REPLACE | opcode::APPEND | opcode::PREPEND => {
            process_update(session, &request, &responder, input, out)
        }
        opcode::DELETE => {
            process_delete(session, &request, &responder, out);
            request.finish()
        }
        opcode::INCREMENT | opcode::DECREMENT => {
            process_arithmetic(session, &request, &responder, out);
            request.finish()
        }
        opcode::QUIT => {
            if !quiet {
                responder.success(out, b"", 0);
            }
            Step::Close { consumed: head_bytes }
        }
        opcode::FLUSH => {
            // A positive expiration is an exptime (relative or absolute); none or 0 flushes now.
            let delay = if request.extras.len() == 4 { be_u32(request.extras) } else { 0 };
            let at_unix_s = if delay > 0 { session.exptime_unix_s(i64::from(delay)) } else { 0 };
            session.store.flush_all(at_unix_s);
            session.counts.cmd_flush += 1;
            if !quiet {
                responder.success(out, b"", 0);
            }
            request.finish()
        }
        opcode::NOOP | opcode::VERBOSITY => {
            responder.success(out, b"", 0);
            request.finish()
        }
        opcode::VERSION => {
            responder.success(out, session.config.version.as_bytes(), 0);
            request.finish()
        }
        opcode::STAT => {
            process_stat(session, &request, &responder, out);
            request.finish()
        }
        opcode::SASL_LIST_MECHS => {
            if session.config.credentials.is_none() {
                responder.error(out, status::UNKNOWN_COMMAND);
            } else {
                responder.success(out, SASL_MECHANISMS, 0);
            }
            request.finish()
        }
        opcode::SASL_AUTH | opcode::SASL_STEP => process_sasl(session, &request, &responder, input, out),
        _ => {
            responder.error(out, status::UNKNOWN_COMMAND);
            request.finish()
        }
    }
}

/// memcached's per-opcode length rules; a violation is answered INVALID_ARGUMENTS and closes.
fn is_well_formed(request: &Request<'_>) -> bool {
    let extras_len = request.extras.len();
    let key_len = request.key.len();
    let body_len = request.header.body_len as usize;
    let empty = extras_len == 0 && key_len == 0 && body_len == 0;
    match request.command {
        opcode::VERSION | opcode::NOOP | opcode::QUIT | opcode::SASL_LIST_MECHS => empty,
        opcode::FLUSH => key_len == 0 && body_len == extras_len && (extras_len == 0 || extras_len == 4),
        opcode::SET | opcode::ADD | opcode::REPLACE => extras_len == 8 && key_len != 0,
        opcode::GET | opcode::GETK => extras_len == 0 && body_len == key_len && key_len > 0,
        opcode::DELETE => key_len > 0 && extras_len == 0 && body_len == key_len,
        opcode::INCREMENT | opcode::DECREMENT => key_len > 0 && extras_len == 20 && body_len == key_len + 20,
        opcode::APPEND | opcode::PREPEND => key_len > 0 && extras_len == 0,
        opcode::STAT => extras_len == 0,
        opcode::SASL_AUTH | opcode::SASL_STEP => extras_len == 0 && key_len != 0,
        opcode::TOUCH | opcode::GAT | opcode::GATK => extras_len == 4 && key_len != 0,
        opcode::VERBOSITY => extras_len == 4 && key_len == 0 && body_len == 4,
        // Unknown opcodes are answered UNKNOWN_COMMAND, not refused as malformed.
        _ => true,
    }
}

/// GET, GETK, TOUCH, GAT, GATK and their quiet forms.
fn process_get(session: &mut Session, request: &Request<'_>, responder: &Responder, out: &mut dyn Reply) {
    let command = request.command;
    let touch = matches!(command, opcode::TOUCH | opcode::GAT | opcode::GATK);
    let return_key = matches!(command, opcode::GETK | opcode::GATK);
    let return_value = command != opcode::TOUCH;
    let mut options = GetOptions::default();
    if touch {
        let exptime = be_u32(request.extras);
        options.touch_exptime_unix_s = Some(session.exptime_unix_s(i64::from(exptime)));
    }
    let key = request.key;
    let mut reply_bytes = 0;
    let outcome = session.store.get(key, options, &session.waker, &mut |item: &ItemView<'_>| {
        reply_bytes = if return_value { item.value.len() } else { 0 };
        let key_part: &[u8] = if return_key { key } else { b"" };
        let value_part: &[u8] = if return_value { item.value } else { b"" };
        responder.header(out, status::NO_ERROR, 4, key_part.len(), value_part.len(), item.cas);
        out.extend_from(&item.flags.to_be_bytes());
        out.extend_from(key_part);
        out.extend_from(value_part);
    });
    if outcome == GetOutcome::Pending {
        session.waiting = true;
        return;
    }
    session.reply_bytes += reply_bytes;
    let hit = outcome == GetOutcome::Hit;
    session.counts.count_retrieval(touch, hit);
    if !hit && !request.quiet {
        if return_key {
            responder.header(out, status::KEY_NOT_FOUND, 0, key.len(), 0, 0);
            out.extend_from(key);
        } else {
            responder.error(out, status::KEY_NOT_FOUND);
        }
    }
}

/// SET, ADD, REPLACE, APPEND, PREPEND and their quiet forms.
fn process_update(session: &mut Session, request: &Request<'_>, responder: &Responder, input: &[u8], out: &mut dyn Reply) -> Step {
    let command = request.command;
    let key = request.key;
    let value_len = request.value_len;
    if key.len() as u64 + value_len > session.max_item_bytes as u64 {
        session.counts.store_too_large += 1;
        if command == opcode::SET {
            // memcached drops the old value rather than leave it stale after a failed set.
            session.store.delete(key, DeleteOptions::default());
        }
        responder.error(out, status::VALUE_TOO_LARGE);
        return request.finish();
    }
    let value_len = value_len as usize;
    let packet_bytes = request.head_bytes + value_len;
    if input.len() < packet_bytes {
        return Step::NeedMore { bytes_needed: packet_bytes };
    }
    let value = &input[request.head_bytes..packet_bytes];
    let cas = request.header.cas;
    let compare_cas = (cas != 0).then_some(cas);
    let (mode, flags, exptime_unix_s) = match command {
        opcode::APPEND => (StoreMode::Append, 0, 0),
        opcode::PREPEND => (StoreMode::Prepend, 0, 0),
        _ => {
            let flags = be_u32(&request.extras[0..4]);
            let exptime = be_u32(&request.extras[4..8]);
            let exptime_unix_s = session.exptime_unix_s(i64::from(exptime));
            // memcached turns any of set/add/replace with a CAS into its CAS command.
            let mode = match (command, compare_cas) {
                (_, Some(_)) => StoreMode::Set,
                (opcode::ADD, None) => StoreMode::Add,
                (opcode::REPLACE, None) => StoreMode::Replace,
                _ => StoreMode::Set,
            };
            (mode, flags, exptime_unix_s)
        }
    };
    let mut store_request = StoreRequest::new(mode, key, value, flags, exptime_unix_s);
    store_request.compare_cas = compare_cas;
    session.counts.cmd_set += 1;
    let outcome = session.store.store(&store_request, &session.waker);
    if outcome == StoreOutcome::Pending {
        session.waiting = true;
        return Step::Done { consumed: packet_bytes };
    }
    account_store(session, &store_request, outcome);
    let appending = matches!(mode, StoreMode::Append | StoreMode::Prepend);
    match outcome {
        StoreOutcome::Stored { cas } => {
            if !request.quiet {
                responder.success(out, b"", cas);
            }
        }
        StoreOutcome::Exists => responder.error(out, status::KEY_EXISTS),
        StoreOutcome::NotFound if appending => responder.error(out, status::ITEM_NOT_STORED),
        StoreOutcome::NotFound => responder.error(out, status::KEY_NOT_FOUND),
        // memcached words a failed add as "exists" and a failed replace as "not found".
        StoreOutcome::NotStored => match mode {
            StoreMode::Add => responder.error(out, status::KEY_EXISTS),
            StoreMode::Replace => responder.error(out, status::KEY_NOT_FOUND),
            _ => responder.error(out, status::ITEM_NOT_STORED),
        },
        StoreOutcome::TooLarge => responder.error(out, status::VALUE_TOO_LARGE),
        StoreOutcome::OutOfMemory => responder.error_text(out, status::OUT_OF_MEMORY, b"Out of memory allocating item"),
        StoreOutcome::Pending => unreachable!("answered above"),
    }
    Step::Done { consumed: packet_bytes }
}

/// DELETE and DELETEQ; a non-zero CAS must match.
fn process_delete(session: &mut Session, request: &Request<'_>, responder: &Responder, out: &mut dyn Reply) {
    let cas = request.header.cas;
    let options = DeleteOptions { compare_cas: (cas != 0).then_some(cas), ..DeleteOptions::default() };
    match session.store.delete(request.key, options) {
        DeleteOutcome::Deleted => {
            session.counts.delete_hits += 1;
            if !request.quiet {
                responder.success(out, b"", 0);
            }
        }
        DeleteOutcome::NotFound => {
            session.counts.delete_misses += 1;
            responder.error(out, status::KEY_NOT_FOUND);
        }
        DeleteOutcome::Exists => responder.error(out, status::KEY_EXISTS),
    }
}

/// INCREMENT, DECREMENT and their quiet forms. Extras: delta, initial value, expiration.
fn process_arithmetic(session: &mut Session, request: &Request<'_>, responder: &Responder, out: &mut dyn Reply) {
    let increment = request.command == opcode::INCREMENT;
    let delta = be_u64(&request.extras[0..8]);
    let initial = be_u64(&request.extras[8..16]);
    let expiration = be_u32(&request.extras[16..20]);
    let cas = request.header.cas;
    let arithmetic = ArithmeticRequest {
        key: request.key,
        increment,
        delta,
        compare_cas: (cas != 0).then_some(cas),
        new_cas: None,
        initial: (expiration != ARITHMETIC_NO_CREATE)
            .then(|| (initial, session.exptime_unix_s(i64::from(expiration)))),
        touch_exptime_unix_s: None,
    };
    match session.store.arithmetic(&arithmetic, &session.waker) {
        ArithmeticOutcome::Pending => session.waiting = true,
        ArithmeticOutcome::Value { value, cas, .. } => {
            if increment {
                session.counts.incr_hits += 1;
            } else {
                session.counts.decr_hits += 1;
            }
            if !request.quiet {
                responder.success(out, &value.to_be_bytes(), cas);
            }
        }
        ArithmeticOutcome::NotFound => {
            if increment {
                session.counts.incr_misses += 1;
            } else {
                session.counts.decr_misses += 1;
            }
            responder.error(out, status::KEY_NOT_FOUND);
        }
        ArithmeticOutcome::NonNumeric => responder.error(out, status::NON_NUMERIC),
        ArithmeticOutcome::Exists => responder.error(out, status::KEY_EXISTS),
    }
}

/// STAT: one packet per statistic, then an empty packet.
fn process_stat(session: &mut Session, request: &Request<'_>, responder: &Responder, out: &mut dyn Reply) {
    let group = request.key;
    let stats = if group.is_empty() {
        session.general_stats()
    } else if group.starts_with(b"reset") {
        session.flush_counts();
        session.config.counters.reset();
        Vec::new()
    } else if group.starts_with(b"settings") {
        session.settings_stats()
    } else if group.starts_with(b"detail") {
        match &group[6..] {
            rest if rest.starts_with(b" on") || rest.starts_with(b" off") || rest.starts_with(b" dump") => Vec::new(),
            _ => {
                responder.error(out, status::KEY_NOT_FOUND);
                return;
            }
        }
    } else if matches!(group, b"items" | b"slabs" | b"sizes") {
        // Slab and item tables belong to the store; none to report here.
        Vec::new()
    } else {
        responder.error(out, status::KEY_NOT_FOUND);
        return;
    };
    for (name, value) in &stats {
        responder.header(out, status::NO_ERROR, 0, name.len(), value.len(), 0);
        out.extend_from(name.as_bytes());
        out.extend_from(value.as_bytes());
    }
    responder.header(out, status::NO_ERROR, 0, 0, 0, 0);
}

/// SASL_AUTH and SASL_STEP with the PLAIN mechanism: "authzid\0user\0password".
fn process_sasl(session: &mut Session, request: &Request<'_>, responder: &Responder, input: &[u8], out: &mut dyn Reply) -> Step {
    if session.config.credentials.is_none() {
        responder.error(out, status::UNKNOWN_COMMAND);
        return request.finish();
    }
    if request.key.len() > SASL_MECHANISM_BYTES_MAX {
        responder.error(out, status::INVALID_ARGUMENTS);
        return request.finish();
    }
    if request.value_len > AUTH_BLOCK_BYTES_MAX as u64 {
        session.counts.auth_cmds += 1;
        session.counts.auth_errors += 1;
        responder.error(out, status::AUTH_ERROR);
        return request.finish();
    }
    let packet_bytes = request.head_bytes + request.value_len as usize;
    if input.len() < packet_bytes {
        return Step::NeedMore { bytes_needed: packet_bytes };
    }
    let data = &input[request.head_bytes..packet_bytes];
    session.counts.auth_cmds += 1;
    // PLAIN completes in one step; a SASL_STEP has no exchange to continue.
    let accepted = request.command == opcode::SASL_AUTH && request.key == SASL_MECHANISMS && check_plain(session, data);
    if accepted {
        session.authenticated = true;
        responder.success(out, b"Authenticated", 0);
    } else {
        session.counts.auth_errors += 1;
        responder.error(out, status::AUTH_ERROR);
    }
    Step::Done { consumed: packet_bytes }
}

fn check_plain(session: &Session, data: &[u8]) -> bool {
    let mut parts = data.splitn(3, |&byte| byte == 0);
    let (Some(_authzid), Some(user), Some(password)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let credentials = session.config.credentials.as_ref().expect("checked by the caller");
    credentials.check(user, password)
}

#[cfg(test)]
#[path = "binary_session_tests.rs"]
mod tests;
