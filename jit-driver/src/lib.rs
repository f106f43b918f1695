//! Mergelift's bridge between Cranelift and the mid-end: lift `ir::Function`s into LIR, lower
//! LIR back to Cranelift IR, and wrap any `cranelift_module::Module` so that what is defined in
//! it is merged before it is compiled (`MergeModule`, for cranelift-jit and cranelift-object).

// `ModuleResult` is cranelift-module's own type, large as it is: the wrapper returns what
// `JITModule` and `ObjectModule` return.
#![allow(clippy::result_large_err)]
#![deny(missing_docs)]

mod error;
pub mod lift;
pub mod lower;
pub mod module;
#[doc(hidden)]
pub mod opmap;

pub use lift::{lift_function, lift_function_with, mark_taken, LiftContext};
pub use lower::{lower_function, lower_function_with, LowerContext, NameResolver, OriginalNames};
pub use module::{
    AddressPolicy, FailedFunction, FlushReport, FunctionError, MergeConfig, MergeModule, Threads,
};
#[doc(hidden)]
pub use module::{DebugOptions, StageHook};

pub mod isa;
#[cfg(feature = "jit")]
mod jit_runtime;
pub mod link;

pub use error::Error;
pub use isa::{host_isa, OptLevel};
#[cfg(feature = "jit")]
pub use jit_runtime::jit_builder;
pub use lift::lift_functions;
pub use link::{declare_by_name, define_by_name};
