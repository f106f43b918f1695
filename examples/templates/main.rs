//! A template-heavy JIT runtime (`runtime.rs`: generic collection routines monomorphised over
//! element types, in several crates), compiled twice in two batches: with plain cranelift-jit,
//! and with the same code wrapped in `MergeModule`. It checks that both give the same results,
//! and prints how many functions merged and the time and code saved, and how long the
//! compiled instances take to run (the run phase: scans and sorts over a few thousand
//! elements); then does the same for object files (plain `ObjectModule` against
//! `MergeModule<ObjectModule>`).
//!
//! `cargo run --release --example templates [-- ROUNDS]` (default 7: the figures are the
//! fastest of that many interleaved runs). `TEMPLATES_PASSES=merge,merge-similar,merge-aligned`
//! gives `MergeModule` other passes than its default (`--passes` of the CLI, the same names).

mod runtime;

use cranelift_codegen::ir::types;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use mergelift::{MergeConfig, MergeModule};
use runtime::{instances, Program, Template, ELEMS};
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

/// The run phase: every instance of `Sum`, `Max` and `CountGreater` over 4,096 elements and
/// of `Sort` over 256, twenty times. Returns the time and a checksum of the results.
fn run_phase(p: &Program, ptr: impl Fn(FuncId) -> *const u8) -> (Duration, u64) {
    const N: i64 = 4096;
    const SORTED: i64 = 256;
    // Small integers in every 8-byte word: read as any element type, a finite value.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let data: Vec<u64> = (0..N * 2)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1000
        })
        .collect();
    let mut scratch = data.clone();
    let base = data.as_ptr() as i64;
    let mut check = 0u64;
    let t = Instant::now();
    for _ in 0..20 {
        for e in ELEMS {
            let find = |t: Template| ptr(p.id(t, e.name).expect("instantiated"));
            // SAFETY: the signatures are those `runtime::signature` gives these templates at
            // this element type; every access stays within `N` elements of `data`.
            macro_rules! scans {
                ($t:ty, $bits:expr) => {{
                    let sum: extern "C" fn(i64, i64) -> $t =
                        std::mem::transmute(find(Template::Sum));
                    let max: extern "C" fn(i64, i64) -> $t =
                        std::mem::transmute(find(Template::Max));
                    let count: extern "C" fn(i64, i64, $t) -> i64 =
                        std::mem::transmute(find(Template::CountGreater));
                    let bits = $bits;
                    let threshold = sum(base, 4);
                    bits(sum(base, N))
                        ^ bits(max(base, N)).rotate_left(17)
                        ^ (count(base, N, threshold) as u64).rotate_left(33)
                }};
            }
            check = check.rotate_left(5)
                ^ unsafe {
                    match e.ty {
                        types::I8 => scans!(i8, |v: i8| v as u64),
                        types::I16 => scans!(i16, |v: i16| v as u64),
                        types::I32 => scans!(i32, |v: i32| v as u64),
                        types::I64 => scans!(i64, |v: i64| v as u64),
                        types::F32 => scans!(f32, |v: f32| v.to_bits() as u64),
                        types::F64 => scans!(f64, |v: f64| v.to_bits()),
                        t => unreachable!("no element type {t}"),
                    }
                };
            scratch.copy_from_slice(&data);
            // SAFETY: as above.
            unsafe {
                let sort: extern "C" fn(i64, i64) = std::mem::transmute(find(Template::Sort));
                sort(scratch.as_mut_ptr() as i64, SORTED);
            }
            check = check.rotate_left(7)
                ^ scratch[..SORTED as usize]
                    .iter()
                    .fold(0u64, |h, &w| h.rotate_left(3) ^ w);
        }
    }
    (t.elapsed(), check)
}

/// The passes `TEMPLATES_PASSES` names, if it is set.
fn passes() -> Option<Vec<mergelift::PassKind>> {
    let list = std::env::var("TEMPLATES_PASSES")
        .ok()
        .filter(|l| !l.is_empty())?;
    Some(mergelift::parse_pass_list(&list).expect("TEMPLATES_PASSES is a pass list"))
}

struct Run {
    batch: [Duration; 2],
    /// Of each batch, the time to build and define the functions (the rest is finalizing).
    define: [Duration; 2],
    results: Vec<i64>,
    /// The run phase's time and checksum.
    run: (Duration, u64),
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
    let run = run_phase(&program, |id| ptr(&m, id));
    let functions = m.declarations().get_functions().count();
    (
        m,
        Run {
            batch,
            define,
            results,
            run,
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
    // The one line that differs (or, with other passes, `with_config`):
    let m = match passes() {
        None => MergeModule::new(jit()),
        Some(passes) => MergeModule::with_config(
            jit(),
            MergeConfig {
                passes,
                ..Default::default()
            },
        ),
    };
    let (m, mut r) = run(
        m,
        |m| m.finalize_definitions().unwrap(),
        |m, id| m.get_finalized_function(id),
    );
    r.merged = m.merges().count();
    if std::env::var("TEMPLATES_STATS").is_ok() {
        for (k, d) in m.stats().times() {
            eprintln!("  {k}: {:.3} ms", d.as_secs_f64() * 1e3);
        }
        for (k, v) in m.stats().counters_by_name() {
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
        let config = MergeConfig {
            passes: passes().unwrap_or(MergeConfig::default().passes),
            ..Default::default()
        };
        let mut m = MergeModule::with_config(ObjectModule::new(b), config);
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
        plain.run.0 = plain.run.0.min(p.run.0);
        merged.run.0 = merged.run.0.min(m.run.0);
    }
    assert_eq!(
        plain.results, merged.results,
        "MergeModule changed a result"
    );
    assert_eq!(
        plain.run.1, merged.run.1,
        "MergeModule changed a result of the run phase"
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
        "run phase: plain cranelift-jit {:.2} ms, MergeModule {:.2} ms ({:.3}x)",
        plain.run.0.as_secs_f64() * 1e3,
        merged.run.0.as_secs_f64() * 1e3,
        merged.run.0.as_secs_f64() / plain.run.0.as_secs_f64()
    );
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
