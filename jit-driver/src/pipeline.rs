//! `Pipeline`: functions by name in, function pointers by name out: a thin layer over
//! [`MergeModule`]`<JITModule>` for programs that name functions rather than declare them
//! (`.clif` files, tests). Programs that already speak `cranelift_module::Module` use
//! `MergeModule` directly.
//!
//! ```
//! use cranelift_codegen::ir::{types, AbiParam, Function, InstBuilder, Signature, UserFuncName};
//! use cranelift_codegen::isa::CallConv;
//! use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
//! use cranelift_module::Linkage;
//! use jit_driver::{Pipeline, PipelineOptions};
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
//! p.add_function(Linkage::Export, make("add1"));
//! p.add_function(Linkage::Export, make("inc"));
//! let m = p.compile().unwrap();
//! let add1: extern "C" fn(i64) -> i64 = unsafe { m.get("add1").unwrap() };
//! assert_eq!(add1(41), 42);
//! assert_eq!(m.module().merged_into(m.id("inc").unwrap()), m.id("add1"));
//! ```

use crate::error::Error;
use crate::isa::{host_isa, OptLevel};
use crate::jit_builder;
use crate::link::define_by_name;
use crate::module::{MergeConfig, MergeModule};
use cranelift_codegen::ir;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage};
use midend::hash::HashMap;
use midend::Stats;

/// Options of the pipeline.
#[derive(Clone, Debug, Default)]
pub struct PipelineOptions {
    /// Passes, threads and address policy.
    pub config: MergeConfig,
    /// Cranelift optimization level of the host ISA.
    pub opt_level: OptLevel,
}

/// Functions by name, compiled together: add functions, then compile.
pub struct Pipeline {
    opts: PipelineOptions,
    funcs: Vec<(Linkage, ir::Function)>,
    /// Host symbols as addresses (kept as integers so the pipeline is `Send`).
    host_symbols: Vec<(String, usize)>,
}

/// The result of [`Pipeline::compile`]: function pointers by name.
pub struct JitModule {
    module: Option<MergeModule<JITModule>>,
    ids: HashMap<String, FuncId>,
}

impl JitModule {
    /// The module (merge map, statistics, code bytes per id).
    pub fn module(&self) -> &MergeModule<JITModule> {
        self.module.as_ref().expect("live")
    }

    /// The id of a function by name.
    pub fn id(&self, name: &str) -> Option<FuncId> {
        self.ids.get(name).copied()
    }

    /// A typed function pointer by name (a merged function gives code that behaves as its own).
    ///
    /// # Safety
    /// `F` must be an `extern "C"`-compatible function pointer type matching the function's
    /// signature and calling convention.
    pub unsafe fn get<F: Copy>(&self, name: &str) -> Option<F> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*const u8>());
        let p = self.pointer(name)?;
        Some(unsafe { std::mem::transmute_copy::<*const u8, F>(&p) })
    }

    /// The code pointer of a function by name.
    pub fn pointer(&self, name: &str) -> Option<*const u8> {
        Some(self.module().get_finalized_function(self.id(name)?))
    }

    /// Statistics of the compile.
    pub fn stats(&self) -> &Stats {
        self.module().stats()
    }

    /// Machine-code bytes of everything compiled.
    pub fn total_code_bytes(&self) -> usize {
        self.module().total_code_bytes()
    }
}

impl Drop for JitModule {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the pointers handed out borrow `self`; none outlives it.
            unsafe { m.free_memory() };
        }
    }
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new(opts: PipelineOptions) -> Self {
        Pipeline {
            opts,
            funcs: Vec::new(),
            host_symbols: Vec::new(),
        }
    }

    /// Add a function under its own name (`func.name`: a test-case name such as `%fib`, or a
    /// user name `uN:M`); other functions call it by that name.
    pub fn add_function(&mut self, linkage: Linkage, func: ir::Function) {
        self.funcs.push((linkage, func));
    }

    /// Make a host function or data address available to the compiled code under `name`.
    pub fn register_symbol(&mut self, name: &str, ptr: *const u8) {
        self.host_symbols.push((name.to_string(), ptr as usize));
    }

    /// Merge, value-number, compile and finalize everything added.
    pub fn compile(self) -> Result<JitModule, Error> {
        let isa = host_isa(self.opts.opt_level)?;
        let symbols: Vec<(String, *const u8)> = self
            .host_symbols
            .iter()
            .map(|(n, p)| (n.clone(), *p as *const u8))
            .collect();
        let jit = JITModule::new(jit_builder(isa, &symbols));
        let mut m = MergeModule::with_config(jit, self.opts.config);
        let ids = define_by_name(&mut m, self.funcs)?;
        // One batch, and no other follows: what no pass could merge is not lifted.
        m.flush_last()?;
        m.finalize_definitions()?;
        Ok(JitModule {
            module: Some(m),
            ids: ids.into_iter().collect(),
        })
    }
}
