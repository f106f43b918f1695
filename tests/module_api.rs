//! `MergeModule` through the `cranelift_module::Module` trait only, as a JIT runtime or an
//! object-file producer would use it: identical and near-identical functions, recursion and
//! mutual recursion, addresses taken and compared in IR and by the host, data objects holding
//! function addresses, later batches merging into earlier code, and every error case.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, FuncRef, InstBuilder, Signature};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{
    default_libcall_names, DataDescription, FuncId, Linkage, Module, ModuleError,
};
use cranelift_object::{ObjectBuilder, ObjectModule};
use mergelift::{AddressPolicy, MergeConfig, MergeKind, MergeModule, PassKind, Threads};

fn isa(flags: &[(&str, &str)]) -> cranelift_codegen::isa::OwnedTargetIsa {
    let mut b = settings::builder();
    for (k, v) in flags {
        b.set(k, v).unwrap();
    }
    cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(b))
        .unwrap()
}

fn jit_with(config: MergeConfig) -> MergeModule<JITModule> {
    let b = JITBuilder::with_isa(isa(&[]), default_libcall_names());
    MergeModule::with_config(JITModule::new(b), config)
}

fn jit() -> MergeModule<JITModule> {
    jit_with(MergeConfig::default())
}

fn sig(m: &dyn Module, params: usize) -> Signature {
    let mut s = m.make_signature();
    for _ in 0..params {
        s.params.push(AbiParam::new(types::I64));
    }
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// Define `id` as `body(builder, params, callees)` with `callees` declared in it.
fn define(
    m: &mut dyn Module,
    id: FuncId,
    callees: &[FuncId],
    body: impl FnOnce(&mut FunctionBuilder, &[cranelift_codegen::ir::Value], &[FuncRef]),
) {
    let mut ctx = m.make_context();
    ctx.func.signature = m.declarations().get_function_decl(id).signature.clone();
    let refs: Vec<FuncRef> = callees
        .iter()
        .map(|&c| m.declare_func_in_func(c, &mut ctx.func))
        .collect();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    body(&mut b, &params, &refs);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx).unwrap();
}

/// `x * k + 1`.
fn affine(m: &mut dyn Module, id: FuncId, k: i64) {
    define(m, id, &[], |b, p, _| {
        let y = b.ins().imul_imm_s(p[0], k);
        let z = b.ins().iadd_imm_s(y, 1);
        b.ins().return_(&[z]);
    });
}

/// `n <= 1 ? 1 : n * callee(n - 1)`.
fn fact(m: &mut dyn Module, id: FuncId, callee: FuncId) {
    define(m, id, &[callee], |b, p, f| {
        let (base, rec) = (b.create_block(), b.create_block());
        let small = b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, p[0], 1);
        b.ins().brif(small, base, &[], rec, &[]);
        b.switch_to_block(base);
        let one = b.ins().iconst(types::I64, 1);
        b.ins().return_(&[one]);
        b.switch_to_block(rec);
        let n1 = b.ins().iadd_imm_s(p[0], -1);
        let c = b.ins().call(f[0], &[n1]);
        let r = b.inst_results(c)[0];
        let prod = b.ins().imul(p[0], r);
        b.ins().return_(&[prod]);
    });
}

fn call1(m: &MergeModule<JITModule>, id: FuncId, x: i64) -> i64 {
    // SAFETY: every function called here has the signature `(i64) -> i64`.
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(m.get_finalized_function(id)) };
    f(x)
}

#[test]
fn identical_functions_merge_and_both_ids_work() {
    let mut m = jit();
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    let h = m.declare_function("h", Linkage::Local, &s).unwrap();
    affine(&mut m, f, 3);
    affine(&mut m, g, 3);
    affine(&mut m, h, 3);
    m.finalize_definitions().unwrap();
    for id in [f, g, h] {
        assert_eq!(call1(&m, id, 5), 16);
    }
    assert_eq!(m.merged_into(g), Some(f));
    assert_eq!(m.merged_into(h), Some(f));
    assert_eq!(m.merge_kind(g), Some(MergeKind::Aliased));
    assert_eq!(m.merge_kind(h), Some(MergeKind::Replaced));
    assert_eq!(m.merged_into(f), None);
    assert_eq!(
        m.stats().get(mergelift::Counter::Compiled),
        1,
        "one body for three functions"
    );
    assert!(m.code_bytes(f).unwrap() > 0);
    assert_eq!(m.code_bytes(g), None);
}

#[test]
fn near_identical_functions_stay_apart() {
    let mut m = jit();
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 3);
    affine(&mut m, g, 4);
    m.finalize_definitions().unwrap();
    assert_eq!(call1(&m, f, 5), 16);
    assert_eq!(call1(&m, g, 5), 21);
    assert_eq!(m.merged_into(g), None);
    assert_eq!(m.stats().get(mergelift::Counter::Compiled), 2);
}

#[test]
fn recursion_and_mutual_recursion_merge() {
    let mut m = jit();
    let s = sig(&m, 1);
    let [f0, f1, ping, pong] = ["fact0", "fact1", "ping", "pong"]
        .map(|n| m.declare_function(n, Linkage::Export, &s).unwrap());
    fact(&mut m, f0, f0);
    fact(&mut m, f1, f1);
    // ping and pong call each other and compute the same factorial.
    fact(&mut m, ping, pong);
    fact(&mut m, pong, ping);
    m.finalize_definitions().unwrap();
    for id in [f0, f1, ping, pong] {
        assert_eq!(call1(&m, id, 10), 3_628_800);
    }
    assert_eq!(m.merged_into(f1), Some(f0));
    assert!(m.merged_into(ping).is_some() || m.merged_into(pong).is_some());
    assert!(m.stats().get(mergelift::Counter::Compiled) <= 2);
}

/// `func_addr a == func_addr b` must stay false for two functions, equal or not.
///
/// With one last flush, `same` (its shape is its own) is compiled without being lifted: the
/// addresses it takes still keep `g` distinct.
#[test]
fn addresses_taken_and_compared_in_ir_stay_distinct() {
    for last in [false, true] {
        addresses_taken_and_compared(last);
    }
}

fn addresses_taken_and_compared(last: bool) {
    let mut m = jit();
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Local, &s).unwrap();
    let g = m.declare_function("g", Linkage::Local, &s).unwrap();
    let cmp = m
        .declare_function("same", Linkage::Export, &sig(&m, 0))
        .unwrap();
    affine(&mut m, f, 2);
    affine(&mut m, g, 2);
    define(&mut m, cmp, &[f, g], |b, _, r| {
        let a = b.ins().func_addr(types::I64, r[0]);
        let c = b.ins().func_addr(types::I64, r[1]);
        let eq = b.ins().icmp(IntCC::Equal, a, c);
        let w = b.ins().uextend(types::I64, eq);
        b.ins().return_(&[w]);
    });
    if last {
        m.flush_last().unwrap();
    }
    m.finalize_definitions().unwrap();
    // `same` is the only function of its shape: compiled from its input, unlifted, in a last
    // flush as in one that is not.
    assert_eq!(
        m.stats().get(mergelift::Counter::NotLifted),
        1,
        "{:?}",
        m.stats()
    );
    // SAFETY: `same` has the signature `() -> i64`.
    let same: extern "C" fn() -> i64 =
        unsafe { std::mem::transmute(m.get_finalized_function(cmp)) };
    assert_eq!(same(), 0);
    assert_eq!(call1(&m, f, 4), 9);
    assert_eq!(call1(&m, g, 4), 9);
    assert_ne!(m.get_finalized_function(f), m.get_finalized_function(g));
    assert_eq!(
        m.merge_kind(g),
        Some(MergeKind::Thunked),
        "g keeps an address of its own"
    );
}

/// What the host sees: shared addresses by default, distinct ones with `AddressPolicy::Distinct`.
#[test]
fn host_visible_addresses_follow_the_policy() {
    for policy in [AddressPolicy::Shared, AddressPolicy::Distinct] {
        let mut m = jit_with(MergeConfig {
            address_policy: policy,
            ..Default::default()
        });
        let s = sig(&m, 1);
        let f = m.declare_function("f", Linkage::Export, &s).unwrap();
        let g = m.declare_function("g", Linkage::Export, &s).unwrap();
        affine(&mut m, f, 7);
        affine(&mut m, g, 7);
        m.finalize_definitions().unwrap();
        assert_eq!(call1(&m, g, 1), 8);
        let (pf, pg) = (m.get_finalized_function(f), m.get_finalized_function(g));
        match policy {
            AddressPolicy::Shared => assert_eq!(pf, pg),
            AddressPolicy::Distinct => {
                assert_ne!(pf, pg);
                assert_eq!(m.merge_kind(g), Some(MergeKind::Thunked));
            }
        }
    }
}

/// A vtable in data holding the addresses of two equal functions: both entries work and
/// differ.
#[test]
fn data_objects_hold_function_addresses() {
    let mut m = jit();
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 5);
    affine(&mut m, g, 5);
    let vt = m
        .declare_data("vtable", Linkage::Export, false, false)
        .unwrap();
    let mut d = DataDescription::new();
    d.define_zeroinit(16);
    let (rf, rg) = (
        m.declare_func_in_data(f, &mut d),
        m.declare_func_in_data(g, &mut d),
    );
    d.write_function_addr(0, rf);
    d.write_function_addr(8, rg);
    m.define_data(vt, &d).unwrap();
    m.finalize_definitions().unwrap();
    let (p, len) = m.get_finalized_data(vt);
    assert_eq!(len, 16);
    // SAFETY: the data object is 16 bytes: two function pointers.
    let slots = unsafe { std::slice::from_raw_parts(p as *const usize, 2) };
    assert_ne!(slots[0], slots[1], "addresses in data stay distinct");
    for &a in slots {
        // SAFETY: both slots hold `(i64) -> i64` functions.
        let fp: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(a) };
        assert_eq!(fp(2), 11);
    }
}

/// A later batch stores in data the addresses of functions an earlier batch merged away:
/// each gets a thunk of its own, an exact duplicate (whose code is its survivor's) as a
/// local function folded into a shared body (`fetch_locals` off, no code at all) does, so
/// that every address in the table is distinct, as with the plain module.
#[test]
fn data_of_a_later_batch_holds_addresses_of_merged_functions() {
    let mut m = jit_with(MergeConfig {
        fetch_locals: false,
        ..Default::default()
    });
    let s = sig(&m, 1);
    let members = near_duplicates(&mut m, &s);
    let copy = m.declare_function("copy0", Linkage::Local, &s).unwrap();
    // An exact duplicate of `m0`.
    define(&mut m, copy, &[], |b, p, _| {
        let t = b.ins().imul_imm_s(p[0], 11);
        let t = b.ins().iadd_imm_s(t, 1 << 40);
        let t = b.ins().imul_imm_s(t, 5);
        let t = b.ins().iadd_imm_s(t, -9);
        b.ins().return_(&[t]);
    });
    let user = m.declare_function("user", Linkage::Export, &s).unwrap();
    define(&mut m, user, &members, |b, p, f| {
        let mut acc = b.ins().iconst(types::I64, 0);
        for &fr in f {
            let c = b.ins().call(fr, &[p[0]]);
            let r = b.inst_results(c)[0];
            acc = b.ins().iadd(acc, r);
        }
        b.ins().return_(&[acc]);
    });
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(copy), Some(members[0]));
    let folded = (members.iter())
        .filter(|&&g| m.merge_kind(g) == Some(MergeKind::Folded))
        .count();
    assert!(folded > 0, "{:?}", m.stats());
    let table = m
        .declare_data("table", Linkage::Export, false, false)
        .unwrap();
    let mut d = DataDescription::new();
    d.define_zeroinit(8 * (members.len() + 1));
    for (k, &g) in members.iter().chain([&copy]).enumerate() {
        let r = m.declare_func_in_data(g, &mut d);
        d.write_function_addr(8 * k as u32, r);
    }
    m.define_data(table, &d).unwrap();
    m.finalize_definitions().unwrap();
    assert_eq!(
        m.stats().get(mergelift::Counter::LateThunks) as usize,
        folded + 1
    );
    let (p, _) = m.get_finalized_data(table);
    // SAFETY: the table holds `members.len() + 1` pointers to `(i64) -> i64` functions.
    let slots = unsafe { std::slice::from_raw_parts(p as *const usize, members.len() + 1) };
    let distinct: std::collections::HashSet<usize> = slots.iter().copied().collect();
    assert_eq!(distinct.len(), slots.len(), "every address is its own");
    for (k, &a) in slots.iter().enumerate() {
        // SAFETY: as above.
        let fp: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(a) };
        let want = near_duplicate_value(k.min(members.len()) as i64 % 3, 3);
        assert_eq!(fp(3), want, "slot {k}");
    }
}

/// Batches after a finalize merge into earlier code: a function equal to one compiled before
/// costs no compile, calls from new code into old code work, and a third batch too.
#[test]
fn later_batches_merge_into_earlier_code() {
    let mut m = jit();
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let fact0 = m.declare_function("fact0", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 9);
    fact(&mut m, fact0, fact0);
    m.finalize_definitions().unwrap();
    let compiled = m.stats().get(mergelift::Counter::Compiled);
    assert_eq!(compiled, 2);

    // Batch 2: a copy of f, a copy of the recursive fact0, and a caller of old code.
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    let fact1 = m.declare_function("fact1", Linkage::Export, &s).unwrap();
    let user = m.declare_function("user", Linkage::Export, &s).unwrap();
    affine(&mut m, g, 9);
    fact(&mut m, fact1, fact1);
    define(&mut m, user, &[f, fact0], |b, p, r| {
        let c = b.ins().call(r[0], &[p[0]]);
        let x = b.inst_results(c)[0];
        let c = b.ins().call(r[1], &[x]);
        let y = b.inst_results(c)[0];
        b.ins().return_(&[y]);
    });
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(g), Some(f));
    assert_eq!(m.merged_into(fact1), Some(fact0));
    assert_eq!(
        m.stats().get(mergelift::Counter::Compiled),
        compiled + 1,
        "only `user` is compiled"
    );
    // `g` merges by its print (`f` was compiled unlifted), `fact1` through a stand-in for
    // `fact0` (each calls itself: equal only once the pass compares the two).
    assert_eq!(m.stats().get(mergelift::Counter::MergeByPrint), 1);
    assert_eq!(m.stats().get(mergelift::Counter::MergeIntoFrozen), 1);
    assert_eq!(call1(&m, g, 1), 10);
    assert_eq!(call1(&m, fact1, 5), 120);
    assert_eq!(call1(&m, user, 0), 1);

    // Batch 3: a caller of the merged g (its call goes to f's code) and another fact copy.
    let user2 = m.declare_function("user2", Linkage::Export, &s).unwrap();
    let fact2 = m.declare_function("fact2", Linkage::Local, &s).unwrap();
    define(&mut m, user2, &[g, fact2], |b, p, r| {
        let c = b.ins().call(r[0], &[p[0]]);
        let x = b.inst_results(c)[0];
        let c = b.ins().call(r[1], &[x]);
        let y = b.inst_results(c)[0];
        b.ins().return_(&[y]);
    });
    fact(&mut m, fact2, fact2);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(fact2), Some(fact0));
    assert_eq!(call1(&m, user2, 0), 1); // fact(9 * 0 + 1)
    assert_eq!(call1(&m, user2, 1), 3_628_800); // fact(10)
}

/// One function per finalize (a lazy JIT): each equal one merges into existing code.
#[test]
fn lazy_jit_one_function_per_finalize() {
    let mut m = jit();
    let ids = affine_one_per_finalize(&mut m, 12, 3);
    assert_eq!(m.stats().get(mergelift::Counter::Compiled), 3);
    assert_eq!(m.stats().get(mergelift::Counter::Flushes), 12);
    check_affine_one_per_finalize(&m, &ids, 3);
}

/// Define `f0`..`f{n-1}` one per finalize, `fk(x) = (k % period + 2) * x + 1`: each from
/// `f{period}` on equals one compiled before.
fn affine_one_per_finalize(m: &mut MergeModule<JITModule>, n: usize, period: usize) -> Vec<FuncId> {
    let s = sig(m, 1);
    let mut ids = Vec::new();
    for k in 0..n {
        let id = m
            .declare_function(&format!("f{k}"), Linkage::Export, &s)
            .unwrap();
        affine(m, id, (k % period) as i64 + 2);
        m.finalize_definitions().unwrap();
        ids.push(id);
    }
    ids
}

/// Every function of `affine_one_per_finalize` computes its own value, and each from
/// `f{period}` on merged into the first of its kind.
fn check_affine_one_per_finalize(m: &MergeModule<JITModule>, ids: &[FuncId], period: usize) {
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(call1(m, id, 10), 10 * ((k % period) as i64 + 2) + 1);
        if k >= period {
            assert_eq!(m.merged_into(id), Some(ids[k % period]));
        }
    }
}

/// By default a function's LIR body is freed once it is compiled or merged away (only its
/// name, signature and fingerprint stay); `keep_lir` keeps them. Either way later batches
/// merge into earlier code and everything runs the same.
#[test]
fn compiled_bodies_are_freed_unless_kept() {
    for keep_lir in [false, true] {
        let mut m = jit_with(MergeConfig {
            debug: mergelift::tools::DebugOptions {
                keep_lir,
                ..Default::default()
            },
            ..Default::default()
        });
        let s = sig(&m, 1);
        let ids = affine_one_per_finalize(&mut m, 6, 2);
        let caller = m.declare_function("caller", Linkage::Export, &s).unwrap();
        define(&mut m, caller, &[ids[4], ids[5]], |b, p, r| {
            let c = b.ins().call(r[0], &[p[0]]);
            let x = b.inst_results(c)[0];
            let c = b.ins().call(r[1], &[x]);
            let y = b.inst_results(c)[0];
            b.ins().return_(&[y]);
        });
        m.finalize_definitions().unwrap();
        assert_eq!(
            m.stats().get(mergelift::Counter::Compiled),
            3,
            "keep_lir {keep_lir}"
        );
        check_affine_one_per_finalize(&m, &ids, 2);
        // f4(1) = 2 * 1 + 1 = 3, then f5(3) = 3 * 3 + 1 = 10.
        assert_eq!(call1(&m, caller, 1), 10);
        let lir = m.lir();
        let with_body = lir
            .functions
            .values()
            .filter(|f| f.entry().is_some())
            .count();
        if keep_lir {
            assert!(with_body >= 3, "{with_body} bodies kept");
        } else {
            assert_eq!(with_body, 0, "every body is freed once compiled");
            // `f0` and `caller` are compiled without being lifted; `f1`, alike `f0` but for a
            // constant, is lifted with a stand-in of `f0` (too small for a family to pay);
            // `f2`..`f5`, equal to `f0` and `f1`, merge by their prints or fingerprints, and
            // their names and signatures stay.
            assert_eq!(lir.functions.len(), 6, "the functions stay");
        }
    }
}

#[test]
fn errors_are_typed_and_clear() {
    let mut m = jit();
    let s = sig(&m, 1);
    // A body for an import.
    let imp = m.declare_function("imp", Linkage::Import, &s).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = s.clone();
    assert!(matches!(
        m.define_function(imp, &mut ctx),
        Err(ModuleError::InvalidImportDefinition(n)) if n == "imp"
    ));
    // Declared again with another signature.
    let mut s32 = m.make_signature();
    s32.params.push(AbiParam::new(types::I32));
    s32.returns.push(AbiParam::new(types::I32));
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    assert!(matches!(
        m.declare_function("f", Linkage::Import, &s32),
        Err(ModuleError::IncompatibleSignature(..))
    ));
    // A body whose signature is not the declared one.
    let mut ctx = m.make_context();
    ctx.func.signature = s32.clone();
    assert!(matches!(
        m.define_function(f, &mut ctx),
        Err(ModuleError::IncompatibleSignature(..))
    ));
    // Defined twice.
    affine(&mut m, f, 1);
    let mut ctx = m.make_context();
    ctx.func.signature = s.clone();
    assert!(matches!(
        m.define_function(f, &mut ctx),
        Err(ModuleError::DuplicateDefinition(n)) if n == "f"
    ));
    // A `colocated` reference to an imported host function: an error naming both, not a panic.
    let host = m.declare_function("host_fn", Linkage::Import, &s).unwrap();
    let user = m.declare_function("user", Linkage::Export, &s).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = s.clone();
    let r = m.declare_func_in_func(host, &mut ctx.func);
    ctx.func.dfg.ext_funcs[r].colocated = true;
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let e = b.create_block();
    b.append_block_params_for_function_params(e);
    b.switch_to_block(e);
    let p = b.block_params(e)[0];
    let c = b.ins().call(r, &[p]);
    let v = b.inst_results(c)[0];
    b.ins().return_(&[v]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    let err = m.define_function(user, &mut ctx).unwrap_err().to_string();
    assert!(
        err.contains("user") && err.contains("host_fn") && err.contains("colocated"),
        "{err}"
    );
    // Refused at define: the module is as it was, and the rest compiles.
    m.finalize_definitions().unwrap();
    assert_eq!(call1(&m, f, 5), 6);
}

/// `verify_input` checks every defined function with Cranelift's verifier before the passes
/// (an invalid function is reported by name even when it would merge away); without it, the
/// code that is compiled is verified as Cranelift verifies it.
#[test]
fn invalid_functions_are_refused_at_define() {
    // With Cranelift's default flags (`enable_verifier` on), as the plain module's compile at
    // define; with the verifier off, only when `verify_input` asks for it.
    for (flags, verify_input) in [
        (&[][..], false),
        (&[("enable_verifier", "false")][..], true),
    ] {
        let b = JITBuilder::with_isa(isa(flags), default_libcall_names());
        let config = MergeConfig {
            verify_input,
            ..Default::default()
        };
        let mut m = MergeModule::with_config(JITModule::new(b), config);
        let s = sig(&m, 1);
        let f = m.declare_function("f", Linkage::Export, &s).unwrap();
        let bad = m.declare_function("bad", Linkage::Export, &s).unwrap();
        affine(&mut m, f, 3);
        // `bad` returns nothing from a function that returns an i64.
        let mut ctx = m.make_context();
        ctx.func.signature = s.clone();
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let e = b.create_block();
        b.append_block_params_for_function_params(e);
        b.switch_to_block(e);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(m.target_config());
        let err = m.define_function(bad, &mut ctx).unwrap_err();
        assert!(
            matches!(
                err,
                ModuleError::Compilation(cranelift_codegen::CodegenError::Verifier(_))
            ),
            "{err}"
        );
        // As if that define never happened: the rest compiles, and `bad` can be defined.
        affine(&mut m, bad, 4);
        m.finalize_definitions().unwrap();
        assert_eq!(call1(&m, f, 5), 16);
        assert_eq!(call1(&m, bad, 5), 21);
    }
}

/// Object files: a merged function is an alias symbol at its survivor's code; a thunk has
/// code of its own; the object is smaller than a plain one.
#[test]
fn object_files_get_alias_symbols() {
    let make = |merge: bool| {
        let b = ObjectBuilder::new(isa(&[]), "t", default_libcall_names()).unwrap();
        let inner = ObjectModule::new(b);
        let mut m: Box<dyn Module> = if merge {
            Box::new(MergeModule::new(inner))
        } else {
            Box::new(inner)
        };
        let s = sig(&*m, 1);
        let ids: Vec<FuncId> = ["f", "g", "h"]
            .iter()
            .map(|n| m.declare_function(n, Linkage::Export, &s).unwrap())
            .collect();
        for &id in &ids {
            affine(&mut *m, id, 11);
        }
        (m, ids)
    };
    let (plain, _) = make(false);
    let (merged, ids) = make(true);
    // Recover the concrete types to finish.
    let plain = unsafe { Box::from_raw(Box::into_raw(plain) as *mut ObjectModule) };
    let merged = unsafe { Box::from_raw(Box::into_raw(merged) as *mut MergeModule<ObjectModule>) };
    let p = plain.finish();
    let q = merged.finish().unwrap();
    let sym = |f: FuncId| {
        let (id, defined) = q.functions[f].unwrap();
        let s = q.object.symbol(id);
        (defined, s.section, s.value)
    };
    let (df, sf, vf) = sym(ids[0]);
    assert!(df);
    for &g in &ids[1..] {
        let (dg, sg, vg) = sym(g);
        assert!(dg, "merged function's symbol is defined");
        assert_eq!((sg, vg), (sf, vf), "at the survivor's code");
    }
    let (pb, qb) = (p.emit().unwrap().len(), q.emit().unwrap().len());
    assert!(qb < pb, "object with aliases {qb} bytes, plain {pb}");
}

#[test]
fn merge_module_is_send() {
    fn send<T: Send>() {}
    send::<MergeModule<JITModule>>();
    send::<MergeModule<ObjectModule>>();
}

/// Typed configuration: passes as values, the machine's threads by default.
#[test]
fn typed_configuration() {
    let c = MergeConfig::default();
    assert_eq!(c.passes, vec![PassKind::Merge, PassKind::MergeSimilar]);
    assert_eq!(c.threads, mergelift::Threads::Available);
    assert_eq!(mergelift::Threads::None.get(), 1);
    let mut m = jit_with(MergeConfig::with_passes(&[]));
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 3);
    affine(&mut m, g, 3);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(g), None, "no pass, no merge");
    assert_eq!(m.stats().get(mergelift::Counter::Compiled), 2);
}

/// Compiling on several threads gives the same merges, code bytes and behaviour as on one, in
/// a JIT and in an object file.
#[test]
fn threads_compile_the_same_module() {
    let build = |m: &mut dyn Module| -> Vec<FuncId> {
        let s = sig(m, 1);
        let mut ids = Vec::new();
        for k in 0..24 {
            let id = m
                .declare_function(&format!("f{k}"), Linkage::Export, &s)
                .unwrap();
            // Every third function repeats an earlier one.
            affine(
                m,
                id,
                (k % 8) as i64 + 2 + (k / 3) as i64 * (k % 3 != 0) as i64,
            );
            ids.push(id);
        }
        ids
    };
    let mut bytes = Vec::new();
    let mut results = Vec::new();
    for threads in [Threads::None, Threads::Count(2), Threads::Count(5)] {
        let mut m = jit_with(MergeConfig {
            threads,
            ..MergeConfig::default()
        });
        let ids = build(&mut m);
        m.finalize_definitions().unwrap();
        results.push(ids.iter().map(|&id| call1(&m, id, 7)).collect::<Vec<_>>());
        bytes.push((
            ids.iter().map(|&id| m.code_bytes(id)).collect::<Vec<_>>(),
            ids.iter().map(|&id| m.merged_into(id)).collect::<Vec<_>>(),
        ));
        // The same through an object file.
        let b = ObjectBuilder::new(isa(&[]), "t", default_libcall_names()).unwrap();
        let mut o = MergeModule::with_config(
            ObjectModule::new(b),
            MergeConfig {
                threads,
                ..MergeConfig::default()
            },
        );
        build(&mut o);
        let product = o.finish().unwrap();
        assert!(!product.emit().unwrap().is_empty());
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(bytes[0], bytes[2]);
    assert!(
        bytes[0].1.iter().any(|m| m.is_some()),
        "some functions merge"
    );
}

fn object_module(config: MergeConfig) -> MergeModule<ObjectModule> {
    let b = ObjectBuilder::new(isa(&[]), "t", default_libcall_names()).unwrap();
    MergeModule::with_config(ObjectModule::new(b), config)
}

/// Object files through the `Module` trait: identical, near-identical (merge-similar thunks
/// and a shared body), recursive and mutually recursive functions, a data object holding two
/// equal functions' addresses, and the `Distinct` policy: every declared symbol is defined,
/// merged exported functions alias their survivor, and addresses that must stay distinct do.
#[test]
fn object_files_through_the_module_trait() {
    for policy in [AddressPolicy::Shared, AddressPolicy::Distinct] {
        let mut m = object_module(MergeConfig {
            address_policy: policy,
            ..MergeConfig::default()
        });
        let s = sig(&m, 1);
        let names = [
            "same_a", "same_b", "near_a", "near_b", "fact0", "fact1", "ping", "pong", "va", "vb",
        ];
        let ids: Vec<FuncId> = names
            .iter()
            .map(|n| m.declare_function(n, Linkage::Export, &s).unwrap())
            .collect();
        affine(&mut m, ids[0], 3);
        affine(&mut m, ids[1], 3);
        // Near-duplicates large enough for merge-similar's cost model.
        for (k, &id) in ids[2..4].iter().enumerate() {
            define(&mut m, id, &[], |b, p, _| {
                let mut v = p[0];
                let kk = b.ins().iconst(types::I64, 17 + k as i64);
                for _ in 0..24 {
                    let t = b.ins().imul(v, kk);
                    v = b.ins().bxor(t, p[0]);
                }
                b.ins().return_(&[v]);
            });
        }
        fact(&mut m, ids[4], ids[4]);
        fact(&mut m, ids[5], ids[5]);
        fact(&mut m, ids[6], ids[7]);
        fact(&mut m, ids[7], ids[6]);
        affine(&mut m, ids[8], 9);
        affine(&mut m, ids[9], 9);
        let vt = m
            .declare_data("vtable", Linkage::Export, false, false)
            .unwrap();
        let mut d = DataDescription::new();
        d.define_zeroinit(16);
        let (ra, rb) = (
            m.declare_func_in_data(ids[8], &mut d),
            m.declare_func_in_data(ids[9], &mut d),
        );
        d.write_function_addr(0, ra);
        d.write_function_addr(8, rb);
        m.define_data(vt, &d).unwrap();
        // Run the passes and compile now (`finish` would too, but consumes the module).
        m.flush().unwrap();
        // (Merged into a function of the host's, or into a shared body.)
        let merged: Vec<Option<MergeKind>> = ids.iter().map(|&id| m.merge_kind(id)).collect();
        let p = m.finish().unwrap();
        let at = |f: FuncId| {
            let (sym, defined) = p.functions[f].expect("declared");
            assert!(
                defined,
                "{policy:?}: {} is not defined",
                names[f.as_u32() as usize]
            );
            let s = p.object.symbol(sym);
            (s.section, s.value)
        };
        for &id in &ids {
            at(id);
        }
        // Equal exported functions: one code address under `Shared`, two under `Distinct`.
        assert_eq!(
            at(ids[0]) == at(ids[1]),
            policy == AddressPolicy::Shared,
            "{policy:?}"
        );
        assert!(merged[1].is_some() || merged[0].is_some(), "{policy:?}");
        assert!(
            merged[5].is_some() || merged[4].is_some(),
            "{policy:?}: fact0/fact1"
        );
        // Addresses stored in data stay distinct under every policy.
        assert_ne!(at(ids[8]), at(ids[9]), "{policy:?}");
        // The near-duplicates share a body: each keeps a symbol of its own (a thunk).
        assert!(
            merged[2].is_some() && merged[3].is_some(),
            "{policy:?}: near-duplicates"
        );
        assert_ne!(at(ids[2]), at(ids[3]), "{policy:?}");
        assert!(!p.emit().unwrap().is_empty());
    }
}

/// The typed errors hold for object files too.
#[test]
fn object_file_errors_are_typed() {
    let mut m = object_module(MergeConfig::default());
    let s = sig(&m, 1);
    let imp = m.declare_function("imp", Linkage::Import, &s).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = s.clone();
    assert!(matches!(
        m.define_function(imp, &mut ctx),
        Err(ModuleError::InvalidImportDefinition(n)) if n == "imp"
    ));
    let mut s32 = m.make_signature();
    s32.params.push(AbiParam::new(types::I32));
    s32.returns.push(AbiParam::new(types::I32));
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    assert!(matches!(
        m.declare_function("f", Linkage::Import, &s32),
        Err(ModuleError::IncompatibleSignature(..))
    ));
    affine(&mut m, f, 1);
    let mut ctx = m.make_context();
    ctx.func.signature = s.clone();
    assert!(matches!(
        m.define_function(f, &mut ctx),
        Err(ModuleError::DuplicateDefinition(n)) if n == "f"
    ));
    assert!(m.finish().is_ok());
}

/// Near-identical exported functions of mixed parameter types keep thunks to a shared body;
/// the thunks are machine code (`native_thunks`) or compiled by Cranelift, with the same
/// results. With seven integer parameters (one on the stack) Cranelift writes the thunks.
#[test]
fn native_thunks_pass_constants_of_every_class() {
    // f_k(x: i64, y: f64, z: i32) -> f64 = (x * A_k + B_k) * y * C_k + (z + D_k), with
    // A small, B beyond 32 bits, C a float, D a negative i32.
    let consts = |k: i64| (3 + k, (1i64 << 40) + k, 0.5 + k as f64, -7 - k as i32);
    let expect = |k: i64, x: i64, y: f64, z: i32| {
        let (a, b, c, d) = consts(k);
        (x * a + b) as f64 * y * c + f64::from(z + d)
    };
    for native in [true, false] {
        let mut m = jit_with(MergeConfig {
            debug: mergelift::tools::DebugOptions {
                native_thunks: native,
                ..Default::default()
            },
            ..Default::default()
        });
        let mut s = m.make_signature();
        s.params.push(AbiParam::new(types::I64));
        s.params.push(AbiParam::new(types::F64));
        s.params.push(AbiParam::new(types::I32));
        s.returns.push(AbiParam::new(types::F64));
        let ids: Vec<FuncId> = (0..4)
            .map(|k| {
                m.declare_function(&format!("f{k}"), Linkage::Export, &s)
                    .unwrap()
            })
            .collect();
        for (k, &id) in ids.iter().enumerate() {
            let (a, b, c, d) = consts(k as i64);
            define(&mut m, id, &[], |bd, p, _| {
                let t = bd.ins().imul_imm_s(p[0], a);
                let t = bd.ins().iadd_imm_s(t, b);
                let t = bd.ins().fcvt_from_sint(types::F64, t);
                let t = bd.ins().fmul(t, p[1]);
                let cc = bd.ins().f64const(c);
                let t = bd.ins().fmul(t, cc);
                let dd = bd.ins().iconst(types::I32, i64::from(d));
                let z = bd.ins().iadd(p[2], dd);
                let z = bd.ins().fcvt_from_sint(types::F64, z);
                let r = bd.ins().fadd(t, z);
                bd.ins().return_(&[r]);
            });
        }
        m.finalize_definitions().unwrap();
        assert!(
            m.stats().get(mergelift::Counter::MergedSimilar) >= 3,
            "{:?}",
            m.stats()
        );
        assert_eq!(
            m.stats().get(mergelift::Counter::NativeThunks) > 0,
            native,
            "native thunks: {:?}",
            m.stats()
        );
        for (k, &id) in ids.iter().enumerate() {
            // SAFETY: the signature is `(i64, f64, i32) -> f64`.
            let f: extern "C" fn(i64, f64, i32) -> f64 =
                unsafe { std::mem::transmute(m.get_finalized_function(id)) };
            for (x, y, z) in [(5, 1.5, 9), (-3, -0.25, i32::MIN + 100), (0, 2.0, -1)] {
                assert_eq!(f(x, y, z), expect(k as i64, x, y, z), "f{k}({x}, {y}, {z})");
            }
        }
    }
    // Seven integer parameters: the extra argument would go on the stack.
    let mut m = jit();
    let s = sig(&m, 7);
    let ids: Vec<FuncId> = (0..3)
        .map(|k| {
            m.declare_function(&format!("g{k}"), Linkage::Export, &s)
                .unwrap()
        })
        .collect();
    for (k, &id) in ids.iter().enumerate() {
        define(&mut m, id, &[], |bd, p, _| {
            let mut t = bd.ins().imul_imm_s(p[0], 1000 + k as i64);
            for &v in &p[1..] {
                t = bd.ins().iadd(t, v);
            }
            let t = bd.ins().imul_imm_s(t, 3);
            bd.ins().return_(&[t]);
        });
    }
    m.finalize_definitions().unwrap();
    assert_eq!(
        m.stats().get(mergelift::Counter::NativeThunks),
        0,
        "{:?}",
        m.stats()
    );
    for (k, &id) in ids.iter().enumerate() {
        // SAFETY: the signature is seven i64 to i64.
        let f: extern "C" fn(i64, i64, i64, i64, i64, i64, i64) -> i64 =
            unsafe { std::mem::transmute(m.get_finalized_function(id)) };
        assert_eq!(f(2, 1, 1, 1, 1, 1, 1), (2 * (1000 + k as i64) + 6) * 3);
    }
}

/// With `AddressPolicy::Distinct`, an exported duplicate keeps a thunk of its own: a jump in
/// machine code, at its own address.
#[test]
fn distinct_addresses_get_native_jump_thunks() {
    let mut m = jit_with(MergeConfig {
        address_policy: AddressPolicy::Distinct,
        ..Default::default()
    });
    let s = sig(&m, 1);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 7);
    affine(&mut m, g, 7);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merge_kind(g), Some(MergeKind::Thunked));
    assert_eq!(m.stats().get(mergelift::Counter::NativeThunks), 1);
    // movabs r11, f; jmp r11
    assert_eq!(m.code_bytes(g), Some(13));
    assert_ne!(m.get_finalized_function(f), m.get_finalized_function(g));
    assert_eq!(call1(&m, g, 2), 15);
}

/// Three local near-duplicates `m0`..`m2` of signature `s`: `near_duplicate_value(k, x)`.
fn near_duplicates(m: &mut dyn Module, s: &Signature) -> Vec<FuncId> {
    let members: Vec<FuncId> = (0..3)
        .map(|k| {
            m.declare_function(&format!("m{k}"), Linkage::Local, s)
                .unwrap()
        })
        .collect();
    for (k, &id) in members.iter().enumerate() {
        define(m, id, &[], |b, p, _| {
            let t = b.ins().imul_imm_s(p[0], 11 + k as i64);
            let t = b.ins().iadd_imm_s(t, 1 << 40);
            let t = b.ins().imul_imm_s(t, 5);
            let t = b.ins().iadd_imm_s(t, -9);
            b.ins().return_(&[t]);
        });
    }
    members
}

/// What near-duplicate `m{k}` returns for `x`.
fn near_duplicate_value(k: i64, x: i64) -> i64 {
    ((x * (11 + k) + (1 << 40)) * 5) - 9
}

/// Callers of near-identical functions call the shared body with the extra arguments; the
/// callers are compiled from the IR they were defined with (the call rewritten there, not
/// lowered from LIR), and behave the same either way. With one last flush the caller (its
/// shape is its own) is not even lifted: its calls are rewritten all the same.
#[test]
fn callers_of_similar_functions_are_rewritten_in_their_own_ir() {
    for (lower_all, last) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut m = jit_with(MergeConfig {
            debug: mergelift::tools::DebugOptions {
                lower_all,
                ..Default::default()
            },
            ..Default::default()
        });
        let s = sig(&m, 1);
        let members = near_duplicates(&mut m, &s);
        // caller(x) = m0(x) + m1(x + 1) + m2(x + 2).
        let caller = m.declare_function("caller", Linkage::Export, &s).unwrap();
        define(&mut m, caller, &members, |b, p, f| {
            let mut acc = b.ins().iconst(types::I64, 0);
            for (k, &fr) in f.iter().enumerate() {
                let a = b.ins().iadd_imm_s(p[0], k as i64);
                let c = b.ins().call(fr, &[a]);
                let r = b.inst_results(c)[0];
                acc = b.ins().iadd(acc, r);
            }
            b.ins().return_(&[acc]);
        });
        if last {
            m.flush_last().unwrap();
        }
        m.finalize_definitions().unwrap();
        let member = near_duplicate_value;
        for x in [0, 3, -17] {
            let want: i64 = (0..3).map(|k| member(k, x + k)).sum();
            assert_eq!(
                call1(&m, caller, x),
                want,
                "lower_all {lower_all} last {last}"
            );
        }
        assert!(
            m.stats().get(mergelift::Counter::MergedSimilar) >= 2,
            "{:?}",
            m.stats()
        );
        assert_eq!(
            m.stats().get(mergelift::Counter::CallsRewrittenInInput),
            u64::from(!lower_all),
            "{:?}",
            m.stats()
        );
        // The caller is the only function of its shape: unlifted, its calls rewritten in its
        // own IR (`lower_all` lifts every function).
        assert_eq!(
            m.stats().get(mergelift::Counter::NotLifted),
            u64::from(!lower_all),
            "{:?} last {last}",
            m.stats()
        );
    }
}

/// A function of a later batch calls a local near-duplicate that an earlier batch folded
/// into a shared body (it has no code of its own): the call reaches the shared body with the
/// member's extra arguments.
#[test]
fn later_batches_call_folded_members() {
    // The host fetches no local function: members are folded with no code of their own.
    let mut m = jit_with(MergeConfig {
        fetch_locals: false,
        ..Default::default()
    });
    let s = sig(&m, 1);
    let members = near_duplicates(&mut m, &s);
    let first = m.declare_function("first", Linkage::Export, &s).unwrap();
    define(&mut m, first, &members, |b, p, f| {
        let mut acc = b.ins().iconst(types::I64, 0);
        for &fr in f {
            let c = b.ins().call(fr, &[p[0]]);
            let r = b.inst_results(c)[0];
            acc = b.ins().iadd(acc, r);
        }
        b.ins().return_(&[acc]);
    });
    m.finalize_definitions().unwrap();
    let member = near_duplicate_value;
    assert_eq!(
        call1(&m, first, 2),
        (0..3).map(|k| member(k, 2)).sum::<i64>()
    );
    let folded: Vec<usize> = (0..3)
        .filter(|&k| m.merge_kind(members[k]) == Some(MergeKind::Folded))
        .collect();
    assert!(!folded.is_empty(), "{:?}", m.stats());
    // A second batch calls a folded member, from a function compiled from its input and from
    // two near-duplicates (lowered from LIR, as their shared body).
    let k = folded[0];
    let later = m.declare_function("later", Linkage::Export, &s).unwrap();
    define(&mut m, later, &[members[k]], |b, p, f| {
        let x = b.ins().iadd_imm_s(p[0], 1);
        let c = b.ins().call(f[0], &[x]);
        let r = b.inst_results(c)[0];
        let r = b.ins().iadd_imm_s(r, 7);
        b.ins().return_(&[r]);
    });
    let twins: Vec<FuncId> = (0..2)
        .map(|j| {
            m.declare_function(&format!("twin{j}"), Linkage::Export, &s)
                .unwrap()
        })
        .collect();
    for (j, &id) in twins.iter().enumerate() {
        define(&mut m, id, &[members[k]], |b, p, f| {
            let x = b.ins().imul_imm_s(p[0], 3);
            let x = b.ins().iadd_imm_s(x, 1000 + j as i64);
            let c = b.ins().call(f[0], &[x]);
            let r = b.inst_results(c)[0];
            let r = b.ins().imul_imm_s(r, 2);
            b.ins().return_(&[r]);
        });
    }
    m.finalize_definitions().unwrap();
    assert_eq!(call1(&m, later, 4), member(k as i64, 5) + 7);
    for (j, &id) in twins.iter().enumerate() {
        assert_eq!(call1(&m, id, 4), member(k as i64, 12 + 1000 + j as i64) * 2);
    }
}
