//! The library API a JIT runtime uses: hand over Cranelift functions, get back function
//! pointers and statistics.
//!
//! ```
//! use cranelift_codegen::ir::{types, AbiParam, Function, InstBuilder, Signature, UserFuncName};
//! use cranelift_codegen::isa::CallConv;
//! use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
//! use jit_driver::{Pipeline, PipelineOptions};
//! use midend::lir::Linkage;
//!
//! // Two identical functions: `add1` and `inc`.
//! let make = |name: &str| {
//!     let mut sig = Signature::new(CallConv::SystemV);
//!     sig.params.push(AbiParam::new(types::I64));
//!     sig.returns.push(AbiParam::new(types::I64));
//!     let mut f = Function::with_name_signature(UserFuncName::testcase(name), sig);
//!     let mut ctx = FunctionBuilderContext::new();
//!     let mut b = FunctionBuilder::new(&mut f, &mut ctx);
//!     let blk = b.create_block();
//!     b.append_block_params_for_function_params(blk);
//!     b.switch_to_block(blk);
//!     let x = b.block_params(blk)[0];
//!     let y = b.ins().iadd_imm_s(x, 1);
//!     b.ins().return_(&[y]);
//!     b.seal_all_blocks();
//!     b.finalize(cranelift_codegen::isa::TargetFrontendConfig {
//!         default_call_conv: CallConv::SystemV,
//!         pointer_width: target_lexicon::PointerWidth::U64,
//!         page_size_align_log2: 12,
//!     });
//!     f
//! };
//! let mut p = Pipeline::new(PipelineOptions::default());
//! p.add_function(Linkage::Export, make("add1")).unwrap();
//! p.add_function(Linkage::Export, make("inc")).unwrap();
//! let m = p.compile().unwrap();
//! let add1: extern "C" fn(i64) -> i64 = unsafe { m.get("add1").unwrap() };
//! assert_eq!(add1(41), 42);
//! ```

use crate::jit::{compile_module, host_isa, CompiledModule, OptLevel};
use crate::lift::{lift_function, mark_address_taken};
use crate::Error;
use cranelift_codegen::ir;
use midend::lir::{self, Linkage};
use midend::{PassManager, Stats};
use std::time::Instant;

/// Options of the pipeline.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Comma list of passes (`merge,lvn` by default; `none` = lift and lower only).
    pub passes: String,
    /// Cranelift optimization level of the final compile.
    pub opt_level: OptLevel,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            passes: "merge,lvn".into(),
            opt_level: OptLevel::None,
        }
    }
}

/// Lift Cranelift functions into one LIR module (exported, address-significant where taken).
pub fn lift_functions<'a>(
    funcs: impl IntoIterator<Item = &'a ir::Function>,
    stats: &mut Stats,
) -> Result<lir::Module, Error> {
    let t = Instant::now();
    let mut m = lir::Module::new();
    for f in funcs {
        lift_function(&mut m, f, Linkage::Export)?;
    }
    mark_address_taken(&mut m);
    stats.add_time("lift", t.elapsed());
    Ok(m)
}

/// A JIT pipeline: add functions, then compile.
pub struct Pipeline {
    opts: PipelineOptions,
    module: lir::Module,
    host_symbols: Vec<(String, *const u8)>,
    stats: Stats,
}

/// The result of `Pipeline::compile`.
pub struct JitModule {
    compiled: CompiledModule,
    pub stats: Stats,
}

impl JitModule {
    /// A typed function pointer by name (merged names give the survivor's code).
    ///
    /// # Safety
    /// `F` must be an `extern "C"`-compatible function pointer type matching the function's
    /// signature and calling convention.
    pub unsafe fn get<F: Copy>(&self, name: &str) -> Option<F> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*const u8>());
        let p = self.compiled.pointer(name)?;
        Some(unsafe { std::mem::transmute_copy::<*const u8, F>(&p) })
    }
    /// The raw code pointer of a function.
    pub fn pointer(&self, name: &str) -> Option<*const u8> {
        self.compiled.pointer(name)
    }
    /// Machine-code bytes per compiled function.
    pub fn code_bytes(&self) -> &[(String, usize)] {
        &self.compiled.code_bytes
    }
    pub fn total_code_bytes(&self) -> usize {
        self.compiled.total_code_bytes()
    }
}

impl Pipeline {
    pub fn new(opts: PipelineOptions) -> Self {
        Pipeline {
            opts,
            module: lir::Module::new(),
            host_symbols: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// Add a function under its own name with the given linkage.
    pub fn add_function(&mut self, linkage: Linkage, func: ir::Function) -> Result<(), Error> {
        let t = Instant::now();
        lift_function(&mut self.module, &func, linkage)?;
        self.stats.add_time("lift", t.elapsed());
        Ok(())
    }

    /// Make a host function or data address available to the compiled code under `name`.
    pub fn register_symbol(&mut self, name: &str, ptr: *const u8) {
        self.host_symbols.push((name.to_string(), ptr));
    }

    /// The lifted module (for inspection).
    pub fn module(&self) -> &lir::Module {
        &self.module
    }

    /// Run the passes, lower, JIT-compile and finalize.
    pub fn compile(mut self) -> Result<JitModule, Error> {
        mark_address_taken(&mut self.module);
        let mut stats = self.stats;
        stats.add("functions_in", self.module.live_functions().count() as u64);
        stats.add("lir_insts_before", self.module.inst_count() as u64);
        let mut pm = PassManager::from_names(&self.opts.passes)?;
        pm.run(&mut self.module, &mut stats)?;
        stats.add("functions_out", self.module.live_functions().count() as u64);
        stats.add("lir_insts_after", self.module.inst_count() as u64);
        let isa = host_isa(self.opts.opt_level)?;
        let compiled = compile_module(&self.module, isa, &[], &self.host_symbols)?;
        stats.add_time("lower", compiled.lower_time);
        stats.add_time("compile", compiled.compile_time);
        stats.add("code_bytes", compiled.total_code_bytes() as u64);
        Ok(JitModule { compiled, stats })
    }
}
