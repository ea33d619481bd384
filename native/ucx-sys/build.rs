//! Generates bindings against the UCX installed on this machine (found by pkg-config).
//! Nothing is vendored or downloaded: the library we link is the library we run with.
use std::{env, path::PathBuf};

fn main() {
    let ucx = pkg_config::Config::new()
        .atleast_version("1.13")
        .probe("ucx")
        .expect("UCX >= 1.13 not found by pkg-config: install libucx-dev (the Makefile does)");
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
