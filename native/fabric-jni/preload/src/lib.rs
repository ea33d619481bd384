//! The first native library the JVM loads for the fabric (see `io.slipstream.fabric.NativeLoader`).
//!
//! Why it exists: libucs installs handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE in its load-time
//! constructor, before any code of ours runs. The JVM uses SIGSEGV internally (implicit null checks,
//! safepoint polls, stack banging); with UCX's handler in front it kills the process. libucs reads
//! `UCX_ERROR_SIGNALS` when its constructor runs, so the variable must be empty in the C environment
//! *before* the main JNI library (which links libucp/libucs) is loaded. Java cannot set environment
//! variables, hence this tiny library, which must never link UCX itself.
//!
//! It also sets `UCX_MEM_EVENTS=no` unless the environment sets it already. With memory events on
//! (UCX's default), `ucp_init` rewrites the code of libc's `mmap`, `munmap`, `mremap`, `brk`,
//! `shmat`... in place (UCM "bistro" hooks; visible as split text mappings of libc in
//! `/proc/self/maps`) so that its registration cache hears of every unmapping. In a JVM that patching
//! runs while GC and compiler threads call those very functions (a known crash: JVM threads in
//! `malloc`/`mmap` while the hooks go in), and every later `munmap` of the JVM pays for UCX's event
//! dispatch. The fabric does not need the events: it registers its pool memory explicitly
//! (`ucp_mem_map`) and never unmaps registered memory, so UCX's cache of registrations of
//! arbitrary user memory, the only consumer of the events, has nothing to do. An explicit
//! `UCX_MEM_EVENTS` in the environment is respected (flag `PREPARE_KEPT_MEM_EVENTS`).
//!
//! Protocol with the loader:
//! 1. `Preload.prepare()`: sets `UCX_ERROR_SIGNALS=` (and `UCX_MEM_EVENTS=no`) and records the JVM's
//!    current handlers for the four error signals. Returns flags (see `PREPARE_*`).
//! 2. The loader loads the main library and starts UCX once (a probe node).
//! 3. `Preload.verify()`: compares the handlers with the recorded ones; any that changed are put back
//!    and reported as a bit mask of signal numbers, so the loader can refuse or warn.
//!
//! Only this library's two JNI functions exist; they take no JNI objects, so the raw ABI is enough
//! and the `jni` crate is not needed.
use std::ffi::c_void;
use std::sync::Mutex;

/// The non-reallocating setter of the C environment, shared with the fabric by path (this library
/// links nothing but libc).
#[path = "../../../fabric/src/environ.rs"]
#[allow(dead_code)]
mod environ;

/// UCX's default `UCX_ERROR_SIGNALS` set (see `ucx_info -c`).
const ERROR_SIGNALS: [libc::c_int; 4] = [libc::SIGILL, libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE];

/// `prepare` flag: libucs was already in the process before `prepare` ran (loaded by someone else).
pub const PREPARE_UCS_ALREADY_LOADED: i32 = 1;
/// `prepare` flag: the environment had a non-empty `UCX_ERROR_SIGNALS`, which was overridden.
pub const PREPARE_OVERRODE_ERROR_SIGNALS: i32 = 2;
/// `prepare` flag: `setenv` failed (out of memory); the main library must not be loaded.
pub const PREPARE_SETENV_FAILED: i32 = 4;
/// `prepare` flag: the environment sets `UCX_MEM_EVENTS` itself; it was kept.
pub const PREPARE_KEPT_MEM_EVENTS: i32 = 8;

/// The JVM's handlers as recorded by `prepare`, one per entry of `ERROR_SIGNALS`.
static RECORDED: Mutex<Option<[SavedAction; 4]>> = Mutex::new(None);

#[derive(Clone, Copy)]
struct SavedAction(libc::sigaction);

// `sigaction` holds a function pointer and plain data; moving it between threads is fine.
// SAFETY: `sigaction` holds a function pointer and plain data, no thread-bound resource; moving it
// between threads is fine.
unsafe impl Send for SavedAction {}

fn current_action(signal: libc::c_int) -> libc::sigaction {
    // SAFETY: with a null new action `sigaction` only writes the current one into `action`, a zeroed
    // valid sigaction.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let status = libc::sigaction(signal, std::ptr::null(), &mut action);
        debug_assert_eq!(status, 0);
        action
    }
}

/// Same handler function. Flags are not compared: glibc adds `SA_RESTORER` on the way in, so a
/// handler read back after being set never has the flags it was set with.
fn same_handler(a: &libc::sigaction, b: &libc::sigaction) -> bool {
    a.sa_sigaction == b.sa_sigaction
}

fn ucs_loaded() -> bool {
    let name = c"libucs.so.0";
    // SAFETY: `dlopen` with RTLD_NOLOAD only looks the library up (never loads it); a handle it
    // returns is closed once.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return false;
        }
        libc::dlclose(handle);
        true
    }
}

fn prepare() -> i32 {
    let mut flags = 0;
    if ucs_loaded() {
        flags |= PREPARE_UCS_ALREADY_LOADED;
    }
    if std::env::var_os("UCX_ERROR_SIGNALS").is_some_and(|value| !value.is_empty()) {
        flags |= PREPARE_OVERRODE_ERROR_SIGNALS;
    }
    // The C environment is what libucs's constructor reads, so there is no config API to use
    // instead. JVM threads run already and may call getenv: `environ::set_var` never frees an
    // environment array a reader may be walking (glibc's setenv reallocs it).
    if !environ::set_var(c"UCX_ERROR_SIGNALS", c"", true) {
        return flags | PREPARE_SETENV_FAILED;
    }
    if std::env::var_os("UCX_MEM_EVENTS").is_some() {
        flags |= PREPARE_KEPT_MEM_EVENTS;
    } else if !environ::set_var(c"UCX_MEM_EVENTS", c"no", false) {
        return flags | PREPARE_SETENV_FAILED;
    }
    let recorded = ERROR_SIGNALS.map(|signal| SavedAction(current_action(signal)));
    *RECORDED.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorded);
    flags
}

/// Returns the mask (bit `1 << signo`) of error signals whose handler changed since `prepare`,
/// after restoring the recorded handler for each; -1 if `prepare` never ran.
fn verify() -> i64 {
    let recorded = RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(recorded) = recorded.as_ref() else { return -1 };
    let mut changed: i64 = 0;
    for (signal, saved) in ERROR_SIGNALS.iter().zip(recorded.iter()) {
        if !same_handler(&current_action(*signal), &saved.0) {
            // SAFETY: `saved.0` is an action read back from the kernel by `prepare` for this signal.
            let status = unsafe { libc::sigaction(*signal, &saved.0, std::ptr::null_mut()) };
            debug_assert_eq!(status, 0);
            changed |= 1 << *signal;
        }
    }
    changed
}

/// `static native int prepare()` of `io.slipstream.fabric.Preload`.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_Preload_prepare(_env: *mut c_void, _class: *mut c_void) -> i32 {
    std::panic::catch_unwind(prepare).unwrap_or(PREPARE_SETENV_FAILED)
}

/// `static native long verify()` of `io.slipstream.fabric.Preload`.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_Preload_verify(_env: *mut c_void, _class: *mut c_void) -> i64 {
    std::panic::catch_unwind(verify).unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recorded handlers and the C environment are process-global: tests take turns, also
    /// with the tests of `environ.rs` (included in this library).
    use super::environ::TEST_SERIAL as SERIAL;

    #[test]
    fn prepare_empties_the_variable_and_verify_sees_no_change() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        std::env::set_var("UCX_ERROR_SIGNALS", "SIGSEGV");
        let flags = prepare();
        assert_eq!(flags & PREPARE_SETENV_FAILED, 0);
        assert_ne!(flags & PREPARE_OVERRODE_ERROR_SIGNALS, 0);
        assert_eq!(std::env::var_os("UCX_ERROR_SIGNALS").unwrap(), "");
        assert_eq!(verify(), 0);
    }

    #[test]
    fn mem_events_default_to_no_but_an_explicit_setting_is_kept() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        std::env::remove_var("UCX_MEM_EVENTS");
        assert_eq!(prepare() & PREPARE_KEPT_MEM_EVENTS, 0);
        assert_eq!(std::env::var_os("UCX_MEM_EVENTS").unwrap(), "no");
        std::env::set_var("UCX_MEM_EVENTS", "yes");
        assert_ne!(prepare() & PREPARE_KEPT_MEM_EVENTS, 0);
        assert_eq!(std::env::var_os("UCX_MEM_EVENTS").unwrap(), "yes");
        std::env::remove_var("UCX_MEM_EVENTS");
    }

    #[test]
    fn verify_restores_a_replaced_handler() {
        extern "C" fn ignore(_: libc::c_int) {}
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        prepare();
        let before = current_action(libc::SIGFPE);
        // SAFETY: (test) installs a valid handler function for SIGFPE; `verify` restores the JVM's.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            libc::sigaction(libc::SIGFPE, &action, std::ptr::null_mut());
        }
        assert_eq!(verify(), 1 << libc::SIGFPE);
        assert!(same_handler(&current_action(libc::SIGFPE), &before));
        assert_eq!(verify(), 0);
    }
}
