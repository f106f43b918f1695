//! The errors of a flush: [`FunctionError`] names every function that failed to compile, with
//! what the plain module would have said; and the helpers that turn Cranelift's verifier
//! findings and caught panics into text.

use super::Core;
use cranelift_codegen::ir;
use cranelift_codegen::CodegenError;
use cranelift_module::{FuncId, Module, ModuleError};

pub(super) fn backend(msg: String) -> ModuleError {
    ModuleError::Backend(anyhow::anyhow!(msg))
}

/// The functions of a flush that failed to compile (after `define_function` returned `Ok`):
/// every failure that shows at `finalize_definitions`, `finish` or `flush` is a
/// `ModuleError::Backend` holding one, whatever the build profile:
///
/// ```
/// # use cranelift_module::ModuleError;
/// # fn report(e: ModuleError) {
/// if let ModuleError::Backend(b) = &e {
///     if let Some(f) = b.downcast_ref::<mergelift::FunctionError>() {
///         for failed in &f.failures {
///             eprintln!("{} ({}): {}", failed.function, failed.id, failed.error);
///         }
///     }
/// }
/// # }
/// ```
///
/// The other functions of the batch were compiled; the failed ones are undefined again and
/// can be defined anew.
#[derive(Debug)]
pub struct FunctionError {
    /// Each function that failed, in the order they were compiled.
    pub failures: Vec<FailedFunction>,
}

/// One function that failed to compile.
#[derive(Debug)]
pub struct FailedFunction {
    /// Its id in the module.
    pub id: FuncId,
    /// Its name (`linkage_name`).
    pub function: String,
    /// What the inner module or Cranelift said: what the plain module would have returned
    /// from `define_function` (a Cranelift panic becomes `ModuleError::Backend`).
    pub error: ModuleError,
    /// The error as text, with verifier findings shown against the function's instructions.
    pub(super) detail: String,
}

impl FunctionError {
    /// Every function of `batch` failed with `e` (a fault of Mergelift's own).
    pub(super) fn of_batch(
        inner: &dyn Module,
        batch: &[(FuncId, ir::Function)],
        e: ModuleError,
    ) -> Self {
        let detail = error_text(&e, None);
        FunctionError {
            failures: batch
                .iter()
                .map(|(id, _)| FailedFunction {
                    id: *id,
                    function: Core::name(inner, *id),
                    error: backend(detail.clone()),
                    detail: detail.clone(),
                })
                .collect(),
        }
    }

    /// `e`, said of function `id`, named `name` (whose IR `func` shows where, if given).
    pub(crate) fn one(
        id: FuncId,
        name: String,
        e: ModuleError,
        func: Option<&ir::Function>,
    ) -> Self {
        let detail = error_text(&e, func);
        FunctionError {
            failures: vec![FailedFunction {
                id,
                function: name,
                error: e,
                detail,
            }],
        }
    }
}

impl std::fmt::Display for FailedFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "function {}: {}", self.function, self.detail)
    }
}

impl std::fmt::Display for FunctionError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match &self.failures[..] {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} functions failed to compile", all.len())?;
                for one in all {
                    write!(f, "\n{one}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FunctionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.failures
            .first()
            .map(|f| &f.error as &(dyn std::error::Error + 'static))
    }
}

impl From<FunctionError> for ModuleError {
    fn from(e: FunctionError) -> Self {
        ModuleError::Backend(anyhow::Error::new(e))
    }
}

/// A module error as text, with the verifier's findings spelled out (against `func` when
/// given, so they show the instructions).
pub(crate) fn error_text(e: &ModuleError, func: Option<&ir::Function>) -> String {
    match e {
        ModuleError::Compilation(CodegenError::Verifier(errs)) => match func {
            Some(f) => format!(
                "Cranelift's verifier rejects it:\n{}",
                cranelift_codegen::print_errors::pretty_verifier_error(f, None, errs.clone())
            ),
            None => format!("Cranelift's verifier rejects it: {errs}"),
        },
        // `Backend` shows its whole chain of causes.
        ModuleError::Backend(b) => format!("{b:#}"),
        other => other.to_string(),
    }
}

/// Why [`verify_caught`] failed.
#[derive(Debug)]
pub enum VerifyFailure {
    /// Cranelift's verifier found these faults.
    Rejected(cranelift_codegen::verifier::VerifierErrors),
    /// The verifier panicked (it does on some malformed input), with this message.
    Panicked(String),
}

/// Cranelift's verifier on `func`, with its panics caught.
pub fn verify_caught<'a>(
    func: &ir::Function,
    fisa: impl Into<cranelift_codegen::settings::FlagsOrIsa<'a>>,
) -> Result<(), VerifyFailure> {
    let fisa = fisa.into();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cranelift_codegen::verify_function(func, fisa)
    })) {
        Ok(r) => r.map_err(VerifyFailure::Rejected),
        Err(p) => Err(VerifyFailure::Panicked(panic_text(&p))),
    }
}

/// The message of a caught panic.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}
