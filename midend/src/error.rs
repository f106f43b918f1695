//! The mid-end's one error type.

/// The mid-end's one error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Parse(#[from] crate::lir::ParseError),
    #[error("verifier errors after {after}:\n{errors}")]
    Verify {
        after: String,
        errors: crate::verifier::VerifierErrors,
    },
    #[error("unknown pass '{0}' (known: merge, merge-similar, lvn, gvn, dce; or `none` alone)")]
    UnknownPass(String),
    #[error("{0}")]
    PassList(String),
    #[error("{0}")]
    Other(String),
}
