//! Mergelift's mid-end: the LIR (seed 002), its analyses, and the passes that run over it
//! (MergeFunctions, local and global value numbering, dead-code removal). It does not depend
//! on Cranelift's code generator: `jit-driver` is the bridge.

pub mod analysis;
pub mod hash;
pub mod lir;
pub mod mem;
pub mod pass;
pub mod passes;

pub use pass::{parse_pass_list, Counters, Pass, PassManager, Stats};
pub use passes::{PassKind, PassOptions};

/// The mid-end's one error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Parse(#[from] lir::ParseError),
    #[error("verifier errors after {after}:\n{errors}")]
    Verify {
        after: String,
        errors: lir::VerifierErrors,
    },
    #[error("unknown pass '{0}' (known: merge, merge-similar, lvn, gvn, dce; or `none` alone)")]
    UnknownPass(String),
    #[error("{0}")]
    PassList(String),
    #[error("{0}")]
    Other(String),
}
