//! Helpers the integration tests and benchmarks share.

pub mod jit;
