//! A function that fails to compile fails alone: the rest of its batch is compiled, the
//! failed function is undefined again (it can be defined anew), the error is a
//! `ModuleError::Backend` holding a `FunctionError` that names every failed function, and the
//! module stays usable. Where a function that failed was a merge survivor or a shared body,
//! the functions merged into it get code of their own. And a function Mergelift cannot
//! represent is compiled as it came, never an error.

// `ModuleResult` is cranelift-module's own type, large as it is.
#![allow(clippy::result_large_err)]

use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, InstBuilder, Signature, StackSlotData, StackSlotKind, Value,
};
use cranelift_codegen::isa::{CallConv, TargetIsa};
use cranelift_codegen::{settings, CodegenError, Context};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{
    default_libcall_names, DataDescription, DataId, FuncId, Linkage, Module, ModuleDeclarations,
    ModuleError, ModuleReloc, ModuleResult,
};
use mergelift::{FunctionError, MergeConfig, MergeModule, PassKind};
use std::collections::HashSet;

fn jit() -> JITModule {
    let isa = cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(settings::builder()))
        .unwrap();
    JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()))
}

fn sig(m: &dyn Module) -> Signature {
    let mut s = m.make_signature();
    s.params.push(AbiParam::new(types::I64));
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// Define `id` as `body(builder, x, callees)`.
fn define(
    m: &mut dyn Module,
    id: FuncId,
    callees: &[FuncId],
    body: impl FnOnce(&mut FunctionBuilder, Value, &[FuncRef]) -> Value,
) -> ModuleResult<()> {
    let mut ctx = m.make_context();
    ctx.func.signature = m.declarations().get_function_decl(id).signature.clone();
    let refs: Vec<FuncRef> = (callees.iter())
        .map(|&c| m.declare_func_in_func(c, &mut ctx.func))
        .collect();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let x = b.block_params(entry)[0];
    let r = body(&mut b, x, &refs);
    b.ins().return_(&[r]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx)
}

/// `x * k + 1`, in a few more instructions than merging needs.
fn affine(m: &mut dyn Module, id: FuncId, k: i64) {
    define(m, id, &[], |b, x, _| {
        let y = b.ins().imul_imm_s(x, k);
        let z = b.ins().iadd_imm_s(y, 1);
        let w = b.ins().bxor_imm_s(z, 0x55);
        b.ins().bxor_imm_s(w, 0x55)
    })
    .unwrap();
}

/// `x * k + 1` through a stack slot too large for any frame: Cranelift's verifier accepts it,
/// its compile fails ("Implementation limit exceeded").
fn too_large(m: &mut dyn Module, id: FuncId, k: i64) -> ModuleResult<()> {
    define(m, id, &[], |b, x, _| {
        for _ in 0..2 {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                u32::MAX - 64,
                0,
            ));
        }
        let y = b.ins().imul_imm_s(x, k);
        b.ins().iadd_imm_s(y, 1)
    })
}

/// `callee(x) + 100`.
fn caller(m: &mut dyn Module, id: FuncId, callee: FuncId) {
    define(m, id, &[callee], |b, x, f| {
        let c = b.ins().call(f[0], &[x]);
        let r = b.inst_results(c)[0];
        b.ins().iadd_imm_s(r, 100)
    })
    .unwrap();
}

fn call(p: *const u8, x: i64) -> i64 {
    // SAFETY: every function called here has the signature `(i64) -> i64`.
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(p) };
    f(x)
}

/// The failed functions a flush error names.
fn failed(e: &ModuleError) -> Vec<(FuncId, String)> {
    let ModuleError::Backend(b) = e else {
        panic!("not a backend error: {e}")
    };
    let f = b
        .downcast_ref::<FunctionError>()
        .unwrap_or_else(|| panic!("not a FunctionError: {e}"));
    f.failures
        .iter()
        .map(|f| (f.id, f.function.clone()))
        .collect()
}

/// Cranelift fails the compile of one function: the rest of the batch is finalized, the
/// failed one is undefined and can be defined again, and the module goes on.
#[test]
fn a_function_that_fails_to_compile_fails_alone() {
    let mut m = MergeModule::new(jit());
    let s = sig(&m);
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    let big = m.declare_function("big", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 3);
    affine(&mut m, g, 3);
    too_large(&mut m, big, 3).unwrap();
    let e = m.finalize_definitions().unwrap_err();
    assert_eq!(failed(&e), vec![(big, "big".to_string())]);
    assert!(e.to_string().contains("big"), "{e}");
    let ModuleError::Backend(b) = &e else {
        unreachable!()
    };
    let fe = b.downcast_ref::<FunctionError>().unwrap();
    assert!(
        matches!(
            fe.failures[0].error,
            ModuleError::Compilation(CodegenError::ImplLimitExceeded)
        ),
        "{e}"
    );
    // The others were compiled and finalized.
    assert_eq!(call(m.get_finalized_function(f), 5), 16);
    assert_eq!(call(m.get_finalized_function(g), 5), 16);
    assert!(!m.is_pending(big));
    // Defined again, it compiles; and later batches still merge into the first.
    affine(&mut m, big, 3);
    let h = m.declare_function("h", Linkage::Export, &s).unwrap();
    affine(&mut m, h, 3);
    m.finalize_definitions().unwrap();
    assert_eq!(call(m.get_finalized_function(big), 5), 16);
    assert_eq!(call(m.get_finalized_function(h), 5), 16);
    assert_eq!(m.merged_into(h), Some(f));
}

/// A failed function that a merge survived on: the functions equal to it fail as they would
/// on their own, with their own errors. Code compiled now calls it, so the JIT is not
/// finalized (it could not resolve the call) until it is defined again.
#[test]
fn callers_of_a_failed_function_wait_for_it() {
    let mut m = MergeModule::new(jit());
    let s = sig(&m);
    let big = m.declare_function("big", Linkage::Export, &s).unwrap();
    let twin = m.declare_function("twin", Linkage::Export, &s).unwrap();
    let c = m.declare_function("c", Linkage::Export, &s).unwrap();
    too_large(&mut m, big, 3).unwrap();
    too_large(&mut m, twin, 3).unwrap();
    caller(&mut m, c, twin);
    let e = m.finalize_definitions().unwrap_err();
    let mut names: Vec<String> = failed(&e).into_iter().map(|(_, n)| n).collect();
    names.sort();
    assert_eq!(names, ["big", "twin"]);
    // Finalizing again before `twin` has code says why, and does not panic.
    let again = m.finalize_definitions().unwrap_err().to_string();
    assert!(
        again.contains("twin") && again.contains("define"),
        "{again}"
    );
    affine(&mut m, big, 3);
    affine(&mut m, twin, 3);
    m.finalize_definitions().unwrap();
    assert_eq!(call(m.get_finalized_function(c), 5), 116);
    assert_eq!(call(m.get_finalized_function(twin), 5), 16);
    assert_eq!(call(m.get_finalized_function(big), 5), 16);
}

/// A module that refuses to define the functions named in `fail` (and, with `fail_anonymous`,
/// the anonymous ones: `merge-similar`'s shared bodies), as a backend would that cannot
/// compile them; everything else goes to the JIT module inside.
struct Refusing {
    jit: JITModule,
    fail: HashSet<String>,
    fail_anonymous: bool,
}

impl Refusing {
    fn refuses(&self, id: FuncId) -> bool {
        match &self.jit.declarations().get_function_decl(id).name {
            Some(n) => self.fail.contains(n),
            None => self.fail_anonymous,
        }
    }
}

impl Module for Refusing {
    fn isa(&self) -> &dyn TargetIsa {
        self.jit.isa()
    }
    fn declarations(&self) -> &ModuleDeclarations {
        self.jit.declarations()
    }
    fn declare_function(
        &mut self,
        name: &str,
        linkage: Linkage,
        signature: &Signature,
    ) -> ModuleResult<FuncId> {
        self.jit.declare_function(name, linkage, signature)
    }
    fn declare_anonymous_function(&mut self, signature: &Signature) -> ModuleResult<FuncId> {
        self.jit.declare_anonymous_function(signature)
    }
    fn declare_data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        tls: bool,
    ) -> ModuleResult<DataId> {
        self.jit.declare_data(name, linkage, writable, tls)
    }
    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        self.jit.declare_anonymous_data(writable, tls)
    }
    fn define_function_with_control_plane(
        &mut self,
        func: FuncId,
        ctx: &mut Context,
        ctrl_plane: &mut cranelift_codegen::control::ControlPlane,
    ) -> ModuleResult<()> {
        if self.refuses(func) {
            return Err(ModuleError::Compilation(CodegenError::ImplLimitExceeded));
        }
        self.jit
            .define_function_with_control_plane(func, ctx, ctrl_plane)
    }
    fn define_function_bytes(
        &mut self,
        func: FuncId,
        alignment: u64,
        bytes: &[u8],
        relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        if self.refuses(func) {
            return Err(ModuleError::Compilation(CodegenError::ImplLimitExceeded));
        }
        self.jit
            .define_function_bytes(func, alignment, bytes, relocs)
    }
    fn define_data(&mut self, data: DataId, desc: &DataDescription) -> ModuleResult<()> {
        self.jit.define_data(data, desc)
    }
}

/// `x * k + 1`, in a body long enough for `merge-similar` to share.
fn near(m: &mut dyn Module, id: FuncId, k: i64) {
    define(m, id, &[], |b, x, _| {
        let mut v = b.ins().imul_imm_s(x, k);
        for j in 0..12 {
            v = b.ins().iadd_imm_s(v, j);
            v = b.ins().bxor_imm_s(v, 0x5a5a);
            v = b.ins().bxor_imm_s(v, 0x5a5a);
            v = b.ins().iadd_imm_s(v, -j);
        }
        b.ins().iadd_imm_s(v, 1)
    })
    .unwrap();
}

/// A survivor and a shared body that fail: what was merged into them is compiled from its
/// own input, and the callers call it there.
#[test]
fn members_of_a_failed_survivor_get_code_of_their_own() {
    for threads in [mergelift::Threads::None, mergelift::Threads::Count(2)] {
        let inner = Refusing {
            jit: jit(),
            fail: HashSet::from(["a".to_string()]),
            fail_anonymous: true,
        };
        let config = MergeConfig {
            threads,
            ..Default::default()
        };
        let mut m = MergeModule::with_config(inner, config);
        let s = sig(&m);
        let a = m.declare_function("a", Linkage::Export, &s).unwrap();
        let b = m.declare_function("b", Linkage::Export, &s).unwrap();
        let cb = m.declare_function("cb", Linkage::Export, &s).unwrap();
        affine(&mut m, a, 7);
        affine(&mut m, b, 7);
        caller(&mut m, cb, b);
        let xs: Vec<FuncId> = (0..3)
            .map(|k| {
                let x = (m.declare_function(&format!("x{k}"), Linkage::Local, &s)).unwrap();
                near(&mut m, x, 10 + k);
                x
            })
            .collect();
        let cxs: Vec<FuncId> = xs
            .iter()
            .enumerate()
            .map(|(k, &x)| {
                let c = (m.declare_function(&format!("cx{k}"), Linkage::Export, &s)).unwrap();
                caller(&mut m, c, x);
                c
            })
            .collect();
        let e = m.flush().unwrap_err();
        // Only the host's own function is named; the shared body is Mergelift's.
        assert_eq!(failed(&e), vec![(a, "a".to_string())], "{threads:?}");
        assert!(
            m.stats().get(mergelift::Counter::MergedSimilar) > 0,
            "{:?}",
            m.stats()
        );
        for &g in [b].iter().chain(&xs) {
            assert_eq!(m.merged_into(g), None, "{threads:?}");
            assert!(m.code_bytes(g).is_some(), "{threads:?}");
        }
        m.inner_mut().jit.finalize_definitions().unwrap();
        let jit = &m.inner().jit;
        assert_eq!(call(jit.get_finalized_function(b), 2), 15);
        assert_eq!(call(jit.get_finalized_function(cb), 2), 115);
        // Compiled plainly, for the results the members must give.
        let mut plain = jit_module_with_near();
        for (k, (&x, &c)) in xs.iter().zip(&cxs).enumerate() {
            let want = plain(k);
            assert_eq!(call(jit.get_finalized_function(x), 9), want, "x{k}");
            assert_eq!(call(jit.get_finalized_function(c), 9), want + 100, "cx{k}");
        }
        // `a` is undefined again; the module takes it.
        m.inner_mut().fail.clear();
        affine(&mut m, a, 7);
        m.flush().unwrap();
        assert!(m.code_bytes(a).is_some());
    }
}

/// Module functions `names`, declared with `linkage` in `m`.
fn declare_all(m: &mut dyn Module, names: &[&str], linkage: Linkage) -> Vec<FuncId> {
    let s = sig(m);
    (names.iter())
        .map(|n| m.declare_function(n, linkage, &s).unwrap())
        .collect()
}

/// A survivor of an exact merge that is itself a member of a shared body that fails: it is
/// compiled once, from its input, and the function merged into it uses that code.
#[test]
fn a_survivor_folded_into_a_failed_shared_body_is_compiled_once() {
    let inner = Refusing {
        jit: jit(),
        fail: HashSet::new(),
        fail_anonymous: true,
    };
    let mut m = MergeModule::new(inner);
    let ids = declare_all(&mut m, &["f", "g", "h0", "h1"], Linkage::Export);
    for (&id, k) in ids.iter().zip([10, 10, 11, 12]) {
        near(&mut m, id, k);
    }
    // Only the shared body failed, and it is Mergelift's: nothing to report.
    m.flush().unwrap();
    assert!(
        m.stats().get(mergelift::Counter::MergedSimilar) >= 3,
        "{:?}",
        m.stats()
    );
    assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
    m.inner_mut().jit.finalize_definitions().unwrap();
    let mut want = jit_module_with_near();
    for (&id, k) in ids.iter().zip([0, 0, 1, 2]) {
        let code = m.merged_into(id).unwrap_or(id);
        assert_eq!(call(m.inner().jit.get_finalized_function(code), 9), want(k));
    }
}

/// Survivors that call a member of a shared body that fails call the member's own code.
#[test]
fn survivors_calling_a_member_of_a_failed_shared_body_call_its_own_code() {
    let inner = Refusing {
        jit: jit(),
        fail: HashSet::new(),
        fail_anonymous: true,
    };
    let mut m = MergeModule::new(inner);
    let xs = declare_all(&mut m, &["x0", "x1", "x2"], Linkage::Local);
    for (&x, k) in xs.iter().zip(10..) {
        near(&mut m, x, k);
    }
    let cs = declare_all(&mut m, &["c", "c2"], Linkage::Export);
    for &c in &cs {
        caller(&mut m, c, xs[0]);
    }
    m.flush().unwrap();
    assert!(
        m.stats().get(mergelift::Counter::MergedSimilar) >= 3,
        "{:?}",
        m.stats()
    );
    assert_eq!(m.merged_into(cs[1]), Some(cs[0]));
    m.inner_mut().jit.finalize_definitions().unwrap();
    let want = jit_module_with_near()(0) + 100;
    assert_eq!(call(m.inner().jit.get_finalized_function(cs[0]), 9), want);
}

/// A passed-through function of a later batch takes the address of a function an earlier
/// batch merged away: that one gets a thunk of its own, as for lifted code.
#[test]
fn a_passed_through_function_takes_the_address_of_a_merged_one() {
    let mut m = MergeModule::new(jit());
    let ids = declare_all(&mut m, &["f", "g"], Linkage::Export);
    affine(&mut m, ids[0], 3);
    affine(&mut m, ids[1], 3);
    m.finalize_definitions().unwrap();
    assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
    // `q`: a patchable call (the lifter cannot represent it) and `g`'s address.
    let mut odd = m.make_signature();
    odd.params.push(AbiParam::new(types::I64));
    odd.call_conv = CallConv::PreserveAll;
    let p = m.declare_function("p", Linkage::Local, &odd).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = odd;
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(p, &mut ctx).unwrap();
    let q = declare_all(&mut m, &["q"], Linkage::Export)[0];
    define(&mut m, q, &[p, ids[1]], |b, x, f| {
        b.func.dfg.ext_funcs[f[0]].patchable = true;
        b.func.dfg.ext_funcs[f[0]].colocated = true;
        b.ins().call(f[0], &[x]);
        b.ins().func_addr(types::I64, f[1])
    })
    .unwrap();
    m.finalize_definitions().unwrap();
    assert_eq!(
        m.passed_through().map(|(id, _)| id).collect::<Vec<_>>(),
        [q]
    );
    let g = call(m.get_finalized_function(q), 0) as usize;
    assert_eq!(g, m.get_finalized_function(ids[1]) as usize);
    assert_ne!(g, m.get_finalized_function(ids[0]) as usize);
    assert_eq!(call(g as *const u8, 5), 16);
}

/// A caller that a pass turned into a thunk-shaped function calling a shared body (here `dce`
/// removes all but the call) is not written as a jump to the shared body when that failed.
#[test]
fn a_thunk_shaped_caller_of_a_failed_shared_body_calls_its_own_callee() {
    let inner = Refusing {
        jit: jit(),
        fail: HashSet::new(),
        fail_anonymous: true,
    };
    let config = MergeConfig {
        passes: vec![PassKind::Merge, PassKind::MergeSimilar, PassKind::Dce],
        ..Default::default()
    };
    let mut m = MergeModule::with_config(inner, config);
    let xs = declare_all(&mut m, &["x0", "x1", "x2"], Linkage::Local);
    for (&x, k) in xs.iter().zip(10..) {
        near(&mut m, x, k);
    }
    let w = declare_all(&mut m, &["w"], Linkage::Export)[0];
    define(&mut m, w, &[xs[0]], |b, x, f| {
        let _dead = b.ins().imul(x, x);
        let c = b.ins().call(f[0], &[x]);
        b.inst_results(c)[0]
    })
    .unwrap();
    m.flush().unwrap();
    assert!(
        m.stats().get(mergelift::Counter::MergedSimilar) >= 3,
        "{:?}",
        m.stats()
    );
    m.inner_mut().jit.finalize_definitions().unwrap();
    let want = jit_module_with_near()(0);
    assert_eq!(call(m.inner().jit.get_finalized_function(w), 9), want);
}

/// `near(k)(9)`, compiled by a plain JIT module.
fn jit_module_with_near() -> impl FnMut(usize) -> i64 {
    let mut j = jit();
    let s = sig(&j);
    let ids: Vec<FuncId> = (0..3)
        .map(|k| {
            let id = j
                .declare_function(&format!("x{k}"), Linkage::Export, &s)
                .unwrap();
            near(&mut j, id, 10 + k as i64);
            id
        })
        .collect();
    j.finalize_definitions().unwrap();
    move |k| call(j.get_finalized_function(ids[k]), 9)
}

/// A function Mergelift's IR cannot represent (here: a patchable call) is compiled as it came:
/// callable, its callee's address can be taken, and the rest of the batch merges as without
/// it. Its callee is in `preserve_all`, which the lifter takes.
#[test]
fn functions_the_lifter_cannot_represent_pass_through() {
    let mut m = MergeModule::new(jit());
    let s = sig(&m);
    // `preserve_all` (no results: Cranelift allows none in it): `*x += 1`.
    let mut odd = m.make_signature();
    odd.params.push(AbiParam::new(types::I64));
    odd.call_conv = CallConv::PreserveAll;
    let p = m.declare_function("p", Linkage::Local, &odd).unwrap();
    let mut ctx = m.make_context();
    ctx.func.signature = odd.clone();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let ptr = b.block_params(entry)[0];
    let flags = cranelift_codegen::ir::MemFlagsData::trusted();
    let v = b.ins().load(types::I64, flags, ptr, 0);
    let v = b.ins().iadd_imm_s(v, 1);
    b.ins().store(flags, v, ptr, 0);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(p, &mut ctx).unwrap();
    let f = m.declare_function("f", Linkage::Export, &s).unwrap();
    let g = m.declare_function("g", Linkage::Export, &s).unwrap();
    let c = m.declare_function("c", Linkage::Export, &s).unwrap();
    let addr = m.declare_function("addr", Linkage::Export, &s).unwrap();
    affine(&mut m, f, 3);
    affine(&mut m, g, 3);
    // `c(x)`: x + 1 through a patchable call of `p`, on the stack.
    define(&mut m, c, &[p], |b, x, f| {
        b.func.dfg.ext_funcs[f[0]].patchable = true;
        b.func.dfg.ext_funcs[f[0]].colocated = true;
        let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        b.ins().stack_store(types::I64, x, slot, 0);
        let a = b.ins().stack_addr(types::I64, slot, 0);
        b.ins().call(f[0], &[a]);
        b.ins().stack_load(types::I64, types::I64, slot, 0)
    })
    .unwrap();
    define(&mut m, addr, &[p], |b, _, f| {
        b.ins().func_addr(types::I64, f[0])
    })
    .unwrap();
    m.finalize_definitions().unwrap();
    let passed: Vec<FuncId> = m.passed_through().map(|(id, _)| id).collect();
    assert_eq!(passed, [c]);
    let why = m.passed_through().next().unwrap().1.to_string();
    assert!(why.contains("patchable"), "{why}");
    assert_eq!(m.stats().get(mergelift::Counter::PassedThrough), 1);
    assert_eq!(m.merged_into(g), Some(f));
    assert_eq!(call(m.get_finalized_function(c), 41), 42);
    assert_eq!(call(m.get_finalized_function(g), 2), 7);
    assert_eq!(
        call(m.get_finalized_function(addr), 0) as usize,
        m.get_finalized_function(p) as usize
    );
}

/// A function Cranelift cannot compile only for its frame (unused stack slots larger than a
/// frame can be) is never merged into an equal body without them: it fails as it would alone.
#[test]
fn a_frame_too_large_is_not_merged_away() {
    let mut m = MergeModule::new(jit());
    let ids = declare_all(&mut m, &["small", "big"], Linkage::Export);
    define(&mut m, ids[0], &[], |b, x, _| {
        let y = b.ins().imul_imm_s(x, 3);
        b.ins().iadd_imm_s(y, 1)
    })
    .unwrap();
    too_large(&mut m, ids[1], 3).unwrap();
    let e = m.finalize_definitions().unwrap_err();
    assert_eq!(failed(&e), vec![(ids[1], "big".to_string())]);
    assert_eq!(m.merged_into(ids[1]), None);
    assert_eq!(call(m.get_finalized_function(ids[0]), 5), 16);
}
