//! Compile functions named as in a `.clif` file through `MergeModule<JITModule>` and call them
//! with dynamic arguments: what the run-test runner and the fuzzer share.
//!
//! Each signature to call gets a trampoline `(fn_ptr, buf)` that loads the arguments from
//! 16-byte slots of `buf`, calls `fn_ptr` and stores the results back. The `try_call` sites of
//! the compiled code are registered with `__cranelift_throw`, the exception runtime of
//! Cranelift's run tests.

use crate::exn;
use cranelift_codegen::ir::{self, InstBuilder};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use jit_driver::jit_builder;
use jit_driver::{define_by_name, MergeConfig, MergeModule};
use midend::hash::HashMap;
use midend::Stats;
use std::sync::{Arc, Mutex};

/// A compiled set of functions, callable by name.
pub struct Harness {
    module: Option<MergeModule<JITModule>>,
    ids: HashMap<String, FuncId>,
    trampolines: Vec<(ir::Signature, FuncId)>,
    /// Exception-handler sites registered for `__cranelift_throw` (dropped before the code).
    exn_sites: exn::Registration,
}

impl Harness {
    /// Compile `funcs` (by their names) for `isa` with `config`, with a trampoline for each of
    /// `call_sigs`.
    pub fn compile(
        isa: OwnedTargetIsa,
        funcs: Vec<ir::Function>,
        config: MergeConfig,
        call_sigs: &[ir::Signature],
    ) -> Result<Harness, String> {
        let symbols = [(
            "__cranelift_throw".to_string(),
            exn::cranelift_throw as *const u8,
        )];
        let jit = JITModule::new(jit_builder(isa, &symbols));
        let mut m = MergeModule::with_config(jit, config);
        let pending: Arc<Mutex<Vec<(FuncId, exn::PendingSites)>>> = Arc::default();
        let sink = pending.clone();
        m.on_compiled(move |id, ctx| {
            if let Some(c) = ctx.compiled_code() {
                let sites = exn::pending_sites(c.buffer.call_sites());
                if !sites.is_empty() {
                    sink.lock().unwrap().push((id, sites));
                }
            }
        });
        let funcs = funcs.into_iter().map(|f| (Linkage::Export, f)).collect();
        let ids = define_by_name(&mut m, funcs).map_err(|e| format!("{e:#}"))?;
        let mut trampolines: Vec<(ir::Signature, FuncId)> = Vec::new();
        let mut fctx = FunctionBuilderContext::new();
        for sig in call_sigs {
            if trampolines.iter().any(|(s, _)| s == sig) {
                continue;
            }
            let tf = build_trampoline(sig, m.isa(), &mut fctx);
            let id = m
                .declare_anonymous_function(&tf.signature)
                .map_err(|e| format!("trampoline: {e}"))?;
            let mut ctx = m.make_context();
            ctx.func = tf;
            m.define_function(id, &mut ctx)
                .map_err(|e| format!("trampoline: {e}"))?;
            trampolines.push((sig.clone(), id));
        }
        // One batch: nothing merges into it later.
        m.flush_last().map_err(|e| format!("{e:#}"))?;
        m.finalize_definitions().map_err(|e| format!("{e:#}"))?;
        let mut exn_sites = exn::Registration::default();
        for (id, sites) in pending.lock().unwrap().iter() {
            let base = m.get_finalized_function(*id) as usize;
            exn::register(&mut exn_sites, base, sites);
        }
        Ok(Harness {
            module: Some(m),
            ids: ids.into_iter().collect(),
            trampolines,
            exn_sites,
        })
    }

    /// The module (merge map, statistics).
    pub fn module(&self) -> &MergeModule<JITModule> {
        self.module.as_ref().expect("live")
    }

    /// Statistics of the compile.
    pub fn stats(&self) -> &Stats {
        self.module().stats()
    }

    /// The code pointer of `name`.
    pub fn pointer(&self, name: &str) -> Option<*const u8> {
        Some(self.module().get_finalized_function(*self.ids.get(name)?))
    }

    /// Call `name` through its signature's trampoline with arguments and results in 16-byte
    /// slots.
    ///
    /// # Safety
    /// `buf` must hold at least max(params, returns, 1) slots, filled per `sig`, and `sig` must
    /// be the function's signature.
    pub unsafe fn call_raw(
        &self,
        name: &str,
        sig: &ir::Signature,
        buf: &mut [u128],
    ) -> Result<(), String> {
        let f = self
            .pointer(name)
            .ok_or_else(|| format!("no function %{name}"))?;
        let t = self
            .trampolines
            .iter()
            .find(|(s, _)| s == sig)
            .map(|(_, id)| self.module().get_finalized_function(*id))
            .ok_or_else(|| format!("no trampoline for the signature of %{name}"))?;
        let tramp: extern "C" fn(*const u8, *mut u128) = unsafe { std::mem::transmute(t) };
        tramp(f, buf.as_mut_ptr());
        Ok(())
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The sites name addresses in this module's code: unregister them first.
        drop(std::mem::take(&mut self.exn_sites));
        if let Some(m) = self.module.take() {
            // SAFETY: no pointer into the module outlives the harness.
            unsafe { m.free_memory() };
        }
    }
}

/// A trampoline `(fn_ptr, buf)` that loads arguments from 16-byte slots of `buf`, calls
/// `fn_ptr` with `sig` and stores the results back into the slots.
fn build_trampoline(
    sig: &ir::Signature,
    isa: &dyn TargetIsa,
    fctx: &mut FunctionBuilderContext,
) -> ir::Function {
    let ptr = isa.pointer_type();
    let mut tsig = ir::Signature::new(isa.default_call_conv());
    tsig.params.push(ir::AbiParam::new(ptr));
    tsig.params.push(ir::AbiParam::new(ptr));
    let mut func = ir::Function::with_name_signature(ir::UserFuncName::default(), tsig);
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (fp, buf) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let flags = ir::MemFlagsData::trusted();
    let args: Vec<ir::Value> = sig
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| b.ins().load(p.value_type, flags, buf, (i * 16) as i32))
        .collect();
    let sr = b.import_signature(sig.clone());
    let call = b.ins().call_indirect(sr, fp, &args);
    let results = b.inst_results(call).to_vec();
    for (i, v) in results.into_iter().enumerate() {
        b.ins().store(flags, v, buf, (i * 16) as i32);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    func
}

/// Compile `funcs` (by name) into a plain `JITModule` for `isa` and finalize it: what a
/// program without Mergelift pays. Returns the machine-code bytes.
pub fn plain_jit(isa: OwnedTargetIsa, funcs: &[ir::Function]) -> Result<usize, String> {
    let mut jit = JITModule::new(jit_builder(isa, &[]));
    let funcs = funcs.iter().map(|f| (Linkage::Export, f.clone())).collect();
    let declared = jit_driver::declare_by_name(&mut jit, funcs).map_err(|e| format!("{e:#}"))?;
    let mut ctx = cranelift_codegen::Context::new();
    let mut bytes = 0;
    for (_, id, f) in declared {
        ctx.clear();
        ctx.func = f;
        jit.define_function(id, &mut ctx)
            .map_err(|e| format!("{e:#}"))?;
        bytes += ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
    }
    jit.finalize_definitions().map_err(|e| format!("{e:#}"))?;
    // SAFETY: nothing was called; no pointer escapes.
    unsafe { jit.free_memory() };
    Ok(bytes)
}

/// The same through `MergeModule<JITModule>` with `config`. Returns the code bytes and the
/// module's statistics.
pub fn merge_jit(
    isa: OwnedTargetIsa,
    funcs: &[ir::Function],
    config: MergeConfig,
) -> Result<(usize, Stats), String> {
    let jit = JITModule::new(jit_builder(isa, &[]));
    let mut m = MergeModule::with_config(jit, config);
    let funcs = funcs.iter().map(|f| (Linkage::Export, f.clone())).collect();
    define_by_name(&mut m, funcs).map_err(|e| format!("{e:#}"))?;
    m.finalize_definitions().map_err(|e| format!("{e:#}"))?;
    let r = (m.total_code_bytes(), m.stats().clone());
    // SAFETY: nothing was called; no pointer escapes.
    unsafe { m.free_memory() };
    Ok(r)
}

/// A function of about 25 instructions, `(i64) -> i64`, unlike any other: its operations
/// and its constant are drawn from `k` (equal `k`, equal functions). The function a REPL step
/// defines in `benches/module.rs` and `tools/examples/jit_patterns.rs`.
pub fn lazy_step_function(
    cfg: cranelift_codegen::isa::TargetFrontendConfig,
    k: i64,
) -> ir::Function {
    lazy_near_function(cfg, k, k)
}

/// `lazy_step_function`'s function of shape `shape` (its operations: one of five at each of
/// eight steps, from the digits of `shape` in base 5, so 390,625 shapes) with the constant
/// `k`: functions of one shape differ in their constant only, as `merge-similar` merges them.
pub fn lazy_near_function(
    cfg: cranelift_codegen::isa::TargetFrontendConfig,
    shape: i64,
    k: i64,
) -> ir::Function {
    use cranelift_codegen::ir::types::I64;
    let mut sig = ir::Signature::new(cfg.default_call_conv);
    sig.params.push(ir::AbiParam::new(I64));
    sig.returns.push(ir::AbiParam::new(I64));
    let mut f = ir::Function::with_name_signature(ir::UserFuncName::default(), sig);
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut f, &mut fctx);
    let e = b.create_block();
    b.append_block_params_for_function_params(e);
    b.switch_to_block(e);
    let x = b.block_params(e)[0];
    let kk = b.ins().iconst(I64, k);
    let mut v = x;
    let mut digits = shape.unsigned_abs();
    for j in 0..8 {
        let m = match digits % 5 {
            0 => b.ins().imul(v, kk),
            1 => b.ins().iadd(v, kk),
            2 => b.ins().isub(v, kk),
            3 => b.ins().band(v, kk),
            _ => b.ins().bor(v, kk),
        };
        digits /= 5;
        let s = b.ins().iadd_imm_s(m, j);
        v = b.ins().bxor(s, x);
    }
    b.ins().return_(&[v]);
    b.seal_all_blocks();
    b.finalize(cfg);
    f
}

/// CPU time of this thread in µs (steadier than wall time on a busy machine: time spent
/// waiting for a core is left out), on Linux; 0 elsewhere. For the probes in `tools/examples/`.
pub fn thread_cpu_us() -> f64 {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `ts` is a valid out-parameter of the C library's `clock_gettime`.
        unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.sec as f64 * 1e6 + ts.nsec as f64 / 1e3
    }
    #[cfg(not(target_os = "linux"))]
    0.0
}
