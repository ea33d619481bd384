//! Non-blocking requests: OSU RDMA-Memcached's `memcached_request_st` calls (create, test, wait).

use super::*;

fn request_parts<'a>(
    ptr: *mut memcached_st,
    req: *mut memcached_request_st,
) -> Option<(&'a memcached_st, &'a mut memcached_request_st, &'a mut RequestInternal)> {
    let memc = memc(ptr)?;
    // SAFETY: a request from memcached_request_create (the C contract).
    let req = unsafe { req.as_mut() }?;
    // SAFETY: internal_ is ours, alive as long as the request.
    let internal = unsafe { req.internal_.as_mut() }?;
    std::ptr::eq(internal.owner, memc).then_some((memc, req, internal))
}

#[no_mangle]
pub extern "C" fn memcached_request_create(
    ptr: *mut memcached_st,
    value: *mut c_char,
    value_length: usize,
    flags: u32,
) -> *mut memcached_request_st {
    guard(ptr::null_mut(), || {
        if ptr.is_null() {
            return ptr::null_mut();
        }
        let internal = Box::new(RequestInternal {
            request: None,
            is_get: false,
            dest: Box::into_raw(Box::new(Vec::new())),
            owner: ptr,
        });
        Box::into_raw(Box::new(memcached_request_st {
            value,
            value_length,
            value_capacity: value_length,
            flags,
            cas: 0,
            response: rc::SUCCESS,
            internal_: Box::into_raw(internal),
        }))
    })
}

#[no_mangle]
pub extern "C" fn memcached_request_free(ptr: *mut memcached_st, req: *mut memcached_request_st) {
    guard((), || {
        let Some((memc, _, internal)) = request_parts(ptr, req) else { return };
        if internal.request.take().is_some() {
            memc.requests_live.set(memc.requests_live.get() - 1);
        }
        // SAFETY: both from Box::into_raw in memcached_request_create; freed once.
        unsafe {
            drop(Box::from_raw((*req).internal_));
            drop(Box::from_raw(req));
        }
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Issue {
    ISet,
    BSet,
    IGet,
    BGet,
}

fn issue(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    req: *mut memcached_request_st,
    expiration: libc::time_t,
    flags: u32,
    kind: Issue,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some((memc, req, internal)) = request_parts(ptr, req) else { return rc::INVALID_ARGUMENTS };
        if internal.request.is_some() {
            return rc::INVALID_ARGUMENTS; // still in flight: wait for (or free) it first
        }
        let Some(key) = key(key_ptr, key_length) else {
            req.response = rc::INVALID_ARGUMENTS;
            return rc::INVALID_ARGUMENTS;
        };
        let is_get = matches!(kind, Issue::IGet | Issue::BGet);
        let value = if is_get { Some(&[][..]) } else { bytes(req.value, req.value_length) };
        let Some(value) = value else {
            req.response = rc::INVALID_ARGUMENTS;
            return rc::INVALID_ARGUMENTS;
        };
        // SAFETY (lifetimes): the request refers to the client inside `memc`, which is freed
        // only after every request (memcached_free keeps it otherwise); to `dest`, owned by
        // `internal` and dropped after the request; and to the key and value, which the client
        // copies before returning (the header's rules for the caller are stricter still).
        let client: &'static Client = unsafe { &*(&memc.client as *const Client) };
        let key: &'static [u8] = unsafe { std::slice::from_raw_parts(key.as_ptr(), key.len()) };
        let value: &'static [u8] = unsafe { std::slice::from_raw_parts(value.as_ptr(), value.len()) };
        let dest: &'static mut Vec<u8> = unsafe { &mut *internal.dest };
        let t = exptime(expiration);
        let issued = match kind {
            Issue::ISet => client.iset(key, value, flags, t),
            Issue::BSet => client.bset(key, value, flags, t),
            Issue::IGet => client.iget(key, dest),
            Issue::BGet => client.bget(key, dest),
        };
        match issued {
            Ok(request) => {
                internal.request = Some(request);
                internal.is_get = is_get;
                memc.requests_live.set(memc.requests_live.get() + 1);
                req.response = rc::IN_PROGRESS;
                req.cas = 0;
                if !is_get {
                    req.flags = flags;
                }
                rc::SUCCESS
            }
            Err(e) => {
                req.response = rc_of(&e);
                req.response
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn memcached_iset(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    req: *mut memcached_request_st,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    issue(ptr, key, key_length, req, expiration, flags, Issue::ISet)
}

#[no_mangle]
pub extern "C" fn memcached_bset(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    req: *mut memcached_request_st,
    expiration: libc::time_t,
    flags: u32,
) -> memcached_return_t {
    issue(ptr, key, key_length, req, expiration, flags, Issue::BSet)
}

#[no_mangle]
pub extern "C" fn memcached_iget(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    req: *mut memcached_request_st,
) -> memcached_return_t {
    issue(ptr, key, key_length, req, 0, 0, Issue::IGet)
}

#[no_mangle]
pub extern "C" fn memcached_bget(
    ptr: *mut memcached_st,
    key: *const c_char,
    key_length: usize,
    req: *mut memcached_request_st,
) -> memcached_return_t {
    issue(ptr, key, key_length, req, 0, 0, Issue::BGet)
}

/// Records a completed request's outcome in `req` (a get's value in `req.value`).
fn finish(
    memc: &memcached_st,
    req: &mut memcached_request_st,
    internal: &mut RequestInternal,
    outcome: Result<Meta, Error>,
) -> memcached_return_t {
    internal.request = None;
    memc.requests_live.set(memc.requests_live.get() - 1);
    req.response = match outcome {
        Err(e) => rc_of(&e),
        Ok(meta) => {
            req.cas = meta.cas;
            if internal.is_get {
                req.flags = meta.flags;
                // SAFETY: dest is owned by `internal`; the request that wrote it is gone.
                let value = unsafe { &*internal.dest };
                req.value_length = value.len();
                if req.value.is_null() {
                    req.value = malloc_copy(value);
                    if req.value.is_null() {
                        req.value_length = 0;
                        return finish_code(req, rc::MEMORY_ALLOCATION_FAILURE);
                    }
                    req.value_capacity = value.len() + 1;
                    rc::SUCCESS
                } else if value.len() <= req.value_capacity {
                    // SAFETY: req.value holds value_capacity bytes (the header's contract).
                    unsafe {
                        ptr::copy_nonoverlapping(value.as_ptr(), req.value.cast::<u8>(), value.len());
                        if value.len() < req.value_capacity {
                            *req.value.add(value.len()) = 0;
                        }
                    }
                    rc::SUCCESS
                } else {
                    rc::E2BIG
                }
            } else {
                rc::SUCCESS
            }
        }
    };
    req.response
}

fn finish_code(req: &mut memcached_request_st, code: memcached_return_t) -> memcached_return_t {
    req.response = code;
    code
}

#[no_mangle]
pub extern "C" fn memcached_wait(ptr: *mut memcached_st, req: *mut memcached_request_st) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some((memc, req, internal)) = request_parts(ptr, req) else { return rc::INVALID_ARGUMENTS };
        let Some(request) = internal.request.as_mut() else { return req.response };
        let outcome = request.wait();
        finish(memc, req, internal, outcome)
    })
}

#[no_mangle]
pub extern "C" fn memcached_test(ptr: *mut memcached_st, req: *mut memcached_request_st) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some((memc, req, internal)) = request_parts(ptr, req) else { return rc::INVALID_ARGUMENTS };
        let Some(request) = internal.request.as_mut() else { return req.response };
        match request.test() {
            Poll::Pending => rc::IN_PROGRESS,
            Poll::Ready(outcome) => finish(memc, req, internal, outcome),
        }
    })
}
