//! The cache's store (see ARCHITECTURE.md).
