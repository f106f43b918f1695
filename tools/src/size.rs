//! Code-size and compile-time measurement: compile every function with Cranelift as given
//! ("before"), then lift, run the passes, lower and compile again ("after"). Functions are
//! compiled without linking, so unresolved imports are fine.

use cranelift_codegen::ir;
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use jit_driver::jit::{code_size, host_isa, OptLevel};
use jit_driver::lower::{lower_function_with, OriginalNames};
use jit_driver::pipeline::lift_functions;
use jit_driver::Error;
use midend::lir::MergeKind;
use midend::{PassManager, Stats};
use std::time::Instant;

/// What `mergelift size` reports.
#[derive(Clone, Debug, Default)]
pub struct SizeReport {
    pub functions_in: usize,
    pub functions_out: usize,
    pub merged: usize,
    pub replaced: usize,
    pub aliased: usize,
    pub thunked: usize,
    pub clif_insts: usize,
    pub lir_insts_before: usize,
    pub lir_insts_after: usize,
    pub code_bytes_before: usize,
    pub code_bytes_after: usize,
    /// Phase wall times in ms: parse, compile_before, lift, each pass, lower, compile_after.
    pub time_ms: Vec<(String, f64)>,
    /// Functions that failed a phase: (phase, error).
    pub errors: Vec<(String, String)>,
}

impl SizeReport {
    pub fn to_json(&self) -> serde_json::Value {
        let mut time = serde_json::Map::new();
        for (k, v) in &self.time_ms {
            time.insert(k.clone(), serde_json::json!(v));
        }
        serde_json::json!({
            "functions_in": self.functions_in,
            "functions_out": self.functions_out,
            "merged": self.merged,
            "replaced": self.replaced,
            "aliased": self.aliased,
            "thunked": self.thunked,
            "clif_insts": self.clif_insts,
            "lir_insts_before": self.lir_insts_before,
            "lir_insts_after": self.lir_insts_after,
            "code_bytes_before": self.code_bytes_before,
            "code_bytes_after": self.code_bytes_after,
            "errors": self.errors.len(),
            "time_ms": time,
        })
    }
}

/// Measure `funcs` (already parsed; `parse_ms` is reported as the parse phase).
pub fn measure(
    funcs: &[ir::Function],
    passes: &str,
    opt: OptLevel,
    parse_ms: f64,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<SizeReport, Error> {
    let isa = host_isa(opt)?;
    let mut r = SizeReport {
        functions_in: funcs.len(),
        ..Default::default()
    };
    r.time_ms.push(("parse".into(), parse_ms));
    r.clif_insts = funcs.iter().map(|f| f.dfg.num_insts()).sum();
    let mut ctx = Context::new();
    let t = Instant::now();
    for (k, f) in funcs.iter().enumerate() {
        progress("compile_before", k, funcs.len());
        match code_size(f.clone(), &*isa, &mut ctx) {
            Ok(n) => r.code_bytes_before += n,
            Err(e) => r.errors.push(("compile_before".into(), e.to_string())),
        }
    }
    r.time_ms
        .push(("compile_before".into(), t.elapsed().as_secs_f64() * 1e3));

    let mut stats = Stats::default();
    let mut module = lift_functions(funcs.iter(), &mut stats)?;
    r.time_ms.push(("lift".into(), stats.time_ms("lift")));
    r.lir_insts_before = module.inst_count();
    let mut pm = PassManager::from_names(passes)?;
    pm.verify = false;
    pm.run(&mut module, &mut stats)?;
    for name in pm.names() {
        r.time_ms.push((name.to_string(), stats.time_ms(name)));
    }
    r.lir_insts_after = module.inst_count();
    r.functions_out = module.live_functions().count();
    r.merged = module.merges.len();
    r.replaced = module
        .merges
        .iter()
        .filter(|m| m.kind == MergeKind::Replaced)
        .count();
    r.aliased = module
        .merges
        .iter()
        .filter(|m| m.kind == MergeKind::Aliased)
        .count();
    r.thunked = module
        .merges
        .iter()
        .filter(|m| m.kind == MergeKind::Thunked)
        .count();

    let config = isa.frontend_config();
    let mut lowered = Vec::with_capacity(r.functions_out);
    let mut fctx = FunctionBuilderContext::new();
    let t = Instant::now();
    for (_, f) in module.live_functions() {
        match lower_function_with(&module, f, &mut OriginalNames, config, &mut fctx) {
            Ok(func) => lowered.push(func),
            Err(e) => r.errors.push(("lower".into(), e.to_string())),
        }
    }
    r.time_ms
        .push(("lower".into(), t.elapsed().as_secs_f64() * 1e3));
    let t = Instant::now();
    let n = lowered.len();
    for (k, func) in lowered.into_iter().enumerate() {
        progress("compile_after", k, n);
        match code_size(func, &*isa, &mut ctx) {
            Ok(n) => r.code_bytes_after += n,
            Err(e) => r.errors.push(("compile_after".into(), e.to_string())),
        }
    }
    r.time_ms
        .push(("compile_after".into(), t.elapsed().as_secs_f64() * 1e3));
    Ok(r)
}
