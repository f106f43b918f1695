//! Mergelift: a mid-end optimizer for Cranelift. Functions built with cranelift-frontend (or
//! parsed from `.clif`) are lifted into LIR, merged (LLVM's MergeFunctions design),
//! value-numbered, lowered back to Cranelift IR and JIT-compiled.
//!
//! This facade re-exports the two crates: [`midend`] (the optimizer, no Cranelift codegen
//! dependency) and [`jit_driver`] (the bridge: lift, lower, JIT, run tests).

pub use jit_driver;
pub use midend;

pub use jit_driver::{JitModule, OptLevel, Pipeline, PipelineOptions};
pub use midend::lir;
