//! libslipstream_memcached: a libmemcached-compatible C API over `cache-client`, plus OSU
//! RDMA-Memcached's non-blocking calls. The header, `include/slipstream/memcached.h`, is the
//! reference for callers; this file is the conversion layer and nothing more.
//!
//! Rules every entry point keeps:
//! - no panic crosses the boundary: each body runs under `catch_unwind` (`guard`), a panic
//!   becomes `MEMCACHED_FAILURE` (or NULL);
//! - every pointer argument is checked: NULL inputs give `MEMCACHED_INVALID_ARGUMENTS`, NULL
//!   outputs are skipped;
//! - a `memcached_st` is only ever accessed through shared references (its client and state use
//!   interior mutability), because the non-blocking requests it hands out keep references to it.
#![allow(non_camel_case_types)]
// Raw pointers from C are checked for NULL before use; the functions are `extern "C"` for C
// callers, who cannot be held to Rust's `unsafe fn` contract anyway.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::task::Poll;
use std::time::Duration;

use cache_client::{Client, ClientConfig, Credentials, Error, Meta, Request, ServerAddr};

mod nonblocking;
mod retrieval;
pub use nonblocking::*;
pub use retrieval::*;

pub type memcached_return_t = c_int;
pub type memcached_behavior_t = c_int;
pub type in_port_t = u16;

/// `memcached_return_t` values (libmemcached's).
pub mod rc {
    use std::ffi::c_int;
    pub const SUCCESS: c_int = 0;
    pub const FAILURE: c_int = 1;
    pub const HOST_LOOKUP_FAILURE: c_int = 2;
    pub const CONNECTION_FAILURE: c_int = 3;
    pub const PROTOCOL_ERROR: c_int = 8;
    pub const CLIENT_ERROR: c_int = 9;
    pub const SERVER_ERROR: c_int = 10;
    pub const DATA_EXISTS: c_int = 12;
    pub const NOTSTORED: c_int = 14;
    pub const NOTFOUND: c_int = 16;
    pub const MEMORY_ALLOCATION_FAILURE: c_int = 17;
    pub const NO_SERVERS: c_int = 20;
    pub const END: c_int = 21;
    pub const ERRNO: c_int = 26;
    pub const NOT_SUPPORTED: c_int = 28;
    pub const TIMEOUT: c_int = 31;
    pub const BAD_KEY_PROVIDED: c_int = 33;
    pub const E2BIG: c_int = 37;
    pub const INVALID_ARGUMENTS: c_int = 38;
    pub const AUTH_FAILURE: c_int = 41;
    pub const IN_PROGRESS: c_int = 46;
    pub const SERVER_TEMPORARILY_DISABLED: c_int = 47;
    pub const SERVER_MEMORY_ALLOCATION_FAILURE: c_int = 48;
    pub const MAXIMUM_RETURN: c_int = 49;
}

/// `memcached_behavior_t` values (libmemcached's) this layer acts on.
pub mod behavior {
    use std::ffi::c_int;
    pub const NO_BLOCK: c_int = 0;
    pub const TCP_NODELAY: c_int = 1;
    pub const HASH: c_int = 2;
    pub const KETAMA: c_int = 3;
    pub const SUPPORT_CAS: c_int = 7;
    pub const POLL_TIMEOUT: c_int = 8;
    pub const DISTRIBUTION: c_int = 9;
    pub const VERIFY_KEY: c_int = 13;
    pub const CONNECT_TIMEOUT: c_int = 14;
    pub const KETAMA_WEIGHTED: c_int = 16;
    pub const KETAMA_HASH: c_int = 17;
    pub const BINARY_PROTOCOL: c_int = 18;
    pub const SND_TIMEOUT: c_int = 19;
    pub const RCV_TIMEOUT: c_int = 20;
    pub const NOREPLY: c_int = 26;
    pub const USE_UDP: c_int = 27;
    pub const NUMBER_OF_REPLICAS: c_int = 29;
    pub const LOAD_FROM_FILE: c_int = 34;
    pub const MAX: c_int = 38;
}

/// `memcached_server_distribution_t` values that are consistent hashing (all mean ketama here).
const DISTRIBUTIONS_CONSISTENT: [u64; 4] = [1, 2, 4, 5];
const DISTRIBUTION_CONSISTENT_KETAMA: u64 = 2;
const MEMCACHED_MAX_KEY: usize = 251;
const DEFAULT_PORT: u16 = 11211;

/// A client (opaque to C).
pub struct memcached_st {
    client: Client,
    behaviors: [Cell<u64>; behavior::MAX as usize],
    /// Hits of the last `memcached_mget` not yet fetched.
    fetched: RefCell<VecDeque<Fetched>>,
    /// Requests handed out and not freed: they refer to `client`.
    requests_live: Cell<usize>,
}

struct Fetched {
    key: Vec<u8>,
    value: Vec<u8>,
    flags: u32,
    cas: u64,
}

#[repr(C)]
pub struct memcached_result_st {
    key_: [c_char; MEMCACHED_MAX_KEY],
    key_length_: usize,
    value_: *mut c_char,
    value_length_: usize,
    value_capacity_: usize,
    flags_: u32,
    cas_: u64,
    is_allocated_: c_int,
    reserved_: [*mut c_void; 4],
}

#[repr(C)]
pub struct memcached_request_st {
    pub value: *mut c_char,
    pub value_length: usize,
    pub value_capacity: usize,
    pub flags: u32,
    pub cas: u64,
    pub response: memcached_return_t,
    internal_: *mut RequestInternal,
}

/// The Rust side of a request. `request` refers to `*dest` and to the owner's client, so it is
/// declared (and dropped) first.
struct RequestInternal {
    request: Option<Request<'static>>,
    is_get: bool,
    dest: *mut Vec<u8>,
    owner: *const memcached_st,
}

impl Drop for RequestInternal {
    fn drop(&mut self) {
        self.request = None;
        // SAFETY: `dest` came from Box::into_raw and nothing refers to it once `request` is gone.
        drop(unsafe { Box::from_raw(self.dest) });
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Runs an entry point's body; a panic becomes `fallback`.
fn guard<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

fn memc<'a>(ptr: *const memcached_st) -> Option<&'a memcached_st> {
    // SAFETY: non-NULL pointers come from memcached_create (the C contract).
    unsafe { ptr.as_ref() }
}

/// `len` bytes at `ptr`; NULL is only accepted for an empty slice.
fn bytes<'a>(ptr: *const c_char, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        return (len == 0).then_some(&[]);
    }
    // SAFETY: the caller passes `len` readable bytes at `ptr` (the C contract).
    Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// A key: NULL is invalid (even with length 0).
fn key<'a>(ptr: *const c_char, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        None
    } else {
        bytes(ptr, len)
    }
}

fn exptime(t: libc::time_t) -> u32 {
    t.clamp(0, u32::MAX as libc::time_t) as u32
}

fn set<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: a non-NULL output pointer is writable (the C contract).
        unsafe { out.write(value) };
    }
}

/// The return code for a client error (and errno for socket errors).
fn rc_of(error: &Error) -> memcached_return_t {
    match error {
        Error::NotFound => rc::NOTFOUND,
        Error::NotStored => rc::NOTSTORED,
        Error::Exists => rc::DATA_EXISTS,
        Error::TooLarge => rc::E2BIG,
        Error::NonNumeric => rc::CLIENT_ERROR,
        Error::InvalidArguments => rc::INVALID_ARGUMENTS,
        Error::AuthFailed => rc::AUTH_FAILURE,
        Error::ServerError(0x81 | 0x83) => rc::NOT_SUPPORTED,
        Error::ServerError(0x82) => rc::SERVER_MEMORY_ALLOCATION_FAILURE,
        Error::ServerError(0x85 | 0x86) => rc::SERVER_TEMPORARILY_DISABLED,
        Error::ServerError(_) => rc::SERVER_ERROR,
        Error::InvalidKey { .. } => rc::BAD_KEY_PROVIDED,
        Error::NoServers => rc::NO_SERVERS,
        Error::Io(e) => {
            if let Some(code) = e.raw_os_error() {
                // SAFETY: errno is this thread's.
                unsafe { *libc::__errno_location() = code };
            }
            match e.kind() {
                std::io::ErrorKind::ConnectionRefused => rc::CONNECTION_FAILURE,
                _ => rc::ERRNO,
            }
        }
        Error::Timeout => rc::TIMEOUT,
        Error::Protocol(_) => rc::PROTOCOL_ERROR,
        Error::Fabric(e) => match e {
            fabric::Error::PeerFailed { .. } | fabric::Error::Closed => rc::CONNECTION_FAILURE,
            fabric::Error::TooLarge { .. } => rc::E2BIG,
            fabric::Error::PoolExhausted { .. } => rc::MEMORY_ALLOCATION_FAILURE,
            fabric::Error::Overloaded => rc::SERVER_TEMPORARILY_DISABLED,
            fabric::Error::Timeout { .. } => rc::TIMEOUT,
            _ => rc::FAILURE,
        },
        Error::Busy => rc::FAILURE,
    }
}

fn rc_result(result: Result<(), Error>) -> memcached_return_t {
    match result {
        Ok(()) => rc::SUCCESS,
        Err(e) => rc_of(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// Lifecycle.

#[no_mangle]
pub extern "C" fn memcached_create(ptr: *mut memcached_st) -> *mut memcached_st {
    guard(ptr::null_mut(), || {
        if !ptr.is_null() {
            return ptr::null_mut(); // caller-provided storage is not supported (the type is opaque)
        }
        let Ok(client) = Client::new(ClientConfig::default()) else { return ptr::null_mut() };
        let (connect, io) = client.timeouts();
        let memc = memcached_st {
            client,
            behaviors: std::array::from_fn(|_| Cell::new(0)),
            fetched: RefCell::new(VecDeque::new()),
            requests_live: Cell::new(0),
        };
        memc.behaviors[behavior::TCP_NODELAY as usize].set(1);
        memc.behaviors[behavior::BINARY_PROTOCOL as usize].set(1);
        memc.behaviors[behavior::SUPPORT_CAS as usize].set(1);
        memc.behaviors[behavior::KETAMA as usize].set(1);
        memc.behaviors[behavior::DISTRIBUTION as usize].set(DISTRIBUTION_CONSISTENT_KETAMA);
        memc.behaviors[behavior::CONNECT_TIMEOUT as usize].set(connect.as_millis() as u64);
        memc.behaviors[behavior::POLL_TIMEOUT as usize].set(io.as_millis() as u64);
        memc.behaviors[behavior::RCV_TIMEOUT as usize].set(io.as_micros() as u64);
        memc.behaviors[behavior::SND_TIMEOUT as usize].set(io.as_micros() as u64);
        Box::into_raw(Box::new(memc))
    })
}

#[no_mangle]
pub extern "C" fn memcached_free(ptr: *mut memcached_st) {
    guard((), || {
        if ptr.is_null() {
            return;
        }
        // SAFETY: from memcached_create, freed once (the C contract).
        let memc = unsafe { Box::from_raw(ptr) };
        if memc.requests_live.get() > 0 {
            // Requests not freed still refer to this client: keep it (a leak, not a crash).
            std::mem::forget(memc);
        }
    })
}

#[no_mangle]
pub extern "C" fn memcached_strerror(_ptr: *const memcached_st, code: memcached_return_t) -> *const c_char {
    let text: &'static [u8] = match code {
        0 => b"SUCCESS\0",
        1 => b"FAILURE\0",
        2 => b"getaddrinfo() or getnameinfo() HOSTNAME LOOKUP FAILURE\0",
        3 => b"CONNECTION FAILURE\0",
        4 => b"CONNECTION BIND FAILURE\0",
        5 => b"WRITE FAILURE\0",
        6 => b"READ FAILURE\0",
        7 => b"UNKNOWN READ FAILURE\0",
        8 => b"PROTOCOL ERROR\0",
        9 => b"CLIENT ERROR\0",
        10 => b"SERVER ERROR\0",
        11 => b"ERROR was returned by server\0",
        12 => b"CONNECTION DATA EXISTS\0",
        13 => b"CONNECTION DATA DOES NOT EXIST\0",
        14 => b"NOT STORED\0",
        15 => b"STORED\0",
        16 => b"NOT FOUND\0",
        17 => b"MEMORY ALLOCATION FAILURE\0",
        18 => b"PARTIAL READ\0",
        19 => b"SOME ERRORS WERE REPORTED\0",
        20 => b"NO SERVERS DEFINED\0",
        21 => b"SERVER END\0",
        22 => b"SERVER DELETE\0",
        23 => b"SERVER VALUE\0",
        24 => b"STAT VALUE\0",
        25 => b"ITEM VALUE\0",
        26 => b"SYSTEM ERROR\0",
        27 => b"COULD NOT OPEN UNIX SOCKET\0",
        28 => b"ACTION NOT SUPPORTED\0",
        29 => b"A KEY LENGTH OF ZERO WAS PROVIDED\0",
        30 => b"FETCH WAS NOT COMPLETED\0",
        31 => b"A TIMEOUT OCCURRED\0",
        32 => b"ACTION QUEUED\0",
        33 => b"A BAD KEY WAS PROVIDED/CHARACTERS OUT OF RANGE\0",
        34 => b"THE HOST TRANSPORT PROTOCOL DOES NOT MATCH THAT OF THE CLIENT\0",
        35 => b"SERVER IS MARKED DEAD\0",
        36 => b"ENCOUNTERED AN UNKNOWN STAT KEY\0",
        37 => b"ITEM TOO BIG\0",
        38 => b"INVALID ARGUMENTS\0",
        39 => b"KEY RETURNED FROM SERVER WAS TOO LARGE\0",
        40 => b"FAILED TO SEND AUTHENTICATION TO SERVER\0",
        41 => b"AUTHENTICATION FAILURE\0",
        42 => b"CONTINUE AUTHENTICATION\0",
        43 => b"ERROR OCCURED WHILE PARSING\0",
        44 => b"ERROR OCCURED WHILE PARSING (USER)\0",
        45 => b"DEPRECATED\0",
        46 => b"OPERATION IN PROCESS\0",
        47 => b"SERVER HAS FAILED AND IS DISABLED UNTIL TIMED RETRY\0",
        48 => b"SERVER FAILED TO ALLOCATE OBJECT\0",
        _ => b"INVALID memcached_return_t\0",
    };
    text.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn memcached_lib_version() -> *const c_char {
    concat!("slipstream-memcached ", env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

// ---------------------------------------------------------------------------------------------
// Servers, behaviors, credentials.

fn server_add(ptr: *mut memcached_st, hostname: *const c_char, port: in_port_t, fabric: bool) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        if hostname.is_null() {
            return rc::INVALID_ARGUMENTS;
        }
        // SAFETY: a NUL-terminated string (the C contract).
        let Ok(host) = unsafe { CStr::from_ptr(hostname) }.to_str() else { return rc::HOST_LOOKUP_FAILURE };
        let port = match (port, fabric) {
            (0, false) => DEFAULT_PORT,
            (0, true) => return rc::INVALID_ARGUMENTS,
            (p, _) => p,
        };
        let host_port = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let Ok(addr) = cache_client::resolve(&host_port) else { return rc::HOST_LOOKUP_FAILURE };
        let server = if fabric { ServerAddr::Fabric(addr) } else { ServerAddr::Tcp(addr) };
        rc_result(memc.client.add_server(server))
    })
}

#[no_mangle]
pub extern "C" fn memcached_server_add(
    ptr: *mut memcached_st,
    hostname: *const c_char,
    port: in_port_t,
) -> memcached_return_t {
    server_add(ptr, hostname, port, false)
}

#[no_mangle]
pub extern "C" fn memcached_server_add_fabric(
    ptr: *mut memcached_st,
    hostname: *const c_char,
    port: in_port_t,
) -> memcached_return_t {
    server_add(ptr, hostname, port, true)
}

#[no_mangle]
pub extern "C" fn memcached_server_count(ptr: *const memcached_st) -> u32 {
    guard(0, || memc(ptr).map_or(0, |m| m.client.servers().len() as u32))
}

#[no_mangle]
pub extern "C" fn memcached_behavior_set(
    ptr: *mut memcached_st,
    flag: memcached_behavior_t,
    data: u64,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        if !(0..behavior::MAX).contains(&flag) {
            return rc::INVALID_ARGUMENTS;
        }
        let (connect, io) = memc.client.timeouts();
        let result = match flag {
            behavior::CONNECT_TIMEOUT if data > 0 => memc.client.set_timeouts(Duration::from_millis(data), io),
            behavior::POLL_TIMEOUT if data > 0 => memc.client.set_timeouts(connect, Duration::from_millis(data)),
            behavior::RCV_TIMEOUT | behavior::SND_TIMEOUT if data > 0 => {
                memc.client.set_timeouts(connect, Duration::from_micros(data))
            }
            behavior::DISTRIBUTION if !DISTRIBUTIONS_CONSISTENT.contains(&data) => return rc::NOT_SUPPORTED,
            behavior::KETAMA | behavior::KETAMA_WEIGHTED if data == 0 => return rc::NOT_SUPPORTED,
            behavior::BINARY_PROTOCOL | behavior::TCP_NODELAY => Ok(()), // always on
            behavior::NOREPLY | behavior::USE_UDP | behavior::NUMBER_OF_REPLICAS if data != 0 => {
                return rc::NOT_SUPPORTED
            }
            behavior::LOAD_FROM_FILE => return rc::NOT_SUPPORTED,
            _ => Ok(()),
        };
        if let Err(e) = result {
            return rc_of(&e);
        }
        if !matches!(flag, behavior::BINARY_PROTOCOL | behavior::TCP_NODELAY) {
            memc.behaviors[flag as usize].set(data);
        }
        rc::SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn memcached_behavior_get(ptr: *mut memcached_st, flag: memcached_behavior_t) -> u64 {
    guard(0, || match memc(ptr) {
        Some(memc) if (0..behavior::MAX).contains(&flag) => memc.behaviors[flag as usize].get(),
        _ => 0,
    })
}

#[no_mangle]
pub extern "C" fn memcached_set_sasl_auth_data(
    ptr: *mut memcached_st,
    username: *const c_char,
    password: *const c_char,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        if username.is_null() || password.is_null() {
            return rc::INVALID_ARGUMENTS;
        }
        // SAFETY: NUL-terminated strings (the C contract).
        let (username, password) = unsafe { (CStr::from_ptr(username), CStr::from_ptr(password)) };
        let credentials = Credentials {
            username: username.to_string_lossy().into_owned(),
            password: password.to_string_lossy().into_owned(),
        };
        rc_result(memc.client.set_credentials(Some(credentials)))
    })
}

#[no_mangle]
pub extern "C" fn memcached_destroy_sasl_auth_data(ptr: *mut memcached_st) -> memcached_return_t {
    guard(rc::FAILURE, || match memc(ptr) {
        Some(memc) => rc_result(memc.client.set_credentials(None)),
        None => rc::INVALID_ARGUMENTS,
    })
}

// ---------------------------------------------------------------------------------------------
// Storage.

#[derive(Clone, Copy)]
enum Store {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas(u64),
}

#[allow(clippy::too_many_arguments)]
fn store(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    value_ptr: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
    mode: Store,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let (Some(memc), Some(key), Some(value)) =
            (memc(ptr), key(key_ptr, key_length), bytes(value_ptr, value_length))
        else {
            return rc::INVALID_ARGUMENTS;
        };
        let c = &memc.client;
        let t = exptime(expiration);
        rc_result(match mode {
            Store::Set => c.set(key, value, flags, t),
            Store::Add => c.add(key, value, flags, t),
            Store::Replace => c.replace(key, value, flags, t),
            Store::Append => c.append(key, value),
            Store::Prepend => c.prepend(key, value),
            Store::Cas(cas) => c.cas(key, value, flags, t, cas),
        })
    })
}

#[no_mangle]
pub extern "C" fn memcached_set(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Set)
}

#[no_mangle]
pub extern "C" fn memcached_add(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Add)
}

#[no_mangle]
pub extern "C" fn memcached_replace(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Replace)
}

#[no_mangle]
pub extern "C" fn memcached_append(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Append)
}

#[no_mangle]
pub extern "C" fn memcached_prepend(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Prepend)
}

#[no_mangle]
pub extern "C" fn memcached_cas(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
    expiration: libc::time_t,
    flags: u32,
    cas: u64,
) -> memcached_return_t {
    store(ptr, key, key_length, value, value_length, expiration, flags, Store::Cas(cas))
}

// ---------------------------------------------------------------------------------------------
// Deletion, counters, expiry, flush, version.

#[no_mangle]
pub extern "C" fn memcached_delete(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    expiration: libc::time_t,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let (Some(memc), Some(key)) = (memc(ptr), key(key_ptr, key_length)) else { return rc::INVALID_ARGUMENTS };
        if expiration != 0 {
            return rc::INVALID_ARGUMENTS; // the binary protocol has no delayed delete
        }
        rc_result(memc.client.delete(key))
    })
}

#[allow(clippy::too_many_arguments)]
fn counter(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    offset: u64,
    initial: Option<(u64, libc::time_t)>,
    up: bool,
    value: *mut u64,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let (Some(memc), Some(key)) = (memc(ptr), key(key_ptr, key_length)) else { return rc::INVALID_ARGUMENTS };
        let c = &memc.client;
        let result = match (initial, up) {
            (None, true) => c.increment(key, offset),
            (None, false) => c.decrement(key, offset),
            (Some((initial, t)), true) => c.increment_with_initial(key, offset, initial, expiration_or_no_add(t)),
            (Some((initial, t)), false) => c.decrement_with_initial(key, offset, initial, expiration_or_no_add(t)),
        };
        match result {
            Ok(v) => {
                set(value, v);
                rc::SUCCESS
            }
            Err(e) => rc_of(&e),
        }
    })
}

/// `MEMCACHED_EXPIRATION_NOT_ADD` passes through as the protocol's 0xffffffff.
fn expiration_or_no_add(t: libc::time_t) -> u32 {
    if t == 0xffff_ffff {
        0xffff_ffff
    } else {
        exptime(t)
    }
}

#[no_mangle]
pub extern "C" fn memcached_increment(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    offset: u32,
    value: *mut u64,
) -> memcached_return_t {
    counter(ptr, key, key_length, offset as u64, None, true, value)
}

#[no_mangle]
pub extern "C" fn memcached_decrement(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    offset: u32,
    value: *mut u64,
) -> memcached_return_t {
    counter(ptr, key, key_length, offset as u64, None, false, value)
}

#[no_mangle]
pub extern "C" fn memcached_increment_with_initial(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    offset: u64,
    initial: u64,
    expiration: libc::time_t,
    value: *mut u64,
) -> memcached_return_t {
    counter(ptr, key, key_length, offset, Some((initial, expiration)), true, value)
}

#[no_mangle]
pub extern "C" fn memcached_decrement_with_initial(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    offset: u64,
    initial: u64,
    expiration: libc::time_t,
    value: *mut u64,
) -> memcached_return_t {
    counter(ptr, key, key_length, offset, Some((initial, expiration)), false, value)
}

#[no_mangle]
pub extern "C" fn memcached_touch(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    expiration: libc::time_t,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let (Some(memc), Some(key)) = (memc(ptr), key(key_ptr, key_length)) else { return rc::INVALID_ARGUMENTS };
        rc_result(memc.client.touch(key, exptime(expiration)))
    })
}

#[no_mangle]
pub extern "C" fn memcached_flush(ptr: *mut memcached_st, expiration: libc::time_t) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        if memc.client.servers().is_empty() {
            return rc::NO_SERVERS;
        }
        rc_result(memc.client.flush_all(exptime(expiration)))
    })
}

#[no_mangle]
pub extern "C" fn memcached_version(ptr: *mut memcached_st) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        let versions = memc.client.version();
        if versions.is_empty() {
            return rc::NO_SERVERS;
        }
        versions.into_iter().find_map(|(_, v)| v.err()).map_or(rc::SUCCESS, |e| rc_of(&e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_arguments_are_invalid_arguments_not_crashes() {
        let n = ptr::null_mut();
        assert_eq!(memcached_set(n, c"k".as_ptr(), 1, c"v".as_ptr(), 1, 0, 0), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_server_add(n, c"127.0.0.1".as_ptr(), 1), rc::INVALID_ARGUMENTS);
        let mut error = rc::SUCCESS;
        assert!(memcached_get(n, c"k".as_ptr(), 1, ptr::null_mut(), ptr::null_mut(), &mut error).is_null());
        assert_eq!(error, rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_wait(n, ptr::null_mut()), rc::INVALID_ARGUMENTS);
        assert!(memcached_request_create(n, ptr::null_mut(), 0, 0).is_null());
        memcached_free(n);
        memcached_result_free(ptr::null_mut());
        assert!(memcached_result_value(ptr::null()).is_null());

        let memc = memcached_create(ptr::null_mut());
        assert!(!memc.is_null());
        assert_eq!(memcached_set(memc, ptr::null(), 1, c"v".as_ptr(), 1, 0, 0), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_set(memc, c"k".as_ptr(), 1, ptr::null(), 1, 0, 0), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_server_add(memc, ptr::null(), 1), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_mget(memc, ptr::null(), ptr::null(), 2), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_set(memc, c"k".as_ptr(), 1, c"v".as_ptr(), 1, 0, 0), rc::NO_SERVERS);
        assert_eq!(memcached_set(memc, c"k".as_ptr(), 0, c"v".as_ptr(), 1, 0, 0), rc::BAD_KEY_PROVIDED);
        assert_eq!(memcached_iset(memc, c"k".as_ptr(), 1, ptr::null_mut(), 0, 0), rc::INVALID_ARGUMENTS);
        assert_eq!(memcached_behavior_set(memc, 1000, 1), rc::INVALID_ARGUMENTS);
        memcached_free(memc);
    }

    #[test]
    fn strerror_covers_every_code() {
        for code in 0..rc::MAXIMUM_RETURN {
            // SAFETY: static NUL-terminated strings.
            let text = unsafe { CStr::from_ptr(memcached_strerror(ptr::null(), code)) };
            assert!(!text.to_bytes().is_empty() && text != c"INVALID memcached_return_t", "code {code}");
        }
        assert_eq!(unsafe { CStr::from_ptr(memcached_strerror(ptr::null(), 999)) }, c"INVALID memcached_return_t");
    }

    #[test]
    fn errors_map_to_libmemcached_codes() {
        assert_eq!(rc_of(&Error::NotFound), rc::NOTFOUND);
        assert_eq!(rc_of(&Error::Exists), rc::DATA_EXISTS);
        assert_eq!(rc_of(&Error::NotStored), rc::NOTSTORED);
        assert_eq!(rc_of(&Error::TooLarge), rc::E2BIG);
        assert_eq!(rc_of(&Error::Timeout), rc::TIMEOUT);
        assert_eq!(rc_of(&Error::InvalidKey { len: 0 }), rc::BAD_KEY_PROVIDED);
        assert_eq!(rc_of(&Error::Io(std::sync::Arc::new(std::io::ErrorKind::ConnectionReset.into()))), rc::ERRNO);
        assert_eq!(
            rc_of(&Error::Io(std::sync::Arc::new(std::io::ErrorKind::ConnectionRefused.into()))),
            rc::CONNECTION_FAILURE
        );
    }

    #[test]
    fn behaviors_are_stored_applied_or_refused() {
        let memc = memcached_create(ptr::null_mut());
        assert_eq!(memcached_behavior_get(memc, behavior::BINARY_PROTOCOL), 1);
        assert_eq!(memcached_behavior_set(memc, behavior::BINARY_PROTOCOL, 0), rc::SUCCESS);
        assert_eq!(memcached_behavior_get(memc, behavior::BINARY_PROTOCOL), 1, "always binary");
        assert_eq!(memcached_behavior_set(memc, behavior::CONNECT_TIMEOUT, 250), rc::SUCCESS);
        assert_eq!(memcached_behavior_get(memc, behavior::CONNECT_TIMEOUT), 250);
        assert_eq!(memc_ref(memc).client.timeouts().0, Duration::from_millis(250));
        assert_eq!(memcached_behavior_set(memc, behavior::RCV_TIMEOUT, 1_500_000), rc::SUCCESS);
        assert_eq!(memc_ref(memc).client.timeouts().1, Duration::from_millis(1500));
        assert_eq!(memcached_behavior_set(memc, behavior::DISTRIBUTION, 0), rc::NOT_SUPPORTED);
        assert_eq!(memcached_behavior_set(memc, behavior::DISTRIBUTION, 2), rc::SUCCESS);
        assert_eq!(memcached_behavior_set(memc, behavior::NOREPLY, 1), rc::NOT_SUPPORTED);
        assert_eq!(memcached_behavior_set(memc, behavior::NO_BLOCK, 1), rc::SUCCESS);
        memcached_free(memc);
    }

    fn memc_ref<'a>(ptr: *mut memcached_st) -> &'a memcached_st {
        memc(ptr).unwrap()
    }
}
