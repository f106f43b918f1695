//! Parse arbitrary text as CLIF; whatever Cranelift's verifier accepts must lift into a LIR
//! module that passes the LIR verifier (or be rejected with an error, never a panic).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(funcs) = cranelift_reader::parse_functions(text) else {
        return;
    };
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    if funcs
        .iter()
        .any(|f| cranelift_codegen::verifier::verify_function(f, &flags).is_err())
    {
        return;
    }
    let mut stats = midend::Stats::default();
    let Ok(m) = jit_driver::lift_functions(funcs.iter(), &mut stats) else {
        return;
    };
    if let Err(e) = midend::lir::verify_module(&m, true) {
        panic!("lifted module fails the LIR verifier: {e:?}\n{m}");
    }
});
