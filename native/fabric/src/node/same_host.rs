//! The same-host bulk path: between two processes on one host, a message of at least
//! `Config::same_host_pull_min_bytes` travels as a 24-byte descriptor, and the receiver pulls its
//! bytes from the sender's buffer with `process_vm_readv` (CMA) straight into a pooled buffer: one
//! copy, no TCP. UCX 1.13 (and 1.22) send same-host rendezvous over TCP once peer error handling
//! is on, which the fabric needs to see dead peers; this path keeps that detection (the
//! connection's UCX endpoint still carries every message and reports failures) and moves only the
//! bulk bytes itself. docs/fabric.md, "The same-host path", numbers the messages.
//!
//! Safety of a pull against a dying or lying sender, all checked by the receiver in the one
//! `process_vm_readv` call that moves the bytes (remote ranges read in order):
//! 1. the process's nonce (16 random bytes in its `ProcessArea`), compared with the one its hello
//!    announced: the pid still names that process (no pid reuse, same pid namespace);
//! 2. the message's bytes;
//! 3. the descriptor's slot word in the sender's `ProcessArea`, compared with the descriptor's
//!    token: the sender clears the word before it lets the buffer go (release, connection failure,
//!    close), so a pull that raced with a reuse of the buffer sees another word and fails instead
//!    of delivering someone else's bytes (x86-64 keeps loads in order, and the sender's stores).
//!
//! A sender holds each buffer (and its slot) until the receiver releases it or the connection
//! fails or closes. Errors of a pull (`ESRCH`, `EFAULT`, a short read, a nonce or token that does
//! not match) fail that message only; a descriptor that breaks the rules (`wire::PullDescriptor`)
//! is a protocol error that closes its connection.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use crate::config::Transport;
use crate::error::Error;
use crate::log::{log_debug, log_warn};
use crate::pool::Buffer;
use crate::wire::{self, Header, Hello, Kind, PullDescriptor};

use super::id_map::IdMap;
use super::send::Payload;
use super::{NodeInner, NodeState};

/// Messages a process may hold for pulls at once, over all its nodes and connections (beyond it
/// messages go through UCX).
const SLOTS: usize = 16384;
/// Larger messages go through UCX: one `process_vm_readv` moves at most about 2 GiB.
const PULL_MAX_BYTES: usize = 1 << 30;
/// Pulled responses of at least this many bytes are pulled on the node's puller thread, outside
/// the worker lock: a 4 MiB copy under the lock (about 0.4 ms here) kept every other thread of the
/// process from sending or receiving meanwhile (docs/benchmarks.md, session 38: HDFS readers spent
/// 21 % of their time blocked submitting requests). Smaller ones are pulled in the receive
/// callback, where a hand-off to another thread would cost more than the copy.
const DEFER_PULL_MIN_BYTES: usize = 1 << 20;
/// Pulls waiting for the puller thread, per node; beyond, a response is pulled in the callback.
const DEFERRED_PULLS_MAX: usize = 256;

/// The memory a peer reads besides message bytes: the nonce, then one word per slot (the token of
/// the message held in it, 0 when free). Leaked once per process: peers may read it at any time.
#[repr(C)]
struct ProcessArea {
    nonce: [u8; 16],
    slots: [AtomicU64; SLOTS],
}

struct Process {
    area: &'static ProcessArea,
    /// `None` where the boot id or randomness is unavailable: no hello, no pulls.
    hello: Option<Hello>,
    free_slots: Mutex<Vec<u32>>,
    next_token: AtomicU64,
}

fn process() -> &'static Process {
    static PROCESS: OnceLock<Process> = OnceLock::new();
    PROCESS.get_or_init(|| {
        let area: &'static ProcessArea = Box::leak(Box::new(ProcessArea { nonce: [0; 16], slots: [const { AtomicU64::new(0) }; SLOTS] }));
        let mut nonce = [0u8; 16];
        // SAFETY: getrandom writes at most `nonce.len()` bytes into the array it is given.
        let got = unsafe { libc::getrandom(nonce.as_mut_ptr() as *mut libc::c_void, nonce.len(), 0) };
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().and_then(|s| <[u8; 36]>::try_from(s.trim().as_bytes()).ok());
        let hello = match (got == nonce.len() as isize, boot_id) {
            (true, Some(boot_id)) => {
                // The area is not shared yet (no hello has left this process): writing the nonce
                // through a pointer made from the leaked box is the only access.
                let area_ptr = area as *const ProcessArea as *mut ProcessArea;
                // SAFETY: `area_ptr` points at the leaked, live area; nothing else reads or writes
                // its nonce before `PROCESS` is initialised (we are inside its initialiser).
                unsafe { (*area_ptr).nonce = nonce };
                Some(Hello { boot_id, pid: std::process::id(), area_addr: area_ptr as u64, slot_count: SLOTS as u32, nonce })
            }
            _ => {
                log_warn!("same-host pull path off: no boot id or no randomness on this host");
                None
            }
        };
        Process { area, hello, free_slots: Mutex::new((0..SLOTS as u32).rev().collect()), next_token: AtomicU64::new(1) }
    })
}

/// A peer process this node may pull from: verified by reading its nonce.
#[derive(Debug, Clone, Copy)]
struct Remote {
    pid: libc::pid_t,
    area_addr: u64,
    nonce: [u8; 16],
    slot_count: u32,
}

/// A message this node holds until its receiver has pulled it.
struct Held {
    slot: u32,
    len: usize,
    _payload: Payload,
}

#[derive(Default)]
struct Peer {
    pull_from: Option<Remote>,
    /// The peer verified this process: large messages to it go by pull.
    send_by_pull: bool,
    held: IdMap<u64, Held>,
    held_bytes: usize,
    /// Tokens of pulled messages to hand back to the peer (sent after the progress call).
    releases: Vec<u64>,
    /// A hello reply to send: `None` accepts, `Some(reason)` refuses.
    reply: Option<Option<String>>,
}

/// The same-host path's part of a node's state.
#[derive(Default)]
pub(super) struct SameHost {
    peers: IdMap<u64, Peer>,
    /// Connections with releases or a reply to send.
    dirty: Vec<u64>,
    refusal_logged: bool,
}

impl SameHost {
    pub(super) fn has_outgoing(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Lets go of everything held for a connection that failed or closes (slot words cleared
    /// first, so a pull still running fails rather than reading a reused buffer).
    pub(super) fn drop_conn(&mut self, conn_id: u64) {
        if let Some(peer) = self.peers.remove(&conn_id) {
            for (_, held) in peer.held {
                free_slot(held.slot);
            }
        }
    }

    fn mark_dirty(&mut self, conn_id: u64) {
        if !self.dirty.contains(&conn_id) {
            self.dirty.push(conn_id);
        }
    }
}

/// A pulled response whose bytes the puller thread moves outside the worker lock.
struct DeferredPull {
    conn_id: u64,
    /// The response's header (kind `Response`).
    header: Header,
    remote: Remote,
    descriptor: PullDescriptor,
    buffer: Buffer,
}

/// The node's puller thread and its queue (docs/fabric.md, "The same-host path", step 4).
#[derive(Default)]
pub(super) struct DeferredPulls {
    queue: Mutex<VecDeque<DeferredPull>>,
    ready: Condvar,
    started: AtomicBool,
}

fn free_slot(slot: u32) {
    let process = process();
    process.area.slots[slot as usize].store(0, Ordering::SeqCst);
    process.free_slots.lock().unwrap_or_else(|e| e.into_inner()).push(slot);
}

fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ESRCH => "ESRCH",
        libc::EFAULT => "EFAULT",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSYS => "ENOSYS",
        _ => "",
    };
    format!("{name} ({})", std::io::Error::from_raw_os_error(errno))
}

/// One `process_vm_readv` of `remote` ranges into `local` ones; the bytes read or the errno.
fn read_remote(pid: libc::pid_t, local: &mut [(*mut u8, usize)], remote: &[(u64, usize)]) -> Result<usize, i32> {
    let local_iov: Vec<libc::iovec> = local.iter().map(|&(p, len)| libc::iovec { iov_base: p as *mut libc::c_void, iov_len: len }).collect();
    let remote_iov: Vec<libc::iovec> = remote.iter().map(|&(a, len)| libc::iovec { iov_base: a as *mut libc::c_void, iov_len: len }).collect();
    // SAFETY: every local iovec names memory of this process that the caller lends us writable for
    // the call (its length included); the remote ranges are only read by the kernel in the other
    // process, which checks them (EFAULT) and the permission (EPERM).
    let n = unsafe { libc::process_vm_readv(pid, local_iov.as_ptr(), local_iov.len() as libc::c_ulong, remote_iov.as_ptr(), remote_iov.len() as libc::c_ulong, 0) };
    if n < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(n as usize)
    }
}

/// Whether this process can pull from the one a hello describes: same boot id, and its nonce read
/// at the announced address in the announced pid (which proves same host, same pid namespace and
/// ptrace permission at once).
fn verify(hello: &Hello) -> Result<Remote, String> {
    let Some(mine) = process().hello else { return Err("no same-host identity here".into()) };
    if hello.boot_id != mine.boot_id {
        return Err("another host (boot id differs)".into());
    }
    let mut nonce = [0u8; 16];
    let pid = hello.pid as libc::pid_t;
    match read_remote(pid, &mut [(nonce.as_mut_ptr(), 16)], &[(hello.area_addr, 16)]) {
        Ok(16) if nonce == hello.nonce => Ok(Remote { pid, area_addr: hello.area_addr, nonce: hello.nonce, slot_count: hello.slot_count }),
        Ok(16) => Err(format!("pid {pid} here is another process (another pid namespace?)")),
        Ok(n) => Err(format!("short read of {n} bytes")),
        Err(errno) => Err(format!("process_vm_readv of pid {pid}: {}", errno_text(errno))),
    }
}

/// Pulls a message's bytes into `dest`, checking the nonce before and the slot's token after.
fn pull(remote: &Remote, descriptor: &PullDescriptor, dest: &mut [u8]) -> Result<(), String> {
    let mut nonce = [0u8; 16];
    let mut token = [0u8; 8];
    let len = dest.len();
    let slot_addr = remote.area_addr + 16 + 8 * descriptor.slot as u64;
    let expected = 16 + len + 8;
    match read_remote(
        remote.pid,
        &mut [(nonce.as_mut_ptr(), 16), (dest.as_mut_ptr(), len), (token.as_mut_ptr(), 8)],
        &[(remote.area_addr, 16), (descriptor.addr, len), (slot_addr, 8)],
    ) {
        Err(errno) => Err(format!("process_vm_readv: {}", errno_text(errno))),
        Ok(n) if n != expected => Err(format!("short read: {n} of {expected} bytes")),
        Ok(_) if nonce != remote.nonce => Err("the sender's pid names another process now".into()),
        Ok(_) if u64::from_le_bytes(token) != descriptor.token => Err("the sender let the buffer go before the pull finished".into()),
        Ok(_) => Ok(()),
    }
}

impl NodeInner {
    /// A connection is wired up: to a peer on this host, announce this process so the peer can
    /// prove it may pull from it (step 1 of the sequence).
    pub(super) fn same_host_hello(&self, state: &mut NodeState, conn_id: u64) {
        if !self.config.same_host_pull || self.config.transport != Transport::Auto {
            return;
        }
        let Some(conn) = state.conns.get(&conn_id) else { return };
        let Some(hello) = process().hello.filter(|_| conn.same_host) else { return };
        state.same_host.peers.entry(conn_id).or_default();
        let header = control_header(wire::CONTROL_HELLO, wire::STATUS_OK);
        self.send_message(state, conn_id, header, Payload::Bytes(hello.encode().to_vec()), None);
    }

    /// Sends a message of at least `same_host_pull_min_bytes` as a descriptor when the peer has
    /// verified this process; gives the payload back when the message must go through UCX.
    pub(super) fn send_by_pull(&self, state: &mut NodeState, conn_id: u64, header: &Header, payload: Payload, request_id: Option<u64>) -> Result<(), Payload> {
        let len = payload.bytes().0.len();
        let kind = match header.kind {
            Kind::Request => Kind::PulledRequest,
            Kind::Response => Kind::PulledResponse,
            _ => return Err(payload),
        };
        if len < self.config.same_host_pull_min_bytes || len > PULL_MAX_BYTES || len == 0 {
            return Err(payload);
        }
        let Some(peer) = state.same_host.peers.get_mut(&conn_id).filter(|p| p.send_by_pull) else { return Err(payload) };
        if peer.held_bytes + len > self.config.max_reassembly_bytes_per_connection {
            return Err(payload);
        }
        let process = process();
        let Some(slot) = process.free_slots.lock().unwrap_or_else(|e| e.into_inner()).pop() else { return Err(payload) };
        let token = process.next_token.fetch_add(1, Ordering::Relaxed);
        process.area.slots[slot as usize].store(token, Ordering::SeqCst);
        let descriptor = PullDescriptor { addr: payload.bytes().0.as_ptr() as u64, slot, token };
        peer.held.insert(token, Held { slot, len, _payload: payload });
        peer.held_bytes += len;
        let header = Header { kind, chunk_index: 0, chunk_count: 1, offset: 0, total_len: len as u64, ..*header };
        let ep = state.conns.get(&conn_id).map(|c| (c.ep, c.send_flags));
        let Some((ep, flags)) = ep else { return Ok(()) };
        if let Err(e) = self.post_send(state, ep, flags, &header, Payload::Bytes(descriptor.encode().to_vec()), 0, wire::PULL_DESCRIPTOR_LEN, request_id) {
            log_warn!("send to connection {conn_id} failed: {e}");
            if let Some(id) = request_id {
                self.complete_pending(state, id, Err(e.clone()));
            }
            self.fail_conn(state, conn_id, &e.to_string());
        }
        Ok(())
    }

    /// A control message of the same-host path arrived (hello, hello reply, release).
    pub(super) fn on_same_host_control(&self, state: &mut NodeState, conn_id: u64, header: &Header, bytes: &[u8]) {
        match header.op {
            wire::CONTROL_HELLO => {
                let hello = match Hello::decode(bytes) {
                    Ok(hello) => hello,
                    Err(e) => return self.same_host_protocol_error(state, conn_id, &e.to_string()),
                };
                let enabled = self.config.same_host_pull;
                let verdict = if enabled { verify(&hello) } else { Err("the same-host pull path is off on this node".into()) };
                let peer_name = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
                let same_host = &mut state.same_host;
                let peer = same_host.peers.entry(conn_id).or_default();
                match verdict {
                    Ok(remote) => {
                        log_debug!("same-host peer {peer_name} (pid {}): its large messages come by CMA pull", remote.pid);
                        peer.pull_from = Some(remote);
                        peer.reply = Some(None);
                    }
                    Err(reason) => {
                        self.counters.same_host_pull_refused.fetch_add(1, Ordering::Relaxed);
                        // One line per node says which path is used; turned off by config is no news.
                        if enabled && !std::mem::replace(&mut same_host.refusal_logged, true) {
                            log_warn!("same-host peer {peer_name}: CMA refused ({reason}); its large messages to this node go by UCX rendezvous");
                        } else {
                            log_debug!("same-host peer {peer_name}: CMA refused ({reason})");
                        }
                        let peer = same_host.peers.entry(conn_id).or_default();
                        peer.reply = Some(Some(reason));
                    }
                }
                state.same_host.mark_dirty(conn_id);
            }
            wire::CONTROL_HELLO_REPLY => {
                let Some(peer) = state.same_host.peers.get_mut(&conn_id) else {
                    return self.same_host_protocol_error(state, conn_id, "hello reply without a hello");
                };
                if header.status == wire::STATUS_OK {
                    peer.send_by_pull = true;
                } else {
                    self.counters.same_host_pull_refused.fetch_add(1, Ordering::Relaxed);
                    log_debug!("connection {conn_id}: the peer refused to pull ({}); large messages to it go by UCX", String::from_utf8_lossy(bytes));
                }
            }
            wire::CONTROL_RELEASE => {
                let tokens = match wire::decode_release(bytes) {
                    Ok(tokens) => tokens,
                    Err(e) => return self.same_host_protocol_error(state, conn_id, &e.to_string()),
                };
                let Some(peer) = state.same_host.peers.get_mut(&conn_id) else {
                    return self.same_host_protocol_error(state, conn_id, "release with nothing held");
                };
                for token in tokens {
                    let Some(held) = peer.held.remove(&token) else {
                        return self.same_host_protocol_error(state, conn_id, &format!("release of token {token}, not held"));
                    };
                    peer.held_bytes -= held.len;
                    free_slot(held.slot);
                }
            }
            _ => self.same_host_protocol_error(state, conn_id, "unknown control op"),
        }
    }

    /// A pulled request or response arrived: pull its bytes into a pooled buffer (the one copy),
    /// queue the release for the sender, pass the message on (step 3-5 of the sequence).
    pub(super) fn on_pulled(&self, state: &mut NodeState, conn_id: u64, header: &Header, bytes: &[u8]) {
        let Some(peer) = state.same_host.peers.get_mut(&conn_id) else {
            return self.same_host_protocol_error(state, conn_id, "pulled message from a peer not verified");
        };
        let Some(remote) = peer.pull_from else {
            return self.same_host_protocol_error(state, conn_id, "pulled message from a peer not verified");
        };
        let descriptor = match PullDescriptor::decode(bytes, header.total_len, remote.slot_count) {
            Ok(d) => d,
            Err(e) => return self.same_host_protocol_error(state, conn_id, &e.to_string()),
        };
        if peer.releases.len() >= wire::RELEASE_TOKENS_MAX * 64 {
            // Releases are sent after every progress call; this many unsent means something is
            // badly wrong with the peer's connection.
            return self.same_host_protocol_error(state, conn_id, "too many releases pending");
        }
        let kind = if header.kind == Kind::PulledRequest { Kind::Request } else { Kind::Response };
        let header = Header { kind, ..*header };
        let len = header.total_len as usize;
        if kind == Kind::Response && state.pending.get(header.request_id).is_none_or(|e| e.conn_id != conn_id) {
            return self.queue_release(state, conn_id, descriptor.token); // abandoned or timed out: released without pulling
        }
        let buffer = self.pool.alloc(len, None);
        let buffer = match buffer {
            Ok(buffer) if kind == Kind::Response && len >= DEFER_PULL_MIN_BYTES => {
                // Released after the pull, by the puller: a release sent first would let the sender
                // reuse the buffer, and the pull would fail its token check.
                match self.defer_pull(DeferredPull { conn_id, header, remote, descriptor, buffer }) {
                    None => return,
                    Some(buffer) => Ok(buffer),
                }
            }
            other => other,
        };
        self.queue_release(state, conn_id, descriptor.token);
        let payload = buffer.and_then(|mut buffer| {
            let pulled = pull(&remote, &descriptor, buffer.as_mut_slice());
            self.pulled(state, conn_id, &header, &remote, pulled).map(|()| buffer)
        });
        self.on_message(state, conn_id, &header, payload);
    }

    /// Queues `token` to be handed back to the peer after the progress call (step 5).
    fn queue_release(&self, state: &mut NodeState, conn_id: u64, token: u64) {
        if let Some(peer) = state.same_host.peers.get_mut(&conn_id) {
            peer.releases.push(token);
            state.same_host.mark_dirty(conn_id);
        }
    }

    /// Counts a pull's outcome; a failed pull becomes the message's `PeerFailed`.
    fn pulled(&self, state: &NodeState, conn_id: u64, header: &Header, remote: &Remote, pulled: Result<(), String>) -> Result<(), Error> {
        let len = header.total_len as usize;
        match pulled {
            Ok(()) => {
                self.counters.same_host_bytes_pulled.fetch_add(len as u64, Ordering::Relaxed);
                Ok(())
            }
            Err(reason) => {
                self.counters.same_host_pulls_failed.fetch_add(1, Ordering::Relaxed);
                log_warn!("pulling {len} bytes of message {} from pid {} failed: {reason}", header.request_id, remote.pid);
                let peer = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
                Err(Error::PeerFailed { peer, reason: format!("same-host pull: {reason}") })
            }
        }
    }

    /// Hands a pull to the node's puller thread (started on the first); gives its buffer back
    /// when the queue is full or the thread cannot start (the caller then pulls in the callback).
    fn defer_pull(&self, job: DeferredPull) -> Option<Buffer> {
        let pulls = &self.deferred_pulls;
        {
            let mut queue = pulls.queue.lock().unwrap_or_else(|e| e.into_inner());
            if queue.len() >= DEFERRED_PULLS_MAX {
                return Some(job.buffer);
            }
            if !pulls.started.swap(true, Ordering::SeqCst) {
                let weak = Arc::downgrade(&self.arc());
                let spawned = std::thread::Builder::new().name("fabric-puller".into()).spawn(move || puller_loop(weak));
                if let Err(e) = spawned {
                    pulls.started.store(false, Ordering::SeqCst);
                    log_warn!("no puller thread ({e}): large same-host responses are pulled in the receive path");
                    return Some(job.buffer);
                }
            }
            queue.push_back(job);
        }
        pulls.ready.notify_one();
        None
    }

    /// Drops the pulls of a connection that failed or closes still waiting for the puller thread:
    /// nobody waits for them any more (their requests fail with the connection), and their
    /// buffers go back to the pool now. A pull under way ends on its own (the sender's slot words
    /// are cleared, so it fails its token check) and finds its request gone.
    pub(super) fn drop_deferred_pulls(&self, conn_id: u64) {
        if !self.deferred_pulls.started.load(Ordering::SeqCst) {
            return;
        }
        let dropped: VecDeque<DeferredPull> = {
            let mut queue = self.deferred_pulls.queue.lock().unwrap_or_else(|e| e.into_inner());
            let (gone, kept) = std::mem::take(&mut *queue).into_iter().partition(|job| job.conn_id == conn_id);
            *queue = kept;
            gone
        };
        drop(dropped);
    }

    /// The puller thread's part under the worker lock, after the copy: the release, then the
    /// response to its waiter unless it was given up (timed out, the connection failed) meanwhile.
    fn finish_deferred_pull(&self, state: &mut NodeState, job: DeferredPull, pulled: Result<(), String>) {
        let DeferredPull { conn_id, header, remote, descriptor, buffer } = job;
        self.queue_release(state, conn_id, descriptor.token);
        let payload = self.pulled(state, conn_id, &header, &remote, pulled).map(|()| buffer);
        if state.pending.get(header.request_id).is_some_and(|e| e.conn_id == conn_id) {
            self.on_message(state, conn_id, &header, payload);
        }
        // Sent now rather than after the next progress call, which may be 20 ms away.
        if state.same_host.has_outgoing() {
            self.flush_same_host(state);
        }
    }

    pub(super) fn same_host_protocol_error(&self, state: &mut NodeState, conn_id: u64, reason: &str) {
        self.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
        let peer = state.conns.get(&conn_id).map(|c| c.peer_name.clone()).unwrap_or_default();
        log_warn!("closing connection from {peer}: {reason}");
        self.fail_conn(state, conn_id, reason);
    }

    /// Sends the hello replies and releases queued by the receive path; returns how many messages.
    pub(super) fn flush_same_host(&self, state: &mut NodeState) -> usize {
        let mut sent = 0;
        for conn_id in std::mem::take(&mut state.same_host.dirty) {
            let Some(peer) = state.same_host.peers.get_mut(&conn_id) else { continue };
            let reply = peer.reply.take();
            let releases = std::mem::take(&mut peer.releases);
            if let Some(refusal) = reply {
                let (status, text) = match refusal {
                    None => (wire::STATUS_OK, Vec::new()),
                    Some(reason) => (wire::STATUS_PULL_REFUSED, reason.into_bytes()),
                };
                let text = text[..text.len().min(wire::CONTROL_MAX_BYTES)].to_vec();
                self.send_message(state, conn_id, control_header(wire::CONTROL_HELLO_REPLY, status), Payload::Bytes(text), None);
                sent += 1;
            }
            for batch in releases.chunks(wire::RELEASE_TOKENS_MAX) {
                let bytes: Vec<u8> = batch.iter().flat_map(|t| t.to_le_bytes()).collect();
                self.send_message(state, conn_id, control_header(wire::CONTROL_RELEASE, wire::STATUS_OK), Payload::Bytes(bytes), None);
                sent += 1;
            }
        }
        sent
    }
}

/// The puller thread: copies deferred responses' bytes outside the worker lock, then finishes each
/// under it. Exits when the node is gone or closed (after a 100 ms look when idle).
fn puller_loop(node: Weak<NodeInner>) {
    loop {
        let Some(inner) = node.upgrade() else { return };
        let job = {
            let pulls = &inner.deferred_pulls;
            let mut queue = pulls.queue.lock().unwrap_or_else(|e| e.into_inner());
            if queue.is_empty() {
                queue = pulls.ready.wait_timeout(queue, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
            }
            queue.pop_front()
        };
        let Some(mut job) = job else {
            if inner.closed.load(Ordering::SeqCst) {
                return;
            }
            continue;
        };
        let pulled = pull(&job.remote, &job.descriptor, job.buffer.as_mut_slice());
        inner.counters.same_host_pulls_deferred.fetch_add(1, Ordering::Relaxed);
        // A closed node drops the job: its connections are gone, and with them the sender's slots.
        let _ = inner.with_state(|inner, state| {
            inner.finish_deferred_pull(state, job, pulled);
            Ok(())
        });
        // A waiter asleep on the worker's event fd (a JVM caller, or the progress thread) learns of
        // the completion only from a signal: no UCX event marks it.
        inner.runtime.wake();
    }
}

fn control_header(op: u16, status: u16) -> Header {
    Header { kind: Kind::Control, op, status, chunk_index: 0, chunk_count: 1, request_id: 0, total_len: 0, offset: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_verifies_its_own_hello_and_refuses_a_wrong_nonce() {
        let hello = process().hello.expect("a Linux host has a boot id");
        let remote = verify(&hello).expect("a process may read itself");
        assert_eq!(remote.pid as u32, std::process::id());
        let forged = Hello { nonce: [0xAB; 16], ..hello };
        assert!(verify(&forged).unwrap_err().contains("another process"));
        let elsewhere = Hello { boot_id: [b'0'; 36], ..hello };
        assert!(verify(&elsewhere).unwrap_err().contains("boot id"));
        let unmapped = Hello { area_addr: 8, ..hello };
        assert!(verify(&unmapped).unwrap_err().contains("EFAULT"), "{:?}", verify(&unmapped));
    }

    #[test]
    fn a_pull_checks_the_slot_token_after_the_bytes() {
        let hello = process().hello.unwrap();
        let remote = verify(&hello).unwrap();
        let source: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let slot = process().free_slots.lock().unwrap().pop().unwrap();
        let token = process().next_token.fetch_add(1, Ordering::Relaxed);
        process().area.slots[slot as usize].store(token, Ordering::SeqCst);
        let descriptor = PullDescriptor { addr: source.as_ptr() as u64, slot, token };
        let mut dest = vec![0u8; source.len()];
        pull(&remote, &descriptor, &mut dest).unwrap();
        assert_eq!(dest, source);
        free_slot(slot);
        let err = pull(&remote, &descriptor, &mut dest).unwrap_err();
        assert!(err.contains("let the buffer go"), "{err}");
        let bad_addr = PullDescriptor { addr: 16, ..descriptor };
        // The nonce was read, then the bad range faulted: a partial read, never a panic.
        let err = pull(&remote, &bad_addr, &mut dest).unwrap_err();
        assert!(err.contains("short read") || err.contains("EFAULT"), "{err}");
    }
}
