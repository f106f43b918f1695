//! The mid-end's one error type.

/// The mid-end's one error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The LIR text does not parse.
    #[error("{0}")]
    Parse(#[from] crate::lir::ParseError),
    /// The verifier rejected the module after a pass (`PassManager::verify`).
    #[error("verifier errors after {after}:\n{errors}")]
    Verify {
        /// The name of the pass that ran last.
        after: String,
        /// What the verifier found, in the functions that pass may have changed.
        errors: crate::verifier::VerifierErrors,
    },
    /// A pass name that names no pass.
    #[error("unknown pass '{0}' (known: merge, merge-similar, merge-aligned, lvn, gvn, dce; or `none` alone)")]
    UnknownPass(String),
    /// A malformed pass list: empty, with an empty name, or with `none` beside other names.
    #[error("{0}")]
    PassList(String),
    /// Any other error, as its message.
    #[error("{0}")]
    Other(String),
}
