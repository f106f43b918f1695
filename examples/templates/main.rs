//! A template-heavy JIT runtime (`runtime.rs`: generic collection routines monomorphised over
//! element types, in several crates), compiled twice in two batches: with plain cranelift-jit,
//! and with the same code wrapped in `MergeModule`. It checks that both give the same results,
//! and prints how many functions merged and the time and code saved; then does the same for
//! object files (plain `ObjectModule` against `MergeModule<ObjectModule>`).
//!
//! `cargo run --release --example templates [-- ROUNDS]` (default 7: the figures are the
//! fastest of that many interleaved runs)

mod runtime;

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use mergelift::MergeModule;
use runtime::{instances, Program, Template};
use std::time::{Duration, Instant};

fn isa() -> cranelift_codegen::isa::OwnedTargetIsa {
    let mut flags = settings::builder();
    flags.set("opt_level", "none").unwrap();
    cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(flags))
        .unwrap()
}

fn jit() -> JITModule {
    JITModule::new(JITBuilder::with_isa(isa(), default_libcall_names()))
}

/// Call `sum`, `max`, `sort` + `binary_search` of a few instances and collect the results.
fn exercise(p: &Program, ptr: impl Fn(FuncId) -> *const u8) -> Vec<i64> {
    let find = |t: Template, e: &str| ptr(p.id(t, e).expect("instantiated"));
    let mut out = Vec::new();
    // SAFETY: the signatures are those `runtime::signature` gives these templates.
    unsafe {
        let mut xs: Vec<i32> = vec![5, -3, 9, 1, -8, 7, 2];
        let sum: extern "C" fn(*const i32, i64) -> i32 =
            std::mem::transmute(find(Template::Sum, "i32"));
        out.push(sum(xs.as_ptr(), xs.len() as i64) as i64);
        let max_u: extern "C" fn(*const i32, i64) -> i32 =
            std::mem::transmute(find(Template::Max, "u32"));
        out.push(max_u(xs.as_ptr(), xs.len() as i64) as i64);
        let max_i: extern "C" fn(*const i32, i64) -> i32 =
            std::mem::transmute(find(Template::Max, "i32"));
        out.push(max_i(xs.as_ptr(), xs.len() as i64) as i64);
        let sort: extern "C" fn(*mut i32, i64) = std::mem::transmute(find(Template::Sort, "i32"));
        sort(xs.as_mut_ptr(), xs.len() as i64);
        out.extend(xs.iter().map(|&x| x as i64));
        let bs: extern "C" fn(*const i32, i64, i64, i32) -> i64 =
            std::mem::transmute(find(Template::BinarySearch, "i32"));
        out.push(bs(xs.as_ptr(), 0, xs.len() as i64, 7));
        let mut fs: Vec<f64> = vec![0.5, -2.0, 8.25];
        let fsum: extern "C" fn(*const f64, i64) -> f64 =
            std::mem::transmute(find(Template::Sum, "f64"));
        out.push(fsum(fs.as_ptr(), 3) as i64);
        let fsort: extern "C" fn(*mut f64, i64) = std::mem::transmute(find(Template::Sort, "f64"));
        fsort(fs.as_mut_ptr(), 3);
        out.extend(fs.iter().map(|&x| x as i64));
        // Points {x, y}: the largest y.
        let pts: Vec<f64> = vec![1.0, 4.0, 2.0, -1.0, 3.0, 9.5];
        let maxy: extern "C" fn(*const f64, i64) -> f64 =
            std::mem::transmute(find(Template::Max, "Point.y"));
        out.push(maxy(pts.as_ptr(), 3) as i64);
    }
    out
}

struct Run {
    batch: [Duration; 2],
    /// Of each batch, the time to build and define the functions (the rest is finalizing).
    define: [Duration; 2],
    results: Vec<i64>,
    functions: usize,
    merged: usize,
    code_bytes: usize,
}

/// Load the two crates into `m`, finalizing after each; `finalize` finalizes, `ptr` gives a
/// function's code.
fn run<M: Module>(
    mut m: M,
    finalize: impl Fn(&mut M),
    ptr: impl Fn(&M, FuncId) -> *const u8,
) -> (M, Run) {
    let mut program = Program::default();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    let mut batch = [Duration::ZERO; 2];
    let mut define = [Duration::ZERO; 2];
    let mut code_bytes = 0;
    for k in 0..2 {
        let t = Instant::now();
        code_bytes += program
            .instantiate(&mut m, &instances(k as u32), &mut fctx)
            .unwrap();
        define[k] = t.elapsed();
        finalize(&mut m);
        batch[k] = t.elapsed();
    }
    let results = exercise(&program, |id| ptr(&m, id));
    let functions = m.declarations().get_functions().count();
    (
        m,
        Run {
            batch,
            define,
            results,
            functions,
            merged: 0,
            code_bytes,
        },
    )
}

fn run_plain() -> Run {
    let (m, r) = run(
        jit(),
        |m| m.finalize_definitions().unwrap(),
        |m, id| m.get_finalized_function(id),
    );
    // SAFETY: no function runs any more.
    unsafe { m.free_memory() };
    r
}

fn run_merged() -> Run {
    // The one line that differs:
    let m = MergeModule::new(jit());
    let (m, mut r) = run(
        m,
        |m| m.finalize_definitions().unwrap(),
        |m, id| m.get_finalized_function(id),
    );
    r.merged = m.merges().count();
    if std::env::var("TEMPLATES_STATS").is_ok() {
        for (k, d) in &m.stats().times {
            eprintln!("  {k}: {:.3} ms", d.as_secs_f64() * 1e3);
        }
        for (k, v) in &m.stats().counters {
            eprintln!("  {k}: {v}");
        }
    }
    r.code_bytes = m.total_code_bytes();
    // SAFETY: no function runs any more.
    unsafe { m.free_memory() };
    r
}

fn object_bytes(merge: bool) -> usize {
    let b = ObjectBuilder::new(isa(), "templates", default_libcall_names()).unwrap();
    let mut program = Program::default();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    if merge {
        let mut m = MergeModule::new(ObjectModule::new(b));
        for k in 0..2 {
            program
                .instantiate(&mut m, &instances(k), &mut fctx)
                .unwrap();
        }
        m.finish().unwrap().emit().unwrap().len()
    } else {
        let mut m = ObjectModule::new(b);
        for k in 0..2 {
            program
                .instantiate(&mut m, &instances(k), &mut fctx)
                .unwrap();
        }
        m.finish().emit().unwrap().len()
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("ROUNDS is a number"))
        .unwrap_or(7);
    // Interleaved, best of several: a slow moment of the machine favours neither side.
    let (mut plain, mut merged) = (run_plain(), run_merged());
    for _ in 1..rounds {
        let p = run_plain();
        let m = run_merged();
        for k in 0..2 {
            plain.batch[k] = plain.batch[k].min(p.batch[k]);
            merged.batch[k] = merged.batch[k].min(m.batch[k]);
            merged.define[k] = merged.define[k].min(m.define[k]);
        }
    }
    assert_eq!(
        plain.results, merged.results,
        "MergeModule changed a result"
    );
    println!(
        "{} functions in two crates, loaded in two batches; same results from both",
        plain.functions
    );
    println!(
        "merged: {} functions ({:.0}%), no code of their own",
        merged.merged,
        100.0 * merged.merged as f64 / plain.functions as f64
    );
    for k in 0..2 {
        let (p, m) = (plain.batch[k], merged.batch[k]);
        println!(
            "batch {}: plain cranelift-jit {:.2} ms, MergeModule {:.2} ms ({:.2}x; building \
             the IR takes {:.2} ms of each)",
            k + 1,
            p.as_secs_f64() * 1e3,
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / p.as_secs_f64(),
            merged.define[k].as_secs_f64() * 1e3
        );
    }
    println!(
        "code: plain {} bytes, MergeModule {} bytes ({:.2}x)",
        plain.code_bytes,
        merged.code_bytes,
        merged.code_bytes as f64 / plain.code_bytes as f64
    );
    let (po, mo) = (object_bytes(false), object_bytes(true));
    println!(
        "object file: plain ObjectModule {po} bytes, MergeModule<ObjectModule> {mo} bytes ({:.2}x)",
        mo as f64 / po as f64
    );
}
