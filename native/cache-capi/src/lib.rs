//! The C API (see ARCHITECTURE.md).
