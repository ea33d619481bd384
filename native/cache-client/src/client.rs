//! The client: servers, the ring, blocking operations, and the engine behind non-blocking requests.
use std::cell::{RefCell, RefMut};
use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use cache_proto::binary::{opcode, status};

use crate::error::{Error, Result};
pub use crate::settings::{resolve, ClientConfig, Credentials, FabricNode, ServerAddr};
use crate::nonblocking::{Meta, Request, SlotState, Slots};
use crate::packet::{self, check_key, Extras, Replies, Reply, Req, NO_INITIAL_VALUE};
use crate::ring::Ring;
use crate::tcp::{Queued, TcpConn, TcpSettings};

/// One server's statistics: (name, value) pairs in the server's order.
pub type Stats = Vec<(String, String)>;

/// A hit: value, flags and CAS.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    pub value: Vec<u8>,
    pub flags: u32,
    pub cas: u64,
}

/// A memcached client over TCP and the fabric, speaking the binary protocol on both.
///
/// One client is meant for one thread at a time: it is `Send` (move it to another thread) but
/// not `Sync` (share it and its single connection per server would need a lock on every
/// operation). Create one client per thread; over the fabric they all share one process-wide
/// node by default (see [`FabricNode`]). Methods take `&self` so non-blocking requests, which
/// borrow the client, can be in progress while other calls are made.
pub struct Client {
    config: ClientConfig,
    /// Timeouts and credentials in force (changed by `set_timeouts`/`set_credentials`).
    settings: RefCell<TcpSettings>,
    inner: RefCell<Inner>,
}

struct Inner {
    servers: Vec<Server>,
    names: Vec<String>,
    ring: Ring,
    slots: Slots,
    /// The fabric node, obtained with the first fabric server.
    node: Option<fabric::Node>,
    /// Scratch for `get_multi`: key indices per server, and request bytes.
    groups: Vec<Vec<u32>>,
    multi_buf: Vec<u8>,
}

enum Server {
    Tcp(TcpConn),
    Fabric(FabricConn),
}

struct FabricConn {
    addr: SocketAddr,
    endpoint: fabric::Endpoint,
    /// Credentials were accepted on this peer (reset when the server says otherwise).
    authenticated: bool,
}

/// The process-wide client node of `FabricNode::Shared`.
static SHARED_NODE: Mutex<Option<fabric::Node>> = Mutex::new(None);

fn shared_node() -> Result<fabric::Node> {
    let mut shared = SHARED_NODE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(node) = shared.as_ref().filter(|n| !n.is_closed()) {
        return Ok(node.clone());
    }
    let node = fabric::Node::start(fabric::Config::default(), None)?;
    *shared = Some(node.clone());
    Ok(node)
}

impl FabricConn {
    fn submit(&mut self, req: &Req, sasl: Option<&[u8]>, settings: &TcpSettings) -> Result<fabric::Pending> {
        if let (Some(plain), false) = (sasl, self.authenticated) {
            self.authenticate(plain, settings)?;
        }
        let mut buffer = self.endpoint.node().alloc(req.len())?;
        req.encode(&mut buffer);
        Ok(self.endpoint.request_buffer(cache_proto::FABRIC_OP_BINARY, buffer)?)
    }

    #[cold]
    fn authenticate(&mut self, plain: &[u8], settings: &TcpSettings) -> Result<()> {
        let req = Req { value: plain, ..Req::new(opcode::SASL_AUTH, b"PLAIN") };
        let mut buffer = self.endpoint.node().alloc(req.len())?;
        req.encode(&mut buffer);
        let response =
            self.endpoint.request_buffer(cache_proto::FABRIC_OP_BINARY, buffer)?.wait_timeout(settings.io_timeout)?;
        match packet::single_reply(&response, settings.body_bytes_max)?.check() {
            Ok(()) => {
                self.authenticated = true;
                Ok(())
            }
            Err(Error::ServerError(_) | Error::NotFound | Error::InvalidArguments | Error::AuthFailed) => {
                Err(Error::AuthFailed)
            }
            Err(e) => Err(e),
        }
    }

    fn call(&mut self, req: &Req, sasl: Option<&[u8]>, settings: &TcpSettings) -> Result<fabric::Response> {
        let response = self.submit(req, sasl, settings)?.wait_timeout(settings.io_timeout)?;
        Ok(response)
    }
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Client> {
        if config.max_in_flight == 0
            || config.points_per_server == 0
            || config.io_timeout.is_zero()
            || config.connect_timeout.is_zero()
        {
            return Err(Error::InvalidArguments);
        }
        let settings = TcpSettings {
            connect_timeout: config.connect_timeout,
            io_timeout: config.io_timeout,
            // Extras (at most 20 bytes) and key (at most 250 in replies we ask for; stats keys
            // are short) on top of the value.
            body_bytes_max: config.value_bytes_max.saturating_add(64 << 10),
            sasl: config.credentials.as_ref().map(|c| packet::sasl_plain(&c.username, &c.password)),
        };
        Ok(Client {
            config,
            settings: RefCell::new(settings),
            inner: RefCell::new(Inner {
                servers: Vec::new(),
                names: Vec::new(),
                ring: Ring::default(),
                slots: Slots::default(),
                node: None,
                groups: Vec::new(),
                multi_buf: Vec::new(),
            }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Changes the connect and I/O timeouts, for new and open connections (and fabric requests).
    pub fn set_timeouts(&self, connect_timeout: Duration, io_timeout: Duration) -> Result<()> {
        if connect_timeout.is_zero() || io_timeout.is_zero() {
            return Err(Error::InvalidArguments);
        }
        let mut guard = self.borrow()?;
        let mut settings = self.settings.try_borrow_mut().map_err(|_| Error::Busy)?;
        settings.connect_timeout = connect_timeout;
        settings.io_timeout = io_timeout;
        for server in &mut guard.servers {
            if let Server::Tcp(conn) = server {
                conn.apply_timeouts(io_timeout);
            }
        }
        Ok(())
    }

    /// The current (connect, I/O) timeouts.
    pub fn timeouts(&self) -> (Duration, Duration) {
        let settings = self.settings.borrow();
        (settings.connect_timeout, settings.io_timeout)
    }

    /// Sets or clears the SASL PLAIN credentials. TCP connections are closed once the replies
    /// of their queued requests are in (the next call reconnects and authenticates); fabric
    /// peers authenticate again before their next request.
    pub fn set_credentials(&self, credentials: Option<Credentials>) -> Result<()> {
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let mut settings = self.settings.try_borrow_mut().map_err(|_| Error::Busy)?;
        for server in &mut inner.servers {
            match server {
                Server::Tcp(conn) => {
                    let _ = conn.drain(&mut inner.slots, &settings); // an error closes it anyway
                    conn.close();
                }
                Server::Fabric(fc) => fc.authenticated = false,
            }
        }
        settings.sasl = credentials.as_ref().map(|c| packet::sasl_plain(&c.username, &c.password));
        Ok(())
    }

    fn borrow(&self) -> Result<RefMut<'_, Inner>> {
        self.inner.try_borrow_mut().map_err(|_| Error::Busy)
    }

    /// Adds a server to the ring. TCP connects on first use; a fabric server gets its endpoint
    /// (and the fabric node, if this is the client's first fabric server) now.
    pub fn add_server(&self, addr: ServerAddr) -> Result<()> {
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let server = match addr {
            ServerAddr::Tcp(a) => Server::Tcp(TcpConn::new(a, self.config.max_in_flight)),
            ServerAddr::Fabric(a) => {
                let node = match &inner.node {
                    Some(node) => node.clone(),
                    None => {
                        let node = match &self.config.fabric_node {
                            FabricNode::Shared => shared_node()?,
                            FabricNode::Dedicated(config) => fabric::Node::start(config.clone(), None)?,
                            FabricNode::Node(node) => node.clone(),
                        };
                        inner.node = Some(node.clone());
                        node
                    }
                };
                Server::Fabric(FabricConn { addr: a, endpoint: node.endpoint(a)?, authenticated: false })
            }
        };
        inner.servers.push(server);
        inner.names.push(addr.socket_addr().to_string());
        inner.ring = Ring::build(&inner.names, self.config.points_per_server);
        Ok(())
    }

    /// The servers, in the order they were added.
    pub fn servers(&self) -> Vec<ServerAddr> {
        let inner = self.inner.borrow();
        inner
            .servers
            .iter()
            .map(|s| match s {
                Server::Tcp(c) => ServerAddr::Tcp(c.addr),
                Server::Fabric(f) => ServerAddr::Fabric(f.addr),
            })
            .collect()
    }

    /// The server (index into `servers()`) that owns `key`.
    pub fn server_for(&self, key: &[u8]) -> Option<usize> {
        self.inner.borrow().ring.server_for(key)
    }

    // -----------------------------------------------------------------------------------------
    // Blocking operations.

    /// Stores `value` under `key` unconditionally.
    pub fn set(&self, key: &[u8], value: &[u8], flags: u32, exptime: u32) -> Result<()> {
        self.store(opcode::SET, key, value, flags, exptime, 0)
    }

    /// Stores only if `key` does not exist (`Err(Exists)` otherwise: the binary protocol's answer).
    pub fn add(&self, key: &[u8], value: &[u8], flags: u32, exptime: u32) -> Result<()> {
        self.store(opcode::ADD, key, value, flags, exptime, 0)
    }

    /// Stores only if `key` exists (`Err(NotFound)` otherwise).
    pub fn replace(&self, key: &[u8], value: &[u8], flags: u32, exptime: u32) -> Result<()> {
        self.store(opcode::REPLACE, key, value, flags, exptime, 0)
    }

    /// Stores only if the item's CAS is still `cas` (`Err(Exists)` if it changed, `Err(NotFound)`
    /// if it is gone).
    pub fn cas(&self, key: &[u8], value: &[u8], flags: u32, exptime: u32, cas: u64) -> Result<()> {
        self.store(opcode::SET, key, value, flags, exptime, cas)
    }

    /// Appends to an existing value (`Err(NotStored)` if `key` does not exist).
    pub fn append(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.call(&Req { value, ..Req::new(opcode::APPEND, key) }, |r| r.check())
    }

    /// Prepends to an existing value (`Err(NotStored)` if `key` does not exist).
    pub fn prepend(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.call(&Req { value, ..Req::new(opcode::PREPEND, key) }, |r| r.check())
    }

    fn store(&self, op: u8, key: &[u8], value: &[u8], flags: u32, exptime: u32, cas: u64) -> Result<()> {
        let req = Req { extras: Extras::store(flags, exptime), value, cas, ..Req::new(op, key) };
        self.call(&req, |r| r.check())
    }

    /// The item under `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Item>> {
        let mut value = Vec::new();
        Ok(self.get_into(key, &mut value)?.map(|meta| Item { value, flags: meta.flags, cas: meta.cas }))
    }

    /// Reads the value under `key` into `dest` (replacing its contents; capacity is reused, so a
    /// loop with one buffer allocates nothing). `None` on a miss, `dest` then unchanged.
    pub fn get_into(&self, key: &[u8], dest: &mut Vec<u8>) -> Result<Option<Meta>> {
        let req = Req::new(opcode::GET, key);
        check_key(key)?;
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let server = inner.ring.server_for(key).ok_or(Error::NoServers)?;
        if let Server::Tcp(conn) = &mut inner.servers[server] {
            return conn.call_get(&req, dest, &mut inner.slots, &self.settings.borrow());
        }
        inner.call_on(server, &req, &self.settings.borrow(), |r| match r.check() {
            Ok(()) => {
                dest.clear();
                dest.extend_from_slice(r.value);
                Ok(Some(Meta { flags: r.flags(), cas: r.cas }))
            }
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e),
        })
    }

    /// Deletes `key` (`Err(NotFound)` if missing).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.call(&Req::new(opcode::DELETE, key), |r| r.check())
    }

    /// Deletes `key` only if its CAS is still `cas`.
    pub fn delete_cas(&self, key: &[u8], cas: u64) -> Result<()> {
        self.call(&Req { cas, ..Req::new(opcode::DELETE, key) }, |r| r.check())
    }

    /// Adds `delta` to the decimal value under `key`; the new value (`Err(NotFound)` if missing).
    pub fn increment(&self, key: &[u8], delta: u64) -> Result<u64> {
        self.counter(opcode::INCREMENT, key, delta, 0, NO_INITIAL_VALUE)
    }

    /// Subtracts `delta` (memcached stops at 0); the new value (`Err(NotFound)` if missing).
    pub fn decrement(&self, key: &[u8], delta: u64) -> Result<u64> {
        self.counter(opcode::DECREMENT, key, delta, 0, NO_INITIAL_VALUE)
    }

    /// Like `increment`, but a missing key is created with `initial` (and `exptime`; the
    /// protocol reads an `exptime` of 0xffffffff as "do not create").
    pub fn increment_with_initial(&self, key: &[u8], delta: u64, initial: u64, exptime: u32) -> Result<u64> {
        self.counter(opcode::INCREMENT, key, delta, initial, exptime)
    }

    /// Like `decrement`, but a missing key is created with `initial` (and `exptime`).
    pub fn decrement_with_initial(&self, key: &[u8], delta: u64, initial: u64, exptime: u32) -> Result<u64> {
        self.counter(opcode::DECREMENT, key, delta, initial, exptime)
    }

    fn counter(&self, op: u8, key: &[u8], delta: u64, initial: u64, exptime: u32) -> Result<u64> {
        self.call(&Req { extras: Extras::counter(delta, initial, exptime), ..Req::new(op, key) }, |r| r.counter())
    }

    /// Sets a new expiration time on `key` (`Err(NotFound)` if missing).
    pub fn touch(&self, key: &[u8], exptime: u32) -> Result<()> {
        self.call(&Req { extras: Extras::time(exptime), ..Req::new(opcode::TOUCH, key) }, |r| r.check())
    }

    /// Invalidates every item on every server (after `delay` seconds if non-zero). Every server
    /// is asked; the first error is returned.
    pub fn flush_all(&self, delay: u32) -> Result<()> {
        let extras = if delay == 0 { Extras::NONE } else { Extras::time(delay) };
        let req = Req { extras, ..Req::new(opcode::FLUSH, b"") };
        let mut first_error = None;
        for result in self.each_server(&req, |r| r.check()) {
            if let (Err(e), None) = (result, &first_error) {
                first_error = Some(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Each server's version string.
    pub fn version(&self) -> Vec<(ServerAddr, Result<String>)> {
        let results = self.each_server(&Req::new(opcode::VERSION, b""), |r| {
            r.check()?;
            Ok(String::from_utf8_lossy(r.value).into_owned())
        });
        self.servers().into_iter().zip(results).collect()
    }

    /// Each server's statistics (`group`: `None` for the general ones, or e.g. `"settings"`,
    /// `"items"`, `"slabs"`), as (name, value) pairs in the server's order.
    pub fn stats(&self, group: Option<&str>) -> Vec<(ServerAddr, Result<Stats>)> {
        let key = group.unwrap_or("").as_bytes();
        let results = match self.borrow() {
            Ok(mut guard) => {
                let inner = &mut *guard;
                let settings = self.settings.borrow();
                (0..inner.servers.len()).map(|i| inner.stats_on(i, key, &settings)).collect()
            }
            Err(e) => vec![Err(e)],
        };
        self.servers().into_iter().zip(results).collect()
    }

    /// The values of `keys` (in their order; `None` for misses): one pipelined batch per server
    /// (GETKQ per key, then NOOP), every server's batch sent before any reply is read.
    pub fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Item>>> {
        let mut items = vec![None; keys.len()];
        self.get_multi_with(keys, |index, value, meta| {
            items[index] = Some(Item { value: value.to_vec(), flags: meta.flags, cas: meta.cas })
        })?;
        Ok(items)
    }

    /// Like `get_multi`, calling `found(index into keys, value, meta)` for each hit instead of
    /// collecting them. `found` must not call the client (it would get `Err(Busy)`). If a server
    /// fails, the hits of the others are still reported and the first error is returned.
    pub fn get_multi_with<K: AsRef<[u8]>>(&self, keys: &[K], mut found: impl FnMut(usize, &[u8], Meta)) -> Result<()> {
        for key in keys {
            check_key(key.as_ref())?;
        }
        if keys.is_empty() {
            return Ok(());
        }
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        if inner.servers.is_empty() {
            return Err(Error::NoServers);
        }
        let mut groups = std::mem::take(&mut inner.groups);
        groups.resize_with(inner.servers.len(), Vec::new);
        groups.iter_mut().for_each(|g| g.clear());
        for (index, key) in keys.iter().enumerate() {
            let server = inner.ring.server_for(key.as_ref()).expect("servers exist");
            groups[server].push(index as u32);
        }
        let settings = self.settings.borrow();
        let result = inner.get_multi(keys, &groups, &mut found, &settings);
        inner.groups = groups;
        result
    }

    // -----------------------------------------------------------------------------------------
    // Non-blocking operations.

    /// Starts storing `value` under `key` and returns at once. The request may read `key` and
    /// `value` until it completes, so both stay borrowed as long as the returned request lives.
    /// (Today both are copied before this returns: over the fabric into a registered buffer,
    /// over TCP into the socket or, when it is full, the connection's output queue.)
    pub fn iset<'a>(&'a self, key: &'a [u8], value: &'a [u8], flags: u32, exptime: u32) -> Result<Request<'a>> {
        let req = Req { extras: Extras::store(flags, exptime), value, ..Req::new(opcode::SET, key) };
        self.issue(&req, false, None, false)
    }

    /// Starts storing `value` under `key` and returns once `key` and `value` may be reused: they
    /// have been copied (fabric) or handed to the kernel (TCP, waiting for socket room if needed).
    pub fn bset<'a>(&'a self, key: &[u8], value: &[u8], flags: u32, exptime: u32) -> Result<Request<'a>> {
        let req = Req { extras: Extras::store(flags, exptime), value, ..Req::new(opcode::SET, key) };
        self.issue(&req, false, None, true)
    }

    /// Starts reading `key` and returns at once; the value lands in `dest` when the request
    /// completes (`wait`, or `test` returning ready). `key` stays borrowed until then.
    pub fn iget<'a>(&'a self, key: &'a [u8], dest: &'a mut Vec<u8>) -> Result<Request<'a>> {
        self.issue(&Req::new(opcode::GET, key), true, Some(dest), false)
    }

    /// Starts reading `key` and returns once `key` may be reused (sent or copied); the value
    /// lands in `dest` when the request completes.
    pub fn bget<'a>(&'a self, key: &[u8], dest: &'a mut Vec<u8>) -> Result<Request<'a>> {
        self.issue(&Req::new(opcode::GET, key), true, Some(dest), true)
    }

    /// `req.test()`: its outcome if complete, `Poll::Pending` otherwise (never blocks).
    pub fn test(&self, req: &mut Request<'_>) -> Poll<Result<Meta>> {
        debug_assert!(std::ptr::eq(req.client, self), "a request of another client");
        req.test()
    }

    /// `req.wait()`: blocks until the request completes and returns its outcome.
    pub fn wait(&self, req: &mut Request<'_>) -> Result<Meta> {
        debug_assert!(std::ptr::eq(req.client, self), "a request of another client");
        req.wait()
    }

    /// Non-blocking requests on the wire (abandoned ones included).
    pub fn requests_in_flight(&self) -> usize {
        self.inner.borrow().slots.in_flight
    }

    fn issue<'a>(
        &'a self,
        req: &Req,
        is_get: bool,
        dest: Option<&'a mut Vec<u8>>,
        until_sent: bool,
    ) -> Result<Request<'a>> {
        check_key(req.key)?;
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let server = inner.ring.server_for(req.key).ok_or(Error::NoServers)?;
        let settings = self.settings.borrow();
        while inner.slots.in_flight >= self.config.max_in_flight {
            let oldest = inner.slots.oldest_in_flight().expect("requests in flight");
            inner.complete(oldest, &settings);
        }
        let slot = inner.slots.alloc(is_get, server);
        let sasl = settings.sasl.as_deref();
        let issued = match &mut inner.servers[server] {
            Server::Tcp(conn) => {
                let opaque = conn.next_opaque();
                let req = Req { opaque, ..*req };
                let sent = if until_sent {
                    conn.send_now(&req, &mut inner.slots, &settings)
                } else {
                    conn.send_nonblocking(&req, &settings)
                };
                match sent {
                    Ok(()) => {
                        conn.queue.push_back(Queued { slot, opaque });
                        inner.slots.slots[slot as usize].state = SlotState::Queued;
                        Ok(())
                    }
                    Err(e) => {
                        conn.fail(&e, &mut inner.slots);
                        Err(e)
                    }
                }
            }
            Server::Fabric(fc) => fc
                .submit(req, sasl, &settings)
                .map(|pending| inner.slots.slots[slot as usize].state = SlotState::Fabric(pending)),
        };
        match issued {
            Ok(()) => {
                inner.slots.in_flight += 1;
                let generation = inner.slots.slots[slot as usize].generation;
                Ok(Request { client: self, slot, generation, dest, outcome: None, _buffers: PhantomData })
            }
            Err(e) => {
                inner.slots.release(slot);
                Err(e)
            }
        }
    }

    /// Progress without blocking; the outcome if the request in `slot` is complete.
    pub(crate) fn test_slot(&self, slot: u32, generation: u32, dest: Option<&mut Vec<u8>>) -> Option<Result<Meta>> {
        let Ok(mut guard) = self.borrow() else { return None }; // busy: still in progress
        let inner = &mut *guard;
        let settings = self.settings.borrow();
        debug_assert_eq!(inner.slots.slots[slot as usize].generation, generation);
        let s = &inner.slots.slots[slot as usize];
        let server = s.server;
        if matches!(s.state, SlotState::Queued) {
            if let Server::Tcp(conn) = &mut inner.servers[server] {
                let _ = conn.poll_queue(&mut inner.slots, &settings);
            }
        } else if let SlotState::Fabric(pending) = &s.state {
            if !pending.is_done() {
                // Drive the fabric from this thread for a moment, as OSU's memcached_test drives
                // the network: a polling caller then needs no hand-off from the progress thread.
                if let Server::Fabric(fc) = &inner.servers[server] {
                    fc.endpoint.node().help_progress(Duration::ZERO);
                }
            }
            if matches!(&inner.slots.slots[slot as usize].state, SlotState::Fabric(p) if p.is_done()) {
                inner.complete(slot, &settings);
            }
        }
        if inner.slots.slots[slot as usize].in_flight() {
            return None;
        }
        Some(inner.slots.finish(slot, dest, settings.body_bytes_max))
    }

    /// Blocks until the request in `slot` completes; its outcome.
    pub(crate) fn wait_slot(&self, slot: u32, generation: u32, dest: Option<&mut Vec<u8>>) -> Result<Meta> {
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let settings = self.settings.borrow();
        debug_assert_eq!(inner.slots.slots[slot as usize].generation, generation);
        inner.complete(slot, &settings);
        inner.slots.finish(slot, dest, settings.body_bytes_max)
    }

    /// The handle of an incomplete request was dropped.
    pub(crate) fn abandon_slot(&self, slot: u32, generation: u32) {
        // Busy only if dropped inside a get_multi callback: the slot then stays taken.
        let Ok(mut guard) = self.inner.try_borrow_mut() else { return };
        let slots = &mut guard.slots;
        let s = &mut slots.slots[slot as usize];
        debug_assert_eq!(s.generation, generation);
        match s.state {
            SlotState::Queued => s.abandoned = true,
            SlotState::Fabric(_) => {
                s.state = SlotState::Free; // drops the Pending: the fabric forgets the request
                slots.in_flight -= 1;
                slots.release(slot);
            }
            SlotState::Done(_) | SlotState::FabricDone(_) => {
                s.state = SlotState::Free;
                slots.release(slot);
            }
            SlotState::Free => debug_assert!(false, "abandoning a free slot"),
        }
    }

    // -----------------------------------------------------------------------------------------

    /// One request to the server that owns its key; `f` reads the reply.
    #[inline]
    fn call<T>(&self, req: &Req, f: impl FnOnce(Reply<'_>) -> Result<T>) -> Result<T> {
        check_key(req.key)?;
        let mut guard = self.borrow()?;
        let inner = &mut *guard;
        let server = inner.ring.server_for(req.key).ok_or(Error::NoServers)?;
        inner.call_on(server, req, &self.settings.borrow(), f)
    }

    /// One request to every server, in order.
    fn each_server<T>(&self, req: &Req, f: impl Fn(Reply<'_>) -> Result<T>) -> Vec<Result<T>> {
        match self.borrow() {
            Ok(mut guard) => {
                let inner = &mut *guard;
                let settings = self.settings.borrow();
                (0..inner.servers.len()).map(|i| inner.call_on(i, req, &settings, &f)).collect()
            }
            Err(e) => vec![Err(e)],
        }
    }
}

impl Inner {
    #[inline]
    fn call_on<T>(
        &mut self,
        server: usize,
        req: &Req,
        settings: &TcpSettings,
        f: impl FnOnce(Reply<'_>) -> Result<T>,
    ) -> Result<T> {
        match &mut self.servers[server] {
            Server::Tcp(conn) => f(conn.call(req, &mut self.slots, settings)?),
            Server::Fabric(fc) => {
                let response = fc.call(req, settings.sasl.as_deref(), settings)?;
                let reply = packet::single_reply(&response, settings.body_bytes_max)?;
                if reply.status == status::AUTH_ERROR {
                    fc.authenticated = false; // re-authenticate before the next request
                }
                f(reply)
            }
        }
    }

    /// Completes the request in `slot` (blocking), leaving its outcome in the slot.
    fn complete(&mut self, slot: u32, settings: &TcpSettings) {
        let s = &mut self.slots.slots[slot as usize];
        let server = s.server;
        if matches!(s.state, SlotState::Queued) {
            if let Server::Tcp(conn) = &mut self.servers[server] {
                // An error fails every queued request of the connection, this one included.
                let _ = conn.wait_for(slot, &mut self.slots, settings);
            }
            debug_assert!(!self.slots.slots[slot as usize].in_flight());
        } else if matches!(s.state, SlotState::Fabric(_)) {
            let SlotState::Fabric(pending) = std::mem::replace(&mut s.state, SlotState::Free) else { unreachable!() };
            let result = pending.wait_timeout(settings.io_timeout).map_err(Error::from);
            self.slots.fabric_done(slot, result);
        }
    }

    fn stats_on(&mut self, server: usize, group: &[u8], settings: &TcpSettings) -> Result<Stats> {
        let req = Req::new(opcode::STAT, group);
        let mut out = Vec::new();
        let mut take = |r: Reply<'_>| -> Result<bool> {
            r.check()?;
            if r.key.is_empty() {
                return Ok(true); // the terminator
            }
            out.push((String::from_utf8_lossy(r.key).into_owned(), String::from_utf8_lossy(r.value).into_owned()));
            Ok(false)
        };
        match &mut self.servers[server] {
            Server::Tcp(conn) => {
                let mut reply = conn.call(&req, &mut self.slots, settings)?;
                while !take(reply)? {
                    reply = conn.read_reply(&mut self.slots, settings)?;
                }
            }
            Server::Fabric(fc) => {
                let response = fc.call(&req, settings.sasl.as_deref(), settings)?;
                for reply in Replies::new(&response, settings.body_bytes_max) {
                    if take(reply?)? {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }

    fn get_multi<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        groups: &[Vec<u32>],
        found: &mut dyn FnMut(usize, &[u8], Meta),
        settings: &TcpSettings,
    ) -> Result<()> {
        const NOOP_OPAQUE: u32 = u32::MAX;
        let mut first_error: Option<Error> = None;
        let mut pendings: Vec<(usize, fabric::Pending)> = Vec::new();
        let mut sent = vec![false; groups.len()];
        // Send every batch first.
        let mut buf = std::mem::take(&mut self.multi_buf);
        for (server, group) in groups.iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            buf.clear();
            for &index in group {
                Req { opaque: index, ..Req::new(opcode::GETKQ, keys[index as usize].as_ref()) }.append_to(&mut buf);
            }
            Req { opaque: NOOP_OPAQUE, ..Req::new(opcode::NOOP, b"") }.append_to(&mut buf);
            let result = match &mut self.servers[server] {
                Server::Tcp(conn) => conn.send_raw(&buf, &mut self.slots, settings),
                Server::Fabric(fc) => fc.submit_raw(&buf, settings).map(|p| pendings.push((server, p))),
            };
            match result {
                Ok(()) => sent[server] = true,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        self.multi_buf = buf;
        // Then read them.
        let mut reply_error: Option<Error> = None;
        let mut take = |r: Reply<'_>| -> Result<bool> {
            if r.opcode == opcode::NOOP {
                return Ok(r.opaque == NOOP_OPAQUE);
            }
            match r.check() {
                Ok(()) => {
                    let index = r.opaque as usize;
                    match keys.get(index) {
                        Some(key) if key.as_ref() == r.key || r.key.is_empty() => {
                            found(index, r.value, Meta { flags: r.flags(), cas: r.cas })
                        }
                        _ => return Err(Error::Protocol(format!("GETKQ reply for unknown key index {index}"))),
                    }
                }
                Err(Error::NotFound) => {}
                Err(e) => {
                    reply_error.get_or_insert(e);
                }
            }
            Ok(false)
        };
        for (server, conn) in self.servers.iter_mut().enumerate() {
            let Server::Tcp(conn) = conn else { continue };
            if !sent[server] {
                continue;
            }
            let result = (|| -> Result<()> {
                loop {
                    let reply = conn.read_reply(&mut self.slots, settings)?;
                    if take(reply)? {
                        return Ok(());
                    }
                }
            })();
            if let Err(e) = result {
                if e.is_connection_error() || matches!(e, Error::Protocol(_)) {
                    conn.fail(&e, &mut self.slots);
                }
                first_error.get_or_insert(e);
            }
        }
        for (_, pending) in pendings {
            let result = pending.wait_timeout(settings.io_timeout).map_err(Error::from).and_then(|response| {
                for reply in Replies::new(&response, settings.body_bytes_max) {
                    if take(reply?)? {
                        return Ok(());
                    }
                }
                Err(Error::Protocol("multi-get reply without its NOOP".into()))
            });
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.or(reply_error).map_or(Ok(()), Err)
    }
}

impl FabricConn {
    /// Sends already-encoded request packets as one fabric request.
    fn submit_raw(&mut self, bytes: &[u8], settings: &TcpSettings) -> Result<fabric::Pending> {
        if let (Some(plain), false) = (settings.sasl.as_deref(), self.authenticated) {
            self.authenticate(plain, settings)?;
        }
        let mut buffer = self.endpoint.node().alloc(bytes.len())?;
        buffer.copy_from_slice(bytes);
        Ok(self.endpoint.request_buffer(cache_proto::FABRIC_OP_BINARY, buffer)?)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("servers", &self.servers()).field("config", &self.config).finish()
    }
}

// Compile-time checks of the documented thread-safety: Send, not Sync (see `Client`).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Client>();
};
