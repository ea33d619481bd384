//! The cache client (see ARCHITECTURE.md).
