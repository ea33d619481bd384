//! Generates bindings against the UCX installed on this machine (found by pkg-config).
//! Nothing is vendored or downloaded: the library we link is the library we run with.
//!
//! Another UCX (a cluster's HPC-X/MOFED build, or the 1.22 wheel `make ucx-1.22` unpacks) is chosen
//! the way pkg-config chooses: `PKG_CONFIG_PATH=<ucx>/lib/pkgconfig`. Headers and the link path then
//! come from that UCX; at run time the dynamic linker must find the same libraries (an rpath via
//! `RUSTFLAGS=-Clink-arg=-Wl,-rpath,<ucx>/lib`, or `LD_LIBRARY_PATH`). The version pkg-config reports
//! is recorded as `UCX_SYS_BUILT_VERSION`, so a test can check that the library loaded at run time
//! is the one the bindings were generated from.
use std::{env, path::PathBuf};

fn main() {
    let ucx = pkg_config::Config::new()
        .atleast_version("1.13")
        .probe("ucx")
        .expect("UCX >= 1.13 not found by pkg-config: install libucx-dev (the Makefile does)");
    // pkg-config's own search path decides which UCX we build against; a change must regenerate.
    for variable in ["PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR"] {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    println!("cargo:rustc-env=UCX_SYS_BUILT_VERSION={}", ucx.version);
    for path in &ucx.link_paths {
        println!("cargo:libdir={}", path.display());
    }
    // pkg-config's ucx.pc lists ucp, uct and ucs; make sure ucp and ucs are linked.
    for lib in ["ucp", "ucs"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .rust_edition(bindgen::RustEdition::Edition2021)
        .allowlist_function("ucp_.*")
        .allowlist_function("ucs_status_string")
        .allowlist_type("ucp_.*")
        .allowlist_type("ucs_.*")
        .allowlist_var("UCP_.*")
        .allowlist_var("UCS_.*")
        // The _nb / _nbi families are deprecated in newer UCX; keep them out of reach.
        .blocklist_function(".*_nb$")
        .blocklist_function(".*_nbi$")
        .blocklist_function("ucp_rkey_pack")
        .blocklist_function("ucp_worker_get_address")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for path in &ucx.include_paths {
        builder = builder.clang_arg(format!("-I{}", path.display()));
    }
    let bindings = builder.generate().expect("bindgen failed on ucp.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("writing bindings");
}
