//! Shared set-up of the benches: generated template-heavy modules, parsed and lifted.

#![allow(dead_code)]

use cranelift_codegen::ir;
use mergelift::passes::lir;
use mergelift_tools::gen::{generate, GenOptions};

/// A generated module as Cranelift functions.
pub fn generated_functions(functions: usize, dup_ratio: f64) -> Vec<ir::Function> {
    let out = generate(&GenOptions {
        functions,
        dup_ratio,
        near_ratio: 0.1_f64.min(1.0 - dup_ratio),
        edit_ratio: 0.0,
        seed: 1,
    });
    cranelift_reader::parse_functions(&out.text).expect("generated CLIF parses")
}

/// The same, lifted into LIR.
pub fn generated_module(functions: usize, dup_ratio: f64) -> lir::Module {
    let funcs = generated_functions(functions, dup_ratio);
    jit_driver::lift_functions(funcs.iter(), &mut midend::Stats::default()).expect("lifts")
}

/// Modules of the wasm corpus, when it is there.
pub fn wasm_corpus() -> Vec<(String, Vec<ir::Function>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/wasm");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!(
            "no wasm corpus at {}: corpus benches skipped",
            dir.display()
        );
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<ir::Function>)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                cranelift_reader::parse_functions(&text).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
