//! Parse arbitrary text as CLIF; whatever Cranelift's verifier accepts must lift into a LIR
//! module that passes the LIR verifier (or be rejected with an error, never a panic).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|text: &str| {
    let Some(funcs) = common::parse_verified_clif(text) else {
        return;
    };
    let mut stats = midend::Stats::default();
    let Ok(m) = jit_driver::lift_functions(funcs.iter(), &mut stats) else {
        return;
    };
    if let Err(e) = midend::verifier::verify_module(&m, true) {
        panic!("lifted module fails the LIR verifier: {e:?}\n{m}");
    }
});
