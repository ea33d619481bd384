//! Setting a variable of the C environment while other threads may read it.
//!
//! UCX reads some settings only from the environment (libucs's load-time constructor reads
//! `UCX_ERROR_SIGNALS`; UCX 1.13's TCP connection manager reads `UCX_TCP_CM_REUSEADDR`), so they
//! must be set there, and in a JVM other threads already run then. glibc's `setenv` is not safe
//! against a concurrent `getenv`: adding a name `realloc`s the `environ` array, and a reader still
//! walking the old array reads freed memory. Replacing the value of an existing name only swaps
//! one pointer in the array (old strings are never freed), which readers survive.
//!
//! So a new name goes into a fresh copy of the array that is published with one pointer store and
//! never freed, nor is the old one: a reader sees either array, both valid for the process's life.
//! The cost is one small leak per variable added, a few times per process.
//!
//! Shared by the fabric and the JNI preload library (which includes this file by path, as it links
//! nothing but libc); each function is for the few variables named above, not a general `setenv`.
use std::ffi::CStr;

extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// Sets `name=value` in the C environment, keeping an existing value unless `overwrite`. Other
/// threads may call `getenv` meanwhile; no other thread may call `setenv`/`putenv`/`unsetenv` (the
/// fabric and the JVM do not). Returns false when out of memory.
pub fn set_var(name: &CStr, value: &CStr, overwrite: bool) -> bool {
    // SAFETY: `getenv` with a NUL-terminated name; the result is only compared with null.
    let existing = unsafe { libc::getenv(name.as_ptr()) };
    if !existing.is_null() {
        if !overwrite {
            return true;
        }
        // SAFETY: the name exists, so glibc replaces the entry's pointer in place (no realloc of the
        // array; the old string stays allocated), which concurrent readers survive.
        return unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) } == 0;
    }
    let (name, value) = (name.to_bytes(), value.to_bytes());
    // SAFETY: `environ` is the process's NULL-terminated array of NUL-terminated strings; it is
    // read here, and replaced by one store only after the new array is complete. Neither array is
    // ever freed, so a reader holding either stays valid. `malloc` results are checked; the entry
    // gets `name=value\0` written within its `name.len() + value.len() + 2` bytes.
    unsafe {
        let old = environ;
        let mut count = 0usize;
        while !old.is_null() && !(*old.add(count)).is_null() {
            count += 1;
        }
        let entry = libc::malloc(name.len() + value.len() + 2) as *mut u8;
        let array = libc::malloc((count + 2) * std::mem::size_of::<*mut libc::c_char>()) as *mut *mut libc::c_char;
        if entry.is_null() || array.is_null() {
            libc::free(entry as *mut libc::c_void);
            libc::free(array as *mut libc::c_void);
            return false;
        }
        std::ptr::copy_nonoverlapping(name.as_ptr(), entry, name.len());
        *entry.add(name.len()) = b'=';
        std::ptr::copy_nonoverlapping(value.as_ptr(), entry.add(name.len() + 1), value.len());
        *entry.add(name.len() + 1 + value.len()) = 0;
        if count > 0 {
            std::ptr::copy_nonoverlapping(old, array, count);
        }
        *array.add(count) = entry as *mut libc::c_char;
        *array.add(count + 1) = std::ptr::null_mut();
        // The array is complete before it is published.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        std::ptr::write_volatile(std::ptr::addr_of_mut!(environ), array);
    }
    true
}

/// Tests that change the C environment take turns: two writers at once (this file's tests and the
/// preload library's, which include this file) lose each other's additions, as `set_var` says.
#[cfg(test)]
pub(crate) static TEST_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    fn get(name: &CStr) -> Option<String> {
        // SAFETY: NUL-terminated name; a non-null result is a NUL-terminated string of the environment.
        let value = unsafe { libc::getenv(name.as_ptr()) };
        // SAFETY: a non-null `getenv` result is a NUL-terminated string of the environment, never freed.
        (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
    }

    #[test]
    fn adds_keeps_and_overwrites() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(set_var(c"SLIPSTREAM_ENVIRON_TEST_A", c"one", false));
        assert_eq!(get(c"SLIPSTREAM_ENVIRON_TEST_A").as_deref(), Some("one"));
        assert!(set_var(c"SLIPSTREAM_ENVIRON_TEST_A", c"two", false));
        assert_eq!(get(c"SLIPSTREAM_ENVIRON_TEST_A").as_deref(), Some("one"), "kept without overwrite");
        assert!(set_var(c"SLIPSTREAM_ENVIRON_TEST_A", c"", true));
        assert_eq!(get(c"SLIPSTREAM_ENVIRON_TEST_A").as_deref(), Some(""));
        assert!(get(c"PATH").is_some(), "the rest of the environment is still there");
        assert_eq!(std::env::var("SLIPSTREAM_ENVIRON_TEST_A").as_deref(), Ok(""), "Rust sees it too");
    }

    #[test]
    fn readers_on_other_threads_survive_many_additions() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (stop, reads) = (stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // Walks the whole array (a miss), as a reader racing a realloc would.
                        assert!(get(c"SLIPSTREAM_ENVIRON_TEST_ABSENT").is_none());
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        while reads.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        for i in 0..300 {
            let name = std::ffi::CString::new(format!("SLIPSTREAM_ENVIRON_TEST_MANY_{i}")).unwrap();
            assert!(set_var(&name, c"x", false));
        }
        let before_stop = reads.load(Ordering::Relaxed);
        while reads.load(Ordering::Relaxed) < before_stop + 100 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().expect("a reader failed");
        }
        assert_eq!(get(c"SLIPSTREAM_ENVIRON_TEST_MANY_299").as_deref(), Some("x"));
    }
}
