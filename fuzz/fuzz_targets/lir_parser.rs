//! Parse arbitrary UTF-8 as LIR; whatever parses must print, reparse, and print the same.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(m) = midend::lir::parse_module(text) else {
        return;
    };
    let printed = midend::lir::module_to_string(&m);
    let m2 = midend::lir::parse_module(&printed)
        .unwrap_or_else(|e| panic!("printed module does not reparse: {e:?}\n{printed}"));
    let printed2 = midend::lir::module_to_string(&m2);
    assert_eq!(printed, printed2, "print is not a fixed point");
});
