//! Mergelift: a mid-end optimizer for Cranelift. Functions built with cranelift-frontend (or
//! parsed from `.clif`) are lifted into LIR, merged (LLVM's MergeFunctions design),
//! value-numbered, and compiled by the Cranelift module you already use.
//!
//! This facade re-exports the two crates: [`midend`] (the optimizer, no Cranelift codegen
//! dependency) and [`jit_driver`] (the bridge: lift, lower, the `MergeModule` wrapper).

pub use jit_driver;
pub use midend;

pub use jit_driver::{
    define_by_name, host_isa, AddressPolicy, MergeConfig, MergeModule, OptLevel, Threads,
};
#[cfg(feature = "jit")]
pub use jit_driver::{JitModule, Pipeline, PipelineOptions};
pub use midend::lir;
pub use midend::lir::MergeKind;
pub use midend::{PassKind, Stats};
