//! Shared by the fuzz targets (included with `#[path]`, not a target itself).

use cranelift_codegen::ir::Function;

/// Run `f`, turning a panic into `None` without the panic hook of libfuzzer-sys (which
/// aborts). Only for Cranelift's own code: a panic in Mergelift must stay a crash.
fn isolated<R>(f: impl FnOnce() -> R) -> Option<R> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.ok()
}

/// Does `text` name an entity with a number of 7 digits or more (`v99999999`, `ss1234567`)?
/// cranelift-reader allocates entities densely, so one such name costs gigabytes (issue 13,
/// finding 5): that is the reader's limit, which the CLI has to check for before parsing.
pub fn has_absurd_entity_number(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|tok| {
            let digits = tok.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            digits.len() < tok.len()
                && digits.len() >= 7
                && digits.bytes().all(|b| b.is_ascii_digit())
        })
}

/// Parse CLIF with cranelift-reader (unless it names absurd entity numbers), and keep it only
/// if Cranelift's verifier accepts every function. Both panic on some malformed input: the
/// reader on a dynamic type whose base is not a vector (`dt0 = i8*gv0`), the verifier on a
/// `vmctx` global value in a function without blocks (`function %f() { gv0 = vmctx }`). Those
/// panics are Cranelift's, not Mergelift's, so here they count as rejected input (the CLI must
/// isolate them and report an input error).
pub fn parse_verified_clif(text: &str) -> Option<Vec<Function>> {
    if has_absurd_entity_number(text) {
        return None;
    }
    let funcs = isolated(|| cranelift_reader::parse_functions(text))?.ok()?;
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    let ok = isolated(|| {
        funcs
            .iter()
            .all(|f| cranelift_codegen::verifier::verify_function(f, &flags).is_ok())
    })?;
    ok.then_some(funcs)
}
