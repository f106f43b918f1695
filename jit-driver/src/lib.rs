//! Mergelift's bridge between Cranelift and the mid-end: lift `ir::Function`s into LIR, lower
//! LIR back to Cranelift IR, and wrap any `cranelift_module::Module` so that what is defined in
//! it is merged before it is compiled (`MergeModule`, for cranelift-jit and cranelift-object).

// `ModuleResult` is cranelift-module's own type, large as it is: the wrapper returns what
// `JITModule` and `ObjectModule` return.
#![allow(clippy::result_large_err)]
#![deny(missing_docs)]

pub mod lift;
pub mod lower;
pub mod module;
pub mod opmap;

pub use lift::{lift_function, lift_function_with, mark_address_taken, mark_taken, LiftContext};
pub use lower::{
    clif_signature, lower_function, lower_function_with, LowerContext, NameResolver, OriginalNames,
};
pub use module::{AddressPolicy, FunctionError, MergeConfig, MergeModule, Threads};

/// The bridge's one error type. Every variant names the function, and the instruction when
/// there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Cranelift function LIR cannot represent (an unsupported type, instruction or
    /// construct).
    #[error("lift: function {function}{}: {msg}", inst.as_ref().map(|i| format!(", `{i}`")).unwrap_or_default())]
    Lift {
        /// The function's name.
        function: String,
        /// The instruction, as Cranelift prints it.
        inst: Option<String>,
        /// What is wrong.
        msg: String,
    },
    /// LIR that cannot be turned back into Cranelift IR.
    #[error("lower: function {function}{}: {msg}", inst.as_ref().map(|i| format!(", `{i}`")).unwrap_or_default())]
    Lower {
        /// The function's name.
        function: String,
        /// The instruction, as LIR prints it.
        inst: Option<String>,
        /// What is wrong.
        msg: String,
    },
    /// An error of the mid-end (a pass list, the LIR verifier).
    #[error("{0}")]
    Midend(#[from] midend::Error),
    /// An error of the Cranelift module, as it reported it.
    #[error("{0}")]
    Module(Box<cranelift_module::ModuleError>),
    /// Anything else, said in words.
    #[error("{0}")]
    Other(String),
}

pub mod isa;
#[cfg(feature = "jit")]
pub mod jit;
pub mod link;
#[cfg(feature = "jit")]
pub mod pipeline;

pub use isa::{host_isa, OptLevel};
pub use lift::lift_functions;
pub use link::{declare_by_name, define_by_name};
#[cfg(feature = "jit")]
pub use pipeline::{JitModule, Pipeline, PipelineOptions};

impl From<cranelift_module::ModuleError> for Error {
    fn from(e: cranelift_module::ModuleError) -> Self {
        Error::Module(Box::new(e))
    }
}
