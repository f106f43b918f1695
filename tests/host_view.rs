//! What a JIT host sees of `MergeModule` beyond the `Module` trait: disassembly in the
//! `on_compiled` hook, the escape hatches (`into_inner`, `get_address`) for merged functions,
//! the report of one flush, and the `log` events.

use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature};
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module, ModuleRelocTarget};
use mergelift::{Counter, MergeConfig, MergeModule, PassKind};
use std::sync::{Arc, Mutex};

fn jit() -> JITModule {
    let isa = cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(settings::builder()))
        .unwrap();
    JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()))
}

fn sig(m: &impl Module) -> Signature {
    let mut s = m.make_signature();
    s.params.push(AbiParam::new(types::I64));
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// Declare `name` and define it as `x * 3 + k`, with `disasm` asked of its context.
fn define(m: &mut impl Module, name: &str, linkage: Linkage, k: i64, disasm: bool) -> FuncId {
    let s = sig(m);
    let id = m.declare_function(name, linkage, &s).unwrap();
    define_with(m, id, k, disasm);
    id
}

/// Define `id` as `define` does.
fn define_as(m: &mut impl Module, id: FuncId, k: i64) {
    define_with(m, id, k, false)
}

fn define_with(m: &mut impl Module, id: FuncId, k: i64, disasm: bool) {
    let s = sig(m);
    let mut ctx = m.make_context();
    ctx.set_disasm(disasm);
    ctx.func.signature = s;
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    let y = b.ins().imul_imm_s(x, 3);
    let mut z = b.ins().iadd_imm_s(y, k);
    // Enough work for merge-similar to find sharing one body worth its thunks.
    for i in 0..12 {
        let t = b.ins().imul_imm_s(z, 5 + i);
        z = b.ins().bxor(t, x);
    }
    b.ins().return_(&[z]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx).unwrap();
}

fn call(p: *const u8, x: i64) -> i64 {
    // SAFETY: every function here is `(i64) -> i64` in the host's convention.
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(p) };
    f(x)
}

/// What each function computes, from the plain module.
fn plain_results(funcs: &[(&str, Linkage, i64)]) -> Vec<i64> {
    let mut m = jit();
    let ids: Vec<FuncId> = (funcs.iter())
        .map(|&(n, l, k)| define(&mut m, n, l, k, false))
        .collect();
    m.finalize_definitions().unwrap();
    ids.iter()
        .map(|&id| call(m.get_finalized_function(id), 7))
        .collect()
}

/// Two equal functions and two near-duplicates (merge-similar's shared body).
const FUNCS: [(&str, Linkage, i64); 4] = [
    ("a", Linkage::Export, 1),
    ("b", Linkage::Export, 1),
    ("c", Linkage::Export, 2),
    ("d", Linkage::Local, 3),
];

#[test]
fn disassembly_reaches_the_hook_when_the_host_asks_for_it() {
    for disasm in [false, true] {
        // (`merge` alone: `a` survives, compiled by Cranelift, as are `c` and `d`.)
        let config = MergeConfig::with_passes(&[PassKind::Merge]);
        let mut m = MergeModule::with_config(jit(), config);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        m.on_compiled(move |id, ctx| {
            let text = ctx.compiled_code().unwrap().vcode.clone();
            s.lock().unwrap().push((id, text));
        });
        for (n, l, k) in FUNCS {
            define(&mut m, n, l, k, disasm);
        }
        m.finalize_definitions().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        for (id, text) in seen.iter() {
            assert_eq!(text.is_some(), disasm, "{id}: {text:?}");
        }
    }
}

#[test]
fn into_inner_resolves_every_function_the_host_defined() {
    let want = plain_results(&FUNCS);
    let mut m = MergeModule::new(jit());
    let ids: Vec<FuncId> = (FUNCS.iter())
        .map(|&(n, l, k)| define(&mut m, n, l, k, false))
        .collect();
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
    let (mut inner, inner_id) = m.into_inner().unwrap();
    inner.finalize_definitions().unwrap();
    let got: Vec<i64> = (ids.iter())
        .map(|&id| call(inner.get_finalized_function(inner_id(id)), 7))
        .collect();
    assert_eq!(got, want);
    // The JIT's own name lookup resolves the merged function too.
    let b = inner.get_address(&ModuleRelocTarget::user(0, inner_id(ids[1]).as_u32()));
    assert_eq!(call(b, 7), want[1]);
}

/// A lazy JIT: `b`, defined after `a` was finalized and equal to it, merges by its print
/// (neither is ever lifted); the inner module handed back still resolves it.
#[test]
fn into_inner_resolves_a_function_merged_by_its_print() {
    let mut m = MergeModule::new(jit());
    let a = define(&mut m, "a", Linkage::Export, 1, false);
    m.finalize_definitions().unwrap();
    let b = define(&mut m, "b", Linkage::Export, 1, false);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(b), Some(a));
    assert_eq!(m.stats().get(Counter::MergeByPrint), 1);
    let want = call(m.get_finalized_function(a), 7);
    let (mut inner, inner_id) = m.into_inner().unwrap();
    inner.finalize_definitions().unwrap();
    assert_eq!(call(inner.get_finalized_function(inner_id(b)), 7), want);
}

#[test]
fn into_inner_maps_ids_shifted_by_a_shared_body() {
    let mut m = MergeModule::new(jit());
    for (n, l, k) in FUNCS {
        define(&mut m, n, l, k, false);
    }
    m.finalize_definitions().unwrap();
    assert!(
        m.stats().get(Counter::SimilarGroups) >= 1,
        "{:?}",
        m.stats()
    );
    // Declared after the shared body: the inner module numbers it one further.
    let e = define(&mut m, "e", Linkage::Export, 1, false);
    assert_eq!(e, FuncId::from_u32(4));
    assert_eq!(m.inner_id(e), FuncId::from_u32(5));
    m.finalize_definitions().unwrap();
    let want = call(m.get_finalized_function(e), 7);
    let (mut inner, inner_id) = m.into_inner().unwrap();
    inner.finalize_definitions().unwrap();
    assert_eq!(inner_id(e), FuncId::from_u32(5));
    assert_eq!(call(inner.get_finalized_function(inner_id(e)), 7), want);
}

#[test]
fn get_address_resolves_merged_functions() {
    let want = plain_results(&FUNCS);
    let mut m = MergeModule::new(jit());
    let ids: Vec<FuncId> = (FUNCS.iter())
        .map(|&(n, l, k)| define(&mut m, n, l, k, false))
        .collect();
    m.finalize_definitions().unwrap();
    assert!(m.merges().count() >= 2, "{:?}", m.stats());
    for (&id, want) in ids.iter().zip(want) {
        let p = m.get_address(&ModuleRelocTarget::user(0, id.as_u32()));
        assert_eq!(p, m.get_finalized_function(id));
        assert_eq!(call(p, 7), want);
    }
}

#[test]
fn the_last_flush_reports_that_flush_alone() {
    let config = MergeConfig::with_passes(&[PassKind::Merge]);
    let mut m = MergeModule::with_config(jit(), config);
    let a = define(&mut m, "a", Linkage::Export, 1, false);
    let b = define(&mut m, "b", Linkage::Export, 1, false);
    m.finalize_definitions().unwrap();
    let r = m.last_flush();
    assert_eq!(r.defined, [a, b]);
    assert_eq!(r.merged, [b]);
    assert!(r.passed_through.is_empty() && r.failed.is_empty());
    assert_eq!(r.stats.get(Counter::Compiled), 1);
    assert_eq!(r.stats.get(Counter::Merged), 1);
    // A second flush: one more copy, merged into what the first compiled.
    let c = define(&mut m, "c", Linkage::Export, 1, false);
    m.finalize_definitions().unwrap();
    let r = m.last_flush();
    assert_eq!((&r.defined[..], &r.merged[..]), (&[c][..], &[c][..]));
    assert_eq!(r.stats.get(Counter::Compiled), 0);
    assert_eq!(m.stats().get(Counter::Merged), 2);
    // A flush with nothing to do leaves the report as it was.
    m.finalize_definitions().unwrap();
    assert_eq!(m.last_flush().defined, [c]);
}

/// Collects every `log` record.
struct Collect(Mutex<Vec<(log::Level, String)>>);

impl log::Log for Collect {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, r: &log::Record) {
        self.0
            .lock()
            .unwrap()
            .push((r.level(), r.args().to_string()));
    }
    fn flush(&self) {}
}

static LOG: Collect = Collect(Mutex::new(Vec::new()));

#[test]
fn each_merge_and_each_flush_is_logged() {
    log::set_logger(&LOG).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let config = MergeConfig::with_passes(&[PassKind::Merge]);
    let mut m = MergeModule::with_config(jit(), config);
    define(&mut m, "a", Linkage::Export, 1, false);
    define(&mut m, "b", Linkage::Export, 1, false);
    m.finalize_definitions().unwrap();
    let log = LOG.0.lock().unwrap();
    let debug: Vec<&str> = (log.iter())
        .filter(|(l, _)| *l == log::Level::Debug)
        .map(|(_, t)| t.as_str())
        .filter(|t| t.starts_with("mergelift:"))
        .collect();
    assert!(
        debug.contains(&"mergelift: b merged into a (Aliased, by exact)"),
        "{debug:?}"
    );
    assert!(
        debug
            .iter()
            .any(|t| t.starts_with("mergelift: flush of 2 functions: 1 merged")),
        "{debug:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The host's ids are the plain module's.

/// Everything the host can read of a module's declarations, as text.
fn declarations(m: &impl Module) -> Vec<String> {
    let d = m.declarations();
    let mut out: Vec<String> = (d.get_functions())
        .map(|(id, f)| format!("{id}:{}:{:?}", f.linkage_name(id), f.linkage))
        .collect();
    out.extend(
        (d.get_data_objects())
            .map(|(id, o)| format!("{id}:{}:{:?}", o.linkage_name(id), o.linkage)),
    );
    for name in ["a", "c", "e", "v", "nothing"] {
        out.push(format!("{name} -> {:?}", m.get_name(name)));
    }
    out
}

/// Declare and define in two batches (`flush` between them), as a lazy JIT does: four
/// functions, two near-duplicates among them (a shared body after the flush), then a new
/// function, an anonymous one and a data object holding the address of a function merged
/// away (a late thunk at the next flush). Returns the ids and declarations seen on the way.
fn two_batches<M: Module>(m: &mut M, flush: &mut dyn FnMut(&mut M)) -> Vec<String> {
    let mut log = Vec::new();
    let ids: Vec<FuncId> = (FUNCS.iter())
        .map(|&(n, l, k)| define(m, n, l, k, false))
        .collect();
    log.push(format!("{ids:?}"));
    flush(m);
    let e = define(m, "e", Linkage::Export, 9, false);
    let s = sig(m);
    let anon = m.declare_anonymous_function(&s).unwrap();
    define_as(m, anon, 11);
    let v = m.declare_data("v", Linkage::Export, false, false).unwrap();
    let mut data = cranelift_module::DataDescription::new();
    data.define_zeroinit(8);
    let r = m.declare_func_in_data(ids[3], &mut data);
    data.write_function_addr(0, r);
    m.define_data(v, &data).unwrap();
    log.push(format!("{e} {anon} {v}"));
    log.extend(declarations(m));
    flush(m);
    log.extend(declarations(m));
    log
}

#[test]
fn ids_and_declarations_are_the_plain_modules() {
    let plain = two_batches(&mut jit(), &mut |_| {});
    // (`fetch_locals` off: the local `d`, folded into the shared body, has no code until
    // the data object takes its address: a late thunk.)
    let config = MergeConfig {
        fetch_locals: false,
        ..Default::default()
    };
    let mut m = MergeModule::with_config(jit(), config);
    let merged = two_batches(&mut m, &mut |m| m.flush().unwrap());
    assert!(
        m.stats().get(Counter::SimilarGroups) >= 1,
        "{:?}",
        m.stats()
    );
    assert!(m.stats().get(Counter::LateThunks) >= 1, "{:?}", m.stats());
    assert_eq!(merged, plain);
    // Merged functions name the host's functions, or say they use a shared body.
    let ids: Vec<FuncId> = (0..4).map(FuncId::from_u32).collect();
    assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
    let folded: Vec<FuncId> = ids
        .iter()
        .copied()
        .filter(|&g| m.in_shared_body(g))
        .collect();
    assert!(!folded.is_empty());
    for (g, survivor, _) in m.merges() {
        assert!(survivor.is_some() != m.in_shared_body(g), "{g}");
        if let Some(s) = survivor {
            assert!(
                s.as_u32() < 6,
                "{g} merged into {s}, which the host never declared"
            );
        }
    }
    // Every function runs as the plain module's.
    m.finalize_definitions().unwrap();
    let mut p = jit();
    let mut plain_ids: Vec<FuncId> = (FUNCS.iter())
        .map(|&(n, l, k)| define(&mut p, n, l, k, false))
        .collect();
    plain_ids.push(define(&mut p, "e", Linkage::Export, 9, false));
    p.finalize_definitions().unwrap();
    for (i, &id) in plain_ids.iter().enumerate() {
        let want = call(p.get_finalized_function(id), 7);
        assert_eq!(call(m.get_finalized_function(id), 7), want, "{i}");
    }
}

#[test]
fn object_files_keep_the_plain_modules_ids() {
    use cranelift_object::{ObjectBuilder, ObjectModule};
    let object = || {
        let isa = cranelift_native::builder()
            .unwrap()
            .finish(settings::Flags::new(settings::builder()))
            .unwrap();
        ObjectModule::new(ObjectBuilder::new(isa, "t", default_libcall_names()).unwrap())
    };
    let mut plain = object();
    let plain_log = two_batches(&mut plain, &mut |_| {});
    let mut m = MergeModule::new(object());
    let log = two_batches(&mut m, &mut |m| m.flush().unwrap());
    assert!(
        m.stats().get(Counter::SimilarGroups) >= 1,
        "{:?}",
        m.stats()
    );
    assert_eq!(log, plain_log);
    let (p, q) = (plain.finish(), m.finish().unwrap());
    // The product's table of functions, by the host's ids: the same names. (An anonymous
    // function's local symbol is numbered as the inner module numbers it, `.LfnN`: README's
    // table of differences.)
    let names = |p: &cranelift_object::ObjectProduct| -> Vec<(FuncId, String)> {
        (p.functions.iter())
            .filter_map(|(id, s)| Some((id, p.object.symbol((*s)?.0).name.clone())))
            .map(|(id, n)| (id, String::from_utf8_lossy(&n).into_owned()))
            .map(|(id, n)| {
                (
                    id,
                    if n.starts_with(".Lfn") {
                        ".Lfn".into()
                    } else {
                        n
                    },
                )
            })
            .collect()
    };
    assert_eq!(names(&q), names(&p));
}

/// A module wrapped after it declared functions and data: the host's view starts from them.
#[test]
fn declarations_made_before_wrapping_stay() {
    let before = |m: &mut JITModule| {
        let s = sig(m);
        m.declare_function("early", Linkage::Import, &s).unwrap();
        m.declare_anonymous_function(&s).unwrap();
        m.declare_data("table", Linkage::Export, true, false)
            .unwrap();
    };
    let mut plain = jit();
    before(&mut plain);
    let plain_log = two_batches(&mut plain, &mut |_| {});
    let mut inner = jit();
    before(&mut inner);
    let mut m = MergeModule::new(inner);
    let log = two_batches(&mut m, &mut |m| m.flush().unwrap());
    assert!(
        m.stats().get(Counter::SimilarGroups) >= 1,
        "{:?}",
        m.stats()
    );
    assert_eq!(log, plain_log);
}
