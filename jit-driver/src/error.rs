//! The bridge's one error type.

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

impl From<cranelift_module::ModuleError> for Error {
    fn from(e: cranelift_module::ModuleError) -> Self {
        Error::Module(Box::new(e))
    }
}
