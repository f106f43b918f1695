//! Mergelift: a mid-end optimizer for Cranelift. It merges functions that are equal (LLVM's
//! MergeFunctions design) or equal up to their constants and callees (one shared body with
//! extra parameters), so that a template-heavy program compiles less code, in less time.
//!
//! # The door: [`MergeModule`]
//!
//! A program that already speaks `cranelift_module::Module` changes one line:
//!
//! ```
//! use cranelift_codegen::ir::{types, AbiParam, InstBuilder};
//! use cranelift_codegen::settings;
//! use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
//! use cranelift_jit::{JITBuilder, JITModule};
//! use cranelift_module::{default_libcall_names, Linkage, Module};
//!
//! let isa = cranelift_native::builder()
//!     .unwrap()
//!     .finish(settings::Flags::new(settings::builder()))
//!     .unwrap();
//! let jit = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
//! // Before: `let mut m = jit;`
//! let mut m = mergelift::MergeModule::new(jit);
//!
//! // Unchanged cranelift-module code: two identical functions.
//! let mut sig = m.make_signature();
//! sig.params.push(AbiParam::new(types::I64));
//! sig.returns.push(AbiParam::new(types::I64));
//! let mut fctx = FunctionBuilderContext::new();
//! let mut ids = Vec::new();
//! for name in ["add1", "inc"] {
//!     let id = m.declare_function(name, Linkage::Export, &sig).unwrap();
//!     let mut ctx = m.make_context();
//!     ctx.func.signature = sig.clone();
//!     let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
//!     let block = b.create_block();
//!     b.append_block_params_for_function_params(block);
//!     b.switch_to_block(block);
//!     let x = b.block_params(block)[0];
//!     let y = b.ins().iadd_imm_s(x, 1);
//!     b.ins().return_(&[y]);
//!     b.seal_all_blocks();
//!     b.finalize(m.target_config());
//!     m.define_function(id, &mut ctx).unwrap();
//!     m.clear_context(&mut ctx);
//!     ids.push(id);
//! }
//! m.finalize_definitions().unwrap();
//!
//! // `inc` merged into `add1`: no code of its own, and it behaves as its own.
//! assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
//! let inc: extern "C" fn(i64) -> i64 =
//!     unsafe { std::mem::transmute(m.get_finalized_function(ids[1])) };
//! assert_eq!(inc(41), 42);
//! ```
//!
//! # Migrating from `JITModule` or `ObjectModule`
//!
//! - **Wrap the module**: `MergeModule::new(module)` or `MergeModule::with_config(module,
//!   config)`. The ISA, the `JITBuilder` (symbols, `symbol_lookup_fn`, memory provider,
//!   libcall names) and the `ObjectBuilder` stay yours. Ids are the inner module's own.
//! - **Compiling is deferred.** `define_function` keeps the function (it takes `ctx.func`,
//!   leaving an empty function and no compiled code in `ctx`); the passes run and the code
//!   is compiled at `finalize_definitions` (JIT) or `finish` (object file), or at
//!   [`MergeModule::flush`] for another inner module. Use [`MergeModule::on_compiled`] where
//!   you read `ctx.compiled_code()` after `define_function` (disassembly, unwind info).
//!   Defining an import, defining twice and a body whose signature differs from its
//!   declaration are still errors at once.
//! - **Errors**: what the inner module reports at declare and define time passes through
//!   typed. An error of a function compiled at finalize is a `ModuleError::Backend` holding
//!   a [`FunctionError`] (`downcast_ref`) with the function's name and the inner module's
//!   typed error.
//! - **Batches**: functions defined after a `finalize_definitions` are merged with each other
//!   and against everything compiled before; one equal to compiled code gets that code and is
//!   not compiled at all. Calls from new code into old code work as before.
//! - **Object files**: `finish` returns a `Result` (the compiles happen there); a merged
//!   function is an alias symbol at its survivor's code.
//! - **What the host sees**: by default ([`AddressPolicy::Shared`]) a merged function the
//!   host can see may share its survivor's address; [`AddressPolicy::Distinct`] keeps a thunk
//!   with an address of its own for every function visible outside the module. Addresses
//!   taken in IR always stay distinct, also when a later batch takes the address of a
//!   function an earlier batch merged away: the later flush gives it a thunk to its survivor
//!   (stats counter `late_thunks`). An address stored in data (`define_data`) of a function
//!   merged away before is its survivor's. A *local* function folded by
//!   `merge-similar` has no code left: declare functions the host calls as `Export`.
//! - **Configuration** ([`MergeConfig`]): the passes as values ([`PassKind`]; default
//!   `merge`, `merge-similar`), threads (default: none), the address policy, whether to
//!   verify input with Cranelift's verifier before the passes.
//! - **Reports**: [`MergeModule::merged_into`], [`MergeModule::merges`],
//!   [`MergeModule::stats`], [`MergeModule::code_bytes`].
//! - **Memory**: besides the inner module's, a compiled function costs about 1.2 KB (its
//!   name, signature and the fingerprint later batches merge by); its LIR body is freed once
//!   it is compiled or merged away. [`MergeConfig::keep_lir`] keeps the bodies for
//!   [`MergeModule::lir`] to show.
//!
//! # What is underneath
//!
//! [`midend`] is the optimizer (LIR, the passes, no dependency on Cranelift's code
//! generator); [`jit_driver`] is the bridge (lift to LIR, lower back, the module wrapper).
//! [`Pipeline`] compiles functions named as in a `.clif` file; the `mergelift` command lives
//! in the crate `mergelift-cli`.

#![deny(missing_docs)]

pub use jit_driver;
pub use midend;

pub use jit_driver::{
    define_by_name, host_isa, AddressPolicy, FunctionError, MergeConfig, MergeModule, OptLevel,
    Threads,
};
#[cfg(feature = "jit")]
pub use jit_driver::{JitModule, Pipeline, PipelineOptions};
pub use midend::lir;
pub use midend::lir::MergeKind;
pub use midend::{PassKind, Stats};
