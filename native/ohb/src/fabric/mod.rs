//! `ohb fabric lat|bw|rate|all|mem`: the fabric against plain sockets and `ucx_perftest`, at the
//! Rust level or through the JVM bridge (`--jvm`).
//!
//! [`suite`] runs a test variant by variant ([`node`]: the fabric, [`socket`]: plain sockets,
//! [`perftest`]: `ucx_perftest`; [`jvm`]: the same through `jvm/ohb`), [`measure`] times one point,
//! [`result`] holds the figures in the JSON schema shared with the JVM bench, [`render`] prints
//! the table and checks the targets; [`mem`] is the memory test.

pub mod cli;
pub mod hosts;
pub mod jvm;
pub mod measure;
pub mod mem;
pub mod node;
pub mod perftest;
pub mod render;
pub mod result;
pub mod socket;
pub mod suite;
