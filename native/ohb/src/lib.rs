//! # ohb: Slipstream's micro-benchmark suite
//!
//! Named after OSU's OHB and shaped like `ucx_perftest`: a library with a table of tests
//! ([`usage::TESTS`]) and a CLI (`ohb`). Each fabric test measures, side by side in one run, the
//! fabric with default transports, the fabric forced to TCP, plain sockets in the same language, and
//! `ucx_perftest` as the raw-UCX reference; it prints a table with ratio columns and writes JSON.
//!
//! Layout: one folder per suite (`fabric/`, `cache/` for `ohb mem ...`, `spark/`, `mapreduce/`), each with its
//! own `cli.rs` (flags to runs) and `render.rs` (tables, targets, JSON), over shared modules:
//! [`args`] (flags), [`child`] (child processes), [`machine`] (what ran it), [`stats`]
//! (order statistics), [`progress`] (stderr lines), [`table`] (number formats, target checks),
//! [`output`] (JSON files) and [`proc_mem`] (/proc). A new suite is a new folder with a `cli.rs`
//! and one line in `main.rs` and [`usage`](mod@usage).
//!
//! Process model: every measured server runs in its own process (`ohb __serve ...`, bound to
//! 127.0.0.1); the measuring client runs in `ohb` itself, one variant at a time, so at most one
//! client and one server compete for the CPUs. Children die with `ohb` (see [`child`]).
//!
//! Architecture invariant: ohb uses only the fabric's public API, exactly as an application would;
//! it measures and reports. Engines above the fabric it meets only as their users do: the cache
//! through its protocols, Spark through an application (`jvm/ohb-spark`) and its configuration.
//! Architecture invariant: suites do not use each other, only the shared modules (the cache and
//! Spark suites share nothing with `fabric/` but its progress lines' format).

pub mod args;
pub mod cache;
pub mod child;
pub mod fabric;
pub mod hdfs;
pub mod machine;
pub mod mapreduce;
pub mod output;
pub mod proc_mem;
pub mod progress;
pub mod report;
pub mod rpc;
pub mod hbase;
pub mod spark;
pub mod stats;
pub mod table;
pub mod tool_jvm;
pub mod usage;

pub use usage::usage;
