//! Retrieval: `memcached_get`, `mget` and fetching results, and the `memcached_result_st` accessors.

use super::*;

/// A malloc'd, NUL-terminated copy of `value`; NULL if malloc fails.
pub(crate) fn malloc_copy(value: &[u8]) -> *mut c_char {
    // SAFETY: malloc of len + 1 bytes, then writes within them.
    unsafe {
        let p = libc::malloc(value.len() + 1).cast::<u8>();
        if !p.is_null() {
            ptr::copy_nonoverlapping(value.as_ptr(), p, value.len());
            *p.add(value.len()) = 0;
        }
        p.cast()
    }
}

#[no_mangle]
pub extern "C" fn memcached_get(
    ptr: *mut memcached_st,
    key_ptr: *const c_char,
    key_length: usize,
    value_length: *mut usize,
    flags: *mut u32,
    error: *mut memcached_return_t,
) -> *mut c_char {
    let (value, code) = guard((ptr::null_mut(), rc::FAILURE), || {
        let (Some(memc), Some(key)) = (memc(ptr), key(key_ptr, key_length)) else {
            return (ptr::null_mut(), rc::INVALID_ARGUMENTS);
        };
        let mut value = Vec::new();
        match memc.client.get_into(key, &mut value) {
            Ok(Some(meta)) => {
                let copy = malloc_copy(&value);
                if copy.is_null() {
                    return (ptr::null_mut(), rc::MEMORY_ALLOCATION_FAILURE);
                }
                set(value_length, value.len());
                set(flags, meta.flags);
                (copy, rc::SUCCESS)
            }
            Ok(None) => (ptr::null_mut(), rc::NOTFOUND),
            Err(e) => (ptr::null_mut(), rc_of(&e)),
        }
    });
    if value.is_null() {
        set(value_length, 0);
        set(flags, 0);
    }
    set(error, code);
    value
}

#[no_mangle]
pub extern "C" fn memcached_mget(
    ptr: *mut memcached_st,
    keys: *const *const c_char,
    key_length: *const usize,
    number_of_keys: usize,
) -> memcached_return_t {
    guard(rc::FAILURE, || {
        let Some(memc) = memc(ptr) else { return rc::INVALID_ARGUMENTS };
        memc.fetched.borrow_mut().clear();
        if number_of_keys == 0 {
            return rc::NOTFOUND; // libmemcached's answer to an empty key list
        }
        if keys.is_null() || key_length.is_null() {
            return rc::INVALID_ARGUMENTS;
        }
        let mut list: Vec<&[u8]> = Vec::with_capacity(number_of_keys);
        for i in 0..number_of_keys {
            // SAFETY: arrays of number_of_keys entries (the C contract).
            let (k, len) = unsafe { (*keys.add(i), *key_length.add(i)) };
            let Some(k) = key(k, len) else { return rc::INVALID_ARGUMENTS };
            list.push(k);
        }
        let mut fetched = memc.fetched.borrow_mut();
        let result = memc.client.get_multi_with(&list, |index, value, meta| {
            fetched.push_back(Fetched {
                key: list[index].to_vec(),
                value: value.to_vec(),
                flags: meta.flags,
                cas: meta.cas,
            });
        });
        rc_result(result)
    })
}

fn result_init(result: &mut memcached_result_st, is_allocated: bool) {
    // SAFETY: all-zero is a valid memcached_result_st (NULL pointers, zero lengths).
    *result = unsafe { std::mem::zeroed() };
    result.is_allocated_ = is_allocated as c_int;
}

#[no_mangle]
pub extern "C" fn memcached_result_create(
    _ptr: *const memcached_st,
    result: *mut memcached_result_st,
) -> *mut memcached_result_st {
    guard(ptr::null_mut(), || {
        if result.is_null() {
            // SAFETY: calloc of one struct; freed by memcached_result_free.
            let p =
                unsafe { libc::calloc(1, std::mem::size_of::<memcached_result_st>()) }.cast::<memcached_result_st>();
            if let Some(r) = unsafe { p.as_mut() } {
                result_init(r, true);
            }
            p
        } else {
            // SAFETY: caller storage of the struct's size (the C contract).
            result_init(unsafe { &mut *result }, false);
            result
        }
    })
}

#[no_mangle]
pub extern "C" fn memcached_result_free(result: *mut memcached_result_st) {
    guard((), || {
        // SAFETY: a result from memcached_result_create or memcached_fetch_result.
        let Some(r) = (unsafe { result.as_mut() }) else { return };
        unsafe { libc::free(r.value_.cast()) };
        r.value_ = ptr::null_mut();
        r.value_length_ = 0;
        r.value_capacity_ = 0;
        if r.is_allocated_ != 0 {
            unsafe { libc::free(result.cast()) };
        }
    })
}

#[no_mangle]
pub extern "C" fn memcached_fetch_result(
    ptr: *mut memcached_st,
    result: *mut memcached_result_st,
    error: *mut memcached_return_t,
) -> *mut memcached_result_st {
    let (out, code) = guard((ptr::null_mut(), rc::FAILURE), || {
        let Some(memc) = memc(ptr) else { return (ptr::null_mut(), rc::INVALID_ARGUMENTS) };
        let Some(item) = memc.fetched.borrow_mut().pop_front() else { return (ptr::null_mut(), rc::END) };
        let out = if result.is_null() { memcached_result_create(ptr, ptr::null_mut()) } else { result };
        // SAFETY: a result from memcached_result_create (the C contract), or ours.
        let Some(r) = (unsafe { out.as_mut() }) else { return (ptr::null_mut(), rc::MEMORY_ALLOCATION_FAILURE) };
        debug_assert!(item.key.len() < MEMCACHED_MAX_KEY);
        for (slot, &b) in r.key_.iter_mut().zip(item.key.iter()) {
            *slot = b as c_char;
        }
        r.key_[item.key.len()] = 0;
        r.key_length_ = item.key.len();
        if r.value_capacity_ < item.value.len() + 1 {
            // SAFETY: realloc of our own malloc'd buffer (or NULL).
            let p = unsafe { libc::realloc(r.value_.cast(), item.value.len() + 1) }.cast::<c_char>();
            if p.is_null() {
                return (ptr::null_mut(), rc::MEMORY_ALLOCATION_FAILURE);
            }
            r.value_ = p;
            r.value_capacity_ = item.value.len() + 1;
        }
        // SAFETY: value_ holds value_capacity_ >= len + 1 bytes.
        unsafe {
            ptr::copy_nonoverlapping(item.value.as_ptr(), r.value_.cast::<u8>(), item.value.len());
            *r.value_.add(item.value.len()) = 0;
        }
        r.value_length_ = item.value.len();
        r.flags_ = item.flags;
        r.cas_ = item.cas;
        (out, rc::SUCCESS)
    });
    set(error, code);
    out
}

fn result_ref<'a>(result: *const memcached_result_st) -> Option<&'a memcached_result_st> {
    // SAFETY: a result from memcached_result_create or memcached_fetch_result.
    unsafe { result.as_ref() }
}

#[no_mangle]
pub extern "C" fn memcached_result_key_value(result: *const memcached_result_st) -> *const c_char {
    result_ref(result).map_or(ptr::null(), |r| r.key_.as_ptr())
}

#[no_mangle]
pub extern "C" fn memcached_result_key_length(result: *const memcached_result_st) -> usize {
    result_ref(result).map_or(0, |r| r.key_length_)
}

#[no_mangle]
pub extern "C" fn memcached_result_value(result: *const memcached_result_st) -> *const c_char {
    result_ref(result).map_or(ptr::null(), |r| r.value_)
}

#[no_mangle]
pub extern "C" fn memcached_result_length(result: *const memcached_result_st) -> usize {
    result_ref(result).map_or(0, |r| r.value_length_)
}

#[no_mangle]
pub extern "C" fn memcached_result_flags(result: *const memcached_result_st) -> u32 {
    result_ref(result).map_or(0, |r| r.flags_)
}

#[no_mangle]
pub extern "C" fn memcached_result_cas(result: *const memcached_result_st) -> u64 {
    result_ref(result).map_or(0, |r| r.cas_)
}
