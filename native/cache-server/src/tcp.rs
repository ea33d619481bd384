//! TCP serving. One acceptor thread accepts connections and hands each, round-robin, to one of N
//! worker threads; each worker runs its own epoll loop (level-triggered) over its non-blocking
//! sockets and owns their sessions and buffers outright (nothing per connection is shared but the
//! connection's waker, below).
//!
//! Per readiness event a connection gets at most one `read` and one `send`: the read fills the
//! free part of its input buffer; complete commands are executed one at a time (so that output
//! stays bounded, see `process_input`), their replies appended to the output buffer; one `send`
//! then writes what it can. A connection whose unsent output reaches `OUTPUT_HIGH_BYTES` is not
//! read (and its buffered commands not executed) until the output drains: backpressure.
//!
//! Waiting for the store (hybrid mode): a store with an SSD tier may answer that a value is being
//! read from the SSD; the session then stops before that command (`Processed::waiting`) and the
//! connection is marked `waiting`. A waiting connection executes nothing; it keeps sending the
//! replies before the command, keeps reading into the room its input buffer already has (so a
//! peer that closes is noticed; with the buffer full it is not read at all) and is closed at once
//! on a reset. Each connection has a waker (`ConnWaker`, one `Arc` per connection) that the store
//! wakes from its I/O thread: it puts the connection's token (slot and generation) on its worker's
//! ready list, once (a per-connection flag deduplicates), and signals the worker's eventfd, which
//! is in the worker's epoll set. The worker clears the flag, checks the token against the slot's
//! present connection (a connection closed meanwhile, its slot perhaps reused, is not touched),
//! and if that connection is waiting, executes its buffered commands again. A wake that comes
//! before the worker has seen `waiting` (a fast read) stays on the ready list and is handled on the
//! worker's next round; a wake for a connection that is not waiting does nothing.

use std::io::{self, Write};
use std::net::TcpListener;
use std::os::fd::{IntoRawFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;

use cache_proto::session::{Processed, Session, SessionConfig};
use cache_proto::storage::Storage;

use crate::buffers::{Budget, Input, InputFull, Output, Recycler};
use cache_proto::session::{Protocol, Reply};
use crate::log;
use crate::stats::Counters;

/// Unsent output above which a connection is neither read nor processed until it drains.
pub const OUTPUT_HIGH_BYTES: usize = 1 << 20;
/// Events taken per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;
/// memcached's answer beyond `-c`.
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";
const WAKE_TOKEN: u64 = u64::MAX;

/// What every worker needs.
pub struct Shared {
    pub store: Arc<dyn Storage>,
    pub session_config: Arc<SessionConfig>,
    pub counters: Arc<Counters>,
    pub conn_limit: usize,
    /// Bound of one connection's read buffer: the longest line plus the largest item, plus room
    /// for a binary header and extras.
    pub input_limit_bytes: usize,
    /// Large connection buffers, all connections together (`--conn-buffers-mb`).
    pub buffers: Arc<Budget>,
    /// Unsent output one connection may hold (a multi-get of large values beyond it is refused).
    pub output_cap_bytes: usize,
}

/// A worker's inbox, filled by other threads: new sockets from the acceptor, tokens of waiting
/// connections from the store's wakers, and an eventfd (in the worker's epoll set) to wake it.
struct WorkerMailbox {
    incoming: Mutex<Vec<RawFd>>,
    /// Tokens (`conn_token`) of connections whose waker fired. Each live connection is on it at
    /// most once at a time (`ConnWaker::state`), so it holds at most the worker's connections
    /// (plus the odd stale token of a connection closed meanwhile).
    ready: Mutex<Vec<u64>>,
    wake_fd: RawFd,
}

impl WorkerMailbox {
    fn new(wake_fd: RawFd) -> WorkerMailbox {
        WorkerMailbox { incoming: Mutex::new(Vec::new()), ready: Mutex::new(Vec::new()), wake_fd }
    }

    /// Makes the worker's `epoll_wait` return (the eventfd becomes readable).
    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a u64 we own to our eventfd.
        unsafe { libc::write(self.wake_fd, &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Resets the eventfd. Called before the lists are taken, so an entry added after this is
    /// followed by a fresh signal.
    fn clear_signal(&self) {
        let mut counter = [0u8; 8];
        // SAFETY: reads the eventfd's 8-byte counter into our array.
        unsafe { libc::read(self.wake_fd, counter.as_mut_ptr() as *mut libc::c_void, 8) };
    }
}

/// A connection's token on the ready list: its slot in the low 32 bits, the slot's generation
/// (counted per worker, per registered connection) in the high 32 bits.
fn conn_token(slot: usize, generation: u32) -> u64 {
    debug_assert!(slot <= u32::MAX as usize);
    (u64::from(generation) << 32) | slot as u64
}

fn token_parts(token: u64) -> (usize, u32) {
    ((token & u64::from(u32::MAX)) as usize, (token >> 32) as u32)
}

/// `ConnWaker::state` bit: the token is on the ready list (or about to be), not yet taken.
const WAKER_QUEUED: u8 = 1;
/// `ConnWaker::state` bit: the connection is closed; wakes do nothing.
const WAKER_CLOSED: u8 = 2;

/// The waker of one connection's session (allocated once per connection). Woken by the store,
/// from its I/O threads, when a value a waiting command needs is in memory.
struct ConnWaker {
    mailbox: Arc<WorkerMailbox>,
    token: u64,
    /// `WAKER_QUEUED` | `WAKER_CLOSED`. Read-modify-writes only, so that the worker's clearing of
    /// `WAKER_QUEUED` acquires everything a waker published before it found the bit set.
    state: AtomicU8,
}

impl ConnWaker {
    fn new(mailbox: Arc<WorkerMailbox>, token: u64) -> ConnWaker {
        ConnWaker { mailbox, token, state: AtomicU8::new(0) }
    }

    /// The worker took the token off the ready list: the next wake queues it again. Called before
    /// the connection's commands run again, so a wake during that run is not lost.
    fn taken(&self) {
        self.state.fetch_and(!WAKER_QUEUED, Ordering::AcqRel);
    }

    /// The connection is closed: later wakes (the store may hold this waker for a while) do nothing.
    fn close(&self) {
        self.state.fetch_or(WAKER_CLOSED, Ordering::AcqRel);
    }
}

impl Wake for ConnWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.fetch_or(WAKER_QUEUED, Ordering::AcqRel) != 0 {
            return; // already queued (the worker will run the connection), or closed
        }
        // A short, uncontended lock (the worker holds it only to swap the list out). No panic
        // on this foreign thread if a worker panicked holding it.
        self.mailbox.ready.lock().unwrap_or_else(|e| e.into_inner()).push(self.token);
        self.mailbox.signal();
    }
}

/// Starts `threads` workers and the acceptor. The threads run until the process exits.
pub fn start(listener: TcpListener, shared: Arc<Shared>, threads: usize) -> io::Result<()> {
    assert!(threads >= 1);
    let mut mailboxes = Vec::with_capacity(threads);
    for index in 0..threads {
        let mut worker = Worker::new(shared.clone())?;
        mailboxes.push(worker.mailbox.clone());
        std::thread::Builder::new().name(format!("tcp-worker-{index}")).spawn(move || worker.run())?;
    }
    std::thread::Builder::new().name("tcp-acceptor".into()).spawn(move || accept_loop(listener, shared, mailboxes))?;
    Ok(())
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mailboxes: Vec<Arc<WorkerMailbox>>) {
    let counters = &shared.counters;
    let mut next = 0usize;
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) => {
                match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED | libc::EPROTO) => {}
                    // Out of descriptors or memory: wait for connections to close.
                    _ => {
                        log::warn(format_args!("accept: {e}"));
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                continue;
            }
        };
        if counters.curr_connections.load(Ordering::Relaxed) as usize >= shared.conn_limit {
            // As memcached: accept, explain, close. The socket is blocking and new: the short
            // write goes into an empty send buffer.
            Counters::add(&counters.rejected_connections, 1);
            let _ = (&stream).write(TOO_MANY_CONNECTIONS);
            log::debug(format_args!("rejected {peer}: {} connections open", shared.conn_limit));
            continue;
        }
        if let Err(e) = stream.set_nonblocking(true).and_then(|_| stream.set_nodelay(true)) {
            log::warn(format_args!("configuring a socket from {peer}: {e}"));
            continue;
        }
        Counters::add(&counters.curr_connections, 1);
        Counters::add(&counters.total_connections, 1);
        log::debug(format_args!("accepted {peer}"));
        let fd = stream.into_raw_fd();
        let mailbox = &mailboxes[next % mailboxes.len()];
        next = next.wrapping_add(1);
        mailbox.incoming.lock().unwrap().push(fd);
        mailbox.signal();
    }
}

struct Conn {
    fd: RawFd,
    session: Session,
    input: Input,
    output: Output,
    /// The epoll events registered now.
    interest: u32,
    /// The session asked to close: execute nothing more, close once the output is written.
    closing: bool,
    /// The peer closed its side (or the socket failed): read nothing more; what is buffered is
    /// still executed and answered, then the connection closes.
    peer_gone: bool,
    /// The session stopped before a command that waits for the store: execute nothing until the
    /// waker fires (see the module doc).
    waiting: bool,
    /// Tells stale ready-list tokens from this connection's (its slot may have been reused).
    generation: u32,
    /// The session's waker, also held by the session (and by the store while a read is queued).
    waker: Arc<ConnWaker>,
}

struct Worker {
    epoll_fd: RawFd,
    mailbox: Arc<WorkerMailbox>,
    shared: Arc<Shared>,
    conns: Vec<Option<Box<Conn>>>,
    free_slots: Vec<usize>,
    /// The generation of the next connection registered (`conn_token`).
    next_generation: u32,
    /// The ready list taken from the mailbox (swapped with it, so neither allocates once warm).
    ready: Vec<u64>,
    recycler: Recycler,
    /// Where an overflowing reply's bytes go (bounded by one append: one value).
    scratch: Vec<u8>,
}

/// What to do with a connection after an event.
#[derive(PartialEq, Eq)]
enum Next {
    Keep,
    Close,
}

impl Worker {
    fn new(shared: Arc<Shared>) -> io::Result<Worker> {
        let epoll_fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let wake_fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        epoll_ctl(epoll_fd, libc::EPOLL_CTL_ADD, wake_fd, libc::EPOLLIN as u32, WAKE_TOKEN)?;
        Ok(Worker {
            epoll_fd,
            mailbox: Arc::new(WorkerMailbox::new(wake_fd)),
            recycler: Recycler::new(shared.buffers.clone()),
            shared,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_generation: 0,
            ready: Vec::new(),
            scratch: Vec::new(),
        })
    }

    fn run(&mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_WAIT];
        loop {
            let n = unsafe { libc::epoll_wait(self.epoll_fd, events.as_mut_ptr(), EVENTS_PER_WAIT as i32, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    log::warn(format_args!("epoll_wait: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            let mut woken = false;
            for event in &events[..n as usize] {
                let (token, flags) = (event.u64, event.events);
                if token == WAKE_TOKEN {
                    woken = true;
                    continue;
                }
                // Slots are reused only when new connections are registered, after the batch:
                // an event for a connection closed earlier in this batch finds an empty slot.
                let slot = token as usize;
                if self.conns.get(slot).is_some_and(|c| c.is_some()) && self.on_event(slot, flags) == Next::Close {
                    self.close(slot);
                }
            }
            if woken {
                self.mailbox.clear_signal();
                self.run_ready();
                self.register_incoming();
            }
        }
    }

    /// Runs the connections whose wakers fired since the last round.
    fn run_ready(&mut self) {
        {
            let mut ready = self.mailbox.ready.lock().unwrap_or_else(|e| e.into_inner());
            if ready.is_empty() {
                return;
            }
            std::mem::swap(&mut *ready, &mut self.ready);
        }
        let mut ready = std::mem::take(&mut self.ready);
        for &token in &ready {
            let (slot, generation) = token_parts(token);
            if self.on_wake(slot, generation) == Next::Close {
                self.close(slot);
            }
        }
        ready.clear();
        self.ready = ready;
    }

    /// A ready-list token: if it is the present connection of its slot, clears its queued flag
    /// and, if the connection is waiting, executes its buffered commands again.
    fn on_wake(&mut self, slot: usize, generation: u32) -> Next {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_deref_mut()) else {
            return Next::Keep; // closed since: a stale token
        };
        if conn.generation != generation {
            return Next::Keep; // the slot holds a newer connection
        }
        conn.waker.taken();
        if !conn.waiting {
            return Next::Keep; // a wake for a command that has run meanwhile
        }
        conn.waiting = false;
        if pump(conn, &mut self.recycler, &mut self.scratch, &self.shared) == Next::Close {
            return Next::Close;
        }
        settle(self.epoll_fd, slot, conn, &mut self.recycler)
    }

    fn register_incoming(&mut self) {
        let fds = std::mem::take(&mut *self.mailbox.incoming.lock().unwrap());
        for fd in fds {
            let slot = self.free_slots.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let generation = self.next_generation;
            self.next_generation = self.next_generation.wrapping_add(1);
            let waker = Arc::new(ConnWaker::new(self.mailbox.clone(), conn_token(slot, generation)));
            let mut session = Session::new(self.shared.store.clone(), self.shared.session_config.clone());
            session.set_waker(Waker::from(waker.clone()));
            let conn = Conn {
                fd,
                session,
                input: Input::new(&mut self.recycler, self.shared.input_limit_bytes),
                output: Output::default(),
                interest: libc::EPOLLIN as u32,
                closing: false,
                peer_gone: false,
                waiting: false,
                generation,
                waker,
            };
            self.conns[slot] = Some(Box::new(conn));
            if let Err(e) = epoll_ctl(self.epoll_fd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, slot as u64) {
                log::warn(format_args!("epoll_ctl add: {e}"));
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        let conn = self.conns[slot].take().expect("closing an empty slot");
        conn.waker.close();
        // Closing the descriptor removes it from the epoll set.
        unsafe { libc::close(conn.fd) };
        let Conn { input, output, .. } = *conn;
        input.release(&mut self.recycler);
        output.release(&mut self.recycler);
        self.free_slots.push(slot);
        self.shared.counters.curr_connections.fetch_sub(1, Ordering::Relaxed);
    }

    fn on_event(&mut self, slot: usize, flags: u32) -> Next {
        let conn = self.conns[slot].as_deref_mut().expect("event for an empty slot");
        let recycler = &mut self.recycler;
        let scratch = &mut self.scratch;
        let shared = &*self.shared;
        if flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
            return Next::Close; // reset or fully closed: nothing can be delivered
        }
        // Room in the socket again: send, then execute what the full output held back.
        if flags & libc::EPOLLOUT as u32 != 0
            && (write_once(conn) == Next::Close || pump(conn, recycler, scratch, shared) == Next::Close)
        {
            return Next::Close;
        }
        if flags & libc::EPOLLIN as u32 != 0
            && !conn.closing
            && !conn.peer_gone
            && conn.output.pending_len() < OUTPUT_HIGH_BYTES
        {
            // `pump` executes nothing while the connection waits: the bytes just stay buffered.
            match read_once(conn, recycler) {
                Ok(true) => {
                    if pump(conn, recycler, scratch, shared) == Next::Close {
                        return Next::Close;
                    }
                }
                Ok(false) => {}
                Err(InputFull::Limit) => {
                    Counters::add(&shared.counters.oversized_requests, 1);
                    log::info(format_args!("closing a connection: a command exceeds {} bytes", shared.input_limit_bytes));
                    return Next::Close;
                }
                Err(InputFull::Budget) => {
                    Counters::add(&shared.counters.buffer_budget_refusals, 1);
                    log::warn(format_args!(
                        "closing a connection: its command needs a larger read buffer, and connection buffers \
                         hold {} of {} bytes (--conn-buffers-mb)",
                        shared.buffers.used_bytes(),
                        shared.buffers.limit_bytes()
                    ));
                    return Next::Close;
                }
            }
        }
        settle(self.epoll_fd, slot, conn, recycler)
    }
}

/// After a connection's input was read or executed: closes it if it is done, gives idle buffers
/// back, and registers the events it waits for now.
fn settle(epoll_fd: RawFd, slot: usize, conn: &mut Conn, recycler: &mut Recycler) -> Next {
    if conn.output.pending_len() == 0 && !conn.waiting {
        // With the output empty, whatever input is left is an incomplete command.
        if conn.closing || conn.peer_gone {
            return Next::Close;
        }
        conn.output.shrink_if_idle(recycler);
        conn.input.shrink_if_idle(recycler);
    }
    // A waiting connection reads only into the room its buffer has (`read_once`).
    let want_read = !conn.closing
        && !conn.peer_gone
        && conn.output.pending_len() < OUTPUT_HIGH_BYTES
        && (!conn.waiting || conn.input.has_room());
    let want_write = conn.output.pending_len() > 0;
    let interest = if want_read { libc::EPOLLIN as u32 } else { 0 } | if want_write { libc::EPOLLOUT as u32 } else { 0 };
    // Nothing at all only while waiting (for the waker; errors and hang-ups are reported anyway).
    debug_assert!(interest != 0 || conn.waiting, "a connection with nothing to wait for");
    if interest != conn.interest {
        if let Err(e) = epoll_ctl(epoll_fd, libc::EPOLL_CTL_MOD, conn.fd, interest, slot as u64) {
            log::warn(format_args!("epoll_ctl mod: {e}"));
            return Next::Close;
        }
        conn.interest = interest;
    }
    Next::Keep
}

/// Executes buffered commands and writes their replies, until the input holds no complete command,
/// the socket takes no more (output at `OUTPUT_HIGH_BYTES` after a send; EPOLLOUT resumes) or a
/// command waits for the store (the waker resumes). Bounded by the input already buffered:
/// nothing is read here. Executes nothing while the connection waits.
fn pump(conn: &mut Conn, recycler: &mut Recycler, scratch: &mut Vec<u8>, shared: &Shared) -> Next {
    loop {
        let stopped = process_input(conn, recycler, scratch, shared);
        if stopped == Stop::Close {
            return Next::Close;
        }
        if conn.output.pending_len() > 0 && write_once(conn) == Next::Close {
            return Next::Close;
        }
        if stopped != Stop::OutputFull || conn.output.pending_len() >= OUTPUT_HIGH_BYTES {
            return Next::Keep;
        }
    }
}

/// Why `process_input` stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// The input holds no complete command (or the session asked to close).
    InputDone,
    /// The output reached `OUTPUT_HIGH_BYTES` with commands left in the input.
    OutputFull,
    /// A command waits for the store (`conn.waiting` is set); it stays in the input.
    Waiting,
    /// The protocol layer failed; close the connection.
    Close,
}

/// Executes buffered commands one at a time while the output is below `OUTPUT_HIGH_BYTES`.
///
/// The session executes every complete command in the input it is given, so it is given a prefix
/// ending at the first line end (text) or packet end (binary); if that prefix holds no complete
/// command (a storage command's data block follows its line), the prefix grows to what the session
/// says the command needs (or doubles, if it cannot tell) until it does.
/// One call's output is then bounded by one command's reply (plus, at worst, as many more
/// commands as fit in the bytes of the one that needed the doubling).
fn process_input(conn: &mut Conn, recycler: &mut Recycler, scratch: &mut Vec<u8>, shared: &Shared) -> Stop {
    if conn.waiting {
        return Stop::Waiting;
    }
    while !conn.closing && !conn.input.is_empty() {
        if conn.output.pending_len() >= OUTPUT_HIGH_BYTES {
            return Stop::OutputFull;
        }
        let pending = conn.input.pending();
        let mut cut = first_command_end(pending).unwrap_or(pending.len());
        let processed = loop {
            let session = &mut conn.session;
            let mut reply = conn.output.reply(recycler, scratch, shared.output_cap_bytes);
            let result = catch_unwind(AssertUnwindSafe(|| session.process(&pending[..cut], &mut reply)));
            let overflowed = reply.finish();
            let processed = match result {
                Ok(p) => p,
                Err(_) => {
                    Counters::add(&shared.counters.internal_errors, 1);
                    log::warn(format_args!("the protocol layer panicked; closing the connection"));
                    return Stop::Close;
                }
            };
            if overflowed {
                // The command's reply was taken back; the session has moved past it, so the
                // stream cannot go on. memcached's words for it, then close.
                Counters::add(&shared.counters.buffer_budget_refusals, 1);
                log::info(format_args!(
                    "closing a connection: a reply exceeds the output cap ({} bytes) or the buffer budget ({} of {} bytes used)",
                    shared.output_cap_bytes,
                    shared.buffers.used_bytes(),
                    shared.buffers.limit_bytes()
                ));
                if scratch.capacity() > crate::buffers::KEEP_BYTES {
                    *scratch = Vec::new();
                }
                if session.protocol() == Protocol::Text {
                    let mut reply = conn.output.reply(recycler, scratch, usize::MAX);
                    reply.extend_from(b"SERVER_ERROR out of memory writing get response\r\n");
                    reply.finish();
                }
                conn.closing = true;
                return Stop::InputDone;
            }
            // Waiting: the command stays unexecuted, and is not to be offered again before the
            // waker fires (that would only queue another read).
            if processed.consumed > 0 || processed.close || processed.waiting || cut == pending.len() {
                break processed;
            }
            // The session says how long the command is when it can tell (a storage command's
            // line announces its value); otherwise double.
            cut = match session.bytes_needed() {
                Some(needed) if needed > cut => needed.min(pending.len()),
                _ => pending.len().min(cut.saturating_mul(2).max(cut + 4096)),
            };
        };
        // `output_full` (the session's own per-call reply budget) needs nothing here: the loop
        // goes on with the rest while the output is below `OUTPUT_HIGH_BYTES`.
        let Processed { consumed, close, waiting, .. } = processed;
        assert!(consumed <= cut, "session consumed {consumed} of {cut} bytes");
        conn.input.consume(consumed);
        if close {
            conn.closing = true;
        }
        if waiting {
            // Replies of the commands before it are in the output; `pump` sends them.
            conn.waiting = true;
            Counters::add(&shared.counters.storage_waits, 1);
            return Stop::Waiting;
        }
        if consumed == 0 {
            // An incomplete command: make room for all of it at once, then read more.
            if let Some(needed) = conn.session.bytes_needed() {
                conn.input.reserve(needed, recycler);
            }
            break;
        }
    }
    Stop::InputDone
}

/// Where the first command of `input` ends, if it is easy to tell: after the first '\n' for the
/// text protocol, after the packet for the binary protocol. Only a hint for `process_input`.
fn first_command_end(input: &[u8]) -> Option<usize> {
    if input.first() == Some(&cache_proto::binary::MAGIC_REQUEST) {
        let header = cache_proto::binary::Header::decode(input)?;
        let end = cache_proto::binary::HEADER_BYTES.checked_add(header.body_len as usize)?;
        return Some(end.min(input.len()));
    }
    input.iter().position(|&b| b == b'\n').map(|i| i + 1)
}

/// One `read` into the free part of the input. `Ok(true)`: bytes arrived. A closed or failed
/// peer sets `peer_gone`. A waiting connection reads only into the room its buffer has.
fn read_once(conn: &mut Conn, recycler: &mut Recycler) -> Result<bool, InputFull> {
    let space = if conn.waiting {
        let room = conn.input.room();
        if room.is_empty() {
            return Ok(false); // `settle` stops reading until the commands have run
        }
        room
    } else {
        conn.input.space(recycler)?
    };
    // SAFETY: reads at most space.len() bytes into memory we own.
    let n = unsafe { libc::read(conn.fd, space.as_mut_ptr() as *mut libc::c_void, space.len()) };
    if n > 0 {
        conn.input.filled(n as usize);
        return Ok(true);
    }
    if n == 0 {
        conn.peer_gone = true;
        return Ok(false);
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Ok(false),
        _ => {
            conn.peer_gone = true;
            Ok(false)
        }
    }
}

/// One `send` of the pending output.
fn write_once(conn: &mut Conn) -> Next {
    let pending = conn.output.pending();
    if pending.is_empty() {
        return Next::Keep;
    }
    // SAFETY: sends bytes we own; MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
    let n = unsafe { libc::send(conn.fd, pending.as_ptr() as *const libc::c_void, pending.len(), libc::MSG_NOSIGNAL) };
    if n >= 0 {
        conn.output.advance(n as usize);
        return Next::Keep;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Next::Keep,
        _ => Next::Close,
    }
}

fn epoll_ctl(epoll_fd: RawFd, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    cvt(unsafe { libc::epoll_ctl(epoll_fd, op, fd, &mut event) }).map(|_| ())
}

fn cvt(result: i32) -> io::Result<i32> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

#[cfg(test)]
#[path = "tcp_tests.rs"]
mod tests;
