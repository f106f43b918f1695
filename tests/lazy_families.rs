//! Merging across flushes, as a lazy JIT compiles (a flush after every function or few):
//! `merge-similar` families that gain members in later flushes, families that start from a
//! function an earlier flush compiled alone, and callers defined before their callees.
//!
//! Each scenario is a list of steps (define a function, flush) run through the `Module` trait
//! alike on plain cranelift-jit, on `MergeModule` over cranelift-jit and on `MergeModule` over
//! cranelift-object. The JIT runs every function on several inputs: the results equal the
//! plain module's. Both `MergeModule`s merge the same functions the same way, and the
//! family's members share the one body.

use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use mergelift::{Counter, MergeKind, MergeModule, MergedBy};

fn isa() -> OwnedTargetIsa {
    let mut fb = settings::builder();
    fb.set("opt_level", "none").unwrap();
    fb.set("is_pic", "false").unwrap();
    cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(fb))
        .unwrap()
}

/// One step of a scenario.
#[derive(Clone, Copy)]
enum Step {
    /// Define `name`: the template of about 40 instructions around the constant `k`,
    /// calling `callee` (by name: declared here if it is not yet) on its result, if any.
    Define(&'static str, i64, Option<&'static str>),
    /// Compile what was defined since the last flush (a JIT's `finalize_definitions`; for
    /// plain cranelift-jit, which compiles at define, nothing).
    Flush,
}

/// A module the steps run on: plain modules compile at define, `MergeModule`s at flush.
trait Flushing: Module {
    fn flush_now(&mut self);
}

impl Flushing for JITModule {
    fn flush_now(&mut self) {}
}

impl Flushing for ObjectModule {
    fn flush_now(&mut self) {}
}

impl<M: Module + 'static> Flushing for MergeModule<M> {
    fn flush_now(&mut self) {
        self.flush().unwrap();
    }
}

fn sig<M: Module>(m: &M) -> Signature {
    let mut s = m.make_signature();
    s.params.push(AbiParam::new(types::I64));
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// Run `steps` on `m`; returns every function's id by name, in the order first named.
fn run<M: Flushing>(m: &mut M, steps: &[Step]) -> Vec<(&'static str, FuncId)> {
    let s = sig(m);
    let mut ids: Vec<(&'static str, FuncId)> = Vec::new();
    let mut id_of = |m: &mut M, name: &'static str| match ids.iter().find(|e| e.0 == name) {
        Some(&(_, id)) => id,
        None => {
            let id = m.declare_function(name, Linkage::Export, &s).unwrap();
            ids.push((name, id));
            id
        }
    };
    let mut ctx = m.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for &step in steps {
        let Step::Define(name, k, callee) = step else {
            m.flush_now();
            continue;
        };
        let id = id_of(m, name);
        let callee = callee.map(|c| id_of(m, c));
        m.clear_context(&mut ctx);
        ctx.func.signature = s.clone();
        let callee = callee.map(|c| m.declare_func_in_func(c, &mut ctx.func));
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let e = b.create_block();
        b.append_block_params_for_function_params(e);
        b.switch_to_block(e);
        let x = b.block_params(e)[0];
        let kk = b.ins().iconst(types::I64, k);
        let mut v = x;
        for j in 0..10 {
            let t = b.ins().imul(v, kk);
            let t = b.ins().iadd_imm_s(t, j);
            let u = b.ins().ushr_imm_u(x, j + 1);
            v = b.ins().bxor(t, u);
        }
        if let Some(c) = callee {
            let call = b.ins().call(c, &[v]);
            v = b.inst_results(call)[0];
        }
        b.ins().return_(&[v]);
        b.seal_all_blocks();
        b.finalize(m.isa().frontend_config());
        m.define_function(id, &mut ctx).unwrap();
    }
    m.flush_now();
    ids
}

/// Every function's results on a few inputs, by name.
fn results(m: &JITModule, ids: &[(&'static str, FuncId)]) -> Vec<(&'static str, Vec<i64>)> {
    results_with(ids, |id| m.get_finalized_function(id))
}

fn results_with(
    ids: &[(&'static str, FuncId)],
    fetch: impl Fn(FuncId) -> *const u8,
) -> Vec<(&'static str, Vec<i64>)> {
    ids.iter()
        .map(|&(name, id)| {
            // SAFETY: every function has the signature `(i64) -> i64`.
            let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(fetch(id)) };
            (name, [-3, 0, 1, 7, 1 << 40].iter().map(|&x| f(x)).collect())
        })
        .collect()
}

/// Each function merged away, by name: its survivor's name (`shared body` for a body a
/// pass made) and how it was merged; and the number of shared bodies made.
struct Merges {
    merged: Vec<(&'static str, String, MergeKind, MergedBy)>,
    shared_bodies: u64,
}

fn merges<M: Module>(m: &MergeModule<M>, ids: &[(&'static str, FuncId)]) -> Merges {
    let name = |id: FuncId| {
        m.declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    };
    let merged = ids
        .iter()
        .filter_map(|&(n, id)| {
            let survivor = match m.merged_into(id) {
                Some(s) => name(s),
                None if m.in_shared_body(id) => "shared body".to_string(),
                None => return None,
            };
            Some((n, survivor, m.merge_kind(id)?, m.merged_by(id)?))
        })
        .collect();
    Merges {
        merged,
        shared_bodies: m.stats().get(Counter::SimilarGroups),
    }
}

/// Run `steps` on the three modules; check the JIT's results against plain cranelift-jit's
/// and that both `MergeModule`s merged alike. Returns the merges.
fn check(steps: &[Step]) -> Merges {
    let mut plain = JITModule::new(JITBuilder::with_isa(isa(), default_libcall_names()));
    let ids = run(&mut plain, steps);
    plain.finalize_definitions().unwrap();
    let want = results(&plain, &ids);

    let jit = JITModule::new(JITBuilder::with_isa(isa(), default_libcall_names()));
    let mut m = MergeModule::new(jit);
    let ids = run(&mut m, steps);
    m.finalize_definitions().unwrap();
    let got = results_with(&ids, |id| m.get_finalized_function(id));
    assert_eq!(
        got, want,
        "MergeModule<JITModule> computes what JITModule does"
    );
    let jit_merges = merges(&m, &ids);

    let obj =
        ObjectModule::new(ObjectBuilder::new(isa(), "lazy", default_libcall_names()).unwrap());
    let mut m = MergeModule::new(obj);
    let ids = run(&mut m, steps);
    let obj_merges = merges(&m, &ids);
    let product = m.finish().unwrap();
    assert!(!product.emit().unwrap().is_empty());
    // (How: a function that code compiled before called by name is a thunk in a JIT, which
    // resolves no alias, and an alias symbol in an object file.)
    let what = |m: &Merges| -> Vec<_> {
        (m.merged.iter())
            .map(|(n, s, _, by)| (*n, s.clone(), *by))
            .collect()
    };
    assert_eq!(
        (what(&obj_merges), obj_merges.shared_bodies),
        (what(&jit_merges), jit_merges.shared_bodies),
        "both inner modules merge the same functions"
    );
    jit_merges
}

/// The members of one `merge-similar` family: `names` merged by `merge-similar` into a
/// shared body, the only one made.
fn one_family(merges: &Merges, names: &[&str]) {
    let all = &merges.merged;
    for &n in names {
        let Some((_, survivor, _, by)) = all.iter().find(|e| e.0 == n) else {
            panic!("{n} is not merged: {all:?}");
        };
        assert_eq!(*by, MergedBy::Similar, "{n}: {all:?}");
        assert_eq!(survivor, "shared body", "{n}: {all:?}");
    }
    assert_eq!(merges.shared_bodies, 1, "{all:?}");
}

/// `n` merged into `into` by `merge` (equal).
fn merged_exactly(merges: &Merges, n: &str, into: &str) {
    assert!(
        (merges.merged.iter()).any(|e| e.0 == n && e.1 == into && e.3 == MergedBy::Exact),
        "{n} into {into}: {:?}",
        merges.merged
    );
}

/// A family made in one flush gains members in later flushes: each joins the shared body
/// compiled before, as a thunk passing its constant.
#[test]
fn a_family_gains_members_in_later_flushes() {
    use Step::*;
    let merges = check(&[
        Define("a0", 3, None),
        Define("a1", 5, None),
        Define("a2", 7, None),
        Flush,
        Define("a3", 11, None),
        Flush,
        Define("a4", 13, None),
        Define("a5", 17, None),
        Flush,
    ]);
    one_family(&merges, &["a0", "a1", "a2", "a3", "a4", "a5"]);
}

/// One function per flush: the first is compiled alone (nothing to merge with); the second
/// starts a family with it (it keeps its code, the family's body is made of the second);
/// the later ones join that family.
#[test]
fn a_family_starts_from_a_function_compiled_alone() {
    use Step::*;
    let merges = check(&[
        Define("b0", 3, None),
        Flush,
        Define("b1", 5, None),
        Flush,
        Define("b2", 7, None),
        Flush,
        Define("b3", 11, None),
        Flush,
    ]);
    assert!(
        merges.merged.iter().all(|e| e.0 != "b0"),
        "{:?}",
        merges.merged
    );
    one_family(&merges, &["b1", "b2", "b3"]);
}

/// Callers defined before their callees: `c0` calls `h1` before `h1` is defined; `h1`,
/// equal to `h0`, merges into it when it comes. A later caller `c1` of `h0`, equal to `c0`
/// by their callees' survivors, merges into `c0`'s code (nothing is compiled again), as
/// does `c2`, which calls `h1`.
#[test]
fn a_caller_defined_before_its_callee_merges_by_survivors() {
    use Step::*;
    let merges = check(&[
        Define("c0", 3, Some("h1")),
        Flush,
        Define("h0", 40, None),
        Flush,
        Define("h1", 40, None),
        Flush,
        Define("c1", 3, Some("h0")),
        Flush,
        Define("c2", 3, Some("h1")),
        Flush,
    ]);
    for (n, into) in [("h1", "h0"), ("c1", "c0"), ("c2", "c0")] {
        merged_exactly(&merges, n, into);
    }
}

/// In an object file a merged function is an alias of its survivor, so code compiled before
/// a callee merges calls the survivor's code by the callee's name. A caller `c0` compiled
/// (lifted: `d0` equals it) before its callee `h1` merges into `h0` is found again by a later
/// caller of `h0`: its fingerprint is written again with `h1`'s survivor.
#[test]
fn a_lifted_caller_compiled_before_its_callee_merged_is_found_by_the_survivor() {
    use Step::*;
    let obj =
        ObjectModule::new(ObjectBuilder::new(isa(), "lazy", default_libcall_names()).unwrap());
    let mut m = MergeModule::new(obj);
    let ids = run(
        &mut m,
        &[
            Define("c0", 3, Some("h1")),
            Define("d0", 3, Some("h1")),
            Flush,
            Define("h0", 40, None),
            Flush,
            Define("h1", 40, None),
            Flush,
            Define("c1", 3, Some("h0")),
            Flush,
        ],
    );
    let merges = merges(&m, &ids);
    for (n, into) in [("d0", "c0"), ("h1", "h0"), ("c1", "c0")] {
        merged_exactly(&merges, n, into);
    }
    assert!(m.stats().get(Counter::MergeRekeyed) > 0);
    m.finish().unwrap();
}
