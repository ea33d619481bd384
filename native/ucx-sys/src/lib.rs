//! Raw UCX bindings, generated at build time against the system UCX.
//!
//! Architecture invariant: this crate is bindgen output plus the few macros and
//! static-inline functions bindgen cannot see. It has no policy and no safe wrappers;
//! those live in `fabric`.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// The UCX version pkg-config reported when these bindings were generated (e.g. "1.13.1", "1.22.0").
/// The library the dynamic linker loads at run time should be the same one: see the tests.
pub const BUILT_AGAINST_VERSION: &str = env!("UCX_SYS_BUILT_VERSION");

/// `UCS_PTR_IS_ERR`: UCX encodes a status in a pointer's top range.
#[inline]
pub fn ucs_ptr_is_err<T>(ptr: *const T) -> bool {
    (ptr as usize) >= (UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_IS_PTR`: a real request pointer (not NULL, not an error).
#[inline]
pub fn ucs_ptr_is_ptr<T>(ptr: *const T) -> bool {
    (ptr as usize).wrapping_sub(1) < (UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_STATUS`: the status encoded in a pointer returned by an `_nbx` call.
#[inline]
pub fn ucs_ptr_status<T>(ptr: *const T) -> ucs_status_t {
    ptr as isize as ucs_status_t
}

/// `ucp_init` is static inline in ucp.h, so bindgen skips it.
///
/// # Safety
/// Same contract as `ucp_init`.
pub unsafe fn ucp_init(
    params: *const ucp_params_t,
    config: *const ucp_config_t,
    context_p: *mut ucp_context_h,
) -> ucs_status_t {
    ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context_p)
}

/// Human-readable text for a status.
pub fn status_string(status: ucs_status_t) -> String {
    // SAFETY: ucs_status_string takes any status value and returns NULL or a pointer to a static,
    // NUL-terminated string; it is read (and copied) only when not NULL.
    unsafe {
        let s = ucs_status_string(status);
        if s.is_null() {
            return format!("ucs status {status}");
        }
        std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_at_least_1_13() {
        let (mut major, mut minor, mut release) = (0u32, 0u32, 0u32);
        // SAFETY: ucp_get_version only writes three unsigned ints through valid pointers.
        unsafe { ucp_get_version(&mut major, &mut minor, &mut release) };
        assert!(major > 1 || (major == 1 && minor >= 13), "UCX {major}.{minor}");
    }

    /// Headers, pkg-config and the loaded library must be one UCX: bindings generated from 1.22's
    /// headers but run on 1.13's library (a missing rpath or LD_LIBRARY_PATH) would pass struct
    /// layouts and field masks the library does not know.
    #[test]
    fn runtime_library_is_the_one_built_against() {
        let (mut major, mut minor, mut release) = (0u32, 0u32, 0u32);
        // SAFETY: ucp_get_version only writes three unsigned ints through valid pointers.
        unsafe { ucp_get_version(&mut major, &mut minor, &mut release) };
        // SAFETY: ucp_get_version_string returns a pointer to a static NUL-terminated string.
        let runtime = unsafe { std::ffi::CStr::from_ptr(ucp_get_version_string()) }.to_string_lossy().into_owned();
        println!("UCX at run time: {runtime} ({major}.{minor}.{release}); bindings from UCX {BUILT_AGAINST_VERSION} \
                  (headers' API {UCP_API_MAJOR}.{UCP_API_MINOR})");
        assert_eq!((major, minor), (UCP_API_MAJOR, UCP_API_MINOR), "the loaded libucp is not the one whose headers were used");
        let built: Vec<u32> = BUILT_AGAINST_VERSION.split('.').map(|part| part.parse().unwrap_or(u32::MAX)).collect();
        assert_eq!(&built[..2], &[major, minor], "pkg-config said UCX {BUILT_AGAINST_VERSION}, the loaded library is {runtime}");
        assert!(runtime.starts_with(&format!("{major}.{minor}.{release}")), "version string {runtime}");
    }

    #[test]
    fn pointer_status_helpers() {
        let err = UCS_ERR_NO_MEMORY as isize as *const u8;
        assert!(ucs_ptr_is_err(err));
        assert!(!ucs_ptr_is_ptr(err));
        assert_eq!(ucs_ptr_status(err), UCS_ERR_NO_MEMORY);
        assert!(!ucs_ptr_is_ptr(std::ptr::null::<u8>()));
        assert!(ucs_ptr_is_ptr(0x1000 as *const u8));
    }

    #[test]
    fn status_string_is_readable() {
        assert_eq!(status_string(UCS_OK), "Success");
    }
}
