//! Mergelift's bridge between Cranelift and the mid-end: lift `ir::Function`s into LIR, lower
//! LIR back to Cranelift IR, JIT-compile modules with cranelift-jit, and run Cranelift's
//! `.clif` run tests through the whole pipeline.

pub mod lift;
pub mod lower;
pub mod opmap;

pub use lift::{lift_function, mark_address_taken};
pub use lower::{clif_signature, lower_function, lower_function_with, NameResolver, OriginalNames};

/// The bridge's one error type. Every variant names the function, and the instruction when
/// there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("lift: function {function}{}: {msg}", inst.as_ref().map(|i| format!(", `{i}`")).unwrap_or_default())]
    Lift {
        function: String,
        inst: Option<String>,
        msg: String,
    },
    #[error("lower: function {function}{}: {msg}", inst.as_ref().map(|i| format!(", `{i}`")).unwrap_or_default())]
    Lower {
        function: String,
        inst: Option<String>,
        msg: String,
    },
    #[error("{0}")]
    Midend(#[from] midend::Error),
    #[error("{0}")]
    Other(String),
}

#[cfg(feature = "jit")]
mod exn;
#[cfg(feature = "jit")]
pub mod jit;
#[cfg(feature = "jit")]
pub mod pipeline;

#[cfg(feature = "jit")]
pub use jit::{compile_module, host_isa, CompiledModule, OptLevel};
#[cfg(feature = "jit")]
pub use pipeline::{lift_functions, JitModule, Pipeline, PipelineOptions};
