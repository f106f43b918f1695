//! Tests of `Core::flush`, one per stage: lift, passes, merge records, compile, freeze.
//! Each test runs the stages before its own by hand, as `flush` does, and checks what its
//! stage leaves behind.

use super::lift::Lifted;
use super::names::func_symbol_name;
use super::*;
use cranelift_codegen::ir::InstBuilder;
use cranelift_jit::JITModule;
use cranelift_module::Linkage;
use cranelift_reader::parse_functions;

/// `f0` and `f1` are equal (`x + 7`), `f2` differs (`x * 3`).
const BATCH: &str =
    "function %f0(i64) -> i64 {\nblock0(v0: i64):\n v1 = iconst.i64 7\n v2 = iadd v0, v1\n return v2\n}\n\
    function %f1(i64) -> i64 {\nblock0(v0: i64):\n v1 = iconst.i64 7\n v2 = iadd v0, v1\n return v2\n}\n\
    function %f2(i64) -> i64 {\nblock0(v0: i64):\n v1 = iconst.i64 3\n v2 = imul v0, v1\n return v2\n}\n";

/// A `MergeModule` over a JIT with `BATCH` defined (exported), not yet flushed, and the ids.
fn defined() -> (MergeModule<JITModule>, Vec<FuncId>) {
    let isa = crate::isa::host_isa(crate::isa::OptLevel::None).expect("host ISA");
    let jit = JITModule::new(crate::jit_builder(isa, &[]));
    let mut m = MergeModule::new(jit);
    let mut ids = Vec::new();
    for (k, f) in parse_functions(BATCH).unwrap().into_iter().enumerate() {
        let id = m
            .declare_function(&format!("f{k}"), Linkage::Export, &f.signature)
            .unwrap();
        let mut ctx = m.make_context();
        ctx.func = f;
        m.define_function(id, &mut ctx).unwrap();
        ids.push(id);
    }
    (m, ids)
}

/// The stages of a flush `m` has gone through so far.
struct Through {
    pending: Vec<(FuncId, ir::Function)>,
    lifted: Lifted,
    /// The functions `record_merges` made (after stage `Record`).
    made: Vec<(FuncId, lir::FuncId)>,
}

#[derive(PartialEq, PartialOrd)]
enum Stage {
    Lift,
    Passes,
    Record,
}

/// Run the stages of a flush of `m`'s batch up to `last`, as `Core::flush` does.
fn through(m: &mut MergeModule<JITModule>, last: Stage) -> Through {
    let mut pending = std::mem::take(&mut m.core.pending);
    let config = m.config.clone();
    // The options `flush` sets for a batch that is not the last.
    m.core.pass_state.allow_tail_calls = tail_calls_allowed(m.inner.isa());
    m.core.pass_state.incremental = true;
    let plan = m.core.plan_lift(&m.inner, &config, false, &pending);
    let lifted = m.core.lift_batch(&m.inner, &config, plan, &mut pending);
    let mut made = Vec::new();
    if last >= Stage::Passes {
        m.core
            .run_passes(&config, (false, true), None, &lifted.batch)
            .unwrap();
    }
    if last >= Stage::Record {
        made = m.core.record_merges(&mut m.inner, &lifted, 0).unwrap();
    }
    Through {
        pending,
        lifted,
        made,
    }
}

#[test]
fn lift_batch_lifts_the_functions_that_could_merge_in_batch_order() {
    let (mut m, ids) = defined();
    let Through { lifted, .. } = through(&mut m, Stage::Lift);
    // `f2` is the only function of its shape: it is compiled from its input, and its print
    // waits to be indexed.
    let batch_ids: Vec<FuncId> = lifted.batch.iter().map(|&(id, _)| id).collect();
    assert_eq!(batch_ids, ids[..2]);
    for (pos, &(id, lid)) in lifted.batch.iter().enumerate() {
        assert_eq!(lifted.lid_at[pos].expand(), Some(lid));
        assert_eq!(m.core.lifted[id].expand(), Some(lid));
        assert!(m.core.lir.functions[lid].inst_count() > 0);
    }
    assert!(lifted.lid_at[2].is_none() && m.core.lifted[ids[2]].is_none());
    assert_eq!(lifted.indexed, [2]);
    assert!(lifted.late.is_empty());
    assert_eq!(m.core.stats.get(midend::Counter::FunctionsIn), 3);
    assert_eq!(m.core.stats.get(midend::Counter::NotLifted), 1);
}

#[test]
fn run_passes_merges_the_equal_pair_only() {
    let (mut m, _) = defined();
    let Through { lifted, .. } = through(&mut m, Stage::Passes);
    let merges = &m.core.pass_state.merges;
    assert_eq!(merges.len(), 1, "{merges:?}");
    let name = |s| m.core.lir.symbol_name(s).to_string();
    // Functions are named by their module ids (`u0:N`) in LIR.
    let (f0, f1) = (lifted.batch[0].0, lifted.batch[1].0);
    assert_eq!(name(merges[0].merged), func_symbol_name(f1));
    assert_eq!(name(merges[0].survivor), func_symbol_name(f0));
    assert_eq!(m.core.stats.get(midend::Counter::Merged), 1);
}

#[test]
fn record_merges_maps_merged_symbols_to_module_functions() {
    let (mut m, ids) = defined();
    let Through { made, .. } = through(&mut m, Stage::Record);
    // Exact merging makes no new function (merge-similar's shared bodies would be here).
    assert!(made.is_empty());
    let merged = m.core.merged[ids[1]].as_ref().expect("f1 is merged");
    assert_eq!(merged.into, ids[0]);
    assert!(m.core.merged[ids[0]].is_none() && m.core.merged[ids[2]].is_none());
    assert!(m.core.any_merged);
}

#[test]
fn compile_batch_compiles_what_is_left_and_nothing_fails() {
    let (mut m, ids) = defined();
    let Through {
        mut pending,
        lifted,
        made,
    } = through(&mut m, Stage::Record);
    let config = m.config.clone();
    let failed = m
        .core
        .compile_batch(&mut m.inner, &config, &mut pending, &lifted, made);
    assert!(failed.is_none(), "{failed:?}");
    // Two bodies compiled; the merged function has no code of its own.
    assert_eq!(m.core.stats.get(midend::Counter::Compiled), 2);
    assert!(m.core.code_bytes[ids[0]] > 0 && m.core.code_bytes[ids[2]] > 0);
    assert_eq!(m.core.code_bytes[ids[1]], 0);
    // What was compiled runs, the merged function through its survivor's code.
    m.finalize_definitions().unwrap();
    for (id, want) in [(ids[0], 12), (ids[1], 12), (ids[2], 15)] {
        let code = m.get_finalized_function(id);
        // SAFETY: the function was compiled from `BATCH` with signature (i64) -> i64.
        let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
        assert_eq!(f(5), want);
    }
}

#[test]
fn a_flush_freezes_what_it_compiled() {
    let (mut m, ids) = defined();
    m.flush().unwrap();
    let lir = &m.core.lir;
    assert_eq!(m.core.pass_state.first_open as usize, lir.functions.len());
    assert_eq!(m.core.pass_state.open_function_ids(lir), Vec::new());
    // The lifted survivor is indexed by its fingerprint for later batches (the merged one is
    // not a survivor), the unlifted one by its print, and the lifted one's shape is known.
    assert_eq!(m.core.pass_state.frozen.len(), 1);
    let keys = skip::Survey::of(parse_functions(BATCH).unwrap().iter()).keys;
    assert_eq!(m.core.input_index.ids(), [ids[2]]);
    assert!(m.core.lifted_shapes.contains(&keys[0]));
    assert!(!m.core.lifted_shapes.contains(&keys[2]));
}

/// Define `text`'s one function as `name` (exported) in `m`, and return its id.
fn define_text(m: &mut MergeModule<JITModule>, name: &str, text: &str) -> FuncId {
    let f = parse_functions(text).unwrap().remove(0);
    let id = m
        .declare_function(name, Linkage::Export, &f.signature)
        .unwrap();
    let mut ctx = m.make_context();
    ctx.func = f;
    m.define_function(id, &mut ctx).unwrap();
    id
}

fn call(m: &MergeModule<JITModule>, id: FuncId, x: i64) -> i64 {
    // SAFETY: every function these tests call has signature (i64) -> i64.
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(m.get_finalized_function(id)) };
    f(x)
}

/// A later batch's function equal to one compiled unlifted, renamed but with the same
/// callees, merges into it by its print alone, never lifted; a third batch that takes its
/// address gets a thunk of its own for it, which calls the survivor.
#[test]
fn a_later_equal_function_merges_into_an_unlifted_one_by_its_print() {
    let (mut m, ids) = defined();
    m.flush().unwrap();
    let text = "function %g(i64) -> i64 {\nblock0(v7: i64):\n v8 = iconst.i64 3\n v9 = imul v7, v8\n return v9\n}\n";
    let g = define_text(&mut m, "g", text);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(g), Some(ids[2]));
    assert_eq!(m.core.stats.get(midend::Counter::MergeByPrint), 1);
    assert_eq!(m.core.stats.get(midend::Counter::StandIns), 0);
    assert_eq!(
        m.core.stats.get(midend::Counter::Compiled),
        2,
        "g has no code of its own"
    );
    assert_eq!(call(&m, g, 5), 15);
    // `h` returns `g`'s address: `g` needs code of its own now, a thunk to `f2`.
    let sig = m.declarations().get_function_decl(g).signature.clone();
    let h = m.declare_function("h", Linkage::Export, &sig).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = sig;
    let gr = m.declare_func_in_func(g, &mut ctx.func);
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    let mut b = cranelift_frontend::FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let a = b.ins().func_addr(ir::types::I64, gr);
    b.ins().return_(&[a]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(h, &mut ctx).unwrap();
    m.finalize_definitions().unwrap();
    assert_eq!(m.core.stats.get(midend::Counter::LateThunks), 1);
    let addr = call(&m, h, 0);
    assert_ne!(addr as usize, m.get_finalized_function(ids[2]) as usize);
    // SAFETY: `addr` is `g`'s code, of signature (i64) -> i64.
    let through: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(addr as usize) };
    assert_eq!(through(7), 21);
}

/// A later batch's function equal to one compiled unlifted once its callee merges: a
/// stand-in is lifted and frozen in the unlifted one's place, and the pass merges into it.
#[test]
fn a_later_function_equal_once_its_callee_merges_merges_through_a_stand_in() {
    let isa = crate::isa::host_isa(crate::isa::OptLevel::None).expect("host ISA");
    let mut m = MergeModule::new(JITModule::new(crate::jit_builder(isa, &[])));
    let callee = |k: u32| {
        format!("function %c{k}(i64) -> i64 {{\nblock0(v0: i64):\n v1 = iconst.i64 5\n v2 = iadd v0, v1\n return v2\n}}\n")
    };
    let caller = |k: u32| {
        format!("function %u{k}(i64) -> i64 {{\n fn0 = colocated u0:{k} (i64) -> i64\nblock0(v0: i64):\n v1 = call fn0(v0)\n v2 = imul v1, v1\n return v2\n}}\n")
    };
    // Batch 1: `c0` and `u0` (which calls `c0`), each of its own shape: both unlifted.
    let c0 = define_text(&mut m, "c0", &callee(0));
    let u0 = define_text(&mut m, "u0", &caller(c0.as_u32()));
    m.finalize_definitions().unwrap();
    // Batch 2: `c1`, equal to `c0`, and `u1`, equal to `u0` once `c1` is merged.
    let c1 = m
        .declare_function(
            "c1",
            Linkage::Export,
            &m.declarations().get_function_decl(c0).signature.clone(),
        )
        .unwrap();
    let u1 = define_text(&mut m, "u1", &caller(c1.as_u32()));
    let mut ctx = m.make_context();
    ctx.func = parse_functions(&callee(1)).unwrap().remove(0);
    m.define_function(c1, &mut ctx).unwrap();
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(c1), Some(c0));
    assert_eq!(m.merged_into(u1), Some(u0));
    assert_eq!(m.core.stats.get(midend::Counter::StandIns), 1);
    assert_eq!(call(&m, u1, 2), 49);
}

/// `x + k + 1` as a chain of `k + 1` additions of 1: a shape of its own for each `k`.
fn chain(k: usize) -> String {
    let mut text =
        String::from("function %f(i64) -> i64 {\nblock0(v0: i64):\n v1 = iconst.i64 1\n");
    let mut v = 0;
    for j in 0..=k {
        text += &format!(" v{} = iadd v{v}, v1\n", j + 2);
        v = j + 2;
    }
    text += &format!(" return v{v}\n}}\n");
    text
}

/// Define `x + k` for `k` below 40 (one shape, 40 prints), finalizing each alone as a REPL
/// does, with `merge` only; then call each. Returns how many compute something else.
fn wrong_sums() -> usize {
    let isa = crate::isa::host_isa(crate::isa::OptLevel::None).expect("host ISA");
    let jit = JITModule::new(crate::jit_builder(isa, &[]));
    let config = MergeConfig {
        threads: Threads::None,
        passes: vec![midend::PassKind::Merge],
        ..Default::default()
    };
    let mut m = MergeModule::with_config(jit, config);
    let mut ids = Vec::new();
    for k in 0..40 {
        let text = format!(
            "function %f(i64) -> i64 {{\nblock0(v0: i64):\n v1 = iconst.i64 {k}\n \
             v2 = iadd v0, v1\n return v2\n}}\n"
        );
        ids.push(define_text(&mut m, &format!("s{k}"), &text));
        m.finalize_definitions().unwrap();
    }
    (ids.iter().enumerate())
        .filter(|&(k, &id)| call(&m, id, 100) != 100 + k as i64)
        .count()
}

/// A function is merged into one compiled unlifted before on the exact digest of its print
/// alone: were the digest weak (here 4 bits), different functions would be merged. With the
/// digest production uses (128 bits, keyed per process) none is.
#[test]
fn prints_are_trusted_by_a_keyed_128_bit_digest() {
    fingerprint::WEAK_DIGESTS.set(true);
    let wrong = wrong_sums();
    fingerprint::WEAK_DIGESTS.set(false);
    assert!(wrong > 0, "40 functions in 16 weak digests collide");
    assert_eq!(wrong_sums(), 0);
    // What production uses: a digest of 128 bits (its high half used), which depends on the
    // key (drawn per process).
    let f = &parse_functions(&chain(3)).unwrap()[0];
    let digest = |w: &mut fingerprint::Walker| {
        let (mut refs, mut near) = (Vec::new(), Vec::new());
        let refs = fingerprint::Refs {
            pos: 0,
            refs: &mut refs,
            near: &mut near,
        };
        let mut p = fingerprint::Print::default();
        assert!(w.walk::<true>(f, refs, &mut p).1);
        p.exact
    };
    let ours = digest(&mut fingerprint::Walker::default());
    assert_eq!(
        ours,
        digest(&mut fingerprint::Walker::default()),
        "one key per process"
    );
    assert_ne!(ours >> 64, 0);
    assert_ne!(ours, digest(&mut fingerprint::Walker::with_key((1, 2))));
}

/// A REPL's functions unlike any before take the short path: each is compiled from its
/// definition without any LIR, pass state or stand-in, and indexed by its print; a later
/// function equal to one of them merges into it, and one equal but for a constant starts a
/// family with it (the long path).
#[test]
fn lone_functions_take_the_short_path() {
    let isa = crate::isa::host_isa(crate::isa::OptLevel::None).expect("host ISA");
    let jit = JITModule::new(crate::jit_builder(isa, &[]));
    let config = MergeConfig {
        threads: Threads::None,
        ..Default::default()
    };
    let mut m = MergeModule::with_config(jit, config);
    let mut ids = Vec::new();
    for k in 0..10 {
        ids.push(define_text(&mut m, &format!("c{k}"), &chain(k)));
        m.finalize_definitions().unwrap();
    }
    assert_eq!(m.core.lir.functions.len(), 0, "nothing lifted");
    assert_eq!(m.core.pass_state.frozen.len(), 0);
    assert_eq!(m.core.input_index.ids().len(), 10);
    assert_eq!(m.core.stats.get(midend::Counter::NotLifted), 10);
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(call(&m, id, 1), k as i64 + 2);
    }
    // Equal to `c3`: merged into it on its print, with no code of its own.
    let again = define_text(&mut m, "again", &chain(3));
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(again), Some(ids[3]));
    assert_eq!(call(&m, again, 1), 5);
    // `c4` but for its constant: both are lifted (c4 as a stand-in) for `merge-similar`.
    let near = define_text(
        &mut m,
        "near",
        &chain(4).replace("iconst.i64 1", "iconst.i64 2"),
    );
    m.finalize_definitions().unwrap();
    assert_eq!(m.core.stats.get(midend::Counter::StandIns), 1);
    assert_eq!(call(&m, near, 1), 11);
    assert_eq!(call(&m, ids[4], 1), 6);
}
