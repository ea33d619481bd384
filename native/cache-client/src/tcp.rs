//! One TCP connection to one server: a blocking socket (`TCP_NODELAY`, `SO_RCVTIMEO`/`SO_SNDTIMEO`
//! set to the I/O timeout) with reused read and write buffers.
//!
//! Requests go out in order and replies come back in the same order. Non-blocking requests
//! (`iset`, `iget`, ...) are written at once and remembered in `queue`; their replies are read
//! later, by `test`/`wait` or before the reply of any later blocking call on the connection, and
//! handed to a [`Sink`] (the client's request slots). A write that cannot complete at once reads
//! the replies of queued requests while it waits, so a long pipeline cannot deadlock with both
//! socket buffers full. Writes use `MSG_NOSIGNAL`: a closed peer is an error, never a SIGPIPE (the
//! C library runs inside programs that do not ignore it).
//!
//! Any I/O or protocol error closes the connection and fails every queued request with it; the
//! next call reconnects.
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use cache_proto::binary::{opcode, HEADER_BYTES};

use crate::error::{Error, Result};
use crate::nonblocking::Meta;
use crate::packet::{self, Reply, ReplyHead, Req};

/// Initial size of the read buffer; it grows to the largest reply seen.
const READ_BUFFER_BYTES_INITIAL: usize = 64 << 10;
/// Values of at least this size are received straight into the caller's buffer.
const DIRECT_VALUE_BYTES_MIN: usize = 32 << 10;
/// A read buffer grown above this is shrunk back when it empties.
const READ_BUFFER_BYTES_KEPT: usize = 4 << 20;

/// Where replies of queued (non-blocking) requests go.
pub(crate) trait Sink {
    /// The reply to the request in `slot`, or the error that ended its connection.
    fn deliver(&mut self, slot: u32, reply: Result<Reply<'_>>);
}

/// A request written whose reply has not been read yet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queued {
    pub slot: u32,
    pub opaque: u32,
}

/// Settings a connection needs.
#[derive(Debug, Clone)]
pub(crate) struct TcpSettings {
    pub connect_timeout: Duration,
    pub io_timeout: Duration,
    pub body_bytes_max: usize,
    pub sasl: Option<Vec<u8>>,
}

pub(crate) struct TcpConn {
    pub addr: SocketAddr,
    stream: Option<TcpStream>,
    fd: RawFd,
    /// Bytes `rpos..rend` of `rbuf` are received and not yet consumed.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Scratch for request heads (and whole small requests).
    wbuf: Vec<u8>,
    /// Bytes of non-blocking requests the socket did not take yet, from `outq_pos`.
    outq: Vec<u8>,
    outq_pos: usize,
    /// Non-blocking requests awaiting their replies, oldest first.
    pub queue: VecDeque<Queued>,
    next_opaque: u32,
}

impl TcpConn {
    pub fn new(addr: SocketAddr, queue_depth: usize) -> TcpConn {
        TcpConn {
            addr,
            stream: None,
            fd: -1,
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            wbuf: Vec::with_capacity(1024),
            outq: Vec::new(),
            outq_pos: 0,
            queue: VecDeque::with_capacity(queue_depth),
            next_opaque: 1,
        }
    }

    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    pub fn next_opaque(&mut self) -> u32 {
        let o = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        o
    }

    /// Connects (and authenticates) unless connected.
    #[inline]
    pub fn ensure_connected(&mut self, settings: &TcpSettings) -> Result<()> {
        if self.stream.is_some() {
            return Ok(());
        }
        self.connect(settings)
    }

    #[cold]
    fn connect(&mut self, settings: &TcpSettings) -> Result<()> {
        debug_assert!(self.queue.is_empty());
        let stream = TcpStream::connect_timeout(&self.addr, settings.connect_timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(settings.io_timeout))?;
        stream.set_write_timeout(Some(settings.io_timeout))?;
        self.fd = stream.as_raw_fd();
        self.stream = Some(stream);
        if self.rbuf.is_empty() {
            self.rbuf = vec![0u8; READ_BUFFER_BYTES_INITIAL];
        }
        self.rpos = 0;
        self.rend = 0;
        self.outq.clear();
        self.outq_pos = 0;
        if let Some(plain) = &settings.sasl {
            let plain = plain.clone();
            let req = Req { value: &plain, ..Req::new(opcode::SASL_AUTH, b"PLAIN") };
            let result = self.call(&req, &mut NoSink, settings).and_then(|r| r.check());
            if let Err(e) = result {
                self.close();
                return Err(match e {
                    Error::ServerError(_) | Error::NotFound | Error::InvalidArguments => Error::AuthFailed,
                    other => other,
                });
            }
        }
        Ok(())
    }

    /// Applies a new I/O timeout to the open socket (new ones get it at connect).
    pub fn apply_timeouts(&mut self, io_timeout: Duration) {
        if let Some(stream) = &self.stream {
            let _ = stream.set_read_timeout(Some(io_timeout));
            let _ = stream.set_write_timeout(Some(io_timeout));
        }
    }

    pub fn close(&mut self) {
        self.stream = None;
        self.fd = -1;
        self.rpos = 0;
        self.rend = 0;
        self.outq.clear();
        self.outq_pos = 0;
    }

    /// Closes the connection after `error` and fails every queued request with it.
    pub fn fail(&mut self, error: &Error, sink: &mut dyn Sink) {
        self.close();
        while let Some(q) = self.queue.pop_front() {
            sink.deliver(q.slot, Err(error.clone()));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Blocking calls.

    /// Sends `req` with a fresh opaque, delivers the replies of queued requests, and returns the
    /// reply to `req` (valid until the next read on this connection). Closes the connection on
    /// an I/O or protocol error.
    pub fn call<'s>(&'s mut self, req: &Req, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<Reply<'s>> {
        let opaque = self.next_opaque();
        let req = Req { opaque, ..*req };
        let head = match self.send_and_read(&req, sink, settings) {
            Ok(head) => head,
            Err(e) => {
                self.fail(&e, sink);
                return Err(e);
            }
        };
        if head.header.opaque != opaque {
            let e = Error::Protocol(format!("reply opaque {} to request {opaque}", head.header.opaque));
            self.fail(&e, sink);
            return Err(e);
        }
        let at = self.rpos;
        self.rpos += head.total_len;
        Ok(packet::reply_at(&self.rbuf[at..], &head))
    }

    fn send_and_read(&mut self, req: &Req, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<ReplyHead> {
        self.ensure_connected(settings)?;
        let mut wbuf = std::mem::take(&mut self.wbuf);
        wbuf.clear();
        let sent = if req.value.len() <= 2048 {
            req.append_to(&mut wbuf);
            self.write_all(&[&wbuf], sink, settings)
        } else {
            req.append_head_to(&mut wbuf);
            self.write_all(&[&wbuf, req.value], sink, settings)
        };
        self.wbuf = wbuf;
        sent?;
        self.drain_queue(sink, settings)?;
        Ok(self.fill_reply(true, settings.body_bytes_max)?.expect("blocking fill returns a reply"))
    }

    /// A GET whose value goes into `dest`: like `call`, but a large value is received straight
    /// into `dest` instead of through the read buffer (one copy less). `None` on a miss.
    pub fn call_get(
        &mut self,
        req: &Req,
        dest: &mut Vec<u8>,
        sink: &mut dyn Sink,
        settings: &TcpSettings,
    ) -> Result<Option<Meta>> {
        let opaque = self.next_opaque();
        let req = Req { opaque, ..*req };
        let result = self.send_and_read_get(&req, dest, sink, settings);
        if let Err(e) = &result {
            if e.is_connection_error() {
                self.fail(e, sink);
            }
        }
        result
    }

    fn send_and_read_get(
        &mut self,
        req: &Req,
        dest: &mut Vec<u8>,
        sink: &mut dyn Sink,
        settings: &TcpSettings,
    ) -> Result<Option<Meta>> {
        self.ensure_connected(settings)?;
        let mut wbuf = std::mem::take(&mut self.wbuf);
        wbuf.clear();
        req.append_to(&mut wbuf);
        let sent = self.write_all(&[&wbuf], sink, settings);
        self.wbuf = wbuf;
        sent?;
        self.drain_queue(sink, settings)?;
        // The header, then (for a large value) extras and key, through the read buffer.
        while self.rend - self.rpos < HEADER_BYTES {
            self.make_room(HEADER_BYTES);
            self.recv_some(true)?;
        }
        let head = packet::reply_head(&self.rbuf[self.rpos..self.rend], settings.body_bytes_max)?;
        if head.header.opaque != req.opaque {
            return Err(Error::Protocol(format!("reply opaque {} to request {}", head.header.opaque, req.opaque)));
        }
        let value_len = head.header.value_len().expect("checked by reply_head");
        let prefix = HEADER_BYTES + head.header.extras_len as usize + head.header.key_len as usize;
        if head.header.vbucket_or_status != 0 || value_len < DIRECT_VALUE_BYTES_MIN {
            let head = self.fill_reply(true, settings.body_bytes_max)?.expect("blocking fill returns a reply");
            let at = self.rpos;
            self.rpos += head.total_len;
            let reply = packet::reply_at(&self.rbuf[at..], &head);
            return match reply.check() {
                Ok(()) => {
                    dest.clear();
                    dest.extend_from_slice(reply.value);
                    Ok(Some(Meta { flags: reply.flags(), cas: reply.cas }))
                }
                Err(Error::NotFound) => Ok(None),
                Err(e) => Err(e),
            };
        }
        while self.rend - self.rpos < prefix {
            self.make_room(prefix);
            self.recv_some(true)?;
        }
        let extras = &self.rbuf[self.rpos + HEADER_BYTES..self.rpos + HEADER_BYTES + head.header.extras_len as usize];
        let flags = extras.get(..4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        self.rpos += prefix;
        // What already arrived of the value, then the rest straight from the socket.
        dest.clear();
        dest.reserve(value_len);
        let buffered = (self.rend - self.rpos).min(value_len);
        dest.extend_from_slice(&self.rbuf[self.rpos..self.rpos + buffered]);
        self.rpos += buffered;
        while dest.len() < value_len {
            let missing = value_len - dest.len();
            let spare = &mut dest.spare_capacity_mut()[..missing];
            // SAFETY: `spare` is valid for writes of its length; `fd` is our open socket.
            let n = unsafe { libc::recv(self.fd, spare.as_mut_ptr().cast(), spare.len(), 0) };
            if n > 0 {
                // SAFETY: recv initialised n more bytes after the current length.
                unsafe { dest.set_len(dest.len() + n as usize) };
                continue;
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by the server").into());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        }
        Ok(Some(Meta { flags, cas: head.header.cas }))
    }

    /// Writes `bytes` (already-encoded requests) and delivers queued replies; the replies to
    /// these requests are then read with `read_reply`.
    pub fn send_raw(&mut self, bytes: &[u8], sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        let result = self.ensure_connected(settings).and_then(|_| self.write_all(&[bytes], sink, settings));
        if let Err(e) = &result {
            self.fail(e, sink);
        }
        result
    }

    /// Reads the next reply (blocking), after delivering every queued one. Closes the
    /// connection on error.
    pub fn read_reply<'s>(&'s mut self, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<Reply<'s>> {
        let head = match self.drain_queue(sink, settings).and_then(|_| self.fill_reply(true, settings.body_bytes_max)) {
            Ok(head) => head.expect("blocking fill returns a reply"),
            Err(e) => {
                self.fail(&e, sink);
                return Err(e);
            }
        };
        let at = self.rpos;
        self.rpos += head.total_len;
        Ok(packet::reply_at(&self.rbuf[at..], &head))
    }

    // -----------------------------------------------------------------------------------------
    // Non-blocking requests.

    /// Writes a request whose reply is read later, never blocking: what the socket does not take
    /// now is copied to the output queue and sent by later calls. The caller queues the request.
    pub fn send_nonblocking(&mut self, req: &Req, settings: &TcpSettings) -> Result<()> {
        self.ensure_connected(settings)?;
        let mut wbuf = std::mem::take(&mut self.wbuf);
        wbuf.clear();
        req.append_head_to(&mut wbuf);
        let result = self.write_or_queue(&[&wbuf, req.value]);
        self.wbuf = wbuf;
        result
    }

    /// Writes a request whose reply is read later, returning once every byte is with the kernel.
    pub fn send_now(&mut self, req: &Req, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        self.ensure_connected(settings)?;
        let mut wbuf = std::mem::take(&mut self.wbuf);
        wbuf.clear();
        req.append_head_to(&mut wbuf);
        let result = self.write_all(&[&wbuf, req.value], sink, settings);
        self.wbuf = wbuf;
        result
    }

    fn write_or_queue(&mut self, parts: &[&[u8]]) -> Result<()> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut sent = 0;
        if self.outq_pos == self.outq.len() {
            self.outq.clear();
            self.outq_pos = 0;
            sent = match self.send_at(parts, 0, libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e.into()),
            };
        }
        if sent < total {
            let mut skip = sent;
            for part in parts {
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                self.outq.extend_from_slice(&part[skip..]);
                skip = 0;
            }
            self.flush_outq_nonblocking()?;
        }
        Ok(())
    }

    /// Sends what the socket takes of the output queue now.
    pub fn flush_outq_nonblocking(&mut self) -> Result<()> {
        while self.outq_pos < self.outq.len() {
            let part = &self.outq[self.outq_pos..];
            match self.send_at(&[part], 0, libc::MSG_DONTWAIT) {
                Ok(n) => self.outq_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        self.outq.clear();
        self.outq_pos = 0;
        Ok(())
    }

    /// Delivers every reply that has arrived for queued requests, without blocking.
    pub fn poll_queue(&mut self, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        if !self.is_connected() {
            return Ok(());
        }
        let result = self.flush_outq_nonblocking().and_then(|_| self.deliver_available(sink, settings.body_bytes_max));
        if let Err(e) = &result {
            self.fail(e, sink);
        }
        result
    }

    /// Reads (blocking) until the queued request in `slot` has its reply.
    pub fn wait_for(&mut self, slot: u32, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        let result = (|| {
            self.flush_outq(sink, settings)?;
            while let Some(&front) = self.queue.front() {
                self.deliver_next(sink, settings.body_bytes_max)?;
                if front.slot == slot {
                    break;
                }
            }
            Ok(())
        })();
        if let Err(e) = &result {
            self.fail(e, sink);
        }
        result
    }

    /// Delivers every queued reply (blocking); closes the connection on error.
    pub fn drain(&mut self, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        let result = self.drain_queue(sink, settings);
        if let Err(e) = &result {
            self.fail(e, sink);
        }
        result
    }

    /// Delivers every queued reply (blocking).
    fn drain_queue(&mut self, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        if self.queue.is_empty() {
            return Ok(());
        }
        self.flush_outq(sink, settings)?;
        while !self.queue.is_empty() {
            self.deliver_next(sink, settings.body_bytes_max)?;
        }
        Ok(())
    }

    /// Reads the reply of the oldest queued request (blocking) and delivers it.
    fn deliver_next(&mut self, sink: &mut dyn Sink, body_bytes_max: usize) -> Result<()> {
        let head = self.fill_reply(true, body_bytes_max)?.expect("blocking fill returns a reply");
        self.deliver_head(head, sink)
    }

    fn deliver_head(&mut self, head: ReplyHead, sink: &mut dyn Sink) -> Result<()> {
        let queued = self.queue.front().copied().expect("a reply to deliver needs a queued request");
        if head.header.opaque != queued.opaque {
            return Err(Error::Protocol(format!(
                "reply opaque {} to queued request {}",
                head.header.opaque, queued.opaque
            )));
        }
        self.queue.pop_front();
        let at = self.rpos;
        self.rpos += head.total_len;
        sink.deliver(queued.slot, Ok(packet::reply_at(&self.rbuf[at..], &head)));
        Ok(())
    }

    /// Delivers the replies already received or receivable without blocking.
    fn deliver_available(&mut self, sink: &mut dyn Sink, body_bytes_max: usize) -> Result<()> {
        while !self.queue.is_empty() {
            match self.fill_reply(false, body_bytes_max)? {
                Some(head) => self.deliver_head(head, sink)?,
                None => break,
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Bytes.

    /// Makes the next complete reply available at `rbuf[rpos..]`. Non-blocking mode returns
    /// `None` when it has not fully arrived.
    fn fill_reply(&mut self, block: bool, body_bytes_max: usize) -> Result<Option<ReplyHead>> {
        loop {
            let available = self.rend - self.rpos;
            let need = if available >= HEADER_BYTES {
                let head = packet::reply_head(&self.rbuf[self.rpos..self.rend], body_bytes_max)?;
                if available >= head.total_len {
                    return Ok(Some(head));
                }
                head.total_len
            } else {
                HEADER_BYTES
            };
            self.make_room(need);
            if !self.recv_some(block)? {
                return Ok(None);
            }
        }
    }

    /// Ensures `rbuf[rpos..]` can hold `need` bytes: moves the unread bytes to the front and
    /// grows the buffer if needed.
    fn make_room(&mut self, need: usize) {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
            if self.rbuf.len() > READ_BUFFER_BYTES_KEPT && need <= READ_BUFFER_BYTES_INITIAL {
                self.rbuf = vec![0u8; READ_BUFFER_BYTES_INITIAL];
            }
        }
        if self.rbuf.len() - self.rpos >= need && self.rbuf.len() > self.rend {
            return;
        }
        if self.rpos > 0 {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
        }
        if self.rbuf.len() < need {
            self.rbuf.resize(need.next_power_of_two(), 0);
        }
    }

    /// One `recv` into the free end of the buffer. `Ok(false)`: nothing there (non-blocking).
    fn recv_some(&mut self, block: bool) -> Result<bool> {
        debug_assert!(self.rend < self.rbuf.len());
        let flags = if block { 0 } else { libc::MSG_DONTWAIT };
        loop {
            let spare = &mut self.rbuf[self.rend..];
            // SAFETY: `spare` is valid for writes of its length; `fd` is our open socket.
            let n = unsafe { libc::recv(self.fd, spare.as_mut_ptr().cast(), spare.len(), flags) };
            if n > 0 {
                self.rend += n as usize;
                return Ok(true);
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by the server").into());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock if !block => return Ok(false),
                _ => return Err(e.into()), // WouldBlock when blocking: SO_RCVTIMEO expired -> Timeout
            }
        }
    }

    /// Sends the output queue completely (delivering queued replies while the socket is full).
    fn flush_outq(&mut self, sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        if self.outq_pos == self.outq.len() {
            return Ok(());
        }
        let outq = std::mem::take(&mut self.outq);
        let pos = std::mem::replace(&mut self.outq_pos, 0);
        let result = self.write_all_from(&[&outq[pos..]], 0, sink, settings);
        self.outq = outq;
        self.outq.clear();
        result
    }

    /// Writes every byte of `parts` after the output queue, returning once the kernel has them.
    fn write_all(&mut self, parts: &[&[u8]], sink: &mut dyn Sink, settings: &TcpSettings) -> Result<()> {
        self.flush_outq(sink, settings)?;
        let sent = match self.send_at(parts, 0, libc::MSG_DONTWAIT) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e.into()),
        };
        if sent == parts.iter().map(|p| p.len()).sum::<usize>() {
            return Ok(());
        }
        self.write_all_from(parts, sent, sink, settings)
    }

    /// The slow path of `write_all`: waits for room with `poll`, reading queued replies whenever
    /// some arrive, until the deadline.
    #[cold]
    fn write_all_from(
        &mut self,
        parts: &[&[u8]],
        mut sent: usize,
        sink: &mut dyn Sink,
        settings: &TcpSettings,
    ) -> Result<()> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if self.queue.is_empty() {
            // No replies can be pending: block in the kernel (bounded by SO_SNDTIMEO) instead of
            // polling, which costs a system call per socket-buffer's worth.
            while sent < total {
                match self.send_at(parts, sent, 0) {
                    Ok(n) => sent += n,
                    Err(e) => return Err(e.into()), // WouldBlock: SO_SNDTIMEO expired -> Timeout
                }
            }
            return Ok(());
        }
        let deadline = Instant::now() + settings.io_timeout;
        while sent < total {
            match self.send_at(parts, sent, libc::MSG_DONTWAIT) {
                Ok(n) => {
                    sent += n;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout);
            }
            let mut events = libc::POLLOUT;
            if !self.queue.is_empty() {
                events |= libc::POLLIN;
            }
            let mut pfd = libc::pollfd { fd: self.fd, events, revents: 0 };
            let wait_ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            if pfd.revents & libc::POLLIN != 0 {
                self.deliver_available(sink, settings.body_bytes_max)?;
            }
        }
        Ok(())
    }

    /// One `sendmsg` of `parts` from byte `skip` on. Returns the bytes the kernel took.
    fn send_at(&self, parts: &[&[u8]], mut skip: usize, flags: libc::c_int) -> io::Result<usize> {
        const PARTS_MAX: usize = 4;
        debug_assert!(parts.len() <= PARTS_MAX);
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; PARTS_MAX];
        let mut count = 0;
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            iov[count] =
                libc::iovec { iov_base: part[skip..].as_ptr() as *mut libc::c_void, iov_len: part.len() - skip };
            skip = 0;
            count += 1;
        }
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: a zeroed msghdr is valid; iov points at `count` live slices we only read from.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = count as _;
        loop {
            // SAFETY: `msg` is valid for the call; `fd` is our open socket.
            let n = unsafe { libc::sendmsg(self.fd, &msg, flags | libc::MSG_NOSIGNAL) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// A sink for calls made while nothing can be queued (authentication on a new connection).
struct NoSink;

impl Sink for NoSink {
    fn deliver(&mut self, slot: u32, _reply: Result<Reply<'_>>) {
        debug_assert!(false, "reply delivered for slot {slot} on a connection without queued requests");
    }
}
